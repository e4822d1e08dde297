"""`python -m vladbud.profile REQUEST.json RESULT.json`: profile a model's forward pass.

Called by `vladbud profile` (src/cli/profile.cpp), which owns the user-facing options, the
FLOP/byte models, the roofline and Amdahl's bound. REQUEST fields: model, class_name, module,
config, model_args (object), input_shape "B,S", dtype fp32|fp16|bf16, device cpu|cuda,
warmup (default 3), iters (profiled forwards, default 3), export_trace (path or ""), seed.
RESULT: {"device", "device_name", "dtype", "input_shape", "torch", "model": {...},
"forward_ms" (median of unprofiled forwards), "iters", "profiled_us" (per forward, sum of the
entries), "entries": [{"type", "op", "dims", "attrs", "dtype", "shapes", "kernels", "calls",
"us" (per forward), "evidence", "note"}], "load_average" (1-minute, the lowest of the
attempts), "cores", "profile_attempts", "warnings": [...]}. A contended machine (load above the
cores + 1) is re-measured after a pause (request fields remeasure, default 2, and
remeasure_pause_s, default 5); on a GPU a forward whose kernels keep the GPU busy < 70 % of the
wall-clock time is flagged launch-bound. Exit code 2 with
'error: ...' on stderr for bad input.
"""
import json
import os
import statistics
import sys
import time
import warnings as pywarnings

import torch
from torch.profiler import ProfilerActivity, profile

from . import BridgeError
from .classify import classify, fuse_patterns
from .loader import load_from_request, make_inputs, model_depth, parse_input_shape, read_request, vocab_size
from .trace import entries, from_profiler


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed_forwards(model, x, device, n):
    """Wall-clock ms of n forwards (synchronized on CUDA)."""
    out = []
    with torch.inference_mode():
        for _ in range(n):
            sync(device)
            t = time.perf_counter()
            model(x)
            sync(device)
            out.append((time.perf_counter() - t) * 1e3)
    return out


def group_entries(classified, iters):
    """Merges entries of equal (type or op, dims, attrs, dtype[, shapes when untyped]); times are
    per forward (divided by iters). Sorted by time, largest first."""
    groups = {}
    for e in classified:
        key = json.dumps([e["type"], e["op"] if e["type"] is None else None, e["dims"], e["attrs"],
                          e["dtype"], e["shapes"] if e["dims"] is None else None], sort_keys=True)
        g = groups.get(key)
        if g is None:
            g = groups[key] = dict(e, calls=0, us=0.0, kernels=set())
            if e["type"] is not None:
                g["ops"] = set()
        g["calls"] += 1
        g["us"] += e["us"]
        g["kernels"].update(e["kernels"])
        if "ops" in g:
            g["ops"].add(e["op"])
    out = []
    for g in groups.values():
        g["kernels"] = sorted(g["kernels"])[:8]
        if "ops" in g:
            g["op"] = ", ".join(sorted(g.pop("ops")))
        g["us"] /= iters
        g["calls"] = g["calls"] / iters
        out.append(g)
    out.sort(key=lambda g: -g["us"])
    return out


def load_average() -> float:
    """The 1-minute load average (os.getloadavg), 0.0 where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def contended(load: float, cores: int) -> bool:
    """A machine is contended when its 1-minute load average exceeds its logical cores + 1 (the
    model's own threads account for up to `cores`; the rule autotune's warning uses): other
    processes then take CPU time from the model (and from the host side of a GPU model), so
    per-op times are inflated unevenly and shares rank wrong."""
    return load > cores + 1


def _profile_once(model, x, device, iters):
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.inference_mode(), pywarnings.catch_warnings():
        # torch warns that a profile without a schedule "clears events at the end of each
        # cycle": there is one cycle here, and every event of it is kept.
        pywarnings.filterwarnings("ignore", message=".*clears events.*")
        with profile(activities=acts, record_shapes=True) as prof:
            for _ in range(iters):
                model(x)
            sync(device)
    return prof


def run(req: dict) -> dict:
    device = req.get("device", "cpu")
    dtype = req.get("dtype", "fp32")
    B, S = parse_input_shape(req.get("input_shape", ""))
    model = load_from_request(req)
    x = make_inputs(model, B, S, device, seed=int(req.get("seed", 0)))
    warmup, iters = int(req.get("warmup", 3)), max(1, int(req.get("iters", 3)))
    try:
        timed_forwards(model, x, device, warmup)
    except (RuntimeError, ValueError) as e:
        raise BridgeError(f"the model's forward failed on input {tuple(x.shape)} {x.dtype}: {e}") from None
    # A contended machine (load above the cores) is re-measured after a pause, up to
    # `remeasure` times; the attempt with the lowest load is kept, and a warning says so.
    cores = os.cpu_count() or 1
    attempts = []
    for attempt in range(1 + max(0, int(req.get("remeasure", 2)))):
        load_before = load_average()
        fwd = timed_forwards(model, x, device, max(3, iters))
        prof = _profile_once(model, x, device, iters)
        load = max(load_before, load_average())
        attempts.append((load, fwd, prof))
        if not contended(load, cores):
            break
        print(f"profile: the machine is contended (load average {load:.1f} on {cores} cores); "
              f"re-measuring in {float(req.get('remeasure_pause_s', 5.0)):g} s", file=sys.stderr, flush=True)
        time.sleep(float(req.get("remeasure_pause_s", 5.0)))
    load, fwd, prof = min(attempts, key=lambda a: a[0])
    warnings = []
    if contended(load, cores):
        warnings.append(f"the machine was contended while profiling (load average {load:.1f} on {cores} "
                        f"cores, {len(attempts)} attempt(s)): times are inflated and shares may rank "
                        f"wrong; re-run `vladbud profile` when the machine is idle")
    if req.get("export_trace"):
        prof.export_chrome_trace(req["export_trace"])
    records = from_profiler(prof)
    units = entries(records, on_device=(device == "cuda"))
    if device == "cuda" and units and sum(u["us"] for u in units) == 0:
        warnings.append("the CUDA activity recorded no kernel time; times are empty")
    if device == "cuda" and units:
        # Launch-bound: the GPU idles between kernels when the summed kernel time is well
        # below the wall-clock forward (host overhead, Python, launches).
        busy_ms = sum(u["us"] for u in units) / iters / 1e3
        fwd_ms = statistics.median(fwd)
        if fwd_ms > 0 and busy_ms / fwd_ms < 0.7:
            warnings.append(f"launch-bound: the GPU is busy {busy_ms:.2f} ms of a {fwd_ms:.2f} ms forward "
                            f"({100 * busy_ms / fwd_ms:.0f} %); fewer, larger launches would help: "
                            f"torch.compile, CUDA graphs (torch.compile mode='reduce-overhead'), a larger batch")
    units = fuse_patterns(units, dtype)
    classified = [classify(u, dtype) for u in units]
    grouped = group_entries(classified, iters)
    dev_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return {"device": device, "device_name": dev_name, "dtype": dtype, "input_shape": [B, S],
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "model": {"file": req.get("model", ""), "module": req.get("module", ""),
                      "class_name": req.get("class_name", ""), "config": req.get("config", ""),
                      "model_args": req.get("model_args") or {},
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "vocab_size": vocab_size(model), "depth": model_depth(model),
                      "input": {"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}},
            "forward_ms": statistics.median(fwd), "forward_ms_all": fwd, "iters": iters,
            "load_average": load, "cores": cores, "profile_attempts": len(attempts),
            "records": len(records), "profiled_us": sum(g["us"] for g in grouped),
            "entries": grouped, "warnings": warnings}


def main(argv):
    if len(argv) != 2:
        raise BridgeError("usage: python -m vladbud.profile REQUEST.json RESULT.json")
    res = run(read_request(argv[0]))
    with open(argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    from .loader import main_wrapper
    main_wrapper(main)
