"""matmul (Triton starter): C[M,N] = A[M,K] · B[K,N] (DESIGN §2).

Inputs: A[M,K], B[K,N]. Outputs: C[M,N] (same dtype). No attributes. fp16 / bf16 / fp32 with
fp32 accumulation; fp32 is true fp32 (tl.dot input_precision "ieee", never TF32).

Tiles of BLOCK_M x BLOCK_N, a K loop of BLOCK_K steps with masked tails, software pipelining
over NUM_STAGES stages, grouped rasterization (GROUP_M rows of tiles share B panels in L2).
No split-K and no atomics: bitwise deterministic.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import torch
import triton
import triton.language as tl

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for 16-bit inputs and for fp32.
CONFIG_16 = (128, 128, 64, 8, 3)
CONFIG_32 = (128, 64, 64, 8, 2)
# Tunables (the optimizer's search rewrites these assignments). 0 keeps the dtype's choice in
# CONFIG_16 / CONFIG_32; tiles are at least 16 (tl.dot's minimum) and masked, so every value is
# correct; a tile set too large for a GPU's shared memory fails to compile there (a FAIL).
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


def tile_config(dtype):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for `dtype`: each tunable, or where it
    is 0 the dtype's entry of CONFIG_32 (fp32) / CONFIG_16 (fp16, bf16)."""
    base = CONFIG_32 if dtype == torch.float32 else CONFIG_16
    chosen = (BLOCK_M, BLOCK_N, BLOCK_K, NUM_WARPS, NUM_STAGES)
    return tuple(c if c else b for c, b in zip(chosen, base))


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, c, a_strides, b_strides, M, N, K):
    """C[M,N] = A·B with A, B addressed through (row, col) element strides; C row-major."""
    bm, bn, bk, warps, stages = tile_config(a.dtype)
    if M == 0 or N == 0:
        return
    if K == 0:
        c.zero_()
        return
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul[grid](a, b, c, M, N, K, a_strides[0], a_strides[1], b_strides[0], b_strides[1],
                  N, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                  IEEE=a.dtype == torch.float32, num_warps=warps, num_stages=stages)


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
