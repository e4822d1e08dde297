"""RoPE under fp16: the public bug of a complex freqs_cis buffer cast by Module.to(float16)."""
import torch
import torch.nn as nn

from conftest import TINY_LLAMA, model_path
from vladbud.loader import load_model, prepare


def _reference(x64, base=10000.0):
    """Half-split RoPE in float64 of x[B,H,S,D]."""
    D, S = x64.shape[-1], x64.shape[-2]
    half = D // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / D)
    ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
    c, s = ang.cos(), ang.sin()
    x1, x2 = x64[..., :half], x64[..., half:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


class ComplexRope(nn.Module):
    """Meta's original layout: freqs_cis as a complex buffer (the buggy design)."""

    def __init__(self, d, s):
        super().__init__()
        inv = 10000.0 ** (-2.0 * torch.arange(d // 2, dtype=torch.float32) / d)
        self.register_buffer("freqs_cis", torch.polar(torch.ones(s, d // 2), torch.arange(s)[:, None] * inv))


def test_complex_buffer_loses_its_imaginary_part_under_to_fp16():
    m = ComplexRope(8, 4)
    assert m.freqs_cis.imag.abs().max() > 0.5
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.to(torch.float16)
    assert not m.freqs_cis.is_complex()  # the imaginary part (all the sin values) is gone


def test_our_llama_keeps_rope_exact_in_fp16():
    m = load_model(model_path("llama.py"), "Llama", model_args=TINY_LLAMA)
    m = prepare(m, "fp16", "cpu")  # what `vladbud profile --dtype fp16` does
    m.to(torch.float16)            # and the cast of the public bug report
    rope = m.layers[0].attention.rope
    cos, sin = rope.tables(64, "cpu")
    assert cos.dtype == torch.float32 and sin.dtype == torch.float32
    assert not any(b.is_complex() for b in m.buffers())
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 64, 16, generator=g).to(torch.float16)
    y = rope(x)
    assert y.dtype == torch.float16
    ref = _reference(x.double()).to(torch.float16)
    # fp32 math from exact fp16 inputs, rounded once: at most one fp16 ulp from the rounded fp64
    # result, and almost always equal.
    diff = (y.float() - ref.float()).abs()
    ulp = torch.finfo(torch.float16).eps * ref.float().abs().clamp_min(2 ** -14)
    assert bool((diff <= ulp).all())
    assert float((diff == 0).float().mean()) > 0.99
    # the sin half matters: a rotation without it would be far off
    assert float((x.float() * 1.0 - ref.float()).abs().max()) > 0.5


def test_fp16_profile_finds_rope_in_fp16():
    from vladbud.profile import run
    res = run({"model": model_path("llama.py"), "class_name": "Llama", "model_args": TINY_LLAMA,
               "input_shape": "1,32", "dtype": "fp16", "device": "cpu", "warmup": 1, "iters": 1})
    rope = [e for e in res["entries"] if e["type"] == "rotary_embedding"]
    assert rope and rope[0]["dtype"] == "fp16"
    assert rope[0]["dims"] == {"B": 1, "H": 4, "S": 32, "D": 16}
