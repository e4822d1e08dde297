#!/usr/bin/env bash
# Everything VladBud measures on the H200 machine, in ONE call of the `device` tool (device time
# is scarce): detection and ceilings, the CUDA backend's GPU tests, `vladbud run --all` (nine
# CUDA kernels at rung 5 next to the CPU), PyTorch baselines in the same run, the blind ranking
# studies' measurements (CUDA variants on the GPU, CPU variants on the host CPU), and the
# PyTorch pipeline on LLaMA small. run --all uses --quick here (the full five stages of every
# starter run in the correctness stage before it): the device time of a session is short.
#
#   bash bench/h200_all.sh --pack        here: build (Release + tests) and copy the binaries and
#                                        libfmt into .h200/ (git-ignored; carry it)
#   bash bench/h200_all.sh [STAGE...]    there (repo root, carrying .h200): run the stages (all by
#                                        default) and pack every log and JSON into
#                                        $OUT/h200-results.tar.gz (plus summary.txt)
# Stages: correctness gpu-tests run-all rank-cuda rank-cpu pipeline optimizer (CUDA optimizer
# throughput, OPT_BUDGET, default 4m; not in the default set) variants (tuning variants of one
# type, VARIANTS_DIR / VARIANTS_DTYPE; not in the default set) scaleout (issue 21: the optimizer
# sequential vs over a Dask worker pool, bench/scaleout_h200.sh, SCALE_BUDGET per run, default 3m;
# carry .whl too, from bench/fetch_dask_wheels.sh; not in the default set) peers (issue 15: the
# nine CUDA starters next to eager PyTorch, torch.compile and Liger-Kernel at the issue's sizes,
# bench/peers_cuda.py in one process, peers-<gpu>.md/.json into the logs and $OUT; Liger-Kernel
# when .whl/ holds its wheel, from `bash bench/e2e_h200.sh --pack`; PEERS_DTYPE (default bf16),
# PEERS_ARGS adds flags, e.g. "--types rmsnorm,matmul"; not in the default set)
# Each stage has its own time limit (seconds, STAGE_LIMIT_<stage> overrides) and never stops the
# others; the summary lists each stage's exit code and duration.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi
if [ "${1:-}" = "--pack" ]; then
  set -e
  bash scripts/setup.sh --tests >/dev/null
  mkdir -p .h200
  cp build/vladbud build/vladbud-runner .h200/
  [ -x build/vladbud-launch-record ] && cp build/vladbud-launch-record .h200/
  for t in build/vb_integration_tests build/vb_unit_tests; do [ -x "$t" ] && cp "$t" .h200/; done
  fmt_lib="$(ldd build/vladbud | awk '/libfmt/ {print $3}')"
  [ -n "$fmt_lib" ] && cp -L "$fmt_lib" .h200/
  # Headers the kernel builds need that the GPU machine's image lacks (DLPack, Highway).
  mkdir -p .h200/include && cp -rL /usr/include/dlpack /usr/include/hwy .h200/include/
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
export CPATH="$here/.h200/include${CPATH:+:$CPATH}"  # g++ and nvcc's host pass both read it
export VB_RUNNER="$here/.h200/vladbud-runner" VB="$here/.h200/vladbud" VB_PYTHON="${VB_PYTHON:-python3}"
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

declare -A limit=([correctness]=90 [gpu-tests]=150 [run-all]=330 [rank-cuda]=330 [rank-cpu]=120
                  [pipeline]=150 [optimizer]=290 [variants]=150 [scaleout]=570 [peers]=300)
# Timestamped stderr (Unix seconds), to see where the time goes.
ts_lines() { local l; while IFS= read -r l; do printf '%s %s\n' "${EPOCHREALTIME%????}" "$l"; done >&2; }
# The stages, one function each (run in a child bash under `timeout`).
stage_correctness() {
  # The full five stages of the nine CUDA starters and the two wgmma matmul variants, all at
  # once (correctness is not timed; the builds land in the cache for the stages after).
  {
    for k in matmul softmax layernorm rmsnorm flash_attention fused_mlp cross_entropy \
        rotary_embedding reduce; do
      echo "$k kernels/cuda/$k.cu"
    done
    for f in bench/variants/cuda/matmul/v1[12]_*.cu; do echo "matmul $f"; done
  } | xargs -P 11 -L 1 sh -c '"$VB" bench --backend cuda -k "$0" -s "$1" --no-timing \
        --no-pytorch --json --results "$LOGS/correctness.tsv" \
        >"$LOGS/correctness.$0.$(basename "$1" .cu).json" 2>&1; echo "$0 $1 rc=$?"'
}
stage_gpu-tests() { .h200/vb_integration_tests --gtest_filter='CudaEvaluator*:*BadCudaKernel*' --gtest_brief=1; }
stage_run-all() {
  "$VB" run --all --no-cpu --remote none --quick --dtype "${RUN_DTYPE:-bf16}" --progress --json \
    --report "$LOGS/run-all.md" --results "$LOGS/results.tsv" >"$LOGS/run-all.json" 2> >(ts_lines)
}
stage_variants() {
  # Tuning variants of one type (VARIANTS_DIR, default bench/variants/cuda/cross_entropy; the
  # type is the folder's name): all five stages of each, built in parallel, then each timed in
  # turn at the benchmark size in VARIANTS_DTYPE (default bf16), side by side in one run.
  local dir="${VARIANTS_DIR:-bench/variants/cuda/cross_entropy}" k
  k="$(basename "$dir")"
  ls "$dir"/*.cu | xargs -P 8 -I{} sh -c '"$VB" bench --backend cuda -k "$0" -s "$1" --no-timing \
        --no-pytorch --json --results "$LOGS/variants-check.tsv" \
        >"$LOGS/variants-check.$(basename "$1" .cu).json" 2>&1; echo "check $1 rc=$?"' "$k" {}
  for f in "$dir"/*.cu; do
    "$VB" bench --backend cuda -k "$k" -s "$f" --timing-only --dtype "${VARIANTS_DTYPE:-bf16}" \
      --json --results "$LOGS/variants.tsv" --tag "variant" \
      >"$LOGS/variants.$(basename "$f" .cu).json" 2>&1
    echo "time $f rc=$? $(grep -o '"latency_us"[^,]*' "$LOGS/variants.$(basename "$f" .cu).json" | head -1)"
  done
}
stage_rank-cuda() { bash bench/ranking_cuda.sh --measure "$LOGS"; }
stage_rank-cpu() { bash bench/ranking_cpu.sh --measure "$LOGS" --target h200-host; }
stage_pipeline() { bash bench/pipeline_h200.sh "$LOGS"; }
stage_optimizer() {
  VB_BENCH_BACKEND=cuda VB_BENCH_WS="$LOGS/optimizer-ws" bash bench/optimizer.sh "${OPT_BUDGET:-4m}"
  cp bench/results/optimizer-cuda.md "$LOGS/"
}
stage_scaleout() { OUT="$LOGS" bash bench/scaleout_h200.sh; }
stage_peers() {
  # Liger-Kernel from the carried wheel, as bench/e2e_h200.sh installs it (pure Python; torch and
  # triton are on the image); without it the Liger column is null and the header says why.
  local site="" rc
  if ls .whl/liger_kernel-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site-peers .whl/liger_kernel-*.whl && site=/tmp/site-peers
  else
    echo "peers: no .whl/liger_kernel-*.whl (bash bench/e2e_h200.sh --pack, carry .whl): Liger is null"
  fi
  # The script puts python/ on sys.path itself (the bridge's extension builds with this torch into
  # $VB_CACHE_DIR); the deadline leaves time for the last shape and the report.
  # shellcheck disable=SC2086
  PYTHONPATH="${site}${site:+${PYTHONPATH:+:}}${PYTHONPATH:-}" VLADBUD="$VB" "$VB_PYTHON" bench/peers_cuda.py \
    --device cuda --dtype "${PEERS_DTYPE:-bf16}" --out "$LOGS" --build-timeout 120 \
    --deadline $(( ${STAGE_LIMIT_NOW:-300} - 45 )) ${PEERS_ARGS:-}
  rc=$?
  [ -n "${H200_OUT:-}" ] && cp "$LOGS"/peers-*.md "$LOGS"/peers-*.json "$H200_OUT"/ 2>/dev/null
  cat "$LOGS"/peers-*.md 2>/dev/null
  return $rc
}
export LOGS="$logs" H200_OUT="$out"
export -f ts_lines stage_correctness stage_gpu-tests stage_run-all stage_variants stage_rank-cuda stage_rank-cpu stage_pipeline stage_optimizer stage_scaleout stage_peers
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(correctness run-all rank-cuda rank-cpu gpu-tests pipeline)
for s in "${stages[@]}"; do  # every stage name checked before any is run
  if ! declare -F "stage_$s" >/dev/null; then
    echo "h200_all.sh: unknown stage '$s' (stages: ${!limit[*]}; --help)" | tee -a "$summary" >&2
    exit 2
  fi
done
for s in "${stages[@]}"; do
  lim="${limit[$s]}"
  var="STAGE_LIMIT_${s//-/_}"
  [ -n "${!var:-}" ] && lim="${!var}"
  t0=$(date +%s)
  echo "== $s (limit ${lim}s)" >&2
  export STAGE_LIMIT_NOW="$lim"
  timeout -k 5 "$lim" bash -c "stage_$s" >"$logs/$s.log" 2>&1
  rc=$?
  echo "$s rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$summary" >&2
  tail -n 12 "$logs/$s.log" | cut -c1-220 | sed "s/^/  [$s] /" >&2
  # After every stage, so that a call cut short still brings back what finished.
  tar -C "$(dirname "$logs")" -czf "$out/h200-results.tar.gz.tmp" h200 &&
    mv "$out/h200-results.tar.gz.tmp" "$out/h200-results.tar.gz"
  cp "$summary" "$out/summary.txt"
done
cat "$summary"
