#!/usr/bin/env bash
# Installs what VladBud needs (Debian packages, only when missing), then configures and builds
# it into build/ (Release). Safe to re-run.
# Usage: scripts/setup.sh [--tests] [--sanitize] [--build-dir DIR] [--target T]...
#   --tests     also build the test executables (scripts/test.sh passes it)
#   --sanitize  AddressSanitizer + UBSan build in build-asan/
#   --target T  build only target T (repeatable; e.g. vb_unit_tests, which .ci/run builds under ASan)
# Compiles go through ccache (Debian package) with CCACHE_BASEDIR set to the checkout, so a clean
# clone elsewhere on the same machine (CI) reuses the objects of earlier builds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$here/build"
sanitize=OFF
targets=(--target vladbud vladbud-runner)
picked=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=ON; build_dir="$here/build-asan" ;;
    --tests) targets=() ;;
    --build-dir) build_dir="$2"; shift ;;
    --target) [ $# -ge 2 ] || { echo "setup.sh: --target needs a target name" >&2; exit 2; }
              picked+=(--target "$2"); shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ ${#picked[@]} -gt 0 ] && targets=("${picked[@]}")

# Debian packages: toolchain, CLI11, nlohmann-json, fmt, DLPack, Highway, GoogleTest; the ladder
# for CPU targets: clang-19, llvm-19 (llvm-mca-19), libomp-19-dev (omp.h for clang), qemu-user,
# the aarch64 cross compiler; ccache for the C++ builds.
pkgs=(cmake make g++ ccache libcli11-dev nlohmann-json3-dev libfmt-dev libdlpack-dev libhwy-dev libgtest-dev g++-aarch64-linux-gnu clang-19 llvm-19 libomp-19-dev qemu-user)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi

# Python virtual environment (.venv): the PyPI packages in scripts/requirements.txt (the CUDA
# binary utilities cuobjdump + nvdisasm for SASS analysis, torch/numpy/pytest/matplotlib for the
# PyTorch bridge) and the bridge itself (python/, installed editable). Reinstalled only when the
# requirements file or python/pyproject.toml changes (their hash is stamped into the venv).
# A fresh install downloads ~3 GB (torch's Linux wheel with its CUDA libraries), ~1-2 min here,
# 4.8 GB on disk.
venv="$here/.venv"
req="$here/scripts/requirements.txt"
if [ -f "$req" ]; then
  stamp="$venv/.vladbud-requirements.sha256"
  want="$(cat "$req" "$here/python/pyproject.toml" 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if ! python3 -m venv --help >/dev/null 2>&1; then
      echo "setup: python3 with the venv module is required (apt-get install python3-venv)" >&2
      exit 1
    fi
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    echo "setup: installing Python packages from scripts/requirements.txt into .venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
    if [ -f "$here/python/pyproject.toml" ]; then
      "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
        --no-build-isolation -e "$here/python" >&2
    fi
    echo "$want" >"$stamp"
  fi
fi

jobs="$(nproc 2>/dev/null || echo 2)"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$here"
fi
cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DVB_SANITIZE="$sanitize" "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs" "${targets[@]}" >&2
echo "setup: built $build_dir/vladbud" >&2
