"""Deliberately bad (guard regression test): softmax whose store is not masked, so each row
writes BLOCK - C elements past its end (the last row into the guard band after y): must FAIL
with guard 'guard_band' through the Triton interpreter runner as through the C++ runner."""
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * C + cols, mask=cols < C, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + r * C + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty))  # no mask


def vb_kernel_run(inputs, outputs, attrs):
    x, y = inputs[0], outputs[0]
    R, C = x.shape
    if R and C:
        _row[(R,)](x, y, C, BLOCK=triton.next_power_of_2(C + 1))
