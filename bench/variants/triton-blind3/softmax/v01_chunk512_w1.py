# variant v01_chunk512_w1 of the blind Triton ranking study 3 (bench/triton_variants.py): MAX_BLOCK = 4096, CHUNK = 512, SMALL_NUM_WARPS = 1
# generated from kernels/triton/softmax.py; do not edit (the prediction was made on this text)
"""softmax (Triton starter): y[R,C] = softmax(x[R,C]) over the last dim, max-subtracted (DESIGN §2).

Inputs: x[R,C]. Outputs: y[R,C] (same dtype). No attributes. fp16 / bf16 / fp32; all math in
fp32, the output rounded once. PyTorch semantics: -inf entries give 0, a row of all -inf gives
a row of NaN (exp(-inf - -inf) = NaN).

One program per row. Rows up to MAX_BLOCK columns stay in registers (one read of x, one
write of y); longer rows (vocabulary rows) take two passes: an online max/sum over chunks,
then a second read that writes y. Fixed reduction order: bitwise deterministic.

Python ABI (the Triton backend's form of DESIGN §3): vb_kernel_run(inputs, outputs, attrs)
with contiguous torch tensors in the type's order and the attributes as floats; raises
ValueError for a bad call.
"""
import triton
import triton.language as tl

# Tunables (the optimizer's search rewrites these assignments; every value is correct):
# @vb-param MAX_BLOCK 8192 {256,512,1024,2048,4096,8192,16384}  longest row kept in registers (one pass)
MAX_BLOCK = 4096  # variant v01_chunk512_w1 (starter: 8192)
# @vb-param CHUNK 2048 {512,1024,2048,4096}  columns per step of the two-pass path (longer rows)
CHUNK = 512  # variant v01_chunk512_w1 (starter: 2048)
# @vb-param NUM_WARPS 8 {4,8,16}  warps per program for blocks of 2048 columns or more
NUM_WARPS = 8
# @vb-param SMALL_NUM_WARPS 4 {1,2,4,8}  warps per program for shorter blocks
SMALL_NUM_WARPS = 1  # variant v01_chunk512_w1 (starter: 4)


@triton.jit
def _softmax_row(x_ptr, y_ptr, C, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * C
    y_row = y_ptr + row * C
    cols = tl.arange(0, BLOCK)
    if ONE_PASS:
        x = tl.load(x_row + cols, mask=cols < C, other=-float("inf")).to(tl.float32)
        m = tl.max(x, 0)
        e = tl.exp(x - m)
        y = e / tl.sum(e, 0)
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < C)
    else:
        # Pass 1: running max m and sum s of exp(x - m), rescaled per chunk (per lane, then
        # combined once), so no exp overflows.
        m_v = tl.full([BLOCK], -float("inf"), tl.float32)
        s_v = tl.zeros([BLOCK], tl.float32)
        for start in range(0, C, BLOCK):
            c = start + cols
            x = tl.load(x_row + c, mask=c < C, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_v, x)
            # lanes whose max is still -inf keep s = 0 (avoids -inf - -inf = NaN)
            scale = tl.where(m_new == -float("inf"), 0.0, tl.exp(m_v - m_new))
            s_v = s_v * scale + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
            m_v = m_new
        m = tl.max(m_v, 0)
        s = tl.sum(tl.where(m_v == -float("inf"), 0.0, s_v * tl.exp(m_v - m)), 0)
        for start in range(0, C, BLOCK):
            c = start + cols
            x = tl.load(x_row + c, mask=c < C, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m) / s
            tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=c < C)


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 1 or len(outputs) != 1 or len(attrs) != 0:
        raise ValueError("softmax: expected 1 input, 1 output, 0 attributes")
    x, y = inputs[0], outputs[0]
    if x.dim() != 2 or tuple(y.shape) != tuple(x.shape) or y.dtype != x.dtype:
        raise ValueError(f"softmax: x {tuple(x.shape)} {x.dtype} and y {tuple(y.shape)} {y.dtype} must be [R,C] of one dtype")
    R, C = x.shape
    if R == 0 or C == 0:
        return
    block = min(triton.next_power_of_2(C), MAX_BLOCK)
    one_pass = C <= block
    if not one_pass:
        block = CHUNK
    _softmax_row[(R,)](x, y, C, BLOCK=block, ONE_PASS=one_pass,
                       num_warps=NUM_WARPS if block >= 2048 else SMALL_NUM_WARPS)
