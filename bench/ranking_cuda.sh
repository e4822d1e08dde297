#!/usr/bin/env bash
# The blind GPU ranking study of issue 5: rank the CUDA variants of softmax, rmsnorm and matmul
# (bench/variants/cuda/<type>/*.cu: block sizes, vector widths, threads per row, tiles, stages,
# wgmma) for the H200 with the compile-only rungs alone (nvcc/ptxas, SASS mix, occupancy,
# roofline: no GPU), commit that prediction, then measure them on the H200 and score it.
#
#   bench/ranking_cuda.sh --predict          here (no GPU): `vladbud rank TYPE --targets h200
#                                            --max-rung 3` in bf16 at the cuda benchmark size;
#                                            writes bench/results/ranking-h200-prediction.json
#   bench/ranking_cuda.sh --measure OUTDIR   on the GPU machine: every variant through the quick
#                                            correctness stages (in parallel), then timed alone
#                                            (--timing-only --quick, one at a time) in bf16 at the same
#                                            size; writes OUTDIR/ranking-cuda-measured-h200.json
#   bench/ranking_cuda.sh --score [FILE]     Kendall tau and top-1 regret per kernel type
#                                            (bench/ranking_score.py); writes
#                                            bench/results/ranking-h200.md
# PRED_OUT / SCORE_OUT redirect the prediction / the report (post-hoc re-predictions).
# VB names the vladbud binary (default: .h200/vladbud when carried there, else build/vladbud).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vb="${VB:-}"
[ -z "$vb" ] && { [ -x "$here/.h200/vladbud" ] && vb="$here/.h200/vladbud" || vb="$here/build/vladbud"; }
read -r -a types <<<"${RANK_TYPES:-softmax rmsnorm matmul}"  # RANK_TYPES: a subset, e.g. "matmul"
# RANK_TARGET: the spec DB id that --predict ranks for (default h200; h100-sxm for an H100). --measure
# names its JSON after the GPU it finds (nvidia-smi: H100 -> h100-sxm, H200 -> h200).
target="${RANK_TARGET:-h200}"
# VARIANTS: the folder of variant sets (<VARIANTS>/<type>/*.cu); the second blind study (issue 20)
# uses bench/variants/cuda-blind2 (written by bench/ranking_variants.py).
vdir="${VARIANTS:-$here/bench/variants/cuda}"
case "$vdir" in /*) ;; *) vdir="$here/$vdir" ;; esac
# PRED_OUT: another prediction file (a re-prediction after a model change must not overwrite the
# blind one); SCORE_OUT: another report for --score.
pred="${PRED_OUT:-$here/bench/results/ranking-${target}-prediction.json}"
mode="${1:-}"
[ -x "$vb" ] || { echo "ranking_cuda.sh: $vb not found; build first (scripts/setup.sh)" >&2; exit 2; }

case "$mode" in
--predict)
  tmp="$(mktemp -d)"
  for t in "${types[@]}"; do
    echo "ranking_cuda: predicting $t for $target (rungs 0-3, bf16)" >&2
    "$vb" rank "$t" --targets "$target" --variants "$vdir/$t" --max-rung 3 \
      --dtype bf16 --json >"$tmp/$t.json"
  done
  python3 - "$tmp" "$pred" "$vdir" "$target" "${types[@]}" <<'PY'
import json, os, sys, subprocess, datetime, platform
tmp, out, vdir, target, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def ver(cmd):
    try: return [l for l in subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines() if "release" in l][0]
    except Exception: return ""
doc = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
       "machine": f"{platform.node()} (no GPU)",
       "command": f"RANK_TARGET={target} bench/ranking_cuda.sh --predict (vladbud rank TYPE --targets {target} --variants {os.path.relpath(vdir)}/TYPE --max-rung 3 --dtype bf16 --json)",
       "tools": {"nvcc": ver(["nvcc", "--version"])}, "types": {},
       "commit": subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                                text=True).stdout.strip()}
for t in types:
    r = json.load(open(f"{tmp}/{t}.json"))
    doc["types"][t] = {}
    for tg in r["targets"]:
        rows = []
        for e in tg["ranking"]:
            est = e.get("estimate") or {}
            rows.append({"variant": e["variant"], "position": e.get("position"), "tie_group": e.get("tie_group"),
                         "rung": e.get("highest_rung"), "rejected": e.get("rejected"),
                         "estimate_us": est.get("time_us"), "low_us": est.get("low_us"),
                         "high_us": est.get("high_us"), "basis": est.get("basis")})
        doc["types"][t][tg["id"]] = {"ranking": rows}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out)
PY
  rm -rf "$tmp" ;;
--measure)
  outdir="${2:?--measure needs OUTDIR}"
  # Every bench JSON is kept under OUTDIR/ranking-cuda-work as it is written: a run cut short still
  # leaves what it measured.
  tmp="$outdir/ranking-cuda-work"; mkdir -p "$tmp"; t0=$(date +%s)
  list="$tmp/list"
  for t in "${types[@]}"; do for f in "$vdir/$t"/*.cu; do echo "$t $f"; done; done >"$list"
  # The work folder rides on every line: xargs hands it to sh -c as $3 (the quick checks' JSON
  # went nowhere when it was appended only after them: run of 2026-12-01).
  sed -i "s|\$| $tmp|" "$list"
  # 1. correctness (quick stages, all three dtypes), 16 at a time: builds land in the cache.
  xargs -P 16 -L 1 sh -c '"$0" bench --backend cuda -k "$1" -s "$2" --quick --no-timing --no-pytorch --json \
      --results "$3/check.tsv" >"$3/$1.$(basename "$2" .cu).check.json" 2>/dev/null || true' "$vb" \
      <"$list" 2>/dev/null || true
  # 2. timing, one at a time (nothing else on the GPU).
  while read -r t f _; do
    v="$(basename "$f" .cu)"
    echo "ranking_cuda: timing $t/$v" >&2
    "$vb" bench --backend cuda -k "$t" -s "$f" --dtype bf16 --timing-only --quick --no-pytorch --json \
      --results "$tmp/time.tsv" >"$tmp/$t.$v.json" 2>"$tmp/$t.$v.err" || true
  done <"$list"
  python3 - "$tmp" "$outdir" "$(( $(date +%s) - t0 ))" "${types[@]}" <<'PY'
import json, sys, glob, os, datetime, platform, subprocess
tmp, outdir, secs, types = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
try: gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
except Exception: gpu = "?"
# The spec DB id of the GPU measured (the prediction to score against must be for the same one).
measured_target = "h100-sxm" if "H100" in gpu else "h200" if "H200" in gpu else None
if measured_target is None:
    sys.exit(f"ranking_cuda.sh: no prediction target for the GPU {gpu!r} (nvidia-smi): the studies "
             "predict h200 and h100-sxm; the bench JSONs stay in " + tmp)
out = os.path.join(outdir, f"ranking-cuda-measured-{measured_target}.json")
doc = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "target": measured_target,
       "machine": f"{platform.node()} ({gpu})", "seconds": secs,
       "command": "bench/ranking_cuda.sh --measure OUTDIR (vladbud bench --backend cuda -k TYPE -s VARIANT --quick --no-timing, then --dtype bf16 --timing-only --quick)",
       "types": {}}
def load(f):
    try: return json.load(open(f))
    except Exception: return {}
for t in types:
    doc["types"][t] = {}
    for f in sorted(glob.glob(f"{tmp}/{t}.*.json")):
        if f.endswith(".check.json"): continue
        v = f[len(f"{tmp}/{t}."):-len(".json")]
        chk, tim = load(f"{tmp}/{t}.{v}.check.json"), load(f)
        if chk:  # the quick stages ran: PASS only when they passed and the timed calls verified
            verdict = chk.get("verdict", "ERROR")
            if verdict == "PASS": verdict = "PASS" if tim.get("verdict") == "UNVERIFIED" else tim.get("verdict", "ERROR")
        else:  # no quick stages: the timed calls' own output verification only
            verdict = tim.get("verdict", "ERROR")
        doc["types"][t][v] = {"verdict": verdict, "quick_stages": bool(chk),
                              "reason": chk.get("reason") or tim.get("reason", ""),
                              "median_us": tim.get("latency_us"), "p10_us": tim.get("latency_p10_us"),
                              "p90_us": tim.get("latency_p90_us"), "size": tim.get("size"),
                              "pct_peak": tim.get("pct_peak")}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out, f"({secs} s)")
for t in types:
    for v, r in sorted(doc["types"][t].items(), key=lambda x: x[1]["median_us"] or 1e18):
        print(f"  {t:8s} {v:34s} {r['verdict']:8s} {r['median_us'] or 0:10.1f} us")
PY
  ;;
--score)
  python3 "$here/bench/ranking_score.py" "$pred" "${2:-$here/bench/results/ranking-cuda-measured-h200.json}" \
    --title "Blind GPU ranking study (issue 5): CUDA variants on the H200" \
    --notes "$here/bench/results/ranking-h200-notes.md" \
    --out "${SCORE_OUT:-$here/bench/results/ranking-h200.md}" ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
