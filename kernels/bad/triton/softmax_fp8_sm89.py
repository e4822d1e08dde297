"""Deliberately bad for sm_80 (ladder rung-0 regression test): softmax that rounds its input
through fp8 e4m3 (tl.float8e4nv), which Triton's NVIDIA backend converts only on sm_89 and later
(no fp8 conversion instructions before Ada): compiling it for the A100 (sm_80) must be rejected
at rung 0 with Triton's message, while sm_89 and sm_90a compile it. (Also numerically wrong:
fp8 keeps 3 mantissa bits; it exists for the compile-only rungs.)"""
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * C + cols, mask=cols < C, other=-float("inf"))
    x = x.to(tl.float8e4nv).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + r * C + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < C)


def vb_kernel_run(inputs, outputs, attrs):
    x, y = inputs[0], outputs[0]
    R, C = x.shape
    if R and C:
        _row[(R,)](x, y, C, BLOCK=triton.next_power_of_2(C))
