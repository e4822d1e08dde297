"""The worker pool's Python half (python/vladbud/pool.py): which worker owns which device, the
flags it refuses, a task that cannot run, and the JSON-lines protocol over a real local Dask
cluster on loopback with the deterministic stand-in measurer (builds on any worker,
measurements only where the device resource is). The CLI-level runs (decisions, killed
workers, lost experiments) are tests/integration_pool.cpp."""
import json
import os
import subprocess
import sys
import tempfile
import time as _t

import pytest

from vladbud import pool

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STANDIN = os.path.join(ROOT, "python", "tests", "fixtures", "standin_measure.py")


def test_resource_names():
    assert pool.gpu_resource("NVIDIA H200") == "gpu-h200"
    assert pool.gpu_resource("NVIDIA H100 80GB HBM3") == "gpu-h100-80gb-hbm3"
    assert pool.cpu_resource().startswith("cpu-")
    assert pool.slug("  AMD EPYC 9654 96-Core ") == "amd-epyc-9654-96-core"


def test_one_worker_per_gpu_the_rest_build():
    s = pool.worker_specs(4, ["gpu"], ["NVIDIA H200", "NVIDIA H200"], 16, "sm_90a")
    assert list(s) == ["gpu0", "gpu1", "host0", "host1"]
    assert s["gpu0"]["resources"] == {"gpu-h200": 3} and s["gpu0"]["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert s["gpu0"]["nthreads"] == 4 and s["host0"]["nthreads"] == 1
    assert s["gpu1"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    # Three evaluators' host work on a 16-core host: 16 / (2 x 3) = 2 threads each.
    assert s["gpu0"]["env"]["VB_THREADS"] == "2" and "VB_THREADS" not in s["host0"]["env"]
    # A comparison, the loop's critical path, on half the cores.
    assert s["gpu0"]["env"]["VB_COMPARE_THREADS"] == "8" and "VB_COMPARE_THREADS" not in s["host0"]["env"]
    assert s["host0"]["resources"] == {} and s["host0"]["env"]["CUDA_VISIBLE_DEVICES"] == ""
    # One architecture for every worker, the one the optimizer passed (--cuda-arch): a build
    # worker (no GPU) and the GPU worker measuring its build compute the same build-cache key.
    assert {v["env"]["VB_CUDA_ARCH"] for v in s.values()} == {"sm_90a"}
    # No architecture given: none set (workers inherit VB_CUDA_ARCH, if any).
    assert all("VB_CUDA_ARCH" not in v["env"] for v in pool.worker_specs(2, ["gpu"], ["H200"], 4).values())
    # A host device (the CPU backend's): every worker owns a group of cores.
    c = pool.worker_specs(2, ["host"], [], 16)
    assert all(list(v["resources"]) == [pool.cpu_resource()] for v in c.values())
    assert c["host0"]["env"]["OMP_NUM_THREADS"] == "8"
    # More GPUs than workers: only N GPU workers.
    assert list(pool.worker_specs(1, ["gpu"], ["A", "B"], 4)) == ["gpu0"]


def test_measurement_slots_count_timed_tasks_at_once():
    # A local GPU worker owns gpu-h200=3: three measurements at once, timed ones too (the device
    # lock keeps their kernels apart): 3 slots; two such workers (two GPUs): 6.
    assert pool.measurement_slots([{"resources": {"gpu-h200": 3}}, {"resources": {}}]) == {"gpu-h200": 3}
    assert pool.measurement_slots([{"resources": {"gpu-h200": 3}}] * 2) == {"gpu-h200": 6}
    # CPU workers owning one group of cores each: one each.
    assert pool.measurement_slots([{"resources": {"cpu-x": 1}}] * 3) == {"cpu-x": 3}
    # On a CPU device a timed task takes the fewest units any worker owns: a worker owning twice
    # that runs two at once; non-device resources ("memory") and zero units are no slots.
    assert pool.measurement_slots([{"resources": {"cpu-a": 1, "memory": 8}}, {"resources": {"cpu-a": 2}},
                                   {"resources": {"cpu-b": 0}}]) == {"cpu-a": 3}


def test_each_gpu_of_a_host_has_its_own_device_lock():
    a = pool.device_lock_path("gpu-h200", "0")
    assert a == pool.device_lock_path("gpu-h200", "0")  # two workers of one GPU meet on one file
    assert a != pool.device_lock_path("gpu-h200", "1") != pool.device_lock_path("gpu-h100", "1")
    assert os.path.dirname(a) == tempfile.gettempdir() and a.endswith(".lock")
    assert pool.timed_units("gpu-h200", 3) == 1 and pool.timed_units("cpu-x", 2) == 2


def test_bad_flags_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        pool.worker_specs(0, ["host"], [], 2)
    with pytest.raises(ValueError, match="not a CUDA architecture name"):
        pool.worker_specs(2, ["gpu"], ["H200"], 4, "hopper")
    for argv in (["--workers", "0"], ["--workers", "2", "--scheduler", "tcp://h:1"], [],
                 ["--workers", "1", "--task-timeout", "0"], ["--workers", "1", "--check-slots", "0"],
                 ["--workers", "1", "--cuda-arch", "90a"], ["--workers", "1", "--devices", "cuda"]):
        with pytest.raises(SystemExit) as e:
            pool.parse_args(argv)
        assert e.value.code == 2


def test_a_task_that_cannot_run_says_why(tmp_path, monkeypatch):
    monkeypatch.delenv("VB_POOL_TASK_CMD", raising=False)
    monkeypatch.setenv("VB", str(tmp_path / "no-such-vladbud"))
    r = pool.run_task({"op": "quick", "problem": {}, "ext": ".cpp", "source": "x"}, 10)
    assert "harness_error" in r and "set VB on the worker" in r["harness_error"]
    # A hung task is given up at the timeout.
    monkeypatch.setenv("VB_POOL_TASK_CMD", f"{sys.executable} {STANDIN}")
    monkeypatch.setenv("VB_STANDIN_SLEEP", "5")
    r = pool.run_task({"op": "quick", "problem": {}, "ext": ".cpp", "source": "#define UNROLL 1\n"}, 1)
    assert "timeout" in r and "--task-timeout" in r["timeout"]


def test_protocol_over_a_local_cluster(tmp_path):
    pytest.importorskip("distributed", reason="Dask distributed is not installed (scripts/setup.sh)")
    env = dict(os.environ, VB_POOL_TASK_CMD=f"{sys.executable} {STANDIN}",
               PYTHONPATH=os.path.join(ROOT, "python"))
    res = pool.cpu_resource()
    src = "#define UNROLL 4\n#define MODE 0\n"
    reqs = [
        {"id": 1, "op": "build", "resource": "", "problem": {}, "ext": ".cpp", "source": src},
        {"id": 2, "op": "quick", "resource": res, "problem": {}, "ext": ".cpp", "source": src, "after": [1]},
        {"id": 3, "op": "compare", "resource": res, "problem": {}, "ext": ".cpp", "source": src,
         "best": "#define UNROLL 1\n#define MODE 0\n", "rounds": 2, "first_round": 3},
        {"id": 4, "op": "frobnicate"},
        # A device no worker owns: given up after --no-worker-timeout, never left waiting.
        {"id": 5, "op": "quick", "resource": "gpu-nothing", "problem": {}, "ext": ".cpp", "source": src},
    ]
    p = subprocess.Popen([sys.executable, "-m", "vladbud.pool", "--workers", "2", "--devices", "host",
                          "--no-worker-timeout", "2"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        ready = json.loads(p.stdout.readline())
        assert ready["ready"] and ready["workers"] == 2 and ready["resources"] == {res: 2}
        assert ready["slots"] == {res: 2}
        assert ready["scheduler"].startswith("tcp://127.0.0.1:")
        for r in reqs:
            p.stdin.write(json.dumps(r) + "\n")
        p.stdin.flush()
        replies = {}
        while len(replies) < 5:
            line = json.loads(p.stdout.readline())
            if "id" in line:
                replies[line["id"]] = line
        assert replies[1]["ok"] and replies[1]["result"]["ok"]
        assert replies[2]["result"]["median_us"] == 80.0 and replies[2]["result"]["verdict"] == "PASS"
        assert [s[0] for s in replies[3]["result"]["best"]] == [100.0, 100.0]
        assert replies[3]["result"]["first_round"] == 3  # reaches the worker's --first-round
        assert [s[0] for s in replies[3]["result"]["cand"]] == [80.0, 80.0]
        assert replies[4]["lost"] and "bad request" in replies[4]["reason"]
        assert replies[5]["lost"] and "no worker owns device gpu-nothing" in replies[5]["reason"]
        assert '--resources "gpu-nothing=1"' in replies[5]["reason"]
        p.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
        p.stdin.flush()
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_unreachable_scheduler_is_one_clear_line():
    pytest.importorskip("distributed", reason="Dask distributed is not installed (scripts/setup.sh)")
    r = subprocess.run([sys.executable, "-m", "vladbud.pool", "--scheduler", "tcp://127.0.0.1:9",
                        "--connect-timeout", "2"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert r.returncode == 2
    err = json.loads(r.stdout.strip().splitlines()[-1])["error"]
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err and "dask scheduler" in err


@pytest.mark.parametrize("res", ["cpu-fake", "gpu-fake"])
def test_timed_tasks_run_alone_on_a_cpu_and_share_a_gpu_under_its_lock(tmp_path, res):
    """One worker owning 2 units of a device: two full-stage checks overlap; on a CPU device a
    quick screen (timed) never overlaps anything there, on a GPU it shares the worker's units
    and every task's evaluator is given the GPU's device lock (VB_DEVICE_LOCK)."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (scripts/setup.sh)")
    spans = tmp_path / "spans.txt"
    env = dict(os.environ, VB_POOL_TASK_CMD=f"{sys.executable} {STANDIN}",
               PYTHONPATH=os.path.join(ROOT, "python"), VB_STANDIN_SLEEP="1",
               VB_STANDIN_SLEEP_FULL="2", VB_STANDIN_SPANS=str(spans))
    # A cluster whose one worker owns res=2, as `dask worker ... --resources "gpu-fake=2"`.
    code = f"""
import sys, json, threading
from distributed import LocalCluster
c = LocalCluster(n_workers=1, threads_per_worker=3, processes=True, host="127.0.0.1",
                 dashboard_address=None, resources={{"{res}": 2}})
print(c.scheduler_address, flush=True)
sys.stdin.read()
c.close()
"""
    sched = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        addr = sched.stdout.readline().strip()
        p = subprocess.Popen([sys.executable, "-m", "vladbud.pool", "--scheduler", addr],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, env=env)
        ready = json.loads(p.stdout.readline())
        assert ready["resources"] == {res: 2}
        src = "#define UNROLL 4\n#define MODE 0\n"
        base = {"resource": res, "problem": {}, "ext": ".cpp", "source": src}
        for i, op in enumerate(["full", "full", "quick", "full"], start=1):
            p.stdin.write(json.dumps(dict(base, id=i, op=op)) + "\n")
        p.stdin.flush()
        got = set()
        while len(got) < 4:
            line = json.loads(p.stdout.readline())
            if "id" in line:
                assert line.get("ok"), line
                got.add(line["id"])
        p.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
        p.stdin.flush()
        p.wait(timeout=60)
    finally:
        sched.communicate("", timeout=60)
    rows = [l.split() for l in spans.read_text().splitlines()]
    s = [(r[0], float(r[1]), float(r[2])) for r in rows]
    assert len(s) == 4
    overlap = lambda x, y: x[1] < y[2] and y[1] < x[2]
    fulls = [x for x in s if x[0] == "full"]
    quick = [x for x in s if x[0] == "quick"][0]
    assert any(overlap(a, b) for i, a in enumerate(fulls) for b in fulls[i + 1:]), s
    locks = {r[3] for r in rows}
    if res.startswith("cpu-"):
        assert not any(overlap(quick, f) for f in fulls), s
        assert locks == {"-"}, locks
    else:
        assert any(overlap(quick, f) for f in fulls), s
        assert locks == {pool.device_lock_path(res)}, locks


def test_a_device_measures_the_earliest_request_first_and_cancelled_ones_never_run(tmp_path):
    """One device slot, its worker busy with request 1 while 2..6 queue, sent newest first and
    far enough apart that Dask alone would run them in arrival order: they run in request order
    (the optimizer judges in that order), and 4 and 5, cancelled while queued, never run and
    get no reply (the optimizer stopped waiting for them)."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (scripts/setup.sh)")
    spans = tmp_path / "spans.txt"
    env = dict(os.environ, VB_POOL_TASK_CMD=f"{sys.executable} {STANDIN}",
               PYTHONPATH=os.path.join(ROOT, "python"), VB_STANDIN_SLEEP="1.2",
               VB_STANDIN_SPANS=str(spans))
    p = subprocess.Popen([sys.executable, "-m", "vladbud.pool", "--workers", "1", "--devices", "host"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, env=env)
    try:
        ready = json.loads(p.stdout.readline())
        res = pool.cpu_resource()
        assert ready["slots"] == {res: 1}
        base = {"op": "quick", "resource": res, "problem": {}, "ext": ".cpp"}
        send = lambda obj: (p.stdin.write(json.dumps(obj) + "\n"), p.stdin.flush())
        # UNROLL tells the spans apart: request i measures UNROLL {1,2,4,8,1,2}[i-1] with MODE=i.
        unroll = {1: 1, 2: 2, 3: 4, 4: 8, 5: 1, 6: 2}
        send(dict(base, id=1, source=f"#define UNROLL 1\n#define MODE 0\n"))
        _t.sleep(0.2)  # request 1 is running: the rest queue behind it, newest first on the wire
        for i in (6, 5, 4, 3, 2):  # > Dask's fifo_timeout (100 ms) apart: one generation each
            send(dict(base, id=i, source=f"#define UNROLL {unroll[i]}\n#define MODE 0\n#define REQ {i}\n"))
            _t.sleep(0.15)
        send({"op": "cancel", "id": 4})
        send({"op": "cancel", "id": 5})
        got = []
        while len(got) < 4:
            line = json.loads(p.stdout.readline())
            if "id" in line:
                assert line.get("ok"), line
                got.append(line["id"])
        send({"op": "shutdown"})
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert got == [1, 2, 3, 6], got
    assert len(spans.read_text().splitlines()) == 4  # 4 and 5 never started


def test_a_host_with_gpus_of_two_architectures_is_refused(monkeypatch):
    """A local pool builds every CUDA candidate for one architecture: GPUs of two compute
    capabilities on the host are refused before any worker starts, naming the way out."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (scripts/setup.sh)")
    monkeypatch.setattr(pool, "local_gpus", lambda: ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"])
    monkeypatch.setattr(pool, "local_gpu_caps", lambda: ["9.0", "8.0"])
    args = pool.parse_args(["--workers", "3", "--devices", "gpu", "--cuda-arch", "sm_90a"])
    with pytest.raises(RuntimeError, match=r"differ in compute capability \(8\.0, 9\.0\).*--scheduler"):
        pool.Pool(args)


def test_a_compare_task_runs_on_the_compare_threads_a_quick_one_on_the_workers(tmp_path, monkeypatch):
    # A stand-in for vladbud that reports the VB_THREADS it was started with.
    exe = tmp_path / "vb_threads.py"
    exe.write_text("import json, os\nprint(json.dumps({'verdict': 'PASS', 'threads': os.environ.get('VB_THREADS')}))\n")
    monkeypatch.setenv("VB_POOL_TASK_CMD", f"{sys.executable} {exe}")
    monkeypatch.setenv("VB_THREADS", "2")
    monkeypatch.setenv("VB_COMPARE_THREADS", "8")
    task = {"id": 1, "op": "quick", "resource": "", "problem": {}, "source": "x", "ext": ".cpp"}
    assert pool.run_task(task, 30)["threads"] == "2"
    assert pool.run_task(dict(task, op="compare", best="y", rounds=3), 30)["threads"] == "8"
    # Without the variable (a worker started by hand), a comparison keeps the worker's threads.
    monkeypatch.delenv("VB_COMPARE_THREADS")
    assert pool.run_task(dict(task, op="compare", best="y", rounds=3), 30)["threads"] == "2"
