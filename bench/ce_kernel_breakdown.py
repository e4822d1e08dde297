#!/usr/bin/env python3
"""Per-kernel GPU time of cross_entropy CUDA sources, to see where a call's time goes.

`vladbud bench` reports one latency per call (device events around vb_kernel_run, host launch
work included). A split-row cross_entropy call launches up to three kernels (chunks, merge,
final); this script builds each SOURCE with nvcc for sm_90a, calls its vb_kernel_run through
the bridge's loader (vladbud.kernels.KernelLibrary, DLPack) on 512x128256 bf16 logits (4
rotating input sets, 525 MB, over 2x the H200's 60 MiB L2) and reports the median duration of every kernel it launched, from torch.profiler (CUPTI) over
40 calls, and the gaps between the first kernels of the trace.

With --type reduce the SOURCES are reduce kernels (y[B] = Σ_j x[B, j]) called on the same
logits: the streaming floor of this shape without the exponentials (the reduce starter is the
reference).

Run on the GPU machine, from the repository root (torch with CUDA, nvcc on PATH):
    python3 bench/ce_kernel_breakdown.py kernels/cuda/cross_entropy.cu \
        bench/variants/cuda/cross_entropy/v03_regs.cu
A .so given instead of a source is loaded as it is (built before, e.g. on a machine without a
GPU, with the same nvcc line). Extra include folders for nvcc (e.g. .h200/include for DLPack) come from $CPATH.

Errors: a source that does not compile stops with nvcc's message; a vb_kernel_run that returns
non-zero stops with vladbud.kernels.KernelError and the kernel's message.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

# The bridge's loader (python/vladbud/kernels.py) calls vb_kernel_run through DLPack.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+",
                    help="CUDA sources (.cu, built here with nvcc) or libraries built before (.so)")
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--type", choices=["cross_entropy", "reduce"], default="cross_entropy",
                    help="the ABI of the SOURCES (default cross_entropy)")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile
    from vladbud.kernels import KernelLibrary
    if not torch.cuda.is_available():
        sys.exit("ce_kernel_breakdown: no CUDA device (run it on the GPU machine)")
    arch = args.arch.replace("sm_", "")
    B, V = args.rows, args.vocab
    xs = [torch.randn(B, V, device="cuda", dtype=torch.bfloat16) * 3 for _ in range(4)]
    tg = torch.randint(0, V, (B,), device="cuda")
    if args.type == "reduce":
        out = torch.empty((B,), device="cuda", dtype=torch.bfloat16)
    else:
        out = torch.empty((), device="cuda", dtype=torch.float32)
    tmp = tempfile.mkdtemp(prefix="ce_breakdown_")
    for src in args.sources:
        so = src if src.endswith(".so") else os.path.join(tmp, os.path.basename(src) + ".so")
        if so != src:
            subprocess.run(["nvcc", "-O3", "-std=c++17", "-Ikernels/include", "-gencode",
                            f"arch=compute_{arch},code=sm_{arch}", "-shared", "-Xcompiler",
                            "-fPIC", src, "-o", so], check=True)
        lib = KernelLibrary(so, args.type, "cuda")

        def call(x):  # raises KernelError with the kernel's message
            if args.type == "reduce":
                lib.run([x], [out], [])
            else:
                lib.run([x, tg], [out], [-100.0])

        for i in range(10):
            call(xs[i % 4])
        torch.cuda.synchronize()
        if args.type == "reduce":
            err = (out.float() - xs[1].float().sum(1)).abs().max().item()
            print(f"{src}: reduce, max |y - torch fp32 sum| {err:.4g}")
        else:
            ref = torch.nn.functional.cross_entropy(xs[1].float(), tg).item()
            print(f"{src}: loss {out.item():.6f}, torch (fp32 of the same bf16 logits) {ref:.6f}")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(40):
                call(xs[i % 4])
            torch.cuda.synchronize()
        kern = sorted((e for e in prof.events() if e.device_type.name == "CUDA"),
                      key=lambda e: e.time_range.start)
        per = collections.defaultdict(list)
        for e in kern:
            per[kernel_name(e.name)].append(e.time_range.end - e.time_range.start)
        for name, ts in per.items():
            ts.sort()
            print(f"  {name:40s} calls {len(ts):3d}  median {ts[len(ts) // 2]:7.2f} us")
        k = len(kern) // 40  # kernels per call
        if k >= 1 and len(kern) == 40 * k:
            spans = sorted(kern[i * k + k - 1].time_range.end - kern[i * k].time_range.start
                           for i in range(40))
            print(f"  per call, first kernel start to last kernel end: median {spans[20]:.2f} us"
                  f" ({k} kernels per call)")
        first = [(e.time_range.start, e.time_range.end) for e in kern[:7]]
        gaps = [round(first[i + 1][0] - first[i][1], 1) for i in range(len(first) - 1)]
        print(f"  gaps between the first kernels of the trace (us): {gaps}")


def kernel_name(full):
    """The function name of a CUDA kernel's demangled signature (no namespace, template
    arguments or parameters): 'void (anonymous namespace)::ce_stream<...>(...)' -> 'ce_stream'."""
    n = full.replace("(anonymous namespace)::", "")
    n = n.split("<")[0].split("(")[0]
    return n.split()[-1] if n.split() else full


if __name__ == "__main__":
    main()
