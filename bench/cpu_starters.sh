#!/usr/bin/env bash
# Benchmarks the nine CPU starter kernels side by side with PyTorch on the same problem in the
# same call (`vladbud bench`: full five stages, then timing; PyTorch by the same rotation rule)
# at their benchmark ("large") sizes and, unless --no-models, at the shapes GPT-2 small and the
# LLaMA-style model (models/) run at 1x64 tokens (profile + extract --top 12), and writes
# bench/results/cpu.md + cpu.json: date, CPU, commit, command, and per row the latency, PyTorch's
# latency, the speedup, % of the measured ceiling and the load average (issue 16's format).
# Usage: bench/cpu_starters.sh [--dtype fp32|fp16|bf16] [--out FILE.md] [--no-models]
#          [--types T1,T2|none] [--model-types T1,T2]
#   --types: the benchmark-size rows to run (default all nine; none: no benchmark-size rows);
#   --model-types: only the model folders of these types (default every extracted folder).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dtype=fp32
out="$here/bench/results/cpu.md"
models=1
types="matmul,softmax,layernorm,rmsnorm,flash_attention,fused_mlp,cross_entropy,rotary_embedding,reduce"
model_types=""
args="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --dtype) dtype="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-models) models=0 ;;
    --types) types="$2"; shift ;;
    --model-types) model_types="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "cpu_starters.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
known=" matmul softmax layernorm rmsnorm flash_attention fused_mlp cross_entropy rotary_embedding reduce "
kernels=()
if [ "$types" != none ]; then IFS=, read -r -a kernels <<<"$types"; fi
for k in "${kernels[@]}" ${model_types//,/ }; do
  case "$known" in *" $k "*) ;; *) echo "cpu_starters.sh: unknown kernel type '$k' (known:$known)" >&2; exit 2 ;; esac
done
"$here/scripts/setup.sh"
vb="$here/build/vladbud"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/rows"
for k in "${kernels[@]}"; do
  echo "bench: $k ($dtype)" >&2
  (cd "$tmp" && "$vb" bench --kernel "$k" --dtype "$dtype" --json --tag bench-cpu >"$tmp/rows/0-bench-$k.json") || true
done
if [ "$models" = 1 ]; then
  # The model's own shapes: each extracted folder's problem.json, benched from inside it.
  for spec in "gpt2 GPT2" "llama Llama"; do
    set -- $spec
    ws="$tmp/ws-$1"
    echo "profile + extract: models/$1.py ($2, 1x64 tokens, $dtype)" >&2
    if "$vb" profile --model "$here/models/$1.py" --class-name "$2" --input-shape 1,64 --dtype "$dtype" \
         --workspace "$ws" >/dev/null && "$vb" extract --top 12 --workspace "$ws" >/dev/null; then
      for d in "$ws"/kernels/*/; do
        n="$(basename "$d")"
        if [ -n "$model_types" ] && ! [[ ",$model_types," == *",${n#*_},"* ]]; then continue; fi
        src="$(ls "$d" | grep -E '\.cpp$' | head -1)"
        echo "bench: $1 $n" >&2
        (cd "$d" && "$vb" bench -s "$src" --json --tag bench-cpu >"$tmp/rows/1-$1-$n.json") || true
      done
    else
      echo "cpu_starters.sh: profiling models/$1.py failed; its rows are left out" >&2
    fi
  done
fi
"$vb" targets --json >"$tmp/targets.json"
commit="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet 2>/dev/null || echo '-dirty')"
python3 - "$tmp" "$out" "$dtype" "bench/cpu_starters.sh $args" "$commit" <<'PY'
import json, sys, datetime, os, glob
tmp, out, dtype, cmd, commit = sys.argv[1:6]
t = json.load(open(os.path.join(tmp, "targets.json")))["targets"][0]
m = t["measured"]
when = datetime.datetime.now(datetime.timezone.utc)
lines = [f"# CPU starter kernels vs PyTorch — {dtype}", "",
         f"- date: {when.strftime('%Y-%m-%d %H:%M UTC')}; commit {commit}",
         f"- CPU: {t['name']} ({t['arch']}, {t['logical_cores']} logical cores, LLC {t['caches_bytes']['llc'] >> 20} MiB)",
         f"- ceilings (measured {m['measured_at']}): memory {m['memory_bandwidth_gb_s']:.1f} GB/s; "
         + ", ".join(f"{k} {v:.3f} TFLOP/s" for k, v in m["peak_tflops"].items()),
         f"- command: `{cmd}`",
         "- protocol: one `vladbud bench` per row: the five correctness stages in fp16/bf16/fp32, then "
         "timing on rotating input sets > 2x LLC (median of repeated calls); PyTorch's op timed in the "
         "same call on the same problem by the same rule. speedup = PyTorch median / VladBud median. "
         "Model rows: the folders `vladbud extract --top 12` wrote after profiling the model at 1x64 "
         "tokens, benched from inside each folder (its problem.json). load = the 1-minute load average "
         "when timing started, (n) = other runnable tasks seen before the timing batches.", "",
         "| what | kernel | size | dtype | verdict | latency_us | pytorch_us (op) | speedup | % of ceiling | bound | load (others) |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
rows = []
for f in sorted(glob.glob(os.path.join(tmp, "rows", "*.json"))):
    what = os.path.basename(f)[:-5].split("-", 1)[1]
    what = "benchmark size" if what.startswith("bench-") else what
    try:
        r = json.load(open(f))
    except Exception as e:
        lines.append(f"| {what} | - | - | - | ERROR (no JSON: {e}) | | | | | | |"); continue
    py = r.get("pytorch") or {}
    row = {"what": what, "kernel": r.get("kernel"), "size": r.get("size"), "dtype": r.get("dtype"),
           "verdict": r.get("verdict"), "latency_us": r.get("latency_us"),
           "pytorch_us": py.get("median_us"), "pytorch_op": py.get("op"),
           "speedup": (py["median_us"] / r["latency_us"]) if py.get("median_us") and r.get("latency_us") else None,
           "pct_ceiling": r.get("pct_peak"), "bound": r.get("bound"),
           "load_average": r.get("load_average"), "other_runnable_tasks": r.get("other_runnable_tasks")}
    rows.append(row)
    if row["latency_us"] is None:
        lines.append(f"| {what} | {row['kernel']} | {row['size']} | {row['dtype']} | {row['verdict']} ({r.get('guard','')}) | | | | | | |"); continue
    pyc = f"{row['pytorch_us']:.1f} ({row['pytorch_op']})" if row["pytorch_us"] else "n/a"
    sp = f"**{row['speedup']:.2f}x**" if row["speedup"] else "n/a"
    lines.append(f"| {what} | {row['kernel']} | {row['size']} | {row['dtype']} | {row['verdict']} | {row['latency_us']:.1f} | "
                 f"{pyc} | {sp} | {row['pct_ceiling']:.1f}% | {row['bound']} | {row['load_average']} ({row['other_runnable_tasks']}) |")
os.makedirs(os.path.dirname(out), exist_ok=True)
open(out, "w").write("\n".join(lines) + "\n")
meta = {"date": when.isoformat(timespec="seconds"), "commit": commit, "command": cmd,
        "machine": {"cpu": t["name"], "arch": t["arch"], "logical_cores": t["logical_cores"],
                    "memory_bandwidth_gb_s": m["memory_bandwidth_gb_s"], "peak_tflops": m["peak_tflops"],
                    "ceilings_measured_at": m["measured_at"]},
        "rows": rows}
open(os.path.splitext(out)[0] + ".json", "w").write(json.dumps(meta, indent=1) + "\n")
print("\n".join(lines))
PY
