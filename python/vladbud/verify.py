"""`python -m vladbud.verify REQUEST.json RESULT.json`: the model with VladBud kernels in it vs
the unmodified model.

REQUEST: the model fields of profile.json (model, class_name, module, config, model_args,
input_shape, dtype, device) plus kernels: [{"type", "library", "source", "backend"}] (a "cpu"
backend kernel in a CUDA model is staged through host memory), seeds (default
[0, 1, 2]), reps (timed forwards per side, default 7), warmup (default 2), diagnose (bool).

Correctness: for every seed, fresh token ids; the output of the model with the kernels is
compared to the unmodified model's by the relative Frobenius error ||y - y_ref|| / ||y_ref||.
Tolerance: tol = 32 * u * sqrt(L), u the unit roundoff of the dtype (fp32 2^-24, fp16 2^-11,
bf16 2^-8) and L the model depth (blocks): rounding errors of a depth-L residual network grow
like sqrt(L) random-walk steps of O(u) per block, and 32 covers the per-block constant (a few
reductions of length up to ~10^4, each contributing O(u sqrt(log n))). NaN/Inf where the
reference is finite fails. PASS when every seed is within tol.

Latency: `warmup` forwards each, then `reps` rounds alternating baseline and replaced
(inference_mode, synchronized on CUDA), median of each side; speedup = baseline / replaced.
--diagnose: each type replaced alone on the first seed; a type failing alone is named.
"""
import json
import math
import statistics
import time

import torch

from . import BridgeError
from . import kernels as vk
from .loader import load_from_request, make_inputs, model_depth, parse_input_shape, read_request
from .replace import OperatorMode, with_kernels

UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
TOL_CONSTANT = 32.0


def tolerance(dtype: str, depth: int) -> float:
    """32 * u(dtype) * sqrt(depth) (see the module doc)."""
    return TOL_CONSTANT * UNIT_ROUNDOFF[dtype] * math.sqrt(max(1, depth))


def rel_error(y, ref):
    """(relative Frobenius error in fp64, bad_nonfinite: NaN/Inf in y where ref is finite)."""
    y64, r64 = y.double(), ref.double()
    bad = bool((~torch.isfinite(y64) & torch.isfinite(r64)).any())
    fin = torch.isfinite(r64) & torch.isfinite(y64)
    num = torch.linalg.vector_norm((y64 - r64)[fin])
    den = torch.linalg.vector_norm(r64[fin])
    return float(num / den) if den > 0 else float(num), bad


def _out(y):
    if isinstance(y, (tuple, list)):
        y = y[0]
    if hasattr(y, "logits"):
        y = y.logits
    return y


def run_model(model, x, types=None, device="cpu"):
    with torch.inference_mode():
        if types:
            with OperatorMode(types):
                y = _out(model(x))
        else:
            y = _out(model(x))
    if device == "cuda":
        torch.cuda.synchronize()
    return y


def compare(base, repl, types, req, seeds, depth, mode_types):
    B, S = parse_input_shape(req["input_shape"])
    dev = req.get("device", "cpu")
    tol = tolerance(req.get("dtype", "fp32"), depth)
    rows = []
    for s in seeds:
        x = make_inputs(base, B, S, dev, seed=1000 + s)
        ref = run_model(base, x, None, dev)
        y = run_model(repl, x, mode_types, dev)
        err, bad = rel_error(y, ref)
        rows.append({"seed": s, "rel_error": err, "nonfinite": bad,
                     "max_abs_diff": float((y.double() - ref.double()).abs().nan_to_num(0).max()),
                     "pass": (not bad) and err <= tol})
    return rows, tol


def latency(base, repl, mode_types, x, dev, warmup, reps):
    for _ in range(warmup):
        run_model(base, x, None, dev)
        run_model(repl, x, mode_types, dev)
    tb, tr = [], []
    for _ in range(reps):
        for side, m, mt in ((tb, base, None), (tr, repl, mode_types)):
            t = time.perf_counter()
            run_model(m, x, mt, dev)
            side.append((time.perf_counter() - t) * 1e3)
    return tb, tr


def run(req):
    kern = req.get("kernels") or []
    if not kern:
        raise BridgeError("no kernels to verify; run `vladbud extract --top N` first")
    vk.unbind_all()
    for k in kern:
        vk.bind(k["type"], k["library"], "cuda" if k.get("backend") == "cuda" else "cpu")
    types = [k["type"] for k in kern]
    base = load_from_request(req)
    depth = model_depth(base)
    seeds = req.get("seeds") or [0, 1, 2]
    dev = req.get("device", "cpu")
    repl, counts = with_kernels(base, types)
    vk.CALLS.clear()
    rows, tol = compare(base, repl, types, req, seeds, depth, types)
    calls = {t: vk.CALLS[t] // max(1, len(seeds)) for t in types}
    B, S = parse_input_shape(req["input_shape"])
    x = make_inputs(base, B, S, dev, seed=1)
    tb, tr = latency(base, repl, types, x, dev, int(req.get("warmup", 2)), int(req.get("reps", 7)))
    res = {"dtype": req.get("dtype"), "device": dev, "input_shape": [B, S], "depth": depth,
           "tolerance": tol,
           "tolerance_rule": f"relative Frobenius error of the output <= {TOL_CONSTANT:g} * u * sqrt(depth), "
                             f"u = {UNIT_ROUNDOFF[req.get('dtype', 'fp32')]:.3g} ({req.get('dtype')}), depth {depth}",
           "seeds": rows, "verdict": "PASS" if all(r["pass"] for r in rows) else "FAIL",
           "kernels": [dict(k, modules_replaced=counts.get(k["type"], 0),
                            calls_per_forward=calls.get(k["type"], 0)) for k in kern],
           "latency": {"protocol": f"{req.get('warmup', 2)} warm-up each, {len(tb)} alternating rounds, median",
                       "baseline_ms": statistics.median(tb), "vladbud_ms": statistics.median(tr),
                       "baseline_all_ms": tb, "vladbud_all_ms": tr},
           "torch": torch.__version__, "threads": torch.get_num_threads()}
    res["speedup"] = res["latency"]["baseline_ms"] / res["latency"]["vladbud_ms"]
    unused = [t for t in types if calls.get(t, 0) == 0]
    if unused:
        res["warnings"] = [f"kernel type {t} was never called by the model (nothing replaced)" for t in unused]
    if req.get("diagnose"):
        diag = []
        for t in types:
            r1, _ = with_kernels(base, [t])
            rr, _ = compare(base, r1, [t], req, seeds[:1], depth, [t])
            diag.append({"type": t, "rel_error": rr[0]["rel_error"], "nonfinite": rr[0]["nonfinite"],
                         "pass": rr[0]["pass"]})
        res["diagnose"] = diag
        bad = [d["type"] for d in diag if not d["pass"]]
        res["breaking"] = bad
        if res["verdict"] == "FAIL" and not bad:
            res["diagnose_note"] = "no kernel fails alone: the error comes from their combination"
    return res


def main(argv):
    if len(argv) != 2:
        raise BridgeError("usage: python -m vladbud.verify REQUEST.json RESULT.json")
    res = run(read_request(argv[0]))
    with open(argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    from .loader import main_wrapper
    main_wrapper(main)
