"""`python -m vladbud.baseline REQUEST.json RESULT.json`: PyTorch's time for one kernel problem.

Called by `vladbud bench` for speedup_vs_pytorch. REQUEST: kernel (one of the nine types), dims
(the type's dimension names), attrs (resolved, by name), dtype, device (cpu|cuda),
rotation_sets / rotation_bytes (input sets cycled: at least that many sets and that many bytes
in all, at most 4096 sets, as the evaluator rotates buffers larger than the last-level cache), min_reps, min_time_s, max_time_s, warmup, seed. The PyTorch call per type:
matmul torch.mm; softmax torch.softmax(-1); layernorm F.layer_norm; rmsnorm F.rms_norm;
flash_attention F.scaled_dot_product_attention (enable_gqa=True when dims has HKV < H: K/V
[B,HKV,S,D] as the kernel gets them, no expanded copy); fused_mlp linear/silu/mul/linear; cross_entropy
F.cross_entropy; rotary_embedding the half-split (or interleaved) formula in ATen ops (PyTorch has
no fused RoPE); reduce x.sum(-1).
Protocol (the evaluator's, DESIGN §4): warm-up calls, then timed calls, each on the next input
set, until both min_reps and min_time_s are reached (or max_time_s); per-call time from
perf_counter (CPU) or CUDA events around the call; median, p10, p90.
Stepped (the command line's request "stepped", default true), as the evaluator times a kernel (issue 18: the runner
stops itself with SIGSTOP before each timed call and the parent continues it): the timing runs
in a forked child that stops itself before each timed call, and this process continues it
(waitpid WUNTRACED, SIGCONT). Without it the comparison was not by the same protocol: on this
2-core VM the stop and continue cost VladBud's OpenMP matmul 10 % at 64x512x512 (157 -> 173 us,
4 alternating pairs) that PyTorch's back-to-back calls never paid.
RESULT: {"op", "median_us", "p10_us", "p90_us", "reps", "torch", "threads", "device"}.
"""
import json
import math
import os
import signal
import statistics
import time

import torch
import torch.nn.functional as F

from . import BridgeError
from .loader import torch_dtype


def _inputs(kernel, d, a, dt, dev, g):
    def rn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device=dev, dtype=dt)

    if kernel == "matmul":
        return [rn(d["M"], d["K"]), rn(d["K"], d["N"])]
    if kernel == "softmax":
        return [rn(d["R"], d["C"])]
    if kernel == "layernorm":
        return [rn(d["B"], d["D"]), rn(d["D"]), rn(d["D"])]
    if kernel == "rmsnorm":
        return [rn(d["M"], d["N"]), rn(d["N"])]
    if kernel == "flash_attention":
        hkv = d.get("HKV", d["H"])  # KV heads (GQA); absent: H
        return [rn(d["B"], d["H"], d["S"], d["D"]), rn(d["B"], hkv, d["S"], d["D"]),
                rn(d["B"], hkv, d["S"], d["D"])]
    if kernel == "fused_mlp":
        s = 1.0 / math.sqrt(d["D"])
        return [rn(d["B"], d["D"]), rn(d["H"], d["D"], scale=s), rn(d["H"], d["D"], scale=s),
                rn(d["D"], d["H"], scale=1.0 / math.sqrt(d["H"]))]
    if kernel == "cross_entropy":
        return [rn(d["B"], d["V"]), torch.randint(0, d["V"], (d["B"],), generator=g).to(dev)]
    if kernel == "rotary_embedding":
        S, D = d["S"], d["D"]
        inv = 10000.0 ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
        ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
        return [rn(d["B"], d["H"], S, D), ang.cos().to(dev, dt), ang.sin().to(dev, dt)]
    if kernel == "reduce":
        return [rn(d["M"], d["N"])]
    raise BridgeError(f"unknown kernel type '{kernel}'")


def _rope(x, c, s, interleaved):
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def pytorch_call(kernel, attrs):
    """(description, fn(inputs) -> output) of PyTorch's implementation of a kernel type."""
    if kernel == "matmul":
        return "torch.mm", lambda i: torch.mm(i[0], i[1])
    if kernel == "softmax":
        return "torch.softmax(dim=-1)", lambda i: torch.softmax(i[0], -1)
    if kernel == "layernorm":
        eps = attrs.get("eps", 1e-5)
        return "F.layer_norm", lambda i: F.layer_norm(i[0], (i[0].shape[-1],), i[1], i[2], eps)
    if kernel == "rmsnorm":
        eps = attrs.get("eps", 1e-6)
        return "F.rms_norm", lambda i: F.rms_norm(i[0], (i[0].shape[-1],), i[1], eps)
    if kernel == "flash_attention":
        causal = bool(attrs.get("causal", 1.0))
        scale = attrs.get("sm_scale")
        # GQA (k/v with fewer heads than q): SDPA maps query head h to KV head h // (H/H_kv).
        return "F.scaled_dot_product_attention", lambda i: F.scaled_dot_product_attention(
            i[0], i[1], i[2], is_causal=causal, scale=scale, enable_gqa=i[1].shape[1] != i[0].shape[1])
    if kernel == "fused_mlp":
        return "F.linear/silu/mul/linear", lambda i: F.linear(F.silu(F.linear(i[0], i[1])) * F.linear(i[0], i[2]), i[3])
    if kernel == "cross_entropy":
        ii = int(attrs.get("ignore_index", -100))
        return "F.cross_entropy", lambda i: F.cross_entropy(i[0], i[1], ignore_index=ii)
    if kernel == "rotary_embedding":
        il = bool(attrs.get("interleaved", 0.0))
        return "RoPE in ATen ops (no fused PyTorch op)", lambda i: _rope(i[0], i[1], i[2], il)
    if kernel == "reduce":
        return "torch.sum(dim=-1)", lambda i: i[0].sum(-1)
    raise BridgeError(f"unknown kernel type '{kernel}'")


def run(req):
    """PyTorch's time for the request (module doc), in this process and not stepped (a library
    call: forking a process whose torch already ran parallel work can hang the child in its
    OpenMP runtime). The command line (main) steps it."""
    return _time(req, None)


def _run_stepped(req):
    """_time(req) in a forked child that stops itself (SIGSTOP) before each timed call; this
    process continues it at every stop and returns the child's result. Forked before torch has
    started threads or CUDA here (main calls it first thing in a fresh process; after torch's
    OpenMP workers exist the forked child can hang). Raises BridgeError with the child's error,
    or when the child dies without a result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the timing child
        os.close(r)
        try:
            out = {"result": _time(req, lambda: os.kill(os.getpid(), signal.SIGSTOP))}
        except BaseException as e:  # reported by the parent, which raises it
            out = {"error": f"{type(e).__name__}: {e}"}
        data = json.dumps(out).encode()
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    chunks = []
    # The result is written only at the end (a few hundred bytes, under the pipe's buffer), so
    # waiting for the child before reading cannot block it.
    while True:
        _, st = os.waitpid(pid, os.WUNTRACED)
        if os.WIFSTOPPED(st):
            os.kill(pid, signal.SIGCONT)
            continue
        break
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    try:
        out = json.loads(b"".join(chunks).decode())
    except ValueError:
        how = f"signal {os.WTERMSIG(st)}" if os.WIFSIGNALED(st) else f"exit {os.WEXITSTATUS(st)}"
        raise BridgeError(f"the baseline's timing child died without a result ({how}); run with "
                          f"\"stepped\": false in the request to time in one process")
    if "error" in out:
        raise BridgeError(f"the baseline's timing child failed: {out['error']}")
    return out["result"]


def _time(req, stop):
    """The timing loop (module doc); `stop` (or None) is called right before each timed call."""
    kernel, dims, attrs = req["kernel"], req["dims"], req.get("attrs") or {}
    dt, dev = torch_dtype(req.get("dtype", "fp32")), req.get("device", "cpu")
    if dev == "cuda" and not torch.cuda.is_available():
        raise BridgeError("device cuda: torch sees no CUDA GPU here")
    g = torch.Generator().manual_seed(int(req.get("seed", 42)))
    first = _inputs(kernel, dims, attrs, dt, dev, g)
    per_set = sum(t.numel() * t.element_size() for t in first)
    n_sets = max(1, int(req.get("rotation_sets", 1)), math.ceil(float(req.get("rotation_bytes", 0)) / max(1, per_set)))
    sets = [first] + [_inputs(kernel, dims, attrs, dt, dev, g) for _ in range(min(n_sets, 4096) - 1)]
    desc, fn = pytorch_call(kernel, attrs)
    min_reps, min_t, max_t = int(req.get("min_reps", 10)), float(req.get("min_time_s", 0.5)), float(req.get("max_time_s", 4.0))
    times = []
    with torch.inference_mode():
        for i in range(int(req.get("warmup", 3))):
            fn(sets[i % len(sets)])
        if dev == "cuda":
            torch.cuda.synchronize()
        t_all = time.perf_counter()
        i = 0
        while True:
            x = sets[i % len(sets)]
            if stop is not None:
                stop()
            if dev == "cuda":
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn(x)
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1) * 1e3)
            else:
                t = time.perf_counter()
                fn(x)
                times.append((time.perf_counter() - t) * 1e6)
            i += 1
            el = time.perf_counter() - t_all
            if (len(times) >= min_reps and el >= min_t) or el >= max_t:
                break
    q = statistics.quantiles(times, n=10) if len(times) >= 2 else [times[0]] * 9
    return {"op": desc, "median_us": statistics.median(times), "p10_us": q[0], "p90_us": q[-1],
            "reps": len(times), "torch": torch.__version__, "threads": torch.get_num_threads(), "device": dev,
            "stepped": stop is not None}


def main(argv):
    if len(argv) != 2:
        raise BridgeError("usage: python -m vladbud.baseline REQUEST.json RESULT.json")
    with open(argv[0]) as f:
        req = json.load(f)
    # Stepped by default, as the evaluator times a kernel; the fork comes before any torch work.
    res = _run_stepped(req) if req.get("stepped", True) else run(req)
    with open(argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    from .loader import main_wrapper
    main_wrapper(main)
