"""Deliberately bad (build regression test): a Triton source without vb_kernel_run, the Python
form of the kernel ABI. The build must fail with a diagnostic naming it."""
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < N), mask=o < N)
