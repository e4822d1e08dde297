#!/usr/bin/env bash
# The triton backend on the H200 (issue 17 step 2), in ONE call of the `device` tool:
#   1. preview   the nine Triton starters under Triton's JIT on the GPU, OUTSIDE the evaluator
#                (bench/triton_gpu_preview.py: fp64 error, do_bench median next to PyTorch, at
#                the evaluator's GPU benchmark sizes, fp16/bf16/fp32). The evaluator's GPU path
#                for Triton (ahead-of-time cubins in the C++ runner) is not written yet.
#   2. interp    the interpreter path as CI runs it: the Triton integration tests (nine starters
#                PASS in fp32 under TRITON_INTERPRET=1, the bad-kernel guards, rank rung 1 on
#                MI300X/MI355X), to show they hold on that machine's Python/Triton too.
#
#   bash bench/h200_all.sh --pack          here: build and copy the binaries into .h200/ (carry it)
#   bash bench/h200_triton.sh [STAGE...]   there (repo root): stages preview interp (default
#                                          both); logs and JSON packed into
#                                          $OUT/h200-triton.tar.gz plus summary.txt
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out="${OUT:-$here/h200-out}"
logs="$(mktemp -d)/h200-triton"
mkdir -p "$out" "$logs"
export VLADBUD_HOME="$here" VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VB_RUNNER="$here/.h200/vladbud-runner" VB_PYTHON="${VB_PYTHON:-$(command -v python3)}"
export PYTHONUNBUFFERED=1
vb="$here/.h200/vladbud"
summary="$logs/summary.txt"
{
  echo "# h200_triton.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1
  "$VB_PYTHON" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1
} >"$summary"
declare -A limit=([preview]=420 [interp]=600)
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(preview interp)
for st in "${stages[@]}"; do
  t0=$(date +%s)
  lim="${limit[$st]:-300}"
  case "$st" in
    preview) timeout "$lim" "$VB_PYTHON" bench/triton_gpu_preview.py "$vb" "$logs/triton-preview.json" \
               >"$logs/triton-preview.md" 2>"$logs/preview.log" ;;
    interp)  timeout "$lim" "$here/.h200/vb_integration_tests" --gtest_filter='*Triton*' \
               >"$logs/interp.log" 2>&1 ;;
    *) echo "unknown stage $st (preview, interp)" >&2; continue ;;
  esac
  rc=$?
  echo "stage $st: exit $rc, $(( $(date +%s) - t0 )) s" >>"$summary"
done
cat "$logs/triton-preview.md" >>"$summary" 2>/dev/null
tar -czf "$out/h200-triton.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
cp "$summary" "$out/summary.txt"
cat "$summary"
