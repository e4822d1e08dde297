#!/usr/bin/env bash
# Optimizer throughput on this machine's CPU: runs `vladbud optimize` (the orchestrator, search
# proposer) for a fixed budget over two CPU kernel folders at LLM shapes -- softmax over GPT-2
# small attention scores (12 heads x 256 tokens = 3072 rows of 256) and RMSNorm at a LLaMA-like
# 512 tokens x 2048 -- starting from the starters, and writes bench/results/optimizer.md
# (date, machine, load average, command, experiments/hour, kept improvements, speedups).
# Usage: bench/optimizer.sh [BUDGET]   (default 10m; any `--budget` form: 90s, 10m, 1h)
# Env: VB_BENCH_WS=DIR keeps the workspace there (default: a fresh temporary folder).
#      VB_BENCH_BACKEND=cuda optimizes the CUDA starters (kernels/cuda/*.cu, needs the CUDA backend
#      and annotated starters) at LLaMA-small shapes (softmax 16384x2048, RMSNorm 8192x4096) and
#      writes bench/results/optimizer-cuda.md instead.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
budget="${1:-10m}"
vb="${VB:-$here/build/vladbud}"
[ -x "$vb" ] || { echo "optimizer.sh: build first (scripts/setup.sh)" >&2; exit 2; }
ws="${VB_BENCH_WS:-$(mktemp -d)/workspace}"
rm -rf "$ws"
backend="${VB_BENCH_BACKEND:-cpu}"
mkdir -p "$ws/kernels/01_softmax" "$ws/kernels/02_rmsnorm"
if [ "$backend" = cuda ]; then
  ext=cu; out="$here/bench/results/optimizer-cuda.md"
  sm='"label": "llama-attn-16384x2048", "dims": {"R": 16384, "C": 2048}'
  rn='"label": "llama-8192x4096", "dims": {"M": 8192, "N": 4096}'
else
  ext=cpp; out="$here/bench/results/optimizer.md"
  sm='"label": "gpt2-attn-3072x256", "dims": {"R": 3072, "C": 256}'
  rn='"label": "llm-512x2048", "dims": {"M": 512, "N": 2048}'
fi
cp "$here/kernels/$backend/softmax.$ext" "$ws/kernels/01_softmax/"
cp "$here/kernels/$backend/rmsnorm.$ext" "$ws/kernels/02_rmsnorm/"
cat >"$ws/kernels/01_softmax/problem.json" <<J
{"kernel": "softmax", "dtype": "fp32", "backend": "$backend", "model": "bench",
 "size": {$sm}, "time_share": 0.5}
J
cat >"$ws/kernels/02_rmsnorm/problem.json" <<J
{"kernel": "rmsnorm", "dtype": "fp32", "backend": "$backend", "model": "bench",
 "size": {$rn}, "time_share": 0.5}
J
# A fresh build cache, so that no candidate is built for free by an earlier run (the measured
# ceilings are copied over: re-measuring them is not part of the optimizer's work).
user_cache="${VB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vladbud}"
export VB_CACHE_DIR="$(dirname "$ws")/vb-cache"
rm -rf "$VB_CACHE_DIR"
mkdir -p "$VB_CACHE_DIR/ceilings"
cp "$user_cache"/ceilings/*.json "$VB_CACHE_DIR/ceilings/" 2>/dev/null || true
cmd="vladbud optimize --workspace $ws --budget $budget --plateau 100000 --ceiling 100 --no-git"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
"$vb" optimize --workspace "$ws" --budget "$budget" --plateau 100000 --ceiling 100 --no-git >"$ws/status.txt" 2>"$ws/optimize.log" || true
t1=$(date +%s)
times >"$ws/times.txt"  # user and system CPU time of the children (vladbud, g++, runner)
cpu_times="$(tail -1 "$ws/times.txt")"
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
"$vb" report --workspace "$ws" >/dev/null 2>&1 || true
mkdir -p "$here/bench/results"
python3 - "$ws" "$((t1 - t0))" "$cmd" "$load_before" "$load_after" "$budget" "$backend" "$cpu_times" >"$out" <<'PY'
import json, sys, platform, datetime, subprocess
ws, wall, cmd, lb, la, budget, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
import re
def secs(t):
    m = re.match(r"(\d+)m([\d.]+)s", t)
    return int(m.group(1)) * 60 + float(m.group(2)) if m else 0.0
cpu_s = sum(secs(t) for t in sys.argv[8].split())
o = json.load(open(f"{ws}/orchestration.json"))
rows = [l.rstrip("\n").split("\t") for l in open(f"{ws}/results.tsv")][1:]
exps = [r for r in rows if r[1] != "baseline"]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
import os
print(f"# Optimizer throughput ({backend})\n")
print(f"* date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC")
print(f"* machine: {cpu}, {os.cpu_count()} logical cores")
print(f"* load average (1/5/15 min) before: {lb}; after: {la} (every runnable task on the machine counts)")
print(f"* command: `VB_BENCH_BACKEND={backend} bench/optimizer.sh {budget}` = `{cmd}`")
print(f"* wall time: {wall} s; experiments: {len(exps)} (plus {len(rows) - len(exps)} baseline rows)")
goal = 400 if backend == "cuda" else 800
print(f"* **experiments per hour: {3600 * len(exps) / max(wall, 1):.0f}** (goal >= {goal}; AutoKernel ~40), "
      "every candidate built from scratch (fresh build cache)")
if cpu_s > 0 and exps:
    print(f"* CPU time (user + system, vladbud + compiler + runner): {cpu_s:.0f} s = "
          f"{cpu_s / len(exps):.2f} s per experiment, i.e. about {3600 / (cpu_s / len(exps)):.0f} "
          "experiments per hour on an otherwise idle machine (the loop is sequential: wall time "
          "is close to its CPU time when nothing else competes)")
print()
print("| kernel | shape | starter (us) | best (us) | speedup over the starter | kept | experiments | % of ceiling |")
print("|---|---|---|---|---|---|---|---|")
for k in o["kernels"]:
    p = json.load(open(f"{ws}/kernels/{k['dir']}/problem.json"))
    print(f"| {k['dir']} | {p['size']['label']} fp32 | {k['baseline_us']:.1f} | {k['best_us']:.1f} | "
          f"{k['speedup']:.3f}x | {k['kept']} | {k['experiments']} | {k['pct_peak']:.1f}% |"
          + (f" error: {k['reason'][:200]}" if k.get("status") == "error" else ""))
print("\nKept versions (each passed the five stages and beat the previous best beyond the noise of "
      "interleaved timings):\n")
for r in rows:
    if r[1] == "keep":
        d = r[9]
        print(f"* {r[2]} {r[4]} us: {d[:d.find('; reproduce')]}")
print("\nThe starter latency is the first quick-screen measurement; best is the median of the last "
      "interleaved comparison. Latencies on a shared machine are noisy; the keep rule "
      "accounts for it.")
PY
cat "$out"
echo "workspace: $ws" >&2
