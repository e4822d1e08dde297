"""Deliberately bad (guard regression test): matmul that lets tl.dot use its default input
precision, TF32 on NVIDIA tensor cores, for an fp32 problem. DESIGN §2: fp32 means true fp32,
so it must FAIL the accuracy check; the interpreter runner rounds the operands to TF32 as the
GPU would."""
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk[None, :]), mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk[:, None]) * N + rn[None, :], mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # default input precision: tf32 for fp32 operands
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def vb_kernel_run(inputs, outputs, attrs):
    a, b = inputs
    c = outputs[0]
    M, K = a.shape
    N = b.shape[1]
    if M and N:
        _mm[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, K, BM=64, BN=64, BK=32)
