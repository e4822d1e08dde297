"""The triton backend's Python half: the static source check (no candidate code runs), the
interpreter runner's hash (equal to the C++ runner's FNV-1a) and its refusal of bf16 arithmetic
that Triton's interpreter would compute wrongly."""
import os

import pytest
import torch

from vladbud import triton_build, triton_runner

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_check_accepts_every_starter():
    for t in ("matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp",
              "cross_entropy", "rotary_embedding", "reduce"):
        r = triton_build.check(os.path.join(ROOT, "kernels", "triton", f"{t}.py"))
        assert r["ok"], r


def test_check_refuses_bad_sources_without_running_them(tmp_path):
    ran = tmp_path / "ran"
    bad = tmp_path / "k.py"
    bad.write_text(f"open({str(ran)!r}, 'w').write('x')\nimport triton\n@triton.jit\ndef k(x): pass\n")
    r = triton_build.check(str(bad))
    assert not r["ok"] and "vb_kernel_run" in r["diagnostics"]
    assert not ran.exists(), "the check must not execute the candidate"
    bad.write_text("def vb_kernel_run(inputs, outputs attrs):\n  pass\n")
    r = triton_build.check(str(bad))
    assert not r["ok"] and ":1:" in r["diagnostics"]


def test_fnv1a64_matches_the_cpp_runner():
    # FNV-1a 64 offset basis for empty input; one word and a tail byte as protocol.cpp hashes them.
    assert triton_runner.fnv1a64(b"") == 0xCBF29CE484222325
    h = ((0xCBF29CE484222325 ^ int.from_bytes(b"abcdefgh", "little")) * 0x100000001B3) % 2**64
    h = ((h ^ ord("i")) * 0x100000001B3) % 2**64
    assert triton_runner.fnv1a64(b"abcdefghi") == h


def test_interpreter_refuses_bf16_arithmetic_but_not_conversions():
    os.environ["TRITON_INTERPRET"] = "1"
    import triton
    import triton.language as tl
    triton_runner.patch_interpreter()

    @triton.jit
    def double(x_ptr, y_ptr, AS_FP32: tl.constexpr):
        o = tl.arange(0, 16)
        x = tl.load(x_ptr + o)
        if AS_FP32:
            y = (x.to(tl.float32) * 2).to(y_ptr.dtype.element_ty)
        else:
            y = x * 2
        tl.store(y_ptr + o, y)

    x = torch.randn(16).to(torch.bfloat16)
    y = torch.empty_like(x)
    double[(1,)](x, y, AS_FP32=True)
    assert torch.equal(y, x * 2)
    with pytest.raises(Exception) as e:
        double[(1,)](x, y, AS_FP32=False)
    chain, err = [], e.value
    while err is not None:
        chain.append(type(err).__name__)
        err = err.__cause__ or err.__context__
    assert "InterpreterGap" in chain, chain


def test_aot_scalar_parameters_have_the_bits_tritons_launcher_passes():
    # Triton 3.6's CUDA launcher passes integers as their C type and floats as the bits of the
    # parameter's width (driver.py FLOAT_STORAGE_TYPE); the AOT table stores the same bits.
    import struct
    assert triton_build._scalar_bits("i32", -100) == 0xFFFFFF9C  # cross_entropy's ignore_index
    assert triton_build._scalar_bits("i64", -1) == 0xFFFFFFFFFFFFFFFF
    assert triton_build._scalar_bits("i1", True) == 1
    assert triton_build._scalar_bits("fp32", 1e-5) == struct.unpack("<I", struct.pack("<f", 1e-5))[0]
    assert triton_build._scalar_bits("fp16", 1.0) == 0x3C00
    assert triton_build._scalar_bits("bf16", 1.0) == 0x3F80
    assert triton_build._SCALAR_BYTES["fp32"] == 4 and triton_build._SCALAR_BYTES["i64"] == 8
