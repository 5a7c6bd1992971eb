# bash completion for allocsim and allocsim-replay.
#
# Nothing here is a copy of what the program knows: subcommands come from
# `allocsim --help`, each command's options from `allocsim CMD --help`, policies and knobs
# from `allocsim policies -f tsv`, generators from `allocsim gen --help`, so a new option
# or knob completes without an edit here. Answers are cached per shell, per program.
#
# -p SPEC completes a policy name, then "name,knob=" (or a knob of torch when the spec
# starts with a knob), then the words a bool or enum knob accepts. The word is taken from
# COMP_LINE split at blanks only, so '=' and ':' in specs do not split it.

# Runs the program the user typed (COMP_WORDS[0]) once per question and caches stdout.
_allocsim_ask()
{
    local prog=$1 key=$2
    shift 2
    local var="_allocsim_cache_$(printf '%s' "$prog $key" | cksum | cut -d' ' -f1)"
    if [[ -z ${!var+x} ]]; then
        printf -v "$var" '%s' "$("$prog" "$@" 2>/dev/null)"
    fi
    printf '%s\n' "${!var}"
}

# The options a help text defines: the leading -x/--long words of lines whose first
# non-blank is '-' within 8 columns (descriptions are deeper), and every -x/--long word
# of its usage lines.
_allocsim_help_options()
{
    awk '
        /^[[:space:]]*usage:/ || /^[[:space:]]+allocsim/ {
            n = split($0, w, /[][ |()]+/)
            for (i = 1; i <= n; i++) if (w[i] ~ /^--?[A-Za-z]/) print w[i]
            next
        }
        match($0, /^ *-/) && RLENGTH <= 9 {
            s = $0; sub(/^ +/, "", s)
            while (match(s, /^--?[A-Za-z0-9][A-Za-z0-9-]*/)) {
                print substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1)
                if (s ~ /^, /) s = substr(s, 3); else break
            }
        }' | sort -u
}

_allocsim_commands()
{
    _allocsim_ask "$1" commands --help |
        awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }'
}

_allocsim_spec()
{
    local prog=$1 cur=$2 tsv
    tsv=$(_allocsim_ask "$prog" policies policies -f tsv)
    local policies
    policies=$(printf '%s\n' "$tsv" | awk -F'\t' 'NR > 1 { print $1 }' | sort -u)
    if [[ $cur != *,* && $cur != *=* && $cur != *:* ]]; then
        COMPREPLY=($(compgen -W "$policies" -- "$cur"))
        local k
        for k in $(printf '%s\n' "$tsv" | awk -F'\t' '$1 == "torch" { print $2 "="; if ($3 != "") print $3 ":" }'); do
            [[ $k == "$cur"* ]] && COMPREPLY+=("$k")
        done
        compopt -o nospace 2>/dev/null
        return
    fi
    local policy=torch head=${cur%,*} item=${cur##*,}
    [[ $cur != *,* ]] && head= item=$cur
    local first=${cur%%,*}
    printf '%s\n' "$policies" | grep -qxF -- "$first" && policy=$first
    [[ -n $head ]] && head+=,
    if [[ $item == *[=:]* ]]; then
        local key=${item%%[=:]*} sep range
        sep=${item:${#key}:1}
        range=$(printf '%s\n' "$tsv" | awk -F'\t' -v p="$policy" -v k="$key" \
            '$1 == p && ($2 == k || $3 == k) { print $7; exit }')
        [[ $range == *'|'* && $range != *'['* ]] || return
        local w
        for w in ${range//|/ }; do
            [[ $head$key$sep$w == "$cur"* ]] && COMPREPLY+=("$head$key$sep$w")
        done
        return
    fi
    local k
    for k in $(printf '%s\n' "$tsv" | awk -F'\t' -v p="$policy" \
        '$1 == p && $2 != "" { print $2 "="; if ($3 != "") print $3 ":" }'); do
        [[ $head$k == "$cur"* ]] && COMPREPLY+=("$head$k")
    done
    compopt -o nospace 2>/dev/null
}

# The card presets (kind "card") or the outside-memory presets ("outside"): the first
# column of the table of that name in `allocsim tune --cards`.
_allocsim_cards()
{
    _allocsim_ask "$1" cards tune --cards |
        awk -v k="$2" '$1 == k { on = 1; next } on && NF == 0 { on = 0 } on { print $1 }'
}

# Values of options that take a word from a fixed set.
_allocsim_value()
{
    local prog=$1 cmd=$2 opt=$3 cur=$4
    case $cmd:$opt in
    run:-f | run:--format) COMPREPLY=($(compgen -W "table csv json jsonl" -- "$cur")) ;;
    replay:-f | replay:--format) COMPREPLY=($(compgen -W "table csv json" -- "$cur")) ;;
    info:-f | info:--format | check:-f | check:--format) COMPREPLY=($(compgen -W "text json" -- "$cur")) ;;
    mincap:-f | mincap:--format) COMPREPLY=($(compgen -W "table json" -- "$cur")) ;;
    compare:-f) COMPREPLY=($(compgen -W "table csv" -- "$cur")) ;;
    policies:-f | policies:--format) COMPREPLY=($(compgen -W "table tsv" -- "$cur")) ;;
    tune:-c | tune:--device) COMPREPLY=($(compgen -W "$(_allocsim_cards "$prog" card)" -- "$cur")) ;;
    tune:--outside) COMPREPLY=($(compgen -W "$(_allocsim_cards "$prog" outside)" -- "$cur")) ;;
    tune:-f | tune:--format) COMPREPLY=($(compgen -W "table json jsonl" -- "$cur")) ;;
    replay:-c | replay:--capacity) COMPREPLY=($(compgen -W "none" -- "$cur")) ;;
    *:-c | *:--capacity) COMPREPLY=($(compgen -W "none $(_allocsim_cards "$prog" card)" -- "$cur")) ;;
    plot:--x) COMPREPLY=($(compgen -W "event alloc time" -- "$cur")) ;;
    plot:--when) COMPREPLY=($(compgen -W "peak oom" -- "$cur")) ;;
    plot:--layout) COMPREPLY=($(compgen -W "bytes wrap fraction" -- "$cur")) ;;
    replay:--release-threshold) COMPREPLY=($(compgen -W "max 0" -- "$cur")) ;;
    *) return 1 ;;
    esac
}

# Options that take a value (the next word is not a trace).
_allocsim_takes_value()
{
    case $1 in
    -p | --policy | -c | --capacity | -f | --format | -o | --output | -j | --threads | \
        --timeline | --timeline-every | --segments | --segment-map | --sites | --snapshot-out | \
        --sweep | --csv | \
        --batch | --step | --runs | --every | --x | --when | --run | --layout | --title | \
        --size | --keep | --scripts | --repeat | --latency | --calls | --device | --release-threshold | \
        --pool | --outside | --curves | --top | --shard | --memory) return 0 ;;
    esac
    return 1
}

_allocsim()
{
    local prog=${COMP_WORDS[0]} line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -ra words <<<"$line"
    [[ $line == *[[:space:]] ]] && words+=("")
    local cur=${words[${#words[@]} - 1]} prev=
    ((${#words[@]} > 1)) && prev=${words[${#words[@]} - 2]}
    COMPREPLY=()

    local cmd=run i=1 commands
    commands=$(_allocsim_commands "$prog")
    if [[ ${prog##*/} == allocsim-replay ]]; then
        cmd=replay
    elif ((${#words[@]} == 2)) && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        compopt -o default 2>/dev/null
        return
    elif printf '%s\n' "$commands" | grep -qxF -- "${words[1]}"; then
        cmd=${words[1]}
        i=2
    fi

    # Positional words before the current one (a KIND comes first).
    local npos=0 j
    for ((j = i; j < ${#words[@]} - 1; j++)); do
        if _allocsim_takes_value "${words[j]}"; then
            ((j++))
        elif [[ ${words[j]} != -* ]]; then
            ((npos++))
        fi
    done

    if [[ $prev == -p || $prev == --policy ]]; then
        _allocsim_spec "$prog" "$cur"
    elif _allocsim_value "$prog" "$cmd" "$prev" "$cur"; then
        :
    elif [[ $cur == -* ]]; then
        local help
        if [[ $cmd == replay ]]; then
            help=$(_allocsim_ask "$prog" help --help)
        else
            help=$(_allocsim_ask "$prog" "help-$cmd" "$cmd" --help)
        fi
        local top=
        [[ $cmd != replay ]] && ((i == 1)) && top="--version -V"
        COMPREPLY=($(compgen -W "$( (printf '%s\n--help\n' "$help"; printf '%s\n' $top) |
            _allocsim_help_options) $top --help" -- "$cur"))
    elif [[ $cmd == policies ]]; then
        COMPREPLY=($(compgen -W "$(_allocsim_ask "$prog" policies policies -f tsv |
            awk -F'\t' 'NR > 1 { print $1 }' | sort -u)" -- "$cur"))
    elif ((npos == 0)) && [[ $cmd == plot ]]; then
        COMPREPLY=($(compgen -W "$(_allocsim_ask "$prog" help-plot plot --help |
            awk '/^KIND/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')" -- "$cur"))
    elif ((npos == 0)) && [[ $cmd == gen ]]; then
        COMPREPLY=($(compgen -W "$(_allocsim_ask "$prog" help-gen gen --help |
            awk '/^generators/ { on = 1; next } on && /^  [a-z]/ { print $1 }')" -- "$cur"))
    else
        compopt -o default 2>/dev/null # traces and output files
        return
    fi
    # Readline replaces only the part of the word after its last '=' or ':'.
    local pre=${cur%"${cur##*[=:]}"}
    if [[ -n $pre ]]; then
        for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]=${COMPREPLY[i]#"$pre"}; done
    fi
}

complete -F _allocsim allocsim allocsim-replay
