#!/usr/bin/env bash
# Everything VladBud measures on the H200 machine, in ONE call of the `device` tool (device time
# is scarce): detection and ceilings, the CUDA backend's GPU tests, `vladbud run --all` (nine
# CUDA kernels at rung 5 next to the CPU), PyTorch baselines in the same run, the blind ranking
# studies' measurements (CUDA variants on the GPU, CPU variants on the host CPU), and the
# PyTorch pipeline on LLaMA small.
#
#   bash bench/h200_all.sh --pack        here: build (Release + tests) and copy the binaries and
#                                        libfmt into .h200/ (git-ignored; carry it)
#   bash bench/h200_all.sh [STAGE...]    there (repo root, carrying .h200): run the stages (all by
#                                        default) and pack every log and JSON into
#                                        $OUT/h200-results.tar.gz (plus summary.txt)
# Stages: gpu-tests run-all baselines rank-cuda rank-cpu mma-selfcheck pipeline
# Each stage has its own time limit (seconds, STAGE_LIMIT_<stage> overrides) and never stops the
# others; the summary lists each stage's exit code and duration.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

if [ "${1:-}" = "--pack" ]; then
  set -e
  bash scripts/setup.sh --tests >/dev/null
  mkdir -p .h200
  cp build/vladbud build/vladbud-runner .h200/
  for t in build/vb_integration_tests build/vb_unit_tests; do [ -x "$t" ] && cp "$t" .h200/; done
  fmt_lib="$(ldd build/vladbud | awk '/libfmt/ {print $3}')"
  [ -n "$fmt_lib" ] && cp -L "$fmt_lib" .h200/
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.h200/' "$exclude" 2>/dev/null || echo '/.h200/' >>"$exclude"
  du -sh .h200 >&2
  exit 0
fi

out="${OUT:-$here/h200-out}"
logs="$(mktemp -d)/h200"
mkdir -p "$out" "$logs"
export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
vb="$here/.h200/vladbud"
summary="$logs/summary.txt"
{
  echo "# h200_all.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c 'import torch; print("torch", torch.__version__)' 2>&1
  lscpu | grep -E "Model name|^CPU\(s\)" | tr -s ' '
} >"$summary"

declare -A limit=([gpu-tests]=150 [run-all]=300 [baselines]=90 [rank-cuda]=200 [rank-cpu]=150
                  [mma-selfcheck]=90 [pipeline]=180)
stage_cmd() {
  case "$1" in
    gpu-tests) echo ".h200/vb_integration_tests --gtest_filter='*Cuda*:*Gpu*:*GPU*' --gtest_brief=1" ;;
    run-all) echo "$vb run --all --json --report $logs/run-all.md --results $logs/results.tsv > $logs/run-all.json" ;;
    baselines) echo "for d in bf16 fp16 fp32; do python3 bench/pytorch_baselines.py --vladbud $vb --dtype \$d --out $logs/baselines-\$d.json; done" ;;
    rank-cuda) echo "bash bench/ranking_cuda.sh --measure $logs" ;;
    rank-cpu) echo "bash bench/ranking_cpu.sh --measure $logs" ;;
    mma-selfcheck) echo "bash bench/cuda_mma_selfcheck.sh" ;;
    pipeline) echo "bash bench/pipeline_h200.sh" ;;
    *) return 1 ;;
  esac
}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(gpu-tests run-all baselines rank-cuda rank-cpu mma-selfcheck pipeline)
for s in "${stages[@]}"; do
  cmd="$(stage_cmd "$s")" || { echo "unknown stage $s" | tee -a "$summary"; continue; }
  lim="${limit[$s]}"
  var="STAGE_LIMIT_${s//-/_}"
  [ -n "${!var:-}" ] && lim="${!var}"
  t0=$(date +%s)
  echo "== $s (limit ${lim}s): $cmd" >&2
  OUT="$logs" timeout -k 5 "$lim" bash -c "$cmd" >"$logs/$s.log" 2>&1
  rc=$?
  echo "$s rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$summary" >&2
  tail -n 15 "$logs/$s.log" | sed "s/^/  [$s] /" >&2
done
tar -C "$(dirname "$logs")" -czf "$out/h200-results.tar.gz" h200
cp "$summary" "$out/summary.txt"
cat "$summary"
