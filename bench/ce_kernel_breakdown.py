#!/usr/bin/env python3
"""Per-kernel GPU time of cross_entropy CUDA sources, to see where a call's time goes.

`vladbud bench` reports one latency per call (device events around vb_kernel_run, host launch
work included). A split-row cross_entropy call launches up to three kernels (chunks, merge,
final); this script builds each SOURCE with nvcc for sm_90a, calls its vb_kernel_run through
the bridge's loader (vladbud.kernels.KernelLibrary, DLPack) on 512x128256 bf16 logits (4
rotating input sets, 525 MB, over 2x the H200's 60 MiB L2) and reports the median duration of every kernel it launched, from torch.profiler (CUPTI) over
40 calls, and the gaps between the first kernels of the trace.

Run on the GPU machine, from the repository root (torch with CUDA, nvcc on PATH):
    python3 bench/ce_kernel_breakdown.py kernels/cuda/cross_entropy.cu \
        bench/variants/cuda/cross_entropy/v03_regs.cu
Extra include folders for nvcc (e.g. .h200/include for DLPack) come from $CPATH.

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
    ap.add_argument("sources", nargs="+", help="cross_entropy CUDA sources (.cu)")
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--arch", default="sm_90a")
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
    out = torch.empty((), device="cuda", dtype=torch.float32)
    tmp = tempfile.mkdtemp(prefix="ce_breakdown_")
    for src in args.sources:
        so = os.path.join(tmp, os.path.basename(src) + ".so")
        subprocess.run(["nvcc", "-O3", "-std=c++17", "-Ikernels/include", "-gencode",
                        f"arch=compute_{arch},code=sm_{arch}", "-shared", "-Xcompiler", "-fPIC",
                        src, "-o", so], check=True)
        lib = KernelLibrary(so, "cross_entropy", "cuda")

        def call(x):
            lib.run([x, tg], [out], [-100.0])  # raises KernelError with the kernel's message

        for i in range(10):
            call(xs[i % 4])
        torch.cuda.synchronize()
        ref = torch.nn.functional.cross_entropy(xs[1].float(), tg).item()
        print(f"{src}: loss {out.item():.6f}, torch (fp32 of the same bf16 logits) {ref:.6f}")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(40):
                call(xs[i % 4])
            torch.cuda.synchronize()
        kern = [e for e in prof.events() if e.device_type.name == "CUDA"]
        per = collections.defaultdict(list)
        for e in kern:
            per[e.name.split("(")[0][-60:]].append(e.time_range.end - e.time_range.start)
        for name, ts in per.items():
            ts.sort()
            print(f"  {name:60s} calls {len(ts):3d}  median {ts[len(ts) // 2]:7.2f} us")
        spans = sorted((e.time_range.start, e.time_range.end) for e in kern)[:7]
        gaps = [round(spans[i + 1][0] - spans[i][1], 1) for i in range(len(spans) - 1)]
        print(f"  gaps between the first kernels of the trace (us): {gaps}")


if __name__ == "__main__":
    main()
