"""`python -m vladbud.verify REQUEST.json RESULT.json`: which VladBud kernels make the model
faster, decided inside the model, and the end-to-end speedup of what is handed over.

REQUEST: the model fields of profile.json (model, class_name, module, config, model_args,
input_shape, dtype, device) plus
  kernels: [{"type", "library", "source", "backend", "torch_device" (the PyTorch device the
            kernel reads tensors on: its backend's Device::torch_device, default "cpu"), "folder",
            "own_shape_speedup" (PyTorch's median over the kernel's at the folder's own shape, or
            null when not measured), "shapes" (optional, matmul: one row per extracted folder of
            the type, {"folder", "dims": {"M", "N", "K"}, "own_shape_speedup" (of that folder's
            own best kernel; null when not measured), "library" and "source" (optional: that
            kernel, built; it serves its folder's shape, vladbud.kernels.bind_shape)})}]
            (a kernel reading "cpu" tensors in a CUDA model is staged through host memory),
  profile_entries: profile.json's entries (for the intercept check; optional),
  seeds (default [0, 1, 2]), reps (timed rounds per comparison, default 9), warmup (default 2),
  compile (bool: the baseline is torch.compile of the model, VladBud's ops inside the compiled
  graph; every candidate that passed steps 1-3 below is compiled and timed alone inside the
  compiled model, whatever its eager decision), select (bool, default true: false plugs in every
  correct kernel, the old behaviour, for diagnosis), diagnose (bool).

The end-to-end rule (DESIGN §6b, issue 14): a candidate goes in only if it is correct and makes
the model faster beyond the noise. Per kernel type, alone:
 1. correctness: the model with only this type replaced vs the unmodified model on every seed
    (relative Frobenius error <= tol, below); NaN/Inf where the reference is finite fails;
 2. intercept check: the op calls per forward equal the profile's instances of that type
    (replace.intercept_check); a mismatch fails verify naming the group;
 3. a kernel measured slower than PyTorch at its own shape (own_shape_speedup < 1) is dropped
    without an in-model run (own_shape_speedup is null, and the in-model rounds decide, when
    the optimizer timed that folder's best while other work competed for the cores: its
    best/best.json flag, vladbud::best_figure_contended). matmul, whose calls span several shapes, is decided **per shape**
    instead ("shapes"): it is replaced only at the weight shapes (N, K) of its extracted folders,
    each served by that folder's own best kernel (its "library", vladbud.kernels.bind_shape),
    every other matmul call staying PyTorch's (replace.py, "Shape selection"); steps 1 and 2
    run with all of them replaced; then, with more than one shape, each shape alone is timed in
    the model (paired rounds as in step 4) and only those faster beyond the noise stay (the
    own-shape figures, one PyTorch timing per folder taken at another moment, swung from 0.70x
    to 1.175x for one GPT-2 shape between runs on a 2-core machine); none: dropped. Step 4 then
    times the survivors together;
 4. in-model timing: `reps` paired rounds of (model, model + this type), the order alternating
    per round; per round the ratio t_with / t_without; the decision uses the distribution-free
    ~95 % confidence interval of the median ratio from order statistics (the sign-test
    interval: [r_(k), r_(n+1-k)] with the largest k such that P(Bin(n, 1/2) < k) <= 0.025;
    k = 1 below n = 6, i.e. min..max). In only when the interval's upper end is < 1: faster
    beyond the noise. With `compile`, the same paired rounds are run a second time for every
    candidate that passed steps 1-3, each alone inside the compiled model against the compiled
    baseline, and the compiled decision is made on them alone: the eager decision does not
    carry over, because what torch.compile does around a replaced call differs (e.g. Hugging
    Face materializes the causal mask under tracing, so the compiled model's own attention runs
    with an explicit mask, while a replaced attention runs causal: measured on the H200 in
    bench/results/compiled-breakdown-h200.md).
The winners go in together; the combination is timed against the baseline(s) in the same
interleaved rounds (eager, compile, eager + kernels, compile + kernels). If the combination is
not confirmed faster beyond the noise by these independent rounds, nothing is handed over
against that baseline.
Nothing in: the handed-over model is the baseline itself, speedup 1.0.

Tolerance: tol = 32 * u * sqrt(L), u the unit roundoff of the dtype (fp32 2^-24, fp16 2^-11,
bf16 2^-8) and L the model depth (blocks): rounding errors of a depth-L residual network grow
like sqrt(L) random-walk steps of O(u) per block, and 32 covers the per-block constant.

Each timed sample is `inner` forwards (inner chosen so one sample lasts >= 20 ms), synchronized
on CUDA, wall clock (time.perf_counter). Before each round the other runnable tasks are read
(competing_tasks); the result's "contention" says how many rounds started while other work
competed for the cores, and a run where at least 2 rounds and a fifth of them did gets a
warning (the decisions are kept, flagged: see ContentionLog).
"""
import contextlib
import json
import math
import os
import statistics
import time

import torch

from . import BridgeError
from . import kernels as vk
from . import replace as vr
from .loader import load_from_request, make_inputs, model_depth, parse_input_shape, read_request

UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
TOL_CONSTANT = 32.0
MIN_SAMPLE_MS = 20.0


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


def median_ci(values, level=0.95):
    """(median, lo, hi): the distribution-free confidence interval of the median of `values`
    from order statistics (sign-test interval): [v_(k), v_(n+1-k)] (1-based, sorted) with the
    largest k >= 1 such that P(Bin(n, 1/2) <= k - 1) <= (1 - level) / 2. Source: the binomial
    order-statistic interval for a quantile (e.g. Conover, Practical Nonparametric Statistics,
    3rd ed., §3.2). Raises ValueError on an empty list."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("median_ci of no values")
    tail = (1.0 - level) / 2.0
    k, cdf = 1, 0.0
    for j in range(n):
        cdf += math.comb(n, j) / 2.0 ** n  # P(Bin <= j)
        if cdf > tail:
            break
        k = j + 1  # P(Bin <= k - 1) = P(Bin <= j) <= tail
    k = max(1, min(k, (n + 1) // 2))
    return statistics.median(v), v[k - 1], v[n - k]


MIN_DECISION_ROUNDS = 6  # the fewest rounds whose min..max interval covers the median >= 95 %


def paired_decision(base_ms, cand_ms):
    """Compares paired samples (same rounds): ratios r_i = cand_i / base_i. Returns
    {"speedup": 1/median(r), "ci": [1/hi, 1/lo] (speedup interval), "faster": hi < 1,
    "slower": lo > 1, "noise_pct": half the interval's width relative to the median, in %}.
    Below MIN_DECISION_ROUNDS rounds no interval reaches 95 % (n rounds: 1 - 2^(1-n)), so
    neither "faster" nor "slower" is ever claimed. Raises ValueError for no rounds."""
    ratios = [c / b for b, c in zip(base_ms, cand_ms) if b > 0]
    med, lo, hi = median_ci(ratios)
    enough = len(ratios) >= MIN_DECISION_ROUNDS
    return {"speedup": 1.0 / med, "ci": [1.0 / hi, 1.0 / lo], "faster": enough and hi < 1.0,
            "slower": enough and lo > 1.0, "noise_pct": 100.0 * (hi - lo) / 2.0 / med,
            "rounds": len(ratios)}


def _out(y):
    if isinstance(y, (tuple, list)):
        y = y[0]
    if hasattr(y, "logits"):
        y = y.logits
    return y


def _patch(types, only=None):
    """The function-level replacements for `types` under the shape selection `only` (a no-op
    context for none)."""
    if not types:
        return contextlib.nullcontext()
    return vr.patched(types, only)


def run_model(model, x, types=None, device="cpu", only=None):
    """One forward under inference_mode with the function-level replacements of `types` active
    (restricted by the shape selection `only`); synchronized on CUDA. Returns the output tensor
    (logits for HF models)."""
    with torch.inference_mode(), _patch(types, only):
        y = _out(model(x))
    if device == "cuda":
        torch.cuda.synchronize()
    return y


class Variant:
    """A model to time: the module (possibly compiled) and the replaced types whose function
    patches must be active when it runs."""

    def __init__(self, name, model, types, only=None):
        self.name, self.model, self.types, self.only = name, model, list(types), only

    def forward(self, x, dev):
        return run_model(self.model, x, self.types, dev, self.only)


def compare(base, variant, req, seeds, tol):
    """The variant's output vs the unmodified eager model on every seed: rows of {"seed",
    "rel_error", "nonfinite", "max_abs_diff", "pass"}."""
    B, S = parse_input_shape(req["input_shape"])
    dev = req.get("device", "cpu")
    rows = []
    for s in seeds:
        x = make_inputs(base, B, S, dev, seed=1000 + s)
        ref = run_model(base, x, None, dev)
        y = variant.forward(x, dev)
        err, bad = rel_error(y, ref)
        rows.append({"seed": s, "rel_error": err, "nonfinite": bad,
                     "max_abs_diff": float((y.double() - ref.double()).abs().nan_to_num(0).max()),
                     "pass": (not bad) and err <= tol})
    return rows


def procs_running(stat_path="/proc/stat"):
    """The kernel's count of runnable tasks on the whole machine ("procs_running" in
    /proc/stat, this process's running thread included), or None where it cannot be read."""
    try:
        with open(stat_path) as f:
            for line in f:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def competing_tasks(dev, read=None, cores=None, samples=3, gap_s=0.010):
    """Other tasks competing for the cores right now, between two timed rounds: the least of
    `samples` readings `gap_s` apart (a momentary blip, or torch's own OpenMP workers still
    spinning after the last forward, does not count), less this process's thread. A CPU forward
    uses every core, so any other runnable task competes; a GPU forward keeps one host core
    busy, so only tasks beyond the other cores do (the evaluator's rule, runner
    competing_tasks). `read` returns the machine's runnable tasks (default procs_running).
    Returns None where they cannot be read."""
    read = read or procs_running
    least = None
    for i in range(max(1, samples)):
        if i:
            time.sleep(gap_s)
        n = read()
        if n is None:
            return None
        least = n if least is None else min(least, n)
    others = max(0, least - 1)
    if dev != "cpu":
        others = max(0, others - max(0, (cores or os.cpu_count() or 1) - 1))
    return others


class ContentionLog:
    """Per-round readings of competing_tasks() over one verify run (time_variants appends one
    before each round). A run whose paired rounds ran while other work competed for the cores
    gets a warning: on a shared machine the kernels and PyTorch slow down by different factors
    under load (a 2-core VM under another session's builds: eager GPT-2 195 ms instead of 97,
    and a matmul handed over at 1.154x that a quiet run measured at 1.000x)."""

    def __init__(self):
        self.readings = []

    def summary(self):
        """{"rounds_sampled", "contended_rounds", "max_other_runnable", "contended"}: contended
        when at least 2 rounds, and at least a fifth of them, had a competing task."""
        known = [r for r in self.readings if r is not None]
        busy = [r for r in known if r > 0]
        return {"rounds_sampled": len(known), "contended_rounds": len(busy),
                "max_other_runnable": max(known) if known else None,
                "contended": len(busy) >= max(2, math.ceil(0.2 * len(known))) if known else False}


CONTENTION = ContentionLog()


def time_variants(variants, x, dev, warmup, reps, progress=None):
    """Interleaved timing: `warmup` forwards each, then `reps` rounds; in round r the variants
    run in rotated order (starting at r mod n) to cancel drift. Each sample is `inner` forwards
    (the same for all variants, from the slowest warm-up forward, so that a sample lasts
    >= MIN_SAMPLE_MS). Returns ({name: [ms per forward, one per round]}, inner)."""
    slowest = 0.0
    for v in variants:
        for _ in range(max(1, warmup)):
            t = time.perf_counter()
            v.forward(x, dev)
            slowest = max(slowest, (time.perf_counter() - t) * 1e3)
    inner = max(1, min(50, math.ceil(MIN_SAMPLE_MS / max(slowest, 1e-3))))
    out = {v.name: [] for v in variants}
    n = len(variants)
    for r in range(reps):
        CONTENTION.readings.append(competing_tasks(dev))
        for i in range(n):
            v = variants[(r + i) % n]
            if dev == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(inner):
                v.forward(x, dev)
            out[v.name].append((time.perf_counter() - t) * 1e3 / inner)
        if progress:
            progress(f"  round {r + 1}/{reps}")
    return out, inner


def _say(msg):
    import sys
    print(f"verify: {msg}", file=sys.stderr, flush=True)


def _compile(model):
    return torch.compile(model)


def _fmt_ci(d):
    return f"{d['speedup']:.3f}x (95% CI {d['ci'][0]:.3f}-{d['ci'][1]:.3f}x over {d['rounds']} rounds)"


def _intercept_rows(req, types, calls, only=None):
    entries = req.get("profile_entries")
    if not entries:
        return []
    return vr.intercept_check(entries, types, calls, only)


def _dims_text(d):
    return "x".join(f"{k}{d[k]}" for k in ("M", "N", "K") if k in d) or str(d)


def shape_selection(k, tokens=None):
    """The shape rows of a matmul candidate (step 3 of the module doc), checked.

    k: the request's kernel row; its "shapes" rows carry "dims" {"M", "N", "K"},
    "own_shape_speedup" (null: not measured) and optionally "library". Returns (rows, libs):
    rows = the rows with "key" [N, K] and "serves" (the row's own kernel is the one bound at its
    shape) added (empty for a type without shape keys); libs =
    {(N, K): library} for every key some row names a library for (bound with
    vladbud.kernels.bind_shape; a key without one runs k["library"]). A weight shape listed
    twice is served by the library of the row whose M equals `tokens` (the model's B x S, the M
    of its linears) when there is one, else of the row with the highest own-shape speedup.
    Raises BridgeError for a row without positive integer dims N and K, with a speedup that is
    neither null nor > 0, or with a library that is not text."""
    if k.get("type") not in vr.SHAPE_KEYED_TYPES:
        return [], {}
    shapes = [dict(r) for r in (k.get("shapes") or [])]
    for r in shapes:
        d = r.get("dims")
        sp = r.get("own_shape_speedup")
        if not isinstance(d, dict) or not all(isinstance(d.get(x), int) and d[x] > 0 for x in ("N", "K")) \
                or (sp is not None and not (isinstance(sp, (int, float)) and sp > 0)) \
                or not isinstance(r.get("library", ""), str):
            raise BridgeError(f"verify request: a shapes row of kernel {k.get('type')} is malformed ({r!r}): "
                              f"it needs dims with positive integers N and K, an own_shape_speedup "
                              f"> 0 or null and a library path (text) if any; re-run `vladbud extract` "
                              f"and `vladbud optimize` to rewrite the folders' problem.json")
        r["key"] = list(vr.matmul_key(d))
    libs, rank = {}, {}
    for r in shapes:
        if not r.get("library"):
            continue
        key, sp = tuple(r["key"]), r.get("own_shape_speedup")
        pref = (tokens is not None and r["dims"].get("M") == tokens, sp if sp is not None else 0.0)
        if key not in rank or pref > rank[key]:
            libs[key], rank[key] = r["library"], pref
    # Whether the row's own kernel is what runs at its shape: its library is the one bound there
    # (with no library anywhere, the request's one library serves every row).
    for r in shapes:
        r["serves"] = (libs.get(tuple(r["key"])) == r["library"]) if r.get("library") else not libs
    return shapes, libs


def _keys_text(keys):
    return ", ".join(f"N{n}xK{k}" for n, k in keys)


def evaluate_candidate(k, base, req, seeds, tol, x, dev, base_variant, select):
    """Correctness, intercept check, own-shape screen and in-model timing of one kernel type
    replaced alone (for matmul: per weight shape, see the module doc). Returns the candidate row
    (see the module doc)."""
    t = k["type"]
    c = {"type": t, "source": k.get("source", ""), "folder": k.get("folder", ""),
         "backend": k.get("backend", "cpu"), "own_shape_speedup": k.get("own_shape_speedup")}
    B, S = parse_input_shape(req["input_shape"])
    shape_rows, libs = shape_selection(k, B * S)
    # The shapes replaced: those with a built kernel of their own (a folder whose build failed
    # stays PyTorch's); with no library in the rows (an older request), every row's shape, all
    # served by k["library"].
    keys = sorted({tuple(r["key"]) for r in shape_rows if r["serves"] or (r.get("library") and libs)})
    if shape_rows:
        c["shapes"] = shape_rows
    for key, lib in libs.items():  # each extracted shape runs its own folder's best kernel
        vk.bind_shape(t, key, lib, k.get("torch_device", "cpu"))
    if libs:
        c["libraries_by_shape"] = {f"N{key[0]}xK{key[1]}": lib for key, lib in libs.items()}
    # A type screened per shape is replaced only at its extracted shapes (every other call of
    # the type stays PyTorch's); checked for correctness at all of them at once.
    only = {t: keys} if keys else None
    if only:
        c["only"] = only
    repl, counts = vr.with_kernels(base, [t], only)
    var = Variant(f"+{t}", repl, [t], only)
    vk.CALLS.clear()
    rows = compare(base, var, req, seeds, tol)
    calls = vk.CALLS.get(t, 0) / max(1, len(seeds))
    c.update(modules_replaced=counts.get(t, 0), calls_per_forward=calls,
             rel_error=max(r["rel_error"] for r in rows), seeds=rows,
             correct=all(r["pass"] for r in rows))
    ic = _intercept_rows(req, [t], {t: calls}, only)
    if ic:
        c["intercept"] = ic[0]
        c["expected_calls"] = ic[0].get("expected")
    reps, warmup = int(req.get("reps", 9)), int(req.get("warmup", 2))
    if not c["correct"]:
        bad = next(r for r in rows if not r["pass"])
        c.update(decision="dropped", reason=f"wrong in the model: rel_error {bad['rel_error']:.3g} > "
                                            f"tolerance {tol:.3g} on seed {bad['seed']}"
                                            + (" (NaN/Inf)" if bad["nonfinite"] else ""))
    elif ic and not ic[0].get("ok", True):
        c.update(decision="dropped", reason=ic[0].get("message", "intercept mismatch"), intercept_failed=True)
    elif calls == 0:
        c.update(decision="dropped", reason="never called by the model (nothing of this type was replaced)")
    elif select and not keys and c["own_shape_speedup"] is not None and c["own_shape_speedup"] < 1.0:
        c.update(decision="dropped", reason=f"slower than PyTorch at its own shape "
                                            f"({c['own_shape_speedup']:.3f}x); not plugged in")
    elif not select:
        c.update(decision="in", reason="plugged in without timing (select off)", eligible=True)
    else:
        if len(keys) > 1:
            # Each shape alone in the model: the own-shape figures (one PyTorch timing per
            # folder, taken at another moment) swung from 0.70x to 1.175x for one GPT-2 shape
            # between runs on a 2-core machine, so the model's paired rounds decide per shape.
            winners = []
            for key in keys:
                _say(f"timing {t} at N{key[0]}xK{key[1]} alone in the model ({reps} paired rounds)")
                kv_only = {t: [key]}
                kv = Variant(f"+{t}@N{key[0]}xK{key[1]}", vr.with_kernels(base, [t], kv_only)[0], [t], kv_only)
                ms, _ = time_variants([base_variant, kv], x, dev, warmup, reps)
                d = paired_decision(ms[base_variant.name], ms[kv.name])
                for r in shape_rows:
                    if tuple(r["key"]) == key:
                        r.update(in_model_speedup=d["speedup"], in_model_ci=d["ci"], in_model_faster=d["faster"])
                if d["faster"]:
                    winners.append(key)
            for r in shape_rows:
                r["in"] = tuple(r["key"]) in winners
            per = "; ".join(f"N{r['key'][0]}xK{r['key'][1]} {_fmt_ci({'speedup': r['in_model_speedup'], 'ci': r['in_model_ci'], 'rounds': reps})}"
                            for r in shape_rows if "in_model_speedup" in r)
            c["shape_note"] = (f"each shape alone in the model: {per}; faster beyond the noise: "
                               f"{_keys_text(winners) or 'none'}")
            _say(f"{t}: {c['shape_note']}")
            if not winners:
                c.update(decision="dropped", reason="no shape faster in the model beyond the noise alone")
            elif winners != keys:
                only = {t: winners}
                c["only"] = only
                var = Variant(f"+{t}", vr.with_kernels(base, [t], only)[0], [t], only)
        if c.get("decision") != "dropped":
            c["eligible"] = True
            _say(f"timing {t} in the model ({reps} paired rounds)")
            ms, inner = time_variants([base_variant, var], x, dev, warmup, reps)
            d = paired_decision(ms[base_variant.name], ms[var.name])
            c.update(in_model_speedup=d["speedup"], in_model_ci=d["ci"], noise_pct=d["noise_pct"],
                     in_model_ms={"without": statistics.median(ms[base_variant.name]),
                                  "with": statistics.median(ms[var.name]), "inner": inner})
            repl = var.model
            if d["faster"]:
                c.update(decision="in", reason=f"faster in the model: {_fmt_ci(d)}"
                                               + (f" (at {_keys_text(c['only'][t])})" if c.get("only") else ""))
            else:
                # With a shape selection, say that these are new rounds of the shapes that won
                # alone (a new user read "faster beyond the noise: N50257xK768" and then
                # "dropped" as a contradiction): a second, independent test of the selection.
                again = (f" (the shapes faster alone, {_keys_text(c['only'][t])}, timed again "
                         f"together in new rounds)") if c.get("only") and c.get("shape_note") else ""
                c.update(decision="dropped",
                         reason=f"not faster in the model beyond the noise: {_fmt_ci(d)}{again}")
    # Kept for the combination (eager winners) and for the compiled model's own decision.
    c["_model"] = repl if c.get("eligible") else None
    return c


def run(req):
    kern = req.get("kernels") or []
    if not kern:
        raise BridgeError("no kernels to verify; run `vladbud extract --top N` first")
    vk.unbind_all()
    CONTENTION.readings.clear()
    for k in kern:
        vk.bind(k["type"], k["library"], k.get("torch_device", "cpu"))
    base = load_from_request(req)
    depth = model_depth(base)
    seeds = req.get("seeds") or [0, 1, 2]
    dev = req.get("device", "cpu")
    dtype = req.get("dtype", "fp32")
    tol = tolerance(dtype, depth)
    reps, warmup = int(req.get("reps", 9)), int(req.get("warmup", 2))
    select = bool(req.get("select", True))
    use_compile = bool(req.get("compile", False))
    B, S = parse_input_shape(req["input_shape"])
    x = make_inputs(base, B, S, dev, seed=1)
    base_v = Variant("eager", base, [])

    cands = []
    for k in kern:
        _say(f"candidate {k['type']} ({k.get('source', '')})")
        cands.append(evaluate_candidate(k, base, req, seeds, tol, x, dev, base_v, select))

    winners = [c for c in cands if c["decision"] == "in"]
    compiled_base = None
    if use_compile:
        _say("compiling the baseline (torch.compile)")
        compiled_base = Variant("compile", _compile(base), [])
        # Every candidate that passed correctness, the intercept check and the own-shape screen is
        # decided again inside the compiled model, alone (one torch.compile each: about 15-20 s for
        # an 800M-parameter model on the H200).
        for c in cands:
            if not c.get("eligible"):
                continue
            if not select:
                c.update(in_compiled=True, compiled_decision="in")
                continue
            _say(f"timing {c['type']} inside the compiled model ({reps} paired rounds)")
            cv = Variant(f"compile+{c['type']}", _compile(c["_model"]), [c["type"]], c.get("only"))
            ms, _ = time_variants([compiled_base, cv], x, dev, warmup, reps)
            d = paired_decision(ms["compile"], ms[cv.name])
            c.update(compiled_speedup=d["speedup"], compiled_ci=d["ci"], in_compiled=d["faster"],
                     compiled_decision="in" if d["faster"] else "dropped",
                     compiled_ms={"without": statistics.median(ms["compile"]),
                                  "with": statistics.median(ms[cv.name])})
            c["compiled_reason"] = ("faster" if d["faster"] else "not faster beyond the noise") + \
                f" inside the compiled model: {_fmt_ci(d)}"
    in_eager = [c["type"] for c in winners]
    in_comp = [c["type"] for c in cands if c.get("in_compiled")] if use_compile else []

    # The combination, timed with the baselines in the same interleaved rounds.
    variants = [base_v]
    comb_e = comb_c = None
    def selection(types):
        """The shape selections of the candidates of `types`, merged (None when none has one)."""
        merged = {}
        for c in cands:
            if c["type"] in types and c.get("only"):
                merged.update(c["only"])
        return merged or None

    only_e, only_c = selection(in_eager), selection(in_comp)
    if in_eager:
        comb_model, _ = vr.with_kernels(base, in_eager, only_e)
        comb_e = Variant("vladbud", comb_model, in_eager, only_e)
        variants.append(comb_e)
    if use_compile:
        variants.append(compiled_base)
        if in_comp:
            cm, _ = vr.with_kernels(base, in_comp, only_c)
            comb_c = Variant("vladbud+compile", _compile(cm), in_comp, only_c)
            variants.append(comb_c)
    _say(f"end to end: {', '.join(v.name for v in variants)} ({reps} interleaved rounds)")
    ms, inner = time_variants(variants, x, dev, warmup, reps)
    med = {k: statistics.median(v) for k, v in ms.items()}

    def settle(comb, base_name, in_types):
        """The winners together against their baseline, in the same interleaved rounds: kept
        when faster beyond the noise (or when selection is off); otherwise nothing goes in. A
        single winner is thereby confirmed by a second, independent measurement."""
        if comb is None:
            return [], None
        d = paired_decision(ms[base_name], ms[comb.name])
        if d["faster"] or not select:
            return in_types, d
        note = (f"not confirmed: the winners together were not faster than {base_name} beyond the "
                f"noise when timed again ({_fmt_ci(d)}); nothing handed over against {base_name}")
        for c in cands:
            if c["type"] in in_types:
                c["combination_note"] = note
        return [], None

    final_e, d_e = settle(comb_e, "eager", in_eager)
    final_c, d_c = settle(comb_c, "compile", in_comp) if use_compile else ([], None)

    # Correctness of what is handed over, on every seed: the eager combination, and under
    # --compile the compiled one as it runs (function-level paths differ under tracing). A
    # combination that fails is not handed over (the verdict below is FAIL).
    combo_failures = []

    def check(variant, kept, what):
        if not kept:
            return kept, None
        vk.CALLS.clear()
        r = compare(base, variant, req, seeds, tol)
        calls = {t: vk.CALLS.get(t, 0) / max(1, len(seeds)) for t in kept}
        if all(x["pass"] for x in r):
            return kept, (r, calls)
        bad = next(x for x in r if not x["pass"])
        combo_failures.append(f"the {what} model with {', '.join(kept)} is wrong: rel_error "
                              f"{bad['rel_error']:.3g} > tolerance {tol:.3g} on seed {bad['seed']}; "
                              f"nothing handed over against {what}")
        return [], (r, calls)

    final_e, chk_e = check(comb_e, final_e, "eager")
    final_c, chk_c = check(comb_c, final_c, "compile") if use_compile else ([], None)

    baseline = "compile" if use_compile else "eager"
    final = final_c if use_compile else final_e
    d_final = d_c if use_compile else d_e
    base_ms = med[baseline]
    speedup, ci = (d_final["speedup"], d_final["ci"]) if final else (1.0, [1.0, 1.0])
    m_e, lo_e, hi_e = median_ci(ms["eager"])
    noise_pct = 100.0 * (hi_e - lo_e) / 2.0 / m_e
    chk = chk_c if use_compile else chk_e
    if chk is not None:
        rows, calls_final = chk
    else:  # nothing was combined: the baseline itself (its seeds trivially match)
        rows = compare(base, Variant("handed", base, []), req, seeds, tol)
        calls_final = {}

    for c in cands:
        in_final = c["type"] in final
        c["handed_over"] = in_final
        c.pop("_model", None)
        if c.get("only"):  # JSON: [[N, K], ...]
            c["only"] = {t: [list(k) for k in keys] for t, keys in c["only"].items()}
    wrong = [c["type"] for c in cands if not c["correct"]]
    ic_failed = [c for c in cands if c.get("intercept_failed")]
    verdict = "PASS" if all(r["pass"] for r in rows) and not wrong and not ic_failed \
        and not combo_failures else "FAIL"
    # Handed-over times: the baseline's median over the paired median ratio (the decision's
    # statistic); the raw medians of every timed variant are in latency.all_ms.
    e2e = {"baseline": baseline, "handed_over": final,
           "eager_ms": med["eager"], "compile_ms": med.get("compile"),
           "vladbud_ms": med["eager"] / d_e["speedup"] if final_e else med["eager"],
           "vladbud_compile_ms": (med["compile"] / d_c["speedup"] if final_c else med["compile"])
           if use_compile else None,
           "speedup": speedup, "ci": ci, "noise_pct": noise_pct, "inner": inner, "rounds": reps,
           "protocol": f"{warmup} warm-up each, {reps} interleaved rounds (rotated order), "
                       f"{inner} forward(s) per sample, median; 95% CI of the median ratio "
                       f"(order statistics)"}
    res = {"dtype": dtype, "device": dev, "input_shape": [B, S], "depth": depth, "tolerance": tol,
           "tolerance_rule": f"relative Frobenius error of the output <= {TOL_CONSTANT:g} * u * sqrt(depth), "
                             f"u = {UNIT_ROUNDOFF[dtype]:.3g} ({dtype}), depth {depth}",
           "compile": use_compile, "select": select,
           "candidates": cands, "kernels_in": final,
           # Where a handed-over type serves only some shapes: {type: [[N, K], ...]} (matmul's
           # weight shapes; every other call of the type stays PyTorch's).
           "shape_selection": {c["type"]: c["only"][c["type"]] for c in cands
                               if c["handed_over"] and c.get("only")},
           "kernels_dropped": [c["type"] for c in cands if c["type"] not in final],
           "seeds": rows, "verdict": verdict, "end_to_end": e2e, "speedup": speedup,
           "max_rel_error": max([c["rel_error"] for c in cands] + [r["rel_error"] for r in rows]),
           # Compatibility with earlier verify.json readers: every candidate with its alone counts,
           # the latency of the handed-over model against its baseline.
           "kernels": [{"type": c["type"], "source": c["source"], "folder": c["folder"],
                        "backend": c["backend"], "modules_replaced": c["modules_replaced"],
                        "calls_per_forward": c["calls_per_forward"],
                        "calls_per_forward_handed_over": calls_final.get(c["type"]),
                        "handed_over": c["handed_over"]} for c in cands],
           "latency": {"protocol": e2e["protocol"], "baseline": baseline, "baseline_ms": base_ms,
                       "vladbud_ms": base_ms / speedup if final else base_ms,
                       "all_ms": ms},
           "torch": torch.__version__, "threads": torch.get_num_threads()}
    if wrong:
        res["breaking"] = wrong
    if ic_failed:
        res["intercept_failures"] = [c["reason"] for c in ic_failed]
    if combo_failures:
        res["combination_failures"] = combo_failures
    unused = [c["type"] for c in cands if c["calls_per_forward"] == 0]
    if unused:
        res["warnings"] = [f"kernel type {t} was never called by the model (nothing replaced)" for t in unused]
    res["contention"] = cont = CONTENTION.summary()
    if cont["contended"]:
        res.setdefault("warnings", []).append(
            f"{cont['contended_rounds']} of {cont['rounds_sampled']} timed rounds started while other "
            f"work competed for the cores (up to {cont['max_other_runnable']} other runnable "
            f"task(s)): the in-model ratios and what was handed over are not trustworthy (under load "
            f"the kernels and PyTorch slow down by different factors); re-run `vladbud verify` on a "
            f"quiet machine")
    if req.get("diagnose"):
        res["diagnose"] = [{"type": c["type"], "rel_error": c["rel_error"],
                            "nonfinite": any(r["nonfinite"] for r in c["seeds"]), "pass": c["correct"]}
                           for c in cands]
        if combo_failures and not wrong:
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
