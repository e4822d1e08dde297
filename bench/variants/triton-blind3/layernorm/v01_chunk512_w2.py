# variant v01_chunk512_w2 of the blind Triton ranking study 3 (bench/triton_variants.py): MAX_BLOCK = 4096, CHUNK = 512, SMALL_NUM_WARPS = 2
# generated from kernels/triton/layernorm.py; do not edit (the prediction was made on this text)
"""layernorm (Triton starter): y[B,D] = (x - mean) / sqrt(var + eps) * weight + bias (DESIGN §2).

Inputs: x[B,D], weight[D], bias[D]. Outputs: y[B,D] (x's dtype). Attribute 0: eps (default
1e-5). Biased variance over the last dim. fp16 / bf16 / fp32; statistics in fp32, the output
rounded once.

One program per row. Rows up to MAX_BLOCK stay in registers and the variance is the two-pass
sum((x - mean)^2) (exact for large-mean rows); longer rows are read three times (mean, then
the centred sum of squares, then the output). Fixed order: bitwise deterministic.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import triton
import triton.language as tl

# Tunables (the optimizer's search rewrites these assignments; every value is correct):
# @vb-param MAX_BLOCK 8192 {256,512,1024,2048,4096,8192,16384}  longest row kept in registers (one pass)
MAX_BLOCK = 4096  # variant v01_chunk512_w2 (starter: 8192)
# @vb-param CHUNK 2048 {512,1024,2048,4096}  columns per step of the chunked path (longer rows)
CHUNK = 512  # variant v01_chunk512_w2 (starter: 2048)
# @vb-param NUM_WARPS 8 {4,8,16}  warps per program for blocks of 2048 columns or more
NUM_WARPS = 8
# @vb-param SMALL_NUM_WARPS 4 {1,2,4,8}  warps per program for shorter blocks
SMALL_NUM_WARPS = 2  # variant v01_chunk512_w2 (starter: 4)


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, D, eps, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * D
    y_row = y_ptr + row * D
    cols = tl.arange(0, BLOCK)
    if ONE_PASS:
        m = cols < D
        x = tl.load(x_row + cols, mask=m, other=0.0).to(tl.float32)
        mean = tl.sum(x, 0) / D
        xc = tl.where(m, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, 0) / D + eps)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, D, BLOCK):
            c = start + cols
            acc += tl.load(x_row + c, mask=c < D, other=0.0).to(tl.float32)
        mean = tl.sum(acc, 0) / D
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, D, BLOCK):
            c = start + cols
            x = tl.load(x_row + c, mask=c < D, other=0.0).to(tl.float32)
            xc = tl.where(c < D, x - mean, 0.0)
            acc += xc * xc
        rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / D + eps)
        for start in range(0, D, BLOCK):
            c = start + cols
            x = tl.load(x_row + c, mask=c < D, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=c < D, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + c, mask=c < D, other=0.0).to(tl.float32)
            tl.store(y_row + c, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=c < D)


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 3 or len(outputs) != 1 or len(attrs) != 1:
        raise ValueError("layernorm: expected 3 inputs (x, weight, bias), 1 output, 1 attribute (eps)")
    x, w, b = inputs
    y = outputs[0]
    if x.dim() != 2 or tuple(w.shape) != (x.shape[1],) or tuple(b.shape) != (x.shape[1],) \
            or tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"layernorm: shapes x {tuple(x.shape)}, weight {tuple(w.shape)}, bias {tuple(b.shape)}, y {tuple(y.shape)} do not fit [B,D], [D], [D], [B,D]")
    if any(t.dtype != x.dtype for t in (w, b, y)):
        raise ValueError("layernorm: x, weight, bias and y must have one dtype")
    B, D = x.shape
    if B == 0 or D == 0:
        return
    block = min(triton.next_power_of_2(D), MAX_BLOCK)
    one_pass = D <= block
    if not one_pass:
        block = CHUNK
    _layernorm_row[(B,)](x, w, b, y, D, float(attrs[0]), BLOCK=block, ONE_PASS=one_pass,
                         num_warps=NUM_WARPS if block >= 2048 else SMALL_NUM_WARPS)
