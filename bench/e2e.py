#!/usr/bin/env python3
"""End-to-end benchmark (issue 14): per model, PyTorch eager, torch.compile, Liger-Kernel (HF
Llama family on a GPU) and VladBud's kernels plugged in (eager and under torch.compile), side by
side, written as <outdir>/e2e-<machine>.md and .json.

    .venv/bin/python bench/e2e.py                          # this CPU: gpt2, llama, bert
    .venv/bin/python bench/e2e.py --models gpt2            # one of them
    python3 bench/e2e.py --machine h200 --outdir "$OUT"    # the GPU machine (bench/e2e_h200.sh)

Per model, in a fresh workspace (--work DIR/<model>; default a new folder under /tmp):
    vladbud profile --model F --class-name C [--module transformers --config J] --input-shape B,S
                    --dtype D --device cpu|cuda --workspace WS
    vladbud extract --top N --workspace WS [--backend cuda]
    vladbud verify --compile --json --workspace WS            (WS/verify.json)
then, for an HF Llama-family model on a GPU with liger_kernel importable, a separate Python
process (this file, --liger-worker) builds the same model (vladbud.loader) with the same dtype,
device and input, and times eager against the Liger-patched copy, interleaved.

The CLI is $VLADBUD, else build/vladbud. Every step has a time limit (the model's limit and
--deadline bound it too); a failed step is recorded in the row and the report, and the run goes
on with the next model. Progress goes to stderr. The report is rewritten after every model, so a
run cut short keeps the rows it finished.
"""
import argparse
import copy
import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# ---------------------------------------------------------------------------------------------
# Models. One table; dtype, input and time limit per machine. `defaults` is the default
# selection of each machine, in the order they run.

MODELS = {
    "gpt2": {"title": "GPT-2 small (models/gpt2.py)", "model": "models/gpt2.py", "class_name": "GPT2",
             "cpu": ("fp32", "1,64"), "h200": ("bf16", "1,1024")},
    "llama": {"title": "LLaMA small (models/llama.py)", "model": "models/llama.py", "class_name": "Llama",
              "cpu": ("fp32", "1,64"), "h200": ("fp16", "4,256")},
    "bert": {"title": "BERT-base (models/bert.py)", "model": "models/bert.py", "class_name": "Bert",
             "cpu": ("fp32", "1,64"), "h200": ("bf16", "8,512")},
    "hf-llama-836m": {"title": "HF Llama 836M (transformers, models/configs/hf_llama_836m.json)",
                      "module": "transformers", "class_name": "AutoModelForCausalLM",
                      "config": "models/configs/hf_llama_836m.json",
                      "cpu": ("fp32", "1,64"), "h200": ("bf16", "1,2048")},
}
DEFAULTS = {"cpu": ["gpt2", "llama", "bert"], "h200": ["hf-llama-836m", "llama", "gpt2", "bert"]}
MACHINES = ("cpu", "h200")
# Seconds per model (all its steps together) and per step, per machine.
# On the H200 the whole run is one device call (bench/e2e_h200.sh: --deadline); the HF Llama
# (three torch.compile builds of an 836M model in verify --compile, and the Liger worker) needs
# most of a call.
MODEL_LIMIT = {"cpu": 1800, "h200": 150}
MODEL_LIMIT_H200 = {"hf-llama-836m": 330}
STEP_LIMIT = {"cpu": {"profile": 300, "extract": 120, "verify": 1500, "liger": 300},
              "h200": {"profile": 90, "extract": 60, "verify": 300, "liger": 100}}
# model_type of an HF config -> the liger_kernel.transformers function for it.
LIGER_FAMILY = {"llama": "apply_liger_kernel_to_llama"}

ROW_KEYS = ("model", "dtype", "input", "device", "eager_ms", "compile_ms", "liger_ms", "vladbud_ms",
            "vladbud_compile_ms", "kernels_in", "kernels_dropped", "max_rel_error",
            "speedup_vs_eager", "speedup_vs_compile", "noise_pct")


class E2EError(Exception):
    """A user-facing error (bad flag, missing workspace): printed as `e2e: error: ...`, exit 2."""


def log(msg):
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Selection.

def model_specs(names, machine, dtype=None, input_shape=None, model_json=None, limit=None):
    """The specs to run: names (list or comma text; empty = the machine's defaults) from MODELS,
    plus model_json (a JSON object: name, model or module+config, class_name, dtype, input,
    model_args). E2EError for an unknown name or machine, a bad shape or dtype."""
    if machine not in MACHINES:
        raise E2EError(f"--machine must be one of {', '.join(MACHINES)} (got '{machine}')")
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names or [])
    extra = []
    if model_json:
        try:
            d = json.loads(model_json) if isinstance(model_json, str) else dict(model_json)
        except json.JSONDecodeError as e:
            raise E2EError(f"--model-json is not valid JSON ({e}); e.g. '{{\"name\": \"mine\", "
                           f"\"model\": \"my.py\", \"class_name\": \"Net\", \"dtype\": \"fp32\", "
                           f"\"input\": \"1,64\"}}'") from None
        if not isinstance(d, dict) or not d.get("name") or not d.get("class_name") or \
                not (d.get("model") or d.get("module")):
            raise E2EError("--model-json needs name, class_name and model (a .py file) or module")
        extra.append(d)
    if not names and not extra:
        names = DEFAULTS[machine]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise E2EError(f"unknown model '{unknown[0]}' in --models; known: {', '.join(MODELS)} "
                       f"(or describe one with --model-json)")
    specs = []
    for n in names:
        m = MODELS[n]
        dt, shape = m[machine]
        specs.append({"name": n, "title": m["title"], "model": m.get("model", ""),
                      "module": m.get("module", ""), "config": m.get("config", ""),
                      "class_name": m["class_name"], "model_args": m.get("model_args"),
                      "dtype": dtype or dt, "input": input_shape or shape,
                      "limit_s": limit or (MODEL_LIMIT_H200.get(n, MODEL_LIMIT["h200"])
                                           if machine == "h200" else MODEL_LIMIT["cpu"])})
    for d in extra:
        specs.append({"name": d["name"], "title": d.get("title", d["name"]), "model": d.get("model", ""),
                      "module": d.get("module", ""), "config": d.get("config", ""),
                      "class_name": d["class_name"], "model_args": d.get("model_args"),
                      "dtype": dtype or d.get("dtype", "fp32"), "input": input_shape or d.get("input", "1,64"),
                      "limit_s": limit or d.get("limit_s") or MODEL_LIMIT[machine]})
    for s in specs:
        if s["dtype"] not in ("fp32", "fp16", "bf16"):
            raise E2EError(f"dtype must be fp32, fp16 or bf16 (got '{s['dtype']}' for {s['name']})")
        parts = str(s["input"]).split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise E2EError(f"input shape must be BATCH,SEQ with two positive integers, e.g. 1,64 "
                           f"(got '{s['input']}' for {s['name']})")
    return specs


def abs_path(p):
    return p if not p or os.path.isabs(p) else os.path.join(ROOT, p)


def profile_args(spec, device):
    """The model flags of `vladbud profile` for a spec."""
    a = []
    if spec.get("module"):
        a += ["--module", spec["module"]]
        if spec.get("config"):
            a += ["--config", abs_path(spec["config"]) if os.path.exists(abs_path(spec["config"]))
                  else spec["config"]]
    else:
        a += ["--model", abs_path(spec["model"])]
    a += ["--class-name", spec["class_name"]]
    if spec.get("model_args"):
        a += ["--model-args", json.dumps(spec["model_args"])]
    a += ["--input-shape", spec["input"], "--dtype", spec["dtype"], "--device", device]
    return a


# ---------------------------------------------------------------------------------------------
# verify.json -> row.

def _num(x):
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _ratio(a, b):
    a, b = _num(a), _num(b)
    return a / b if a is not None and b is not None and b > 0 else None


def empty_row(spec, device):
    r = {k: None for k in ROW_KEYS}
    r.update(model=spec["name"], dtype=spec["dtype"], input=str(spec["input"]), device=device,
             kernels_in=[], kernels_dropped=[], title=spec.get("title", spec["name"]),
             verdict=None, status="not run", errors=[], notes=[], steps=[], candidates=[],
             verify_speedup=None, verify_ci=None, verify_baseline=None, protocol=None,
             liger_ms_raw=None, liger_eager_ms=None, liger_ratio=None, liger_rel_error=None,
             liger_noise_pct=None, liger_protocol=None, liger_note=None, liger_ci=None,
             liger_scaled=None, liger_version=None, workspace=None)
    return r


def load_verify(ws):
    """WS/verify.json as a dict; E2EError naming the fix when the workspace or the file is
    missing or not JSON."""
    if not ws or not os.path.isdir(ws):
        raise E2EError(f"workspace '{ws}' does not exist; run `vladbud profile ... --workspace {ws}`, "
                       f"`vladbud extract` and `vladbud verify --compile --json` there first")
    p = os.path.join(ws, "verify.json")
    if not os.path.isfile(p):
        raise E2EError(f"{p} does not exist; run `vladbud verify --compile --json --workspace {ws}`")
    try:
        with open(p) as f:
            v = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise E2EError(f"{p} is not valid JSON ({e}); re-run `vladbud verify`") from None
    if not isinstance(v, dict):
        raise E2EError(f"{p} is not a JSON object")
    return v


def fill_row_from_verify(row, v):
    """Fills row (from empty_row) with the fields of a verify.json dict (see the module doc of
    the issue: verdict, candidates, kernels_in/dropped, end_to_end, max_rel_error, speedup).
    speedup_vs_eager = eager_ms / vladbud_ms (both eager); speedup_vs_compile = compile_ms /
    vladbud_compile_ms (both under torch.compile). Missing fields stay null, with a note."""
    e = v.get("end_to_end")
    if not isinstance(e, dict):
        row["notes"].append("verify.json has no end_to_end block (this vladbud's verify predates "
                            "the end-to-end fields): no latencies")
        e = {}
    row["eager_ms"] = _num(e.get("eager_ms"))
    row["compile_ms"] = _num(e.get("compile_ms"))
    row["vladbud_ms"] = _num(e.get("vladbud_ms"))
    row["vladbud_compile_ms"] = _num(e.get("vladbud_compile_ms"))
    row["noise_pct"] = _num(e.get("noise_pct"))
    row["protocol"] = e.get("protocol")
    row["verify_baseline"] = e.get("baseline")
    row["verify_speedup"] = _num(e.get("speedup", v.get("speedup")))
    ci = e.get("ci")
    row["verify_ci"] = [_num(c) for c in ci] if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
    row["verdict"] = v.get("verdict")
    row["kernels_in"] = [str(k) for k in (v.get("kernels_in") or [])]
    row["kernels_dropped"] = [str(k) for k in (v.get("kernels_dropped") or [])]
    row["max_rel_error"] = _num(v.get("max_rel_error"))
    row["speedup_vs_eager"] = _ratio(row["eager_ms"], row["vladbud_ms"])
    row["speedup_vs_compile"] = _ratio(row["compile_ms"], row["vladbud_compile_ms"])
    cands = []
    for c in v.get("candidates") or []:
        if not isinstance(c, dict):
            continue
        ci = c.get("in_model_ci")
        cands.append({"type": c.get("type"), "source": c.get("source"), "decision": c.get("decision"),
                      "reason": c.get("reason"), "in_model_speedup": _num(c.get("in_model_speedup")),
                      "in_model_ci": [_num(x) for x in ci] if isinstance(ci, (list, tuple)) and len(ci) == 2 else None,
                      "own_shape_speedup": _num(c.get("own_shape_speedup")),
                      "rel_error": _num(c.get("rel_error")),
                      "calls_per_forward": c.get("calls_per_forward"), "expected_calls": c.get("expected_calls"),
                      "compiled_speedup": _num(c.get("compiled_speedup")),
                      "compiled_ci": [_num(x) for x in c["compiled_ci"]]
                      if isinstance(c.get("compiled_ci"), (list, tuple)) and len(c["compiled_ci"]) == 2 else None,
                      "combination_note": c.get("combination_note")})
    row["candidates"] = cands
    if "compile_ms" in e and e.get("compile_ms") is None:
        row["notes"].append("verify gave no torch.compile time (compile_ms null)")
    return row


def row_from_workspace(spec, device, ws):
    """A row from an existing workspace's verify.json (E2EError when it is missing)."""
    row = empty_row(spec, device)
    row["workspace"] = ws
    fill_row_from_verify(row, load_verify(ws))
    row["status"] = "measured"
    return row


# ---------------------------------------------------------------------------------------------
# Running steps.

def run_step(name, cmd, timeout, log_path=None, env=None, cwd=None):
    """Runs cmd (list) in its own process group with a timeout; the group is killed on timeout.
    Returns {step, cmd, rc, seconds, timed_out, stdout, stderr_tail, error}."""
    t0 = time.time()
    res = {"step": name, "cmd": cmd, "rc": None, "seconds": None, "timed_out": False,
           "stdout": "", "stderr_tail": "", "error": None, "limit_s": round(timeout, 1)}
    if timeout <= 0:
        res["error"] = f"{name}: skipped, no time left (model or --deadline budget spent)"
        res["seconds"] = 0.0
        return res
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=cwd, start_new_session=True)
    except OSError as e:
        res["error"] = f"{name}: cannot start {cmd[0]} ({e})"
        res["seconds"] = round(time.time() - t0, 2)
        return res
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        out, err = p.communicate()
        res["timed_out"] = True
    res["rc"] = p.returncode
    res["seconds"] = round(time.time() - t0, 2)
    res["stdout"] = out or ""
    res["stderr_tail"] = (err or "")[-3000:]
    if log_path:
        try:
            with open(log_path, "w") as f:
                f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
                f.write(out or "")
                f.write("\n--- stderr ---\n")
                f.write(err or "")
                f.write(f"\n(exit {p.returncode}, {res['seconds']} s"
                        f"{', killed by the time limit' if res['timed_out'] else ''})\n")
        except OSError:
            pass
    if res["timed_out"]:
        res["error"] = f"{name}: stopped by its {timeout:.0f} s time limit"
    elif p.returncode != 0:
        res["error"] = f"{name}: exit {p.returncode}: {_last_lines(err or out or '', 6)}"
    return res


def kill_session(sid):
    """SIGKILL to every process of the session `sid` (the step was started as its leader with
    start_new_session): vladbud puts its Python child in a process group of its own, so killing
    the group alone would leave that child running."""
    pids = []
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            if int(rest[3]) == sid:
                pids.append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    for pid in [p for p in pids if p != sid] + [sid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_lines(text, n):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-1200:] if lines else "(no output)"


def vladbud_binary():
    vb = os.environ.get("VLADBUD") or os.path.join(ROOT, "build", "vladbud")
    return vb


def child_env():
    env = dict(os.environ)
    env.setdefault("VLADBUD_HOME", ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _step_record(r):
    return {k: r[k] for k in ("step", "rc", "seconds", "timed_out", "error", "limit_s")} | \
        {"cmd": " ".join(shlex.quote(c) for c in r["cmd"])}


def run_model(spec, machine, work, top=5, reps=None, deadline=None, vb=None, liger=True,
              step_limits=None):
    """Profile, extract, verify (and Liger) for one spec in a fresh workspace work/<name>.
    Returns its row; never raises for a failed step (the error goes into the row)."""
    device = "cuda" if machine == "h200" else "cpu"
    limits = dict(STEP_LIMIT[machine], **(step_limits or {}))
    row = empty_row(spec, device)
    vb = vb or vladbud_binary()
    ws = os.path.join(work, spec["name"])
    row["workspace"] = ws
    t_model = time.time()

    # Time kept for the Liger worker while verify runs, when it will run (an eligible model).
    reserve = limits["liger"] if liger and liger_eligibility(spec, device)[0] else 0.0

    def left(step):
        budget = spec["limit_s"] - (time.time() - t_model)
        if deadline is not None:
            budget = min(budget, deadline - time.time())
        if step == "verify" and reserve:  # leave the Liger worker its time, but take at least half
            budget = max(0.5 * budget, budget - reserve)
        return min(limits[step], budget)

    if os.path.exists(ws) and os.listdir(ws):
        row["errors"].append(f"workspace {ws} already exists and is not empty; pass a fresh --work folder")
        row["status"] = "error"
        return row
    os.makedirs(ws, exist_ok=True)
    if not (os.path.isfile(vb) and os.access(vb, os.X_OK)):
        row["errors"].append(f"no vladbud binary at {vb}; build it (bash scripts/setup.sh) or set $VLADBUD")
        row["status"] = "error"
        return row
    env = child_env()
    steps = [("profile", [vb, "profile"] + profile_args(spec, device) + ["--workspace", ws]),
             ("extract", [vb, "extract", "--top", str(top), "--workspace", ws] +
              (["--backend", "cuda"] if device == "cuda" else [])),
             ("verify", [vb, "verify", "--compile", "--json", "--workspace", ws] +
              (["--reps", str(reps)] if reps else []))]
    for name, cmd in steps:
        log(f"{spec['name']}: {name} (limit {max(0, left(name)):.0f} s)")
        r = run_step(name, cmd, left(name), os.path.join(ws, f"e2e-{name}.log"), env=env, cwd=ws)
        row["steps"].append(_step_record(r))
        log(f"{spec['name']}: {name} exit {r['rc']} in {r['seconds']} s"
            + (f" -- {r['error']}" if r["error"] else ""))
        if name == "verify":
            # verify exits 1 on a FAIL verdict but still writes verify.json: use it when there.
            if os.path.isfile(os.path.join(ws, "verify.json")):
                try:
                    fill_row_from_verify(row, load_verify(ws))
                    row["status"] = "measured"
                    if r["error"] and r["rc"] == 1 and row["verdict"] == "FAIL":
                        r["error"] = None
                        row["notes"].append("verify exited 1: verdict FAIL")
                except E2EError as e:
                    row["errors"].append(f"verify: {e}")
            elif r["error"] is None:
                r["error"] = f"verify: exit {r['rc']} but {ws}/verify.json was not written"
        if r["error"]:
            row["errors"].append(r["error"])
            if name != "verify":
                row["notes"].append(f"vladbud steps stopped after {name}: the later ones need its output")
                break
    if row["status"] != "measured":
        row["status"] = "error"
    if liger:
        run_liger(row, spec, machine, ws, reps, lambda: left("liger"))
    row["model_seconds"] = round(time.time() - t_model, 1)
    return row


# ---------------------------------------------------------------------------------------------
# Liger-Kernel.

def liger_eligibility(spec, device):
    """(apply function name or None, reason when None). HF Llama-family configs only, on a GPU."""
    if spec.get("module") != "transformers":
        return None, "not an HF transformers model (Liger-Kernel patches HF model classes)"
    cfg = abs_path(spec.get("config", ""))
    if cfg and os.path.isdir(cfg):
        cfg = os.path.join(cfg, "config.json")
    model_type = None
    try:
        with open(cfg) as f:
            model_type = json.load(f).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError):
        model_type = None
    if model_type is None:
        return None, f"cannot read model_type from the config '{spec.get('config')}'"
    fn = LIGER_FAMILY.get(model_type)
    if fn is None:
        return None, f"model_type '{model_type}' is not in the Llama family ({', '.join(LIGER_FAMILY)})"
    if device != "cuda":
        return None, "Liger-Kernel's kernels are Triton GPU kernels: not run on the CPU"
    return fn, None


def run_liger(row, spec, machine, ws, reps, left):
    device = row["device"]
    fn, why = liger_eligibility(spec, device)
    if fn is None:
        row["liger_note"] = why
        return
    req = {"model": abs_path(spec.get("model", "")), "module": spec.get("module", ""),
           "config": abs_path(spec.get("config", "")), "class_name": spec["class_name"],
           "model_args": spec.get("model_args") or {}, "dtype": spec["dtype"], "device": device,
           "input": spec["input"], "apply": fn, "reps": int(reps or 9), "warmup": 2}
    rq, rs = os.path.join(ws, "liger_request.json"), os.path.join(ws, "liger_result.json")
    with open(rq, "w") as f:
        json.dump(req, f, indent=1)
    env = child_env()
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as vladbud's bridge runs verify (run_bridge)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t = left()
    log(f"{spec['name']}: liger (limit {max(0, t):.0f} s)")
    r = run_step("liger", [sys.executable, os.path.abspath(__file__), "--liger-worker", rq, rs], t,
                 os.path.join(ws, "e2e-liger.log"), env=env)
    row["steps"].append(_step_record(r))
    log(f"{spec['name']}: liger exit {r['rc']} in {r['seconds']} s" + (f" -- {r['error']}" if r["error"] else ""))
    res = None
    if os.path.isfile(rs):
        try:
            with open(rs) as f:
                res = json.load(f)
        except (OSError, json.JSONDecodeError):
            res = None
    if res and res.get("skipped"):
        row["liger_note"] = res["skipped"]
        return
    if r["error"] or not res:
        row["liger_note"] = r["error"] or "the Liger worker wrote no result"
        row["errors"].append(row["liger_note"])
        return
    fill_liger(row, res)


def fill_liger(row, res):
    """From the Liger worker's result: liger_ms_raw = Liger's median in its own process,
    liger_eager_ms = eager's median in that same process, liger_ratio = the paired speedup of
    Liger over that eager (1 / median of the per-round ratios, as verify computes vladbud_ms;
    > 1: Liger faster), liger_ci its 95 % interval. liger_ms = verify's eager_ms / liger_ratio:
    Liger on the same scale as the row's other columns; the raw median when verify gave no
    eager_ms (noted)."""
    row["liger_ms_raw"] = _num(res.get("liger_ms"))
    row["liger_eager_ms"] = _num(res.get("eager_ms"))
    row["liger_ratio"] = _num(res.get("speedup")) or _ratio(row["liger_eager_ms"], row["liger_ms_raw"])
    ci = res.get("ci")
    row["liger_ci"] = [_num(c) for c in ci] if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
    if row.get("eager_ms") is not None and row["liger_ratio"]:
        row["liger_ms"] = row["eager_ms"] / row["liger_ratio"]
        row["liger_scaled"] = True
    else:
        row["liger_ms"] = row["liger_ms_raw"]
        row["liger_scaled"] = False
        if row["liger_ms"] is not None:
            row["notes"].append("Liger ms is its raw median (verify gave no eager_ms to scale it to)")
    row["liger_rel_error"] = _num(res.get("rel_error"))
    row["liger_noise_pct"] = _num(res.get("noise_pct"))
    row["liger_protocol"] = res.get("protocol")
    row["liger_version"] = res.get("liger_version")
    row["liger_note"] = res.get("note")


def liger_worker(req_path, res_path):
    """The separate process: same model (vladbud.loader), same dtype/device/input as verify's
    timing (make_inputs seed 1), eager and the Liger-patched deep copy timed in alternating rounds
    after warm-up, medians. Module-level functions Liger replaces (e.g. apply_rotary_pos_emb) are
    swapped in only while the Liger model runs, so the eager side stays unpatched."""
    with open(req_path) as f:
        req = json.load(f)

    def write(d):
        with open(res_path, "w") as f:
            json.dump(d, f, indent=1)

    try:
        import liger_kernel  # noqa: F401
        import liger_kernel.transformers as lt
    except Exception as e:  # noqa: BLE001 - any import failure means: not available
        write({"skipped": f"liger_kernel is not importable in {sys.executable} ({type(e).__name__}: {e})"})
        return 0
    import torch
    from vladbud.loader import load_model, make_inputs, prepare
    apply = getattr(lt, req["apply"], None)
    if apply is None:
        write({"skipped": f"liger_kernel.transformers has no {req['apply']}"})
        return 0
    dev = req["device"]
    base = prepare(load_model(req.get("model", ""), req["class_name"], req.get("module", ""),
                              req.get("config", ""), req.get("model_args") or {}), req["dtype"], dev)
    lig = copy.deepcopy(base)
    mt = getattr(getattr(base, "config", None), "model_type", "llama")
    mod = sys.modules.get(f"transformers.models.{mt}.modeling_{mt}")
    if mod is None:
        import importlib
        mod = importlib.import_module(f"transformers.models.{mt}.modeling_{mt}")
    before = dict(vars(mod))
    apply(model=lig)
    patched = {k: v for k, v in vars(mod).items() if before.get(k, None) is not v}
    for k in patched:  # restore: the eager model must run the unpatched module functions
        if k in before:
            setattr(mod, k, before[k])
    B, S = (int(p) for p in req["input"].split(","))
    x = make_inputs(base, B, S, dev, seed=1)

    def fwd(m, use_liger):
        if use_liger:
            for k, v in patched.items():
                setattr(mod, k, v)
        try:
            with torch.inference_mode():
                y = m(x)
            if dev == "cuda":
                torch.cuda.synchronize()
        finally:
            if use_liger:
                for k in patched:
                    if k in before:
                        setattr(mod, k, before[k])
        y = y[0] if isinstance(y, (tuple, list)) else y
        return getattr(y, "logits", y)

    y0, y1 = fwd(base, False), fwd(lig, True)
    a, b = y0.double(), y1.double()
    rel = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(a))
    warm, reps = int(req.get("warmup", 2)), int(req.get("reps", 9))

    class _V:  # what vladbud.verify.time_variants times: .name, .forward(x, dev)
        def __init__(self, name, m, ul):
            self.name, self.m, self.ul = name, m, ul

        def forward(self, _x, _dev):
            return fwd(self.m, self.ul)

    try:  # verify's own protocol when this tree's bridge has it
        from vladbud.verify import paired_decision, time_variants
    except Exception:  # noqa: BLE001 - any failure: the fallback loop below
        paired_decision = time_variants = None
    if time_variants is not None:
        ms, inner = time_variants([_V("eager", base, False), _V("liger", lig, True)], x, dev, warm, reps)
        te, tl = ms["eager"], ms["liger"]
        d = paired_decision(te, tl)
        proto = (f"vladbud.verify.time_variants: {warm} warm-up each, {reps} interleaved rounds (rotated "
                 f"order), {inner} forward(s) per sample, median; paired speedup with the 95% CI of the "
                 f"median ratio (vladbud.verify.paired_decision)")
    else:
        for _ in range(warm):
            fwd(base, False)
            fwd(lig, True)
        te, tl = [], []
        for i in range(reps):
            order = ((te, base, False), (tl, lig, True)) if i % 2 == 0 else ((tl, lig, True), (te, base, False))
            for side, m, ul in order:
                t = time.perf_counter()
                fwd(m, ul)
                side.append((time.perf_counter() - t) * 1e3)
        ratios = sorted(b / a for a, b in zip(te, tl))
        d = {"speedup": 1.0 / statistics.median(ratios), "ci": [1.0 / ratios[-1], 1.0 / ratios[0]],
             "noise_pct": 100.0 * (ratios[-1] - ratios[0]) / 2.0 / statistics.median(ratios)}
        proto = (f"{warm} warm-up each, {reps} alternating rounds (order flipped every round), median; "
                 f"paired speedup, min-max interval of the ratios (vladbud.verify's protocol not importable)")
    write({"eager_ms": statistics.median(te), "liger_ms": statistics.median(tl),
           "eager_all_ms": te, "liger_all_ms": tl, "speedup": d["speedup"], "ci": d["ci"],
           "noise_pct": d["noise_pct"], "rel_error": rel,
           "protocol": proto + f"; {'CUDA-synchronized ' if dev == 'cuda' else ''}wall clock, inference_mode",
           "patched_module_names": sorted(patched),
           "liger_version": _version("liger-kernel"), "torch": torch.__version__})
    return 0


# ---------------------------------------------------------------------------------------------
# Header, Markdown, files.

def _version(pkg):
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cmd_out(cmd, timeout=10):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_commit():
    """The commit measured: .h200/GIT_COMMIT when the vladbud used is the packed one ($VLADBUD
    under .h200/, as e2e_h200.sh sets; written by `e2e_h200.sh --pack` from the tree the
    binaries were built from; the GPU machine's copy of .git can be stale), else
    `git rev-parse HEAD` with a note when the tree has uncommitted changes."""
    p = os.path.join(ROOT, ".h200", "GIT_COMMIT")
    if os.path.isfile(p) and "/.h200/" in os.environ.get("VLADBUD", ""):
        with open(p) as f:
            lines = f.read().strip().splitlines()
        if lines:
            return lines[0] + (" (+ uncommitted changes)" if len(lines) > 1 else "") + " (as packed into .h200/)"
    c = _cmd_out(["git", "-C", ROOT, "rev-parse", "HEAD"])
    if c:
        dirty = _cmd_out(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])
        return c + (" (+ uncommitted changes)" if dirty else "")
    return None


def machine_info():
    gpu = _cmd_out(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    return {"hostname": socket.gethostname(), "cpu_model": cpu_model(), "cpus": os.cpu_count(),
            "gpu": gpu.splitlines()[0] if gpu else None, "load_avg_before": _loadavg(), "load_avg_after": None}


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def make_header(machine, argv, vb):
    return {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine_kind": machine, "machine": machine_info(), "git_commit": git_commit(),
            "command": " ".join(shlex.quote(a) for a in argv),
            "vladbud": vb, "vladbud_version": _cmd_out([vb, "--version"]) if os.path.isfile(vb) else None,
            "python": sys.version.split()[0], "torch": _version("torch"),
            "transformers": _version("transformers"), "liger_kernel": _version("liger-kernel"),
            "triton": _version("triton")}


def _f(x, nd=2, suffix=""):
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if isinstance(x, float) and (abs(x) < 1e-3 and x != 0):
        return f"{x:.2e}{suffix}"
    return f"{x:.{nd}f}{suffix}"


def _x(x):
    return "—" if x is None else f"{x:.3f}×"


def _ci(ci):
    return "—" if not ci or ci[0] is None or ci[1] is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _count(x):
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return "—" if x is None else str(x)


def _calls(c):
    got, exp = c.get("calls_per_forward"), c.get("expected_calls")
    return _count(got) + ("" if exp is None else f" ({_count(exp)})")


def _cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def _busy(m):
    cpus = m.get("cpus") or 0
    loads = [x for k in ("load_avg_before", "load_avg_after") for x in (m.get(k) or [])[:1]]
    return bool(cpus and loads and max(loads) > cpus)


def render_markdown(header, rows):
    h = header
    m = h.get("machine") or {}
    out = [f"# End-to-end benchmark (issue 14): {h.get('machine_kind', '?')}", "",
           f"Written by `bench/e2e.py` on {h.get('date')} (UTC).", "",
           "```", f"$ {h.get('command')}", "```", "",
           f"- machine: {m.get('hostname')}; CPU {m.get('cpu_model')} ({m.get('cpus')} logical CPUs); "
           f"GPU {m.get('gpu') or 'none'}; load average before {m.get('load_avg_before')}, "
           f"after {m.get('load_avg_after')}",
           f"- git commit: {h.get('git_commit') or 'unknown'}",
           *(["- rows rebuilt from the verify.json files of existing workspaces (--from-workspaces): the date, "
              "load and versions above are those of the rebuild, not of the measurement"]
             if h.get("from_workspaces") else []),
           *[f"- merged from `{x['file']}`: {x.get('date')}, `{x.get('command')}`, commit {x.get('git_commit')}"
             for x in h.get("merged_from") or []],
           f"- vladbud: {h.get('vladbud')} ({h.get('vladbud_version') or 'version unknown'}); python "
           f"{h.get('python')}, torch {h.get('torch') or 'not installed'}, transformers {h.get('transformers') or 'not installed'}, "
           f"liger-kernel {h.get('liger_kernel') or 'not installed'}, triton {h.get('triton') or 'not installed'}",
           *([f"- **warning**: the load average passed the {m.get('cpus')} logical CPUs during the run: "
               f"the timings shared the cores with other work"] if _busy(m) else []),
           "",
           "| model | dtype | input | device | eager ms | torch.compile ms | Liger ms (× own eager) | "
           "VladBud ms | VladBud + compile ms | vs eager | vs compile | max rel. error | noise % | "
           "kernels in | dropped | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lig = "—" if r.get("liger_ms") is None else \
            f"{_f(r['liger_ms'])} ({_x(r.get('liger_ratio'))})"
        verdict = r.get("verdict") or ("ERROR" if r.get("errors") else "—")
        if r.get("errors") and r.get("verdict"):
            verdict += " (+errors)"
        out.append("| " + " | ".join(_cell(c) for c in (
            r["model"], r["dtype"], r["input"], r["device"], _f(r.get("eager_ms")), _f(r.get("compile_ms")),
            lig, _f(r.get("vladbud_ms")), _f(r.get("vladbud_compile_ms")), _x(r.get("speedup_vs_eager")),
            _x(r.get("speedup_vs_compile")), _f(r.get("max_rel_error")), _f(r.get("noise_pct"), 1),
            ", ".join(r.get("kernels_in") or []) or "—", ", ".join(r.get("kernels_dropped") or []) or "—",
            verdict)) + " |")
    out += ["",
            "Columns: medians per forward from `vladbud verify --compile` (its protocol is given per model "
            "below). *vs eager* = eager / VladBud (both eager); *vs compile* = torch.compile / "
            "(VladBud + torch.compile) (both compiled); > 1 means VladBud's kernels are faster. "
            "*Liger ms*: Liger-Kernel is timed in a separate Python process (same model, config, dtype, "
            "device and input, built with vladbud.loader), interleaved with eager in that same process "
            "(verify's protocol); the bracket is Liger's paired speedup over that process's eager (> 1: "
            "Liger faster), and Liger ms = this table's eager ms / that speedup, i.e. scaled to verify's "
            "eager (the raw medians of that process are in the model's section and the JSON). "
            "*noise %* is verify's noise estimate (half the 95 % interval of eager's median, relative); "
            "a speedup within it is no speedup. *kernels in / dropped* are verify's kernels_in / "
            "kernels_dropped: what is handed over against verify's baseline (torch.compile under "
            "--compile); *VladBud ms* (eager) is the model with the eager winners, the candidates whose "
            "decision is *in* (per model below), which can be handed over in eager even when they are "
            "dropped from the compiled model.", ""]
    for r in rows:
        out += _model_section(r)
    return "\n".join(out) + "\n"


def _model_section(r):
    s = [f"## {r['model']}: {r.get('title', r['model'])}, {r['dtype']}, input {r['input']}, {r['device']}", ""]
    if r.get("workspace"):
        s.append(f"- workspace: `{r['workspace']}`")
    for st in r.get("steps") or []:
        extra = f" — {st['error']}" if st.get("error") else ""
        s.append(f"- `{st['step']}`: exit {st.get('rc')}, {st.get('seconds')} s (limit {st.get('limit_s')} s){extra}")
    if r.get("verdict"):
        s.append(f"- verify: **{r['verdict']}**; baseline {r.get('verify_baseline') or '—'}, speedup "
                 f"{_x(r.get('verify_speedup'))}, CI {_ci(r.get('verify_ci'))}, noise {_f(r.get('noise_pct'), 1)} %; "
                 f"max rel. error {_f(r.get('max_rel_error'))}")
        s.append(f"- protocol: {r.get('protocol') or '—'}")
    if r.get("liger_ms") is not None:
        s.append(f"- Liger-Kernel {r.get('liger_version') or ''}: paired speedup over eager in its own process "
                 f"{_x(r.get('liger_ratio'))} (95% CI {_ci(r.get('liger_ci'))}, noise {_f(r.get('liger_noise_pct'), 1)} %); "
                 f"raw medians there: eager {_f(r.get('liger_eager_ms'))} ms, Liger {_f(r.get('liger_ms_raw'))} ms; "
                 f"{'scaled to verify' + chr(39) + 's eager: ' if r.get('liger_scaled') else 'unscaled: '}"
                 f"{_f(r.get('liger_ms'))} ms; output rel. error vs eager {_f(r.get('liger_rel_error'))}; "
                 f"protocol: {r.get('liger_protocol') or '—'}")
    else:
        s.append(f"- Liger-Kernel: not measured: {r.get('liger_note') or 'not attempted'}")
    for n in r.get("notes") or []:
        s.append(f"- note: {n}")
    for e in r.get("errors") or []:
        s.append(f"- **error**: {_cell(e)}")
    cands = r.get("candidates") or []
    if cands:
        s += ["", "| candidate | source | decision | reason | in-model speedup (eager) | CI | in compiled model | "
              "CI | own-shape speedup | rel. error | calls/forward (expected) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in cands:
            reason = c.get("reason") or "—"
            if c.get("combination_note"):
                reason += f"; {c['combination_note']}"
            s.append("| " + " | ".join(_cell(x) for x in (
                c.get("type") or "?", f"`{c.get('source')}`" if c.get("source") else "—",
                c.get("decision") or "—", reason, _x(c.get("in_model_speedup")), _ci(c.get("in_model_ci")),
                _x(c.get("compiled_speedup")), _ci(c.get("compiled_ci")), _x(c.get("own_shape_speedup")),
                _f(c.get("rel_error")), _calls(c))) + " |")
    elif r.get("status") == "measured":
        s += ["", "verify.json lists no candidates."]
    s.append("")
    return s


def write_outputs(outdir, machine, header, rows):
    os.makedirs(outdir, exist_ok=True)
    base = os.path.join(outdir, f"e2e-{machine}")
    with open(base + ".json.tmp", "w") as f:
        json.dump({"header": header, "rows": rows}, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")
    with open(base + ".md.tmp", "w") as f:
        f.write(render_markdown(header, rows))
    os.replace(base + ".md.tmp", base + ".md")
    return base + ".md", base + ".json"


def archive_workspaces(path, work):
    """The small files of every workspace (JSON, step logs, kernel sources), no built libraries."""
    keep = (".json", ".log", ".md", ".cpp", ".cu", ".tsv")
    with tarfile.open(path + ".tmp", "w:gz") as tf:
        for d, _, files in os.walk(work):
            if "/cache" in d or "/.bridge" in d:
                continue
            for fn in files:
                if fn.endswith(keep) and os.path.getsize(os.path.join(d, fn)) < 8 << 20:
                    full = os.path.join(d, fn)
                    tf.add(full, arcname=os.path.relpath(full, os.path.dirname(work)))
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------------------------------------

def check_vladbud(vb):
    """None when vb runs and its verify takes --compile; else why not (with the fix)."""
    if not (os.path.isfile(vb) and os.access(vb, os.X_OK)):
        return f"no vladbud binary at {vb}; build it (bash scripts/setup.sh) or set $VLADBUD"
    h = _cmd_out([vb, "verify", "--help"], timeout=30)
    if h is None:
        return f"`{vb} verify --help` failed; is the binary for this machine (libraries on LD_LIBRARY_PATH)?"
    if "--compile" not in h:
        return (f"`{vb} verify` has no --compile option: this build predates the end-to-end verify "
                f"(end_to_end, candidates, kernels_in/dropped); rebuild it from a tree that has it")
    return None


def merge_outputs(paths, outdir, machine):
    """Rows of several e2e JSON files, one per model (the later file wins), in first-seen order."""
    header, rows, order = None, {}, []
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
            h, rs = d["header"], d["rows"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            print(f"e2e: error: --merge {p}: not an e2e JSON file ({e})", file=sys.stderr)
            return 2
        if header is None:
            header = dict(h, merged_from=[])
        header["merged_from"].append({"file": p, "date": h.get("date"), "command": h.get("command"),
                                      "git_commit": h.get("git_commit"), "machine": h.get("machine")})
        for r in rs:
            if r["model"] not in rows:
                order.append(r["model"])
            rows[r["model"]] = dict(r, from_run=h.get("date"))
    header["command"] = " + ".join(m["command"] or "?" for m in header["merged_from"])
    kind = header.get("machine_kind") or machine
    md, js = write_outputs(outdir, kind, header, [rows[m] for m in order])
    log(f"merged {len(order)} row(s) from {len(paths)} file(s) into {md} and {js}")
    return 0


def detect_machine():
    gpu = _cmd_out(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], timeout=5)
    return "h200" if gpu and "H200" in gpu else "cpu"


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/e2e.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", choices=MACHINES, help="cpu or h200 (default: h200 when nvidia-smi names an H200)")
    ap.add_argument("--models", default="", help=f"comma list of {', '.join(MODELS)} "
                    f"(default cpu: {','.join(DEFAULTS['cpu'])}; h200: {','.join(DEFAULTS['h200'])})")
    ap.add_argument("--model-json", help="one more model as a JSON object: name, model (.py) or module "
                    "(+ config), class_name, dtype, input, model_args, limit_s")
    ap.add_argument("--dtype", help="override every model's dtype (fp32, fp16, bf16)")
    ap.add_argument("--input-shape", help="override every model's input B,S")
    ap.add_argument("--top", type=int, default=5, help="vladbud extract --top N (default 5)")
    ap.add_argument("--reps", type=int, help="timed rounds: vladbud verify --reps and the Liger worker "
                    "(default: verify's own default, 9, for both)")
    ap.add_argument("--outdir", default=None, help="where e2e-<machine>.md/.json go (default bench/results)")
    ap.add_argument("--work", help="parent of the per-model workspaces (default: a new folder under /tmp)")
    ap.add_argument("--model-limit", type=float, help="seconds per model, all its steps (default cpu 1800, "
                    "h200 150, hf-llama-836m 330)")
    ap.add_argument("--step-limit", action="append", default=[], metavar="STEP=S",
                    help="seconds for one step (profile, extract, verify, liger); repeatable")
    ap.add_argument("--deadline", type=float, help="seconds for the whole run; later steps get what is left")
    ap.add_argument("--no-liger", action="store_true", help="skip the Liger-Kernel measurement")
    ap.add_argument("--archive", help="also write a .tar.gz of the workspaces' JSON, logs and sources")
    ap.add_argument("--from-workspaces", action="store_true",
                    help="run nothing: build the rows from the workspaces already in --work")
    ap.add_argument("--merge", nargs="+", metavar="E2E.json",
                    help="run nothing: merge the rows of earlier e2e-<machine>.json files (a later file's row "
                         "replaces an earlier one of the same model) into <outdir>/e2e-<machine>.md/.json")
    a = ap.parse_args(argv)
    if a.top < 1:
        raise E2EError("--top must be >= 1")
    if a.reps is not None and a.reps < 1:
        raise E2EError("--reps must be >= 1")
    steps = {}
    for s in a.step_limit:
        k, _, v = s.partition("=")
        if k not in ("profile", "extract", "verify", "liger") or not v:
            raise E2EError(f"--step-limit takes STEP=SECONDS with STEP one of profile, extract, verify, "
                           f"liger (got '{s}')")
        try:
            steps[k] = float(v)
        except ValueError:
            raise E2EError(f"--step-limit {s}: '{v}' is not a number of seconds") from None
    a.step_limits = steps
    if a.from_workspaces and not a.work:
        raise E2EError("--from-workspaces needs --work DIR (the folder holding <model>/verify.json)")
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--liger-worker"]:
        if len(argv) != 3:
            print("usage: e2e.py --liger-worker REQUEST.json RESULT.json", file=sys.stderr)
            return 2
        return liger_worker(argv[1], argv[2])
    try:
        a = parse_args(argv)
        machine = a.machine or detect_machine()
        specs = model_specs(a.models, machine, a.dtype, a.input_shape, a.model_json, a.model_limit)
        if a.from_workspaces and not os.path.isdir(a.work):
            raise E2EError(f"--work {a.work} does not exist")
    except E2EError as e:
        print(f"e2e: error: {e}", file=sys.stderr)
        return 2
    outdir = a.outdir or os.path.join(ROOT, "bench", "results")
    vb = vladbud_binary()
    if a.merge:
        return merge_outputs(a.merge, outdir, machine)
    if not a.from_workspaces:
        why = check_vladbud(vb)
        if why:
            print(f"e2e: error: {why}", file=sys.stderr)
            return 2
    header = make_header(machine, ["bench/e2e.py"] + list(argv), vb)
    device = "cuda" if machine == "h200" else "cpu"
    deadline = time.time() + a.deadline if a.deadline else None
    work = a.work or tempfile.mkdtemp(prefix="vb-e2e-")
    os.makedirs(work, exist_ok=True)
    header["work"] = work
    if a.from_workspaces:
        header["from_workspaces"] = True
    log(f"{machine}: {len(specs)} model(s): {', '.join(s['name'] for s in specs)}; workspaces under {work}")
    rows = []
    for i, spec in enumerate(specs):
        log(f"[{i + 1}/{len(specs)}] {spec['name']}: {spec['dtype']} {spec['input']} on {device}")
        if a.from_workspaces:
            try:
                row = row_from_workspace(spec, device, os.path.join(work, spec["name"]))
            except E2EError as e:
                row = empty_row(spec, device)
                row["status"] = "error"
                row["errors"].append(str(e))
        else:
            try:
                row = run_model(spec, machine, work, top=a.top, reps=a.reps, deadline=deadline, vb=vb,
                                liger=not a.no_liger, step_limits=a.step_limits)
            except Exception as e:  # noqa: BLE001 - one model's failure must not end the run
                row = empty_row(spec, device)
                row["status"] = "error"
                row["errors"].append(f"e2e.py: {type(e).__name__}: {e}")
        rows.append(row)
        header["machine"]["load_avg_after"] = _loadavg()
        md, js = write_outputs(outdir, machine, header, rows)
        if a.archive:
            try:
                archive_workspaces(a.archive, work)
            except OSError as e:
                log(f"archive failed: {e}")
        log(f"{spec['name']}: {row['status']}; eager {_f(row['eager_ms'])} ms, compile {_f(row['compile_ms'])}, "
            f"vladbud {_f(row['vladbud_ms'])}, vladbud+compile {_f(row['vladbud_compile_ms'])}, liger "
            f"{_f(row['liger_ms'])}" + (f"; {len(row['errors'])} error(s)" if row["errors"] else ""))
    log(f"wrote {md} and {js}")
    return 0 if rows and all(r["status"] == "measured" and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
