"""Preview of the nine Triton starters on a real NVIDIA GPU, OUTSIDE the evaluator.

The triton backend's GPU path (ahead-of-time cubins launched by the C++ runner, issue 17 step 2;
bench/h200_triton.sh stages aot-check and aot-time) is written but has not run on a GPU; this
preview measures what the starters do on the H200 with Triton's own JIT, as a reference: the relative Frobenius error against an fp64 PyTorch reference and the median time
(triton.testing.do_bench: CUDA events, L2 flushed between calls) next to PyTorch's own op, at
the evaluator's GPU benchmark size of each type (from `vladbud bench --abi --json`). It is a
preview, not a verdict: no runner isolation, no guards, no stages, random inputs only.

  python3 bench/triton_gpu_preview.py VLADBUD OUT.json [TYPE...]
  python3 bench/triton_gpu_preview.py --variants SPEC VLADBUD OUT.json [TYPE...]
  python3 bench/triton_gpu_preview.py --write-variants SPEC DIR

Writes OUT.json (one row per type x dtype) and prints a Markdown table. With --variants, the
rows are the variants of SPEC instead of the starters (a row's "variant" names it), timed in
the same process one after another, so that one GPU call compares them: SPEC is a file of
lines `TYPE DTYPES NAME [PARAM=VALUE ...]` (DTYPES comma-separated, e.g. bf16,fp16; `#`
starts a comment); a variant is the starter kernels/triton/TYPE.py with each `PARAM = ...`
assignment (its @vb-param tunable) set to VALUE. --write-variants writes those sources as
DIR/TYPE@NAME.py (one line `TYPE@NAME DTYPES` per variant on stdout) for the AOT path
(bench/h200_triton.sh stage aot-variants). A PARAM the starter does not assign exactly once
is an error (exit 2).
"""
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import torch
import torch.nn.functional as F
import triton
import triton.testing

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TYPES = ["matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp",
         "cross_entropy", "rotary_embedding", "reduce"]
DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int64": torch.int64}


def rope(x, interleaved):
    """RoPE of x[B,H,S,D] with cos/sin[S,D/2] (DESIGN §2), in the inputs' dtype."""
    h = x[0].shape[-1] // 2
    c, s = x[1][None, None], x[2][None, None]
    if interleaved == 1.0:
        p, q = x[0][..., 0::2], x[0][..., 1::2]
        y = torch.empty_like(x[0])
        y[..., 0::2], y[..., 1::2] = p * c - q * s, q * c + p * s
        return y
    p, q = x[0][..., :h], x[0][..., h:]
    return torch.cat([p * c - q * s, q * c + p * s], -1)


def reference(kind, ins, attrs):
    """fp64 PyTorch reference of DESIGN §2 (inputs upcast), in ABI order."""
    x = [t.double() if t.is_floating_point() else t for t in ins]
    a = list(attrs.values())
    if kind == "matmul":
        return x[0] @ x[1]
    if kind == "softmax":
        return torch.softmax(x[0], -1)
    if kind == "layernorm":
        return F.layer_norm(x[0], x[0].shape[-1:], x[1], x[2], a[0])
    if kind == "rmsnorm":
        return x[0] * torch.rsqrt((x[0] * x[0]).mean(-1, keepdim=True) + a[0]) * x[1]
    if kind == "flash_attention":
        g = x[0].shape[1] // x[1].shape[1]
        k, v = x[1].repeat_interleave(g, 1), x[2].repeat_interleave(g, 1)
        return F.scaled_dot_product_attention(x[0], k, v, is_causal=a[0] == 1.0, scale=a[1])
    if kind == "fused_mlp":
        g = x[0] @ x[1].T
        return (F.silu(g) * (x[0] @ x[2].T)) @ x[3].T
    if kind == "cross_entropy":
        return F.cross_entropy(x[0], x[1], ignore_index=int(a[0]))
    if kind == "rotary_embedding":
        return rope(x, a[0])
    if kind == "reduce":
        return x[0].sum(-1)
    raise ValueError(kind)


def torch_op(kind, ins, attrs):
    """What PyTorch runs for the same call (as python/vladbud/baseline.py names them)."""
    a = list(attrs.values())
    if kind == "matmul":
        return lambda: torch.mm(ins[0], ins[1])
    if kind == "softmax":
        return lambda: torch.softmax(ins[0], -1)
    if kind == "layernorm":
        return lambda: F.layer_norm(ins[0], ins[0].shape[-1:], ins[1], ins[2], a[0])
    if kind == "rmsnorm":
        return lambda: F.rms_norm(ins[0], ins[0].shape[-1:], ins[1], a[0])
    if kind == "flash_attention":
        g = ins[0].shape[1] // ins[1].shape[1]
        return lambda: F.scaled_dot_product_attention(ins[0], ins[1], ins[2], is_causal=a[0] == 1.0,
                                                      scale=a[1], enable_gqa=g > 1)
    if kind == "fused_mlp":
        return lambda: (F.silu(ins[0] @ ins[1].T) * (ins[0] @ ins[2].T)) @ ins[3].T
    if kind == "cross_entropy":
        return lambda: F.cross_entropy(ins[0].float(), ins[1], ignore_index=int(a[0]))
    if kind == "rotary_embedding":
        return lambda: rope(ins, a[0])  # no fused PyTorch op: the eager formula
    if kind == "reduce":
        return lambda: ins[0].sum(-1)
    raise ValueError(kind)


def inputs(kind, abi):
    ins = []
    for d in abi["inputs"]:
        shape, dt = d["shape"], DT[d["dtype"]]
        if dt == torch.int64:  # cross_entropy targets: classes of V, some ignored
            V = abi["inputs"][0]["shape"][1]
            t = torch.randint(0, V, shape, device="cuda")
            t[1::10] = int(abi["attrs"]["ignore_index"])
            ins.append(t)
        else:
            ins.append(torch.randn(shape, device="cuda").to(dt))
    if kind == "fused_mlp":  # scale the weights as the evaluator does (std(y) ~ 1)
        D, H = ins[0].shape[1], ins[1].shape[0]
        ins[1] /= math.sqrt(D); ins[2] /= math.sqrt(D); ins[3] /= math.sqrt(H) / math.sqrt(2)
    if kind == "rotary_embedding":  # a real base-10000 table
        S, h = ins[1].shape
        ang = torch.arange(S, device="cuda")[:, None] * 10000 ** (-torch.arange(h, device="cuda") / h)
        ins[1], ins[2] = ang.cos().to(ins[1].dtype), ang.sin().to(ins[2].dtype)
    return ins


def read_variants(path):
    """[(type, [dtype...], name, {param: value})] of a variant SPEC file (see the docstring)."""
    out = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3 or words[0] not in TYPES or any("=" not in w for w in words[3:]):
            sys.exit(f"{path}:{n}: expected 'TYPE DTYPES NAME [PARAM=VALUE ...]', got {line.strip()!r}")
        out.append((words[0], words[1].split(","), words[2], dict(w.split("=", 1) for w in words[3:])))
    return out


def variant_source(kind, params):
    """The starter kernels/triton/KIND.py with each tunable PARAM's assignment set to VALUE."""
    with open(os.path.join(ROOT, "kernels", "triton", f"{kind}.py"), encoding="utf-8") as f:
        src = f.read()
    for k, v in params.items():
        src, hits = re.subn(rf"^{re.escape(k)} = .*$", f"{k} = {v}", src, flags=re.M)
        if hits != 1:
            sys.exit(f"variant of {kind}: kernels/triton/{kind}.py assigns {k} {hits} times (expected once)")
    return src


def write_variants(spec, outdir):
    os.makedirs(outdir, exist_ok=True)
    for kind, dtypes, name, params in read_variants(spec):
        with open(os.path.join(outdir, f"{kind}@{name}.py"), "w", encoding="utf-8") as f:
            f.write(variant_source(kind, params))
        print(f"{kind}@{name} {','.join(dtypes)}")
    return 0


def load_module(label, src):
    # Triton's JIT reads the source of a kernel through its file: a real file per variant.
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"vb_preview_{os.getpid()}_{label.replace('@', '_')}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(label.replace("@", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    if argv[:1] == ["--write-variants"] and len(argv) == 3:
        return write_variants(argv[1], argv[2])
    variants = None
    if argv[:1] == ["--variants"]:
        variants, argv = read_variants(argv[1]), argv[2:]
    vb, out_path, types = argv[0], argv[1], argv[2:] or TYPES
    if variants is None:
        runs = [(kind, None, ["fp16", "bf16", "fp32"], {}) for kind in types]
    else:
        runs = [(kind, name, dts, params) for kind, dts, name, params in variants if kind in types]
    rows = []
    for kind, name, dtypes, params in runs:
        mod = load_module(kind if name is None else f"{kind}@{name}", variant_source(kind, params))
        for dts in dtypes:
            abi = json.loads(subprocess.check_output([vb, "bench", "--kernel", kind, "--backend", "cuda",
                                                      "--abi", "--json", "--dtype", dts]))
            row = {"kernel": kind, "dtype": dts, "size": abi["size"]}
            if name is not None:
                row["variant"], row["params"] = name, params
            try:
                torch.manual_seed(0)
                ins = inputs(kind, abi)
                outs = [torch.empty(d["shape"], dtype=DT[d["dtype"]], device="cuda") for d in abi["outputs"]]
                attrs = list(abi["attrs"].values())
                mod.vb_kernel_run(ins, outs, attrs)
                torch.cuda.synchronize()
                ref = reference(kind, ins, abi["attrs"])
                row["rel_error"] = ((outs[0].double() - ref).norm() / ref.norm()).item()
                row["triton_us"] = 1e3 * triton.testing.do_bench(lambda: mod.vb_kernel_run(ins, outs, attrs), return_mode="median")
                row["pytorch_us"] = 1e3 * triton.testing.do_bench(torch_op(kind, ins, abi["attrs"]), return_mode="median")
                row["gb_s"] = abi["min_bytes"] / row["triton_us"] / 1e3
                row["tflops"] = abi["flops"] / row["triton_us"] / 1e6
            except Exception as e:  # noqa: BLE001 -- a row per failure, the others still run
                row["error"] = f"{type(e).__name__}: {e}"[:500]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "triton": triton.__version__, "rows": rows}, f, indent=1)
    print("| kernel | dtype | size | rel. error | Triton us | PyTorch us | speedup | GB/s | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        label = r["kernel"] + (f" @{r['variant']}" if "variant" in r else "")
        if "error" in r:
            print(f"| {label} | {r['dtype']} | {r['size']} | ERROR {r['error'][:80]} | | | | | |")
        else:
            print(f"| {label} | {r['dtype']} | {r['size']} | {r['rel_error']:.2e} | {r['triton_us']:.1f} | "
                  f"{r['pytorch_us']:.1f} | {r['pytorch_us'] / r['triton_us']:.2f}x | {r['gb_s']:.0f} | {r['tflops']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
