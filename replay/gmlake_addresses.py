#!/usr/bin/env python3
"""gmlake_addresses.py ARCHIVE | --probe CSV - where the H200's driver put cuMemAddressReserve
ranges: gmlake's (a validate run's runs.tar.zst) or record_reserve.py's (its reserve.csv.zst),
against placement rules.

Each item's replay.csv is one allocsim-replay process, its 9 runs back to back, each ending
with everything given back: segment_alloc/segment_free are cudaMalloc segments,
segment_map/segment_unmap gmlake's pBlocks, each mapped whole after its
cuMemAddressReserve and unmapped before its release, so a map's address is its
reservation's. Stitched ranges are reserved but never mapped: they take address space
unseen by this log (at the defaults too: llama_accum_ckpt and streams2 ask for 512 MiB and
more, gmlake's fragLimit), so from the first stitch on every rule here drifts;
tests/test_simdev.c (gmlake_addresses) runs the simulator itself, which makes the stitches,
and finds every mapped reservation at the driver's address.

Rules for a reservation's address (cudaMalloc's always follow placement_model.py's 'cuda',
replay/PLACEMENT.md sections 3 and 6):
  packed  what sim/simdev.c did before section 9: a region of its own, the lowest free
          address, 2 MiB packed
  own     PLACEMENT.md's chunk rules (a chunk of roundup(size, 32 MiB), 32 MiB aligned, the
          range at its bottom, later ranges into the most recent chunk with room, best fit
          inside, a chunk given back when empty) in a heap of the reservations' own, a new
          chunk at the lowest gap from the region's base up
  shared  section 9, what sim/simdev.c does: one heap with cudaMalloc's, a reservation may
          take a cudaMalloc chunk's free space (the CUDA context's first) and a cudaMalloc a
          reservation's; only the chunks each call opens lie apart (cudaMalloc's top-down
          from the heap's top, reservations' from the region's base up); inside the chunk a
          reservation takes the lowest free range that holds it, a cudaMalloc the smallest
  shared-best  the same, but a reservation takes the smallest free range, as a cudaMalloc
Columns: reservations placed exactly, one-step (from the true state before each) or
free-running (the model placing everything itself). --probe: record_reserve.py's
processes free-running, by pattern, under 'shared' and 'shared-best'."""
import csv, io, os, subprocess, sys, tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import placement_model as pm  # noqa: E402

MB, CH = pm.MB, pm.CH
HIGH = 0x700000000000  # cudaMalloc's heap lies above, the reservations' region below


class Chunks(pm.Heap):
    """placement_model's heap with reservations: predict_r, place_r, free_r; `best`: a
    reservation takes the smallest free range of its chunk that holds it, as a cudaMalloc
    does, instead of the lowest."""
    def __init__(s, top, base, best=False):
        super().__init__('cuda', top)
        s.base, s.best = base, best

    def predict_r(s, size):
        size = pm.r2(size)
        for b in sorted(s.chunks, key=lambda b: -s.chunks[b][3]):
            fits = [(l, a) for a, l in s.chunks[b][1] if l >= size]
            if fits:
                return min(fits)[1] if s.best else min(a for _, a in fits)
        n = (size + CH - 1) // CH * CH
        a = s.base
        for b in sorted(x for x in s.chunks if x < HIGH):
            if b - a >= n:
                break
            a = max(a, b + s.chunks[b][0])
        return a

    place_r, free_r = pm.Heap.place, pm.Heap.free


class Packed:
    """simdev's region of its own before section 9: the lowest free address, 2 MiB."""
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


def model(rule, seq, top=None):
    """(cudaMalloc's heap, the reservations' placement): one object for the shared ones."""
    base = min((a for op, a, _ in seq if op == 'r' and a < HIGH), default=0x302000000)
    if rule.startswith('shared'):
        h = Chunks(top or context_top(seq), base, rule == 'shared-best')
        return h, h
    cuda = pm.Heap('cuda', pm.first_top([x for x in seq if x[0] == 'a']))
    return cuda, (Chunks(None, base, True) if rule == 'own' else Packed(base))


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


def score(rule, seq, free_running, top=None):
    """(reservations placed exactly, reservations, cudaMallocs placed exactly, cudaMallocs);
    a free-running model's addresses are compared as they are below HIGH and relative to
    the heap's top above it."""
    m, ok, tot, mok, mtot, amap = model(rule, seq, top), 0, 0, 0, 0, {}
    for op, a, sz in seq:
        if op == 'end':  # the run's teardown gave everything back
            m, amap = model(rule, seq, top), {}
        elif not free_running:
            p = step(m, op, sz, a)
        elif op in ('a', 'r'):
            p = amap[a] = step(m, op, sz, None)
        else:
            step(m, op, sz, amap.pop(a, None))
        if op == 'r':
            tot += 1
            ok += p == a
        elif op == 'a':
            mtot += 1
            mok += p == a
    return ok, tot, mok, mtot


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


def probe_seqs(path):
    """record_reserve.py's processes: {seed: (seq, the heap's top)}; its first cudaMalloc
    (32 MiB) opened the chunk right under the top."""
    raw = subprocess.run(['zstd', '-dc', path], capture_output=True, check=True).stdout
    ops = {'malloc': 'a', 'free': 'f', 'reserve': 'r', 'release': 'u'}
    out = {}
    for r in csv.DictReader(io.StringIO(raw.decode())):
        if r['op'] not in ops:
            continue
        seq, top = out.setdefault(int(r['proc']), ([], int(r['addr']) + 32 * MB))
        seq.append((ops[r['op']], int(r['addr']), int(r['size'])))
    return out


PATTERNS = ['mix', 'tails', 'holes', 'cuda']


def probe_main(path):
    print('| pattern | processes | reservations | exact, lowest | exact, smallest '
          '| cudaMallocs | exact |')
    print('|---|---|---|---|---|---|---|')
    tot = [0] * 6
    for k, name in enumerate(PATTERNS):
        procs = [v for s, v in sorted(probe_seqs(path).items()) if s % 4 == k]
        first = [score('shared', q, True, t) for q, t in procs]
        best = [score('shared-best', q, True, t) for q, t in procs]
        v = [len(procs), sum(x[1] for x in first), sum(x[0] for x in first),
             sum(x[0] for x in best), sum(x[3] for x in first), sum(x[2] for x in first)]
        print('| ' + name + ' | ' + ' | '.join(map(str, v)) + ' |')
        tot = [t + x for t, x in zip(tot, v)]
    print('| **all** | ' + ' | '.join(map(str, tot)) + ' |')
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--probe':
        return probe_main(sys.argv[2])
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print('| item | reservations | packed, one-step | own chunks, one-step | shared, one-step '
          '| shared, free-running |')
    print('|---|---|---|---|---|---|')
    tot = [0] * 5
    for name, seq in sorted(seqs(sys.argv[1]).items()):
        r = [score('packed', seq, False), score('own', seq, False),
             score('shared', seq, False), score('shared', seq, True)]
        v = [r[0][1]] + [x[0] for x in r]
        print('| ' + name + ' | ' + ' | '.join(map(str, v)) + ' |')
        tot = [t + x for t, x in zip(tot, v)]
    print('| **all** | ' + ' | '.join(map(str, tot)) + ' |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
