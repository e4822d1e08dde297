#!/usr/bin/env bash
# Tuning variants of the CUDA starters side by side with their peers (issue 15), on the GPU
# machine in one device call: each variant is the starter with one @vb-param default changed,
# measured by bench/peers_cuda.py (one process per variant, the peers re-timed in each, so a
# variant's figure is read against the baselines of its own run). The starters themselves run
# first. Results: $OUT/peers-variants.md (every run's table rows, in order) and
# $OUT/peers-variants.tar.gz (each run's peers-<gpu>.md/.json).
#
#   bash bench/peers_variants.sh TYPE:PARAM=VALUE ...    e.g. flash_attention:FA_WG_PINGPONG=0
#     (there, from the repo root, carrying .h200 as bench/h200_all.sh does)
# PEERS_VARIANT_ARGS adds bench/peers_cuda.py flags (default: --no-compile --no-liger).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
if [ $# -eq 0 ] || [ "${1:-}" = "--help" ]; then
  sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 0 ] && exit 2 || exit 0
fi
out="${OUT:-$here/peers-variants-out}"
work="$(mktemp -d)"
mkdir -p "$out" "$work/runs" "$work/src"
export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
export VLADBUD="${VLADBUD:-$here/.h200/vladbud}" PYTHONUNBUFFERED=1
py="${VB_PYTHON:-python3}"
# shellcheck disable=SC2206
extra=(${PEERS_VARIANT_ARGS:---no-compile --no-liger})

# Validate every spec before measuring anything: TYPE:PARAM=VALUE with PARAM declared in the starter.
specs=()
for spec in "$@"; do
  if ! [[ "$spec" =~ ^([a-z_]+):([A-Z0-9_]+)=([0-9]+)$ ]]; then
    echo "peers_variants: '$spec' is not TYPE:PARAM=VALUE (e.g. fused_mlp:WG_STAGES=3)" >&2; exit 2
  fi
  t="${BASH_REMATCH[1]}" p="${BASH_REMATCH[2]}" v="${BASH_REMATCH[3]}"
  src="kernels/cuda/$t.cu"
  [ -f "$src" ] || { echo "peers_variants: no starter $src for type '$t'" >&2; exit 2; }
  grep -q "^#define $p " "$src" || { echo "peers_variants: $src declares no '#define $p'" >&2; exit 2; }
  f="$work/src/${t}__${p}_$v.cu"
  sed "s/^#define $p .*/#define $p $v/" "$src" >"$f"
  specs+=("$t" "$f" "$p=$v")
done
types=$(printf '%s\n' "${specs[@]}" | awk 'NR % 3 == 1' | sort -u | paste -sd, -)

run() {  # name, peers args...
  local name="$1"; shift
  echo "== $name" >&2
  "$py" bench/peers_cuda.py --device cuda --dtype "${PEERS_DTYPE:-bf16}" --out "$work/runs/$name" \
    --build-timeout 120 "${extra[@]}" "$@" 2>"$work/runs/$name.log"
  local rc=$?
  { echo "## $name (exit $rc)"; echo
    grep -E '^\|( kernel|---| [a-z_]+ \|)' "$work/runs/$name"/peers-*.md 2>/dev/null || tail -3 "$work/runs/$name.log"
    echo; } >>"$out/peers-variants.md"
}
{ echo "# Starter tuning variants next to their peers"; echo
  echo "bench/peers_variants.sh $*, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"; echo; } >"$out/peers-variants.md"
run starters --types "$types"
for ((i = 0; i < ${#specs[@]}; i += 3)); do
  run "${specs[i]}-${specs[i+2]}" --types "${specs[i]}" --source "${specs[i]}=${specs[i+1]}"
done
tar czf "$out/peers-variants.tar.gz" -C "$work" runs src
cat "$out/peers-variants.md"
