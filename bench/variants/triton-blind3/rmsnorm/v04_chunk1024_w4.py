# variant v04_chunk1024_w4 of the blind Triton ranking study 3 (bench/triton_variants.py): MAX_BLOCK = 4096, CHUNK = 1024, SMALL_NUM_WARPS = 4
# generated from kernels/triton/rmsnorm.py; do not edit (the prediction was made on this text)
"""rmsnorm (Triton starter): y[M,N] = x / sqrt(mean(x^2) + eps) * weight (DESIGN §2).

Inputs: x[M,N], weight[N]. Outputs: y[M,N] (x's dtype). Attribute 0: eps (default 1e-6).
fp16 / bf16 / fp32; statistics and the product in fp32, the output rounded once.

One program per row. Rows up to MAX_BLOCK stay in registers (one read of x); longer rows sum
x^2 over chunks, then re-read x. Fixed reduction order: bitwise deterministic.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import triton
import triton.language as tl

# Tunables (the optimizer's search rewrites these assignments; every value is correct):
# @vb-param MAX_BLOCK 8192 {256,512,1024,2048,4096,8192,16384}  longest row kept in registers (one pass)
MAX_BLOCK = 4096  # variant v04_chunk1024_w4 (starter: 8192)
# @vb-param CHUNK 2048 {512,1024,2048,4096}  columns per step of the chunked path (longer rows)
CHUNK = 1024  # variant v04_chunk1024_w4 (starter: 2048)
# @vb-param NUM_WARPS 8 {4,8,16}  warps per program for blocks of 2048 columns or more
NUM_WARPS = 8
# @vb-param SMALL_NUM_WARPS 4 {1,2,4,8}  warps per program for shorter blocks
SMALL_NUM_WARPS = 4  # variant v04_chunk1024_w4 (starter: 4)


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    if ONE_PASS:
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / N + eps)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < N)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, N, BLOCK):
            c = start + cols
            x = tl.load(x_row + c, mask=c < N, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / N + eps)
        for start in range(0, N, BLOCK):
            c = start + cols
            x = tl.load(x_row + c, mask=c < N, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=c < N, other=0.0).to(tl.float32)
            tl.store(y_row + c, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=c < N)


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 2 or len(outputs) != 1 or len(attrs) != 1:
        raise ValueError("rmsnorm: expected 2 inputs (x, weight), 1 output, 1 attribute (eps)")
    x, w = inputs
    y = outputs[0]
    if x.dim() != 2 or tuple(w.shape) != (x.shape[1],) or tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"rmsnorm: shapes x {tuple(x.shape)}, weight {tuple(w.shape)}, y {tuple(y.shape)} do not fit [M,N], [N], [M,N]")
    if w.dtype != x.dtype or y.dtype != x.dtype:
        raise ValueError("rmsnorm: x, weight and y must have one dtype")
    M, N = x.shape
    if M == 0 or N == 0:
        return
    block = min(triton.next_power_of_2(N), MAX_BLOCK)
    one_pass = N <= block
    if not one_pass:
        block = CHUNK
    _rmsnorm_row[(M,)](x, w, y, N, float(attrs[0]), BLOCK=block, ONE_PASS=one_pass,
                       num_warps=NUM_WARPS if block >= 2048 else SMALL_NUM_WARPS)
