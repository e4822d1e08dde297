# variant v01_default of the blind Triton ranking study 3 (bench/triton_variants.py): the starter's configuration
# generated from kernels/triton/fused_mlp.py; do not edit (the prediction was made on this text)
"""fused_mlp (Triton starter): SwiGLU, y[B,D] = (silu(x·w_gateᵀ) ⊙ (x·w_upᵀ))·w_downᵀ (DESIGN §2).

Inputs: x[B,D], w_gate[H,D], w_up[H,D], w_down[D,H] (nn.Linear layout [out, in]). Outputs:
y[B,D] (same dtype). No attributes. silu on the gate only. fp16 / bf16 / fp32 with fp32
accumulation; fp32 is true fp32 (never TF32).

Two phases: h[B,H] = silu(x·w_gateᵀ) ⊙ (x·w_upᵀ), one program computing the gate and the up
tile of one block from one x tile (two fp32 accumulators, silu(g)·u = g/(1+e^-g)·u in fp32 in
the epilogue), then y = h·w_downᵀ (the matmul starter's kernel, w_down read transposed through
its strides). h is kept in the input dtype for fp16/bf16 (as PyTorch's eager SwiGLU) and in
fp32 for fp32, in a scratch tensor allocated per call (nothing kept between calls).
Deterministic: no split-K, no atomics.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import torch
import triton
import triton.language as tl

CONFIG_16 = (64, 128, 64, 8, 3)  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
CONFIG_32 = (64, 64, 32, 4, 3)
# Tunables of both phases (the optimizer's search rewrites these assignments). 0 keeps the
# dtype's choice in CONFIG_16 / CONFIG_32; tiles are at least 16 (tl.dot's minimum) and masked,
# so every value is correct; a tile set too large for a GPU's shared memory fails to compile
# there (a FAIL).
# @vb-param BLOCK_M 0 {0,16,32,64,128}  rows (batch) per program (0: the dtype's default)
BLOCK_M = 0
# @vb-param BLOCK_N 0 {0,16,32,64,128,256}  columns of h / y per program (0: the dtype's default)
BLOCK_N = 0
# @vb-param BLOCK_K 0 {0,16,32,64,128}  reduction step (0: the dtype's default)
BLOCK_K = 0
# @vb-param NUM_WARPS 0 {0,2,4,8,16}  warps per program (0: the dtype's default)
NUM_WARPS = 0
# @vb-param NUM_STAGES 0 {0,1,2,3,4,5}  software-pipelining stages (0: the dtype's default)
NUM_STAGES = 0
# @vb-param GROUP_M 8 {1,4,8,16}  rows of tiles that share weight panels in L2
GROUP_M = 8


def tile_config(dtype):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for `dtype`: each tunable, or where it
    is 0 the dtype's entry of CONFIG_32 (fp32) / CONFIG_16 (fp16, bf16)."""
    base = CONFIG_32 if dtype == torch.float32 else CONFIG_16
    chosen = (BLOCK_M, BLOCK_N, BLOCK_K, NUM_WARPS, NUM_STAGES)
    return tuple(c if c else b for c, b in zip(chosen, base))


@triton.jit
def _gate_up(x_ptr, wg_ptr, wu_ptr, h_ptr, M, N, K, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
             IEEE: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    # w[n, k] read as the [BLOCK_K, BLOCK_N] operand: element (k, n) at n*K + k
    w_off = rn[None, :].to(tl.int64) * K + rk[:, None]
    g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        xm = (rm[:, None] < M) & (k + rk[None, :] < K)
        wm = (k + rk[:, None] < K) & (rn[None, :] < N)
        x = tl.load(x_ptrs, mask=xm, other=0.0)
        wg = tl.load(wg_ptr + w_off + k, mask=wm, other=0.0)
        wu = tl.load(wu_ptr + w_off + k, mask=wm, other=0.0)
        if IEEE:
            g = tl.dot(x, wg, g, input_precision="ieee")
            u = tl.dot(x, wu, u, input_precision="ieee")
        else:
            g = tl.dot(x, wg, g)
            u = tl.dot(x, wu, u)
        x_ptrs += BLOCK_K
    h = g / (1.0 + tl.exp(-g)) * u
    h_ptrs = h_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _down(h_ptr, wd_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    # y[M=B, N=D] = h[B, K=H] · w_downᵀ, w_down[d, h] at d*K + h
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    h_ptrs = h_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = wd_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        h = tl.load(h_ptrs, mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        w = tl.load(w_ptrs, mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(h, w, acc, input_precision="ieee")
        else:
            acc = tl.dot(h, w, acc)
        h_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    y_ptrs = y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 4 or len(outputs) != 1 or len(attrs) != 0:
        raise ValueError("fused_mlp: expected 4 inputs (x, w_gate, w_up, w_down), 1 output, 0 attributes")
    x, wg, wu, wd = inputs
    y = outputs[0]
    if x.dim() != 2:
        raise ValueError(f"fused_mlp: x must be [B,D], got {tuple(x.shape)}")
    B, D = x.shape
    H = wg.shape[0] if wg.dim() == 2 else -1
    if tuple(wg.shape) != (H, D) or tuple(wu.shape) != (H, D) or tuple(wd.shape) != (D, H) \
            or tuple(y.shape) != (B, D):
        raise ValueError(f"fused_mlp: shapes x {tuple(x.shape)}, w_gate {tuple(wg.shape)}, w_up {tuple(wu.shape)}, w_down {tuple(wd.shape)}, y {tuple(y.shape)} do not fit [B,D], [H,D], [H,D], [D,H], [B,D]")
    if any(t.dtype != x.dtype for t in (wg, wu, wd, y)):
        raise ValueError("fused_mlp: all tensors must have one dtype")
    if B == 0 or D == 0:
        return
    if H == 0:
        y.zero_()
        return
    ieee = x.dtype == torch.float32
    bm, bn, bk, warps, stages = tile_config(x.dtype)
    h = torch.empty((B, H), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(B, bm) * triton.cdiv(H, bn),)
    _gate_up[grid](x, wg, wu, h, B, H, D, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                   IEEE=ieee, num_warps=warps, num_stages=stages)
    grid = (triton.cdiv(B, bm) * triton.cdiv(D, bn),)
    _down[grid](h, wd, y, B, D, H, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                IEEE=ieee, num_warps=warps, num_stages=stages)
