#!/usr/bin/env bash
# The blind Triton ranking study of issue 17 ("Measure"): rank the Triton variants of softmax,
# rmsnorm and matmul (bench/variants/triton-blind1/<type>/*.py, written by
# bench/triton_variants.py: block sizes, num_warps, num_stages) for the H200 and the MI300X with
# the compile-only rungs alone (Triton -> PTX/cubin or amdgcn, ptxas/SASS or VGPR numbers,
# occupancy, roofline: no GPU), commit that prediction, then measure on an H200 and score it.
# There is no AMD GPU to measure the MI300X prediction on.
#
#   bench/ranking_triton.sh --predict [TARGET ...]  here (no GPU): `vladbud rank TYPE --backend
#                                  triton --targets TARGET --max-rung 3` in bf16 at the GPU
#                                  benchmark size; writes bench/results/ranking-triton-TARGET-
#                                  prediction.json per target (default: h200 mi300x)
#   bench/ranking_triton.sh --measure OUTDIR        on the H200 machine: every variant checked
#                                  against PyTorch and timed with triton.testing.do_bench in bf16
#                                  at the same shapes (bench/ranking_triton_measure.py); writes
#                                  OUTDIR/ranking-triton-measured-<h200|h100-sxm>.json (the GPU
#                                  found names it)
#   bench/ranking_triton.sh --score [FILE]          Kendall tau and top-1 regret per kernel type
#                                  (bench/ranking_score.py) of the prediction for FILE's target;
#                                  writes bench/results/ranking-triton-<target>.md
# VB names the vladbud binary (default build/vladbud); PY the Python with torch and triton
# (default .venv/bin/python, else python3, as on the H200 machine); VARIANTS the variant folder; RANK_TYPES a subset of the types;
# STUDY a name put into every file name (STUDY=blind2: ranking-triton-blind2-TARGET-prediction.json,
# ranking-triton-blind2-measured-TARGET.json, ranking-triton-blind2-TARGET.md; default: study 1's names).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vb="${VB:-$here/build/vladbud}"
py="${PY:-}"
[ -z "$py" ] && { [ -x "$here/.venv/bin/python" ] && py="$here/.venv/bin/python" || py="$(command -v python3)"; }
read -r -a types <<<"${RANK_TYPES:-softmax rmsnorm matmul}"
vdir="${VARIANTS:-$here/bench/variants/triton-blind1}"
case "$vdir" in /*) ;; *) vdir="$here/$vdir" ;; esac
mode="${1:-}"
st="${STUDY:+$STUDY-}"

case "$mode" in
--predict)
  [ -x "$vb" ] || { echo "ranking_triton.sh: $vb not found; build first (scripts/setup.sh)" >&2; exit 2; }
  shift
  targets=("$@")
  [ ${#targets[@]} -eq 0 ] && targets=(h200 mi300x)
  for tg in "${targets[@]}"; do
    tmp="$(mktemp -d)"
    for t in "${types[@]}"; do
      echo "ranking_triton: predicting $t for $tg (rungs 0-3, bf16)" >&2
      "$vb" rank "$t" --backend triton --targets "$tg" --variants "$vdir/$t" --max-rung 3 \
        --dtype bf16 --json >"$tmp/$t.json"
    done
    "$py" - "$tmp" "$here/bench/results/ranking-triton-$st$tg-prediction.json" "$vdir" "$tg" "${types[@]}" <<'PY'
import json, os, sys, subprocess, datetime, platform
import triton
tmp, out, vdir, target, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "machine": f"{platform.node()} (no GPU)",
       "command": f"{'STUDY=' + os.environ['STUDY'] + ' ' if os.environ.get('STUDY') else ''}"
                  f"bench/ranking_triton.sh --predict {target} (vladbud rank TYPE --backend triton --targets {target} "
                  f"--variants {os.path.relpath(vdir)}/TYPE --max-rung 3 --dtype bf16 --json)",
       "tools": {"triton": triton.__version__}, "types": {},
       "commit": subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                                text=True).stdout.strip()}
for t in types:
    r = json.load(open(f"{tmp}/{t}.json"))
    doc["types"][t] = {}
    for tg in r["targets"]:
        rows, size = [], None
        for e in tg["ranking"]:
            est = e.get("estimate") or {}
            ev = {x["rung"]: x for x in e.get("evidence", [])}
            size = size or (ev.get(3, {}).get("data") or {}).get("size")
            for x in ev.values():
                if x.get("tool_version"):
                    doc["tools"].setdefault(f"rung{x['rung']}", x["tool_version"])
            rows.append({"variant": e["variant"], "position": e.get("position"), "tie_group": e.get("tie_group"),
                         "rung": e.get("highest_rung"), "rejected": e.get("rejected"),
                         "estimate_us": est.get("time_us"), "low_us": est.get("low_us"),
                         "high_us": est.get("high_us"), "basis": est.get("basis"),
                         "rung0": ev.get(0, {}).get("summary"), "rung1": ev.get(1, {}).get("summary")})
        doc["types"][t][tg["id"]] = {"size": size, "dtype": r.get("dtype"), "ranking": rows}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out)
PY
    rm -rf "$tmp"
  done ;;
--measure)
  outdir="${2:?--measure needs OUTDIR}"
  # The GPU found names the target (nvidia-smi: H100 -> h100-sxm, H200 -> h200), as in
  # ranking_cuda.sh: a measurement scores only against the prediction for that GPU.
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  case "$gpu" in
    *H100*) mt=h100-sxm ;;
    *H200*) mt=h200 ;;
    *) echo "ranking_triton.sh: no prediction target for the GPU '${gpu:-none found}' (nvidia-smi); the study predicts h200 and h100-sxm" >&2; exit 2 ;;
  esac
  "$py" "$here/bench/ranking_triton_measure.py" --variants "$vdir" --types "$(IFS=,; echo "${types[*]}")" \
    --target "$mt" --out "$outdir/ranking-triton-${st}measured-$mt.json" ;;
--score)
  # The measurement's own target (h200 or h100-sxm) picks the prediction it is scored against.
  measured="${2:-$here/bench/results/ranking-triton-${st}measured-h200.json}"
  mt="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["target"])' "$measured")"
  python3 "$here/bench/ranking_score.py" "$here/bench/results/ranking-triton-$st$mt-prediction.json" \
    "$measured" --title "Blind Triton ranking study${STUDY:+ $STUDY}: Triton variants on the $mt" \
    --out "${SCORE_OUT:-$here/bench/results/ranking-triton-$st$mt.md}" ;;
*) sed -n '2,22p' "$0"; exit 2 ;;
esac
