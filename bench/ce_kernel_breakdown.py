#!/usr/bin/env python3
"""Per-kernel GPU time of cross_entropy CUDA sources, to see where a call's time goes.

`vladbud bench` reports one latency per call (device events around vb_kernel_run, host launch
work included). A split-row cross_entropy call launches up to three kernels (chunks, merge,
final); this script builds each SOURCE with nvcc for sm_90a, calls its vb_kernel_run through
ctypes on 512x128256 bf16 logits (4 rotating input sets, 525 MB, over 2x the H200's 60 MiB L2)
and reports the median duration of every kernel it launched, from torch.profiler (CUPTI) over
40 calls, and the gaps between the first kernels of the trace.

Run on the GPU machine, from the repository root (torch with CUDA, nvcc on PATH):
    python3 bench/ce_kernel_breakdown.py kernels/cuda/cross_entropy.cu \
        bench/variants/cuda/cross_entropy/v03_regs.cu
Extra include folders for nvcc (e.g. .h200/include for DLPack) come from $CPATH.

Errors: a source that does not compile stops with nvcc's message; a vb_kernel_run that returns
non-zero stops with "vb_kernel_run returned N".
"""
import argparse
import collections
import ctypes
import os
import subprocess
import sys
import tempfile


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


KDL_CUDA = 2  # DLPack: kDLCUDA
KDL_INT, KDL_FLOAT, KDL_BFLOAT = 0, 2, 4  # DLPack type codes


def as_dl(t, code, bits, keep):
    """A DLTensor view of CUDA tensor t (contiguous); `keep` holds the shape array alive."""
    shape = (ctypes.c_int64 * max(1, t.dim()))(*t.shape) if t.dim() else (ctypes.c_int64 * 1)(0)
    keep.append(shape)
    return DLTensor(t.data_ptr(), DLDevice(KDL_CUDA, t.device.index or 0), t.dim(),
                    DLDataType(code, bits, 1), shape, None, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", help="cross_entropy CUDA sources (.cu)")
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--arch", default="sm_90a")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile
    if not torch.cuda.is_available():
        sys.exit("ce_kernel_breakdown: no CUDA device (run it on the GPU machine)")
    arch = args.arch.replace("sm_", "")
    B, V = args.rows, args.vocab
    xs = [torch.randn(B, V, device="cuda", dtype=torch.bfloat16) * 3 for _ in range(4)]
    tg = torch.randint(0, V, (B,), device="cuda")
    out = torch.empty((), device="cuda", dtype=torch.float32)
    attrs = (ctypes.c_double * 1)(-100.0)
    tmp = tempfile.mkdtemp(prefix="ce_breakdown_")
    for src in args.sources:
        so = os.path.join(tmp, os.path.basename(src) + ".so")
        subprocess.run(["nvcc", "-O3", "-std=c++17", "-Ikernels/include", "-gencode",
                        f"arch=compute_{arch},code=sm_{arch}", "-shared", "-Xcompiler", "-fPIC",
                        src, "-o", so], check=True)
        lib = ctypes.CDLL(so)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        def call(x):
            keep = []
            ins = (DLTensor * 2)(as_dl(x, KDL_BFLOAT, 16, keep), as_dl(tg, KDL_INT, 64, keep))
            outs = (DLTensor * 1)(as_dl(out, KDL_FLOAT, 32, keep))
            rc = lib.vb_kernel_run(ins, 2, outs, 1, attrs, 1, stream)
            if rc != 0:
                sys.exit(f"{src}: vb_kernel_run returned {rc}")

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
