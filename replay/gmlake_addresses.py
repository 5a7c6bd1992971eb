#!/usr/bin/env python3
"""gmlake_addresses.py ARCHIVE - where the H200's driver put gmlake's cuMemAddressReserve
ranges (replay/data/validate-h200-gmlake/runs.tar.zst), against placement rules.

Each item's replay.csv is one allocsim-replay process, its 9 runs back to back, each ending
with everything given back: segment_alloc/segment_free are cudaMalloc segments,
segment_map/segment_unmap gmlake's pBlocks, each mapped whole after its
cuMemAddressReserve and unmapped before its release, so a map's address is its
reservation's. Stitched ranges are reserved but never mapped: they take address space
unseen, so a run that stitches (fraglimit=2M) hides some of its reservations.

Rules for a reservation's address (cudaMalloc's always follow placement_model.py's 'cuda',
replay/PLACEMENT.md sections 3 and 6):
  simdev  what sim/simdev.c does: a region of its own, the lowest free address, 2 MiB packed
  own     PLACEMENT.md's chunk rules (a chunk of roundup(size, 32 MiB), 32 MiB aligned, the
          range at its bottom, later ranges into the most recent chunk with room, best fit
          inside, a chunk given back when empty) in a heap of the reservations' own, a new
          chunk at the lowest gap from the region's base up
  shared  the same, but one heap with cudaMalloc's: a reservation may take a cudaMalloc
          chunk's free space (the CUDA context's first) and a cudaMalloc a reservation's;
          only the chunks each call opens lie apart (cudaMalloc's top-down from the heap's
          top, reservations' from the region's base up)
Columns: reservations placed exactly, one-step (from the true state before each) or
free-running (the model placing everything itself)."""
import csv, io, os, subprocess, sys, tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import placement_model as pm  # noqa: E402

MB, CH = pm.MB, pm.CH
HIGH = 0x700000000000  # cudaMalloc's heap lies above, the reservations' region below


class Chunks(pm.Heap):
    """placement_model's heap with reservations: predict_r, place_r, free_r."""
    def __init__(s, top, base):
        super().__init__('cuda', top)
        s.base = base

    def predict_r(s, size):
        size = pm.r2(size)
        for b in sorted(s.chunks, key=lambda b: -s.chunks[b][3]):
            fits = [(l, a) for a, l in s.chunks[b][1] if l >= size]
            if fits:
                return min(fits)[1]
        n = (size + CH - 1) // CH * CH
        a = s.base
        for b in sorted(x for x in s.chunks if x < HIGH):
            if b - a >= n:
                break
            a = max(a, b + s.chunks[b][0])
        return a

    place_r, free_r = pm.Heap.place, pm.Heap.free


class Packed:
    """simdev's region of its own: the lowest free address, 2 MiB granularity."""
    def __init__(s, base):
        s.base, s.live = base, {}

    def predict_r(s, size):
        a = s.base
        for b in sorted(s.live):
            if b - a >= pm.r2(size):
                break
            a = max(a, b + s.live[b])
        return a

    def place_r(s, a, size):
        s.live[a] = pm.r2(size)

    def free_r(s, a):
        s.live.pop(a, None)


def context_top(seq):
    """The heap's top T from the process's first address in cudaMalloc's heap, which is in
    the context's chunks: a first 2 MiB cudaMalloc lands at T + 414 MiB, a first
    reservation (20 MiB or less) at T + 488 MiB (PLACEMENT.md rule 6b)."""
    for op, a, _ in seq:
        if a >= HIGH:
            return a - (414 if op == 'a' else 488) * MB
    return None


def model(rule, seq):
    """(cudaMalloc's heap, the reservations' placement): one object for 'shared'."""
    base = min((a for op, a, _ in seq if op == 'r' and a < HIGH), default=0x302000000)
    if rule == 'shared':
        h = Chunks(context_top(seq), base)
        return h, h
    cuda = pm.Heap('cuda', pm.first_top([x for x in seq if x[0] == 'a']))
    return cuda, (Chunks(None, base) if rule == 'own' else Packed(base))


def step(m, op, sz, where):
    """Applies one event at address `where` (None: the model's own); returns the address
    the model predicts for a placement."""
    cuda, va = m
    if op in ('a', 'r'):
        p = cuda.predict(sz) if op == 'a' else va.predict_r(sz)
        a = p if where is None else where
        cuda.place(a, sz) if op == 'a' else va.place_r(a, sz)
        return p
    cuda.free(where) if op == 'f' else va.free_r(where)
    return None


def score(rule, seq, free_running):
    m, ok, tot, amap = model(rule, seq), 0, 0, {}
    for op, a, sz in seq:
        if op == 'end':  # the run's teardown gave everything back
            m, amap = model(rule, seq), {}
        elif not free_running:
            p = step(m, op, sz, a)
        elif op in ('a', 'r'):
            p = amap[a] = step(m, op, sz, None)
        else:
            step(m, op, sz, amap.pop(a, None))
        if op == 'r':
            tot += 1
            ok += p == a
    return ok, tot


def seqs(archive):
    raw = subprocess.run(['zstd', '-dc', archive], capture_output=True, check=True).stdout
    ops = {'segment_alloc': 'a', 'segment_free': 'f', 'segment_map': 'r', 'segment_unmap': 'u'}
    out = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        for mem in t.getmembers():
            if not mem.name.endswith('.replay.csv'):
                continue
            seq, last = [], None
            for r in csv.DictReader(io.TextIOWrapper(t.extractfile(mem))):
                if last is not None and r['run'] != last:
                    seq.append(('end', 0, 0))
                last = r['run']
                seq.append((ops[r['action']], int(r['addr']), int(r['size'])))
            out[os.path.basename(mem.name)[:-len('.replay.csv')]] = seq
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print('| item | reservations | simdev, one-step | own chunks, one-step | shared, one-step '
          '| shared, free-running |')
    print('|---|---|---|---|---|---|')
    tot = [0] * 5
    for name, seq in sorted(seqs(sys.argv[1]).items()):
        r = [score('simdev', seq, False), score('own', seq, False),
             score('shared', seq, False), score('shared', seq, True)]
        v = [r[0][1]] + [x[0] for x in r]
        print('| ' + name + ' | ' + ' | '.join(map(str, v)) + ' |')
        tot = [t + x for t, x in zip(tot, v)]
    print('| **all** | ' + ' | '.join(map(str, tot)) + ' |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
