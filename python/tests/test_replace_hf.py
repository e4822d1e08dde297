"""Function-level replacement on Hugging Face models (issue 14, item 4) and the intercept check.

The model is a tiny LlamaForCausalLM built from models/configs/hf_llama_tiny.json (2 layers,
hidden 64, 4 query heads / 2 KV heads: GQA, SwiGLU 128, vocab 512). Its RoPE is the free function
apply_rotary_pos_emb, its attention F.scaled_dot_product_attention with enable_gqa=True.
"""
import shutil
import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT
from vladbud import kernels as vk
from vladbud import replace as vr
from vladbud.loader import load_from_request, make_inputs, model_depth
from vladbud.verify import rel_error, tolerance

pytest.importorskip("transformers")

CONFIG = f"{ROOT}/models/configs/hf_llama_tiny.json"
TYPES = ["rmsnorm", "rotary_embedding", "flash_attention", "fused_mlp", "matmul"]
ALL_TYPES = ["matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp", "cross_entropy",
             "rotary_embedding", "reduce"]
REQ = {"module": "transformers", "class_name": "AutoModelForCausalLM", "config": CONFIG,
       "input_shape": "2,16", "dtype": "fp32", "device": "cpu", "warmup": 1, "iters": 1,
       "remeasure": 0}
# Per forward of the tiny model: 2 layers x (q, k, v, o) + lm_head linears; 2 SwiGLU MLPs
# (3 linears each); 2 x 2 + 1 RMSNorms; one SDPA per layer; RoPE on q and on k per layer.
CALLS = {"matmul": 9, "fused_mlp": 2, "rmsnorm": 5, "flash_attention": 2, "rotary_embedding": 4}


@pytest.fixture(scope="module")
def hf_profile():
    """profile.json's result of the tiny HF Llama (a real CPU profile)."""
    from vladbud.profile import run
    return run(dict(REQ))


@pytest.fixture(scope="module")
def hf_model():
    return load_from_request(dict(REQ))


@pytest.fixture
def bound(kernel_lib):
    for t in ALL_TYPES:
        vk.bind(t, kernel_lib(t))
    yield
    vk.unbind_all()


def _forward(model, types, seeds):
    """(outputs, op calls per forward) of `model` under patched(types) on `seeds`."""
    ys = []
    vk.CALLS.clear()
    with torch.inference_mode(), vr.patched(types):
        for s in seeds:
            ys.append(model(make_inputs(model, 2, 16, "cpu", seed=s)).logits)
    return ys, {t: vk.CALLS.get(t, 0) / len(seeds) for t in types}


def _reference(model, seeds):
    with torch.inference_mode():
        return [model(make_inputs(model, 2, 16, "cpu", seed=s)).logits for s in seeds]


def test_config_files_build_the_models_of_issue_14():
    import json
    with open(f"{ROOT}/models/configs/hf_llama_836m.json") as f:
        big = json.load(f)
    assert big["model_type"] == "llama" and big["num_key_value_heads"] == 4
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model(big.pop("model_type"), **big)
    with torch.device("meta"):  # no memory: only the parameter count
        m = AutoModelForCausalLM.from_config(cfg)
    assert sum(p.numel() for p in m.parameters()) == 835_782_656


def test_all_types_replaced_correct_and_intercepting_what_was_profiled(hf_model, hf_profile, bound):
    assert [n for n, _ in vr.hf_rope_functions()] == ["transformers.models.llama.modeling_llama"]
    repl, counts = vr.with_kernels(hf_model, TYPES)
    assert counts == {"matmul": 9, "fused_mlp": 2, "rmsnorm": 5}  # LlamaMLP, LlamaRMSNorm matched
    seeds = [0, 1]
    ys, calls = _forward(repl, TYPES, seeds)
    assert calls == CALLS
    tol = tolerance("fp32", model_depth(hf_model))
    for y, ref in zip(ys, _reference(hf_model, seeds)):
        err, bad = rel_error(y, ref)
        assert not bad and err <= tol, (err, tol)
    rows = vr.intercept_check(hf_profile["entries"], TYPES, calls)
    assert [r["type"] for r in rows] == TYPES
    assert all(r["ok"] for r in rows), [r["message"] for r in rows if not r["ok"]]
    assert {r["type"]: r["expected"] for r in rows} == CALLS
    # the RoPE frequency product of LlamaRotaryEmbedding is a matmul the profile sees and
    # nothing replaces: reported, not expected
    mm = next(r for r in rows if r["type"] == "matmul")
    assert [g["group"].split(" ")[1] for g in mm["not_covered"]] == ["[aten::matmul]"]


def test_without_fused_mlp_matmul_takes_the_swiglu_linears(hf_model, hf_profile, bound):
    repl, counts = vr.with_kernels(hf_model, ["matmul"])
    _, calls = _forward(repl, ["matmul"], [0])
    assert calls == {"matmul": 9 + 3 * 2}
    [row] = vr.intercept_check(hf_profile["entries"], ["matmul"], calls)
    assert row["ok"] and row["expected"] == 15, row["message"]
    assert any("fused_mlp not replaced" in g["rule"] for g in row["groups"])


def _other_rope(q, k, cos, sin, unsqueeze_dim=1):
    """The same rotation as HF's, written differently: not the function replace.py knows."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rot(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


def test_a_rope_function_it_does_not_know_is_a_mismatch_naming_the_group(hf_model, hf_profile, bound,
                                                                        monkeypatch):
    ml = sys.modules["transformers.models.llama.modeling_llama"]
    monkeypatch.setattr(ml, "apply_rotary_pos_emb", _other_rope)
    assert vr.hf_rope_functions() == []
    repl, _ = vr.with_kernels(hf_model, TYPES)
    ys, calls = _forward(repl, TYPES, [0])
    assert calls["rotary_embedding"] == 0                       # nothing intercepted ...
    err, _ = rel_error(ys[0], _reference(hf_model, [0])[0])    # ... and the model still right
    assert err <= tolerance("fp32", 2)
    rows = {r["type"]: r for r in vr.intercept_check(hf_profile["entries"], TYPES, calls)}
    bad = rows["rotary_embedding"]
    assert not bad["ok"] and bad["expected"] == 4 and bad["intercepted"] == 0
    msg = bad["message"]
    assert "intercept check failed for rotary_embedding" in msg
    assert "aten::mul + aten::slice + aten::slice + aten::neg + aten::cat" in msg  # the group
    assert "H=4" in msg and "H=2" in msg and "made 0" in msg and "replace.py" in msg
    assert all(r["ok"] for t, r in rows.items() if t != "rotary_embedding")


def test_intercept_check_rules_on_synthetic_entries():
    mlp = {"type": "fused_mlp", "op": "aten::linear + aten::silu + aten::linear + aten::mul + aten::linear",
           "dims": {"B": 8, "D": 16, "H": 32}, "calls": 2.0}
    lin = {"type": "matmul", "op": "aten::linear", "dims": {"M": 8, "N": 16, "K": 16}, "calls": 4.0}
    bmm = {"type": "matmul", "op": "aten::matmul", "dims": {"M": 8, "N": 8, "K": 4}, "calls": 2.0}
    masked = {"type": "flash_attention", "op": "aten::scaled_dot_product_attention", "dims": None,
              "calls": 2.0, "note": "explicit attn_mask tensor"}
    entries = [mlp, lin, bmm, masked, {"type": None, "op": "aten::add", "dims": None, "calls": 9.0}]
    rows = {r["type"]: r for r in vr.intercept_check(entries, ["matmul", "flash_attention"],
                                                     {"matmul": 10, "flash_attention": 0})}
    assert rows["matmul"]["ok"] and rows["matmul"]["expected"] == 4 + 3 * 2
    assert rows["flash_attention"]["ok"] and rows["flash_attention"]["expected"] == 0
    assert rows["flash_attention"]["not_covered"][0]["reason"] == "explicit attn_mask tensor"
    more, fused = vr.intercept_check(entries, ["matmul", "fused_mlp"], {"matmul": 6, "fused_mlp": 2})
    assert fused["ok"]
    assert not more["ok"] and more["expected"] == 4 and "re-run `vladbud profile`" in more["message"]
    [less] = vr.intercept_check(entries, ["fused_mlp"], {})
    assert not less["ok"] and "group fused_mlp [aten::linear + aten::silu" in less["message"]


def _attributes():
    import transformers.masking_utils as mu
    ml = sys.modules["transformers.models.llama.modeling_llama"]
    return {"sdpa": F.scaled_dot_product_attention, "F.softmax": F.softmax, "torch.softmax": torch.softmax,
            "Tensor.softmax": torch.Tensor.softmax, "torch.sum": torch.sum, "Tensor.sum": torch.Tensor.sum,
            "F.cross_entropy": F.cross_entropy, "F.linear": F.linear, "F.layer_norm": F.layer_norm,
            "rope": ml.apply_rotary_pos_emb, "mask": mu._ignore_causal_mask_sdpa}


def test_patched_restores_every_attribute_on_exit_and_on_error(hf_model):
    assert vr.OperatorMode is vr.Patched
    before = _attributes()
    own = {n for n in ("softmax", "sum") if n in vars(torch.Tensor)}
    with vr.patched(ALL_TYPES):
        inside = _attributes()
    assert all(inside[k] is not before[k] for k in before), [k for k in before if inside[k] is before[k]]
    after = _attributes()
    assert all(after[k] is before[k] for k in before)
    assert {n for n in ("softmax", "sum") if n in vars(torch.Tensor)} == own
    with pytest.raises(ValueError):
        with vr.patched(["rotary_embedding", "reduce"]):
            raise ValueError("inside")
    assert _attributes() == before


def test_function_level_wrappers_take_what_the_ops_can_and_fall_back_otherwise(bound):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 5, 16, generator=g), torch.randn(24, 16, generator=g)
    q = torch.randn(1, 4, 8, 16, generator=g)
    k, v = torch.randn(1, 2, 8, 16, generator=g), torch.randn(1, 2, 8, 16, generator=g)
    tgt = torch.randint(0, 24, (10,), generator=g)

    def fn(x, w, q, k, v, tgt):
        h = F.layer_norm(F.linear(x, w), (24,))
        a = F.softmax(h, dim=-1) + torch.softmax(h, -1) + h.softmax(-1) + h.softmax(0)  # last: falls back
        s = torch.sum(a, dim=-1) + a.sum(-1) + a.sum(-1, keepdim=True)[..., 0]          # last: falls back
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)    # GQA, K/V as they are
        o2 = F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool))  # mask
        return s.sum() + o.mean() + o2.mean() + F.cross_entropy(h.reshape(-1, 24), tgt)

    types = ["matmul", "layernorm", "softmax", "reduce", "flash_attention", "cross_entropy"]
    want = {"matmul": 1, "layernorm": 1, "softmax": 3, "reduce": 2, "flash_attention": 1, "cross_entropy": 1}
    ref = fn(x, w, q, k, v, tgt)
    vk.CALLS.clear()
    with vr.patched(types) as p:
        y = fn(x, w, q, k, v, tgt)
    assert dict(vk.CALLS) == want and p.counts == want
    assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()
    c = torch.compile(fn, backend="aot_eager", fullgraph=True)  # no graph break in any wrapper
    vk.CALLS.clear()
    with vr.patched(types):
        y = c(x, w, q, k, v, tgt)
    assert dict(vk.CALLS) == want
    assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_calls_autograd_records_stay_pytorch_and_calls_sdpa_rejects_stay_sdpas(bound):
    """The ops have no backward: under grad mode a call with an input that requires grad runs
    PyTorch's own function (backward works, nothing is counted); under no_grad the op takes it.
    Calls SDPA itself rejects (more than six positional arguments, a non-bool enable_gqa) are
    left to SDPA, which raises its TypeError, as without VladBud."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 4, 9, 8, generator=g, requires_grad=True)
    k = torch.randn(1, 2, 9, 8, generator=g, requires_grad=True)
    v = torch.randn(1, 2, 9, 8, generator=g, requires_grad=True)
    x = torch.randn(3, 5, generator=g, requires_grad=True)
    vk.CALLS.clear()
    with vr.patched(["flash_attention", "softmax"]) as p:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        (o.sum() + x.softmax(-1).pow(2).sum()).backward()
        assert q.grad is not None and k.grad is not None and v.grad is not None and x.grad is not None
        assert p.counts == {} and not any(vk.CALLS.values())
        with torch.no_grad():
            got = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x.softmax(-1)
        assert p.counts == {"flash_attention": 1, "softmax": 1}
        qd, kd = q.detach(), k.detach()
        with pytest.raises(TypeError, match="positional"):
            F.scaled_dot_product_attention(qd, kd, kd, None, 0.0, True, None, True)
        with pytest.raises(TypeError, match="enable_gqa"):
            F.scaled_dot_product_attention(qd, kd, kd, is_causal=True, enable_gqa=1)
    assert p.counts == {"flash_attention": 1, "softmax": 1}
    torch.testing.assert_close(got, o.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="torch.compile's CPU backend (inductor) needs a C++ compiler")
def test_sdpa_with_enable_gqa_calls_the_op_with_unexpanded_kv(bound, monkeypatch):
    """GQA through enable_gqa: the wrapper hands K/V [B,H_kv,S,D] to the op as they are (the same
    storage, no expanded copy), makes one op call per SDPA call, and matches SDPA; without
    enable_gqa (or with H_kv not dividing H) SDPA itself runs."""
    seen = []

    def spy(q, k, v, causal, scale):
        seen.append((q, k, v))
        return torch.ops.vladbud.flash_attention(q, k, v, causal, scale)

    monkeypatch.setattr(vr, "ops", type("Ops", (), {"flash_attention": staticmethod(spy)}))
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 8, 19, 16, generator=g)
    for hkv in (2, 1):
        k, v = torch.randn(2, hkv, 19, 16, generator=g), torch.randn(2, hkv, 19, 16, generator=g)
        for causal in (True, False):
            want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            seen.clear()
            vk.CALLS.clear()
            with vr.patched(["flash_attention"]) as p:
                got = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            assert len(seen) == 1 and vk.CALLS["flash_attention"] == 1 and p.counts == {"flash_attention": 1}
            _, k_op, v_op = seen[0]
            assert k_op.shape == (2, hkv, 19, 16) and v_op.shape == (2, hkv, 19, 16)
            assert k_op.data_ptr() == k.data_ptr() and v_op.data_ptr() == v.data_ptr()  # no copy
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # Fewer KV heads without enable_gqa is SDPA's business (broadcast of one head, else its
    # error), and so are KV heads that do not divide H: the wrapper leaves them to SDPA.
    seen.clear()
    k2 = torch.randn(2, 2, 19, 16, generator=g)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # k, v: 1 head, broadcast
    with vr.patched(["flash_attention"]):
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), want,
                                   rtol=0, atol=0)
        with pytest.raises(RuntimeError, match="must match the size"):
            F.scaled_dot_product_attention(q, k2, k2, is_causal=True)
        with pytest.raises(RuntimeError, match="must divide the number of heads"):
            k3 = torch.randn(2, 3, 19, 16, generator=g)
            F.scaled_dot_product_attention(q, k3, k3, enable_gqa=True)
    assert seen == []


def test_profile_of_a_gqa_model_gives_the_kv_heads(hf_profile):
    """The tiny HF Llama (4 query heads, 2 KV heads, SDPA with enable_gqa): its attention entries
    carry HKV = 2, so extract and bench build k/v [B,2,S,D] problems."""
    fa = [e for e in hf_profile["entries"] if e["type"] == "flash_attention" and e["dims"]]
    assert fa
    for e in fa:
        assert e["dims"]["H"] == 4 and e["dims"]["HKV"] == 2, e["dims"]


def test_replacements_trace_under_torch_compile(hf_model, bound):
    """Inductor on the CPU, the tiny HF Llama: Dynamo traces through the wrappers into the ops
    (fake implementations), one graph, every type called; about 15 s on two cores."""
    repl, _ = vr.with_kernels(hf_model, TYPES)
    torch._dynamo.reset()
    x = make_inputs(hf_model, 2, 16, "cpu", seed=3)
    with vr.patched(TYPES):
        explained = torch._dynamo.explain(repl)(x)
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    torch._dynamo.reset()
    compiled = torch.compile(repl)
    vk.CALLS.clear()
    with torch.inference_mode(), vr.patched(TYPES):
        y = compiled(x).logits  # HF materializes the causal mask while tracing: skipped again
    assert dict(vk.CALLS) == CALLS
    err, bad = rel_error(y, _reference(hf_model, [3])[0])
    assert not bad and err <= tolerance("fp32", 2)
    # outside the context the compiled model recompiles to the original functions (Dynamo guards
    # on the globals it read); the module-level replacements are part of the copy
    vk.CALLS.clear()
    with torch.inference_mode():
        compiled(x)
    assert dict(vk.CALLS) == {"matmul": 9, "fused_mlp": 2, "rmsnorm": 5}
    torch._dynamo.reset()


@pytest.mark.parametrize("model_type,want", [
    ("mistral", {"rotary_embedding": 4, "rmsnorm": 5, "fused_mlp": 2}),
    ("qwen2", {"rotary_embedding": 4, "rmsnorm": 5, "fused_mlp": 2, "matmul": 9}),  # q/k/v biases
    ("gemma", {"rotary_embedding": 4, "rmsnorm": 5, "matmul": 15}),   # x/rms * (1 + w), GELU MLP
    ("gpt_neox", {"rotary_embedding": 4, "layernorm": 5, "matmul": 9}),  # partial rotary (25 %)
])
def test_other_hf_families(model_type, want, tmp_path, bound):
    """Other layouts the replacements know: each type intercepts what the profile saw."""
    import json
    from vladbud.profile import run
    cfg = {"model_type": model_type, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512,
           "max_position_embeddings": 128}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    req = dict(REQ, config=str(path), input_shape="1,8")
    prof = run(dict(req))
    base = load_from_request(dict(req))
    types = sorted(want) + ["flash_attention"]
    repl, _ = vr.with_kernels(base, types)
    x = make_inputs(base, 1, 8, "cpu", seed=0)
    with torch.inference_mode():
        ref = base(x).logits
    vk.CALLS.clear()
    with torch.inference_mode(), vr.patched(types):
        y = repl(x).logits
    calls = {t: vk.CALLS.get(t, 0) for t in types}
    assert calls == dict(want, flash_attention=2)
    err, bad = rel_error(y, ref)
    assert not bad and err <= tolerance("fp32", 2)
    rows = vr.intercept_check(prof["entries"], types, calls)
    assert all(r["ok"] for r in rows), [r["message"] for r in rows if not r["ok"]]
