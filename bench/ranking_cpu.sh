#!/usr/bin/env bash
# The blind CPU ranking study of issue 4: predict the ranking of the CPU variants of softmax,
# rmsnorm, reduce and matmul for a CPU without running there, measure them there, score.
#
#   bench/ranking_cpu.sh --predict
#       here: `vladbud rank` capped below rung 5 (rungs 0-3) for h200-host (the H200 machine's
#       host CPU, data/targets/h200-host.json) and for this machine's CPU (local); writes
#       bench/results/ranking-cpu-prediction.json
#   bench/ranking_cpu.sh --measure OUTDIR [--target ID]
#       on the machine itself: times every variant (instantiated for ID: h200-host on the H200
#       machine, local here; default local) with the evaluator at the ranking size (quick
#       correctness, short timing); writes OUTDIR/ranking-cpu-measured-ID.json
#   VARIANTS=bench/variants/cpu-blind2 STUDY=blind2 RANK_TYPES="softmax rmsnorm reduce matmul
#   flash_attention" bench/ranking_cpu.sh --predict|--measure ...|--score
#       the second CPU study (issue 20): frozen variants, files named ranking-cpu-blind2-*
#   VARIANTS=bench/variants/cpu-blind3 STUDY=blind3 RANK_TYPES="layernorm cross_entropy
#   rotary_embedding flash_attention fused_mlp" bench/ranking_cpu.sh ...
#       the third: the built-in implementation variants (`vladbud variants TYPE --target
#       h200-host`, frozen) of the five types the first study did not rank
#   bench/ranking_cpu.sh --score [DIR]
#       Kendall tau over the pairs whose measured times differ by more than the measured noise,
#       and top-1 regret, per kernel type and overall, from the prediction and every
#       DIR/ranking-cpu-measured-*.json (default DIR bench/results); writes
#       bench/results/ranking-cpu.md
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vb="${VB:-$here/build/vladbud}"
# On the GPU machine: the binaries and headers carried in .h200/ (bench/h200_all.sh --pack).
if [ -z "${VB:-}" ] && [ -x "$here/.h200/vladbud" ] && [ "${1:-}" = "--measure" ]; then
  vb="$here/.h200/vladbud"
  export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
  export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export VB_RUNNER="$here/.h200/vladbud-runner"
fi
# RANK_TYPES: the types (default the first study's four). VARIANTS: a folder of frozen variant
# sets (<VARIANTS>/<type>/*.cpp, e.g. bench/variants/cpu-blind2 from bench/ranking_variants.py
# --study cpu-blind2) instead of `vladbud variants`; STUDY names its files (ranking-cpu-STUDY-*).
read -r -a types <<<"${RANK_TYPES:-softmax rmsnorm reduce matmul}"
declare -A size=([softmax]=4096x4096 [rmsnorm]=4096x4096 [reduce]=4096x4096 [matmul]=512x512x512
                 [layernorm]=4096x4096 [flash_attention]=b1h8s1024d64 [cross_entropy]=32x128256
                 [rotary_embedding]=b1h32s512d128 [fused_mlp]=b64d1024h2816)
vdir="${VARIANTS:-}"
[ -n "$vdir" ] && case "$vdir" in /*) ;; *) vdir="$here/$vdir" ;; esac
study="${STUDY:+-$STUDY}"
pred="$here/bench/results/ranking-cpu${study}-prediction.json"
for t in "${types[@]}"; do
  [ -n "${size[$t]:-}" ] || { echo "ranking_cpu.sh: no ranking size for '$t' (${!size[*]})" >&2; exit 2; }
  [ -z "$vdir" ] || [ -d "$vdir/$t" ] || { echo "ranking_cpu.sh: no variants in $vdir/$t" >&2; exit 2; }
done
mode="${1:-}"
[ -x "$vb" ] || { echo "ranking_cpu.sh: $vb not found; build first (scripts/setup.sh)" >&2; exit 2; }

case "$mode" in
--predict)
  tmp="$(mktemp -d)"
  for t in "${types[@]}"; do
    echo "ranking_cpu: predicting $t (${size[$t]}) for h200-host,local" >&2
    "$vb" rank "$t" --targets h200-host,local --max-rung 3 --quick --size "${size[$t]}" --json \
      ${vdir:+--variants "$vdir/$t"} >"$tmp/$t.json"
  done
  python3 - "$tmp" "$pred" "${vdir#$here/}" "${types[@]}" <<'PY'
import json, sys, subprocess, datetime, platform
tmp, out, vdir, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def ver(cmd):
    try: return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
    except Exception: return ""
model = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
doc = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
       "machine": f"{platform.node()} ({model})",
       "command": ("bench/ranking_cpu.sh --predict (vladbud rank TYPE --targets h200-host,local --max-rung 3 --quick --size S --json"
                   + (f" --variants {vdir}/TYPE)" if vdir else ")")),
       "commit": subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
       "tools": {"clang": ver(["clang++-19", "--version"]), "llvm-mca": ver(["llvm-mca-19", "--version"]) or "LLVM 19"},
       "types": {}}
for t in types:
    r = json.load(open(f"{tmp}/{t}.json"))
    doc["types"][t] = {}
    for tg in r["targets"]:
        rows = []
        for e in tg["ranking"]:
            est = e.get("estimate") or {}
            rows.append({"variant": e["variant"], "position": e["position"], "tie_group": e["tie_group"],
                         "rung": e["highest_rung"], "rejected": e["rejected"],
                         "estimate_us": est.get("time_us"), "low_us": est.get("low_us"), "high_us": est.get("high_us"),
                         "basis": est.get("basis")})
        size = next((ev["data"].get("size") for e in tg["ranking"] for ev in e["evidence"] if ev["rung"] == 3), None)
        doc["types"][t][tg["id"]] = {"size": size, "ranking": rows}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out)
PY
  rm -rf "$tmp" ;;
--measure)
  outdir="${2:?--measure needs OUTDIR}"; target=local
  [ "${3:-}" = "--target" ] && target="${4:?--target needs an id}"
  # Every bench JSON is kept under OUTDIR/ranking-cpu-work as it is written: a run cut short still
  # leaves what it measured.
  tmp="$outdir/ranking-cpu-work"; mkdir -p "$tmp"; t0=$(date +%s)
  list="$tmp/list"
  for t in "${types[@]}"; do
    if [ -n "$vdir" ]; then mkdir -p "$tmp/$t" && cp "$vdir/$t"/*.cpp "$tmp/$t/"
    else "$vb" variants "$t" --target "$target" --out "$tmp/$t" >/dev/null; fi
    for f in "$tmp/$t"/*.cpp; do echo "$t $f ${size[$t]} $tmp"; done
  done >"$list"
  # 1. correctness (quick stages, all three dtypes), 4 at a time: builds land in the cache.
  xargs -P 4 -L 1 sh -c '"$0" bench -k "$1" -s "$2" --quick --no-timing --no-pytorch --json \
      --results "$4/check.tsv" >"$4/$1.$(basename "$2" .cpp).check.json" 2>/dev/null || true' "$vb" \
      <"$list" || true
  # 2. timing, one at a time (nothing else running).
  while read -r t f sz _; do
    v="$(basename "$f" .cpp)"
    echo "ranking_cpu: timing $t/$v ($sz)" >&2
    "$vb" bench -k "$t" -s "$f" --size "$sz" --dtype fp32 --quick --timing-only --no-pytorch \
      --json --results "$tmp/results.tsv" >"$tmp/$t.$v.json" 2>"$tmp/$t.$v.err" || true
  done <"$list"
  python3 - "$tmp" "$outdir/ranking-cpu${study}-measured-$target.json" "$target" "$(( $(date +%s) - t0 ))" "${types[@]}" <<'PY'
import json, sys, glob, os, datetime, platform
tmp, out, target, secs, types = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
model = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
doc = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "target": target,
       "prediction_target": "local-cpu" if target == "local" else target,
       "machine": f"{platform.node()} ({model}, {os.cpu_count()} CPUs)", "seconds": secs,
       "command": f"bench/ranking_cpu.sh --measure OUTDIR --target {target} (vladbud bench -k TYPE -s VARIANT --quick --no-timing, then --size S --dtype fp32 --quick --timing-only)",
       "types": {}}
def load(f):
    try: return json.load(open(f))
    except Exception: return {}
for t in types:
    doc["types"][t] = {}
    for f in sorted(glob.glob(f"{tmp}/{t}.*.check.json")):
        v = f[len(f"{tmp}/{t}."):-len(".check.json")]
        chk, tim = load(f), load(f"{tmp}/{t}.{v}.json")
        verdict = chk.get("verdict", "ERROR")
        if verdict == "PASS": verdict = "PASS" if tim.get("verdict") == "UNVERIFIED" else tim.get("verdict", "ERROR")
        doc["types"][t][v] = {"verdict": verdict, "reason": chk.get("reason") or tim.get("reason", ""),
                              "median_us": tim.get("latency_us"), "p10_us": tim.get("latency_p10_us"),
                              "p90_us": tim.get("latency_p90_us"), "noise": tim.get("noise"),
                              "other_runnable": tim.get("other_runnable_tasks")}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out, f"({secs} s)")
PY
  ;;
--score)
  dir="${2:-$here/bench/results}"
  python3 "$here/bench/ranking_score.py" "$pred" "$dir"/ranking-cpu${study}-measured-*.json \
    --title "Blind CPU ranking study${STUDY:+ $STUDY}" \
    --notes "$here/bench/results/ranking-cpu${study}-notes.md" \
    --out "$here/bench/results/ranking-cpu${study}.md" ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
