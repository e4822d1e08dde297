#!/usr/bin/env python3
"""Where a torch.compile'd model's time goes on the GPU, and what fusions would be worth.

Issue 14's bar asks VladBud + torch.compile to beat torch.compile by 10 % on the HF Llama. Before
building kernels for that, this script sizes the prize on the model's own shapes and dtype:

1. Wall time per forward (CUDA-synchronized, median of interleaved rounds) of eager, torch.compile
   (default mode), torch.compile mode="reduce-overhead" (CUDA graphs) and, with --max-autotune,
   mode="max-autotune-no-cudagraphs".
2. A torch.profiler trace of the compiled model (default mode): the GPU's busy time per forward
   (union of kernel intervals) against the wall time (is the compiled model launch-bound?), and
   the kernels by total time, each put in a class (GEMM, attention, Triton fused, other).
3. What-if variants, each compiled the same way and timed in the same rounds: the q/k/v
   projections as one GEMM on concatenated weights ("qkv-merged"), gate and up as one GEMM
   ("gate-up-merged"), and both. They are PyTorch rewrites (cuBLAS), not VladBud kernels: they
   say how much a fused projection kernel could gain at most, if it were as fast as cuBLAS.

Writes <outdir>/compiled-breakdown-<machine>.md and .json (date, machine, commit, command).

    python3 bench/compiled_breakdown.py --machine h200 --outdir $OUT
    python3 bench/compiled_breakdown.py --device cpu --config models/configs/hf_llama_tiny.json \
        --input-shape 1,32 --dtype fp32 --rounds 3 --outdir /tmp/cb     # smoke test anywhere

Errors: a missing transformers, or a model that is not a Llama-family HF model for the what-if
variants (the rewrites are skipped with the reason), are stated in the output.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from vladbud import loader  # noqa: E402


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def kernel_class(name: str) -> str:
    """A GPU kernel's class from its name (cuBLAS nvjet/cutlass/gemm, flash/fmha, Triton)."""
    n = name.lower()
    if n.startswith("triton") or "triton_" in n:
        return "triton fused"
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if "nvjet" in n or "gemm" in n or "cutlass" in n or "sm90_xmma" in n or "cublas" in n:
        return "gemm"
    if "memset" in n or "memcpy" in n:
        return "memset/memcpy"
    return "other"


def merge_intervals(iv):
    iv = sorted(iv)
    busy = 0.0
    cur_s, cur_e = None, None
    for s, e in iv:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


# ---- what-if rewrites (Llama family) ------------------------------------------------------------

def _merged_mlp_forward(self, x):
    gu = F.linear(x, self._vb_w_gu)
    g, u = gu.split(self._vb_h, dim=-1)
    return self.down_proj(self.act_fn(g) * u)


def merge_gate_up(model) -> int:
    n = 0
    for m in model.modules():
        if all(hasattr(m, a) for a in ("gate_proj", "up_proj", "down_proj", "act_fn")):
            if m.gate_proj.bias is not None or m.up_proj.bias is not None:
                continue
            m._vb_w_gu = torch.nn.Parameter(torch.cat([m.gate_proj.weight, m.up_proj.weight], 0).detach(),
                                            requires_grad=False)
            m._vb_h = m.gate_proj.weight.shape[0]
            m.forward = _merged_mlp_forward.__get__(m)
            n += 1
    return n


def merge_qkv(model) -> int:
    try:
        from transformers.models.llama import modeling_llama as ml
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"transformers' llama module is not importable: {e}")

    def fwd(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        input_shape = hidden_states.shape[:-1]
        hd = self.head_dim
        qkv = F.linear(hidden_states, self._vb_w_qkv)
        q, k, v = qkv.split(self._vb_split, dim=-1)
        q = q.view(*input_shape, -1, hd).transpose(1, 2)
        k = k.view(*input_shape, -1, hd).transpose(1, 2)
        v = v.view(*input_shape, -1, hd).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = ml.apply_rotary_pos_emb(q, k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scaling,
                                           enable_gqa=q.shape[1] != k.shape[1])
        o = o.transpose(1, 2).reshape(*input_shape, -1)
        return self.o_proj(o), None

    n = 0
    for m in model.modules():
        if isinstance(m, ml.LlamaAttention):
            if any(getattr(m, p).bias is not None for p in ("q_proj", "k_proj", "v_proj")):
                continue
            ws = [m.q_proj.weight, m.k_proj.weight, m.v_proj.weight]
            m._vb_w_qkv = torch.nn.Parameter(torch.cat(ws, 0).detach(), requires_grad=False)
            m._vb_split = [w.shape[0] for w in ws]
            m.forward = fwd.__get__(m)
            n += 1
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=os.path.join(ROOT, "models/configs/hf_llama_836m.json"),
                    help="transformers config JSON (AutoModelForCausalLM); default: HF Llama 836M")
    ap.add_argument("--input-shape", default="1,2048", help="batch,seq (default 1,2048)")
    ap.add_argument("--dtype", default="bf16", help="fp32|fp16|bf16 (default bf16)")
    ap.add_argument("--device", default="cuda", help="cuda|cpu (default cuda)")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds (default 15)")
    ap.add_argument("--max-autotune", action="store_true",
                    help="also time mode='max-autotune-no-cudagraphs' (compiles for minutes)")
    ap.add_argument("--no-what-if", action="store_true", help="skip the merged-projection rewrites")
    ap.add_argument("--machine", default=platform.node(), help="name used in the output files")
    ap.add_argument("--outdir", default=".", help="folder for the .md and .json (default .)")
    args = ap.parse_args(argv)
    if args.rounds < 3:
        ap.error("--rounds must be at least 3 (a median of fewer says nothing)")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no CUDA device; pass --device cpu")
    os.makedirs(args.outdir, exist_ok=True)
    t0 = time.time()
    batch, seq = loader.parse_input_shape(args.input_shape)
    dev = args.device

    def build():
        torch.manual_seed(0)
        m = loader.load_model(module="transformers", class_name="AutoModelForCausalLM", config=args.config)
        return loader.prepare(m, args.dtype, dev)

    base = build()
    x = loader.make_inputs(base, batch, seq, dev)
    variants = {"eager": base}
    notes = []
    log = lambda s: print(f"[{time.time() - t0:6.1f}s] {s}", flush=True)  # noqa: E731
    log(f"model built: {sum(p.numel() for p in base.parameters()) / 1e6:.0f}M parameters")
    variants["compile"] = torch.compile(base)
    variants["compile reduce-overhead"] = torch.compile(base, mode="reduce-overhead")
    if args.max_autotune:
        variants["compile max-autotune-no-cudagraphs"] = torch.compile(base, mode="max-autotune-no-cudagraphs")
    if not args.no_what_if:
        for name, fns in (("compile qkv-merged", (merge_qkv,)), ("compile gate-up-merged", (merge_gate_up,)),
                          ("compile qkv+gate-up-merged", (merge_qkv, merge_gate_up))):
            try:
                m = build()
                counts = [f(m) for f in fns]
                if not all(counts):
                    notes.append(f"{name}: skipped: no matching module")
                    continue
                variants[name] = torch.compile(m)
            except Exception as e:  # noqa: BLE001
                notes.append(f"{name}: skipped: {e}")

    ref = None
    errors = {}
    with torch.inference_mode():
        for name, m in variants.items():
            ts = time.time()
            for _ in range(3):
                out = m(x)
            sync(dev)
            logits = (out.logits if hasattr(out, "logits") else out).float()
            if ref is None:
                ref = logits
            errors[name] = float((logits - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
            log(f"{name}: warm-up {time.time() - ts:.1f}s, max rel. error vs eager {errors[name]:.3g}")
        del ref, logits, out
        samples = {k: [] for k in variants}
        names = list(variants)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                sync(dev)
                s = time.perf_counter()
                variants[name](x)
                sync(dev)
                samples[name].append((time.perf_counter() - s) * 1e3)
        med = {k: statistics.median(v) for k, v in samples.items()}
        log("medians (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))

        # Profile the default compiled model.
        prof_rows, busy_ms, wall_ms, kernels_per_fwd = [], None, None, None
        if dev == "cuda":
            from torch.profiler import ProfilerActivity, profile
            n_prof = 5
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                sync(dev)
                s = time.perf_counter()
                for _ in range(n_prof):
                    variants["compile"](x)
                sync(dev)
                wall_ms = (time.perf_counter() - s) * 1e3 / n_prof
            evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            iv = [(e.time_range.start, e.time_range.end) for e in evs]
            busy_ms = merge_intervals(iv) / 1e3 / n_prof
            kernels_per_fwd = len(evs) / n_prof
            agg = {}
            for e in evs:
                a = agg.setdefault(e.name, [0.0, 0])
                a[0] += (e.time_range.end - e.time_range.start)
                a[1] += 1
            for k, (us, c) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
                prof_rows.append({"kernel": k[:160], "class": kernel_class(k), "us_per_forward": us / n_prof,
                                  "calls_per_forward": c / n_prof})
            log(f"compiled: GPU busy {busy_ms:.2f} ms of {wall_ms:.2f} ms per forward, "
                f"{kernels_per_fwd:.0f} kernels per forward")

    by_class = {}
    for r in prof_rows:
        by_class[r["class"]] = by_class.get(r["class"], 0.0) + r["us_per_forward"]
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except Exception:  # noqa: BLE001
        commit = "unknown"
    gpu = torch.cuda.get_device_name(0) if dev == "cuda" else platform.processor()
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": args.machine, "device": dev, "device_name": gpu, "commit": commit,
        "command": "python3 bench/compiled_breakdown.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "torch": torch.__version__, "config": os.path.relpath(args.config, ROOT), "dtype": args.dtype,
        "input": args.input_shape, "rounds": args.rounds,
        "median_ms": med, "samples_ms": samples, "max_rel_error_vs_eager": errors,
        "compiled_profile": {"wall_ms_per_forward": wall_ms, "gpu_busy_ms_per_forward": busy_ms,
                             "kernels_per_forward": kernels_per_fwd, "us_by_class": by_class,
                             "kernels": prof_rows[:40]},
        "notes": notes,
    }
    base_name = os.path.join(args.outdir, f"compiled-breakdown-{args.machine}")
    with open(base_name + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    c = med["compile"]
    lines = [f"# Where torch.compile's time goes: {os.path.basename(args.config)} {args.dtype} {args.input_shape} on {gpu}",
             "", f"Written by `bench/compiled_breakdown.py` on {doc['date']}, commit {commit}, torch {torch.__version__}.",
             "", "```", f"$ {doc['command']}", "```", "",
             f"Medians of {args.rounds} interleaved rounds (rotated order), CUDA-synchronized wall clock, inference_mode.",
             "What-if rows are PyTorch rewrites on cuBLAS (not VladBud kernels): the most a fused projection could gain.", "",
             "| variant | median ms | vs torch.compile | max rel. error vs eager |", "|---|---|---|---|"]
    for k, v in med.items():
        lines.append(f"| {k} | {v:.2f} | {c / v:.3f}× | {errors[k]:.3g} |")
    if busy_ms is not None:
        lines += ["", f"torch.compile (default mode), profiled over 5 forwards: GPU busy **{busy_ms:.2f} ms** of "
                      f"{wall_ms:.2f} ms wall per forward ({100 * busy_ms / wall_ms:.0f} %), "
                      f"{kernels_per_fwd:.0f} kernels per forward.", "",
                  "| class | µs per forward | share of GPU busy |", "|---|---|---|"]
        for k, v in sorted(by_class.items(), key=lambda kv: -kv[1]):
            lines.append(f"| {k} | {v:.0f} | {100 * v / (busy_ms * 1e3):.1f} % |")
        lines += ["", "| kernel | class | µs per forward | calls per forward |", "|---|---|---|---|"]
        for r in prof_rows[:25]:
            lines.append(f"| `{r['kernel'][:90]}` | {r['class']} | {r['us_per_forward']:.1f} | {r['calls_per_forward']:.0f} |")
    for n in notes:
        lines.append(f"\n- {n}")
    with open(base_name + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"wrote {base_name}.md and .json")


if __name__ == "__main__":
    main()
