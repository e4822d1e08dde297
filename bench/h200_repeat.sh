#!/usr/bin/env bash
# One kernel type's CUDA starter timed N times in a row, each a fresh `vladbud bench` call
# (--timing-only, no PyTorch), to see the run-to-run spread of the timing protocol on the
# GPU machine. Run there from the repository root, carrying .h200 (bash bench/h200_all.sh --pack):
#   bash bench/h200_repeat.sh [TYPE (cross_entropy)] [N (6)] [DTYPE (bf16)]
# Writes $OUT/repeat.txt (one line per call: time, median latency), $OUT/repeat.tsv and the
# calls' JSON reports. The starter must have passed its correctness stages before (the
# `correctness` stage of bench/h200_all.sh): --timing-only skips them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
k="${1:-cross_entropy}" n="${2:-6}" dt="${3:-bf16}"
[ -x .h200/vladbud ] || { echo "h200_repeat.sh: .h200/vladbud missing: run 'bash bench/h200_all.sh --pack' here and carry .h200" >&2; exit 2; }
export PATH="$PWD/.h200:$PATH:/usr/local/cuda/bin" CPATH="$PWD/.h200/include" LD_LIBRARY_PATH="$PWD/.h200"
export VLADBUD_HOME="$PWD" VB_RUNNER="$PWD/.h200/vladbud-runner" VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vbc}"
out="${OUT:-$PWD/h200-out}"
mkdir -p "$out"
for i in $(seq 1 "$n"); do
  .h200/vladbud bench --backend cuda -k "$k" --timing-only --dtype "$dt" --no-pytorch --json \
    --results "$out/repeat.tsv" >"$out/repeat.$i.json" 2>&1
  echo "call $i $(date -u +%T) $(grep -o '"latency_us"[^,]*' "$out/repeat.$i.json")"
done | tee "$out/repeat.txt"
