"""matmul (Triton starter): C[M,N] = A[M,K] · B[K,N] (DESIGN §2).

Inputs: A[M,K], B[K,N]. Outputs: C[M,N] (same dtype). No attributes. fp16 / bf16 / fp32 with
fp32 accumulation; fp32 is true fp32 (tl.dot input_precision "ieee", never TF32).

Tiles of BLOCK_M x BLOCK_N, a K loop of BLOCK_K steps, software pipelining over NUM_STAGES
stages (cp.async into shared memory, wgmma on Hopper), grouped rasterization (GROUP_M rows of
tiles share B panels in L2). Loads never mask rows or columns: a tile's rows past M (columns
past N) wrap around to rows (columns) from 0, and only the store is masked, so the main loop has
no M/N predicates; the K tail is masked only when K is not a multiple of BLOCK_K (EVEN_K).
Offsets are int32 unless an operand has 2^30 elements or more. PERSISTENT=1 launches one
program per SM (NUM_SMS) that walks the tiles; PERSISTENT=2 also flattens the tile x K loop
(Triton's persistent tutorial), so the next tile's loads can overlap the current epilogue. No TMA: the AOT path refuses host-side
descriptors and the global scratch memory device-side ones need (src/backends/triton/aot.h).
No split-K and no atomics: bitwise deterministic.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import torch
import triton
import triton.language as tl

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for 16-bit inputs and for fp32. 16-bit:
# the Hopper configuration of Triton's matmul tutorial (two warpgroups of 64x256 wgmma, three
# 48 KB stages = 144 KB of shared memory).
CONFIG_16 = (128, 256, 64, 8, 3)
CONFIG_32 = (128, 64, 64, 8, 2)
# 16-bit operands whose rows are not 16-byte multiples (K or N not a multiple of 8) cannot use
# cp.async: their loads go through registers, where a 128x256 tile spills.
CONFIG_16_UNALIGNED = (128, 128, 64, 8, 3)
# Tunables (the optimizer's search rewrites these assignments). 0 keeps the dtype's choice in
# CONFIG_16 / CONFIG_32; tiles are at least 16 (tl.dot's minimum) and every value is correct;
# a tile set too large for a GPU's shared memory fails to compile there (a FAIL).
# @vb-param BLOCK_M 0 {0,16,32,64,128,256}  rows of C per program (0: the dtype's default)
BLOCK_M = 0
# @vb-param BLOCK_N 0 {0,16,32,64,128,256}  columns of C per program (0: the dtype's default)
BLOCK_N = 0
# @vb-param BLOCK_K 0 {0,16,32,64,128}  K step of the main loop (0: the dtype's default)
BLOCK_K = 0
# @vb-param NUM_WARPS 0 {0,2,4,8,16}  warps per program (0: the dtype's default)
NUM_WARPS = 0
# @vb-param NUM_STAGES 0 {0,1,2,3,4,5}  software-pipelining stages of the K loop (0: the dtype's default)
NUM_STAGES = 0
# @vb-param GROUP_M 8 {1,4,8,16}  rows of tiles that share B panels in L2 (grouped rasterization)
GROUP_M = 8
# @vb-param PERSISTENT 0 {0,1,2}  1: one program per SM walking the tiles; 2: the same with the tile x K loop flattened
PERSISTENT = 0
# @vb-param NUM_SMS 132 {66,114,132,264}  programs of the persistent launch (H100/H200 SXM: 132 SMs)
NUM_SMS = 132


def tile_config(dtype, aligned=True):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for `dtype`: each tunable, or where it
    is 0 the dtype's entry of CONFIG_32 (fp32) / CONFIG_16 (fp16, bf16; CONFIG_16_UNALIGNED
    when not `aligned`)."""
    base = CONFIG_32 if dtype == torch.float32 else CONFIG_16 if aligned else CONFIG_16_UNALIGNED
    chosen = (BLOCK_M, BLOCK_N, BLOCK_K, NUM_WARPS, NUM_STAGES)
    return tuple(c if c else b for c, b in zip(chosen, base))


@triton.jit
def _tile(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of tile number `tile` in grouped order."""
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group = tile // width
    first_m = group * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % width) % size_m
    pid_n = (tile % width) // size_m
    return pid_m, pid_n


@triton.jit
def _dot(a, b, acc, IEEE: tl.constexpr):
    if IEEE:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IEEE: tl.constexpr,
            EVEN_K: tl.constexpr, WIDE: tl.constexpr):
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/columns past the edge wrap around (the store drops them): no load masks. (A modulo
    # keeps Triton's contiguity analysis honest: N % 16 == 0 still gives 16-byte loads.)
    am = rm % M
    bn = rn % N
    rk = tl.arange(0, BLOCK_K)
    if WIDE:
        am = am.to(tl.int64)
        rk = rk.to(tl.int64)
    a_ptrs = a_ptr + am[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k, other=0.0)
        acc = _dot(a, b, acc, IEEE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if WIDE:
        rm = rm.to(tl.int64)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IEEE: tl.constexpr,
                       EVEN_K: tl.constexpr, WIDE: tl.constexpr, NUM_SMS: tl.constexpr,
                       FLATTEN: tl.constexpr):
    start = tl.program_id(0)
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    rk = tl.arange(0, BLOCK_K)
    if WIDE:
        rk = rk.to(tl.int64)
    for tile in tl.range(start, tiles, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        am = rm % M
        bn = rn % N
        if WIDE:
            am = am.to(tl.int64)
            rm = rm.to(tl.int64)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            kk = ki * BLOCK_K
            a_ptrs = a_ptr + am[:, None] * stride_am + (kk + rk)[None, :] * stride_ak
            b_ptrs = b_ptr + (kk + rk)[:, None] * stride_bk + bn[None, :] * stride_bn
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                a = tl.load(a_ptrs, mask=rk[None, :] < K - kk, other=0.0)
                b = tl.load(b_ptrs, mask=rk[:, None] < K - kk, other=0.0)
            acc = _dot(a, b, acc, IEEE)
        c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, c, a_strides, b_strides, M, N, K):
    """C[M,N] = A·B with A, B addressed through (row, col) element strides; C row-major."""
    bm, bn, bk, warps, stages = tile_config(a.dtype, (a_strides[0] % 8, b_strides[0] % 8) == (0, 0))
    if M == 0 or N == 0:
        return
    if K == 0:
        c.zero_()
        return
    # int64 offsets only where an int32 one could overflow (2^30: margin for a tile's overhang).
    wide = max(M * K, K * N, M * N) >= 2**30
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    args = (a, b, c, M, N, K, a_strides[0], a_strides[1], b_strides[0], b_strides[1], N, 1)
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M, IEEE=a.dtype == torch.float32,
                EVEN_K=K % bk == 0, WIDE=wide, num_warps=warps, num_stages=stages)
    if PERSISTENT:
        _matmul_persistent[(min(NUM_SMS, tiles),)](*args, NUM_SMS=min(NUM_SMS, tiles),
                                                     FLATTEN=PERSISTENT == 2, **meta)
    else:
        _matmul[(tiles,)](*args, **meta)


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 2 or len(outputs) != 1 or len(attrs) != 0:
        raise ValueError("matmul: expected 2 inputs (A, B), 1 output, 0 attributes")
    a, b = inputs
    c = outputs[0]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] \
            or tuple(c.shape) != (a.shape[0], b.shape[1]):
        raise ValueError(f"matmul: shapes A {tuple(a.shape)}, B {tuple(b.shape)}, C {tuple(c.shape)} do not fit [M,K], [K,N], [M,N]")
    if b.dtype != a.dtype or c.dtype != a.dtype:
        raise ValueError("matmul: A, B and C must have one dtype")
    M, K = a.shape
    N = b.shape[1]
    matmul(a, b, c, (K, 1), (N, 1), M, N, K)
