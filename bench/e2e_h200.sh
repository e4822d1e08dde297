#!/usr/bin/env bash
# The end-to-end benchmark (issue 14) on the H200 machine, in one call of the device tool (a second
# for the models the first had no time for: see Time below): Liger-Kernel from the carried wheels,
# the vladbud binaries carried in .h200/, bench/e2e.py over the H200 models (HF Llama 836M bf16
# 1x2048, LLaMA small fp16 4x256, GPT-2 small bf16 1x1024, BERT-base bf16 8x512), then the GPU tests
# (`pytest -k cuda`). Everything lands in $OUT:
#   e2e-h200.md, e2e-h200.json          the table (rewritten after every model)
#   e2e-h200-workspaces.tar.gz          each model's profile.json, verify.json, step logs, sources
#   e2e-h200-run.log                    this script's whole output
#   pytest-cuda.log                     the GPU tests
#
#   bash bench/e2e_h200.sh --pack     here: build (scripts/setup.sh), copy vladbud, vladbud-runner,
#                                     libfmt and the DLPack/Highway headers into .h200/ (as
#                                     bench/h200_all.sh --pack, without the test executables),
#                                     .h200/GIT_COMMIT, liger-kernel 0.8.5 into .whl/
#   bash bench/e2e_h200.sh            there, from the repo root; the device call carries .h200 and .whl:
#       run(command="bash bench/e2e_h200.sh", carry=[".h200", ".whl"], timeout_s=600)
#
# Time: E2E_TOTAL seconds for the whole script (default 480, i.e. 8 min; the call's limit is 10
# min, the machine's start is not counted in it). e2e.py gets what is left after the setup minus
# PYTEST_LIMIT (default 75 s) as its --deadline (~375 s); each model also has its own limit
# (e2e.py: hf-llama-836m 330 s, the others 150 s; E2E_MODEL_LIMIT overrides them all), so the
# models after the HF Llama get what is left, and one cut short is a row with its error.
# E2E_MODELS picks models; E2E_PYTEST=0 skips the GPU tests; E2E_ARGS adds e2e.py flags. Two calls
# cover the four models (copy each call's e2e-h200.json out of its files_at folder first):
#   1. run(command="bash bench/e2e_h200.sh", carry=[".h200", ".whl"])
#   2. run(command="E2E_MODELS=llama,gpt2,bert E2E_PYTEST=0 bash bench/e2e_h200.sh", carry=[".h200", ".whl"])
#   here: python3 bench/e2e.py --merge call1/e2e-h200.json call2/e2e-h200.json --outdir bench/results
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi
if [ -n "${1:-}" ] && [ "${1:-}" != "--pack" ]; then
  echo "e2e_h200.sh: unknown argument '$1' (--pack here, no argument on the GPU machine, --help)" >&2
  exit 2
fi
if [ "${1:-}" = "--pack" ]; then
  set -e
  # What bench/h200_all.sh --pack copies, without building the test executables (e2e needs none;
  # h200_all.sh --pack adds them for its gpu-tests stage).
  bash scripts/setup.sh >/dev/null
  mkdir -p .h200
  cp build/vladbud build/vladbud-runner .h200/
  fmt_lib="$(ldd build/vladbud | awk '/libfmt/ {print $3}')"
  [ -n "$fmt_lib" ] && cp -L "$fmt_lib" .h200/
  mkdir -p .h200/include && cp -rL /usr/include/dlpack /usr/include/hwy .h200/include/
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.h200/' "$exclude" 2>/dev/null || echo '/.h200/' >>"$exclude"
  { git rev-parse HEAD; git status --porcelain --untracked-files=no; } >.h200/GIT_COMMIT
  .h200/vladbud verify --help | grep -q -- --compile ||
    { echo "e2e_h200 --pack: build/vladbud's verify has no --compile" >&2; exit 1; }
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
  if ! ls .whl/liger_kernel-0.8.5-*.whl >/dev/null 2>&1; then
    # Pure Python; its needs (torch, triton, packaging; transformers for the HF patches) are
    # already on the H200 image (KINDS.md's package list).
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl liger-kernel==0.8.5
  fi
  du -sh .h200 .whl >&2
  exit 0
fi

t_start=$(date +%s)
total="${E2E_TOTAL:-480}"
pytest_limit="${PYTEST_LIMIT:-75}"
out="${OUT:-$here/h200-out}"
mkdir -p "$out"
elapsed() { echo $(( $(date +%s) - t_start )); }

main() {
echo "e2e_h200: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname); budget ${total} s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | head -2
uptime

# 1. Wheels (liger-kernel) from .whl/, as the device README says.
if ls .whl/*.whl >/dev/null 2>&1; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl; then
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    echo "e2e_h200: installed into /tmp/site:" .whl/*.whl
  else
    echo "e2e_h200: pip install of .whl/ failed: Liger-Kernel will be reported as not importable"
  fi
else
  echo "e2e_h200: no .whl/ (carry it): Liger-Kernel will be reported as not importable"
fi
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1
python3 -c 'import liger_kernel.transformers as lt; print("liger_kernel", lt.apply_liger_kernel_to_llama.__module__)' 2>&1 | tail -1

# 2. The vladbud binaries: .h200/ (built here by --pack; the image lacks fmt/CLI11/nlohmann-json/
# DLPack to build them there). build/vladbud only if someone carried a build that runs.
export VLADBUD_HOME="$here"
export VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
export VB_PYTHON="${VB_PYTHON:-python3}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
export PYTHONUNBUFFERED=1
vb=""
if [ -x .h200/vladbud ] && .h200/vladbud --version >/dev/null 2>&1; then
  vb="$here/.h200/vladbud"
  [ -x .h200/vladbud-runner ] && export VB_RUNNER="$here/.h200/vladbud-runner"
  [ -f .h200/GIT_COMMIT ] && echo "e2e_h200: .h200 packed from commit $(head -1 .h200/GIT_COMMIT)"
elif [ -x build/vladbud ] && build/vladbud --version >/dev/null 2>&1; then
  vb="$here/build/vladbud"
else
  echo "e2e_h200: no runnable vladbud: run 'bash bench/e2e_h200.sh --pack' on the dev machine and carry .h200"
fi
export VLADBUD="${vb:-$here/.h200/vladbud}"
[ -n "$vb" ] && { "$vb" --version; "$vb" verify --help | grep -q -- --compile ||
  echo "e2e_h200: WARNING: this vladbud's verify has no --compile (re-pack from a tree that has it)"; }

# 3. bench/e2e.py on the H200 models.
reserve=$pytest_limit
[ "${E2E_PYTEST:-1}" = 0 ] && reserve=0
deadline=$(( total - reserve - 15 - $(elapsed) ))
[ "$deadline" -lt 30 ] && deadline=30
echo "e2e_h200: bench/e2e.py with a ${deadline} s deadline (setup took $(elapsed) s)"
models=()
[ -n "${E2E_MODELS:-}" ] && models=(--models "$E2E_MODELS")
limit=()
[ -n "${E2E_MODEL_LIMIT:-}" ] && limit=(--model-limit "$E2E_MODEL_LIMIT")
# shellcheck disable=SC2086
timeout -k 5 $(( deadline + 30 )) python3 bench/e2e.py --machine h200 --outdir "$out" \
  --work /tmp/e2e-work --deadline "$deadline" --archive "$out/e2e-h200-workspaces.tar.gz" \
  "${models[@]}" "${limit[@]}" ${E2E_ARGS:-}
e2e_rc=$?
echo "e2e_h200: bench/e2e.py exit $e2e_rc at $(elapsed) s"

# 4. The GPU tests.
left=$(( total - $(elapsed) - 5 ))
[ "$left" -gt "$pytest_limit" ] && left=$pytest_limit
if [ "${E2E_PYTEST:-1}" = 0 ]; then
  echo "e2e_h200: pytest -k cuda skipped (E2E_PYTEST=0)"
elif [ "$left" -ge 20 ]; then
  timeout -k 5 "$left" python3 -m pytest -q -p no:cacheprovider python/tests -k cuda >"$out/pytest-cuda.log" 2>&1
  prc=$?
  tail -n 15 "$out/pytest-cuda.log"
  echo "e2e_h200: pytest -k cuda exit $prc$([ $prc -eq 5 ] && echo ' (no test matched -k cuda)')$([ $prc -eq 124 ] && echo " (stopped by its ${left} s limit)") at $(elapsed) s"
else
  echo "e2e_h200: pytest -k cuda skipped: ${left} s left"
fi
uptime
[ -f "$out/e2e-h200.md" ] && cat "$out/e2e-h200.md"
echo "e2e_h200: done in $(elapsed) s"
return $e2e_rc
}

main 2>&1 | tee "$out/e2e-h200-run.log"
exit "${PIPESTATUS[0]}"
