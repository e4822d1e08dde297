#!/usr/bin/env bash
# Exported Hugging Face `kernels` packages on the H200 (issue 19, `vladbud export`): rmsnorm and
# fused_mlp exported from kernels/cuda, built as torch211-cxx11-cu130-x86_64-linux there, loaded
# with kernels.get_local_kernel, checked against float64 PyTorch and timed against PyTorch, and an
# HF Llama (from a config, bf16) kernelized end to end. Details: bench/hf_export_h200.py.
#
#   bash bench/hf_export_h200.sh --fetch-wheels   here: the wheels the H200 image lacks (kernels,
#                                                 kernels-data, tomli, ninja) into .whl/ (git-ignored via
#                                                 .git/info/exclude; carry it with .h200)
#   bash bench/h200_all.sh --pack                 here: .h200/ (the vladbud CLI the export uses)
#   bash bench/hf_export_h200.sh                  there, from the repo root: installs .whl/ into
#                                                 /tmp/site and writes $OUT/hf-export-h200.{json,md}
#   bash bench/hf_export_h200.sh --dry-run        anywhere: the CPU path (CPU starters, small shapes)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
# kernels 0.16.x: transformers 5.17 accepts >=0.16.0,<0.17.0 (scripts/requirements.txt pins it).
# ninja: torch.utils.cpp_extension builds the variant with it (skipped there when already present).
wheels=(kernels==0.16.2 kernels-data==0.16.2 ninja==1.13.0)

if [ "${1:-}" = "--fetch-wheels" ]; then
  py="$here/.venv/bin/python"; [ -x "$py" ] || py=python3
  mkdir -p .whl
  # kernels is pure Python, kernels-data an abi3 manylinux wheel: any CPython >= 3.9 on x86_64.
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --python-version 3.12 --implementation cp -d .whl "${wheels[@]}"
  # tomli: kernels reads TOML with it on Python < 3.11 (tomllib after); the pure-Python wheel.
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform any --python-version 3.10 --implementation py -d .whl tomli==2.2.1
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
  ls -la .whl >&2
  exit 0
fi

dry=()
[ "${1:-}" = "--dry-run" ] && dry=(--dry-run)
out="${OUT:-$here/h200-out}"
mkdir -p "$out"
py="${VB_PYTHON:-python3}"
py="$(command -v "$py" || echo "$py")"
case "$py" in /*) ;; *) py="$here/$py" ;; esac  # checks below run from / (see there)
if [ ${#dry[@]} -eq 0 ]; then
  # Checked from /: in the repo root `import kernels` finds this repository's kernels/ folder (a
  # namespace package), so the check passed without the wheels on the H200's first run.
  if ! (cd / && "$py" -c 'import kernels.utils' 2>/dev/null); then
    ls .whl/*.whl >/dev/null 2>&1 || { echo "no .whl/: run 'bash bench/hf_export_h200.sh --fetch-wheels' here and carry .whl" >&2; exit 2; }
    # Only the wheels this script fetches (.whl/ may hold others, e.g. Dask's for scaleout).
    need=()
    for w in "${wheels[@]}" tomli==2.2.1; do
      f="$(ls .whl/"$(echo "${w%%==*}" | tr - _)"-"${w##*==}"-*.whl 2>/dev/null | head -1)"
      [ -n "$f" ] || { echo "no wheel for $w in .whl/: run 'bash bench/hf_export_h200.sh --fetch-wheels' here" >&2; exit 2; }
      need+=("$f")
    done
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${need[@]}"
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  # The CLI and the headers packed by bench/h200_all.sh --pack (the export runs `vladbud export`).
  if [ -x "$here/.h200/vladbud" ]; then
    export VB="$here/.h200/vladbud" VB_PYTHON="$py"
    export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  export PATH="$PATH:/usr/local/cuda/bin" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
else
  py="$here/.venv/bin/python"; [ -x "$py" ] || py=python3
  [ -x "$here/build/vladbud" ] && export VB="$here/build/vladbud"
fi
export VLADBUD_HOME="$here" VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}" PYTHONUNBUFFERED=1
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# kernels has no __version__: the installed distribution's metadata says it.
(cd / && "$py" -c 'import torch, transformers, importlib.metadata as m; print("torch", torch.__version__, "kernels", m.version("kernels"), "transformers", transformers.__version__)')
exec "$py" bench/hf_export_h200.py --out "$out" "${dry[@]}"
