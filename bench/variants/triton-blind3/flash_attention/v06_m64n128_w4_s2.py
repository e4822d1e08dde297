# variant v06_m64n128_w4_s2 of the blind Triton ranking study 3 (bench/triton_variants.py): BLOCK_M = 64, BLOCK_N = 128, NUM_WARPS = 4, NUM_STAGES = 2
# generated from kernels/triton/flash_attention.py; do not edit (the prediction was made on this text)
"""flash_attention (Triton starter): O[B,H,S,D] = softmax(Q·Kᵀ·sm_scale + mask)·V (DESIGN §2).

Inputs: Q[B,H,S,D], K[B,HKV,S,D], V[B,HKV,S,D]. Outputs: O[B,H,S,D] (same dtype).
Attribute 0: causal (default 1): key j is visible to query i iff j <= i (top-left aligned, as
PyTorch SDPA); 0: no mask. Attribute 1: sm_scale (the evaluator resolves its default 1/sqrt(D)).
GQA: H % HKV == 0, query head h reads KV head h / (H/HKV). fp16 / bf16 / fp32; fp32 is true
fp32 (never TF32).

FlashAttention-2 forward: one program per (BLOCK_M query rows, batch·head); a loop over key
blocks of BLOCK_N with the online softmax in base 2 (scores scaled by sm_scale·log2(e)), fp32
running max, sum and accumulator; causal programs stop at their diagonal block. P is rounded to
V's dtype for the second product (as FlashAttention does). Any D (padded to a power of two and
masked), any S. Deterministic: each output row is written by one program in a fixed order.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import torch
import triton
import triton.language as tl

CONFIG_16 = (128, 64, 8, 3)  # (BLOCK_M, BLOCK_N, num_warps, num_stages)
CONFIG_32 = (64, 32, 4, 2)
# Tunables (the optimizer's search rewrites these assignments). 0 keeps the dtype's choice in
# CONFIG_16 / CONFIG_32; blocks are at least 16 (tl.dot's minimum) and masked, and a causal
# program's last key block is masked per column, so every value is correct; a tile set too
# large for a GPU's shared memory fails to compile there (a FAIL).
# @vb-param BLOCK_M 0 {0,16,32,64,128}  query rows per program (0: the dtype's default)
BLOCK_M = 64  # variant v06_m64n128_w4_s2 (starter: 0)
# @vb-param BLOCK_N 0 {0,16,32,64,128}  keys per step of the online softmax (0: the dtype's default)
BLOCK_N = 128  # variant v06_m64n128_w4_s2 (starter: 0)
# @vb-param NUM_WARPS 0 {0,2,4,8,16}  warps per program (0: the dtype's default)
NUM_WARPS = 4  # variant v06_m64n128_w4_s2 (starter: 0)
# @vb-param NUM_STAGES 0 {0,1,2,3,4}  software-pipelining stages of the key loop (0: the dtype's default)
NUM_STAGES = 2  # variant v06_m64n128_w4_s2 (starter: 0)
LOG2E = 1.4426950408889634


@triton.jit
def _attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, H, GROUP, S, D, qk_scale, CAUSAL: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
              IEEE: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    hkv = H // GROUP
    kv_head = b * hkv + h // GROUP
    q_base = q_ptr + bh * S * D
    o_base = o_ptr + bh * S * D
    k_base = k_ptr + kv_head * S * D
    v_base = v_ptr + kv_head * S * D
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, BLOCK_D)
    q = tl.load(q_base + rm[:, None] * D + rd[None, :], mask=(rm[:, None] < S) & (rd[None, :] < D),
                other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, S)
    else:
        hi = S
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + rn
        kv_mask = (cols[:, None] < S) & (rd[None, :] < D)
        k = tl.load(k_base + cols[:, None] * D + rd[None, :], mask=kv_mask, other=0.0)
        if IEEE:
            qk = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        visible = cols[None, :] < S
        if CAUSAL:
            visible = visible & (cols[None, :] <= rm[:, None])
        qk = tl.where(visible, qk * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * D + rd[None, :], mask=kv_mask, other=0.0)
        if IEEE:
            acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(o_base + rm[:, None] * D + rd[None, :], o.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < S) & (rd[None, :] < D))


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 3 or len(outputs) != 1 or len(attrs) != 2:
        raise ValueError("flash_attention: expected 3 inputs (q, k, v), 1 output, 2 attributes (causal, sm_scale)")
    q, k, v = inputs
    o = outputs[0]
    if q.dim() != 4 or k.dim() != 4:
        raise ValueError(f"flash_attention: q and k must be 4-D, got {tuple(q.shape)}, {tuple(k.shape)}")
    B, H, S, D = q.shape
    HKV = k.shape[1]
    if HKV < 1 or H % HKV != 0:
        raise ValueError(f"flash_attention: H = {H} query heads is not a multiple of HKV = {HKV} KV heads")
    if tuple(k.shape) != (B, HKV, S, D) or tuple(v.shape) != (B, HKV, S, D) or tuple(o.shape) != (B, H, S, D):
        raise ValueError(f"flash_attention: shapes k {tuple(k.shape)}, v {tuple(v.shape)}, o {tuple(o.shape)} do not fit [B,HKV,S,D], [B,HKV,S,D], [B,H,S,D]")
    if any(t.dtype != q.dtype for t in (k, v, o)):
        raise ValueError("flash_attention: q, k, v and o must have one dtype")
    causal, sm_scale = attrs
    if causal not in (0.0, 1.0):
        raise ValueError(f"flash_attention: causal must be 0 or 1 (got {causal})")
    if B * H * S == 0 or D == 0:
        return
    ieee = q.dtype == torch.float32
    base = CONFIG_32 if ieee else CONFIG_16
    bm, bn, warps, stages = (c if c else b for c, b in zip((BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES), base))
    grid = (triton.cdiv(S, bm), B * H)
    _attn_fwd[grid](q, k, v, o, H, H // HKV, S, D, float(sm_scale) * LOG2E, CAUSAL=causal == 1.0,
                    BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=triton.next_power_of_2(D), IEEE=ieee,
                    num_warps=warps, num_stages=stages)
