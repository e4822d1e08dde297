#!/usr/bin/env bash
# The CUDA backend on the GPU machine (issue 5): GPU tests, one CUDA bench, and `vladbud run`
# over the CPU and the local GPU, with logs in OUTDIR and a compact summary at the end.
#
#   bench/h200_cuda_check.sh --pack    (here, on the dev machine) build vladbud, vladbud-runner
#                                      and vb_integration_tests and copy them with the shared
#                                      libraries they need that may be missing there (libfmt,
#                                      libgtest) into .h200/ (git-ignored; carry .h200)
#   bench/h200_cuda_check.sh [OUTDIR]  (on the GPU machine, from the repo root) OUTDIR defaults
#                                      to $OUT, else bench/results/h200-cuda
#
# Steps on the GPU machine (budget ~6 minutes on 16 cores + one H200; limits 150 + 90 + 180 s):
#   1. vb_integration_tests --gtest_filter='Cuda*:*BadCudaKernel*:-CudaRunnerMock.*'  (GPU tests; ~1-2 min)
#   2. vladbud bench --backend cuda --kernel softmax --quick         (the CUDA softmax starter)
#   3. vladbud run --all --json --quick                              (CPU + local GPU; the full
#      protocol of all 18 evaluations does not fit the budget: VB_CHECK_FULL=1 runs it, and
#      the full ceiling probes instead of VB_PROBE_QUICK=1)
# Each step has its own time limit so that one hang cannot eat the others' time.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${1:-}" = "--pack" ]; then
  set -e
  cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$here/build" -j2 --target vladbud vladbud-runner vb_integration_tests >&2
  mkdir -p "$here/.h200"
  for b in vladbud vladbud-runner vb_integration_tests; do cp "$here/build/$b" "$here/.h200/$b"; done
  for b in vladbud vb_integration_tests; do
    ldd "$here/build/$b" | awk '/libfmt|libgtest|libgmock/ {print $3}' | while read -r lib; do
      [ -n "$lib" ] && cp -L "$lib" "$here/.h200/"
    done
  done
  exclude="$(git -C "$here" rev-parse --git-path info/exclude)"
  case "$exclude" in /*) ;; *) exclude="$here/$exclude" ;; esac
  grep -qx '/.h200/' "$exclude" 2>/dev/null || echo '/.h200/' >>"$exclude"
  echo "packed: $(ls "$here/.h200" | tr '\n' ' ')(carry .h200)" >&2
  exit 0
fi

out="${1:-${OUT:-$here/bench/results/h200-cuda}}"
mkdir -p "$out"
log="$out/h200-cuda.log"
: >"$log"
note() { echo "h200_cuda_check: $*" | tee -a "$log" >&2; }

export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export PATH="$PATH:/usr/local/cuda/bin"
# Quick ceiling probes (~2-5 s on the GPU instead of 10-30 s) unless the full check is asked for;
# the ceilings are measured by the first step that needs them (the bench) and cached.
[ "${VB_CHECK_FULL:-0}" = 1 ] || export VB_PROBE_QUICK="${VB_PROBE_QUICK:-1}"
bin="$here/.h200"
if [ ! -x "$bin/vladbud" ] || [ ! -x "$bin/vladbud-runner" ]; then
  note "no carried binaries in $bin: run 'bench/h200_cuda_check.sh --pack' here first and carry .h200"
  exit 1
fi
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VB_RUNNER="$bin/vladbud-runner"
{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -a) uid=$(id -u)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -2 || true
  command -v compute-sanitizer || echo "compute-sanitizer: not found"
  ls -l /dev/nvidiactl /dev/nvidia0 2>&1 || true
  ls "$here/kernels/cuda" 2>&1 || true
} >>"$log" 2>&1
start=$(date +%s)

# step NAME LIMIT_S CMD...: stdout to $out/NAME.out, stderr to $out/NAME.err, exit code kept.
declare -A rc secs
step() {
  local name="$1" limit="$2"
  shift 2
  note "[$name] $* (limit ${limit}s)"
  local t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
  rc[$name]=$?
  secs[$name]=$(( $(date +%s) - t0 ))
  note "[$name] exit ${rc[$name]} after ${secs[$name]} s"
}

step gpu_tests 150 "$bin/vb_integration_tests" --gtest_filter='Cuda*:*BadCudaKernel*:-CudaRunnerMock.*' \
  --gtest_output="xml:$out/gpu_tests.xml"
step bench_softmax 90 "$bin/vladbud" bench --backend cuda --kernel softmax --quick --progress \
  --results "$out/results.tsv"
quick=(--quick)
[ "${VB_CHECK_FULL:-0}" = 1 ] && quick=()
step run_all 180 "$bin/vladbud" run --all --json "${quick[@]}" --progress \
  --results "$out/results.tsv" --report "$out/run_all.md"
note "done in $(( $(date +%s) - start )) s"

# Compact summary: test counts and failures, the bench verdict, the run table per target.
{
  echo "== summary (logs in $out)"
  echo "gpu_tests: exit ${rc[gpu_tests]} (${secs[gpu_tests]} s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/gpu_tests.out" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] [A-Za-z].*\.' "$out/gpu_tests.out" | sort -u | sed 's/^/  /' | head -20
  grep -m1 -A1 -E ': Skipped$' "$out/gpu_tests.out" | tail -1 | sed 's/^/  skip reason: /'
  echo "bench_softmax: exit ${rc[bench_softmax]} (${secs[bench_softmax]} s): $(grep -E '^(verdict|guard|reason|latency_us|bandwidth_gb_s|pct_peak|target):' "$out/bench_softmax.out" | tr '\n' ' ')"
  [ -s "$out/bench_softmax.out" ] || tail -2 "$out/bench_softmax.err" | sed 's/^/  /'
  echo "run_all: exit ${rc[run_all]} (${secs[run_all]} s)"
  grep -E 'no GPU|cuda backend skipped' "$out/run_all.err" | sed 's/^/  /' | head -3
  python3 - "$out/run_all.out" <<'PY' || echo "  (run --all JSON unreadable)"
import json, sys
doc = json.load(open(sys.argv[1]))
for t in doc.get("targets", []):
    print("  target %s (%s, backend %s, rung %s, local %s)" % (t.get("id"), t.get("name"), t.get("backend"), t.get("rung"), t.get("local")))
    for k in t.get("kernels", []):
        lat, pct = k.get("latency_us"), k.get("pct_peak")
        print("    %-17s %-8s %-22s %s" % (k.get("kernel"), k.get("verdict"),
              ("%s %.1f us %.1f%%" % (k.get("size"), lat, pct or 0)) if lat is not None else "-",
              "" if k.get("verdict") == "PASS" else "%s/%s: %s" % (k.get("failed_stage"), k.get("guard"), str(k.get("reason", ""))[:160])))
PY
} | tee "$out/summary.txt"
