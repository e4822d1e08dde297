#!/usr/bin/env bash
# Step-overhead probe (issue 16): what the evaluator's stepped timing (stop before each timed
# call, continue from the parent) costs VladBud's CPU matmul starter and torch.mm, in PAIRS
# alternating rounds at M N K (default 64 512 512, GPT-2/LLaMA-small at 64 tokens), two threads.
# Usage: bench/step_overhead/run.sh [M N K] [PAIRS]   (x86-64 with AVX-512; needs the .venv)
# Prints the medians per round; medians of rounds and the ratios are for the reader (one run on
# a shared machine: read the ratios of a round, not latencies across runs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
M="${1:-64}"; N="${2:-512}"; K="${3:-512}"; pairs="${4:-4}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
inc=(-I"$here/kernels/include")
for d in /usr/include "$here/.h200/include"; do [ -f "$d/dlpack/dlpack.h" ] && inc+=(-I"$d"); done
g++ -O2 -march=native -o "$tmp/driver" "$here/bench/step_overhead/driver.cpp" "${inc[@]}" -ldl
g++ -O3 -march=native -fopenmp -shared -fPIC -o "$tmp/mm.so" "$here/kernels/cpu/matmul.cpp" "${inc[@]}"
py="$here/.venv/bin/python"
echo "date $(date -u +%FT%TZ), commit $(git -C "$here" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg), ${M}x${N}x${K}"
for r in $(seq "$pairs"); do
  p50() { sed 's/.* p50 \([0-9.]*\).*/\1/'; }
  a=$("$tmp/driver" "$tmp/mm.so" "$M" "$N" "$K" 2 200 | p50)
  b=$("$tmp/driver" "$tmp/mm.so" "$M" "$N" "$K" 1 200 | p50)
  c=$("$py" "$here/bench/step_overhead/torch_mm.py" "$M" "$N" "$K" 200 0 2 | p50)
  d=$("$py" "$here/bench/step_overhead/torch_mm.py" "$M" "$N" "$K" 200 1 2 | p50)
  echo "round $r: vladbud not stepped $a us, stepped $b us | torch.mm not stepped $c us, stepped $d us"
done
