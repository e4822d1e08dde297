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
#   there (repo root, carrying .h200 and .kb), all 16 in one call (setup, score with eager and
#   torch.compile baselines in groups of four, merge; inputs drawn on the GPU, 20 timed calls;
#   estimated 5-8 minutes, not measured yet: $OUT/kernelbench/all-times.txt records it):
#           bash bench/kernelbench_h200.sh all
#   If that runs past the call's limit: PROBLEMS=1,2,4,6,7,8,9,16 ... all, then
#   PROBLEMS=17,18,23,36,40,47,95,97 ... all, and `OUT=DIR bash bench/kernelbench_h200.sh merge`
#   here over both calls' files copied into DIR/kernelbench/. Or stage by stage (one call per
#   line, each under 10 minutes):
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
# on a fresh one). Stages: all, matmul-check (the CUDA matmul under VladBud's own evaluator, plain
# and with its TF32 path: PASS and FAIL expected), setup, score, optimize, merge. Environment:
# PROBLEMS (ids, default all 16), TAG (label of a score run, default starters), BUDGET (optimize per kernel, default 2m),
# REPS (timed calls per model, default 100; 20 for `all`), COMPILE (1: time torch.compile(Model)
# too; default 1), ON_DEVICE (1: draw get_inputs() on the GPU, --inputs-on-device; default 1 for
# `all`, else 0), TF32 (0: build fp32 matmul problems in true fp32, --no-tf32; default 1),
# TIMEOUT (seconds per problem, default 300).
#
# Rehearsal on a CPU machine (no GPU; the stages' commands and the merge run for real):
#           bash bench/kernelbench_h200.sh --pack /tmp/KernelBench --shrink  # sizes cut to ~sqrt
#           VB=build/vladbud BACKEND=cpu REPS=2 COMPILE=0 bash bench/kernelbench_h200.sh all
# --dry-run before a stage prints the commands instead of running them.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
ids="1 2 4 6 7 8 9 16 17 18 23 36 40 47 95 97"

if [ "${1:-}" = "--pack" ]; then
  src="${2:?usage: bench/kernelbench_h200.sh --pack PATH/TO/KernelBench-checkout [--shrink]}"
  shrink="${3:-}"
  [ -z "$shrink" ] || [ "$shrink" = --shrink ] || { echo "unknown option $shrink (--shrink)" >&2; exit 2; }
  l1="$src/KernelBench/level1"
  [ -d "$l1" ] || { echo "no $l1: clone https://github.com/ScalingIntelligence/KernelBench there" >&2; exit 2; }
  rm -rf .kb && mkdir -p .kb/KernelBench/level1
  for i in $ids; do
    f=$(ls "$l1"/"${i}"_*.py 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "problem $i missing in $l1" >&2; exit 2; }
    if [ -n "$shrink" ]; then
      # CPU rehearsal only: every top-level integer constant v >= 16 becomes round(sqrt(v)) (axis
      # indices such as `dim = 1` and `reduce_dim = 1` are below 16 and kept); the forward is unchanged.
      python3 - "$f" ".kb/KernelBench/level1/$(basename "$f")" <<'EOF'
import math, re, sys
out = []
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z_][A-Za-z_0-9]*) *= *([0-9][0-9 *]*?)\s*(#.*)?$", line.rstrip("\n"))
    v = eval(m.group(2)) if m else 0  # digits, spaces and * only
    if v >= 16:
        line = f"{m.group(1)} = {round(math.sqrt(v))}  # shrunk from {v} (CPU rehearsal)\n"
    out.append(line)
open(sys.argv[2], "w").write("".join(out))
EOF
    else
      cp "$f" .kb/KernelBench/level1/
    fi
  done
  [ -z "$shrink" ] || echo "shrunk (CPU rehearsal; never score these on the H200)" >.kb/SHRUNK
  (cd "$src" && git rev-parse HEAD 2>/dev/null) >.kb/COMMIT || true
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.kb/' "$exclude" 2>/dev/null || echo '/.kb/' >>"$exclude"
  ls .kb/KernelBench/level1 | wc -l | xargs echo "packed problems:" >&2
  exit 0
fi

dry=""
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
stage="${1:?usage: bench/kernelbench_h200.sh [--dry-run] all | matmul-check | setup | score | optimize | merge, or --pack DIR [--shrink]}"
out="${OUT:-$here/h200-out}/kernelbench"
ws="${WS:-/tmp/vb-kb-ws}"
backend="${BACKEND:-cuda}"
mkdir -p "$out" "$ws"
export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
vb="${VB:-$here/.h200/vladbud}"
case "$vb" in /*) ;; *) vb="$here/$vb" ;; esac
if [ -z "${VB:-}" ]; then  # the packed H200 tree (bench/h200_all.sh --pack)
  export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
  export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
  export VB_RUNNER="$here/.h200/vladbud-runner" VB_PYTHON="${VB_PYTHON:-python3}"
fi
export PYTHONUNBUFFERED=1
[ -n "$dry" ] || [ "$stage" = merge ] || [ -x "$vb" ] || { echo "no $vb: run bash bench/h200_all.sh --pack here and carry .h200 (or set VB=build/vladbud)" >&2; exit 2; }
[ -n "$dry" ] || [ "$stage" = merge ] || [ -d .kb/KernelBench/level1 ] || { echo "no .kb/: run bench/kernelbench_h200.sh --pack DIR here and carry .kb" >&2; exit 2; }
if [ "$backend" = cuda ] && [ -f .kb/SHRUNK ] && [ "$stage" != merge ] && [ -z "$dry" ]; then
  echo ".kb/ holds shrunk problems (a CPU rehearsal): run --pack DIR without --shrink first" >&2; exit 2
fi
problems="${PROBLEMS:-$(echo $ids | tr ' ' ,)}"
tag="${TAG:-starters}"
common=(--kb-root .kb --level 1 --workspace "$ws")
# Runs (or with --dry-run prints) a command.
run() { if [ -n "$dry" ]; then printf '%q ' "$@"; echo; else "$@"; fi; }

score() {  # score NAME REPS ON_DEVICE: one kernelbench score run of $problems -> $out/NAME.{md,json,txt}
  local name="$1" reps="$2" ondev="$3" extra=()
  [ "${COMPILE:-1}" = 1 ] && extra+=(--compile)
  [ "$ondev" = 1 ] && [ "$backend" != cpu ] && extra+=(--inputs-on-device)
  [ "${TF32:-1}" = 1 ] || extra+=(--no-tf32)
  [ -n "$dry" ] || { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; echo "date: $(date -u +%FT%TZ)"; } >"$out/$name.env"
  run "$vb" kernelbench score "${common[@]}" --problem "$problems" --backend "$backend" --reps "$reps" \
    --timeout "${TIMEOUT:-300}" "${extra[@]}" --progress --markdown "$out/$name.md" 2>&1 | tee "$out/$name.txt"
}

case "$stage" in
  all)
    t0=$(date +%s)
    run "$vb" kernelbench setup "${common[@]}" --problem "$problems" --backend "$backend" >"$out/setup.txt" 2>&1 ||
      { cat "$out/setup.txt" >&2; exit 1; }
    [ -z "$dry" ] || cat "$out/setup.txt"
    echo "setup: $(( $(date +%s) - t0 )) s" | tee "$out/all-times.txt"
    # In groups of four, each written as it finishes: a run cut short still leaves the finished
    # groups for `merge` (which also runs here on the machine that receives $OUT).
    all_problems="$problems"
    set -- $(echo "$all_problems" | tr , ' ')
    g=0
    while [ $# -gt 0 ]; do
      group="$1"; shift
      for _ in 1 2 3; do [ $# -gt 0 ] && { group="$group,$1"; shift; }; done
      g=$((g + 1))
      problems="$group" score "score-$tag-$(echo "$group" | tr , -)" "${REPS:-20}" "${ON_DEVICE:-1}"
      echo "group $g ($group): $(( $(date +%s) - t0 )) s since start" | tee -a "$out/all-times.txt"
    done
    problems="$all_problems"
    [ -n "$dry" ] || bash "$0" merge
    ;;
  matmul-check)
    # The CUDA matmul starter under VladBud's own evaluator (true fp32 contract, all dtypes, edge
    # shapes incl. N = 1 through the GEMV): as built normally it must PASS; built with
    # VB_PRECISION_TF32 (what `kernelbench bench` does for an fp32 matmul folder) its fp32 results
    # must FAIL VladBud's fp32 threshold (TF32 is KernelBench mode only), fp16/bf16 unaffected.
    tf="$ws/tf32_matmul.cu"
    { echo '#define VB_PRECISION_TF32 1'; echo "#line 1 \"$here/kernels/cuda/matmul.cu\""; cat kernels/cuda/matmul.cu; } >"$tf"
    run "$vb" bench --kernel matmul --backend "$backend" --no-timing 2>&1 | tee "$out/matmul-check-fp32.txt"
    echo "== expected: PASS (true fp32)" | tee -a "$out/matmul-check-fp32.txt"
    run "$vb" bench --kernel matmul --backend "$backend" --no-timing --source "$tf" 2>&1 | tee "$out/matmul-check-tf32.txt"
    echo "== expected: FAIL at fp32 accuracy only (TF32 under VladBud's fp32 contract)" | tee -a "$out/matmul-check-tf32.txt"
    ;;
  setup)
    run "$vb" kernelbench setup "${common[@]}" --problem "$problems" --backend "$backend" 2>&1 | tee "$out/setup.txt"
    ;;
  score)
    [ -d "$ws/kernelbench/level1" ] || run "$vb" kernelbench setup "${common[@]}" --problem "$problems" --backend "$backend" >"$out/setup.txt" 2>&1
    score "score-$tag-$(echo "$problems" | tr , -)" "${REPS:-100}" "${ON_DEVICE:-0}"
    ;;
  optimize)
    for d in "$ws"/kernelbench/level1/*/; do
      id="$(basename "$d" | cut -d_ -f1)"
      case ",$problems," in *",$id,"*) ;; *) continue ;; esac
      grep -q '"mapped": true' "$d/problem.json" 2>/dev/null || continue
      echo "== optimize $d" | tee -a "$out/optimize.txt"
      (cd "$d" && run timeout 280 "$vb" optimize --kernel . --budget "${BUDGET:-2m}" 2>&1 | tail -5) | tee -a "$out/optimize.txt"
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
    def when(f):  # the date of that score run: the .env's "date: " line (score() writes it)
        env = f[:-5] + ".env"
        if not os.path.exists(env):
            return ""
        lines = [l.strip() for l in open(env).read().splitlines() if l.strip()]
        dated = [l[len("date: "):] for l in lines if l.startswith("date: ")]
        return dated[-1] if dated else (lines[-1] if lines else "")
    rows = {}
    # Oldest run first, so a later run of a problem replaces an earlier one's row.
    for f in sorted(glob.glob(f"{out}/score-{tag}-*.json"), key=lambda f: (when(f), f)):
        w = when(f)
        for r in json.load(open(f))["problems"]:
            if w:
                r.setdefault("measured", w)
            rows[r["label"]] = r
    rs = list(rows.values())
    n = len(rs)
    fp = {key(p): sum(1 for r in rs if r["correct"] and (r["speedup"] or 0) > p) / n for p in P}
    fpc = {key(p): sum(1 for r in rs if r["correct"] and (r.get("speedup_vs_compile") or 0) > p) / n for p in P}
    doc[tag] = {"n": n, "correct": sum(r["correct"] for r in rs), "fast_p": fp, "fast_p_compile": fpc, "problems": rs}
    lines += [f"## {tag}: {n} problems, {doc[tag]['correct']} correct", "",
              "| baseline | " + " | ".join(f"fast_{key(p)}" for p in P) + " |", "|---" * (len(P) + 1) + "|",
              "| eager Model | " + " | ".join(f"{fp[key(p)]:.3f}" for p in P) + " |",
              *(["| torch.compile(Model) | " + " | ".join(f"{fpc[key(p)]:.3f}" for p in P) + " |"]
                if any(isinstance(r.get("compile_us"), (int, float)) for r in rs) else []), "",
              "| problem | kernel | precision | correct | Model us | compile us | VladBud us | speedup | vs compile | fp64 rel. err | guard | measured | reason |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda v, s: s.format(v) if isinstance(v, (int, float)) else "-"
    for r in sorted(rs, key=lambda r: int(r["label"].split("/")[1].split("_")[0])):
        reason = (r.get("reason") or "").replace("|", "/").replace("\n", " ")[:200]
        lines.append(f"| {r['label']} | {r.get('kernel', '-')} | {(r.get('precision') or 'fp32').upper()} | "
                     f"{'yes' if r['correct'] else 'no'} | "
                     f"{f(r.get('ref_us'), '{:.1f}')} | {f(r.get('compile_us'), '{:.1f}')} | {f(r.get('new_us'), '{:.1f}')} | "
                     f"{f(r.get('speedup'), '{:.3f}x')} | {f(r.get('speedup_vs_compile'), '{:.3f}x')} | "
                     f"{f(r.get('fp64_rel_err'), '{:.2e}')} | {r.get('guard') or '-'} | {r.get('measured') or '-'} | "
                     f"{reason} {r.get('fp64_note', '')} |")
    doc[tag]["tf32_problems"] = sorted(r["label"] for r in rs if r.get("precision") == "tf32")
    lines += ["", "TF32 (fp32 operands rounded to TF32 on tensor cores, admitted by KernelBench's allclose(1e-2), "
              "not by VladBud's fp32 contract): " + (", ".join(doc[tag]["tf32_problems"]) or "none")]
    lines.append("")
open(f"{out}/kernelbench-h200.md", "w").write("\n".join(lines) + "\n")
json.dump(doc, open(f"{out}/kernelbench-h200.json", "w"), indent=1)
print("\n".join(lines))
EOF
    ;;
  *) echo "unknown stage $stage (all, matmul-check, setup, score, optimize, merge)" >&2; exit 2 ;;
esac
