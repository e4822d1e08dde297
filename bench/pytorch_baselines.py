#!/usr/bin/env python3
"""PyTorch baselines for VladBud's nine kernel types on a GPU (issue 5: speedup_vs_pytorch).

Times PyTorch eager (cuBLAS for matmul, SDPA for flash_attention) on the SAME problems VladBud
times, read from `vladbud bench --kernel TYPE --backend cuda --abi --json` (the benchmark size
of the cuda backend unless --size is given), in the requested dtype, with the same protocol as
VladBud's GPU timing: warm-up, then the median of timed launches measured with CUDA events,
inputs rotating over sets that together exceed 2x the L2 cache so memory-bound kernels are not
timed from L2.

Usage:
  python3 bench/pytorch_baselines.py --vladbud .h200/vladbud --dtype bf16 [--kernels a,b] \
      [--out FILE.json]
Prints one line per kernel and writes {"dtype", "device", "torch", "kernels": {TYPE: {...}}}.
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
KERNELS = ["matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp",
           "cross_entropy", "rotary_embedding", "reduce"]


def problem_of(vladbud, kernel, dtype, size):
    cmd = [vladbud, "bench", "--kernel", kernel, "--backend", "cuda", "--abi", "--json",
           "--dtype", dtype]
    if size:
        cmd += ["--size", size]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def make_inputs(problem, device, gen):
    """Random inputs with the problem's shapes and dtypes (normal, scaled like VladBud's)."""
    ts = []
    for t in problem["inputs"]:
        shape = t["shape"]
        if t["dtype"] == "int64":
            # cross_entropy targets: class ids inside the vocabulary (last dim of the logits).
            vocab = problem["inputs"][0]["shape"][-1]
            ts.append(torch.randint(0, vocab, shape, device=device, generator=gen))
        else:
            dt = DTYPES[t["dtype"]]
            ts.append(torch.randn(shape, device=device, generator=gen, dtype=torch.float32)
                      .to(dt))
    k = problem["kernel"]
    if k == "matmul":  # B ~ N(0, 1/K) so C ~ N(0, 1)
        ts[1] = (ts[1].float() / math.sqrt(ts[1].shape[0])).to(ts[1].dtype)
    if k == "fused_mlp":
        for i in (1, 2, 3):
            ts[i] = (ts[i].float() / math.sqrt(ts[i].shape[1])).to(ts[i].dtype)
    if k == "rotary_embedding":  # real cos/sin tables
        S, half = ts[1].shape
        pos = torch.arange(S, device=device, dtype=torch.float64)[:, None]
        inv = 10000.0 ** (-torch.arange(half, device=device, dtype=torch.float64) / half)
        ang = pos * inv
        ts[1] = torch.cos(ang).to(ts[1].dtype)
        ts[2] = torch.sin(ang).to(ts[2].dtype)
    return ts


def torch_op(problem):
    """The PyTorch eager implementation of the problem's kernel type (DESIGN §2 semantics)."""
    k = problem["kernel"]
    a = problem.get("attrs", {})
    if k == "matmul":
        return lambda A, B: A @ B
    if k == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    if k == "layernorm":
        eps = a.get("eps", 1e-5)
        return lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps)
    if k == "rmsnorm":
        eps = a.get("eps", 1e-6)
        return lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps)
    if k == "flash_attention":
        causal = bool(a.get("causal", 1))
        scale = a.get("sm_scale")
        return lambda q, k_, v: F.scaled_dot_product_attention(q, k_, v, is_causal=causal,
                                                               scale=scale)
    if k == "fused_mlp":
        return lambda x, wg, wu, wd: F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)
    if k == "cross_entropy":
        ii = int(a.get("ignore_index", -100))
        return lambda logits, t: F.cross_entropy(logits, t, ignore_index=ii)
    if k == "rotary_embedding":
        inter = bool(a.get("interleaved", 0))

        def rope(x, cos, sin):
            c, s = cos[None, None], sin[None, None]
            if inter:
                x1, x2 = x[..., 0::2], x[..., 1::2]
                return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
            h = x.shape[-1] // 2
            x1, x2 = x[..., :h], x[..., h:]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        return rope
    if k == "reduce":
        return lambda x: x.sum(dim=-1)
    raise ValueError(f"unknown kernel type {k}")


def time_op(fn, sets, min_reps=20, min_time_s=0.3):
    """Median and spread of CUDA-event times over rotating input sets (after warm-up)."""
    for s in sets[:2]:
        fn(*s)
    torch.cuda.synchronize()
    times = []
    t0 = time.perf_counter()
    i = 0
    while len(times) < min_reps or time.perf_counter() - t0 < min_time_s:
        s = sets[i % len(sets)]
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(*s)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)  # us
        i += 1
        if len(times) >= 2000:
            break
    times.sort()
    med = statistics.median(times)
    return {"median_us": med, "p10_us": times[len(times) // 10],
            "p90_us": times[(9 * len(times)) // 10], "reps": len(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vladbud", required=True, help="path of the vladbud binary")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--size", default="", help="size label (default: cuda benchmark size)")
    ap.add_argument("--out", default="", help="write the results as JSON here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("pytorch_baselines: no CUDA device visible to torch")
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    gen = torch.Generator(device=dev)
    gen.manual_seed(42)
    res = {"dtype": args.dtype, "device": torch.cuda.get_device_name(0),
           "torch": torch.__version__, "kernels": {}}
    for k in args.kernels.split(","):
        try:
            prob = problem_of(args.vladbud, k, args.dtype, args.size)
            one = sum(math.prod(t["shape"]) * (8 if t["dtype"] == "int64" else
                      torch.finfo(DTYPES[t["dtype"]]).bits // 8) for t in prob["inputs"])
            nsets = max(2, min(16, math.ceil(2 * l2 / max(one, 1)) + 1))
            sets = [make_inputs(prob, dev, gen) for _ in range(nsets)]
            r = time_op(torch_op(prob), sets)
            r.update({"size": prob.get("size"), "sets": nsets})
            res["kernels"][k] = r
            print(f"{k:18s} {prob.get('size', ''):28s} {r['median_us']:10.1f} us", flush=True)
            del sets
            torch.cuda.empty_cache()
        except Exception as e:  # one failing baseline must not lose the others
            res["kernels"][k] = {"error": str(e)}
            print(f"{k:18s} error: {e}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
