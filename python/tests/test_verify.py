"""Kernels as torch custom ops over DLPack, replacement, and end-to-end verification."""
import textwrap

import pytest
import torch

from conftest import TINY_GPT2, TINY_LLAMA, model_path
from vladbud import kernels as vk
from vladbud.verify import run, tolerance


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matmul_custom_op_through_dlpack(kernel_lib, dtype):
    vk.bind("matmul", kernel_lib("matmul"))
    g = torch.Generator().manual_seed(0)
    a = torch.randn(37, 64, generator=g).to(dtype)
    b = torch.randn(64, 19, generator=g).to(dtype)
    c = torch.ops.vladbud.matmul(a, b)
    assert c.dtype == dtype and c.shape == (37, 19)
    ref = (a.double() @ b.double())
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < {torch.float32: 1e-6, torch.bfloat16: 1e-2, torch.float16: 1e-3}[dtype]


def test_kernel_error_is_raised(kernel_lib):
    vk.bind("rmsnorm", kernel_lib("rmsnorm"))
    with pytest.raises(vk.KernelError):
        torch.ops.vladbud.rmsnorm(torch.randn(4, 8), torch.ones(7), 1e-6)  # weight length mismatch


def _req(file, cls, args, types, kernel_lib, **kw):
    r = {"model": model_path(file), "class_name": cls, "model_args": args, "input_shape": "2,16",
         "dtype": "fp32", "device": "cpu", "reps": 2, "warmup": 1, "seeds": [0, 1],
         "kernels": [{"type": t, "library": kernel_lib(src), "source": str(src)} for t, src in types]}
    r.update(kw)
    return r


def test_gpt2_verify_passes_with_the_starters(kernel_lib):
    res = run(_req("gpt2.py", "GPT2", TINY_GPT2,
                   [("matmul", "matmul"), ("layernorm", "layernorm"), ("flash_attention", "flash_attention")],
                   kernel_lib))
    assert res["verdict"] == "PASS", res["seeds"]
    calls = {k["type"]: k["calls_per_forward"] for k in res["kernels"]}
    assert calls == {"matmul": 9, "layernorm": 5, "flash_attention": 2}
    assert res["tolerance"] == pytest.approx(tolerance("fp32", 2))
    assert res["speedup"] > 0


def test_llama_verify_covers_its_types(kernel_lib):
    res = run(_req("llama.py", "Llama", TINY_LLAMA,
                   [("fused_mlp", "fused_mlp"), ("rmsnorm", "rmsnorm"), ("rotary_embedding", "rotary_embedding"),
                    ("matmul", "matmul")], kernel_lib))
    assert res["verdict"] == "PASS", res["seeds"]
    # Each type alone: matmul alone also serves the SwiGLU's three linears per layer (2 x 3 + 9).
    calls = {k["type"]: k["calls_per_forward"] for k in res["kernels"]}
    assert calls == {"fused_mlp": 2, "rmsnorm": 5, "rotary_embedding": 4, "matmul": 15}


def test_diagnose_names_the_kernel_that_breaks_the_output(kernel_lib, tmp_path):
    bad = tmp_path / "layernorm_no_bias.cpp"
    bad.write_text(textwrap.dedent("""
        #include <cmath>
        #include <vector>
        #include "vb_kernel.h"
        // LayerNorm that ignores its bias (a deliberately wrong kernel).
        extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                                     const double* attrs, int n_attrs, void*) {
          if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
          const int64_t rows = in[0].shape[0], n = in[0].shape[1];
          const vbk::Dt dt = vbk::dtype_of(in[0]);
          std::vector<float> x(n), w(n);
          vbk::load_f32(vbk::data_ptr(in[1]), dt, 0, n, w.data());
          for (int64_t r = 0; r < rows; ++r) {
            vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
            double m = 0, v = 0;
            for (float a : x) m += a;
            m /= n;
            for (float a : x) v += (a - m) * (a - m);
            const float inv = 1.0f / std::sqrt(float(v / n) + float(attrs[0]));
            for (int64_t j = 0; j < n; ++j) x[j] = float((x[j] - m) * inv) * w[j];
            vbk::store_f32(x.data(), dt, vbk::data_ptr(out[0]), r * n, n);
          }
          return 0;
        }
    """))
    # GPT-2's LayerNorm biases are zero at init, which hides a kernel that drops the bias:
    # give them values.
    from vladbud import verify as V
    orig = V.load_from_request

    def with_bias(req):
        m = orig(req)
        torch.manual_seed(5)
        for mod in m.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.bias.data.normal_(0, 0.5)
        return m

    V.load_from_request = with_bias
    try:
        res = run(_req("gpt2.py", "GPT2", TINY_GPT2, [("matmul", "matmul"), ("layernorm", str(bad))],
                       kernel_lib, diagnose=True, seeds=[0]))
    finally:
        V.load_from_request = orig
    assert res["verdict"] == "FAIL"
    assert res["breaking"] == ["layernorm"]
    assert next(d for d in res["diagnose"] if d["type"] == "matmul")["pass"]


def test_pytorch_baseline_of_gqa_attention_is_sdpa_with_enable_gqa():
    """dims with HKV < H: the baseline's K/V have HKV heads and SDPA runs with enable_gqa=True,
    equal to SDPA on K/V expanded to H heads (query head h reads KV head h // (H/HKV))."""
    import torch
    import torch.nn.functional as F
    from vladbud.baseline import _inputs, pytorch_call
    d = {"B": 2, "H": 6, "HKV": 3, "S": 9, "D": 8}
    a = {"causal": 1.0, "sm_scale": 0.3}
    i = _inputs("flash_attention", d, a, torch.float32, "cpu", torch.Generator().manual_seed(0))
    assert [tuple(t.shape) for t in i] == [(2, 6, 9, 8), (2, 3, 9, 8), (2, 3, 9, 8)]
    _, fn = pytorch_call("flash_attention", a)
    want = F.scaled_dot_product_attention(i[0], i[1].repeat_interleave(2, 1), i[2].repeat_interleave(2, 1),
                                          is_causal=True, scale=0.3)
    torch.testing.assert_close(fn(i), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernel,dims,attrs", [
    ("matmul", {"M": 16, "N": 8, "K": 32}, {}),
    ("softmax", {"R": 4, "C": 33}, {}),
    ("layernorm", {"B": 4, "D": 64}, {"eps": 1e-5}),
    ("rmsnorm", {"M": 4, "N": 64}, {"eps": 1e-6}),
    ("flash_attention", {"B": 1, "H": 2, "S": 16, "D": 8}, {"causal": 1.0, "sm_scale": 0.35}),
    ("flash_attention", {"B": 1, "H": 4, "HKV": 2, "S": 16, "D": 8}, {"causal": 1.0, "sm_scale": 0.35}),
    ("fused_mlp", {"B": 4, "D": 16, "H": 32}, {}),
    ("cross_entropy", {"B": 4, "V": 50}, {"ignore_index": -100.0}),
    ("rotary_embedding", {"B": 1, "H": 2, "S": 8, "D": 16}, {"interleaved": 0.0}),
    ("reduce", {"M": 4, "N": 100}, {}),
])
def test_pytorch_baseline_times_every_type(kernel, dims, attrs):
    from vladbud.baseline import run as baseline
    r = baseline({"kernel": kernel, "dims": dims, "attrs": attrs, "dtype": "bf16", "device": "cpu",
                  "rotation_sets": 2, "min_reps": 3, "min_time_s": 0.0, "max_time_s": 0.5})
    assert r["reps"] >= 3 and r["median_us"] > 0 and r["p10_us"] <= r["p90_us"]
    assert r["stepped"] is False  # a library call times in this process


def test_pytorch_baseline_command_steps_like_the_evaluator_and_reports_the_childs_errors(tmp_path):
    """`python -m vladbud.baseline` (what `vladbud bench` runs) times in a forked child stopped
    before each timed call and continued by the parent, as the evaluator times a kernel; not
    stepped on request. A bad request fails in the child and the command reports its error."""
    import json
    import subprocess
    import sys
    req = {"kernel": "softmax", "dims": {"R": 4, "C": 33}, "attrs": {}, "dtype": "fp32",
           "device": "cpu", "rotation_sets": 2, "min_reps": 5, "min_time_s": 0.0, "max_time_s": 0.5}

    def cmd(r):
        (tmp_path / "req.json").write_text(json.dumps(r))
        import os
        import vladbud
        env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(vladbud.__file__))}
        p = subprocess.run([sys.executable, "-m", "vladbud.baseline", str(tmp_path / "req.json"),
                            str(tmp_path / "res.json")], capture_output=True, text=True, timeout=120,
                           env=env)
        return p, (json.loads((tmp_path / "res.json").read_text()) if p.returncode == 0 else None)

    p, r = cmd(req)
    assert p.returncode == 0, p.stderr
    assert r["stepped"] is True and r["reps"] >= 5 and r["median_us"] > 0
    p, r = cmd({**req, "stepped": False})
    assert p.returncode == 0 and r["stepped"] is False
    (tmp_path / "res.json").unlink()
    p, r = cmd({**req, "kernel": "softmaxx"})
    assert p.returncode != 0 and "unknown kernel type 'softmaxx'" in p.stderr + p.stdout
    assert not (tmp_path / "res.json").exists()


OPS_MODEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class OpsModel(nn.Module):
    """Uses softmax, cross_entropy and sum through torch functions (operator-level replacement)."""

    def __init__(self, vocab_size=300, hidden=32, n_layer=2):
        super().__init__()
        torch.manual_seed(0)
        self.vocab_size, self.n_layer = vocab_size, n_layer
        self.emb = nn.Embedding(vocab_size, hidden)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, ids):
        h = self.emb(ids)
        p = F.softmax(h, dim=-1)
        logits = self.head(h * p).reshape(-1, self.vocab_size)
        loss = F.cross_entropy(logits, ids.reshape(-1))
        return torch.sum(logits, dim=-1) * loss
'''


def test_operator_level_softmax_cross_entropy_reduce(kernel_lib, tmp_path):
    f = tmp_path / "ops_model.py"
    f.write_text(OPS_MODEL)
    req = {"model": str(f), "class_name": "OpsModel", "model_args": {}, "input_shape": "2,16",
           "dtype": "fp32", "device": "cpu", "reps": 2, "warmup": 1, "seeds": [0, 1],
           "kernels": [{"type": t, "library": kernel_lib(t), "source": t}
                       for t in ("softmax", "cross_entropy", "reduce")]}
    res = run(req)
    assert res["verdict"] == "PASS", res["seeds"]
    calls = {k["type"]: k["calls_per_forward"] for k in res["kernels"]}
    assert calls == {"softmax": 1, "cross_entropy": 1, "reduce": 1}
    assert all(k["modules_replaced"] == 0 for k in res["kernels"])  # operator level


# --- The end-to-end rule: a candidate goes in only if it makes the model faster beyond the noise.

SLOW_RMSNORM = r"""
#include <cmath>
#include <thread>
#include <chrono>
#include <vector>
#include "vb_kernel.h"
// A correct RMSNorm that sleeps 3 ms per call: correct but slow (the verify selection must drop it).
extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1)) return e;
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(n), w(n);
  vbk::load_f32(vbk::data_ptr(in[1]), vbk::dtype_of(in[1]), 0, n, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    double ss = 0;
    for (float a : x) ss += double(a) * a;
    const float inv = 1.0f / std::sqrt(float(ss / n) + float(attrs[0]));
    for (int64_t j = 0; j < n; ++j) x[j] = (x[j] * inv) * w[j];
    vbk::store_f32(x.data(), dt, vbk::data_ptr(out[0]), r * n, n);
  }
  return 0;
}
"""

# A model whose own RMSNorm is deliberately slow in PyTorch (a sleep in its forward), so that
# VladBud's rmsnorm is faster inside the model by a wide margin.
SLOW_TORCH_MODEL = """
import time
import torch
import torch.nn as nn


class SlowRMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(d) + 0.5)
        self.eps = eps

    def forward(self, x):
        time.sleep(0.015)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Tiny(nn.Module):
    def __init__(self, vocab_size=64, d=32, n_layer=2):
        super().__init__()
        torch.manual_seed(0)
        self.vocab_size, self.n_layer = vocab_size, n_layer
        self.emb = nn.Embedding(vocab_size, d)
        self.norms = nn.ModuleList([SlowRMSNorm(d) for _ in range(n_layer)])
        self.head = nn.Linear(d, vocab_size, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        for n in self.norms:
            h = h + n(h)
        return self.head(h)
"""


def _tiny_req(tmp_path, kernel_lib, types, **kw):
    f = tmp_path / "tiny_slow.py"
    f.write_text(SLOW_TORCH_MODEL)
    r = {"model": str(f), "class_name": "Tiny", "model_args": {}, "input_shape": "1,8",
         "dtype": "fp32", "device": "cpu", "reps": 7, "warmup": 1, "seeds": [0],
         "kernels": [{"type": t, "library": kernel_lib(src), "source": str(src)} for t, src in types]}
    r.update(kw)
    return r


def test_faster_kernel_is_handed_over_and_slow_correct_one_dropped(kernel_lib, tmp_path):
    # Our rmsnorm replaces a 15 ms-per-call PyTorch module: faster in the model by a wide margin
    # (the margin covers a busy 2-core machine), kept.
    res = run(_tiny_req(tmp_path, kernel_lib, [("rmsnorm", "rmsnorm")]))
    assert res["verdict"] == "PASS"
    c = res["candidates"][0]
    assert c["decision"] == "in" and c["handed_over"], c
    assert c["in_model_speedup"] > 1.3 and c["in_model_ci"][0] > 1.0
    assert res["kernels_in"] == ["rmsnorm"] and res["speedup"] > 1.3
    assert res["end_to_end"]["vladbud_ms"] < res["end_to_end"]["eager_ms"]


def test_slow_but_correct_kernel_is_dropped(kernel_lib, tmp_path):
    slow = tmp_path / "rmsnorm_sleepy.cpp"
    slow.write_text(SLOW_RMSNORM)
    res = run(_req("llama.py", "Llama", TINY_LLAMA, [("rmsnorm", str(slow))], kernel_lib, reps=5))
    assert res["verdict"] == "PASS"  # correct: the output passes, it is just slow
    c = res["candidates"][0]
    assert c["correct"] and c["decision"] == "dropped" and not c["handed_over"], c
    assert "not faster in the model" in c["reason"]
    assert c["in_model_speedup"] < 1.0
    assert res["kernels_in"] == [] and res["kernels_dropped"] == ["rmsnorm"]
    assert res["speedup"] == 1.0  # nothing handed over: the model itself


def test_kernel_slower_than_pytorch_at_its_own_shape_is_not_plugged_in(kernel_lib):
    req = _req("gpt2.py", "GPT2", TINY_GPT2, [("layernorm", "layernorm")], kernel_lib)
    req["kernels"][0]["own_shape_speedup"] = 0.42
    res = run(req)
    c = res["candidates"][0]
    assert c["decision"] == "dropped" and "slower than PyTorch at its own shape (0.420x)" in c["reason"]
    assert "in_model_speedup" not in c  # not timed in the model at all
    assert res["kernels_in"] == []


def test_select_off_plugs_in_every_correct_kernel(kernel_lib, tmp_path):
    slow = tmp_path / "rmsnorm_sleepy.cpp"
    slow.write_text(SLOW_RMSNORM)
    res = run(_req("llama.py", "Llama", TINY_LLAMA, [("rmsnorm", str(slow))], kernel_lib, select=False))
    assert res["kernels_in"] == ["rmsnorm"]
    assert res["speedup"] < 1.0  # the diagnosis mode shows the slowdown instead of hiding it


@pytest.mark.parametrize("n,k_expected", [(5, 1), (9, 2), (20, 6)])
def test_median_ci_is_the_sign_test_interval(n, k_expected):
    from vladbud.verify import median_ci
    vals = list(range(1, n + 1))
    med, lo, hi = median_ci(vals)
    assert lo == k_expected and hi == n + 1 - k_expected


def test_paired_decision_needs_consistent_rounds():
    from vladbud.verify import paired_decision
    base = [10.0] * 9
    assert paired_decision(base, [5.0] * 9)["faster"]
    noisy = [9.8, 10.3, 9.9, 10.1, 9.7, 10.2, 9.9, 10.4, 9.8]  # +-3 %: never "faster"
    d = paired_decision(base, noisy)
    assert not d["faster"] and not d["slower"]
    with pytest.raises(ValueError):
        paired_decision([], [])


def test_compile_baseline_times_eager_compile_and_both_with_kernels(kernel_lib, tmp_path):
    # --compile: the baseline is torch.compile of the model; the eager winner (our rmsnorm in
    # place of a sleeping PyTorch module) goes into the compiled model through the compiled op.
    res = run(_tiny_req(tmp_path, kernel_lib, [("rmsnorm", "rmsnorm")], compile=True, reps=6))
    e = res["end_to_end"]
    assert res["verdict"] == "PASS" and e["baseline"] == "compile"
    for k in ("eager_ms", "compile_ms", "vladbud_ms", "vladbud_compile_ms"):
        assert e[k] is not None and e[k] > 0, (k, e)
    assert res["kernels_in"] == ["rmsnorm"], res["candidates"]
    assert e["vladbud_compile_ms"] < e["compile_ms"]


def test_compiled_decision_is_made_alone_whatever_the_eager_decision(kernel_lib, tmp_path, monkeypatch):
    # Canned timings: in eager the candidate is no faster (dropped there), inside the compiled
    # model it is 20 % faster in every round, and the end-to-end rounds confirm it against the
    # compiled baseline: it is handed over in the compiled model (e.g. HF attention, whose own
    # compiled path runs with a materialized mask).
    import vladbud.verify as V
    seen = []

    def fake_time_variants(variants, x, dev, warmup, reps, progress=None):
        names = [v.name for v in variants]
        seen.append(names)
        fast = {"compile+rmsnorm": 8.0, "vladbud+compile": 8.0}
        return {n: [fast.get(n, 10.0) + 0.01 * ((i + j) % 3) for i in range(reps)]
                for j, n in enumerate(names)}, 1

    monkeypatch.setattr(V, "time_variants", fake_time_variants)
    res = run(_tiny_req(tmp_path, kernel_lib, [("rmsnorm", "rmsnorm")], compile=True, reps=6))
    c = res["candidates"][0]
    assert c["decision"] == "dropped" and "not faster in the model" in c["reason"], c
    assert c["compiled_decision"] == "in" and c["compiled_speedup"] > 1.2, c
    assert ["compile", "compile+rmsnorm"] in seen
    assert c["handed_over"] and res["kernels_in"] == ["rmsnorm"], c
    assert res["verdict"] == "PASS" and res["end_to_end"]["baseline"] == "compile"
    assert res["speedup"] > 1.2


def test_a_candidate_that_fails_its_screen_is_never_compiled(kernel_lib, tmp_path, monkeypatch):
    import vladbud.verify as V
    compiled = []
    monkeypatch.setattr(V, "_compile", lambda m: compiled.append(m) or m)
    req = _tiny_req(tmp_path, kernel_lib, [("rmsnorm", "rmsnorm")], compile=True, reps=6)
    req["kernels"][0]["own_shape_speedup"] = 0.5
    res = run(req)
    c = res["candidates"][0]
    assert "slower than PyTorch at its own shape" in c["reason"] and "compiled_decision" not in c
    assert len(compiled) == 1  # the baseline only
    assert res["kernels_in"] == [] and res["speedup"] == 1.0


def test_a_lucky_winner_not_confirmed_by_the_end_to_end_rounds_is_not_handed_over(kernel_lib, monkeypatch):
    # Canned timings: the candidate's own rounds say "faster", the independent end-to-end rounds
    # say "no different"; the confirmation decides, so nothing is handed over.
    import vladbud.verify as V
    calls = {"n": 0}

    def fake_time_variants(variants, x, dev, warmup, reps, progress=None):
        calls["n"] += 1
        names = [v.name for v in variants]
        if calls["n"] == 1:  # the candidate alone: 10 % faster in every round
            return {names[0]: [10.0] * reps, names[1]: [9.0] * reps}, 1
        return {n: [10.0 + 0.1 * ((i + j) % 3) for i in range(reps)] for j, n in enumerate(names)}, 1

    monkeypatch.setattr(V, "time_variants", fake_time_variants)
    res = run(_req("gpt2.py", "GPT2", TINY_GPT2, [("layernorm", "layernorm")], kernel_lib, reps=9))
    c = res["candidates"][0]
    assert c["decision"] == "in" and not c["handed_over"], c
    assert "not confirmed" in c["combination_note"]
    assert res["kernels_in"] == [] and res["speedup"] == 1.0


def test_fewer_than_six_rounds_never_decide():
    from vladbud.verify import paired_decision
    d = paired_decision([10.0] * 5, [1.0] * 5)
    assert not d["faster"] and d["speedup"] == pytest.approx(10.0)
    assert paired_decision([10.0] * 6, [1.0] * 6)["faster"]


def test_competing_tasks_takes_the_least_reading_less_this_thread():
    from vladbud.verify import competing_tasks
    seq = iter([3, 1, 2])
    assert competing_tasks("cpu", read=lambda: next(seq), gap_s=0) == 0  # least 1, less ourselves
    seq = iter([4, 3, 5])
    assert competing_tasks("cpu", read=lambda: next(seq), gap_s=0) == 2
    # A GPU forward keeps one host core busy: only tasks beyond the other cores compete.
    seq = iter([4, 4, 4])
    assert competing_tasks("cuda", read=lambda: next(seq), cores=2, gap_s=0) == 2
    seq = iter([4, 4, 4])
    assert competing_tasks("cuda", read=lambda: next(seq), cores=16, gap_s=0) == 0
    # Unreadable /proc/stat: unknown, not 0.
    assert competing_tasks("cpu", read=lambda: None, gap_s=0) is None


def test_procs_running_reads_proc_stat_and_refuses_a_damaged_file(tmp_path):
    from vladbud.verify import procs_running
    good = tmp_path / "stat"
    good.write_text("cpu  1 2 3\nprocs_running 3\nprocs_blocked 0\n")
    assert procs_running(str(good)) == 3
    bad = tmp_path / "bad"
    bad.write_text("cpu  1 2 3\nprocs_running x\n")
    assert procs_running(str(bad)) is None
    assert procs_running(str(tmp_path / "missing")) is None
    assert isinstance(procs_running(), int)  # this machine's


def test_contention_log_flags_a_run_with_enough_busy_rounds():
    from vladbud.verify import ContentionLog
    log = ContentionLog()
    assert log.summary()["contended"] is False  # nothing sampled
    log.readings = [0] * 8 + [1]  # one busy round of 9: not enough
    assert log.summary() == {"rounds_sampled": 9, "contended_rounds": 1, "max_other_runnable": 1,
                             "contended": False}
    log.readings = [0] * 7 + [1, 2]
    assert log.summary()["contended"] is True and log.summary()["max_other_runnable"] == 2
    log.readings = [None, None, 3, 0]  # unknown readings do not count either way
    s = log.summary()
    assert s["rounds_sampled"] == 2 and s["contended_rounds"] == 1 and s["contended"] is False


def test_verify_warns_when_its_rounds_ran_under_contention(kernel_lib, monkeypatch):
    import vladbud.verify as V
    monkeypatch.setattr(V, "procs_running", lambda stat_path="/proc/stat": 5)  # 4 others always
    res = run(_req("gpt2.py", "GPT2", TINY_GPT2, [("layernorm", "layernorm")], kernel_lib))
    assert res["contention"]["contended"] is True
    assert res["contention"]["max_other_runnable"] == 4
    assert any("competed for the cores" in w for w in res.get("warnings", []))
