"""bench/peers_cuda.py on this CPU (issue 15's peer table): the rows of a small run, a wrong
kernel source reported as WRONG and not timed, and a bad --types refused with exit 2."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "bench", "peers_cuda.py")
VB = os.path.join(ROOT, "build", "vladbud")
ROW_KEYS = ("kernel", "shape", "dtype", "latency_us", "baseline", "baseline_us", "speedup",
            "compile_us", "liger_us", "speedup_vs_best_peer", "pct_copy_bw", "tflops", "verdict",
            "commit", "date")

needs_cli = pytest.mark.skipif(not os.access(VB, os.X_OK), reason="build/vladbud not built")


def run(args, tmp_path, timeout=240):
    env = dict(os.environ, VLADBUD=VB)
    return subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--shapes", "small", "--reps", "3",
                           "--copy-bytes", "256M", "--out", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=str(tmp_path))


def zeros_rmsnorm(path):
    """kernels/cpu/rmsnorm.cpp with its output overwritten by zeros after the real kernel ran."""
    with open(os.path.join(ROOT, "kernels", "cpu", "rmsnorm.cpp")) as f:
        src = f.read()
    assert 'extern "C" int vb_kernel_run(' in src
    src = src.replace('extern "C" int vb_kernel_run(', "static int real_kernel_run(")
    src += """
#include <cstring>
extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs, int n_outputs,
                             const double* attrs, int n_attrs, void* stream) {
  const int rc = real_kernel_run(inputs, n_inputs, outputs, n_outputs, attrs, n_attrs, stream);
  std::size_t n = 1;
  for (int d = 0; d < outputs[0].ndim; ++d) n *= static_cast<std::size_t>(outputs[0].shape[d]);
  std::memset(static_cast<char*>(outputs[0].data) + outputs[0].byte_offset, 0, n * (outputs[0].dtype.bits / 8));
  return rc;
}
"""
    path.write_text(src)
    return str(path)


@needs_cli
def test_small_run_rows(tmp_path):
    p = run(["--types", "rmsnorm,matmul"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((tmp_path / "peers-cpu.json").read_text())
    h = doc["header"]
    assert h["machine"] == "cpu" and h["device"] == "cpu" and h["copy_gb_s"] > 0
    assert h["copy_bytes"] == 256 << 20 and "peers_cuda.py" in h["command"]
    rows = doc["rows"]
    assert [r["kernel"] for r in rows] == ["rmsnorm", "matmul"]
    for r in rows:
        for k in ROW_KEYS:
            assert k in r, k
        assert r["dtype"] == "bf16" and r["verdict"] in ("PASS", "BELOW BAR")
        assert r["latency_us"] > 0 and r["baseline_us"] > 0 and r["compile_us"] > 0
        assert r["liger_us"] is None  # liger_kernel is not installed here (and has no matmul)
        assert r["speedup"] == pytest.approx(r["baseline_us"] / r["latency_us"])
        best = min(r["baseline_us"], r["compile_us"])
        assert r["speedup_vs_best_peer"] == pytest.approx(best / r["latency_us"])
        assert all(c["ok"] for c in r["checks"].values())
    rms, mm = rows
    assert rms["shape"] == "64x256" and rms["baseline"] == "F.rms_norm"
    assert rms["pct_copy_bw"] > 0 and rms["tflops"] is None
    assert mm["shape"] == "64x96x80" and mm["baseline"] == "torch.mm"
    assert mm["tflops"] > 0 and mm["pct_copy_bw"] is None
    md = (tmp_path / "peers-cpu.md").read_text()
    assert "| rmsnorm | 64x256 | bf16 |" in md and "copy bandwidth" in md and h["commit"] in md


@needs_cli
def test_wrong_source_reported_not_timed(tmp_path):
    bad = zeros_rmsnorm(tmp_path / "rmsnorm_zeros.cpp")
    p = run(["--types", "rmsnorm", "--source", f"rmsnorm={bad}", "--no-compile"], tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    doc = json.loads((tmp_path / "peers-cpu.json").read_text())
    (r,) = doc["rows"]
    assert r["verdict"] == "WRONG"
    assert r["latency_us"] is None and r["speedup"] is None and r["speedup_vs_best_peer"] is None
    assert r["checks"]["vladbud"]["ok"] is False and r["checks"]["vladbud"]["rel_error"] == pytest.approx(1.0)
    assert r["baseline_us"] > 0  # eager is still timed
    assert doc["header"]["sources"]["rmsnorm"] == bad
    assert "WRONG" in (tmp_path / "peers-cpu.md").read_text()


def test_bad_types_exit_2(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--types", "rmsnorm,softmaxx", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "unknown kernel type(s) softmaxx" in p.stderr and "rmsnorm" in p.stderr.split("known:")[1]
    assert not list(tmp_path.iterdir())


def test_bad_shape_and_missing_source_exit_2(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--shape", "matmul=12x3"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "bad shape '12x3' for matmul" in p.stderr
    p = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--types", "rmsnorm",
                        "--source", f"rmsnorm={tmp_path / 'nope.cpp'}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "kernel source for rmsnorm not found" in p.stderr
