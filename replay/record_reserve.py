#!/usr/bin/env python3
"""record_reserve.py - where the driver puts cuMemAddressReserve ranges among cudaMalloc's.

  record_reserve.py --out FILE.csv [--seeds A-B] [--ops N] [--jobs J]

Each seed is one fresh process (a fresh CUDA context) that first makes one 32 MiB
cudaMalloc, kept to the end (its chunk's top is the heap's top T, replay/PLACEMENT.md
section 6), then N calls mixing cudaMalloc/cudaFree and cuMemAddressReserve/
cuMemAddressFree (alignment 0, no fixed address, as gmlake and PyTorch's expandable
segments call it), in one of four patterns chosen by seed % 4:
  0 mix     a random live set of 10-50 ranges, 60 % of them reservations, sizes PyTorch's
            and gmlake's pBlocks take (multiples of 2 MiB, mostly under 130 MiB)
  1 tails   a reservation whose chunk has a tail, 2 MiB cudaMallocs into the tail, the
            reservation freed while they live, then reservations of other sizes (the
            chunk's free ranges then differ in position and size)
  2 holes   reservations packed into a chunk, some freed so that the chunk has several
            free ranges (a lower larger one, a higher one of about the size asked), then
            reservations and cudaMallocs of the sizes that tell lowest from smallest apart
  3 cuda    cudaMalloc chunks with tails first, reservations into them, then frees of both
Writes proc,step,op,size,addr (op malloc, free, reserve, release or refused; addr in
decimal), every row of every seed in seed order. Nothing is mapped or touched, so no
memory is used beyond the cudaMallocs' and no kernel runs. AS_FAKE_CUDA=1: rawcuda's fake
heap and a fake reservation space (addresses mean nothing), to exercise the script."""
import ctypes
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawcuda  # noqa: E402

MIB = 1 << 20
SIZES = [2, 4, 6, 8, 12, 14, 16, 20, 22, 26, 28, 32, 36, 40, 50, 64, 66, 98, 100, 126, 130]


class Driver:
    """cuMemAddressReserve / cuMemAddressFree of libcuda, in the runtime's context."""

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuMemAddressReserve.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                                ctypes.c_size_t, ctypes.c_uint64,
                                                ctypes.c_ulonglong]
        self.cu.cuMemAddressFree.argtypes = [ctypes.c_uint64, ctypes.c_size_t]

    def reserve(self, n):
        p = ctypes.c_uint64()
        if self.cu.cuMemAddressReserve(ctypes.byref(p), n, 0, 0, 0) != 0:
            return None
        return p.value

    def release(self, a, n):
        if self.cu.cuMemAddressFree(ctypes.c_uint64(a), ctypes.c_size_t(n)) != 0:
            raise rawcuda.CudaError("cuMemAddressFree(%#x, %d) failed" % (a, n))


class FakeDriver:
    def __init__(self):
        self.next = 0x302000000

    def reserve(self, n):
        self.next += n
        return self.next - n

    def release(self, a, n):
        pass


def pattern(seed, nops):
    """The (op, tag, size) calls of one seed: op 'malloc' or 'reserve' make tag, 'free'
    gives tag back (either kind)."""
    rng = random.Random(seed)
    kind = seed % 4
    live, out, tag = [], [], [0]

    def make(op, mib):
        out.append((op, tag[0], mib * MIB))
        live.append(tag[0])
        tag[0] += 1
        return tag[0] - 1

    def free(t):
        out.append(("free", t, 0))
        live.remove(t)

    target = rng.randrange(10, 51)
    while len(out) < nops:
        if kind == 1:
            owner = make("reserve", rng.choice([34, 46, 66, 68, 98, 100, 130, 190]))
            for _ in range(rng.randrange(1, 6)):
                make("malloc", 2)
            free(owner)
            for _ in range(rng.randrange(1, 6)):
                make("reserve" if rng.random() < 0.8 else "malloc", rng.choice(SIZES[:12]))
        elif kind == 2:
            first = make("reserve", rng.choice([40, 66, 100]))
            packed = [make("reserve", rng.choice([4, 8, 12, 16])) for _ in range(rng.randrange(2, 7))]
            for t in rng.sample(packed, rng.randrange(1, len(packed) + 1)):
                free(t)
            if rng.random() < 0.6:
                free(first)
            for _ in range(rng.randrange(1, 5)):
                make("reserve" if rng.random() < 0.7 else "malloc", rng.choice([2, 4, 8, 12, 16, 20]))
        elif kind == 3:
            for _ in range(rng.randrange(1, 4)):
                make("malloc", rng.choice([34, 50, 66, 100, 130]))
            for _ in range(rng.randrange(1, 6)):
                make("reserve", rng.choice(SIZES[:10]))
        else:
            if live and (len(live) >= target or rng.random() < 0.45):
                free(rng.choice(live))
            else:
                make("reserve" if rng.random() < 0.6 else "malloc", rng.choice(SIZES))
            if rng.random() < 0.02:
                target = rng.randrange(10, 51)
            continue
        while len(live) > target:
            free(rng.choice(live))
    return out


def worker(seed, nops):
    cu = rawcuda.open_cuda()
    dr = FakeDriver() if os.environ.get("AS_FAKE_CUDA") else Driver()
    pin = cu.malloc(32 * MIB)
    rows = [(seed, 0, "malloc", 32 * MIB, pin)]
    addr = {}
    for step, (op, t, sz) in enumerate(pattern(seed, nops), 1):
        if op in ("malloc", "reserve"):
            a = cu.malloc(sz) if op == "malloc" else dr.reserve(sz)
            if a is None:
                rows.append((seed, step, "refused", sz, 0))
                continue
            addr[t] = (op, a, sz)
            rows.append((seed, step, op, sz, a))
        elif t in addr:
            kind, a, sz = addr.pop(t)
            cu.free(a) if kind == "malloc" else dr.release(a, sz)
            rows.append((seed, step, "free" if kind == "malloc" else "release", sz, a))
    for kind, a, sz in addr.values():
        cu.free(a) if kind == "malloc" else dr.release(a, sz)
    cu.free(pin)
    return rows


def main():
    return rawcuda.seeded_main(__file__, __doc__, worker, "0-39", 400)


if __name__ == "__main__":
    sys.exit(main())
