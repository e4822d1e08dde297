#!/usr/bin/env bash
# The end-to-end benchmark (issue 14) on this machine: runs bench/e2e.py with the repository's
# Python and vladbud binary; every argument goes to e2e.py (bench/e2e.py --help lists them).
#
#   bash bench/e2e.sh                       # CPU defaults: gpt2, llama, bert -> bench/results/e2e-cpu.{md,json}
#   bash bench/e2e.sh --models gpt2 --outdir /tmp/e2e-smoke
#
# Python: $E2E_PYTHON, else .venv/bin/python, else python3. Binary: $VLADBUD, else build/vladbud.
# Exit status: e2e.py's (0 when every model was measured without an error, 1 otherwise, 2 for a
# bad flag or a vladbud without `verify --compile`).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${E2E_PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$here/.venv/bin/python" ]; then py="$here/.venv/bin/python"; else py=python3; fi
fi
export VLADBUD="${VLADBUD:-$here/build/vladbud}"
export VLADBUD_HOME="${VLADBUD_HOME:-$here}"
export PYTHONUNBUFFERED=1
exec "$py" "$here/bench/e2e.py" "$@"
