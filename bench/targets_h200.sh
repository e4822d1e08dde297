#!/usr/bin/env bash
# Detection + calibration on the GPU machine (issue 3): the host CPU and NVIDIA GPUs as VladBud
# detects them, their measured ceilings (CPU probe; GPU probe compiled there with nvcc, incl. the
# sm_90a wgmma path), the capability probes, and the h200 card, as one JSON document.
#
#   bench/targets_h200.sh --pack      (here, on the dev machine) build vladbud and copy it with
#                                     libfmt into .h200/ (git-ignored) so that it can be carried
#   bench/targets_h200.sh [OUTDIR]    (on the GPU machine) write OUTDIR/targets-h200.json and
#                                     OUTDIR/targets-h200.log; OUTDIR defaults to $OUT, else
#                                     bench/results. Prints the JSON on stdout.
#
# On the GPU machine the carried .h200/vladbud is used when it runs there; otherwise vladbud is
# built with CMake (needs CLI11, fmt, nlohmann-json and dlpack installed there).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${1:-}" = "--pack" ]; then
  set -e
  cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$here/build" -j2 --target vladbud >&2
  mkdir -p "$here/.h200"
  cp "$here/build/vladbud" "$here/.h200/vladbud"
  fmt_lib="$(ldd "$here/build/vladbud" | awk '/libfmt/ {print $3}')"
  [ -n "$fmt_lib" ] && cp -L "$fmt_lib" "$here/.h200/"
  exclude="$(git -C "$here" rev-parse --git-path info/exclude)"
  case "$exclude" in /*) ;; *) exclude="$here/$exclude" ;; esac
  grep -qx '/.h200/' "$exclude" 2>/dev/null || echo '/.h200/' >>"$exclude"
  echo "packed: $(ls "$here/.h200" | tr '\n' ' ')(carry .h200)" >&2
  exit 0
fi

out="${1:-${OUT:-$here/bench/results}}"
mkdir -p "$out"
log="$out/targets-h200.log"
: >"$log"
note() { echo "targets_h200: $*" | tee -a "$log" >&2; }

export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export PATH="$PATH:/usr/local/cuda/bin"
{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -a)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
    --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -2 || true
  g++ --version 2>&1 | head -1 || true
} >>"$log" 2>&1

# 1. vladbud: the carried .h200/vladbud when it runs here, else build it with CMake.
vb=""
if [ -x "$here/.h200/vladbud" ] &&
    LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$here/.h200/vladbud" --version >>"$log" 2>&1; then
  vb="$here/.h200/vladbud"
  export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  note "using the carried .h200/vladbud"
elif cmake -S "$here" -B /tmp/vb-build -DCMAKE_BUILD_TYPE=Release -DVB_BUILD_TESTS=OFF \
    >>"$log" 2>&1 && cmake --build /tmp/vb-build -j"$(nproc)" --target vladbud >>"$log" 2>&1; then
  vb=/tmp/vb-build/vladbud
  note "built vladbud with CMake"
else
  note "no vladbud: .h200/vladbud was not carried (run --pack first) and the CMake build failed"
  exit 1
fi

# 2. Detection + calibration (CPU and GPU ceilings re-measured), capability probes, cards.
run() {  # run NAME ARGS...: stdout to $tmp/NAME.json, stderr to the log
  local name="$1"
  shift
  note "vladbud $*"
  "$vb" "$@" >"$tmp/$name.json" 2>>"$log"
  local rc=$?
  if [ $rc -ne 0 ]; then
    note "vladbud $* failed (exit $rc)"
    echo null >"$tmp/$name.json"
  fi
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
run local research local --calibrate --json --progress
run h200 research h200 --json
run targets targets --json
note "done in $(( $(date +%s) - start )) s"

python3 - "$tmp" "$out/targets-h200.json" "$log" <<'PY'
import json, sys, os
tmp, dest, log = sys.argv[1], sys.argv[2], sys.argv[3]
def load(name):
    try:
        with open(os.path.join(tmp, name + ".json")) as f:
            return json.load(f)
    except Exception as e:
        return {"error": "unreadable output: %s" % e}
doc = {"local": load("local"), "h200": load("h200"), "targets": load("targets")}
# A short summary first: measured vs datasheet for every local GPU and the CPU.
summary = {}
loc = doc["local"] if isinstance(doc["local"], dict) else {}
l = loc.get("local", {})
summary["cpu"] = {"model": l.get("cpu", {}).get("model"), "isa": l.get("cpu", {}).get("isa"),
                  "ceilings": l.get("cpu_ceilings")}
summary["gpus"] = [{"name": g.get("info", {}).get("name"), "spec": g.get("spec"),
                    "derived": g.get("derived"), "ceilings": g.get("ceilings")}
                   for g in l.get("gpus", [])]
summary["gpu_status"] = l.get("gpu_status")
h = doc["h200"] if isinstance(doc["h200"], dict) else {}
summary["h200_datasheet"] = {k: h.get("spec", {}).get(k) for k in ("peak_tflops", "memory_bandwidth_gbs")}
doc = {"summary": summary, **doc}
with open(dest, "w") as f:
    json.dump(doc, f, indent=2)
print(json.dumps(doc, indent=2))
PY
