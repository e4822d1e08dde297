#!/usr/bin/env python3
"""Per-call host overhead of a VladBud kernel inside PyTorch: the former Python path (a
torch.library.custom_op that calls the library through ctypes and DLPack capsules) against the
compiled op (torch.ops.vladbud.<type>, python/vladbud/csrc/vladbud_ops.cpp), side by side.

Problems are tiny (reduce on 1x8, rmsnorm on 1x64, fp32) so that the kernel's own work is
small and what is timed is mostly the path around it; a third case serves reduce's op with a
library whose vb_kernel_run returns at once (the path alone, no kernel, no launch). For each path: N calls back to back, timed
with time.perf_counter_ns, in R rounds (after a warm-up round); the report gives the median
over rounds of the time per call, in microseconds. On CUDA two numbers: "host" is the time until
the N-th call has returned (launch overhead; the GPU runs behind), "total" includes the one
torch.cuda.synchronize() after them. torch's own operator on the same data (x.sum(-1); an
RMSNorm from torch ops) is given for reference.

Usage (from the repository root; CPU always, CUDA when torch sees a GPU and nvcc is found):
    .venv/bin/python bench/op_overhead.py [--outdir bench/results] [--calls 2000] [--rounds 7]
        [--device cpu|cuda|all]
Writes <outdir>/op-overhead-<cpu|cuda>.md and .json (date, machine, CPU model, GPU, git commit,
command line, torch version, the numbers).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from vladbud import kernels as vk  # noqa: E402  (loads the compiled ops)

# ---- the former path, for this comparison only: custom_op -> ctypes -> DLPack capsules --------

OLD_LIBS = {}
OLD_CALLS = {}


def _old_run(t, inputs, outputs, attrs):
    """The former kernels.py `_run`: look up, count, contiguous inputs, KernelLibrary.run."""
    lib = OLD_LIBS[t]
    OLD_CALLS[t] = OLD_CALLS.get(t, 0) + 1
    lib.run([x.contiguous() for x in inputs], outputs, attrs)
    return outputs[0]



@torch.library.custom_op("vladbud_ctypes::reduce", mutates_args=())
def old_reduce(x: Tensor) -> Tensor:
    """Sum over the last dim of x[M,N] -> y[M] (ctypes path)."""
    return _old_run("reduce", [x], [x.new_empty(x.shape[0])], [])


@torch.library.custom_op("vladbud_ctypes::rmsnorm", mutates_args=())
def old_rmsnorm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x[M,N] / sqrt(mean(x^2) + eps) * weight[N] (ctypes path)."""
    return _old_run("rmsnorm", [x, weight], [torch.empty_like(x, memory_format=torch.contiguous_format)], [eps])


# ---- building the kernels ------------------------------------------------------------------------

def build_cpu(kernel, out):
    """kernels/cpu/<kernel>.cpp -> .so with the CPU backend's flags (as python/tests/conftest.py)."""
    so = os.path.join(out, f"{kernel}_cpu.so")
    subprocess.run([os.environ.get("VB_CPU_CXX", "g++"), "-std=c++20", "-O2", "-march=native", "-fopenmp",
                    "-fPIC", "-shared", "-I", os.path.join(ROOT, "kernels", "include"),
                    "-idirafter", dlpack_include(out),
                    os.path.join(ROOT, "kernels", "cpu", f"{kernel}.cpp"), "-o", so], check=True)
    return so


def find_nvcc():
    """nvcc's path ($VB_NVCC, PATH, /usr/local/cuda/bin) or None."""
    for c in (os.environ.get("VB_NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if c and os.path.isfile(c):
            return c
    return None


def build_cuda(kernel, out):
    """kernels/cuda/<kernel>.cu -> .so with the CUDA backend's flags, for this GPU."""
    major, minor = torch.cuda.get_device_capability()
    cc = f"{major}{minor}{'a' if (major, minor) == (9, 0) else ''}"
    so = os.path.join(out, f"{kernel}_cuda.so")
    subprocess.run([find_nvcc(), "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-shared", "-lineinfo",
                    "-I", os.path.join(ROOT, "kernels", "include"), "-Xcompiler", f"-idirafter{dlpack_include(out)}",
                    "-gencode", f"arch=compute_{cc},code=sm_{cc}",
                    os.path.join(ROOT, "kernels", "cuda", f"{kernel}.cu"), "-o", so], check=True)
    return so


def dlpack_include(out):
    """A folder with dlpack/dlpack.h (torch's copy), searched after the system's own."""
    inc = os.path.join(out, "include")
    if not os.path.isdir(inc):
        os.makedirs(os.path.join(inc, "dlpack"))
        shutil.copy(os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "dlpack.h"),
                    os.path.join(inc, "dlpack", "dlpack.h"))
    return inc


# ---- timing --------------------------------------------------------------------------------------

def time_path(fn, calls, rounds, cuda):
    """Median over `rounds` of (host us/call, total us/call) for `calls` back-to-back fn()."""
    host, total = [], []
    for r in range(rounds + 1):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter_ns()
        if cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter_ns()
        if r == 0:
            continue  # warm-up
        host.append((t1 - t0) / calls / 1e3)
        total.append((t2 - t0) / calls / 1e3)
    return statistics.median(host), statistics.median(total)


def machine_info():
    """uname -n, the CPU model, the GPU name (or None)."""
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"host": platform.node(), "cpu": cpu, "cpu_count": os.cpu_count(), "gpu": gpu}


def git_commit():
    """HEAD's hash, '+dirty' when the working tree differs; '?' outside git."""
    try:
        h = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return h + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


NOOP_SOURCE = r"""
#include <dlpack/dlpack.h>
// A kernel that does nothing: what remains of a call is the path around it.
extern "C" int vb_kernel_run(const DLTensor*, int, DLTensor*, int, const double*, int, void*) { return 0; }
extern "C" const char* vb_kernel_last_error(void) { return ""; }
"""


def build_noop(out):
    """A library whose vb_kernel_run returns 0 at once (no work, no launch)."""
    src = os.path.join(out, "noop.cpp")
    with open(src, "w") as f:
        f.write(NOOP_SOURCE)
    so = os.path.join(out, "noop.so")
    subprocess.run([os.environ.get("VB_CPU_CXX", "g++"), "-O2", "-fPIC", "-shared", "-idirafter", dlpack_include(out),
                    src, "-o", so], check=True)
    return so


def run_device(device, args, tmp):
    """Times both paths (and torch's own ops for reference) on `device` for: reduce on x[1,8],
    rmsnorm on x[1,64], and reduce's op served by a no-op library (the path alone). A list of
    {"kernel", "shape", "paths": {path: {"host_us", "total_us", "host_us_min", "host_us_max"}},
    "saved_us", "ratio"}."""
    cuda = device == "cuda"
    build = build_cuda if cuda else build_cpu
    lib_dev = "cuda" if cuda else "cpu"
    old, new = "old (custom_op + ctypes)", "new (compiled op)"
    cases = []
    for case in ("reduce", "rmsnorm", "no-op kernel"):
        kernel = "reduce" if case == "no-op kernel" else case
        so = build_noop(tmp) if case == "no-op kernel" else build(kernel, tmp)
        vk.bind(kernel, so, lib_dev)
        OLD_LIBS[kernel] = vk.KernelLibrary(so, kernel, lib_dev)
        g = torch.Generator().manual_seed(0)
        if kernel == "reduce":
            x = torch.randn(1, 8, generator=g).to(device)
            paths = {old: lambda: torch.ops.vladbud_ctypes.reduce(x),
                     new: lambda: torch.ops.vladbud.reduce(x),
                     "torch x.sum(-1) (reference)": lambda: x.sum(-1)}
            ref = x.sum(-1)
            shape = "x[1,8] fp32" + (" (reduce's op, a library that returns at once)" if case != kernel else "")
        else:
            x = torch.randn(1, 64, generator=g).to(device)
            w = torch.randn(64, generator=g).to(device)
            paths = {old: lambda: torch.ops.vladbud_ctypes.rmsnorm(x, w, 1e-6),
                     new: lambda: torch.ops.vladbud.rmsnorm(x, w, 1e-6),
                     "torch ops (reference)": lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w}
            ref = paths["torch ops (reference)"]()
            shape = "x[1,64], weight[64] fp32"
        if case != "no-op kernel":
            for name in (old, new):
                torch.testing.assert_close(paths[name](), ref, rtol=1e-4, atol=1e-4)
        else:
            del paths["torch x.sum(-1) (reference)"]
        row = {"kernel": case, "shape": shape, "paths": {}}
        # Interleave the paths round by round so that drift hits them alike.
        samples = {p: ([], []) for p in paths}
        for _ in range(args.rounds):
            for p, fn in paths.items():
                h, t = time_path(fn, args.calls, 1, cuda)
                samples[p][0].append(h)
                samples[p][1].append(t)
        for p, (h, t) in samples.items():
            row["paths"][p] = {"host_us": statistics.median(h), "total_us": statistics.median(t),
                               "host_us_min": min(h), "host_us_max": max(h)}
        o, n = row["paths"][old]["host_us"], row["paths"][new]["host_us"]
        row["saved_us"] = o - n
        row["ratio"] = o / n if n > 0 else None
        cases.append(row)
    vk.unbind_all()
    return cases


def write(device, cases, args, outdir):
    """op-overhead-<device>.md and .json in outdir."""
    cuda = device == "cuda"
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info(), "git_commit": git_commit(),
            "command": " ".join([os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT)
                                 else sys.executable] + sys.argv),
            "torch": torch.__version__, "device": device, "calls_per_round": args.calls,
            "rounds": args.rounds, "torch_threads": torch.get_num_threads(), "cases": cases}
    os.makedirs(outdir, exist_ok=True)
    base = os.path.join(outdir, f"op-overhead-{device}")
    with open(base + ".json", "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    m = info["machine"]
    lines = [f"# Per-call overhead of a VladBud op: ctypes custom_op vs compiled op ({device})", "",
             f"- date: {info['date']}",
             f"- machine: {m['host']}, CPU {m['cpu']} ({m['cpu_count']} cores)"
             + (f", GPU {m['gpu']}" if m["gpu"] else ""),
             f"- git commit: {info['git_commit']}",
             f"- command: `{info['command']}`",
             f"- torch {info['torch']}, {info['torch_threads']} intra-op threads",
             f"- method: {args.calls} calls back to back per round, {args.rounds} rounds interleaved across the"
             " paths (after one warm-up round each); median over rounds of the time per call"
             + ("; host = until the last call returned, total = after one torch.cuda.synchronize()" if cuda else ""),
             ""]
    hdr = "| kernel | problem | path | host us/call | " + ("total us/call | " if cuda else "") + "range (host) |"
    lines += [hdr, "|" + " --- |" * (hdr.count("|") - 1)]
    for c in cases:
        for p, v in c["paths"].items():
            lines.append(f"| {c['kernel']} | {c['shape']} | {p} | {v['host_us']:.2f} | "
                         + (f"{v['total_us']:.2f} | " if cuda else "")
                         + f"{v['host_us_min']:.2f}-{v['host_us_max']:.2f} |")
    lines.append("")
    for c in cases:
        lines.append(f"- {c['kernel']}: the compiled op saves {c['saved_us']:.2f} us per call on the host "
                     f"({c['ratio']:.1f}x less overhead than the ctypes path)")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outdir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds per path (default 7)")
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                    help="cpu, cuda, or all (default: cpu, and cuda when available)")
    args = ap.parse_args()
    devices = ["cpu"] if args.device in ("cpu", "all") else []
    if args.device in ("cuda", "all"):
        if torch.cuda.is_available() and find_nvcc():
            devices.append("cuda")
        elif args.device == "cuda":
            sys.exit("op_overhead: --device cuda needs a CUDA device and nvcc")
        else:
            print("op_overhead: no CUDA device or no nvcc; CPU only", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="op_overhead_")
    try:
        for d in devices:
            write(d, run_device(d, args, tmp), args, args.outdir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
