#!/usr/bin/env python3
"""startup_ld.py - writes mk/startup.ld, the static allocsim's start-up text order.

A static allocsim's code is file-backed: each first touch of a 64 KiB window of it is a
page fault (about 5 us on the development VM, sim/README.md, Performance), and the code a
short command runs (glibc's start-up, ifunc resolvers, malloc, stdio, zstd's decoder, and
our own functions) lies all over its 2 MiB of text. mk/startup.ld gathers it into one
output section in front of .text (INSERT BEFORE .text, so the default script stays as it
is): the library archive members that hold an executed function, then the executed
functions of our objects by section name (the release objects are compiled with
-ffunction-sections, Makefile, so each function is a section .text.NAME; the link-time
optimised ones are named as the LTO partitions name them, NAME.lto_priv.N and the like).
A member or a section it names that a link does not have matches nothing, so a stale list
costs only locality, never correctness.

usage (from the repository root, after `make build/allocsim`):
  python3 mk/startup_ld.py > mk/startup.ld
It links build/allocsim again, with the Makefile's own command and a link map, runs the
commands below under callgrind, and lists, in the order callgrind reports them, what holds
a function any of them executed. Valgrind shows its own CPU, not the machine's, so the
string functions glibc picks at run time (ifunc) are taken in every variant a current
x86-64 CPU may pick (avx2, evex, avx512); it offers no vDSO, so the members that glibc's
vDSO set-up runs (dl-object, dl-lookup, ...) are added by name, and signal.o, which
callgrind does not name, strstr-avx512.o, which has no variant valgrind picks, and zstd's
assembly decoder loop (huf_decompress_amd64.o), whose functions have no symbol size.
"""
import os, re, subprocess, sys, tempfile, bisect

# In this order, each command's code after the ones before it: the snapshot's run, the
# longest, runs one stretch from the start.
COMMANDS = [
    ["--version"],
    ["run", "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst"],
    ["run", "tests/data/native_v1.zst"],
    ["run", "-q", "-p", "torch", "traces/samples/handwritten.txt"],
    ["info", "tests/data/native_v1.zst"],
]
EXTRA = [("libc.a", m) for m in ["dl-object.o", "dl-lookup.o", "dl-lookup-direct.o",
                                  "dl-setup_hash.o", "dl-misc.o", "pthread_mutex_lock.o",
                                  "pthread_mutex_unlock.o", "dl-minimal-malloc.o", "signal.o",
                                  "strstr-avx512.o"]] + [("libzstd.a", "huf_decompress_amd64.o")]


def link_with_map(tmp):
    """build/allocsim linked again by the Makefile's command, with a map and without
    mk/startup.ld, into tmp."""
    cmd = subprocess.run(["make", "-s", "-n", "-W", "mk/startup.ld", "build/allocsim", "V=1"],
                         capture_output=True, text=True, check=True).stdout
    cmd = cmd.replace("\\\n", " ")
    line = next(l for l in cmd.splitlines() if "-static-pie" in l)
    exe, mp = os.path.join(tmp, "allocsim"), os.path.join(tmp, "allocsim.map")
    line = line.replace("-o build/allocsim", "-Wl,-Map=%s -o %s" % (mp, exe), 1)
    line = line.replace("-Wl,-T,mk/startup.ld", "", 1)  # the file this writes, maybe empty
    subprocess.run(line, shell=True, check=True)
    return exe, mp


def sections(mp):
    """The map's text input sections: (address, size, file, section name), by address."""
    secs, lines = [], open(mp).read().splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"^ (\.text\S*)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)$", l)
        if m:
            secs.append((int(m[2], 16), int(m[3], 16), m[4], m[1]))
            continue
        m = re.match(r"^ (\.text\S*)$", l)
        n = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)$", lines[i + 1]) \
            if m and i + 1 < len(lines) else None
        if n:
            secs.append((int(n[1], 16), int(n[2], 16), n[3], m[1]))
    return sorted(s for s in secs if s[1] > 0)


def executed(exe, tmp):
    """Names of the executed functions."""
    out = os.path.join(tmp, "cg.out")
    names = []
    for c in COMMANDS:
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, exe] + c,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ann = subprocess.run(["callgrind_annotate", "--threshold=100", out],
                             capture_output=True, text=True).stdout
        names += re.findall(r"^\s*[0-9,]+ .*?:(\S+) \[", ann, re.M)
    return names


def variants(lib, mem, archive):
    """Every variant of an ifunc'd string member a current CPU may pick: memmove-avx-...o
    gives memmove-avx-...o, memmove-evex-...o and memmove-avx512-...o (not the -rtm ones,
    for CPUs with TSX, nor no-vzeroupper)."""
    m = re.match(r"^([a-z_0-9]+)-(avx2|avx|evex|avx512)[-a-z0-9_]*\.o$", mem)
    if lib != "libc.a" or not m:
        return [mem]
    pat = re.compile(r"^%s-(avx2|avx|evex|avx512)[-a-z0-9_]*\.o$" % re.escape(m[1]))
    return [mem] + sorted(v for v in archive if pat.match(v) and v != mem and "-rtm" not in v
                          and "no-vzeroupper" not in v)


def main():
    libc = subprocess.run(["cc", "-print-file-name=libc.a"], capture_output=True,
                          text=True).stdout.strip()
    archive = subprocess.run(["ar", "t", libc], capture_output=True, text=True).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        exe, mp = link_with_map(tmp)
        secs = sections(mp)
        starts = [s[0] for s in secs]
        addr = {}
        for l in subprocess.run(["nm", exe], capture_output=True, text=True).stdout.splitlines():
            p = l.split()
            if len(p) == 3:
                addr.setdefault(p[2], int(p[0], 16))
        members, ours = [], ["*crt1.o(.text)"]  # _start (valgrind names it below main)
        for fn in executed(exe, tmp):
            a = addr.get(fn, -1)
            i = bisect.bisect_right(starts, a) - 1
            if i < 0 or not secs[i][0] <= a < secs[i][0] + secs[i][1]:
                continue
            f, sec = secs[i][2], secs[i][3]
            m = re.match(r".*/(lib[^/]+\.a)\((.+)\)$", f)
            if m:
                for v in variants(m[1], m[2], archive):
                    if (m[1], v) not in members:
                        members.append((m[1], v))
            elif sec.startswith(".text.") and sec != ".text.startup_libs":
                if "*(%s)" % sec not in ours:
                    ours.append("*(%s)" % sec)  # one of our functions (or main's .text.startup)
            elif re.search(r"/[a-z]*crt[^/]*\.o$", f):
                if "*%s(.text)" % os.path.basename(f) not in ours:
                    ours.append("*%s(.text)" % os.path.basename(f))  # _start, frame_dummy
        members += [e for e in EXTRA if e not in members]
    print("/* startup.ld - generated by mk/startup_ld.py (read it first): the library members")
    print(" * and our functions a short allocsim command executes, in one output section")
    print(" * before .text. */")
    print("SECTIONS\n{\n  .text.startup_libs :\n  {")
    # _fini, which exit runs, is crti.o's piece of .fini then crtn.o's, in that order; in the
    # default script .fini follows the 1.5 MiB of .text, a window of its own.
    print("    KEEP (*crti.o(.fini))\n    KEEP (*crtn.o(.fini))")
    for lib, mem in members:
        print("    *%s:%s(.text .text.*)" % (lib, mem))
    for o in ours:
        print("    %s" % o)
    print("  }\n}\nINSERT BEFORE .text;")


if __name__ == "__main__":
    sys.exit(main())
