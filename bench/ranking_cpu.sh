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
#   bench/ranking_cpu.sh --pack
#       here: copy vladbud, vladbud-runner, libfmt and the Highway + DLPack headers the variants
#       include into .h200-ranking/ (git-ignored) to carry to the GPU machine, where --measure
#       uses them (CPLUS_INCLUDE_PATH, LD_LIBRARY_PATH) when present
#   bench/ranking_cpu.sh --score [DIR]
#       Kendall tau over the pairs whose measured times differ by more than the measured noise,
#       and top-1 regret, per kernel type and overall, from the prediction and every
#       DIR/ranking-cpu-measured-*.json (default DIR bench/results); writes
#       bench/results/ranking-cpu.md
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="$here/.h200-ranking"
vb="${VB:-$here/build/vladbud}"
if [ -z "${VB:-}" ] && [ -x "$pack/vladbud" ] && [ "${1:-}" = "--measure" ]; then
  vb="$pack/vladbud"
  export CPLUS_INCLUDE_PATH="$pack/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
  export LD_LIBRARY_PATH="$pack${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ "${1:-}" = "--pack" ]; then
  mkdir -p "$pack/include"
  cp "$here/build/vladbud" "$here/build/vladbud-runner" "$pack/"
  fmt_lib="$(ldd "$here/build/vladbud" | awk '/libfmt/ {print $3}')"
  [ -n "$fmt_lib" ] && cp -L "$fmt_lib" "$pack/"
  cp -rL /usr/include/hwy /usr/include/dlpack "$pack/include/"
  exclude="$(git -C "$here" rev-parse --git-path info/exclude)"
  grep -qx '/.h200-ranking/' "$exclude" 2>/dev/null || echo '/.h200-ranking/' >>"$exclude"
  echo "packed: $(ls "$pack" | tr '\n' ' ')(carry .h200-ranking)" >&2
  exit 0
fi
types=(softmax rmsnorm reduce matmul)
declare -A size=([softmax]=4096x4096 [rmsnorm]=4096x4096 [reduce]=4096x4096 [matmul]=512x512x512)
pred="$here/bench/results/ranking-cpu-prediction.json"
mode="${1:-}"
[ -x "$vb" ] || { echo "ranking_cpu.sh: $vb not found; build first (scripts/setup.sh)" >&2; exit 2; }

case "$mode" in
--predict)
  tmp="$(mktemp -d)"
  for t in "${types[@]}"; do
    echo "ranking_cpu: predicting $t (${size[$t]}) for h200-host,local" >&2
    "$vb" rank "$t" --targets h200-host,local --max-rung 3 --quick --size "${size[$t]}" --json \
      >"$tmp/$t.json"
  done
  python3 - "$tmp" "$pred" "${types[@]}" <<'PY'
import json, sys, subprocess, datetime, platform
tmp, out, types = sys.argv[1], sys.argv[2], sys.argv[3:]
def ver(cmd):
    try: return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
    except Exception: return ""
model = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
doc = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
       "machine": f"{platform.node()} ({model})",
       "command": "bench/ranking_cpu.sh --predict (vladbud rank TYPE --targets h200-host,local --max-rung 3 --quick --size S --json)",
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
  mkdir -p "$outdir"; tmp="$(mktemp -d)"; t0=$(date +%s)
  for t in "${types[@]}"; do
    "$vb" variants "$t" --target "$target" --out "$tmp/$t" >/dev/null
    for f in "$tmp/$t"/*.cpp; do
      v="$(basename "$f" .cpp)"
      echo "ranking_cpu: measuring $t/$v (${size[$t]})" >&2
      "$vb" bench -k "$t" -s "$f" --size "${size[$t]}" --dtype fp32 --quick --json \
        --results "$tmp/results.tsv" >"$tmp/$t.$v.json" 2>"$tmp/$t.$v.err" || true
    done
  done
  python3 - "$tmp" "$outdir/ranking-cpu-measured-$target.json" "$target" "$(( $(date +%s) - t0 ))" "${types[@]}" <<'PY'
import json, sys, glob, os, datetime, platform
tmp, out, target, secs, types = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
model = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
doc = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "target": target,
       "machine": f"{platform.node()} ({model}, {os.cpu_count()} CPUs)", "seconds": secs,
       "command": f"bench/ranking_cpu.sh --measure OUTDIR --target {target} (vladbud bench -k TYPE -s VARIANT --size S --dtype fp32 --quick --json)",
       "types": {}}
for t in types:
    doc["types"][t] = {}
    for f in sorted(glob.glob(f"{tmp}/{t}.*.json")):
        v = f[len(f"{tmp}/{t}."):-5]
        try: r = json.load(open(f))
        except Exception: r = {"verdict": "ERROR", "reason": open(f[:-5] + ".err").read()[-300:]}
        doc["types"][t][v] = {"verdict": r.get("verdict"), "reason": r.get("reason", ""),
                              "median_us": r.get("latency_us"), "p10_us": r.get("latency_p10_us"),
                              "p90_us": r.get("latency_p90_us"), "noise": r.get("noise"),
                              "reps": r.get("reps"), "other_runnable": r.get("other_runnable_tasks"),
                              "load_average": r.get("load_average")}
json.dump(doc, open(out, "w"), indent=1)
print("wrote", out, f"({secs} s)")
PY
  rm -rf "$tmp" ;;
--score)
  dir="${2:-$here/bench/results}"
  python3 - "$pred" "$dir" "$here/bench/results/ranking-cpu.md" "${types[@]}" <<'PY'
import json, sys, glob, itertools, datetime
predf, d, out, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
pred = json.load(open(predf))
L = ["# Blind CPU ranking study (issue 4)", "",
     f"- scored: {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')} by `bench/ranking_cpu.sh --score`",
     f"- prediction: {pred['date']} on {pred['machine']}; `{pred['command']}`; {pred['tools']['clang']}; {pred['tools']['llvm-mca']}",
     "- Kendall tau over the pairs whose measured medians differ by more than the larger half-spread (p90-p10)/2 of the two;",
     "  a pair the prediction ties (equal estimates) counts 0; top-1 regret = (time of the predicted best - true best) / true best.", ""]
tot_c = tot_d = tot_n = 0
for mf in sorted(glob.glob(f"{d}/ranking-cpu-measured-*.json")):
    m = json.load(open(mf))
    tg = m["target"]; ptg = "local-cpu" if tg == "local" else tg
    L += [f"## {tg}: {m['machine']}", "", f"- measured {m['date']} in {m['seconds']} s; `{m['command']}`", "",
          "| kernel | variants | pairs scored | tau | top-1 predicted | top-1 measured | regret |", "|---|---|---|---|---|---|---|"]
    c_all = d_all = n_all = 0; regrets = []
    for t in types:
        P = {r["variant"]: r for r in pred["types"][t][ptg]["ranking"] if r["estimate_us"] is not None}
        M = {v: r for v, r in m["types"].get(t, {}).items() if r["median_us"] and r["verdict"] in ("PASS", "INVALID")}
        vs = sorted(set(P) & set(M))
        c = dd = n = 0
        for a, b in itertools.combinations(vs, 2):
            ta, tb = M[a]["median_us"], M[b]["median_us"]
            noise = max((M[a]["p90_us"] - M[a]["p10_us"]) / 2, (M[b]["p90_us"] - M[b]["p10_us"]) / 2)
            if abs(ta - tb) <= noise: continue
            n += 1
            pa, pb = P[a]["estimate_us"], P[b]["estimate_us"]
            if pa == pb: continue
            if (pa < pb) == (ta < tb): c += 1
            else: dd += 1
        tau = (c - dd) / n if n else float("nan")
        pb_ = min(vs, key=lambda v: (P[v]["estimate_us"], v)) if vs else None
        tb_ = min(vs, key=lambda v: M[v]["median_us"]) if vs else None
        reg = (M[pb_]["median_us"] - M[tb_]["median_us"]) / M[tb_]["median_us"] if vs else float("nan")
        regrets.append(reg); c_all += c; d_all += dd; n_all += n
        L.append(f"| {t} | {len(vs)} | {n} | {tau:.2f} | {pb_} | {tb_} | {reg:.2f} |")
    tau_all = (c_all - d_all) / n_all if n_all else float("nan")
    L.append(f"| **all** | | {n_all} | **{tau_all:.2f}** | | | mean {sum(regrets)/len(regrets):.2f} |")
    L += ["", "Measured (median us, p10-p90) vs predicted (estimate us):", ""]
    for t in types:
        P = {r["variant"]: r for r in pred["types"][t][ptg]["ranking"]}
        row = []
        for v, r in sorted(m["types"].get(t, {}).items(), key=lambda x: x[1]["median_us"] or 1e18):
            e = P.get(v, {}).get("estimate_us")
            row.append(f"{v} {r['median_us'] or float('nan'):.4g} ({r['p10_us'] or 0:.3g}-{r['p90_us'] or 0:.3g}) pred {e if e is None else round(e, 1)}" + ("" if r["verdict"] == "PASS" else f" [{r['verdict']}]"))
        L.append(f"- {t}: " + "; ".join(row))
    L.append("")
L += ["## What limits the prediction", "",
      "- Rung 3 is a roofline: for memory-bound kernels every variant on the same number of cores gets the same",
      "  memory time, so the prediction ties them (tied pairs score 0 in tau); only scalar vs vector (llvm-mca cycles",
      "  x iterations) and threaded vs single-threaded (cores, 20 GB/s per-core bandwidth assumption) separate them.",
      "- llvm-mca models the hot innermost loop from L1 at a steady state; exp-heavy loops (softmax) and the",
      "  fp16/bf16 conversion paths are not what the fp32 timing runs, and cache misses are outside its model.",
      "- This machine (2 vCPUs shared with other jobs, load average in the measured JSON) penalises threaded variants",
      "  far beyond the model: OpenMP threads compete with other processes, so threaded medians cluster near the",
      "  scheduler quantum; the H200 host (16 vCPUs, otherwise idle) is the cleaner test.",
      ""]
open(out, "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
  ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
