#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: ctest on the Release build,
# then the PyTorch bridge's pytest suite (python/tests) in .venv. Fails when either fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh" --tests
cd "$here/build"
ctest --output-on-failure -j 1 "$@"
cd "$here"
"$here/.venv/bin/python" -m pytest -q python/tests
