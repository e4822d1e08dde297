#!/usr/bin/env python3
"""Times the Triton variants of a blind ranking study on a GPU (issue 17, "Measure"), for
bench/ranking_score.py to score against the committed prediction.

    python3 bench/ranking_triton_measure.py --variants bench/variants/triton-blind1 \
        --out OUTDIR/ranking-triton-measured-h200.json [--target h200] [--types softmax,rmsnorm,matmul]
    TRITON_INTERPRET=1 python3 bench/ranking_triton_measure.py --check-only --small   (no GPU)

For every variant <VARIANTS>/<type>/<name>.py: the module is imported, its vb_kernel_run is called
on seeded bf16 inputs of the ranking problem (the GPU benchmark sizes of src/kernels/<type>.cpp:
softmax, rmsnorm, layernorm and reduce 8192x8192 with eps 1e-6 (rmsnorm) and 1e-5
(layernorm), cross_entropy 512x128256 with ignore_index -100 on every 7th row, matmul 4096^3,
flash_attention b2h16s4096d128 causal with sm_scale 1/sqrt(D), fused_mlp b512d4096h11008 with
weights scaled by 1/sqrt(fan-in)), the output is compared with a
PyTorch reference computed in fp32 and rounded to bf16 (max |out - ref| <= 2e-2 + 2e-2 |ref|;
one shape, one dtype: not VladBud's five stages, hence verdict "UNVERIFIED" on a match, "FAIL"
otherwise, "ERROR" when the call raises), then timed with triton.testing.do_bench (it flushes L2
before every call by writing a 256 MB buffer; warm-up 25 ms, 100 ms of repetitions) on fresh
inputs: median, 10th and 90th percentile in microseconds.

Output (the format of bench/ranking_cuda.sh --measure): {"date", "target", "machine", "command",
"seconds", "tools": {"triton", "torch"}, "types": {TYPE: {VARIANT: {"verdict", "reason",
"median_us", "p10_us", "p90_us", "size"}}}}.

--check-only skips the timing (and needs no GPU with TRITON_INTERPRET=1); --fp32 checks in fp32
(tolerance 1e-4; with --check-only only); --small uses small
shapes (softmax/rmsnorm 4x8192, which still takes the two-pass path where MAX_BLOCK < 8192;
matmul 256x256x128 in fp16, since the interpreter computes bf16 dots wrongly; flash_attention
b1h2s256d64, fused_mlp b64d256h512) for such a check.
"""
import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

SIZES = {"softmax": ("8192x8192", {"R": 8192, "C": 8192}),
         "rmsnorm": ("8192x8192", {"M": 8192, "N": 8192}),
         "matmul": ("4096x4096x4096", {"M": 4096, "N": 4096, "K": 4096}),
         "layernorm": ("8192x8192", {"B": 8192, "D": 8192}),
         "cross_entropy": ("512x128256", {"B": 512, "V": 128256}),
         "reduce": ("8192x8192", {"M": 8192, "N": 8192}),
         "flash_attention": ("b2h16s4096d128", {"B": 2, "H": 16, "S": 4096, "D": 128}),
         "fused_mlp": ("b512d4096h11008", {"B": 512, "D": 4096, "H": 11008})}
SMALL = {"softmax": ("4x8192", {"R": 4, "C": 8192}),
         "rmsnorm": ("4x8192", {"M": 4, "N": 8192}),
         "matmul": ("256x256x128", {"M": 256, "N": 256, "K": 128}),
         "layernorm": ("4x8192", {"B": 4, "D": 8192}),
         "cross_entropy": ("3x40000", {"B": 3, "V": 40000}),
         "reduce": ("8x8192", {"M": 8, "N": 8192}),
         "flash_attention": ("b1h2s256d64", {"B": 1, "H": 2, "S": 256, "D": 64}),
         "fused_mlp": ("b64d256h512", {"B": 64, "D": 256, "H": 512})}
EPS = 1e-6  # rmsnorm's default eps (DESIGN §2)
LN_EPS = 1e-5  # layernorm's default eps (PyTorch LayerNorm)


def problem(kind, dims, dtype, device, seed):
    """(inputs, outputs, attrs, reference) of one call; the reference in fp32, rounded to dtype."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)

    if kind == "softmax":
        x = rand(dims["R"], dims["C"])
        return [x], [torch.empty_like(x)], [], lambda: torch.softmax(x.float(), -1).to(dtype)
    if kind == "rmsnorm":
        x, w = rand(dims["M"], dims["N"]), rand(dims["N"])
        ref = lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(dtype)
        return [x, w], [torch.empty_like(x)], [EPS], ref
    if kind == "layernorm":
        x, w, b = rand(dims["B"], dims["D"]), rand(dims["D"]), rand(dims["D"])
        ref = lambda: torch.nn.functional.layer_norm(x.float(), (dims["D"],), w.float(), b.float(), LN_EPS).to(dtype)
        return [x, w, b], [torch.empty_like(x)], [LN_EPS], ref
    if kind == "cross_entropy":
        x = rand(dims["B"], dims["V"])
        t = torch.randint(0, dims["V"], (dims["B"],), generator=g).to(device)
        t[1::7] = -100  # some rows ignored (the type's default ignore_index)
        out = torch.empty((), dtype=torch.float32, device=device)
        ref = lambda: torch.nn.functional.cross_entropy(x.float(), t, ignore_index=-100)
        return [x, t], [out], [-100.0], ref
    if kind == "reduce":
        x = rand(dims["M"], dims["N"])
        y = torch.empty(dims["M"], device=device, dtype=dtype)
        return [x], [y], [], lambda: x.float().sum(-1).to(dtype)
    if kind == "flash_attention":  # causal, sm_scale 1/sqrt(D), no GQA (HKV = H)
        q, k, v = (rand(dims["B"], dims["H"], dims["S"], dims["D"]) for _ in range(3))
        scale = dims["D"] ** -0.5
        ref = lambda: torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), is_causal=True, scale=scale).to(dtype)
        return [q, k, v], [torch.empty_like(q)], [1.0, scale], ref
    if kind == "fused_mlp":  # weights scaled by 1/sqrt(fan-in) (nn.Linear's scale): y stays O(1)
        x = rand(dims["B"], dims["D"])
        wg = (rand(dims["H"], dims["D"]).float() * dims["D"] ** -0.5).to(dtype)
        wu = (rand(dims["H"], dims["D"]).float() * dims["D"] ** -0.5).to(dtype)
        wd = (rand(dims["D"], dims["H"]).float() * dims["H"] ** -0.5).to(dtype)
        ref = lambda: ((torch.nn.functional.silu(x.float() @ wg.float().T) * (x.float() @ wu.float().T))
                       @ wd.float().T).to(dtype)
        return [x, wg, wu, wd], [torch.empty_like(x)], [], ref
    if kind == "matmul":
        a, b = rand(dims["M"], dims["K"]), rand(dims["K"], dims["N"])
        c = torch.empty(dims["M"], dims["N"], device=device, dtype=dtype)
        return [a, b], [c], [], lambda: (a.float() @ b.float()).to(dtype)
    raise SystemExit(f"ranking_triton_measure: no problem for kernel type {kind}")


def load(path):
    spec = importlib.util.spec_from_file_location(f"vb_variant_{path.parent.name}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure_one(kind, path, dims, dtype, device, check_only):
    import torch
    row = {"verdict": "ERROR", "reason": "", "median_us": None, "p10_us": None, "p90_us": None}
    try:
        mod = load(path)
        ins, outs, attrs, ref = problem(kind, dims, dtype, device, seed=42)
        outs[0].fill_(float("nan"))  # an unwritten element fails the check
        mod.vb_kernel_run(ins, outs, attrs)
        if device != "cpu":
            torch.cuda.synchronize()
        want = ref().float()
        got = outs[0].float()
        tol = 2e-2 if dtype != torch.float32 else 1e-4
        bad = ~((got - want).abs() <= tol + tol * want.abs())
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            row["verdict"] = "FAIL"
            row["reason"] = (f"{int(bad.sum())} of {bad.numel()} elements off, first at flat index {i}: "
                             f"{got.flatten()[i].item()} vs {want.flatten()[i].item()}")
            return row
        row["verdict"] = "UNVERIFIED"
        row["reason"] = "matches the PyTorch reference at the measured shape (one shape, not the five stages)"
        if check_only:
            return row
        import triton.testing
        fresh = [problem(kind, dims, dtype, device, seed=43 + i)[:3] for i in range(2)]
        calls = iter(range(1 << 30))

        def call():  # alternate two fresh input sets (L2 is flushed by do_bench as well)
            f = fresh[next(calls) % 2]
            mod.vb_kernel_run(f[0], f[1], f[2])

        med, p10, p90 = triton.testing.do_bench(call, warmup=25, rep=100, quantiles=[0.5, 0.1, 0.9])
        row.update({"median_us": med * 1e3, "p10_us": p10 * 1e3, "p90_us": p90 * 1e3})
    except Exception as e:  # noqa: BLE001 -- a variant that raises is that variant's verdict
        row["verdict"], row["reason"] = "ERROR", f"{type(e).__name__}: {e}"[:500]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="bench/variants/triton-blind1")
    ap.add_argument("--types", default="softmax,rmsnorm,matmul")
    ap.add_argument("--target", default="h200", help="the spec DB id of the GPU measured")
    ap.add_argument("--out", help="JSON file to write (default: stdout)")
    ap.add_argument("--check-only", action="store_true", help="correctness only, no timing")
    ap.add_argument("--small", action="store_true", help="small shapes (a CPU check under TRITON_INTERPRET=1)")
    ap.add_argument("--fp32", action="store_true", help="fp32 inputs (the interpreter check; never timed)")
    a = ap.parse_args()
    import torch
    import triton
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cpu" if interpret else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("ranking_triton_measure: no CUDA GPU visible to torch (for a CPU check: "
                         "TRITON_INTERPRET=1 ... --check-only --small)")
    if a.fp32 and not a.check_only:
        raise SystemExit("ranking_triton_measure: --fp32 is for the correctness check; add --check-only")
    if interpret and not a.check_only:
        raise SystemExit("ranking_triton_measure: the interpreter is never timed; add --check-only")
    t0 = time.time()
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (Triton interpreter)"
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "target": a.target, "machine": f"{platform.node()} ({gpu})",
           "command": " ".join(["python3"] + sys.argv),
           "tools": {"triton": triton.__version__, "torch": torch.__version__},
           "commit": subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                                    text=True).stdout.strip(),
           "types": {}}
    for kind in a.types.split(","):
        label, dims = (SMALL if a.small else SIZES)[kind]
        dtype = torch.float16 if (a.small and kind in ("matmul", "flash_attention", "fused_mlp")) else torch.bfloat16
        if a.fp32:
            dtype = torch.float32
        doc["types"][kind] = {}
        for path in sorted(pathlib.Path(a.variants, kind).glob("*.py")):
            row = measure_one(kind, path, dims, dtype, device, a.check_only)
            row["size"] = label
            row["dtype"] = str(dtype).replace("torch.", "")
            doc["types"][kind][path.stem] = row
            t = f"{row['median_us']:10.1f} us" if row["median_us"] else " " * 13
            print(f"  {kind:8s} {path.stem:30s} {row['verdict']:10s} {t} {row['reason'][:80]}",
                  file=sys.stderr, flush=True)
    doc["seconds"] = round(time.time() - t0)
    text = json.dumps(doc, indent=1)
    if a.out:
        pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(a.out).write_text(text + "\n")
        print("wrote", a.out, f"({doc['seconds']} s)", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
