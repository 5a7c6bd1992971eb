#!/usr/bin/env python3
"""docs.py [--check] [FILE.md ...] - the program outputs quoted in the documentation,
regenerated (`make docs`) or checked (`make test`, through tests/test_report.c).

A quoted output is a command in a marker comment, then a fenced block, then a closing
marker:

    <!-- docs: build/allocsim -p torch -c 9G tests/data/torch-2.11-h200/moe_like.pickle.zst -->
    ```
    $ build/allocsim -p torch -c 9G tests/data/torch-2.11-h200/moe_like.pickle.zst
    ...what it prints...
    ```
    <!-- /docs -->

The block is the command after `$ ` and its standard output. The command runs with
/bin/sh in the repository root and must exit 0; `build/allocsim` in it is replaced by
$AS_ALLOCSIM when that is set (the binary `make test` built). Without --check the blocks
are rewritten in place; with --check a block that differs from what the command prints
now is a failure, shown as a diff. Outputs are deterministic (allocsim's table has no
host timings); where one is not, a `<!-- docs-mask: REGEX -->` line right after the
command marker names what is masked: each match is replaced by `…` on both sides before
they are compared (the file keeps the text of the last `make docs`).

With no FILE, every tracked *.md file of the repository is scanned.
"""
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(
    r"^<!-- docs: (?P<cmd>.+?) -->\n"
    r"(?:<!-- docs-mask: (?P<mask>.+?) -->\n)?"
    r"(?P<fence>```[^\n]*)\n(?P<body>.*?)^```\n"
    r"<!-- /docs -->$",
    re.M | re.S)


def md_files():
    r = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        files = r.stdout.split()
    else:  # not a git checkout: every .md outside build/
        files = []
        for d, subs, names in os.walk(ROOT):
            subs[:] = [s for s in subs if s not in ("build", ".git")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names if n.endswith(".md")]
    return sorted(files)


def output_of(cmd):
    exe = cmd
    allocsim = os.environ.get("AS_ALLOCSIM")
    if allocsim:
        exe = re.sub(r"(?<![\w/.-])build/allocsim(?![\w-])", allocsim, cmd)
    r = subprocess.run(["/bin/sh", "-c", exe], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"`{cmd}` exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return f"$ {cmd}\n{r.stdout}"


def main():
    args = sys.argv[1:]
    check = "--check" in args
    files = [a for a in args if a != "--check"] or md_files()
    nblocks = bad = 0
    for rel in files:
        path = os.path.join(ROOT, rel)
        text = open(path, encoding="utf-8").read()
        out, pos, changed = [], 0, False
        for m in BLOCK.finditer(text):
            nblocks += 1
            try:
                now = output_of(m.group("cmd"))
            except RuntimeError as ex:
                print(f"docs: {rel}: {ex}")
                bad += 1
                continue
            if not now.endswith("\n"):
                now += "\n"
            old = m.group("body")
            mask = m.group("mask")
            a, b = old, now
            if mask:
                a, b = re.sub(mask, "…", old), re.sub(mask, "…", now)
            if a != b:
                if check:
                    bad += 1
                    line = text.count("\n", 0, m.start()) + 1
                    print(f"docs: {rel}:{line}: the quoted output of `{m.group('cmd')}` is stale "
                          "(run make docs):")
                    sys.stdout.writelines(difflib.unified_diff(
                        a.splitlines(True), b.splitlines(True), "quoted", "now", n=1))
                else:
                    out.append(text[pos:m.start("body")])
                    out.append(now)
                    pos = m.end("body")
                    changed = True
        if changed and not check:
            out.append(text[pos:])
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("".join(out))
            os.replace(tmp, path)
            print(f"docs: {rel}: regenerated")
    print(f"docs: {nblocks} quoted outputs in {len(files)} files, "
          f"{bad} {'stale or failing' if check else 'failing'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
