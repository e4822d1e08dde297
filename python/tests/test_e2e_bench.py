"""bench/e2e.py's pure parts: rows from a verify.json, the Markdown, the refusals, a failing step
recorded instead of crashing the run. The verify.json here is written by hand (the fields of the
new `vladbud verify --compile --json`); no model runs."""
import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def e2e():
    spec = importlib.util.spec_from_file_location("vb_bench_e2e", os.path.join(ROOT, "bench", "e2e.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VERIFY = {
    "verdict": "PASS",
    "candidates": [
        {"type": "rmsnorm", "source": "kernels/01_rmsnorm/rmsnorm.cpp", "decision": "in",
         "reason": "faster in the model beyond the noise", "in_model_speedup": 1.08,
         "in_model_ci": [1.03, 1.12], "own_shape_speedup": 1.9, "rel_error": 3.1e-7,
         "calls_per_forward": 17, "expected_calls": 17},
        {"type": "matmul", "source": "kernels/02_matmul/matmul.cpp", "decision": "dropped",
         "reason": "slower than PyTorch in the model", "in_model_speedup": 0.61,
         "in_model_ci": [0.58, 0.64], "own_shape_speedup": None, "rel_error": 1.0e-6,
         "calls_per_forward": 49, "expected_calls": 49},
    ],
    "kernels_in": ["rmsnorm"], "kernels_dropped": ["matmul"],
    "end_to_end": {"eager_ms": 100.0, "compile_ms": 80.0, "vladbud_ms": 90.0,
                   "vladbud_compile_ms": 76.0, "baseline": "compile", "speedup": 1.0526,
                   "ci": [1.01, 1.09], "noise_pct": 2.5,
                   "protocol": "3 warm-up each, 9 alternating rounds, median"},
    "max_rel_error": 3.1e-7, "speedup": 1.0526,
}


def spec(e2e, name="gpt2", machine="cpu"):
    return e2e.model_specs([name], machine)[0]


def write_ws(tmp_path, doc, name="gpt2"):
    ws = tmp_path / name
    ws.mkdir()
    (ws / "verify.json").write_text(json.dumps(doc))
    return str(ws)


def test_row_from_verify_json(e2e, tmp_path):
    row = e2e.row_from_workspace(spec(e2e), "cpu", write_ws(tmp_path, VERIFY))
    for k in e2e.ROW_KEYS:
        assert k in row
    assert (row["model"], row["dtype"], row["input"], row["device"]) == ("gpt2", "fp32", "1,64", "cpu")
    assert row["eager_ms"] == 100.0 and row["compile_ms"] == 80.0
    assert row["vladbud_ms"] == 90.0 and row["vladbud_compile_ms"] == 76.0
    assert row["speedup_vs_eager"] == pytest.approx(100 / 90)
    assert row["speedup_vs_compile"] == pytest.approx(80 / 76)
    assert row["kernels_in"] == ["rmsnorm"] and row["kernels_dropped"] == ["matmul"]
    assert row["max_rel_error"] == pytest.approx(3.1e-7) and row["noise_pct"] == 2.5
    assert row["verdict"] == "PASS" and row["status"] == "measured"
    assert row["verify_ci"] == [1.01, 1.09] and row["verify_baseline"] == "compile"
    assert [c["decision"] for c in row["candidates"]] == ["in", "dropped"]
    assert row["liger_ms"] is None
    json.dumps(row)  # serialisable


def test_row_without_compile_and_old_format(e2e, tmp_path):
    doc = json.loads(json.dumps(VERIFY))
    doc["end_to_end"]["compile_ms"] = None
    doc["end_to_end"]["vladbud_compile_ms"] = None
    row = e2e.row_from_workspace(spec(e2e), "cpu", write_ws(tmp_path, doc))
    assert row["speedup_vs_compile"] is None and row["speedup_vs_eager"] == pytest.approx(100 / 90)
    assert any("compile" in n for n in row["notes"])
    old = {"verdict": "PASS", "speedup": 0.8, "latency": {"baseline_ms": 1.0, "vladbud_ms": 1.25}}
    row = e2e.row_from_workspace(spec(e2e), "cpu", write_ws(tmp_path, old, "old"))
    assert row["eager_ms"] is None and row["speedup_vs_eager"] is None
    assert any("end_to_end" in n for n in row["notes"])


def test_markdown(e2e, tmp_path):
    row = e2e.row_from_workspace(spec(e2e), "cpu", write_ws(tmp_path, VERIFY))
    row["liger_note"] = "not an HF transformers model (Liger-Kernel patches HF model classes)"
    bad = e2e.empty_row(spec(e2e, "bert"), "cpu")
    bad["status"] = "error"
    bad["errors"].append("profile: exit 1: boom")
    header = {"date": "2026-12-03T10:00:00Z", "machine_kind": "cpu", "command": "bench/e2e.py --models gpt2,bert",
              "git_commit": "abc123", "machine": {"hostname": "box", "cpu_model": "Xeon", "cpus": 2,
                                                  "gpu": None, "load_avg_before": [0.5, 0.4, 0.3],
                                                  "load_avg_after": [1.0, 0.5, 0.3]},
              "torch": "2.11.0", "transformers": "5.17.0"}
    md = e2e.render_markdown(header, [row, bad])
    assert "$ bench/e2e.py --models gpt2,bert" in md and "box" in md and "abc123" in md
    assert "| gpt2 | fp32 | 1,64 | cpu | 100.00 | 80.00 | — | 90.00 | 76.00 | 1.111× | 1.053× |" in md
    assert "| bert | fp32 | 1,64 | cpu |" in md and "ERROR" in md and "boom" in md
    assert "| rmsnorm | `kernels/01_rmsnorm/rmsnorm.cpp` | in |" in md
    assert "| matmul |" in md and "dropped" in md and "[0.580, 0.640]" in md
    assert "not an HF transformers model" in md
    assert "load average before [0.5, 0.4, 0.3]" in md and "warning" not in md
    assert "| 1.00e-06 | 49 (49) |" in md  # calls per forward (expected)
    header["machine"]["load_avg_after"] = [3.5, 2.0, 1.0]
    assert "**warning**: the load average passed the 2 logical CPUs" in e2e.render_markdown(header, [row])
    mdp, jsp = e2e.write_outputs(str(tmp_path / "out"), "cpu", header, [row, bad])
    doc = json.loads(open(jsp).read())
    assert doc["header"]["git_commit"] == "abc123" and [r["model"] for r in doc["rows"]] == ["gpt2", "bert"]
    assert os.path.basename(mdp) == "e2e-cpu.md"


def test_liger_fill_and_eligibility(e2e, tmp_path):
    row = e2e.row_from_workspace(spec(e2e), "cpu", write_ws(tmp_path, VERIFY))
    e2e.fill_liger(row, {"eager_ms": 50.0, "liger_ms": 40.0, "speedup": 1.2, "ci": [1.1, 1.3],
                         "rel_error": 1e-3, "protocol": "p"})
    assert row["liger_ms_raw"] == 40.0 and row["liger_eager_ms"] == 50.0
    assert row["liger_ratio"] == pytest.approx(1.2) and row["liger_ci"] == [1.1, 1.3]
    assert row["liger_ms"] == pytest.approx(100.0 / 1.2) and row["liger_scaled"]  # verify's eager / speedup
    md = e2e.render_markdown({"machine_kind": "h200"}, [row])
    assert "83.33 (1.200×)" in md and "raw medians there: eager 50.00 ms, Liger 40.00 ms" in md
    bare = e2e.empty_row(spec(e2e), "cuda")
    e2e.fill_liger(bare, {"eager_ms": 50.0, "liger_ms": 40.0})
    assert bare["liger_ms"] == 40.0 and bare["liger_ratio"] == pytest.approx(1.25) and not bare["liger_scaled"]
    fn, why = e2e.liger_eligibility(spec(e2e), "cuda")
    assert fn is None and "HF" in why
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    s = {"name": "hf", "module": "transformers", "class_name": "AutoModelForCausalLM", "config": str(cfg)}
    assert e2e.liger_eligibility(s, "cuda") == ("apply_liger_kernel_to_llama", None)
    fn, why = e2e.liger_eligibility(s, "cpu")
    assert fn is None and "GPU" in why
    cfg.write_text(json.dumps({"model_type": "gpt2"}))
    fn, why = e2e.liger_eligibility(s, "cuda")
    assert fn is None and "gpt2" in why


def test_refusals(e2e, tmp_path, capsys):
    with pytest.raises(e2e.E2EError, match="does not exist"):
        e2e.load_verify(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(e2e.E2EError, match="verify.json does not exist"):
        e2e.load_verify(str(tmp_path / "empty"))
    (tmp_path / "empty" / "verify.json").write_text("{not json")
    with pytest.raises(e2e.E2EError, match="not valid JSON"):
        e2e.load_verify(str(tmp_path / "empty"))
    with pytest.raises(e2e.E2EError, match="unknown model 'gpt3'.*gpt2"):
        e2e.model_specs("gpt2,gpt3", "cpu")
    with pytest.raises(e2e.E2EError, match="--machine"):
        e2e.model_specs("gpt2", "tpu")
    with pytest.raises(e2e.E2EError, match="BATCH,SEQ"):
        e2e.model_specs("gpt2", "cpu", input_shape="64")
    with pytest.raises(e2e.E2EError, match="dtype"):
        e2e.model_specs("gpt2", "cpu", dtype="fp8")
    assert e2e.main(["--models", "gpt3", "--machine", "cpu"]) == 2
    assert "unknown model 'gpt3'" in capsys.readouterr().err
    assert e2e.main(["--machine", "cpu", "--models", "gpt2", "--from-workspaces",
                     "--work", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert e2e.main(["--machine", "cpu", "--step-limit", "verify"]) == 2


def test_defaults_per_machine(e2e):
    assert [s["name"] for s in e2e.model_specs("", "cpu")] == ["gpt2", "llama", "bert"]
    h = {s["name"]: s for s in e2e.model_specs("", "h200")}
    assert (h["hf-llama-836m"]["dtype"], h["hf-llama-836m"]["input"]) == ("bf16", "1,2048")
    assert (h["llama"]["dtype"], h["llama"]["input"]) == ("fp16", "4,256")
    assert (h["gpt2"]["dtype"], h["gpt2"]["input"]) == ("bf16", "1,1024")
    assert (h["bert"]["dtype"], h["bert"]["input"]) == ("bf16", "8,512")
    a = e2e.profile_args(h["hf-llama-836m"], "cuda")
    assert a[:2] == ["--module", "transformers"] and "--config" in a and "AutoModelForCausalLM" in a


def test_failed_step_is_recorded(e2e, tmp_path):
    fake = tmp_path / "vladbud"
    fake.write_text("#!/bin/sh\necho \"vladbud profile: boom ($1)\" >&2\nexit 3\n")
    fake.chmod(0o755)
    row = e2e.run_model(spec(e2e), "cpu", str(tmp_path / "work"), vb=str(fake), liger=True)
    assert row["status"] == "error" and row["eager_ms"] is None
    assert any("profile: exit 3" in e and "boom" in e for e in row["errors"])
    assert [s["step"] for s in row["steps"]] == ["profile"]
    assert "not an HF" in row["liger_note"]
    # The same workspace again is refused, not overwritten.
    row = e2e.run_model(spec(e2e), "cpu", str(tmp_path / "work"), vb=str(fake))
    assert any("already exists" in e for e in row["errors"])


def test_step_timeout_kills(e2e):
    r = e2e.run_step("verify", [sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert r["timed_out"] and "time limit" in r["error"] and r["seconds"] < 10
    r = e2e.run_step("verify", ["true"], 0)
    assert "skipped" in r["error"]


def test_merge(e2e, tmp_path):
    hdr = {"date": "d1", "machine_kind": "h200", "command": "bench/e2e.py --models a", "git_commit": "c1",
           "machine": {"hostname": "vm"}}
    a = e2e.empty_row(spec(e2e, "gpt2", "h200"), "cuda")
    a["status"] = "error"
    b = dict(a, status="measured", eager_ms=5.0)
    c = e2e.empty_row(spec(e2e, "bert", "h200"), "cuda")
    (tmp_path / "1.json").write_text(json.dumps({"header": hdr, "rows": [a, c]}))
    (tmp_path / "2.json").write_text(json.dumps({"header": dict(hdr, date="d2"), "rows": [b]}))
    assert e2e.main(["--merge", str(tmp_path / "1.json"), str(tmp_path / "2.json"),
                     "--outdir", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "e2e-h200.json").read_text())
    assert [r["model"] for r in doc["rows"]] == ["gpt2", "bert"]
    assert doc["rows"][0]["eager_ms"] == 5.0 and doc["rows"][0]["from_run"] == "d2"
    assert len(doc["header"]["merged_from"]) == 2
    assert "merged from" in (tmp_path / "o" / "e2e-h200.md").read_text()
    (tmp_path / "bad.json").write_text("[]")
    assert e2e.main(["--merge", str(tmp_path / "bad.json"), "--outdir", str(tmp_path / "o")]) == 2


def test_step_timeout_kills_grandchild_in_own_group(e2e, tmp_path):
    """vladbud runs its Python child in a process group of its own: a timed-out step must end it."""
    pidfile = tmp_path / "child.pid"
    code = ("import os, subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], preexec_fn=os.setpgrp, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    r = e2e.run_step("profile", [sys.executable, "-c", code], 3)
    assert r["timed_out"]
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            break  # reaped: gone
        if state == "Z":
            break  # killed, waiting for its (re)parent to reap it
        import time
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {pid} still running after the step's timeout")
