#!/usr/bin/env python3
"""Host-side model of the CUDA starters' work decomposition (no GPU needed).

Re-derives, for every test/edge/stability/benchmark size of the six memory-bound types and each
dtype, the path the host code of kernels/cuda/<type>.cu picks (warp per row, block per row,
streaming; vector or scalar; pack counts) and enumerates the element offsets every (block,
thread) touches with the kernels' own index formulas. Checks: every output element written
exactly once, every read in bounds, every vector access aligned to its size, every row within
the register-cache capacity of the chosen pack count, grid within limits. The formulas are
transcribed from the .cu files (keep them in step when those change); run it after editing
a kernel's indexing:  python3 kernels/cuda/selfcheck/index_model.py
"""
import itertools
import sys

SMS = 132
MAX_BLOCKS_PER_SM = 16
VEC_BYTES = 16
WARP_MAX_COLS, WARP_BT, BT, LONG_BT, MAX_PACKS, UNROLL = 1024, 256, 256, 1024, 8, 4
ESIZE = {"f16": 2, "bf16": 2, "f32": 4}


def vec_elems(es):
    return max(1, VEC_BYTES // es)


def cache_limit(bt):
    return 32 if bt >= 1024 else 64


def scalar_cache_limit(bt):
    return 16 if bt >= 1024 else 32 if bt >= 512 else 64


def pow2_floor(v):
    return 16 if v >= 16 else 8 if v >= 8 else 4 if v >= 4 else 2 if v >= 2 else 1


def max_packs(es, bt, vec):
    by = (cache_limit(bt) if vec else scalar_cache_limit(bt)) // vec_elems(es)
    return max(1, min(MAX_PACKS, by))


def grid_for(work, per_block):
    return max(1, min(-(-work // per_block), SMS * MAX_BLOCKS_PER_SM))


errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


def row_kernel_cover(name, R, C, G, bt, NP, KP, grid, stream_uu=None):
    """Cached kernel (KP packs p = k*G + t) or streaming kernel (steps of UU packs)."""
    rpb = bt // G
    seen = {}
    n_packs = C // NP
    check(C % NP == 0, f"{name}: C % NP")
    for b in range(grid):
        for tid in range(bt):
            t, gi = tid % G, tid // G
            row = b * rpb + gi
            while row < R:
                packs = []
                if stream_uu is None:
                    packs = [k * G + t for k in range(KP)]
                else:
                    base = 0
                    while base < n_packs:
                        packs += [base + u * G + t for u in range(stream_uu)]
                        base += stream_uu * G
                for p in packs:
                    if p < n_packs:
                        e = p * NP
                        check(e % NP == 0, f"{name}: misaligned pack")
                        for j in range(NP):
                            check(0 <= e + j < C, f"{name}: out of bounds {e + j}")
                            seen[(row, e + j)] = seen.get((row, e + j), 0) + 1
                row += grid * rpb
    check(len(seen) == R * C and all(v == 1 for v in seen.values()),
          f"{name}: coverage {len(seen)} of {R * C} (or repeats)")


def cached_dispatch(R, C, es, vec, warp_max=WARP_MAX_COLS):
    N = vec_elems(es)
    kw = pow2_floor(max_packs(es, WARP_BT, vec))
    kb = pow2_floor(max_packs(es, BT, vec))
    if C <= warp_max and C <= 32 * kw * N:
        per = -(-C // (32 * N))
        kp = next(k for k in (1, 2, 4, 8, 16) if k >= per)
        check(kp <= kw, "warp pack count over the cap")
        return ("warp", 32, WARP_BT, kp, grid_for(R, WARP_BT // 32))
    if C <= BT * kb * N:
        per = -(-C // (BT * N))
        kp = next(k for k in (1, 2, 4, 8, 16) if k >= per)
        check(kp <= kb, "block pack count over the cap")
        return ("block", BT, BT, kp, grid_for(R, 1))
    return ("stream", LONG_BT, LONG_BT, None, grid_for(R, 1))


def model_rows(typ, R, C, dt, aligned=True):
    es = ESIZE[dt]
    N = vec_elems(es)
    vec = N > 1 and C % N == 0 and aligned
    path, G, bt, kp, grid = cached_dispatch(R, C, es, vec)
    NP = N if vec else 1
    name = f"{typ} {R}x{C} {dt} {'vec' if vec else 'scalar'} {path}"
    if path == "stream":
        step_cap = cache_limit(bt) // 2
        uu = (UNROLL if UNROLL * N <= step_cap else max(1, step_cap // N)) if vec else \
            (UNROLL * N if UNROLL * N <= step_cap // 2 else step_cap // 2)
        row_kernel_cover(name, R, C, G, bt, NP, None, grid, uu)
    else:
        KP = kp if vec else kp * N
        check(C <= G * KP * NP, f"{name}: row over the register cache")
        row_kernel_cover(name, R, C, G, bt, NP, KP, grid)
    return path


def model_reduce(R, C, dt, aligned=True):
    es = ESIZE[dt]
    NV = vec_elems(es)
    vec = NV > 1 and C % NV == 0 and aligned
    if C <= WARP_MAX_COLS:
        G, bt = 32, WARP_BT
    elif C <= 16384:
        G, bt = BT, BT
    else:
        G, bt = LONG_BT, LONG_BT
    step_cap = cache_limit(bt) // 2
    uu = pow2_floor((UNROLL if UNROLL * NV <= step_cap else max(1, step_cap // NV)) if vec else
                    (UNROLL * NV if UNROLL * NV <= step_cap // 2 else step_cap // 2))
    row_kernel_cover(f"reduce {R}x{C} {dt}", R, C, G, bt, NV if vec else 1, None,
                     grid_for(R, bt // G), uu)


def model_ce(R, C, dt):
    es = ESIZE[dt]
    NV = vec_elems(es)
    vec = NV > 1 and C % NV == 0
    G, bt = (32, WARP_BT) if C <= WARP_MAX_COLS else (512, 512)
    step_cap = min(cache_limit(bt) // 2, 16)
    uu = (UNROLL if UNROLL * NV <= step_cap else max(1, step_cap // NV)) if vec else \
        (UNROLL * NV if UNROLL * NV <= step_cap // 2 else step_cap // 2)
    grid = min(grid_for(R, bt // G), 4096)
    row_kernel_cover(f"cross_entropy {R}x{C} {dt}", R, C, G, bt, NV if vec else 1, None, grid, uu)
    check(grid <= 4096, "cross_entropy: grid over the partial slots")


def model_rope(B, H, S, D, dt, il):
    es = ESIZE[dt]
    NV = max(2, VEC_BYTES // es)
    half = D // 2
    vec = (D % NV == 0) if il else (half % NV == 0)
    chunks = (D // NV if vec else half) if il else (half // NV if vec else half)
    l2 = 0
    while l2 < 5 and (1 << l2) < chunks:
        l2 += 1
    tpr, rpb = 1 << l2, BT >> l2
    rows = B * H * S
    grid = max(1, min(-(-rows // rpb), SMS * MAX_BLOCKS_PER_SM))
    seen = {}
    tab = set()
    name = f"rope b{B}h{H}s{S}d{D} {dt} {'il' if il else 'half'} {'vec' if vec else 'scalar'}"
    for b in range(grid):
        for tid in range(BT):
            lane, ri = tid & (tpr - 1), tid >> l2
            row = b * rpb + ri
            while row < rows:
                pos = row % S
                if il:
                    NP = NV if vec else 2
                    nq = D // NP
                    for q in range(lane, nq, tpr):
                        e = q * NP
                        check(not vec or e % NV == 0, f"{name}: x misaligned")
                        for j in range(NP):
                            check(e + j < D, f"{name}: x oob")
                            seen[(row, e + j)] = seen.get((row, e + j), 0) + 1
                        for j in range(NP // 2):
                            ti = q * (NP // 2) + j
                            check(ti < half, f"{name}: table oob")
                            check(ti == (e + 2 * j) // 2, f"{name}: wrong table entry")
                            tab.add((pos, ti))
                else:
                    NP = NV if vec else 1
                    nq = half // NP
                    for q in range(lane, nq, tpr):
                        i = q * NP
                        for j in range(NP):
                            for e in (i + j, half + i + j):
                                check(e < D, f"{name}: x oob")
                                seen[(row, e)] = seen.get((row, e), 0) + 1
                            check(i + j < half, f"{name}: table oob")
                            tab.add((pos, i + j))
                row += grid * rpb
    check(len(seen) == rows * D and all(v == 1 for v in seen.values()),
          f"{name}: coverage {len(seen)} of {rows * D}")


def main():
    dts = ["f16", "bf16", "f32"]
    small = lambda r, c: r * c <= 700_000
    softmax = [(1024, 1024), (512, 4096), (2048, 768), (8, 32000), (32, 50257), (4, 128256),
               (1, 1), (3, 127), (127, 1023), (1023, 3), (13, 4097), (251, 1021), (1, 100003),
               (64, 1000), (8, 4)]
    norms = [(512, 768), (2048, 1024), (256, 4096), (128, 5120), (64, 8192), (1, 1), (3, 127),
             (127, 1023), (1023, 3), (13, 4097), (251, 1021), (32, 4096)]
    reduce_ = [(1024, 4096), (4096, 1024), (8192, 128), (32, 128256), (1, 1), (3, 127),
               (127, 1023), (1023, 3), (13, 4097), (251, 1021), (4097, 1), (1, 1000003),
               (64, 4096), (64, 8)]
    ce = [(8, 128256), (32, 50257), (64, 32000), (16, 32000), (1, 3), (3, 127), (1, 4097),
          (13, 1023), (127, 251), (1023, 3), (5, 50257), (64, 4096)]
    rope = [(1, 32, 512, 128), (2, 12, 256, 64), (4, 16, 128, 64), (1, 8, 1024, 128), (1, 1, 1, 2),
            (1, 3, 127, 6), (2, 1, 13, 130), (1, 1, 3, 130), (1, 2, 1023, 2), (1, 1, 4097, 64),
            (1, 2, 64, 128)]
    paths = {}
    for dt in dts:
        for (r, c) in softmax + norms:
            if small(r, c):
                for al in (True, False):
                    paths[(r, c, dt, al)] = model_rows("rows", r, c, dt, al)
        for (r, c) in [(8192, 8192)]:  # benchmark: dispatch only (too large to enumerate)
            es = ESIZE[dt]
            p = cached_dispatch(r, c, es, True)
            check(p[0] == "block", f"benchmark 8192x8192 {dt} not register-cached: {p}")
            print(f"benchmark 8192x8192 {dt}: {p[0]} per row, {p[3]} vectors per thread, grid {p[4]}")
        for (r, c) in reduce_:
            if small(r, c):
                model_reduce(r, c, dt)
        for (r, c) in ce:
            if small(r, c):
                model_ce(r, c, dt)
        for dims in rope:
            if dims[0] * dims[1] * dims[2] * dims[3] <= 600_000:
                for il in (0, 1):
                    model_rope(*dims, dt, il)
    for (r, c, dt, al), p in sorted(paths.items()):
        if al and dt == "f16":
            print(f"rows {r}x{c} {dt}: {p}")
    if errors:
        print(f"{len(errors)} problem(s):")
        for e in errors[:50]:
            print("  " + e)
        return 1
    print("index model: all sizes covered exactly once, in bounds, aligned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
