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


# ---- replace._rope_tables: checked once per forward, not once per layer ----------------------------

def _hf_tables(S=8, D=16, scale=1.0):
    """HF-style cos/sin [1, S, D] with duplicated halves (cat((freqs, freqs)))."""
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.arange(S).float(), inv) * scale
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return emb.cos(), emb.sin()


def test_rope_tables_of_the_same_cos_sin_are_checked_once(monkeypatch):
    from vladbud import replace as vr
    vr._ROPE_LAST[0] = None
    cos, sin = _hf_tables()
    q, k = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16)
    calls = []
    real_equal = torch.equal
    monkeypatch.setattr(torch, "equal", lambda a, b: calls.append(1) or real_equal(a, b))
    first = vr._rope_tables(cos, sin, q, k, 1, False)
    n = len(calls)
    assert first is not None and n >= 2                      # the halves were compared
    for _ in range(3):                                       # the other layers of the forward
        assert vr._rope_tables(cos, sin, q, k, 1, False) is first
    assert len(calls) == n                                   # ... compared nothing again
    torch.testing.assert_close(first[0], cos[0, :, :8])
    torch.testing.assert_close(first[1], sin[0, :, :8])


def test_rope_tables_follow_an_in_place_change_and_a_new_tensor():
    from vladbud import replace as vr
    vr._ROPE_LAST[0] = None
    cos, sin = _hf_tables()
    q, k = torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16)
    first = vr._rope_tables(cos, sin, q, k, 1, False)
    cos.mul_(0.5)                                            # bumps cos._version
    second = vr._rope_tables(cos, sin, q, k, 1, False)
    assert second is not first
    torch.testing.assert_close(second[0], cos[0, :, :8])
    cos[0, :, 0] += 1.0                                      # halves no longer duplicated
    assert vr._rope_tables(cos, sin, q, k, 1, False) is None
    # Another tensor object with HF's layout is checked afresh, not served from the cache.
    cos2, sin2 = _hf_tables(scale=2.0)
    third = vr._rope_tables(cos2, sin2, q, k, 1, False)
    torch.testing.assert_close(third[1], sin2[0, :, :8])
    # Shape checks still run on every call: a q of another length is refused even on a cache hit.
    assert vr._rope_tables(cos2, sin2, torch.randn(1, 4, 7, 16), k, 1, False) is None


def test_rope_tables_under_inference_mode_are_reused_by_identity():
    """Inference tensors have no version counter: the same objects are served from the cache, new
    ones are checked afresh."""
    from vladbud import replace as vr
    vr._ROPE_LAST[0] = None
    with torch.inference_mode():
        cos, sin = _hf_tables()
        q, k = torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16)
        first = vr._rope_tables(cos, sin, q, k, 1, False)
        assert first is not None and vr._rope_tables(cos, sin, q, k, 1, False) is first
        cos2, sin2 = _hf_tables(scale=3.0)
        torch.testing.assert_close(vr._rope_tables(cos2, sin2, q, k, 1, False)[0], cos2[0, :, :8])
