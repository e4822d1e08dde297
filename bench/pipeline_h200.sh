#!/usr/bin/env bash
# The PyTorch bridge pipeline on the GPU machine (issue 6): LLaMA small (models/llama.py) in fp16
# on the H200: profile -> extract -> bench -> verify, written as Markdown to
# OUTDIR/pipeline-h200.md (with profile.json, verify.json and the Chrome trace beside it).
#
#   bench/h200_all.sh --pack          (dev machine) build and copy the binaries into .h200/
#   bench/pipeline_h200.sh [OUTDIR]   (GPU machine) OUTDIR defaults to $OUT, else bench/results
#
# Needs there: python3 with torch + CUDA (VB_PYTHON overrides), g++ (CPU-backend kernels).
# Kernels: the cuda backend when `vladbud` knows it and its extract + verify succeed; otherwise
# the CPU backend (its kernels staged through host memory inside the CUDA model) -- the report
# says which. Budget: ~3 minutes (each step has a timeout).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"


out="${1:-${OUT:-$here/bench/results}}"
mkdir -p "$out"
md="$out/pipeline-h200.md"
shape="${VB_PIPELINE_SHAPE:-4,256}"
device="${VB_PIPELINE_DEVICE:-cuda}"  # cpu only to dry-run this script on a machine without a GPU
export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export VB_PYTHON="${VB_PYTHON:-python3}"
export PATH="$PATH:/usr/local/cuda/bin"
t_start=$(date +%s)

vb=""
if [ -x "$here/.h200/vladbud" ] &&
    LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$here/.h200/vladbud" --version >/dev/null 2>&1; then
  export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  vb="$here/.h200/vladbud"
  [ -x "$here/.h200/vladbud-runner" ] && export VB_RUNNER="$here/.h200/vladbud-runner"
elif [ -x "$here/build/vladbud" ]; then
  vb="$here/build/vladbud"
else
  echo "pipeline_h200: no vladbud binary: run 'bench/h200_all.sh --pack' on the dev machine and carry .h200" >&2
  exit 2
fi

w="$(mktemp -d /tmp/vb-pipeline.XXXXXX)"
cd "$w" || exit 2
{
  echo "# PyTorch bridge pipeline on the H200: LLaMA small, fp16, --device cuda"
  echo
  echo "Written by \`bench/pipeline_h200.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ) ($(hostname))."
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
  "$VB_PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else 'NO CUDA')" 2>&1 | tail -1
  "$vb" --version 2>&1
  echo "vladbud-runner: ${VB_RUNNER:-next to vladbud}"
  echo '```'
} >"$md"

step() {  # step TITLE TIMEOUT CMD...: runs CMD, appends command + output to the report
  local title="$1" limit="$2"
  shift 2
  local t0 rc
  t0=$(date +%s)
  echo "pipeline_h200: $title" >&2
  timeout "$limit" "$@" >"$w/step.out" 2>&1
  rc=$?
  {
    echo
    echo "## $title"
    echo
    echo '```'
    echo "\$ ${*/#$vb/vladbud}"
    cat "$w/step.out"
    echo "(exit $rc, $(( $(date +%s) - t0 )) s$([ $rc -eq 124 ] && echo ", stopped by the ${limit} s timeout"))"
    echo '```'
  } >>"$md"
  return $rc
}

step "1. profile" 120 "$vb" profile --model "$here/models/llama.py" --class-name Llama \
  --input-shape "$shape" --dtype fp16 --device "$device" --export-trace --rows 15
prc=$?
cp -f workspace/profile.json "$out/pipeline-h200-profile.json" 2>/dev/null
[ -f workspace/trace.json ] && gzip -c workspace/trace.json >"$out/pipeline-h200-trace.json.gz"
if [ $prc -ne 0 ]; then
  echo -e "\nProfile failed; nothing further ran." >>"$md"
  exit 1
fi

backend=cpu
why="vladbud has no cuda backend in this build"
if "$vb" bench --kernel rmsnorm --backend cuda --list-sizes >/dev/null 2>&1; then
  if step "2. extract (cuda backend)" 30 "$vb" extract --top 5 --backend cuda; then
    backend=cuda
  else
    why="extract --backend cuda failed (see above)"
  fi
fi
if [ "$backend" = cpu ]; then
  step "2. extract (cpu backend: $why)" 30 "$vb" extract --top 5 --backend cpu
fi

n=0
for f in workspace/kernels/*/; do
  n=$((n + 1))
  [ $n -gt 3 ] && break
  [ $(( $(date +%s) - t_start )) -gt 110 ] && { echo -e "\n(bench of $f skipped: time budget)" >>"$md"; continue; }
  # The first bench also measures this machine's ceilings once (~20-30 s, then cached).
  ( cd "$f" && step "3.$n bench in $f" $([ $n -eq 1 ] && echo 80 || echo 35) "$vb" bench --quick --backend "$backend" )
done

vrc=1
if [ "$backend" = cuda ]; then
  step "4. verify (cuda backend kernels)" 90 "$vb" verify --reps 5
  vrc=$?
  if [ $vrc -ne 0 ]; then
    echo -e "\nThe cuda-backend verify did not pass (exit $vrc); verifying with the CPU backend instead." >>"$md"
    backend=cpu
    mkdir -p "$w/cpu" && cp workspace/profile.json "$w/cpu/" && cd "$w/cpu" &&
      step "2b. extract (cpu backend)" 30 "$vb" extract --top 5 --backend cpu --workspace "$w/cpu"
    cd "$w" || exit 2
    step "4b. verify (cpu backend kernels, staged through host memory)" 120 "$vb" verify --reps 5 --workspace "$w/cpu"
    vrc=$?
    cp -f "$w/cpu/verify.json" "$out/pipeline-h200-verify.json" 2>/dev/null
  else
    cp -f workspace/verify.json "$out/pipeline-h200-verify.json" 2>/dev/null
  fi
else
  step "4. verify (cpu backend kernels, staged through host memory)" 120 "$vb" verify --reps 5
  vrc=$?
  cp -f workspace/verify.json "$out/pipeline-h200-verify.json" 2>/dev/null
fi
{
  echo
  echo "Kernels verified with the **$backend** backend. Total $(( $(date +%s) - t_start )) s."
} >>"$md"
cat "$md"
exit $vrc
