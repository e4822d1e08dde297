#!/usr/bin/env bash
# Issue 21's measurement: the optimizer's experiments/hour, the sequential loop against the same
# loop fanned out over a local Dask cluster (1 GPU worker measuring + CPU workers building
# ahead), side by side, same budget, same kernel folders (bench/optimizer.sh's: softmax
# 16384x2048 and RMSNorm 8192x4096 fp32 CUDA starters), each run with a fresh build cache.
# Writes $OUT/scaleout.json and $OUT/scaleout.md (plus $OUT/scaleout-runs.tar.gz: both
# workspaces' results.tsv, logs, pool log, GPU samples).
#
#   here:  bash bench/h200_all.sh --pack && bash bench/fetch_dask_wheels.sh
#   there: bash bench/scaleout_h200.sh            (carry .h200 and .whl)
#   here, without a GPU: SCALE_BACKEND=cpu SCALE_BUDGET=45s bash bench/scaleout_h200.sh
#   any:   bash bench/scaleout_h200.sh --dry-run  (checks the prerequisites, prints the commands)
# Env: SCALE_BUDGET (default 3m per run; the call also needs ~40-60 s of setup and calibration,
#      so a call limit under 2 x budget + 60 s cuts the pool run: the table is rewritten after
#      each run, so a cut call still returns the runs that finished),
#      SCALE_WORKERS (default: 1 per GPU + 8 build workers, at most the cores - 2),
#      SCALE_BACKEND (cuda, or cpu for the path testable here), SCALE_RUNS ("seq pool" by default).
# GPU busy: nvidia-smi utilization sampled every 0.5 s (share of samples > 0 and the mean), and
# the share of the wall time spent inside measurement tasks (quick/full/compare) per the pool log.
# Per task op (pool log): count, mean seconds, how many measuring tasks found their build in the
# cache (built=cached) or compiled it themselves (built=compiled: a build done ahead was not
# reused), and the evaluator's own seconds (the rest of a task is its vladbud process and the
# Dask hop). Overshoot: wall time minus the budget (the pool counts its start-up in the budget).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
backend="${SCALE_BACKEND:-cuda}"
budget="${SCALE_BUDGET:-3m}"
runs="${SCALE_RUNS:-seq pool}"
out="${OUT:-$here/scaleout-out}"
mkdir -p "$out"
if [ -x .h200/vladbud ]; then
  export VLADBUD_HOME="$here" PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
  export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
  export VB_RUNNER="$here/.h200/vladbud-runner" VB="$here/.h200/vladbud" VB_PYTHON="${VB_PYTHON:-python3}"
  vb="$here/.h200/vladbud"
else
  vb="${VB:-$here/build/vladbud}"
  export VB="$vb"
fi
py="${VB_PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}"
export PYTHONUNBUFFERED=1
[ -x "$vb" ] || { echo "scaleout_h200.sh: no vladbud at $vb (here: bash bench/h200_all.sh --pack)" >&2; exit 2; }
# Dask: installed, or from the carried wheels into a private folder (no registry there).
if ! "$py" -c 'import distributed' 2>/dev/null; then
  [ -d .whl ] || { echo "scaleout_h200.sh: $py has no Dask and .whl/ is missing (here: bash bench/fetch_dask_wheels.sh, then carry .whl)" >&2; exit 2; }
  if [ $dry = 1 ]; then
    echo "would install: $py -m pip install --no-index --no-deps --target /tmp/vb-dask .whl/*.whl"
  else
    # --no-deps: the other dependencies are the image's own (fetch_dask_wheels.sh lists them).
    "$py" -m pip install -q --no-index --no-deps --target /tmp/vb-dask .whl/*.whl >&2
    export PYTHONPATH="/tmp/vb-dask${PYTHONPATH:+:$PYTHONPATH}"
    "$py" -c 'import distributed' || { echo "scaleout_h200.sh: Dask from .whl/ does not import" >&2; exit 2; }
  fi
fi
cores="$(nproc)"
gpus=0
if [ "$backend" != cpu ]; then
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
  [ "$gpus" -ge 1 ] || [ $dry = 1 ] || { echo "scaleout_h200.sh: no GPU (nvidia-smi -L); SCALE_BACKEND=cpu runs the CPU path" >&2; exit 2; }
fi
if [ -n "${SCALE_WORKERS:-}" ]; then
  workers="$SCALE_WORKERS"
else
  builders=$(( cores - 2 < 8 ? cores - 2 : 8 )); [ $builders -lt 1 ] && builders=1
  workers=$(( gpus + builders ))
fi
if [ "$backend" = cpu ]; then
  ext=cpp; sm='"label": "gpt2-attn-3072x256", "dims": {"R": 3072, "C": 256}'
  rn='"label": "llm-512x2048", "dims": {"M": 512, "N": 2048}'
else
  ext=cu; sm='"label": "llama-attn-16384x2048", "dims": {"R": 16384, "C": 2048}'
  rn='"label": "llama-8192x4096", "dims": {"M": 8192, "N": 4096}'
fi
tmp="$(mktemp -d)"
make_ws() {  # the same two folders as bench/optimizer.sh
  local ws="$1"
  mkdir -p "$ws/kernels/01_softmax" "$ws/kernels/02_rmsnorm"
  cp "kernels/$backend/softmax.$ext" "$ws/kernels/01_softmax/"
  cp "kernels/$backend/rmsnorm.$ext" "$ws/kernels/02_rmsnorm/"
  printf '{"kernel": "softmax", "dtype": "fp32", "backend": "%s", "model": "bench", "size": {%s}, "time_share": 0.5}\n' "$backend" "$sm" >"$ws/kernels/01_softmax/problem.json"
  printf '{"kernel": "rmsnorm", "dtype": "fp32", "backend": "%s", "model": "bench", "size": {%s}, "time_share": 0.5}\n' "$backend" "$rn" >"$ws/kernels/02_rmsnorm/problem.json"
}
user_cache="${VB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vladbud}"
warm_ceilings() {  # measured once, before both runs (not the optimizer's work, not in a budget)
  ls "$user_cache"/ceilings/*.json >/dev/null 2>&1 && return 0
  echo "== measuring the local ceilings once (vladbud targets --calibrate)" >&2
  mkdir -p "$user_cache"
  VB_CACHE_DIR="$user_cache" "$vb" targets --calibrate --json >/dev/null 2>"$tmp/calibrate.log" ||
    echo "scaleout_h200.sh: calibration failed (see calibrate.log); each run measures its own" >&2
}
run_one() {  # NAME EXTRA-ARGS...
  local name="$1"; shift
  local ws="$tmp/$name/workspace"
  make_ws "$ws"
  # A fresh build cache per run (the measured ceilings copied: not the optimizer's work).
  export VB_CACHE_DIR="$tmp/$name/vb-cache"
  mkdir -p "$VB_CACHE_DIR/ceilings"
  cp "$user_cache"/ceilings/*.json "$VB_CACHE_DIR/ceilings/" 2>/dev/null || true
  # --ceiling 100: a throughput run keeps every folder in the loop. With the default 90 %, the
  # softmax starter (90.2 % of its ceiling since the grid change of 286f38e) stopped at once on
  # the H100 at 16:07Z and left one folder: 4 / 2 experiments, nothing to compare.
  local cmd=("$vb" optimize --workspace "$ws" --budget "$budget" --plateau 100000 --ceiling 100 --no-git --json "$@")
  echo "== $name: ${cmd[*]}" >&2
  local smi=""
  if [ "$backend" != cpu ]; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 >"$tmp/$name/gpu.csv" 2>/dev/null &
    smi=$!
  fi
  local t0 t1
  t0=$(date +%s.%N)
  "${cmd[@]}" >"$tmp/$name/out.json" 2>"$tmp/$name/optimize.log" || echo "$name: vladbud exited $?" >&2
  t1=$(date +%s.%N)
  [ -n "$smi" ] && kill "$smi" 2>/dev/null && wait "$smi" 2>/dev/null || true
  echo "$t0 $t1" >"$tmp/$name/wall.txt"
  echo "${cmd[*]}" >"$tmp/$name/cmd.txt"
}
if [ $dry = 1 ]; then
  echo "backend=$backend budget=$budget workers=$workers (gpus=$gpus, cores=$cores) runs=$runs vladbud=$vb python=$py"
  echo "seq:  $vb optimize --workspace WS --budget $budget --plateau 100000 --ceiling 100 --no-git --json"
  echo "pool: $vb optimize --workspace WS --budget $budget --plateau 100000 --ceiling 100 --no-git --json --workers $workers"
  exit 0
fi
for r in $runs; do
  case "$r" in seq | pool) ;; *) echo "scaleout_h200.sh: unknown run $r (seq, pool)" >&2; exit 2 ;; esac
done
# The table of the runs finished so far ($1), written to $out with the raw files packed: called
# after every run, so that a device call cut short (2026-12-07 19:00Z: the call's `timeout 340`
# killed the pool run of a 150 s budget and nothing came back) still brings back what finished.
summarize() {
"$py" - "$tmp" "$out" "$backend" "$budget" "$workers" "$1" <<'PY'
import json, os, re, sys, datetime, statistics
tmp, out, backend, budget, workers, runs = sys.argv[1:7]
res = {"date": f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC", "backend": backend,
       "budget": budget, "workers": int(workers), "runs": {}}
for name in runs.split():
    d = os.path.join(tmp, name)
    t0, t1 = map(float, open(os.path.join(d, "wall.txt")).read().split())
    wall = t1 - t0
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(d, "workspace", "results.tsv"))][1:]
    exps = [r for r in rows if r[1] != "baseline"]
    r = {"command": open(os.path.join(d, "cmd.txt")).read().strip(), "wall_s": round(wall, 1),
         "experiments": len(exps), "experiments_per_hour": round(3600 * len(exps) / max(wall, 1), 1),
         "kept": sum(1 for x in exps if x[1] == "keep"), "lost": sum(1 for x in exps if x[1] == "lost"),
         "per_kernel": {}}
    for x in exps:
        k = re.search(r"kdir=(\S+)", x[9])
        k = k.group(1) if k else "?"
        r["per_kernel"][k] = r["per_kernel"].get(k, 0) + 1
    g = os.path.join(d, "gpu.csv")
    if os.path.exists(g):
        u = [float(v) for v in open(g).read().split() if re.fullmatch(r"\d+(\.\d+)?", v)]
        if u:
            r["gpu_util_mean_pct"] = round(statistics.mean(u), 1)
            r["gpu_busy_sample_share"] = round(sum(1 for v in u if v > 0) / len(u), 3)
    m_b = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s?)?", budget.strip())
    if m_b and any(m_b.groups()):
        b_s = 3600 * float(m_b.group(1) or 0) + 60 * float(m_b.group(2) or 0) + float(m_b.group(3) or 0)
        r["budget_s"] = b_s
        r["overshoot_s"] = round(wall - b_s, 1)
    log = os.path.join(d, "workspace", "cache", "pool.log")
    if os.path.exists(log):
        per, built, evals = {}, {}, {}
        for m in re.finditer(r"vb-pool task op=(\w+) id=\d+ worker=(\S*) seconds=([\d.]+)"
                             r"(?: eval=([\d.]+))?(?: built=(\w+))?", open(log).read()):
            op = m.group(1)
            per.setdefault(op, []).append(float(m.group(3)))
            if m.group(4):
                evals.setdefault(op, []).append(float(m.group(4)))
            if m.group(5):
                built.setdefault(op, {}).setdefault(m.group(5), 0)
                built[op][m.group(5)] += 1
        r["task_seconds"] = {op: {"n": len(v), "mean": round(statistics.mean(v), 2), "sum": round(sum(v), 1),
                                  "eval_mean": round(statistics.mean(evals[op]), 2) if op in evals else None,
                                  "built": built.get(op, {})}
                             for op, v in per.items()}
        r["cancelled_tasks"] = len(re.findall(r"vb-pool task op=\w+ id=\d+ cancelled", open(log).read()))
        meas = sum(sum(v) for op, v in per.items() if op in ("quick", "full", "compare", "timing"))
        r["measure_task_share_of_wall"] = round(meas / max(wall, 1e-9), 3)
    try:
        r["summary"] = json.load(open(os.path.join(d, "out.json"))).get("pool")
    except Exception:
        pass
    res["runs"][name] = r
if "seq" in res["runs"] and "pool" in res["runs"]:
    s, p = res["runs"]["seq"]["experiments_per_hour"], res["runs"]["pool"]["experiments_per_hour"]
    res["ratio_pool_over_seq"] = round(p / s, 2) if s else None
    res["bar_2x_148"] = p >= 2 * 148 if backend == "cuda" else None
json.dump(res, open(os.path.join(out, "scaleout.json"), "w"), indent=2)
L = [f"# Optimizer scale-out ({backend}): sequential loop vs Dask worker pool\n",
     f"* date: {res['date']}; budget {budget} per run; pool: --workers {workers}",
     "* same kernel folders (bench/optimizer.sh's), fresh build cache per run\n",
     "| run | experiments | wall (s) | over budget (s) | experiments/hour | kept | lost | GPU util mean (%) | GPU samples busy | measure-task s / wall (summed over device workers) |",
     "|---|---|---|---|---|---|---|---|---|---|"]
for name, r in res["runs"].items():
    L.append(f"| {name} | {r['experiments']} | {r['wall_s']} | {r.get('overshoot_s', 'n/a')} | **{r['experiments_per_hour']}** | {r['kept']} | {r['lost']} | "
             f"{r.get('gpu_util_mean_pct', 'n/a')} | {r.get('gpu_busy_sample_share', 'n/a')} | {r.get('measure_task_share_of_wall', 'n/a')} |")
if res.get("ratio_pool_over_seq") is not None:
    L.append(f"\npool / sequential: **{res['ratio_pool_over_seq']}x**" +
             (f" (bar: >= 2x today's 148/hour = 296/hour: {'met' if res['bar_2x_148'] else 'NOT met'})" if backend == "cuda" else ""))
for name, r in res["runs"].items():
    if "task_seconds" in r:
        L.append(f"\nTask time in the {name} run (pool log; build = compile on any worker, the others on the device's worker):\n")
        L.append("| task | n | mean (s) | sum (s) | evaluator mean (s) | build cached / compiled |\n|---|---|---|---|---|---|")
        for op, v in sorted(r["task_seconds"].items()):
            b = v.get("built") or {}
            L.append(f"| {op} | {v['n']} | {v['mean']} | {v['sum']} | {v.get('eval_mean') if v.get('eval_mean') is not None else 'n/a'} | "
                     f"{b.get('cached', 0)} / {b.get('compiled', 0)} |")
        L.append(f"\ncancelled at the deadline: {r.get('cancelled_tasks', 0)} task(s)")
open(os.path.join(out, "scaleout.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
tar -C "$tmp" -czf "$out/scaleout-runs.tar.gz" --exclude=vb-cache . 2>/dev/null || true
}
warm_ceilings
done_runs=""
for r in $runs; do
  case "$r" in
    seq) run_one seq ;;
    pool) run_one pool --workers "$workers" ;;
  esac
  done_runs="$done_runs $r"
  summarize "$done_runs" >"$tmp/summary.txt"
done
cat "$tmp/summary.txt"
