#!/usr/bin/env bash
# Cross-checks VladBud's occupancy calculator against cudaOccupancyMaxActiveBlocksPerMultiprocessor
# on the local GPU (run on the H200 machine). Writes the runtime's answers as JSON lines to
# $1 (default tests/fixtures/cuda/occupancy_<gpu>.jsonl); the unit test
# Occupancy.MatchesTheCudaRuntimeOnRecordedDevices then checks the calculator against them.
#   bash bench/occupancy_check.sh "$OUT/occupancy_h200.jsonl"
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$here/tests/fixtures/cuda/occupancy_h200.jsonl}"
nvcc="${VB_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$nvcc" -O3 -std=c++17 -arch=native -o "$tmp/occupancy_check" "$here/bench/occupancy_check.cu"
"$tmp/occupancy_check" > "$out"
echo "wrote $out ($(wc -l < "$out") lines)"
