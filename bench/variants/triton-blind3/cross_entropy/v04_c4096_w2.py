# variant v04_c4096_w2 of the blind Triton ranking study 3 (bench/triton_variants.py): CHUNK = 4096, CHUNK_NUM_WARPS = 2
# generated from kernels/triton/cross_entropy.py; do not edit (the prediction was made on this text)
"""cross_entropy (Triton starter): loss = mean over non-ignored rows of
logsumexp(logits[r]) - logits[r, targets[r]] (DESIGN §2).

Inputs: logits[B,V] (fp16 / bf16 / fp32), targets[B] int64. Outputs: loss, 0-d fp32.
Attribute 0: ignore_index (default -100): rows whose target equals it are excluded; all rows
ignored gives NaN (0/0), as PyTorch does.

Phase 1, a program per (row, chunk of CHUNK logits): the chunk in registers, its max m and
sum of exp(x - m) in fp32 (one exp per logit; a chunk of all -inf gives m = -inf, s = 0) into
fp32 scratch; the program whose chunk holds the row's target also copies that logit. Splitting
the rows keeps enough bytes in flight on a GPU when B is small next to V (512 x 128256: 8192
programs rather than 512). Phase 2, one program: per row the chunks' (m, s) merged in a fixed
order, the row's loss m + log(s) - logits[r, target] (0 for the logit of a target outside
[0, V)), then the mean over the non-ignored rows. No atomics: bitwise deterministic.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import torch
import triton
import triton.language as tl

# Tunables (the optimizer's search rewrites these assignments; every value is correct):
# @vb-param CHUNK 16384 {1024,2048,4096,8192,16384}  logits of a row per phase-1 program (kept in registers)
CHUNK = 4096  # variant v04_c4096_w2 (starter: 16384)
# @vb-param CHUNK_NUM_WARPS 8 {2,4,8,16}  warps per phase-1 program
CHUNK_NUM_WARPS = 2  # variant v04_c4096_w2 (starter: 8)
# @vb-param FINAL_ROWS 32 {16,32,64,128,256}  rows per step of the final merge and mean
FINAL_ROWS = 32
# @vb-param FINAL_CHUNKS 32 {8,16,32,64}  chunk partials per step of a row's merge
FINAL_CHUNKS = 32
# @vb-param MEAN_NUM_WARPS 8 {1,2,4,8,16}  warps of the final merge and mean's single program
MEAN_NUM_WARPS = 8


@triton.jit
def _chunk_stats(x_ptr, t_ptr, m_ptr, s_ptr, xt_ptr, V, NCH, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    c = pid % NCH
    row = (pid // NCH).to(tl.int64)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * V + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    s = tl.sum(tl.exp(x - tl.where(m == -float("inf"), 0.0, m)), 0)
    tl.store(m_ptr + row * NCH + c, m)
    tl.store(s_ptr + row * NCH + c, s)
    # The program whose chunk holds the row's target copies its logit (none when the target is
    # outside [0, V), ignored rows included; the merge masks those).
    t = tl.load(t_ptr + row)
    mine = (t >= c * CHUNK) & (t < (c + 1) * CHUNK) & (t < V)
    xt = tl.load(x_ptr + row * V + t, mask=mine, other=0.0).to(tl.float32)
    tl.store(xt_ptr + row, xt, mask=mine)


@triton.jit
def _merge_mean(m_ptr, s_ptr, xt_ptr, t_ptr, out_ptr, B, V, NCH, ignore_index,
                ROWS: tl.constexpr, CHUNKS: tl.constexpr, ONE_STEP: tl.constexpr):
    rows = tl.arange(0, ROWS)
    chunks = tl.arange(0, CHUNKS)
    total = tl.zeros([ROWS], tl.float32)
    count = tl.zeros([ROWS], tl.float32)
    for r0 in range(0, B, ROWS):
        r = r0 + rows
        live = r < B
        t = tl.load(t_ptr + r, mask=live, other=ignore_index)
        keep = live & (t != ignore_index)
        xt = tl.load(xt_ptr + r, mask=keep & (t >= 0) & (t < V), other=0.0)
        if ONE_STEP:  # every row's partials in one tile: the row loop is innermost (pipelined)
            mask = live[:, None] & (chunks[None, :] < NCH)
            off = r[:, None].to(tl.int64) * NCH + chunks[None, :]
            mi = tl.load(m_ptr + off, mask=mask, other=-float("inf"))
            si = tl.load(s_ptr + off, mask=mask, other=0.0)
            m = tl.max(mi, 1)
            base = tl.where(m == -float("inf"), 0.0, m)
            s = tl.sum(si * tl.exp(mi - base[:, None]), 1)
        else:
            m = tl.full([ROWS], -float("inf"), tl.float32)
            s = tl.zeros([ROWS], tl.float32)
            for c0 in range(0, NCH, CHUNKS):
                c = c0 + chunks
                mask = live[:, None] & (c[None, :] < NCH)
                off = r[:, None].to(tl.int64) * NCH + c[None, :]
                mi = tl.load(m_ptr + off, mask=mask, other=-float("inf"))
                si = tl.load(s_ptr + off, mask=mask, other=0.0)
                m_new = tl.maximum(m, tl.max(mi, 1))
                base = tl.where(m_new == -float("inf"), 0.0, m_new)
                s = s * tl.exp(m - base) + tl.sum(si * tl.exp(mi - base[:, None]), 1)
                m = m_new
        total += tl.where(keep, m + tl.log(s) - xt, 0.0)
        count += tl.where(keep, 1.0, 0.0)
    tl.store(out_ptr, tl.sum(total, 0) / tl.sum(count, 0))


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 2 or len(outputs) != 1 or len(attrs) != 1:
        raise ValueError("cross_entropy: expected 2 inputs (logits, targets), 1 output, 1 attribute (ignore_index)")
    x, t = inputs
    out = outputs[0]
    if x.dim() != 2 or tuple(t.shape) != (x.shape[0],) or out.dim() != 0:
        raise ValueError(f"cross_entropy: shapes logits {tuple(x.shape)}, targets {tuple(t.shape)}, loss {tuple(out.shape)} do not fit [B,V], [B], []")
    if t.dtype != torch.int64 or out.dtype != torch.float32:
        raise ValueError("cross_entropy: targets must be int64 and loss fp32")
    ignore = attrs[0]
    if ignore != int(ignore):
        raise ValueError(f"cross_entropy: ignore_index must be an integer, got {ignore}")
    B, V = x.shape
    chunk = min(CHUNK, triton.next_power_of_2(max(V, 1)))
    nch = triton.cdiv(V, chunk)
    m = torch.empty(max(B * nch, 1), dtype=torch.float32, device=x.device)
    s = torch.empty(max(B * nch, 1), dtype=torch.float32, device=x.device)
    xt = torch.empty(max(B, 1), dtype=torch.float32, device=x.device)
    if B > 0 and V > 0:
        _chunk_stats[(B * nch,)](x, t, m, s, xt, V, nch, CHUNK=chunk, num_warps=CHUNK_NUM_WARPS)
    chunks = min(FINAL_CHUNKS, triton.next_power_of_2(max(nch, 1)))
    _merge_mean[(1,)](m, s, xt, t, out, B, V, nch, int(ignore), ROWS=FINAL_ROWS, CHUNKS=chunks,
                      ONE_STEP=nch <= chunks, num_warps=MEAN_NUM_WARPS)
