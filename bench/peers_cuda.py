#!/usr/bin/env python3
"""VladBud's starter kernels next to their peers (issue 15, "Measure"): for each kernel type and
shape, in ONE process and by ONE timing protocol, the same computation as

    vladbud   the kernel library built from kernels/<backend>/<type>.* (or --source TYPE=PATH),
              called through torch.ops.vladbud.<type> after vladbud.kernels.bind()
    eager     PyTorch's own function, as python/vladbud/baseline.py defines it (torch.mm,
              F.scaled_dot_product_attention, F.linear/silu/mul/F.linear, F.rms_norm, ...)
    compile   torch.compile of that same function (static shapes, compiled afresh per shape)
    liger     Liger-Kernel's op where it has one (rmsnorm, layernorm, softmax, cross_entropy,
              rotary_embedding, fused_mlp's SiLU-mul) when liger_kernel imports; else null
    sdpa:*    flash_attention on CUDA only: each SDPA backend forced in turn (flash, efficient,
              cudnn), so the bar "the fastest of SDPA's backends" can be read off

written as <out>/peers-<machine>.md and .json.

    .venv/bin/python bench/peers_cuda.py --device cpu --shapes small        # CPU smoke run
    python3 bench/peers_cuda.py --device cuda --out "$OUT"                  # the GPU (h200_all.sh peers)
    python3 bench/peers_cuda.py --types matmul --shape matmul=4096x4096x4096 --source matmul=v.cu

Building: the library of each type is built by the project's own backend (`vladbud bench
--backend cpu|cuda --no-timing --quick --check-dtypes DTYPE --json`, which also runs the
evaluator's quick correctness stages in that dtype: its verdict is recorded as "evaluator"); the
library is the backend's content-hash cache entry <cache>/build/<backend>/<cache_key>/kernel.so.
The CLI is --vladbud, else $VLADBUD, $VB, build/vladbud, .h200/vladbud.

Correctness: before timing, every variant's output is compared with eager's on the same inputs:
relative Frobenius error <= 32 u(dtype) sqrt(depth) (python/vladbud/verify.py's tolerance; depth
= the reduction length for matmul/fused_mlp/flash_attention, 1 otherwise) and, per row, 4x that
bound against the row's norm; NaN/Inf where eager is finite fails. A wrong variant is
reported ("WRONG", its error) and not timed.

Timing protocol (as triton.testing.do_bench, written out here so CPU and CUDA share it): W
warm-up calls of each variant, then --reps timed calls of each, in 5 interleaved blocks (the
variants' order rotated per block); before every timed call a buffer larger than the last-level
cache (CUDA: max(256 MiB, 2x L2); CPU: max(64 MiB, 2x LLC)) is overwritten; CUDA: events
around the call on the current stream; CPU: perf_counter. Reported: the median, microseconds.
The copy bandwidth is measured in the same run: `dst.copy_(src)` of --copy-bytes (default
1 GiB), bytes read + written / median time.

Columns: latency_us (vladbud), baseline (the eager op, named; flash_attention: SDPA with the
backend torch picks), baseline_us, speedup (baseline_us / latency_us), compile_us, liger_us,
speedup_vs_best_peer (over the fastest correct peer: baseline, compile, Liger and, for
flash_attention, each SDPA backend), pct_copy_bw (memory-bound: minimal bytes moved / latency
against the copy bandwidth; also decode matmul/fused_mlp with M <= 16), tflops (matmul 2MNK,
fused_mlp 6BDH, flash_attention 4BHS^2D, halved when causal), verdict against issue 15's bar:
PASS or BELOW BAR; WRONG, ERROR (the kernel raised), BUILD FAILED, NOT RUN (the evaluator saw
the kernel crash or hang in its sandbox, so it is not called in this process).

Exit codes: 0 done; 1 some VladBud kernel was wrong, failed or did not build; 2 bad usage
(unknown type, bad shape, missing source, no CUDA for --device cuda). Progress on stderr.
"""
import argparse
import concurrent.futures
import datetime as _dt
import json
import math
import os
import platform
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the CLI's bridge: no spinning OpenMP

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

TYPES = ("matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp",
         "cross_entropy", "rotary_embedding", "reduce")
MEMORY_BOUND = ("softmax", "layernorm", "rmsnorm", "cross_entropy", "rotary_embedding", "reduce")
# Dimension names per type, in the order of the positional form "AxBxC".
DIMS = {"matmul": ("M", "N", "K"), "softmax": ("R", "C"), "layernorm": ("B", "D"),
        "rmsnorm": ("M", "N"), "flash_attention": ("B", "H", "S", "D"), "fused_mlp": ("B", "D", "H"),
        "cross_entropy": ("B", "V"), "rotary_embedding": ("B", "H", "S", "D"), "reduce": ("M", "N")}
LIGER_TYPES = ("rmsnorm", "layernorm", "softmax", "cross_entropy", "rotary_embedding", "fused_mlp")
# Default order: the memory-bound types first (issue 15's table), matmul's twelve shapes last,
# so that a run stopped by --deadline keeps the most rows.
DEFAULT_ORDER = ("rmsnorm", "layernorm", "softmax", "reduce", "cross_entropy", "rotary_embedding",
                 "flash_attention", "fused_mlp", "matmul")
COMPACT = ("flash_attention", "fused_mlp", "rotary_embedding")  # labelled b2h16s4096d128 style

_LLAMA7B_NK = ((4096, 4096), (11008, 4096), (4096, 11008))  # q/k/v/o, gate/up, down (N, K)
SHAPES = {
    "bench": {
        "rmsnorm": ["8192x8192"], "layernorm": ["8192x8192"], "softmax": ["8192x8192"],
        "reduce": ["8192x8192"], "cross_entropy": ["512x128256"],
        "rotary_embedding": ["b4h32s2048d128"],
        "matmul": ["4096x4096x4096"] + [f"{m}x{n}x{k}" for m in (1, 16, 128) for n, k in _LLAMA7B_NK]
                  + ["2048x2048x2048", "2048x32000x2048"],
        "fused_mlp": ["b2048d4096h11008", "b2048d2048h5632"],
        "flash_attention": ["b2h16s4096d128 causal", "b1h32kv4s2048d64 causal"],
    },
    "small": {
        "rmsnorm": ["64x256"], "layernorm": ["64x256"], "softmax": ["64x256"], "reduce": ["64x256"],
        "cross_entropy": ["16x1000"], "rotary_embedding": ["b1h2s16d32"],
        "matmul": ["64x96x80"], "fused_mlp": ["b16d64h96"],
        "flash_attention": ["b1h2s32d16 causal", "b1h4kv2s32d16 causal"],
    },
}
DEFAULT_ATTRS = {"layernorm": {"eps": 1e-5}, "rmsnorm": {"eps": 1e-6},
                 "cross_entropy": {"ignore_index": -100.0}, "rotary_embedding": {"interleaved": 0.0}}
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
BAR = {"matmul": ">= 1.0x torch.mm at 4096^3, >= 0.95x at the other shapes",
       "flash_attention": ">= 1.0x the fastest SDPA backend (and torch.compile)",
       "fused_mlp": ">= 1.2x eager and >= 1.0x torch.compile"}
MEM_BAR = ">= 1.0x the fastest of eager, torch.compile and Liger"
ROW_KEYS = ("kernel", "shape", "dtype", "latency_us", "baseline", "baseline_us", "speedup",
            "compile_us", "liger_us", "speedup_vs_best_peer", "pct_copy_bw", "tflops", "verdict",
            "commit", "date")


class UsageError(Exception):
    """Bad command line: printed as `peers_cuda: error: ...`, exit 2."""


def say(msg):
    print(f"peers: {msg}", file=sys.stderr, flush=True)


# ---- shapes --------------------------------------------------------------------------------------

def parse_shape(kernel, text):
    """Shape text -> (dims dict, attrs dict). Forms: positional "8192x8192" / "MxNxK" (matmul) /
    "BxDxH" (fused_mlp) / "BxHxSxD"; named "b2h16s4096d128", "B=2048,D=4096,H=11008"; flash_attention
    also takes "kv4" (H_kv, default H) and a trailing "causal" (default) or "noncausal". Raises
    UsageError naming the expected form."""
    names = DIMS[kernel]
    form = "x".join(names) + (" or " + "".join(f"{n.lower()}N" for n in names) if kernel in COMPACT else "")
    if kernel == "flash_attention":
        form += " (optionally kvN for H_kv, and 'causal' or 'noncausal')"
    bad = UsageError(f"bad shape '{text}' for {kernel}: expected {form}, e.g. "
                     f"'{SHAPES['bench'][kernel][0]}'")
    s = text.strip().lower()
    attrs = dict(DEFAULT_ATTRS.get(kernel, {}))
    causal = None
    m = re.fullmatch(r"(.*?)[\s,_-]*(noncausal|causal)", s)
    if m and kernel == "flash_attention":
        s, causal = m.group(1), m.group(2) == "causal"
    if re.fullmatch(r"\d+(x\d+)*", s):
        vals = [int(v) for v in s.split("x")]
        if len(vals) != len(names):
            raise bad
        dims = dict(zip(names, vals))
    elif re.fullmatch(r"([a-z]+\s*=?\s*\d+[\s,]*)+", s):
        dims = {}
        for name, val in re.findall(r"([a-z]+)\s*=?\s*(\d+)", s):
            key = {"kv": "HKV", "hkv": "HKV", "h_kv": "HKV"}.get(name, name.upper())
            if key not in names and not (kernel == "flash_attention" and key == "HKV"):
                raise bad
            if key in dims:
                raise bad
            dims[key] = int(val)
        if set(names) - set(dims):
            raise bad
    else:
        raise bad
    if any(v <= 0 for v in dims.values()):
        raise UsageError(f"bad shape '{text}' for {kernel}: every dimension must be positive")
    if kernel == "flash_attention":
        dims.setdefault("HKV", dims["H"])
        if dims["H"] % dims["HKV"]:
            raise UsageError(f"bad shape '{text}': H ({dims['H']}) must be a multiple of H_kv ({dims['HKV']})")
        attrs["causal"] = 1.0 if causal in (None, True) else 0.0
        attrs["sm_scale"] = 1.0 / math.sqrt(dims["D"])
    if kernel == "rotary_embedding" and dims["D"] % 2:
        raise UsageError(f"bad shape '{text}': rotary_embedding needs an even D")
    return dims, attrs


def shape_label(kernel, dims, attrs):
    """The canonical text of a shape (parse_shape reads it back)."""
    if kernel in COMPACT:
        parts = []
        for n in DIMS[kernel]:
            parts.append(f"{n.lower()}{dims[n]}")
            if n == "H" and kernel == "flash_attention" and dims["HKV"] != dims["H"]:
                parts.append(f"kv{dims['HKV']}")
        lab = "".join(parts)
        if kernel == "flash_attention":
            lab += " causal" if attrs["causal"] else " noncausal"
        return lab
    return "x".join(str(dims[n]) for n in DIMS[kernel])


# ---- the variants --------------------------------------------------------------------------------

def op_args(kernel, attrs):
    """The float attributes of torch.ops.vladbud.<kernel>, in the ABI order."""
    return {"layernorm": [attrs.get("eps")], "rmsnorm": [attrs.get("eps")],
            "flash_attention": [attrs.get("causal"), attrs.get("sm_scale")],
            "cross_entropy": [attrs.get("ignore_index")],
            "rotary_embedding": [attrs.get("interleaved")]}.get(kernel, [])


def liger_variant(kernel, inputs, attrs, torch, F):
    """(description, fn() -> output comparable with eager's, note) of Liger-Kernel's op for
    `kernel`, or (None, None, why). Liger's cross_entropy and rope write their inputs in place,
    so they get their own copies (the check is their first call)."""
    if kernel not in LIGER_TYPES:
        return None, None, None
    try:
        import liger_kernel  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return None, None, f"liger_kernel not importable ({type(e).__name__})"
    try:
        if kernel == "rmsnorm":
            from liger_kernel.transformers.functional import liger_rms_norm
            x, w = inputs
            return "liger_rms_norm", lambda: liger_rms_norm(x, w, attrs["eps"]), None
        if kernel == "layernorm":
            from liger_kernel.transformers.functional import liger_layer_norm
            x, w, b = inputs
            return "liger_layer_norm", lambda: liger_layer_norm(x, w, b, attrs["eps"]), None
        if kernel == "softmax":
            try:
                from liger_kernel.transformers.functional import liger_softmax
            except ImportError:
                from liger_kernel.ops.softmax import LigerSoftmaxFunction
                liger_softmax = LigerSoftmaxFunction.apply
            x = inputs[0]
            return "liger_softmax", lambda: liger_softmax(x), None
        if kernel == "cross_entropy":
            from liger_kernel.transformers.functional import liger_cross_entropy
            logits, tgt = inputs[0].clone(), inputs[1]
            ii = int(attrs["ignore_index"])
            return ("liger_cross_entropy", lambda: liger_cross_entropy(logits, tgt, ignore_index=ii),
                    "timed on its own copy of the logits (older Liger versions write the gradient into them)")
        if kernel == "rotary_embedding":
            from liger_kernel.transformers.functional import liger_rope
            x, c, s = inputs
            # HF's layout, as Liger is used in a model: q, k stored [B,S,H,D], passed as [B,H,S,D]
            # views (Liger transposes back and rotates the storage in place; a contiguous
            # [B,H,S,D] q would cost it a transposing copy per call).
            q = x.transpose(1, 2).contiguous().transpose(1, 2)
            k = x[:, :1].transpose(1, 2).contiguous().transpose(1, 2)
            cos = torch.cat((c, c), -1)[None]
            sin = torch.cat((s, s), -1)[None]
            return ("liger_rope (q and a 1-head k)", lambda: liger_rope(q, k, cos, sin)[0],
                    "q and a 1-head k in HF's [B,S,H,D] storage, rotated in place on its own copies")
        if kernel == "fused_mlp":
            from liger_kernel.transformers.functional import liger_swiglu
            x, wg, wu, wd = inputs
            return ("F.linear + liger_swiglu + F.linear",
                    lambda: F.linear(liger_swiglu(F.linear(x, wg), F.linear(x, wu)), wd), None)
    except Exception as e:  # noqa: BLE001
        return None, None, f"Liger op not found ({type(e).__name__}: {e})"
    return None, None, None


def sdpa_backend_name(torch, q, k, v, attrs):
    """The SDPA backend torch picks for these inputs (torch._fused_sdp_choice), or None."""
    try:
        from torch.nn.attention import SDPBackend
        i = torch._fused_sdp_choice(q, k, v, None, 0.0, bool(attrs["causal"]), scale=attrs["sm_scale"],
                                    enable_gqa=k.shape[1] != q.shape[1])
        return SDPBackend(int(i)).name.lower()
    except Exception:  # noqa: BLE001
        return None


# ---- checking and timing -------------------------------------------------------------------------

def depth_of(kernel, dims):
    return {"matmul": dims.get("K", 1), "fused_mlp": max(dims.get("D", 1), dims.get("H", 1)),
            "flash_attention": dims.get("S", 1)}.get(kernel, 1)


def check(torch, out, ref, tol):
    """(ok, relative error, why): out against eager's ref (fp64): global relative Frobenius
    error, per-row errors against each row's norm, NaN/Inf where ref is finite."""
    if isinstance(out, (tuple, list)):
        out = out[0]
    if tuple(out.shape) != tuple(ref.shape):
        return False, None, f"shape {tuple(out.shape)} != eager's {tuple(ref.shape)}"
    y, r = out.detach().double(), ref.detach().double().to(out.device)  # on the device: no host copies
    if bool((~torch.isfinite(y) & torch.isfinite(r)).any()):
        return False, None, "NaN/Inf where eager is finite"
    fin = torch.isfinite(y) & torch.isfinite(r)
    d = torch.where(fin, y - r, torch.zeros_like(y))
    rz = torch.where(fin, r, torch.zeros_like(r))
    den = float(torch.linalg.vector_norm(rz))
    err = float(torch.linalg.vector_norm(d)) / den if den > 0 else float(torch.linalg.vector_norm(d))
    if not err <= tol:
        return False, err, f"relative error {err:.3g} > {tol:.3g}"
    if y.dim() >= 2:
        rows_d = torch.linalg.vector_norm(d.reshape(-1, y.shape[-1]), dim=1)
        rows_r = torch.linalg.vector_norm(rz.reshape(-1, y.shape[-1]), dim=1)
        floor = 1e-3 * den / math.sqrt(rows_r.numel())
        worst = float((rows_d / rows_r.clamp_min(max(floor, 1e-30))).max())
        if not worst <= 4 * tol:
            return False, err, f"a row's relative error {worst:.3g} > {4 * tol:.3g}"
    return True, err, None


class Timer:
    """One protocol for every variant: warm-up, cache flush before each call, median."""

    def __init__(self, torch, device, reps, warmup, blocks=5):
        self.torch, self.device, self.reps, self.warmup, self.blocks = torch, device, reps, warmup, blocks
        if device == "cuda":
            l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
            nbytes = max(256 << 20, 2 * l2)
        else:
            nbytes = max(64 << 20, 2 * llc_bytes())
        self.flush_bytes = nbytes
        self.flush = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _calls(self, fn, n, flush=True):
        torch = self.torch
        if self.device == "cuda":
            ev = []
            for _ in range(n):
                if flush:
                    self.flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                ev.append((s, e))
            torch.cuda.synchronize()
            return [s.elapsed_time(e) * 1e3 for s, e in ev]
        out = []
        for _ in range(n):
            if flush:
                self.flush.zero_()
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e6)
        return out

    def run(self, fns, flush=True):
        """{name: median microseconds} of the callables in `fns` ({name: fn()})."""
        names = list(fns)
        for n in names:
            for _ in range(self.warmup):
                fns[n]()
        self.sync()
        times = {n: [] for n in names}
        per = max(1, math.ceil(self.reps / self.blocks))
        for b in range(self.blocks):
            order = names[b % len(names):] + names[:b % len(names)] if names else []
            for n in order:
                k = min(per, self.reps - len(times[n]))
                if k > 0:
                    times[n] += self._calls(fns[n], k, flush)
        return {n: statistics.median(v) for n, v in times.items() if v}


def llc_bytes():
    """This CPU's last-level cache in bytes (sysfs), 32 MiB when unknown."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size")) as f:
                    s = f.read().strip().upper()
                mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
                best = max(best, int(s.rstrip("KMG")) * mult)
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return best or (32 << 20)


def copy_bandwidth(torch, timer, nbytes):
    """GB/s of dst.copy_(src) over nbytes (read + write bytes / median time)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=timer.device)
    src.fill_(1)
    dst = torch.empty_like(src)
    saved = (timer.reps, timer.warmup)
    timer.reps, timer.warmup = max(5, min(timer.reps, 30)), 2
    try:
        us = timer.run({"copy": lambda: dst.copy_(src)}, flush=False)["copy"]
    finally:
        timer.reps, timer.warmup = saved
    del src, dst
    return 2.0 * nbytes / (us * 1e-6) / 1e9, us


# ---- building the VladBud libraries --------------------------------------------------------------

def cache_dir():
    """The vladbud cache folder, as src/core/paths.cpp cache_dir() resolves it."""
    if os.environ.get("VB_CACHE_DIR"):
        return os.environ["VB_CACHE_DIR"]
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "vladbud")
    if os.environ.get("HOME"):
        return os.path.join(os.environ["HOME"], ".cache", "vladbud")
    return os.path.join(tempfile.gettempdir(), "vladbud-cache")


def vladbud_binary(explicit=None):
    for c in (explicit, os.environ.get("VLADBUD"), os.environ.get("VB"),
              os.path.join(ROOT, "build", "vladbud"), os.path.join(ROOT, ".h200", "vladbud")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def build_library(vb, kernel, source, backend, dtype, scratch, timeout):
    """Builds `source` with the backend (through `vladbud bench --no-timing --quick`) and returns
    {"library": path or None, "evaluator": verdict text, "error": why the build failed or None,
    "seconds"}."""
    t0 = time.time()
    cmd = [vb, "bench", "--backend", backend, "--kernel", kernel, "--source", source,
           "--no-timing", "--quick", "--dtype", dtype, "--check-dtypes", dtype, "--json",
           "--no-pytorch", "--no-in-use", "--results", os.path.join(scratch, f"results-{kernel}.tsv")]
    env = dict(os.environ)
    env.setdefault("VLADBUD_HOME", ROOT)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=scratch)
    except subprocess.TimeoutExpired:
        return {"library": None, "evaluator": None, "seconds": time.time() - t0,
                "error": f"`vladbud bench` did not finish in {timeout} s"}
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"library": None, "evaluator": None, "seconds": time.time() - t0,
                "error": f"`vladbud bench` exit {p.returncode}: " + " | ".join(tail)}
    b = doc.get("build") or {}
    verdict = doc.get("verdict")
    reason = doc.get("reason") or doc.get("failed_stage")
    evaluator = f"{verdict}" + (f" ({reason})" if reason and verdict != "PASS" else "")
    if not b.get("ok") or not b.get("cache_key"):
        diag = (b.get("diagnostics") or doc.get("reason") or "build failed").strip().splitlines()
        return {"library": None, "evaluator": evaluator, "seconds": time.time() - t0,
                "error": "build failed: " + " | ".join(diag[:3])}
    lib = b.get("library") or os.path.join(cache_dir(), "build", doc.get("backend") or backend,
                                           b["cache_key"], "kernel.so")
    if not os.path.isfile(lib):
        m = re.search(r"-o (\S+)/kernel\.so", b.get("command") or "")
        if m and os.path.isfile(os.path.join(m.group(1), "kernel.so")):
            lib = os.path.join(m.group(1), "kernel.so")
        else:
            return {"library": None, "evaluator": evaluator, "seconds": time.time() - t0,
                    "error": f"built, but the library is not at {lib}"}
    return {"library": lib, "evaluator": evaluator, "error": None, "seconds": time.time() - t0}


# ---- report --------------------------------------------------------------------------------------

def commit_id():
    try:
        h = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, timeout=10)
        if h.returncode == 0 and h.stdout.strip():
            d = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
            return h.stdout.strip() + ("-dirty" if d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open(os.path.join(ROOT, ".h200", "GIT_COMMIT")) as f:
            lines = f.read().split("\n")
        return lines[0].strip()[:7] + ("-dirty" if any(x.strip() for x in lines[1:]) else "") + " (.h200)"
    except OSError:
        return "unknown"


def fmt(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def write_report(out_dir, machine, header, rows):
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"peers-{machine}")
    with open(base + ".json.tmp", "w") as f:
        json.dump({"header": header, "rows": rows}, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")
    h = header
    lines = [f"# VladBud kernels and their peers on {h['gpu'] or h['cpu']} ({machine})", "",
             f"- date: {h['date']}", f"- machine: {h['machine']} ({h['host']})",
             f"- device: {h['device']}: {h['gpu'] or h['cpu']}", f"- commit: {h['commit']}",
             f"- torch {h['torch']}, triton {h['triton'] or '-'}, liger_kernel {h['liger_kernel'] or '-'}",
             f"- command: `{h['command']}`",
             f"- copy bandwidth: **{fmt(h['copy_gb_s'])} GB/s** (`dst.copy_(src)` of "
             f"{h['copy_bytes'] / 2**30:.2f} GiB, read + write bytes / median of the same protocol)",
             f"- protocol: {h['protocol']}", ""]
    if h.get("stopped"):
        lines += [f"**Stopped early:** {h['stopped']}", ""]
    lines += ["| kernel | shape | dtype | VladBud us | baseline | baseline us | speedup | compile us "
              "| Liger us | vs best peer | % copy BW | TFLOP/s | verdict |",
              "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['shape']} | {r['dtype']} | {fmt(r['latency_us'])} | {r['baseline']} "
            f"| {fmt(r['baseline_us'])} | {fmt(r['speedup'], 3)} | {fmt(r['compile_us'])} "
            f"| {fmt(r['liger_us'])} | {fmt(r['speedup_vs_best_peer'], 3)} | {fmt(r['pct_copy_bw'])} "
            f"| {fmt(r['tflops'], 2)} | {r['verdict']} |")
    notes = []
    for r in rows:
        bits = []
        for name, c in r.get("checks", {}).items():
            if not c.get("ok"):
                bits.append(f"{name}: {c.get('why')}")
        if r.get("sdpa_backends_us"):
            bits.append("SDPA backends forced: " + ", ".join(
                f"{k} {fmt(v)} us" if isinstance(v, float) else f"{k} {v}" for k, v in r["sdpa_backends_us"].items()))
        if r.get("liger_note") and "not importable" not in r["liger_note"]:
            bits.append(f"Liger: {r['liger_note']}")
        if r.get("evaluator") and not str(r["evaluator"]).startswith("PASS"):
            bits.append(f"evaluator ({h['dtype']} quick stages): {r['evaluator']}")
        if bits:
            notes.append(f"- {r['kernel']} {r['shape']}: " + "; ".join(bits))
    lines += ["", "Bars (issue 15): memory-bound types " + MEM_BAR + "; "
              + "; ".join(f"{k} {v}" for k, v in BAR.items()) + ". "
              "speedup = baseline / VladBud; vs best peer = the fastest correct peer / VladBud.", ""]
    if h.get("sources"):
        lines += ["Sources: " + ", ".join(f"{k} `{v}`" for k, v in h["sources"].items()), ""]
    if notes:
        lines += ["Notes:", ""] + notes + [""]
    with open(base + ".md.tmp", "w") as f:
        f.write("\n".join(lines))
    os.replace(base + ".md.tmp", base + ".md")
    return base + ".md", base + ".json"


# ---- main ----------------------------------------------------------------------------------------

def parse_args(argv):
    presets = "\n".join(f"  {p}: " + "; ".join(f"{t} {', '.join(v)}" for t, v in s.items())
                        for p, s in SHAPES.items())
    ap = argparse.ArgumentParser(
        prog="peers_cuda.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="VladBud's kernels side by side with eager PyTorch, torch.compile and Liger-Kernel "
                    "(issue 15), one process, one timing protocol; writes peers-<machine>.md/.json.",
        epilog="Shape forms: matmul MxNxK (C[M,N] = A[M,K] B[K,N]); fused_mlp BxDxH or b2048d4096h11008; "
               "flash_attention b2h16s4096d128 [kvN] [causal|noncausal]; rotary_embedding b4h32s2048d128; "
               "the others RxC; or NAME=N pairs (M=1,N=4096,K=4096).\nShape presets (--shapes):\n" + presets
               + "\n\nCorrectness: " + __doc__.split("Correctness:")[1].strip())
    ap.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when torch sees a GPU, else cpu")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--types", help="comma-separated subset of: " + ", ".join(TYPES))
    ap.add_argument("--shapes", default="bench", help="preset: bench (issue 15's sizes, default) or small")
    ap.add_argument("--shape", action="append", default=[], metavar="TYPE=SHAPE",
                    help="replace the preset's shapes of TYPE (repeatable; e.g. matmul=4096x4096x4096, "
                         "flash_attention=b1h32kv4s2048d64causal)")
    ap.add_argument("--source", action="append", default=[], metavar="TYPE=PATH",
                    help="measure this kernel source instead of the starter kernels/<backend>/<type>")
    ap.add_argument("--reps", type=int, help="timed calls per variant (default: cuda 100, cpu 10)")
    ap.add_argument("--warmup", type=int, help="warm-up calls per variant (default: cuda 10, cpu 2)")
    ap.add_argument("--copy-bytes", default="1G", help="size of the copy-bandwidth probe (default 1G; K/M/G)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"), help="output folder")
    ap.add_argument("--machine", help="name in the file names (default: the GPU's name, e.g. h200; cpu)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-liger", action="store_true", help="skip Liger-Kernel")
    ap.add_argument("--deadline", type=float, help="seconds: start no new shape after this (the report "
                    "says which were left out)")
    ap.add_argument("--build-timeout", type=float, default=300.0, help="seconds per `vladbud bench` build+check")
    ap.add_argument("--vladbud", help="the vladbud CLI (default $VLADBUD, $VB, build/vladbud, .h200/vladbud)")
    return ap.parse_args(argv)


def resolve(args):
    """Validates the arguments (args.device already decided); returns (types, shapes {type:
    [(label, dims, attrs)]}, sources {type: path}). Raises UsageError."""
    if args.types:
        types = [t.strip() for t in args.types.split(",") if t.strip()]
        unknown = [t for t in types if t not in TYPES]
        if unknown or not types:
            raise UsageError(f"unknown kernel type(s) {', '.join(unknown) or '(none given)'} in --types; "
                             f"known: {', '.join(TYPES)}")
    else:
        types = list(DEFAULT_ORDER)
    if args.shapes not in SHAPES:
        raise UsageError(f"unknown --shapes preset '{args.shapes}'; known: {', '.join(SHAPES)}")
    texts = {t: list(SHAPES[args.shapes][t]) for t in types}
    given = {}
    for s in args.shape:
        if "=" not in s:
            raise UsageError(f"--shape takes TYPE=SHAPE (got '{s}')")
        t, spec = s.split("=", 1)
        t = t.strip()
        if t not in TYPES:
            raise UsageError(f"unknown kernel type '{t}' in --shape; known: {', '.join(TYPES)}")
        given.setdefault(t, []).append(spec)
    for t, v in given.items():
        if t in texts:
            texts[t] = v
    shapes = {}
    for t in types:
        shapes[t] = []
        for spec in texts[t]:
            dims, attrs = parse_shape(t, spec)
            shapes[t].append((shape_label(t, dims, attrs), dims, attrs))
    ext = ".cu" if args.device == "cuda" else ".cpp"
    sources = {t: os.path.join(ROOT, "kernels", args.device or "cpu", t + ext) for t in types}
    for s in args.source:
        if "=" not in s:
            raise UsageError(f"--source takes TYPE=PATH (got '{s}')")
        t, path = s.split("=", 1)
        if t not in TYPES:
            raise UsageError(f"unknown kernel type '{t}' in --source; known: {', '.join(TYPES)}")
        if t in sources:
            sources[t] = os.path.abspath(path)
    for t, p in sources.items():
        if not os.path.isfile(p):
            raise UsageError(f"kernel source for {t} not found: {p}")
    if args.reps is not None and args.reps < 1:
        raise UsageError("--reps must be >= 1")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)I?B?", args.copy_bytes.strip().upper())
    if not m:
        raise UsageError(f"bad --copy-bytes '{args.copy_bytes}' (e.g. 1G, 256M)")
    args.copy_nbytes = int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])
    return types, shapes, sources


def machine_name(torch, device):
    if device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name(0).lower().replace("nvidia", "").strip()
    m = re.search(r"\b([a-z]\d{2,4}[a-z]?)\b", name)
    return m.group(1) if m else re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "cuda"


def measure_shape(torch, F, baseline, timer, kernel, label, dims, attrs, dtype_name, dt, device, build,
                  args, copy_gb_s, stamp):
    """One row: builds inputs, checks every variant against eager, times the correct ones."""
    lib = build["library"] if not build.get("not_run") else None
    g = torch.Generator().manual_seed(42)
    inputs = baseline._inputs(kernel, dims, attrs, dt, device, g)
    eager_desc, eager_call = baseline.pytorch_call(kernel, attrs)
    with torch.no_grad():
        ref = eager_call(inputs)
    if kernel == "flash_attention":
        be = sdpa_backend_name(torch, inputs[0], inputs[1], inputs[2], attrs)
        eager_desc = f"SDPA ({be or 'backend unknown'})"
    fns, checks, notes = {}, {}, {}
    extra = list(op_args(kernel, attrs))
    op = getattr(torch.ops.vladbud, kernel)
    fns["vladbud"] = lambda: op(*inputs, *extra)
    fns["eager"] = lambda: eager_call(inputs)
    if not args.no_compile:
        torch._dynamo.reset()
        compiled = torch.compile(lambda *ts: eager_call(list(ts)), dynamic=False)
        fns["compile"] = lambda: compiled(*inputs)
    liger_desc = None
    if not args.no_liger:
        liger_desc, lf, why = liger_variant(kernel, inputs, attrs, torch, F)
        if lf is not None:
            fns["liger"] = lf
        notes["liger"] = why
    if kernel == "flash_attention" and device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for name, b in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                        ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            def forced(b=b):
                with sdpa_kernel([b]):
                    return eager_call(inputs)
            fns[f"sdpa:{name}"] = forced
    tol = 32.0 * UNIT_ROUNDOFF[dtype_name] * math.sqrt(depth_of(kernel, dims))
    ok_fns = {}
    with torch.no_grad():
        for name, fn in fns.items():
            if name == "vladbud" and lib is None:
                checks[name] = {"ok": False, "why": build.get("not_run") or build.get("error") or "not built"}
                continue
            try:
                out = fn()  # Liger's in-place ops: the first call, on their own copies
                timer.sync()
            except Exception as e:  # noqa: BLE001 - a failing variant is reported, not fatal
                msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
                checks[name] = {"ok": False, "why": f"raised {type(e).__name__}: {msg}", "error": True}
                continue
            ok, err, why = check(torch, out, ref, tol)
            checks[name] = {"ok": ok, "rel_error": err, "why": why}
            if ok:
                ok_fns[name] = fn
        times = timer.run(ok_fns) if ok_fns else {}
    lat, base = times.get("vladbud"), times.get("eager")
    comp, lig = times.get("compile"), times.get("liger")
    peers = [v for k, v in times.items() if k != "vladbud"]
    best = min(peers) if peers else None
    nbytes = sum(t.numel() * t.element_size() for t in inputs) + ref.numel() * (
        4 if kernel == "cross_entropy" else ref.element_size())
    flops = {"matmul": 2.0 * dims.get("M", 0) * dims.get("N", 0) * dims.get("K", 0),
             "fused_mlp": 6.0 * dims.get("B", 0) * dims.get("D", 0) * dims.get("H", 0),
             "flash_attention": 4.0 * dims.get("B", 0) * dims.get("H", 0) * dims.get("S", 0) ** 2
             * dims.get("D", 0) * (0.5 if attrs.get("causal") else 1.0)}.get(kernel)
    memory = kernel in MEMORY_BOUND or (kernel == "matmul" and dims["M"] <= 16) or (
        kernel == "fused_mlp" and dims["B"] <= 16)
    row = {"kernel": kernel, "shape": label, "dtype": dtype_name, "latency_us": lat,
           "baseline": eager_desc, "baseline_us": base,
           "speedup": base / lat if lat and base else None,
           "compile_us": comp, "liger_us": lig,
           "speedup_vs_best_peer": best / lat if lat and best else None,
           "pct_copy_bw": (100.0 * nbytes / (lat * 1e-6) / 1e9 / copy_gb_s) if lat and memory and copy_gb_s else None,
           "tflops": flops / (lat * 1e-6) / 1e12 if lat and flops else None,
           "verdict": None, "commit": stamp["commit"], "date": stamp["date"],
           "bytes": nbytes, "flops": flops, "checks": checks, "liger": liger_desc,
           "liger_note": notes.get("liger"), "peer_us": {k: v for k, v in times.items() if k != "vladbud"}}
    if kernel == "flash_attention" and device == "cuda":
        row["sdpa_backends_us"] = {k.split(":")[1]: times.get(k) if k in times else
                                   ("unsupported" if checks.get(k, {}).get("error") else "wrong")
                                   for k in fns if k.startswith("sdpa:")}
    c = checks.get("vladbud", {})
    if build.get("not_run"):
        row["verdict"] = "NOT RUN"
    elif lib is None:
        row["verdict"] = "BUILD FAILED"
    elif c.get("error"):
        row["verdict"] = "ERROR"
    elif not c.get("ok"):
        row["verdict"] = "WRONG"
    elif lat is None:
        row["verdict"] = "NOT TIMED"
    else:
        if kernel == "matmul":
            need = 1.0 if (dims["M"], dims["N"], dims["K"]) == (4096, 4096, 4096) else 0.95
            good = row["speedup"] is not None and row["speedup"] >= need
        elif kernel == "fused_mlp":
            good = (row["speedup"] or 0) >= 1.2 and (comp is None or comp / lat >= 1.0)
        else:
            good = row["speedup_vs_best_peer"] is not None and row["speedup_vs_best_peer"] >= 1.0
        row["verdict"] = "PASS" if good else "BELOW BAR"
    row["bar"] = BAR.get(kernel, MEM_BAR)
    del inputs, ref, fns, ok_fns
    return row


def main(argv):
    t_start = time.time()
    args = parse_args(argv)
    resolve(args)  # usage errors before torch is imported (fast)
    import torch
    import torch.nn.functional as F
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    types, shapes, sources = resolve(args)
    vb = vladbud_binary(args.vladbud)
    if vb is None:
        raise UsageError("no vladbud CLI found (--vladbud, $VLADBUD, build/vladbud, .h200/vladbud): "
                         "build it with `cmake --build build -j2`")
    device, dtype_name = args.device, args.dtype
    backend = "cuda" if device == "cuda" else "cpu"
    reps = args.reps or (100 if device == "cuda" else 10)
    warmup = args.warmup if args.warmup is not None else (10 if device == "cuda" else 2)
    scratch = tempfile.mkdtemp(prefix="vb-peers-")

    # 1. Build every library (in parallel; the evaluator's quick check runs with each build).
    say(f"building {len(types)} {backend} kernel(s) with {vb} bench ...")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(types), os.cpu_count() or 1)))
    futs = {t: pool.submit(build_library, vb, t, sources[t], backend, dtype_name, scratch,
                           args.build_timeout) for t in types}
    from vladbud import baseline
    from vladbud.loader import torch_dtype
    try:
        from vladbud import kernels as vk  # builds (once) and loads the torch ops extension
    except Exception as e:  # noqa: BLE001
        say(f"error: the torch ops extension (python/vladbud/ext.py) could not be loaded: {e}")
        pool.shutdown(cancel_futures=True)
        return 1
    builds = {}
    for t in types:
        builds[t] = futs[t].result()
        b = builds[t]
        say(f"{t}: " + (f"built in {b['seconds']:.1f} s, evaluator {b['evaluator']}" if b["library"]
                        else f"NOT BUILT: {b['error']}"))
        verdict = (b["evaluator"] or "").split(" ")[0]
        if b["library"] and verdict in ("CRASH", "TIMEOUT"):
            b["not_run"] = f"the evaluator's sandbox saw {b['evaluator']}: not called in this process"
            say(f"{t}: {b['not_run']}")
        elif b["library"]:
            vk.bind(t, b["library"], device)
    pool.shutdown()

    # 2. The copy bandwidth, then every (type, shape).
    dt = torch_dtype(dtype_name)
    timer = Timer(torch, device, reps, warmup)
    copy_gb_s, copy_us = copy_bandwidth(torch, timer, args.copy_nbytes)
    say(f"copy bandwidth {copy_gb_s:.1f} GB/s ({args.copy_nbytes / 2**30:.2f} GiB copy_ in {copy_us:.1f} us)")
    try:
        import triton
        triton_v = triton.__version__
    except Exception:  # noqa: BLE001
        triton_v = None
    try:
        import liger_kernel  # noqa: F401
        import importlib.metadata as md
        liger_v = md.version("liger-kernel")
    except Exception as e:  # noqa: BLE001 - reported, the column is then null
        liger_v = f"not importable ({type(e).__name__}: {str(e)[:120]})"
    if args.no_liger:
        liger_v = "skipped (--no-liger)"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    machine = args.machine or machine_name(torch, device)
    stamp = {"commit": commit_id(), "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    header = {"machine": machine, "host": socket.gethostname(), "device": device,
              "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None, "cpu": cpu,
              "torch": torch.__version__, "triton": triton_v, "liger_kernel": liger_v,
              "dtype": dtype_name, "command": "python bench/peers_cuda.py " + shlex.join(argv),
              "copy_gb_s": copy_gb_s, "copy_bytes": args.copy_nbytes, "copy_us": copy_us,
              "commit": stamp["commit"], "date": stamp["date"],
              "protocol": f"{warmup} warm-up + {reps} timed calls per variant in 5 interleaved blocks, "
                          f"{timer.flush_bytes >> 20} MiB cache flush before each call, "
                          f"{'CUDA events' if device == 'cuda' else 'perf_counter'}, median",
              "sources": {t: os.path.relpath(p, ROOT) if p.startswith(ROOT) else p for t, p in sources.items()},
              "evaluator": {t: builds[t]["evaluator"] for t in types},
              "threads": torch.get_num_threads()}
    rows, left = [], []
    for t in types:
        for label, dims, attrs in shapes[t]:
            if args.deadline and time.time() - t_start > args.deadline:
                left.append(f"{t} {label}")
                continue
            t0 = time.time()
            try:
                row = measure_shape(torch, F, baseline, timer, t, label, dims, attrs, dtype_name, dt, device,
                                    builds[t], args, copy_gb_s, stamp)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory making the inputs: a row, not the end
                msg = (str(e).strip().splitlines() or [""])[0][:300]
                row = {k: None for k in ROW_KEYS}
                row.update(kernel=t, shape=label, dtype=dtype_name, verdict="ERROR", commit=stamp["commit"],
                           date=stamp["date"], baseline="-",
                           checks={"shape": {"ok": False, "why": f"{type(e).__name__}: {msg}"}})
            row["evaluator"] = builds[t]["evaluator"]
            rows.append(row)
            if device == "cuda":
                torch.cuda.empty_cache()
            say(f"{t} {label}: vladbud {fmt(row['latency_us'])} us, {row['baseline']} {fmt(row['baseline_us'])} us, "
                f"compile {fmt(row['compile_us'])}, liger {fmt(row['liger_us'])} -> "
                f"x{fmt(row['speedup'], 3)} vs baseline, x{fmt(row['speedup_vs_best_peer'], 3)} vs best peer: "
                f"{row['verdict']} ({time.time() - t0:.1f} s)")
            if left:
                header["stopped"] = "deadline reached; not measured: " + ", ".join(left)
            write_report(args.out, machine, header, rows)
    if left:
        header["stopped"] = f"--deadline {args.deadline:g} s reached; not measured: " + ", ".join(left)
        say(header["stopped"])
    md_path, json_path = write_report(args.out, machine, header, rows)
    say(f"wrote {md_path} and {json_path} ({len(rows)} rows, {time.time() - t_start:.0f} s)")
    bad = [r for r in rows if r["verdict"] in ("WRONG", "ERROR", "BUILD FAILED", "NOT RUN")]
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"peers_cuda: error: {e}", file=sys.stderr)
        sys.exit(2)
