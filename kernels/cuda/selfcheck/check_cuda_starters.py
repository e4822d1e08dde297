#!/usr/bin/env python3
"""GPU self-check of the CUDA starter kernels (kernels/cuda/<type>.cu) and the ranking variants
(bench/variants/cuda/{softmax,rmsnorm}/*.cu), independent of the vladbud backend.

Needs a CUDA GPU, nvcc and PyTorch (the H200 image has all three). For each starter it
  * builds the .cu with nvcc (-O3, no fast-math) into a shared library and loads it (ctypes),
  * calls vb_kernel_run on torch CUDA tensors through hand-built DLTensor descriptors, on the
    type's test, edge and stability sizes (src/kernels/<type>.cpp) in fp16, bf16 and fp32,
  * compares with a float64 PyTorch reference rounded to the dtype: relative Frobenius error
    and per-row error against the evaluator's thresholds (fp16 1e-3, bf16 1.6e-2, fp32 1e-5;
    rows 5x, as src/eval/compare.h), identical NaN/Inf positions,
  * checks guard bands around the output (no write outside it), that inputs are unchanged,
    bitwise determinism over two calls, and one run with inputs at an odd element offset
    (misaligned rows: the scalar fallback),
then times the benchmark size (CUDA events, median of 20 calls, two input sets alternating)
and prints GB/s (minimal bytes: inputs + outputs) and the share of 3930 GB/s.

Usage (repository root):  python3 kernels/cuda/selfcheck/check_cuda_starters.py [--arch 90a]
    [--types softmax,rmsnorm,...] [--no-variants] [--quick]
Exit status 0 when every check passed, 1 otherwise.
"""
import argparse
import ctypes
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COPY_GBS = 3930.0  # measured H200 device copy bandwidth, read + write (task brief)
THRESH = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}
ROW_FACTOR = 5.0  # kRowFactor of src/eval/compare.h
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


# ---- DLPack descriptors ------------------------------------------------------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DL_CODE = {torch.float16: (2, 16), torch.bfloat16: (4, 16), torch.float32: (2, 32),
           torch.int64: (0, 64)}
keep = []  # shape arrays must outlive the call


def describe(t):
    code, bits = DL_CODE[t.dtype]
    shape = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
    keep.append(shape)
    return DLTensor(ctypes.c_void_p(t.data_ptr()), DLDevice(2, t.device.index or 0), t.dim(),
                    DLDataType(code, bits, 1), shape, None, 0)


class Kernel:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.vb_kernel_run.restype = ctypes.c_int
        self.lib.vb_kernel_last_error.restype = ctypes.c_char_p

    def __call__(self, ins, outs, attrs):
        n_in, n_out = len(ins), len(outs)
        ia = (DLTensor * n_in)(*[describe(t) for t in ins])
        oa = (DLTensor * n_out)(*[describe(t) for t in outs])
        aa = (ctypes.c_double * max(1, len(attrs)))(*attrs)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = self.lib.vb_kernel_run(ia, n_in, oa, n_out, aa, len(attrs), stream)
        keep.clear()
        if rc != 0:
            raise RuntimeError("vb_kernel_run failed: " + self.lib.vb_kernel_last_error().decode())


def build(src, arch, outdir, inc):
    so = os.path.join(outdir, os.path.basename(src).replace(".cu", "") + "_" +
                      str(abs(hash(src)) % 100000) + ".so")
    cmd = ["nvcc", "-std=c++17", "-O3", "-I" + os.path.join(ROOT, "kernels", "include")] + \
          [f"-I{d}" for d in inc] + ["-Xcompiler", "-fPIC", "-shared",
                                     f"-gencode=arch=compute_{arch},code=sm_{arch}", "-o", so, src]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"nvcc failed for {src}:\n{r.stderr}")
    return so


def dlpack_includes(tmp):
    if os.path.exists("/usr/include/dlpack/dlpack.h"):
        return []
    from torch.utils.cpp_extension import include_paths
    shim = os.path.join(tmp, "inc", "dlpack")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "dlpack.h"), "w") as f:
        f.write("#pragma once\n#include <ATen/dlpack.h>\n")
    return [os.path.join(tmp, "inc")] + include_paths()


# ---- problems: inputs, attributes, reference ---------------------------------------------------

def gen_rows(shape, regime, dt, g):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    mx = {torch.float16: 65504.0, torch.bfloat16: 3.3895e38, torch.float32: 3.4028e38}[dt]
    if regime == "near_max":
        D = shape[-1]
        a = min(0.9 * mx, math.sqrt(3.4028e38 / D) / 4)
        x = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * a
    elif regime == "large_mean":
        x = 2000 + x
    elif regime == "masked_inf":
        R, C = shape
        m = torch.rand(shape, generator=g) < 0.5
        m[:, 0] = False
        x[m] = -math.inf
        x[5 % R, :] = -math.inf  # all -inf row -> NaN
    elif regime == "pm32000":
        x = torch.where(torch.rand(shape, generator=g) < 0.5, 32000.0, -16000.0).double()
    return x


def problem(typ, dims, dt, regime, attrs, g):
    """Returns (inputs (cuda, dt), output shapes+dtypes, attrs list, reference fn -> list of f64)."""
    if typ == "softmax":
        R, C = dims
        x = gen_rows((R, C), regime, dt, g).to(dt)
        return [x], [((R, C), dt)], [], lambda i: [torch.softmax(i[0].double(), -1)]
    if typ == "layernorm":
        B, D = dims
        x = gen_rows((B, D), regime, dt, g).to(dt)
        w = (1 + 0.5 * torch.randn(D, generator=g)).to(dt)
        b = (0.5 * torch.randn(D, generator=g)).to(dt)
        eps = attrs.get("eps", 1e-5)
        return [x, w, b], [((B, D), dt)], [eps], lambda i: [
            F.layer_norm(i[0].double(), (D,), i[1].double(), i[2].double(), eps)]
    if typ == "rmsnorm":
        M, N = dims
        x = gen_rows((M, N), regime, dt, g).to(dt)
        w = (1 + 0.5 * torch.randn(N, generator=g)).to(dt)
        eps = attrs.get("eps", 1e-6)
        def ref(i):
            x64 = i[0].double()
            return [x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + eps) * i[1].double()]
        return [x, w], [((M, N), dt)], [eps], ref
    if typ == "reduce":
        M, N = dims
        x = gen_rows((M, N), regime, dt, g).to(dt)
        return [x], [((M,), dt)], [], lambda i: [i[0].double().sum(-1)]
    if typ == "cross_entropy":
        B, V = dims
        ig = int(attrs.get("ignore_index", -100))
        x = (2 * torch.randn((B, V), generator=g, dtype=torch.float64))
        t = torch.randint(0, V, (B,), generator=g)
        frac = {"all_ignored": 1.1, "partial_ignore": 0.5}.get(regime, 0.1)
        ign = torch.rand(B, generator=g) < frac
        if regime != "all_ignored":
            ign[0] = False
        t[ign] = ig
        if regime == "masked_inf":
            m = torch.rand((B, V), generator=g) < 0.3
            m[torch.arange(B)[~ign], t[~ign]] = False
            x[m] = -math.inf
        x = x.to(dt)
        def ref(i):
            x64, tt = i[0].double(), i[1]
            keep_rows = tt != ig
            if keep_rows.sum() == 0:
                return [torch.tensor(float("nan"), dtype=torch.float64)]
            return [F.cross_entropy(x64[keep_rows], tt[keep_rows], reduction="mean")]
        return [x, t], [((), torch.float32)], [float(ig)], ref
    if typ == "rotary_embedding":
        B, H, S, D = dims
        il = attrs.get("interleaved", 0.0)
        x = gen_rows((B, H, S, D), "normal", dt, g).to(dt)
        half = D // 2
        ang = torch.arange(S, dtype=torch.float64)[:, None] * \
            10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / D)
        c, s = torch.cos(ang).to(dt), torch.sin(ang).to(dt)
        def ref(i):
            x64, c64, s64 = i[0].double(), i[1].double(), i[2].double()
            if il:
                a, b = x64[..., 0::2], x64[..., 1::2]
            else:
                a, b = x64[..., :half], x64[..., half:]
            ya, yb = a * c64 - b * s64, b * c64 + a * s64
            y = torch.empty_like(x64)
            if il:
                y[..., 0::2], y[..., 1::2] = ya, yb
            else:
                y[..., :half], y[..., half:] = ya, yb
            return [y]
        return [x, c, s], [((B, H, S, D), dt)], [il], ref
    raise ValueError(typ)


# Sizes from src/kernels/<type>.cpp: (label, dims, attrs, regime).
def sizes(typ, quick):
    S = []
    def add(lst, regime="normal", attrs=None):
        for d in lst:
            S.append((("x".join(map(str, d))) + ("" if regime == "normal" else " " + regime),
                      d, attrs or {}, regime))
    if typ == "softmax":
        add([(1024, 1024), (512, 4096), (2048, 768), (8, 32000), (32, 50257), (4, 128256)])
        add([(1, 1), (3, 127), (127, 1023), (1023, 3), (13, 4097), (251, 1021), (1, 100003)])
        for r in ["near_max", "large_mean", "masked_inf"]:
            add([(64, 1000)], r)
        add([(8, 4)])
    elif typ in ("layernorm", "rmsnorm"):
        add([(512, 768), (2048, 1024), (256, 4096), (128, 5120), (64, 8192)])
        add([(1, 1), (3, 127), (127, 1023), (1023, 3), (13, 4097), (251, 1021)])
        add([(32, 4096)], "near_max")
        if typ == "layernorm":
            add([(32, 4096)], "large_mean")  # fp16/bf16 only (filtered below)
    elif typ == "reduce":
        add([(1024, 4096), (4096, 1024), (8192, 128), (32, 128256)])
        add([(1, 1), (3, 127), (127, 1023), (1023, 3), (13, 4097), (251, 1021), (4097, 1),
             (1, 1000003)])
        add([(64, 8)], "pm32000")
    elif typ == "cross_entropy":
        add([(8, 128256), (32, 50257), (64, 32000)])
        add([(16, 32000)], attrs={"ignore_index": -1.0})
        add([(1, 3), (3, 127), (1, 4097), (13, 1023), (127, 251), (1023, 3), (5, 50257)])
        for r in ["masked_inf", "partial_ignore", "all_ignored"]:
            add([(64, 4096)], r)
    elif typ == "rotary_embedding":
        for il in (0.0, 1.0):
            add([(1, 32, 512, 128), (2, 12, 256, 64), (4, 16, 128, 64), (1, 8, 1024, 128),
                 (1, 1, 1, 2), (1, 3, 127, 6), (2, 1, 13, 130), (1, 1, 3, 130), (1, 2, 1023, 2),
                 (1, 1, 4097, 64)], attrs={"interleaved": il})
    if quick:
        S = S[:3] + [s for s in S if s[1][0] * (s[1][1] if len(s[1]) > 1 else 1) < 5000][:4]
    return S


BENCH = {"softmax": ((8192, 8192), {}), "layernorm": ((8192, 8192), {}),
         "rmsnorm": ((8192, 8192), {}), "reduce": ((8192, 8192), {}),
         "cross_entropy": ((256, 128256), {}), "rotary_embedding": ((4, 32, 2048, 128), {})}


# ---- checks --------------------------------------------------------------------------------------

GUARD = 64  # elements of guard band on each side (keeps 16-byte alignment)


def alloc_out(shape, dt, fill_bits):
    n = int(math.prod(shape)) if shape else 1
    buf = torch.empty(n + 2 * GUARD, dtype=dt, device="cuda")
    ib = buf.view(torch.int16 if dt != torch.float32 else torch.int32)
    ib.fill_(fill_bits)
    return buf, buf[GUARD:GUARD + n].view(shape)


def offset_copy(t, off):
    """A copy of t whose data starts `off` elements after an allocation (misaligned when odd)."""
    if t.dtype == torch.int64 or off == 0:
        return t.clone()
    buf = torch.empty(t.numel() + off, dtype=t.dtype, device=t.device)
    v = buf[off:].view(t.shape)
    v.copy_(t)
    return v


def compare(out, ref, dt):
    o, r = out.double().cpu().reshape(-1, out.shape[-1] if out.dim() >= 1 else 1), \
        ref.to(dt).double().cpu().reshape(-1, out.shape[-1] if out.dim() >= 1 else 1)
    fo, fr = torch.isfinite(o), torch.isfinite(r)
    if not torch.equal(torch.isnan(o), torch.isnan(r)) or not torch.equal(fo, fr) or \
            not torch.equal(o[~fr & ~torch.isnan(r)], r[~fr & ~torch.isnan(r)]):
        return False, "NaN/Inf pattern differs"
    e = torch.where(fr, o - r, torch.zeros_like(o))
    rr = torch.where(fr, r, torch.zeros_like(r))
    en, rn = e.norm(), rr.norm()
    rel = (en / rn).item() if rn > 0 else en.item()
    th = THRESH.get(dt, 1e-5)
    rows_e, rows_r = e.norm(dim=1), rr.norm(dim=1)
    rms_row = (rr.pow(2).sum() / max(1, rr.shape[0])).sqrt()
    worst = (rows_e / torch.maximum(rows_r, rms_row).clamp_min(1e-300)).max().item() if rn > 0 else 0
    ok = rel <= th and worst <= ROW_FACTOR * th
    return ok, f"rel {rel:.2e} worst-row {worst:.2e} (thr {th:g})"


def run_case(k, typ, dims, attrs, regime, dt, g, misalign=False):
    ins, out_specs, at, ref = problem(typ, dims, dt, regime, attrs, g)
    ins = [t.cuda() for t in ins]
    if misalign:
        ins = [offset_copy(t, 1) for t in ins]
    before = [t.clone() for t in ins]
    outs1 = [alloc_out(s, d, 0x7fff if d != torch.float32 else 0x7fc00001) for s, d in out_specs]
    outs2 = [alloc_out(s, d, 0x1234) for s, d in out_specs]
    k(ins, [o[1] for o in outs1], at)
    k(ins, [o[1] for o in outs2], at)
    torch.cuda.synchronize()
    msgs, ok = [], True
    for (buf, o), (buf2, o2), (s, d) in zip(outs1, outs2, out_specs):
        ib = buf.view(torch.int16 if d != torch.float32 else torch.int32)
        fill = 0x7fff if d != torch.float32 else 0x7fc00001
        if not (torch.all(ib[:GUARD] == fill) and torch.all(ib[-GUARD:] == fill)):
            ok = False
            msgs.append("WROTE OUTSIDE THE OUTPUT")
        if not torch.equal(o.view(torch.int16 if d != torch.float32 else torch.int32),
                           o2.view(torch.int16 if d != torch.float32 else torch.int32)):
            ok = False
            msgs.append("not deterministic (or elements left unwritten)")
    for a, b in zip(ins, before):
        if not torch.equal(a, b):
            ok = False
            msgs.append("INPUT MODIFIED")
    refs = ref([t.cpu() for t in ins])
    for (buf, o), r, (s, d) in zip(outs1, refs, out_specs):
        good, m = compare(o, r, d)
        ok &= good
        msgs.append(m)
    return ok, "; ".join(msgs)


def bench(k, typ, dt, g):
    dims, attrs = BENCH[typ]
    sets = []
    for _ in range(2):
        ins, out_specs, at, _ = problem(typ, dims, dt, "normal", attrs, g)
        sets.append(([t.cuda() for t in ins], [torch.empty(s, dtype=d, device="cuda")
                                               for s, d in out_specs], at))
    nbytes = sum(t.numel() * t.element_size() for t in sets[0][0]) + \
        sum(t.numel() * t.element_size() for t in sets[0][1])
    for i in range(3):
        k(*sets[i % 2])
    times = []
    for i in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        k(*sets[i % 2])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    t = sorted(times)[len(times) // 2]
    gbs = nbytes / t / 1e9
    return t, gbs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="90a")
    ap.add_argument("--types", default="softmax,layernorm,rmsnorm,reduce,cross_entropy,rotary_embedding")
    ap.add_argument("--no-variants", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a few sizes per type only")
    args = ap.parse_args()
    g = torch.Generator().manual_seed(42)
    tmp = tempfile.mkdtemp(prefix="vbk_cuda_")
    inc = dlpack_includes(tmp)
    failures = 0
    print(f"device: {torch.cuda.get_device_name()}  ({torch.cuda.get_device_properties(0).multi_processor_count} SMs)")
    for typ in args.types.split(","):
        k = Kernel(build(os.path.join(ROOT, "kernels", "cuda", typ + ".cu"), args.arch, tmp, inc))
        for label, dims, attrs, regime in sizes(typ, args.quick):
            for dt in DTYPES:
                if regime == "large_mean" and dt == torch.float32:
                    continue
                for mis in ([False, True] if regime == "normal" and math.prod(dims) < 2e6 else [False]):
                    try:
                        ok, msg = run_case(k, typ, dims, attrs, regime, dt, g, mis)
                    except Exception as e:  # a failing launch is a failed check
                        ok, msg = False, f"error: {e}"
                    failures += not ok
                    name = f"{typ} {label}{' ' + str(attrs) if attrs else ''} {str(dt)[6:]}" + \
                        (" misaligned" if mis else "")
                    print(f"{'ok  ' if ok else 'FAIL'} {name}: {msg}", flush=True)
        for dt in DTYPES:
            t, gbs = bench(k, typ, dt, g)
            print(f"bench {typ} {'x'.join(map(str, BENCH[typ][0]))} {str(dt)[6:]}: {t * 1e6:.1f} us, "
                  f"{gbs:.0f} GB/s = {100 * gbs / COPY_GBS:.0f}% of {COPY_GBS:.0f}", flush=True)
    if not args.no_variants:
        for typ in ("softmax", "rmsnorm"):
            vdir = os.path.join(ROOT, "bench", "variants", "cuda", typ)
            for f in sorted(os.listdir(vdir)):
                if not f.endswith(".cu"):
                    continue
                k = Kernel(build(os.path.join(vdir, f), args.arch, tmp, inc))
                for label, dims, attrs, regime in sizes(typ, True):
                    for dt in DTYPES:
                        ok, msg = run_case(k, typ, dims, attrs, regime, dt, g)
                        failures += not ok
                        if not ok:
                            print(f"FAIL variant {typ}/{f} {label} {str(dt)[6:]}: {msg}", flush=True)
                line = []
                for dt in DTYPES:
                    t, gbs = bench(k, typ, dt, g)
                    line.append(f"{str(dt)[6:]} {t * 1e6:.1f} us {100 * gbs / COPY_GBS:.0f}%")
                print(f"variant {typ}/{f}: " + ", ".join(line), flush=True)
    print(f"{failures} failed check(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
