#!/usr/bin/env bash
# KernelBench Level 1 on the H200 (issue 19): the 16 problems that map to VladBud's kernel types
# (1 2 4 6 7 8 9 16 17 18 matmul, 23 softmax, 36 RMSNorm, 40 LayerNorm, 47 sum, 95 cross-entropy,
# 97 attention), fp32, KernelBench's protocol (5 trials, atol = rtol = 1e-2) plus VladBud's guards,
# VladBud's CUDA starters and, after `optimize`, the optimizer's best; speedup over the eager Model
# and torch.compile(Model); fast_p. The GPU machine has no network: the problems travel with the
# call, packed here from a KernelBench checkout (never committed: .kb/ is git-ignored).
#
#   here:   git clone https://github.com/ScalingIntelligence/KernelBench /tmp/KernelBench
#           bash bench/h200_all.sh --pack                         # the binaries into .h200/
#           bash bench/kernelbench_h200.sh --pack /tmp/KernelBench  # the 16 problem files into .kb/
#   there (repo root, carrying .h200 and .kb; one call per line, each under 10 minutes):
#           bash bench/kernelbench_h200.sh setup
#           PROBLEMS=1,2,4,6,7 bash bench/kernelbench_h200.sh score
#           PROBLEMS=8,9,16,17,18 bash bench/kernelbench_h200.sh score
#           PROBLEMS=23,36,40 bash bench/kernelbench_h200.sh score
#           PROBLEMS=47,95,97 bash bench/kernelbench_h200.sh score
#           BUDGET=2m PROBLEMS=23,36,40,47,95 bash bench/kernelbench_h200.sh optimize
#           TAG=best PROBLEMS=23,36,40,47,95 bash bench/kernelbench_h200.sh score
#           bash bench/kernelbench_h200.sh merge        # -> $OUT/kernelbench-h200.md + .json
# Every stage leaves its files in $OUT (default h200-out/kernelbench) and keeps the workspace in
# $WS (default /tmp/vb-kb-ws, so that a later call on a still-warm machine finds it; setup again
# on a fresh one). Stages: setup, score, optimize, merge. Environment: PROBLEMS (ids, default all
# 16), TAG (label of a score run, default starters), BUDGET (optimize per kernel, default 2m),
# REPS (timed calls per model, default 100), COMPILE (1: time torch.compile(Model) too; default 1).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
ids="1 2 4 6 7 8 9 16 17 18 23 36 40 47 95 97"

if [ "${1:-}" = "--pack" ]; then
  src="${2:?usage: bench/kernelbench_h200.sh --pack PATH/TO/KernelBench-checkout}"
  l1="$src/KernelBench/level1"
  [ -d "$l1" ] || { echo "no $l1: clone https://github.com/ScalingIntelligence/KernelBench there" >&2; exit 2; }
  rm -rf .kb && mkdir -p .kb/KernelBench/level1
  for i in $ids; do
    f=$(ls "$l1"/"${i}"_*.py 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "problem $i missing in $l1" >&2; exit 2; }
    cp "$f" .kb/KernelBench/level1/
  done
  (cd "$src" && git rev-parse HEAD 2>/dev/null) >.kb/COMMIT || true
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.kb/' "$exclude" 2>/dev/null || echo '/.kb/' >>"$exclude"
  ls .kb/KernelBench/level1 | wc -l | xargs echo "packed problems:" >&2
  exit 0
fi

stage="${1:?usage: bench/kernelbench_h200.sh --pack DIR | setup | score | optimize | merge}"
out="${OUT:-$here/h200-out}/kernelbench"
ws="${WS:-/tmp/vb-kb-ws}"
mkdir -p "$out" "$ws"
export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
export VB_RUNNER="$here/.h200/vladbud-runner" VB_PYTHON="${VB_PYTHON:-python3}" PYTHONUNBUFFERED=1
vb="$here/.h200/vladbud"
[ "$stage" = merge ] || [ -x "$vb" ] || { echo "no .h200/vladbud: run bash bench/h200_all.sh --pack here and carry .h200" >&2; exit 2; }
[ "$stage" = merge ] || [ -d .kb/KernelBench/level1 ] || { echo "no .kb/: run bench/kernelbench_h200.sh --pack DIR here and carry .kb" >&2; exit 2; }
problems="${PROBLEMS:-$(echo $ids | tr ' ' ,)}"
tag="${TAG:-starters}"
common=(--kb-root .kb --level 1 --workspace "$ws")

case "$stage" in
  setup)
    "$vb" kernelbench setup "${common[@]}" --problem "$problems" --backend cuda 2>&1 | tee "$out/setup.txt"
    ;;
  score)
    [ -d "$ws/kernelbench/level1" ] || "$vb" kernelbench setup "${common[@]}" --problem "$problems" --backend cuda >"$out/setup.txt" 2>&1
    extra=()
    [ "${COMPILE:-1}" = 1 ] && extra+=(--compile)
    name="score-$tag-$(echo "$problems" | tr , -)"
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } >"$out/$name.env" 2>&1
    "$vb" kernelbench score "${common[@]}" --problem "$problems" --backend cuda --reps "${REPS:-100}" \
      "${extra[@]}" --progress --markdown "$out/$name.md" 2>&1 | tee "$out/$name.txt"
    ;;
  optimize)
    for d in "$ws"/kernelbench/level1/*/; do
      id="$(basename "$d" | cut -d_ -f1)"
      case ",$problems," in *",$id,"*) ;; *) continue ;; esac
      grep -q '"mapped": true' "$d/problem.json" 2>/dev/null || continue
      echo "== optimize $d" | tee -a "$out/optimize.txt"
      (cd "$d" && timeout 280 "$vb" optimize --kernel . --budget "${BUDGET:-2m}" 2>&1 | tail -5) | tee -a "$out/optimize.txt"
    done
    ;;
  merge)
    python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
P = [0.0, 1.0, 1.5, 2.0, 3.0, 5.0]
key = lambda p: "0" if p == 0 else f"{p:.1f}"
lines = ["# KernelBench Level 1 on the H200 (bench/kernelbench_h200.sh)", ""]
doc = {}
for tag in sorted({os.path.basename(f).split("-")[1] for f in glob.glob(f"{out}/score-*.json")}):
    rows = {}
    for f in sorted(glob.glob(f"{out}/score-{tag}-*.json")):
        for r in json.load(open(f))["problems"]:
            rows[r["label"]] = r  # a later run of a problem replaces an earlier one
    rs = list(rows.values())
    n = len(rs)
    fp = {key(p): sum(1 for r in rs if r["correct"] and (r["speedup"] or 0) > p) / n for p in P}
    fpc = {key(p): sum(1 for r in rs if r["correct"] and (r.get("speedup_vs_compile") or 0) > p) / n for p in P}
    doc[tag] = {"n": n, "correct": sum(r["correct"] for r in rs), "fast_p": fp, "fast_p_compile": fpc, "problems": rs}
    lines += [f"## {tag}: {n} problems, {doc[tag]['correct']} correct", "",
              "| baseline | " + " | ".join(f"fast_{key(p)}" for p in P) + " |", "|---" * (len(P) + 1) + "|",
              "| eager Model | " + " | ".join(f"{fp[key(p)]:.3f}" for p in P) + " |",
              "| torch.compile(Model) | " + " | ".join(f"{fpc[key(p)]:.3f}" for p in P) + " |", "",
              "| problem | kernel | correct | Model us | compile us | VladBud us | speedup | vs compile | fp64 rel. err | guard |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda v, s: s.format(v) if isinstance(v, (int, float)) else "-"
    for r in sorted(rs, key=lambda r: int(r["label"].split("/")[1].split("_")[0])):
        lines.append(f"| {r['label']} | {r.get('kernel', '-')} | {'yes' if r['correct'] else 'no'} | "
                     f"{f(r.get('ref_us'), '{:.1f}')} | {f(r.get('compile_us'), '{:.1f}')} | {f(r.get('new_us'), '{:.1f}')} | "
                     f"{f(r.get('speedup'), '{:.3f}x')} | {f(r.get('speedup_vs_compile'), '{:.3f}x')} | "
                     f"{f(r.get('fp64_rel_err'), '{:.2e}')} | {r.get('guard') or '-'} {r.get('fp64_note', '')} |")
    lines.append("")
open(f"{out}/kernelbench-h200.md", "w").write("\n".join(lines) + "\n")
json.dump(doc, open(f"{out}/kernelbench-h200.json", "w"), indent=1)
print("\n".join(lines))
EOF
    ;;
  *) echo "unknown stage $stage (setup, score, optimize, merge)" >&2; exit 2 ;;
esac
