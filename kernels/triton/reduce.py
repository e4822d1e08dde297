"""reduce (Triton starter): y[M] = sum over the last dim of x[M,N] (DESIGN §2).

Inputs: x[M,N]. Outputs: y[M] (x's dtype). No attributes. fp16 / bf16 / fp32; fp32
accumulation, the output rounded once.

One program per row, chunks of BLOCK columns summed lane-wise, then one tree reduction: a fixed
order, bitwise deterministic.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import triton
import triton.language as tl

# Tunables (the optimizer's search rewrites these assignments; every value is correct):
# @vb-param MAX_BLOCK 4096 {512,1024,2048,4096,8192}  columns summed lane-wise per step
MAX_BLOCK = 4096
# @vb-param NUM_WARPS 8 {4,8,16}  warps per program for blocks of 2048 columns or more
NUM_WARPS = 8
# @vb-param SMALL_NUM_WARPS 4 {1,2,4,8}  warps per program for shorter blocks
SMALL_NUM_WARPS = 4


@triton.jit
def _reduce_row(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        acc += tl.load(x_row + c, mask=c < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, 0).to(y_ptr.dtype.element_ty))


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 1 or len(outputs) != 1 or len(attrs) != 0:
        raise ValueError("reduce: expected 1 input, 1 output, 0 attributes")
    x, y = inputs[0], outputs[0]
    if x.dim() != 2 or tuple(y.shape) != (x.shape[0],) or y.dtype != x.dtype:
        raise ValueError(f"reduce: x {tuple(x.shape)} {x.dtype} and y {tuple(y.shape)} {y.dtype} must be [M,N] and [M] of one dtype")
    M, N = x.shape
    if M == 0:
        return
    if N == 0:
        y.zero_()
        return
    block = min(triton.next_power_of_2(N), MAX_BLOCK)
    _reduce_row[(M,)](x, y, N, BLOCK=block,
                      num_warps=NUM_WARPS if block >= 2048 else SMALL_NUM_WARPS)
