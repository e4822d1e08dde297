"""KernelBench support (issue 19): parsing and mapping project-written problem files
(tests/fixtures/kernelbench, KernelBench's format), and each documented way of gaming the
benchmark rejected with its guard named."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from vladbud import BridgeError
from vladbud.kb_eval import evaluate, static_fallbacks
from vladbud.kb_problem import agent_model_new_source, load_problem, map_problem, model_new_source

FIX = os.path.join(ROOT, "tests", "fixtures", "kernelbench")
L1 = os.path.join(FIX, "KernelBench", "level1")
BAD = os.path.join(ROOT, "tests", "fixtures", "kernelbench_bad", "KernelBench", "level1")
SOFTMAX = os.path.join(L1, "23_Small_softmax.py")


def prob(name):
    return os.path.join(L1, name)


def cand(name):
    return os.path.join(FIX, "candidates", name)


@pytest.mark.parametrize("name,kind,dims,attrs", [
    ("1_Small_square_matmul.py", "matmul", {"M": 48, "N": 48, "K": 48}, {}),
    ("4_Small_matvec.py", "matmul", {"M": 40, "N": 1, "K": 300}, {}),
    ("16_Small_matmul_transposed_A.py", "matmul", {"M": 24, "N": 36, "K": 40}, {}),
    ("17_Small_matmul_transposed_B.py", "matmul", {"M": 17, "N": 29, "K": 44}, {}),
    ("18_Small_matmul_transposed_both.py", "matmul", {"M": 20, "N": 28, "K": 33}, {}),
    ("23_Small_softmax.py", "softmax", {"R": 16, "C": 1000}, {}),
    ("36_Small_rmsnorm_dim1.py", "rmsnorm", {"M": 120, "N": 16}, {"eps": 1e-5}),
    ("40_Small_layernorm.py", "layernorm", {"B": 3, "D": 256}, {"eps": 1e-5}),
    ("47_Small_sum_over_dim.py", "reduce", {"M": 198, "N": 40}, {}),
    ("95_Small_cross_entropy.py", "cross_entropy", {"B": 64, "V": 100}, {"ignore_index": -100.0}),
    ("97_Small_sdpa.py", "flash_attention", {"B": 2, "H": 3, "S": 20, "D": 16},
     {"causal": 0.0, "sm_scale": 0.25}),
    ("98_Small_sdpa_large_head.py", "flash_attention", {"B": 1, "H": 2, "S": 12, "D": 320},
     {"causal": 0.0, "sm_scale": 320 ** -0.5}),
])
def test_problem_maps_to_its_type_at_its_shapes(name, kind, dims, attrs):
    m = map_problem(prob(name))
    assert m["mapped"], m.get("reason")
    assert (m["type"], m["dims"], m["attrs"], m["dtype"]) == (kind, dims, attrs, "fp32")


def test_transposes_and_dims_become_layout_steps_not_a_changed_problem():
    m = map_problem(prob("18_Small_matmul_transposed_both.py"))
    assert m["layout"]["trans_a"] and m["layout"]["trans_b"]
    r = map_problem(prob("36_Small_rmsnorm_dim1.py"))
    assert r["layout"]["dim"] == 1 and any("dim 1 moved last" in s for s in r["layout_steps"])


def _same_as_model(name):
    """The generated ModelNew, with torch ops standing in for the VladBud kernel, computes the
    problem's Model exactly: the layout step keeps the problem's semantics."""
    m = map_problem(prob(name))
    src = model_new_source(m, name)
    ns = {}
    exec(compile(src.replace("import vladbud.kernels", "import torch as _unused"), name, "exec"), ns)
    _, Model, get_inputs, get_init_inputs = load_problem(prob(name))
    torch.manual_seed(0)
    init = get_init_inputs()
    ref, new = Model(*init), ns["ModelNew"](*init)
    xs = get_inputs()
    return ref(*xs), new, xs


class _FakeOps:
    """torch.ops.vladbud.<type> implemented with the type's reference semantics (DESIGN §2)."""

    def matmul(self, a, b):
        assert a.is_contiguous() and b.is_contiguous()
        return a @ b

    def rmsnorm(self, x, w, eps):
        assert x.dim() == 2 and x.is_contiguous()
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def reduce(self, x):
        assert x.dim() == 2 and x.is_contiguous()
        return x.sum(-1)

    def layernorm(self, x, w, b, eps):
        assert x.dim() == 2
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


@pytest.mark.parametrize("name", ["16_Small_matmul_transposed_A.py", "18_Small_matmul_transposed_both.py",
                                  "36_Small_rmsnorm_dim1.py", "47_Small_sum_over_dim.py",
                                  "40_Small_layernorm.py"])
def test_generated_model_new_keeps_the_problems_semantics(name, monkeypatch):
    monkeypatch.setattr(torch.ops, "vladbud", _FakeOps(), raising=False)
    out, new, xs = _same_as_model(name)
    got = new(*xs)
    assert got.shape == out.shape
    torch.testing.assert_close(got, out, atol=1e-5, rtol=1e-5)


def test_unmapped_problem_gets_an_agent_candidate_with_the_reason():
    m = map_problem(prob("19_Small_relu.py"))
    assert not m["mapped"] and "relu" in m["reason"]
    src = agent_model_new_source(prob("19_Small_relu.py"), "level1/19_Small_relu", m["reason"])
    assert "class ModelNew(" in src and "no kernel" in src


@pytest.mark.parametrize("name,message", [
    ("1_No_get_inputs.py", "lacks get_inputs"),
    ("2_Syntax_error.py", "is not valid Python"),
])
def test_malformed_problem_file_is_refused_naming_what_is_wrong(name, message):
    with pytest.raises(BridgeError, match=message):
        map_problem(os.path.join(BAD, name))
    with pytest.raises(BridgeError, match="does not exist"):
        map_problem(os.path.join(BAD, "404_missing.py"))


def test_a_correct_model_new_passes_with_fp64_error_reported():
    r = evaluate({"problem": SOFTMAX, "candidate": cand("softmax_manual.py"), "reps": 3})
    assert r["verdict"] == "PASS", r
    assert r["fp64"]["pass"] and r["fp64"]["rel_err"] < 1e-6
    assert r["speedup"] > 0 and len(r["trials"]) == 5


@pytest.mark.parametrize("candidate,guard", [
    ("softmax_zeros.py", "constant_output"),
    ("softmax_calls_reference.py", "no_kernel"),
    ("softmax_try_except.py", "try_except_fallback"),
    ("softmax_caches.py", "stale_output"),
    ("softmax_mutates_input.py", "input_mutation"),
    ("softmax_wrong.py", "mismatch"),
])
def test_each_hack_is_rejected_with_its_guard(candidate, guard):
    r = evaluate({"problem": SOFTMAX, "candidate": cand(candidate), "reps": 0})
    assert (r["verdict"], r["guard"]) == ("FAIL", guard), r
    assert r["reason"]


def test_zeros_pass_kernelbench_tolerance_but_not_vladbud():
    r = evaluate({"problem": SOFTMAX, "candidate": cand("softmax_zeros.py"), "reps": 0})
    assert r["kb_correct"] is True and r["guard"] == "constant_output"


def test_patching_torch_at_import_is_caught(tmp_path):
    # Its own process: the candidate replaces torch.softmax for the rest of the process.
    req, res = tmp_path / "req.json", tmp_path / "res.json"
    req.write_text(json.dumps({"action": "bench", "problem": SOFTMAX,
                               "candidate": cand("softmax_patches_torch.py"), "reps": 0}))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    subprocess.run([sys.executable, "-m", "vladbud.kernelbench", str(req), str(res)], check=True, env=env)
    r = json.loads(res.read_text())
    assert (r["verdict"], r["guard"]) == ("FAIL", "torch_patched"), r


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the side-stream guard needs a CUDA GPU "
                    "(device events on the current stream vs a device-wide synchronize)")
def test_side_stream_is_caught_on_a_gpu():
    r = evaluate({"problem": SOFTMAX, "candidate": cand("softmax_side_stream.py"), "reps": 20,
                  "device": "cuda"})
    assert (r["verdict"], r["guard"]) == ("FAIL", "side_stream"), r


def test_static_fallback_scan_allows_a_reraise():
    assert static_fallbacks("try:\n    f()\nexcept ImportError as e:\n    raise RuntimeError('x') from e\n") == []
    assert static_fallbacks("try:\n    f()\nexcept Exception:\n    g()\n")


MATMUL = os.path.join(L1, "1_Small_square_matmul.py")


def test_fp32_matmul_problems_are_marked_tf32_and_nothing_else_is():
    for name in ("1_Small_square_matmul.py", "17_Small_matmul_transposed_B.py", "4_Small_matvec.py"):
        assert map_problem(prob(name))["precision"] == "tf32", name
    for name in ("23_Small_softmax.py", "36_Small_rmsnorm_dim1.py", "97_Small_sdpa.py"):
        assert "precision" not in map_problem(prob(name)), name
    m = map_problem(prob("17_Small_matmul_transposed_B.py"))
    assert m["layout"]["trans_b"] and not m["layout"]["trans_a"]
    assert any("B is stored [N,K] = [29,44]" in s for s in m["layout_steps"])


def test_tf32_products_pass_in_kernelbench_mode_with_tf32_reported():
    r = evaluate({"problem": MATMUL, "candidate": cand("matmul_tf32.py"), "reps": 0, "precision": "tf32",
                  "strict": True})
    assert r["verdict"] == "PASS", r
    assert r["precision"] == "tf32" and "TF32" in r["fp64"]["note"]
    assert r["fp64"]["pass"] and "allclose" in r["fp64"]["rule"]
    assert 1e-5 < r["fp64"]["rel_err"] < 1e-2  # really TF32-rounded, and within KernelBench's rule


def test_tf32_products_fail_vladbuds_fp32_contract_outside_kernelbench_mode():
    r = evaluate({"problem": MATMUL, "candidate": cand("matmul_tf32.py"), "reps": 0, "strict": True})
    assert (r["verdict"], r["guard"], r["precision"]) == ("FAIL", "fp64_oracle", "fp32"), r
    assert r["kb_correct"] is True  # KernelBench's allclose alone would have passed it


@pytest.mark.parametrize("req,message", [
    ({"precision": "fp8"}, "precision 'fp8' is unknown"),
    ({"precision": "tf32", "dtype": "bf16"}, "fp32 problems only"),
])
def test_bad_precision_is_refused(req, message):
    with pytest.raises(BridgeError, match=message):
        evaluate({"problem": MATMUL, "candidate": cand("matmul_tf32.py"), "reps": 0, **req})


def test_inputs_on_device_is_ignored_on_the_cpu():
    r = evaluate({"problem": SOFTMAX, "candidate": cand("softmax_manual.py"), "reps": 0, "inputs_on_device": True})
    assert r["verdict"] == "PASS", r
    assert not any("--inputs-on-device" in w for w in r["warnings"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="drawing inputs on the device needs a CUDA GPU")
def test_inputs_on_device_draws_on_the_gpu_and_says_so():
    r = evaluate({"problem": SOFTMAX, "candidate": cand("softmax_manual.py"), "reps": 3, "device": "cuda",
                  "inputs_on_device": True})
    assert r["verdict"] == "PASS", r
    assert any("--inputs-on-device" in w for w in r["warnings"])
