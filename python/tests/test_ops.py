"""The compiled torch ops (python/vladbud/csrc/vladbud_ops.cpp): opcheck, torch.compile, errors,
call counters, and on a GPU: streams, CUDA-graph capture, torch.compile through a CUDA library."""
import os
import shutil
import subprocess

import pytest
import torch

from conftest import ROOT
from vladbud import kernels as vk

ops = torch.ops.vladbud
# opcheck's own use of torch.jit (not ours).
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


def _inputs(kernel, dtype, device="cpu"):
    """(args) of a small call of each type: tensors of `dtype` (int64 targets), float attrs."""
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    if kernel == "matmul":
        return (r(8, 16), r(16, 4))
    if kernel == "softmax":
        return (r(4, 33),)
    if kernel == "layernorm":
        return (r(4, 32), r(32), r(32), 1e-5)
    if kernel == "rmsnorm":
        return (r(4, 32), r(32), 1e-6)
    if kernel == "flash_attention":
        return (r(1, 2, 8, 8), r(1, 2, 8, 8), r(1, 2, 8, 8), 1.0, 0.35)
    if kernel == "fused_mlp":
        return (r(4, 16), r(32, 16) * 0.2, r(32, 16) * 0.2, r(16, 32) * 0.2)
    if kernel == "cross_entropy":
        t = torch.tensor([3, -100, 49, 0], dtype=torch.int64, device=device)
        return (r(4, 50), t, -100.0)
    if kernel == "rotary_embedding":
        ang = torch.rand(8, 8, generator=g) * 6.28
        return (r(1, 2, 8, 16), ang.cos().to(dtype).to(device), ang.sin().to(dtype).to(device), 0.0)
    if kernel == "reduce":
        return (r(4, 100),)
    raise KeyError(kernel)


@pytest.fixture
def bound(kernel_lib):
    """Every type bound to its CPU starter (kernels/cpu/<type>.cpp); counters cleared."""
    for t in vk.TYPES:
        vk.bind(t, kernel_lib(t))
    vk.CALLS.clear()
    yield
    vk.unbind_all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kernel", vk.TYPES)
def test_opcheck(bound, kernel, dtype):
    args = _inputs(kernel, dtype)
    # schema, fake (Meta) kernel against the real one, AOTAutograd with dynamic shapes.
    torch.library.opcheck(getattr(ops, kernel).default, args)
    out = getattr(ops, kernel)(*args)
    want_dtype = torch.float32 if kernel == "cross_entropy" else dtype
    assert out.dtype == want_dtype and out.is_contiguous()
    if dtype == torch.float32:
        # With inputs that require grad: the op has an Autograd kernel (no formula: the forward
        # runs, a backward raises), as the former custom ops did.
        grad_args = tuple(a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point()
                          else a for a in args)
        torch.library.opcheck(getattr(ops, kernel).default, grad_args, test_utils="test_autograd_registration")


def test_ops_match_references(bound):
    x, w, eps = _inputs("rmsnorm", torch.float32)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    torch.testing.assert_close(ops.rmsnorm(x, w, eps), ref, rtol=1e-5, atol=1e-5)
    (x,) = _inputs("reduce", torch.float32)
    torch.testing.assert_close(ops.reduce(x), x.sum(-1), rtol=1e-5, atol=1e-4)
    xt = x.t()  # non-contiguous input: the op makes it contiguous first
    torch.testing.assert_close(ops.reduce(xt), xt.sum(-1), rtol=1e-5, atol=1e-4)


def test_flash_attention_refuses_other_dtypes_naming_the_supported_ones(bound):
    """float64 (or integer) q/k/v: a clear error naming float16, bfloat16 and float32."""
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="float16, bfloat16 or float32"):
        ops.flash_attention(q, q, q, 1.0, 0.5)
    with pytest.raises(RuntimeError, match="float16, bfloat16 or float32"):
        ops.flash_attention(q.to("meta"), q.to("meta"), q.to("meta"), 1.0, 0.5)


@pytest.mark.parametrize("hkv", [1, 2])
def test_flash_attention_gqa_matches_sdpa_and_passes_opcheck(bound, hkv):
    """K/V with H_kv heads dividing H (GQA; MQA at 1) go to the kernel as they are and give
    SDPA(enable_gqa=True): query head h reads KV head h // (H / H_kv)."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 11, 8, generator=g)
    k, v = torch.randn(2, hkv, 11, 8, generator=g), torch.randn(2, hkv, 11, 8, generator=g)
    torch.library.opcheck(ops.flash_attention.default, (q, k, v, 1.0, 0.35))
    for causal in (True, False):
        got = ops.flash_attention(q, k, v, 1.0 if causal else 0.0, 0.35)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.35,
                                                                enable_gqa=True)
        assert got.shape == q.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_flash_attention_refuses_kv_heads_that_do_not_divide_h(bound, kernel_lib):
    q = torch.randn(1, 4, 8, 8)
    for dev in ("cpu", "meta"):  # the real and the Meta (fake) kernel check alike
        qd = q.to(dev)
        with pytest.raises(RuntimeError, match=r"3 KV heads \(dim 1\) and q has 4 query heads: "
                                               r"grouped-query attention needs H % H_kv == 0"):
            ops.flash_attention(qd, torch.randn(1, 3, 8, 8).to(dev), torch.randn(1, 3, 8, 8).to(dev), 1.0, 0.35)
        with pytest.raises(RuntimeError, match="k and v must have one shape"):
            ops.flash_attention(qd, torch.randn(1, 2, 8, 8).to(dev), torch.randn(1, 1, 8, 8).to(dev), 1.0, 0.35)
        with pytest.raises(RuntimeError, match=r"in B \(dim 0\), S \(dim 2\) and D \(dim 3\)"):
            ops.flash_attention(qd, torch.randn(1, 2, 7, 8).to(dev), torch.randn(1, 2, 7, 8).to(dev), 1.0, 0.35)
    # The CPU starter itself (called without the op's checks) refuses them too, naming the rule.
    lib = vk.KernelLibrary(kernel_lib("flash_attention"), "flash_attention")
    with pytest.raises(vk.KernelError, match="3 KV heads .dim 1. must be >= 1 and divide the 4 query heads"):
        lib.run([q, torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8)], [torch.empty_like(q)], [1.0, 0.35])


def test_requires_grad_forward_runs_backward_raises(bound):
    x, w, eps = _inputs("rmsnorm", torch.float32)
    x.requires_grad_(True)
    y = ops.rmsnorm(x, w, eps)
    assert y.requires_grad
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_compile_fullgraph_matches_eager(bound):
    def fn(x, w):
        return ops.softmax(ops.rmsnorm(x, w, 1e-6))

    x, w, _ = _inputs("rmsnorm", torch.float32)
    torch._dynamo.reset()
    got = torch.compile(fn, fullgraph=True)(x, w)
    torch.testing.assert_close(got, fn(x, w), rtol=0, atol=0)


def test_kernel_failure_raises_with_message(bound, kernel_lib):
    with pytest.raises(vk.KernelError) as e:
        ops.rmsnorm(torch.randn(4, 8), torch.ones(7), 1e-6)  # weight length mismatch
    msg = str(e.value)
    assert "rmsnorm kernel" in msg and kernel_lib("rmsnorm") in msg and "weight" in msg


def test_unbound_type_names_bind(bound):
    vk.unbind_all()
    vk.CALLS.clear()
    with pytest.raises(RuntimeError, match=r"vladbud\.kernels\.bind"):
        ops.reduce(torch.randn(2, 3))
    assert vk.CALLS["reduce"] == 0


def test_rebind_replaces_and_bad_binds_raise(bound, kernel_lib, tmp_path):
    x, w, eps = _inputs("rmsnorm", torch.float32)
    vk.bind("rmsnorm", kernel_lib("layernorm"))  # the wrong ABI: 3 inputs expected
    assert vk.bound("rmsnorm") == kernel_lib("layernorm")
    with pytest.raises(vk.KernelError, match="expected 3 inputs"):
        ops.rmsnorm(x, w, eps)
    vk.bind("rmsnorm", kernel_lib("rmsnorm"))
    ops.rmsnorm(x, w, eps)
    with pytest.raises(RuntimeError, match="unknown kernel type"):
        vk.bind("gemm", kernel_lib("matmul"))
    with pytest.raises(RuntimeError, match="cannot load"):
        vk.bind("reduce", str(tmp_path / "missing.so"))
    with pytest.raises(RuntimeError, match="vladbud.kernels.bind"):  # left unbound
        ops.reduce(torch.randn(2, 3))


def test_call_counters(bound):
    x = torch.randn(2, 5)
    for _ in range(3):
        ops.reduce(x)
    ops.softmax(x)
    with pytest.raises(vk.KernelError):
        ops.rmsnorm(x, torch.ones(4), 1e-6)  # counted: a library was called
    assert vk.CALLS["reduce"] == 3 and vk.CALLS.get("softmax", 0) == 1 and vk.CALLS["rmsnorm"] == 1
    assert vk.CALLS.get("matmul", 0) == 0 and vk.CALLS["matmul"] == 0 and "matmul" not in vk.CALLS
    assert dict(vk.CALLS) == {"softmax": 1, "rmsnorm": 1, "reduce": 3}
    vk.CALLS.clear()
    assert vk.CALLS["reduce"] == 0 and len(vk.CALLS) == 0


# ---- CUDA ----------------------------------------------------------------------------------------

def _nvcc():
    for c in (os.environ.get("VB_NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if c and os.path.isfile(c):
            return c
    return None


@pytest.fixture(scope="module")
def cuda_rmsnorm(tmp_path_factory):
    """Path of kernels/cuda/rmsnorm.cu built with nvcc for this GPU (the CUDA backend's flags)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (set VB_NVCC or put the CUDA toolkit's bin/ on PATH)")
    out = tmp_path_factory.mktemp("cuda")
    # DLPack header: the system's (libdlpack-dev) when there, else torch's copy of it.
    inc = out / "include" / "dlpack"
    inc.mkdir(parents=True)
    shutil.copy(os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "dlpack.h"), inc / "dlpack.h")
    major, minor = torch.cuda.get_device_capability()
    cc = f"{major}{minor}{'a' if (major, minor) == (9, 0) else ''}"
    so = str(out / "rmsnorm_cuda.so")
    subprocess.run([nvcc, "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-shared", "-lineinfo",
                    "-I", os.path.join(ROOT, "kernels", "include"), "-Xcompiler", f"-idirafter{out / 'include'}",
                    "-gencode", f"arch=compute_{cc},code=sm_{cc}",
                    os.path.join(ROOT, "kernels", "cuda", "rmsnorm.cu"), "-o", so], check=True)
    return so


def _rms_ref(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def test_cuda_stream_graph_and_compile(cuda_rmsnorm):
    vk.bind("rmsnorm", cuda_rmsnorm, "cuda")
    try:
        eps = 1e-6
        x = torch.randn(64, 512, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(512, device="cuda", dtype=torch.bfloat16)
        tol = dict(rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(ops.rmsnorm(x, w, eps), _rms_ref(x, w, eps), **tol)

        # A non-default stream: the input is produced on it after a long sleep, so a kernel
        # launched on any other stream would read it too early.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)
            xs = x * 2
            ys = ops.rmsnorm(xs, w, eps)
        s.synchronize()
        torch.testing.assert_close(ys, _rms_ref(x * 2, w, eps), **tol)

        # CUDA-graph capture through the op, replayed on new input data.
        static_x = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ops.rmsnorm(static_x, w, eps)  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = ops.rmsnorm(static_x, w, eps)
        new = torch.randn_like(x)
        static_x.copy_(new)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_y, _rms_ref(new, w, eps), **tol)

        # torch.compile through the op.
        torch._dynamo.reset()
        fn = torch.compile(lambda a, b: ops.rmsnorm(a, b, eps), fullgraph=True)
        torch.testing.assert_close(fn(x, w), _rms_ref(x, w, eps), **tol)
        assert vk.CALLS["rmsnorm"] >= 4
    finally:
        vk.unbind_all()


def test_cpu_library_with_cuda_tensors_is_staged(kernel_lib):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    vk.bind("rmsnorm", kernel_lib("rmsnorm"), "cpu")
    try:
        x = torch.randn(8, 64, device="cuda")
        w = torch.randn(64, device="cuda")
        y = ops.rmsnorm(x, w, 1e-6)
        assert y.device == x.device
        torch.testing.assert_close(y, _rms_ref(x, w, 1e-6), rtol=1e-5, atol=1e-5)
    finally:
        vk.unbind_all()


def test_cuda_op_refuses_an_input_on_another_device(cuda_rmsnorm):
    # The kernel reads raw pointers on the output's device: a CPU weight with a CUDA activation
    # must be refused with both devices named, never read.
    vk.bind("rmsnorm", cuda_rmsnorm, "cuda")
    try:
        x = torch.randn(4, 512, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(512, dtype=torch.bfloat16)
        with pytest.raises(RuntimeError, match="input 1 is on cpu but the output is on cuda"):
            torch.ops.vladbud.rmsnorm(x, w, 1e-6)
    finally:
        vk.unbind_all()

