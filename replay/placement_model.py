#!/usr/bin/env python3
"""placement_model.py - how well a cudaMalloc placement rule predicts the H200's addresses.

Usage:
  placement_model.py [RULE] [-v]            the calibration sequences and the key replays
  placement_model.py CSV RULE [-v]          one calibration csv (step,op,tag,size,addr)
  placement_model.py --held-out [RULE]      the recordings the rules were not fitted on
                                            (replay/data/h200-reuse, PLACEMENT.md section 7)

RULE (replay/PLACEMENT.md sections 3 and 6): 'recent', or features joined by '+':
  recent  chunks of roundup(size, 32 MiB), top-down at the top of the highest gap that
          holds the chunk, range at the chunk's bottom, later ranges into the most recent
          chunk with room (lowest free address inside), empty chunks given back
  ctx     + the CUDA context's two chunks above the heap's top T:
          [T+480, T+512) MiB with 24 MiB free from T+488, made first, and
          [T+384, T+416) MiB with 2 MiB free at T+414, made next
  pad     + a new chunk needs a gap larger than itself (the driver maps
          size + alignment - a page and keeps the aligned part)
  best    + inside the chunk, the smallest free range that holds the request (the lowest
          of equals) instead of the lowest one
  cuda    ctx+pad+best: the rule sim/simdev.c implements (the default)
  lowest  recent, but ranges go to the lowest free address over all chunks

Figures: "one-step" predicts each segment's address from the true state before it (the
recorded addresses so far); "free-running" lets the model place every segment itself, as
the simulated device does, and compares its address with the recorded one (a key replay's
frees are mapped to the model's own address of that segment). The key replays are
replay/data/torch-key-replay/*.csv.zst (not the cudaMallocAsync ones): one process per
config, its runs back to back, each ending with every segment freed.
"""
import csv, glob, io, json, os, subprocess, sys

MB = 1 << 20
CH = 32 * MB
HERE = os.path.dirname(os.path.abspath(__file__))


def r2(s):
    return (s + 2 * MB - 1) // (2 * MB) * (2 * MB)


def merge(h):
    m = []
    for x in sorted(h):
        if m and m[-1][0] + m[-1][1] == x[0]:
            m[-1] = (m[-1][0], m[-1][1] + x[1])
        else:
            m.append(x)
    return m


def features(rule):
    f = set(rule.split('+'))
    return f | {'ctx', 'pad', 'best'} if 'cuda' in f else f


class Heap:
    def __init__(s, rule, top):
        s.rule, s.top = features(rule), top
        s.chunks = {}  # base -> [len, holes, ranges in it, creation number]
        s.live = {}  # addr -> (size, chunk base or None)
        s.seq = 0
        if 'ctx' in s.rule and top is not None:
            s.chunks[top + 480 * MB] = [CH, [(top + 488 * MB, 24 * MB)], 1, -2]
            s.chunks[top + 384 * MB] = [CH, [(top + 414 * MB, 2 * MB)], 1, -1]

    def gaps(s):  # free space under the top, highest first; the last one is unbounded
        g, prev = [], s.top
        for b, c in sorted(s.chunks.items(), reverse=True):
            if b + c[0] <= prev:
                if prev > b + c[0]:
                    g.append((b + c[0], prev - b - c[0]))
                prev = b
            else:
                prev = min(prev, b)
        g.append((0, prev))
        return g

    def predict(s, size):
        size = r2(size)
        if 'lowest' in s.rule:
            cands = [a for c in s.chunks.values() for a, l in c[1] if l >= size]
            if cands:
                return min(cands)
        for base in sorted(s.chunks, key=lambda b: -s.chunks[b][3]):
            fits = [(l, a) for a, l in s.chunks[base][1] if l >= size]
            if fits:
                return min(fits)[1] if 'best' in s.rule else min(a for _, a in fits)
        if s.top is None:
            return None
        n = (size + CH - 1) // CH * CH
        need = n + CH - 4096 if 'pad' in s.rule else n
        for b, l in s.gaps():
            if l >= need or b == 0:
                return b + l - n

    def place(s, a, size):
        size = r2(size)
        for base, c in s.chunks.items():
            for i, (b, l) in enumerate(c[1]):
                if b <= a and a + size <= b + l:
                    c[1].pop(i)
                    c[1] += [x for x in ((b, a - b), (a + size, b + l - a - size)) if x[1]]
                    c[1].sort()
                    c[2] += 1
                    s.live[a] = (size, base)
                    return
        n = (size + CH - 1) // CH * CH
        inside = any(b <= a < b + c[0] for b, c in s.chunks.items())
        if a % CH == 0 and not inside:
            if s.top is None:
                s.top = a + n
            s.seq += 1
            s.chunks[a] = [n, [(a + size, n - size)] if n > size else [], 1, s.seq]
            s.live[a] = (size, a)
        else:
            s.live[a] = (size, None)  # memory the model does not know (the context's)

    def free(s, a):
        if a not in s.live:
            return
        size, base = s.live.pop(a)
        if base is None:
            return
        c = s.chunks[base]
        c[1] = merge(c[1] + [(a, size)])
        c[2] -= 1
        if c[2] == 0:
            del s.chunks[base]


def first_top(seq):
    """The heap's top T: the top of the first chunk the driver made (its first 32 MiB
    aligned address)."""
    for op, a, sz in seq:
        if op == 'a' and a % CH == 0:
            return a + (sz + CH - 1) // CH * CH
    return None


def one_step(rule, seq, verbose=False):
    h, ok, tot = Heap(rule, first_top(seq)), 0, 0
    for op, a, sz in seq:
        if op == 'a':
            p = h.predict(sz)
            tot += 1
            ok += p == a
            if verbose and p != a:
                print('  miss: %d MiB at %#x, predicted %s' % (sz >> 20, a, p and hex(p)))
            h.place(a, sz)
        elif op == 'end':
            for x in list(h.live):
                h.free(x)
        else:
            h.free(a)
    return ok, tot


def free_running(rule, seq):
    h, ok, tot, amap = Heap(rule, first_top(seq)), 0, 0, {}
    for op, a, sz in seq:
        if op == 'a':
            p = h.predict(sz)
            tot += 1
            ok += p == a
            amap[a] = p
            h.place(p, sz)
        elif op == 'end':
            for x in list(h.live):
                h.free(x)
            amap = {}
        elif a in amap:
            h.free(amap.pop(a))
    return ok, tot


def calib_seq(path):
    seq = []
    for r in csv.DictReader(open(path)):
        s = int(r['size'])
        if s >= 2 * MB and r['op'] in ('malloc', 'free'):  # PyTorch never asks for less
            seq.append(('a' if r['op'] == 'malloc' else 'f', int(r['addr']), s))
    return seq


def key_seqs(pattern='data/torch-key-replay/*.csv.zst'):
    out = []
    for f in sorted(glob.glob(os.path.join(HERE, pattern))):
        if 'async' in f:
            continue
        runs = json.load(open(f.replace('.csv.zst', '.json')))['runs']
        txt = subprocess.run(['zstdcat', f], capture_output=True, text=True, check=True).stdout
        procs, last = {}, {}
        for r in csv.DictReader(io.StringIO(txt)):
            run = int(r['run'])
            conf = runs[run]['conf']
            p = procs.setdefault(conf, [])
            if last.get(conf, run) != run:
                p.append(('end', 0, 0))  # the run's teardown frees every segment
            last[conf] = run
            if r['action'] in ('segment_alloc', 'segment_free'):
                p.append(('a' if r['action'] == 'segment_alloc' else 'f', int(r['addr']),
                          int(r['size'])))
        out += [(os.path.basename(f), c, s) for c, s in procs.items()
                if any(x[0] == 'a' for x in s)]
    return out


def reuse_seqs(path):
    """record_reuse.py's recording: one sequence per process (proc,step,op,size,addr)."""
    txt = subprocess.run(['zstdcat', path], capture_output=True, text=True, check=True).stdout
    procs = {}
    for r in csv.DictReader(io.StringIO(txt)):
        if r['op'] in ('malloc', 'free'):
            procs.setdefault(int(r['proc']), []).append(
                ('a' if r['op'] == 'malloc' else 'f', int(r['addr']), int(r['size'])))
    return procs


def held_out(rule):
    """Figures on recordings made after the rules were fixed, never used to fit them."""
    sets = [('llama key replays (PyTorch)', [s for _, _, s in key_seqs(
                'data/h200-reuse/torch_llama_*.csv.zst')]),
            ('free/reallocate patterns (cudaMalloc)', list(reuse_seqs(os.path.join(
                HERE, 'data/h200-reuse/reuse.csv.zst')).values()))]
    for name, seqs in sets:
        a = [one_step(rule, s) for s in seqs]
        b = [free_running(rule, s) for s in seqs]
        print('%s, %d processes: one-step %d/%d, free-running %d/%d' % (
            name, len(seqs), sum(x[0] for x in a), sum(x[1] for x in a),
            sum(x[0] for x in b), sum(x[1] for x in b)))


def main():
    if '--held-out' in sys.argv:
        rest = [a for a in sys.argv[1:] if a != '--held-out']
        for rule in rest or ['cuda']:
            print('rule', rule)
            held_out(rule)
        return
    args = [a for a in sys.argv[1:] if a != '-v']
    verbose = '-v' in sys.argv
    if args and args[0].endswith('.csv'):
        rule = args[1] if len(args) > 1 else 'cuda'
        ok, tot = one_step(rule, calib_seq(args[0]), verbose)
        print(rule, ok, '/', tot, 'one-step exact')
        return
    rules = args or ['recent', 'ctx', 'pad', 'best', 'ctx+pad', 'cuda']
    cal = calib_seq(os.path.join(HERE, 'data/calib-h200/placement.csv'))
    keys = key_seqs()
    for rule in rules:
        c = one_step(rule, cal, verbose)
        k1 = [one_step(rule, s) for _, _, s in keys]
        kf = [free_running(rule, s) for _, _, s in keys]
        print('%-7s calibration one-step %d/%d   key replays one-step %d/%d, free-running %d/%d'
              % (rule, c[0], c[1], sum(x[0] for x in k1), sum(x[1] for x in k1),
                 sum(x[0] for x in kf), sum(x[1] for x in kf)))
        if verbose:
            for (f, conf, _), a, b in zip(keys, k1, kf):
                print('   %s [%s]: one-step %d/%d, free-running %d/%d' % (f, conf, *a, *b))


if __name__ == '__main__':
    main()
