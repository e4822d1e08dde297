"""`python -m vladbud.profile REQUEST.json RESULT.json`: profile a model's forward pass.

Called by `vladbud profile` (src/cli/profile.cpp), which owns the user-facing options, the
FLOP/byte models, the roofline and Amdahl's bound. REQUEST fields: model, class_name, module,
config, model_args (object), input_shape "B,S", dtype fp32|fp16|bf16, device cpu|cuda,
warmup (default 3), iters (profiled forwards, default 3), export_trace (path or ""), seed.
RESULT: {"device", "device_name", "dtype", "input_shape", "torch", "model": {...},
"forward_ms" (median of unprofiled forwards), "iters", "profiled_us" (per forward, sum of the
entries), "entries": [{"type", "op", "dims", "attrs", "dtype", "shapes", "kernels", "calls",
"us" (per forward), "evidence", "note"}], "warnings": [...]}. Exit code 2 with
'error: ...' on stderr for bad input.
"""
import json
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
    fwd = timed_forwards(model, x, device, max(3, iters))
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.inference_mode(), pywarnings.catch_warnings():
        # torch warns that a profile without a schedule "clears events at the end of each
        # cycle": there is one cycle here, and every event of it is kept.
        pywarnings.filterwarnings("ignore", message=".*clears events.*")
        with profile(activities=acts, record_shapes=True) as prof:
            for _ in range(iters):
                model(x)
            sync(device)
    warnings = []
    if req.get("export_trace"):
        prof.export_chrome_trace(req["export_trace"])
    records = from_profiler(prof)
    units = entries(records, on_device=(device == "cuda"))
    if device == "cuda" and units and sum(u["us"] for u in units) == 0:
        warnings.append("the CUDA activity recorded no kernel time; times are empty")
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
