"""The optimizer's worker pool on Dask distributed (issue 21): `python -m vladbud.pool`.

The C++ optimizer (src/optimize/pool.cpp) starts this process and talks to it by JSON lines,
one object a line, like the runner protocol: requests on stdin, replies and events on stdout
(logs go to stderr). The pool submits each request as a task to a Dask cluster, either a
LocalCluster it starts (``--workers N``) or an existing scheduler (``--scheduler ADDRESS``,
workers joined with Dask's own ``dask worker ADDRESS --resources "gpu-h200=1"``).

What runs where (Dask ``resources``):

* ``build`` tasks carry no resource: any worker compiles the candidate into the build cache
  (``VB_CACHE_DIR``, content-addressed; shared by the workers of one host, or by all hosts when
  it sits on a shared file system).
* ``quick`` / ``full`` / ``compare`` tasks (the measurements) need the device's resource, e.g.
  ``gpu-h200`` or ``cpu-amd-epyc``: they run only on a worker that owns that device, and a
  comparison (``compare``: interleaved rounds of the best and the candidate) is one task, so it
  never spans two devices. On a GPU every measurement takes one unit, so a worker started with
  ``--resources "gpu-h200=2"`` (the local cluster's GPU workers: ``--check-slots``) runs two
  measurements at once; their evaluators share the device lock (VB_DEVICE_LOCK, one file per GPU
  of the host: ``device_lock_path``), held while kernels run, so they overlap only host work
  (input generation, the fp64 oracle, output checks: a quick screen's time is mostly that) and no
  kernel of one runs while the other times. On a CPU device (``cpu-*``) the host work would
  compete with the timed calls for the cores, so timed tasks (quick, timing, compare) take every
  unit a worker owns (the fewest any worker of that device owns) and run alone; the full stages
  (no timing) take one unit.

Each task runs ``vladbud optimize --kernel TMPDIR --measure FILE --mode MODE --json`` (the same
evaluator the sequential loop uses) in a fresh temporary folder holding problem.json and the
source text sent with the request, so a worker on another host needs only the vladbud binary
(``$VB`` on that host, else the orchestrator's path) and Dask; this module is sent by value.

Faults: a worker that dies mid-task has its task rescheduled by Dask on another worker (up to
``distributed.scheduler.allowed-failures`` times); past that, or when a task runs longer than
``--task-timeout`` (a hung device), or when no worker owns the device for
``--no-worker-timeout`` seconds, the reply is ``{"id": N, "lost": true, "reason": ...}`` and
the optimizer records the experiment as lost. Workers joining and leaving are reported as
``{"event": "worker-left", ...}`` lines.

Protocol (one JSON object per line):

* startup reply: ``{"ready": true, "scheduler": ADDR, "workers": N, "resources": {NAME: count},
  "threads": T, "slots": {NAME: timed tasks at once}}`` or ``{"error": "..."}`` (then exit
  status 2)
* request: ``{"id": int, "op": "build"|"quick"|"full"|"timing"|"compare", "resource": NAME or "",
  "problem": {problem.json}, "ext": ".cpp", "source": TEXT, "best": TEXT (compare),
  "rounds": int (compare), "first_round": int (compare: the index of its first round),
  "vladbud": PATH, "after": [ids] (optional: run after these)}``
* reply: ``{"id": int, "ok": true, "result": {...}, "worker": ADDR, "seconds": s}`` or
  ``{"id": int, "lost": true, "reason": "..."}``
* ``{"op": "cancel", "id": N}``: give up request N (the optimizer's budget ran out while it
  waited): a queued task never starts, a running one's result is dropped; no reply for N.
* ``{"op": "shutdown"}`` or end of stdin: close the client (and the local cluster), exit 0.

Requests run earliest id first among the tasks ready on a worker (Dask ``priority``): the
optimizer judges candidates in the order it proposed them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

OPS = ("build", "quick", "full", "timing", "compare")
# Timed work: alone on a CPU device (all the units its worker owns). The full stages time nothing:
# they take one unit, so a worker owning K units of a device checks up to K candidates at once
# while no timing runs there (their fp64 oracle is host work that would leave the GPU idle).
TIMED = ("quick", "timing", "compare")
# Devices whose timed tasks share a worker's units, kept apart by the device lock instead (their
# timed calls run on the device, not on the host's cores that the other tasks' host work uses).
LOCKED_PREFIX = "gpu-"


def timed_units(resource: str, fewest: int) -> int:
    """Units of `resource` a timed task takes: 1 on a GPU (the device lock keeps its kernels
    apart), else `fewest` (the fewest any worker of that device owns: it runs alone)."""
    return 1 if resource.startswith(LOCKED_PREFIX) else max(1, fewest)


def device_lock_path(resource: str, visible: str | None = None) -> str:
    """The lock file the evaluators measuring on this worker's GPU share (VB_DEVICE_LOCK): one
    per resource and CUDA_VISIBLE_DEVICES value (`visible`, default this process's), in the
    host's temporary directory, so the workers of one host that drive the same GPU meet on it."""
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return os.path.join(tempfile.gettempdir(),
                        f"vladbud-device-{slug(resource)}-{slug(visible or 'all')}.lock")


def slug(text: str) -> str:
    """Lower-case name with runs of other characters as one '-' ("NVIDIA H200" -> "nvidia-h200")."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def cpu_resource() -> str:
    """Dask resource naming this host's CPU model: "cpu-<model>" from /proc/cpuinfo."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1]
                    break
    except OSError:
        pass
    import platform

    return "cpu-" + slug(model or platform.machine())


def local_gpus() -> list[str]:
    """Names of this host's NVIDIA GPUs in CUDA order (nvidia-smi), [] without a driver."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if r.returncode != 0:
        return []
    return [l.strip() for l in r.stdout.splitlines() if l.strip()]


def local_gpu_caps() -> list[str]:
    """Compute capabilities of this host's NVIDIA GPUs in CUDA order ("9.0"), from nvidia-smi;
    [] without a driver. Only compared with each other: the architecture name every worker
    builds for comes from the optimizer (``--cuda-arch``, vladbud's own cuda_arch())."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if r.returncode != 0:
        return []
    return [l.strip() for l in r.stdout.splitlines() if l.strip()]


CUDA_ARCH = re.compile(r"^sm_\d+[af]?$")

# The device kinds the optimizer passes (--devices): src/core/device_kind.h device_kind_name.
DEVICE_KINDS = ("host", "gpu")


def gpu_resource(name: str) -> str:
    """Dask resource naming a GPU model: "gpu-<model>" without the vendor ("NVIDIA H200" -> "gpu-h200")."""
    s = slug(name)
    for vendor in ("nvidia-", "amd-"):
        if s.startswith(vendor):
            s = s[len(vendor):]
    return "gpu-" + s


def worker_specs(n: int, devices: list[str], gpus: list[str], cores: int, cuda_arch: str = "",
                 check_slots: int = 3) -> dict:
    """The local cluster's workers: one per GPU (CUDA_VISIBLE_DEVICES=i, its gpu resource,
    check_slots + 1 threads: the checks, and one more may build), the rest build workers, which
    see no GPU; every worker, GPU or not, builds for `cuda_arch` (VB_CUDA_ARCH = the one string
    the optimizer computed, so a build done ahead on a build worker has the very cache key the
    measuring GPU worker computes); for a host device every worker also owns a group of cores
    (the "cpu-<model>" resource, OMP_NUM_THREADS = its share).

    :param n: number of workers (>= 1)
    :param devices: kinds of the kernel folders' devices, as the optimizer names them ("host",
        "gpu": src/core/device_kind.h); GPU workers only for "gpu", the cores' resource only for
        "host"
    :param gpus: local GPU names (local_gpus())
    :param cores: logical cores of this host
    :param cuda_arch: the architecture CUDA candidates are built for ("sm_90a", from the
        optimizer's --cuda-arch); "" sets nothing (workers inherit VB_CUDA_ARCH, if any)
    :param check_slots: units of its gpu resource each GPU worker owns: the measurements (full
        stages, quick screens, comparisons) it runs at once, their kernels kept apart by the
        device lock, each evaluator's host work on cores / (2 x check_slots) threads
        (VB_THREADS), a comparison's on cores / 2 (VB_COMPARE_THREADS: it is the loop's critical
        path); its Dask threads are check_slots + 1 (one more may build)
    :returns: {name: {"resources": {...}, "env": {...}, "nthreads": int}}
    """
    if n < 1:
        raise ValueError(f"--workers must be at least 1 (got {n})")
    if cuda_arch and not CUDA_ARCH.match(cuda_arch):
        raise ValueError(f"--cuda-arch '{cuda_arch}' is not a CUDA architecture name; use e.g. "
                         "sm_90a, sm_90, sm_80")
    specs: dict = {}
    n_gpu = min(n, len(gpus)) if "gpu" in devices else 0
    share = max(1, cores // n)
    for i in range(n):
        res: dict = {}
        env = {"OMP_NUM_THREADS": str(share)}
        if i < n_gpu:
            res[gpu_resource(gpus[i])] = check_slots
            env["CUDA_VISIBLE_DEVICES"] = str(i)
            # Its check_slots evaluators' host work (inputs, the fp64 oracle) shares the cores
            # with the builds: a few threads each, so that a timing does not see the others as
            # competing for the cores (the evaluator's contention check) and re-screen.
            env["VB_THREADS"] = str(max(1, cores // (2 * check_slots)))
            # A comparison (interleaved rounds of the best and a candidate) is the loop's critical
            # path: every later candidate waits for its judgement. With the quick screens' few
            # threads its host work ran for minutes (H100, 2026-12-07 16:07Z: one compare held the
            # rmsnorm loop for the last 48 s of a 100 s budget, on 2 threads; in the sequential
            # loop, on 16, an experiment with its comparison took 13-15 s), so it gets half the
            # host's cores.
            env["VB_COMPARE_THREADS"] = str(max(1, cores // 2))
            name = f"gpu{i}"
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""
            name = f"host{i - n_gpu}"
        if cuda_arch:
            env["VB_CUDA_ARCH"] = cuda_arch
        if "host" in devices:
            res[cpu_resource()] = 1
        specs[name] = {"resources": res, "env": env, "nthreads": check_slots + 1 if i < n_gpu else 1}
    return specs


def measurement_slots(workers) -> dict:
    """Timed tasks (quick, timing, compare) that can run at once on each device resource: a
    timed task takes timed_units() (1 on a GPU; on a CPU the fewest units any worker of that
    device owns), so each worker runs floor(its units / that) of them. `workers`: the scheduler's worker records
    ({"resources": {NAME: units}, ...}). Returns {NAME: slots}, only devices ("gpu-*", "cpu-*")."""
    have: dict[str, list[float]] = {}
    for w in workers:
        for k, v in (w.get("resources") or {}).items():
            if float(v) > 0 and (k.startswith("gpu-") or k.startswith("cpu-")):
                have.setdefault(k, []).append(float(v))
    return {k: int(sum(int(u // timed_units(k, int(min(v)))) for u in v)) for k, v in have.items()}


def run_task(task: dict, timeout_s: float) -> dict:
    """Runs one request on the worker it landed on (see the module doc). Never raises for a
    bad candidate: the evaluator's verdict comes back in ``result``; a harness failure (no
    vladbud, unreadable output) comes back as ``{"harness_error": "..."}``, a run past
    `timeout_s` as ``{"timeout": "..."}``.
    """
    t0 = time.monotonic()
    exe = os.environ.get("VB") or task.get("vladbud") or "vladbud"
    extra = os.environ.get("VB_POOL_TASK_CMD", "") or task.get("task_cmd", "")
    with tempfile.TemporaryDirectory(prefix="vb-pool-") as d:
        with open(os.path.join(d, "problem.json"), "w") as f:
            json.dump(task["problem"], f)
        ext = task.get("ext", ".cpp")
        cand = os.path.join(d, "cand" + ext)
        with open(cand, "w") as f:
            f.write(task["source"])
        env = None
        if (task.get("resource") or "").startswith(LOCKED_PREFIX):
            env = dict(os.environ, VB_DEVICE_LOCK=device_lock_path(task["resource"]))
        if task["op"] == "compare" and os.environ.get("VB_COMPARE_THREADS"):
            env = dict(env or os.environ, VB_THREADS=os.environ["VB_COMPARE_THREADS"])
        cmd = shlex.split(extra) if extra else [exe]
        cmd += ["optimize", "--kernel", d, "--measure", cand, "--mode", task["op"], "--json",
                "--no-git"]
        if task["op"] == "compare":
            best = os.path.join(d, "best" + ext)
            with open(best, "w") as f:
                f.write(task["best"])
            cmd += ["--best", best, "--rounds", str(int(task.get("rounds", 3))),
                    "--first-round", str(int(task.get("first_round", 0)))]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=d, env=env)
        except subprocess.TimeoutExpired:
            return {"timeout": f"the {task['op']} task ran past --task-timeout {timeout_s:.0f} s "
                               "(a hung device or candidate); its worker moved on"}
        except OSError as e:
            return {"harness_error": f"cannot start {cmd[0]}: {e} (set VB on the worker to the "
                                     "vladbud binary)"}
        out = r.stdout.strip().splitlines()
        try:
            res = json.loads(out[-1]) if out else None
        except json.JSONDecodeError:
            res = None
        if r.returncode != 0 or not isinstance(res, dict):
            return {"harness_error": f"{os.path.basename(cmd[0])} {task['op']} exited {r.returncode}: "
                                     + (r.stderr.strip()[-600:] or r.stdout.strip()[-600:])}
        res["task_seconds"] = time.monotonic() - t0
        return res


class Pool:
    """The Dask client, the pending requests and the reply writer (thread-safe)."""

    def __init__(self, args: argparse.Namespace):
        import dask
        from distributed import Client

        self.args = args
        self.out_lock = threading.Lock()
        self.futures: dict[int, object] = {}
        self.lock = threading.Lock()
        self.cluster = None
        self.closing = False
        dask.config.set({"distributed.scheduler.worker-ttl": f"{args.worker_ttl}s"})
        if args.scheduler:
            try:
                self.client = Client(args.scheduler, timeout=f"{args.connect_timeout}s")
            except (OSError, TimeoutError) as e:
                raise RuntimeError(
                    f"cannot reach the Dask scheduler at {args.scheduler} within "
                    f"{args.connect_timeout:.0f} s ({e}); start one with `dask scheduler` and pass "
                    "the address it prints (tcp://HOST:8786)") from None
        else:
            from distributed import Nanny, Scheduler, SpecCluster

            devices = [d for d in args.devices.split(",") if d]
            gpus = local_gpus()
            # Every worker builds for the one --cuda-arch: the local GPUs must agree on it.
            caps = sorted(set(local_gpu_caps())) if gpus and args.cuda_arch else []
            if len(caps) > 1:
                raise RuntimeError(
                    f"this host's GPUs differ in compute capability ({', '.join(caps)}): a local "
                    "pool builds every CUDA candidate for one architecture; start one `dask "
                    "worker` per GPU model (each with its own VB_CUDA_ARCH) and pass --scheduler")
            specs = worker_specs(args.workers, devices, gpus, os.cpu_count() or 1,
                                 args.cuda_arch, args.check_slots)
            workers = {
                name: {"cls": Nanny, "options": {"nthreads": s["nthreads"], "resources": s["resources"],
                                                 "env": s["env"], "memory_limit": 0,
                                                 "host": "127.0.0.1", "dashboard_address": None}}
                for name, s in specs.items()
            }
            self.cluster = SpecCluster(
                scheduler={"cls": Scheduler, "options": {"host": "127.0.0.1", "port": 0,
                                                         "dashboard_address": None}},
                workers=workers, silence_logs=40)
            self.client = Client(self.cluster)
            self.client.wait_for_workers(len(workers), timeout=f"{args.connect_timeout}s")
        try:  # workers on other hosts need only Dask: send this module's code with the tasks
            import cloudpickle

            cloudpickle.register_pickle_by_value(sys.modules[__name__])
        except Exception:  # noqa: BLE001 - an older cloudpickle: workers then import vladbud
            pass
        self.known_workers = set(self.client.scheduler_info(n_workers=-1)["workers"])
        self.device_seen: dict[str, float] = {}

    def info(self) -> dict:
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        res: dict[str, int] = {}
        threads = 0
        for w in workers.values():
            threads += int(w.get("nthreads", 0))
            for k, v in (w.get("resources") or {}).items():
                res[k] = res.get(k, 0) + int(v)
        return {"scheduler": self.client.scheduler.address, "workers": len(workers),
                "resources": res, "threads": threads, "slots": measurement_slots(workers.values())}

    def units(self, resource: str) -> int:
        """Units of `resource` a timed task takes (timed_units: 1 on a GPU, else the fewest any
        worker owning it has)."""
        try:
            workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
            have = [float((w.get("resources") or {}).get(resource, 0)) for w in workers]
            have = [h for h in have if h > 0]
            return timed_units(resource, int(min(have))) if have else 1
        except Exception:  # noqa: BLE001 - the scheduler is away: the watchdog says so
            return 1

    def send(self, obj: dict) -> None:
        with self.out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def submit(self, req: dict) -> None:
        rid = req.get("id")
        op = req.get("op")
        if not isinstance(rid, int) or op not in OPS:
            self.send({"id": rid, "lost": True,
                       "reason": f"bad request: needs an integer id and op in {OPS} (got {op!r})"})
            return
        resource = req.get("resource") or ""
        deps = []
        with self.lock:
            for a in req.get("after") or []:
                if a in self.futures:
                    deps.append(self.futures[a])
        # Earlier requests first (Dask runs the highest priority among a worker's ready tasks):
        # the optimizer judges candidates in the order it asked for them, so a device must not
        # measure the last one proposed while the first waits (FIFO by request id).
        kw = {"pure": False, "key": f"vb-{op}-{rid}-{os.getpid()}", "priority": -rid}
        if resource:
            kw["resources"] = {resource: self.units(resource) if op in TIMED else 1}
        fut = self.client.submit(_task_entry, req, self.args.task_timeout, deps, **kw)
        with self.lock:
            self.futures[rid] = fut
        fut.add_done_callback(lambda f, rid=rid, op=op: self._done(rid, f, op))

    def cancel(self, rid) -> None:
        """Gives up request `rid` (the optimizer stopped waiting: its budget ran out): a queued
        task never starts; a running one finishes on its worker and its result is dropped. No
        reply is sent for it."""
        with self.lock:
            fut = self.futures.get(rid)
        if fut is None:
            return
        fut._vb_cancelled = True
        fut.cancel()

    def _done(self, rid: int, fut, op: str = "") -> None:
        if getattr(fut, "_vb_cancelled", False):
            with self.lock:
                self.futures.pop(rid, None)
            print(f"vb-pool task op={op} id={rid} cancelled t={time.time():.3f}", file=sys.stderr,
                  flush=True)
            return
        try:
            if fut.status == "cancelled":
                reason = getattr(fut, "_vb_reason", "cancelled")
                self.send({"id": rid, "lost": True, "reason": reason})
                return
            res = fut.result()
        except Exception as e:  # noqa: BLE001 - KilledWorker and friends: the experiment is lost
            name = type(e).__name__
            if name == "KilledWorker":
                reason = ("its worker died while running it, every time it was retried "
                          "(distributed.scheduler.allowed-failures): " + str(e)[:300])
            else:
                reason = f"{name}: {str(e)[:300]}"
            print(f"vb-pool task op={op} id={rid} lost: {reason}", file=sys.stderr, flush=True)
            self.send({"id": rid, "lost": True, "reason": reason})
            return
        finally:
            with self.lock:
                self.futures.pop(rid, None)
        if "timeout" in res:
            self.send({"id": rid, "lost": True, "reason": res["timeout"]})
        else:
            # One line per task on stderr (the pool's log): where the time goes
            # (bench/scaleout_h200.sh): the task's wall time on its worker, the evaluator's own
            # (eval; the rest is the vladbud process and its start), and whether the candidate's
            # build came from the cache (built=cached) or was compiled in the task (built=compiled).
            r = res.get("result", {}) if isinstance(res.get("result"), dict) else {}
            extra = ""
            if "build_cached" in r:
                extra = (f" eval={float(r.get('seconds', 0.0)):.3f} built="
                         f"{'cached' if r['build_cached'] else 'compiled'}"
                         f" build_s={float(r.get('build_seconds', 0.0)):.3f}")
            elif op == "build" and "cached" in r:
                extra = f" built={'cached' if r['cached'] else 'compiled'}"
            print(f"vb-pool task op={op} id={rid} worker={res.get('worker', '')} "
                  f"seconds={res.get('seconds', 0.0):.3f}{extra} t={time.time():.3f}",
                  file=sys.stderr, flush=True)
            self.send({"id": rid, "ok": True, "result": res.get("result", res),
                       "worker": res.get("worker", ""), "seconds": res.get("seconds", 0.0)})

    def watch(self) -> None:
        """Reports workers joining and leaving; gives up on requests whose device has had no
        worker for --no-worker-timeout seconds (replied lost)."""
        while not self.closing:
            time.sleep(0.5)
            try:
                workers = self.client.scheduler_info(n_workers=-1)["workers"]
            except Exception:  # noqa: BLE001 - the scheduler went away
                if self.closing:
                    return
                with self.lock:
                    pending = list(self.futures.items())
                for rid, fut in pending:
                    fut._vb_reason = "the Dask scheduler is unreachable"
                    fut.cancel()
                continue
            now = set(workers)
            for w in sorted(now - self.known_workers):
                self.send({"event": "worker-joined", "worker": w, "name": str(workers[w].get("name", "")),
                           "time": time.time()})
            for w in sorted(self.known_workers - now):
                self.send({"event": "worker-left", "worker": w, "time": time.time()})
            self.known_workers = now
            have = set()
            for w in workers.values():
                have.update(k for k, v in (w.get("resources") or {}).items() if v > 0)
            t = time.monotonic()
            for r in have:
                self.device_seen[r] = t
            with self.lock:
                pending = list(self.futures.items())
            for rid, fut in pending:
                res = getattr(fut, "_vb_resource", None)
                if res is None:
                    continue
                since = self.device_seen.setdefault(res, t)
                if res not in have and t - since > self.args.no_worker_timeout:
                    fut._vb_reason = (f"no worker owns device {res} for {self.args.no_worker_timeout:.0f} s "
                                      f"(start one: dask worker {self.client.scheduler.address} "
                                      f'--resources "{res}=1")')
                    fut.cancel()

    def close(self) -> None:
        self.closing = True
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def _task_entry(req: dict, timeout_s: float, _deps) -> dict:
    """The function Dask runs on a worker: run_task plus where and how long."""
    t0 = time.monotonic()
    worker = ""
    try:
        from distributed import get_worker

        worker = get_worker().address
    except Exception:  # noqa: BLE001 - outside a worker (tests)
        pass
    res = run_task(req, timeout_s)
    if "timeout" in res:
        return res
    return {"result": res, "worker": worker, "seconds": time.monotonic() - t0}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m vladbud.pool", description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--workers", type=int, help="start a local cluster of N workers on loopback")
    g.add_argument("--scheduler", help="join an existing Dask scheduler (tcp://HOST:8786)")
    p.add_argument("--devices", default="host",
                   help="kinds of the kernel folders' devices, comma-separated: host, gpu (the "
                        "optimizer passes its folders' Device::kind)")
    p.add_argument("--cuda-arch", default="",
                   help="local cluster: the architecture every worker builds CUDA candidates for "
                        "(VB_CUDA_ARCH on each; the optimizer passes its own, e.g. sm_90a)")
    p.add_argument("--check-slots", type=int, default=3,
                   help="local cluster: measurements a GPU worker runs at once; they overlap "
                        "only host work (inputs, the fp64 oracle, checks): the device lock "
                        "(VB_DEVICE_LOCK) lets one run kernels at a time")
    p.add_argument("--task-timeout", type=float, default=1800,
                   help="seconds one task may run before it is given up (lost)")
    p.add_argument("--no-worker-timeout", type=float, default=300,
                   help="seconds a request may wait with no worker owning its device")
    p.add_argument("--connect-timeout", type=float, default=30,
                   help="seconds to reach the scheduler / start the local workers")
    p.add_argument("--worker-ttl", type=float, default=60,
                   help="seconds without a heartbeat before the scheduler declares a worker dead")
    a = p.parse_args(argv)
    bad = [d for d in a.devices.split(",") if d and d not in DEVICE_KINDS]
    if bad:
        p.error(f"--devices: unknown device kind {bad[0]!r}; use {' or '.join(DEVICE_KINDS)}")
    if a.workers is not None and a.workers < 1:
        p.error(f"--workers must be at least 1 (got {a.workers})")
    if a.cuda_arch and not CUDA_ARCH.match(a.cuda_arch):
        p.error(f"--cuda-arch '{a.cuda_arch}' is not a CUDA architecture name; use e.g. sm_90a")
    if not 1 <= a.check_slots <= 16:
        p.error(f"--check-slots must be in [1, 16] (got {a.check_slots})")
    for name in ("task_timeout", "no_worker_timeout", "connect_timeout", "worker_ttl"):
        if not getattr(a, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = sys.stdout
    try:
        import distributed  # noqa: F401
    except ImportError:
        out.write(json.dumps({"error": "Dask distributed is not installed in this Python "
                                       f"({sys.executable}): run scripts/setup.sh, or pip install "
                                       "the wheels in .whl/ (bench/fetch_dask_wheels.sh)"}) + "\n")
        out.flush()
        return 2
    try:
        pool = Pool(args)
    except Exception as e:  # noqa: BLE001 - every start failure is one clear line
        out.write(json.dumps({"error": str(e) or type(e).__name__}) + "\n")
        out.flush()
        return 2
    pool.send({"ready": True, **pool.info()})
    threading.Thread(target=pool.watch, daemon=True).start()
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except json.JSONDecodeError as e:
                pool.send({"id": None, "lost": True, "reason": f"bad request line: {e}"})
                continue
            if req.get("op") == "shutdown":
                break
            if req.get("op") == "cancel":
                pool.cancel(req.get("id"))
                continue
            pool.submit(req)
            with pool.lock:
                fut = pool.futures.get(req.get("id"))
            if fut is not None and req.get("resource"):
                fut._vb_resource = req["resource"]
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
