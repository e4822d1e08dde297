"""Deliberately bad (guard regression test): reduce that accumulates in bf16 for every dtype.
Triton's interpreter cannot compute bf16 arithmetic, so its runner calls the case inconclusive;
for an fp32 problem the evaluator must not accept that (the interpreter device may be
inconclusive for bf16 problems only): the verdict is FAIL."""
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.bfloat16)
    for s in range(0, N, BLOCK):
        c = s + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r * N + c, mask=c < N, other=0.0).to(tl.bfloat16)
    tl.store(y_ptr + r, tl.sum(acc, 0).to(y_ptr.dtype.element_ty))


def vb_kernel_run(inputs, outputs, attrs):
    x, y = inputs[0], outputs[0]
    M, N = x.shape
    if M and N:
        _row[(M,)](x, y, N, BLOCK=min(triton.next_power_of_2(N), 1024))
