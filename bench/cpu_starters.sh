#!/usr/bin/env bash
# Benchmarks the nine CPU starter kernels at their benchmark ("large") sizes with the full
# timing protocol and writes bench/results/cpu.md: date, CPU, command, and per kernel the
# latency (median, p10-p90), throughput, % of the measured ceiling and the bound.
# Usage: bench/cpu_starters.sh [--dtype fp32|fp16|bf16] [--out FILE]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dtype=fp32
out="$here/bench/results/cpu.md"
while [ $# -gt 0 ]; do
  case "$1" in
    --dtype) dtype="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "cpu_starters.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
"$here/scripts/setup.sh"
vb="$here/build/vladbud"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
kernels=(matmul softmax layernorm rmsnorm flash_attention fused_mlp cross_entropy rotary_embedding reduce)
for k in "${kernels[@]}"; do
  echo "bench: $k ($dtype)" >&2
  (cd "$tmp" && "$vb" bench --kernel "$k" --dtype "$dtype" --json --tag bench-cpu >"$tmp/$k.json") || true
done
"$vb" targets --json >"$tmp/targets.json"
python3 - "$tmp" "$out" "$dtype" "$0 --dtype $dtype" "${kernels[@]}" <<'PY'
import json, sys, datetime, os
tmp, out, dtype, cmd, kernels = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
t = json.load(open(os.path.join(tmp, "targets.json")))["targets"][0]
m = t["measured"]
lines = [f"# CPU starter kernels — {dtype}", "",
         f"- date: {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')}",
         f"- CPU: {t['name']} ({t['arch']}, {t['logical_cores']} logical cores, LLC {t['caches_bytes']['llc'] >> 20} MiB)",
         f"- ceilings (measured {m['measured_at']}): memory {m['memory_bandwidth_gb_s']:.1f} GB/s; "
         + ", ".join(f"{k} {v:.3f} TFLOP/s" for k, v in m["peak_tflops"].items()),
         f"- command: `{os.path.relpath(cmd) if os.path.exists(cmd) else cmd}`",
         "- protocol: full `vladbud bench` (five correctness stages in fp16/bf16/fp32, then timing on rotating "
         "input sets > 2x LLC; median of repeated calls)", "",
         "| kernel | size | verdict | latency_us (median) | p10–p90 us | throughput | % of ceiling | bound |",
         "|---|---|---|---|---|---|---|---|"]
for k in kernels:
    try:
        r = json.load(open(os.path.join(tmp, f"{k}.json")))
    except Exception as e:
        lines.append(f"| {k} | - | ERROR ({e}) | | | | | |"); continue
    if r.get("latency_us") is None:
        lines.append(f"| {k} | - | {r['verdict']} ({r.get('guard','')}) | | | | | |"); continue
    thr = (f"{r['bandwidth_gb_s']:.1f} GB/s" if r["bound"] == "memory"
           else f"{r['throughput_tflops']*1000:.1f} GFLOP/s")
    lines.append(f"| {k} | {r['size']} {r['dtype']} | {r['verdict']} | {r['latency_us']:.1f} | "
                 f"{r['latency_p10_us']:.1f}–{r['latency_p90_us']:.1f} | {thr} | {r['pct_peak']:.1f}% | {r['bound']} |")
os.makedirs(os.path.dirname(out), exist_ok=True)
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
