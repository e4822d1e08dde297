#!/usr/bin/env bash
# Downloads (here, where PyPI is reachable) the wheels the optimizer's worker pool needs on the
# H200 machine, which reaches no registry: dask and distributed (pinned as in
# scripts/requirements.txt) and those of their dependencies the H200 image lacks (it has
# cloudpickle, toolz, msgpack, psutil, pyyaml, jinja2, click, fsspec, urllib3, packaging,
# sortedcontainers). Python 3.12 (the H200 image's), x86_64 manylinux; pure-Python wheels are
# py3-none-any. Into .whl/ (git-ignored through .git/info/exclude; carry it with .h200).
# There: python3 -m pip install --no-index --no-deps --target /tmp/vb-dask .whl/*.whl and
#   PYTHONPATH=/tmp/vb-dask (bench/scaleout_h200.sh does it when Dask is not importable; the
#   other dependencies come from the image).
# Usage: bash bench/fetch_dask_wheels.sh [--check]   (--check: verify the folder is complete)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
py="${VB_PYTHON:-python3}"
[ -x .venv/bin/python ] && py=.venv/bin/python
ver() { sed -n "s/^$1==\(.*\)$/\1/p" scripts/requirements.txt; }
dask_v="$(ver dask)"; dist_v="$(ver distributed)"
[ -n "$dask_v" ] && [ -n "$dist_v" ] || { echo "fetch_dask_wheels.sh: dask/distributed are not pinned in scripts/requirements.txt" >&2; exit 2; }
# Missing from the H200 image (distributed's and dask's Requires-Dist minus what the image has):
# partd, locket (dask), tblib, tornado, zict (distributed). Versions: what pip resolves here.
# (On a Python older than 3.12 dask also needs importlib_metadata; the H200 image's is 3.12.)
wanted=("dask==$dask_v" "distributed==$dist_v" "partd==1.4.2" "locket==1.0.0" "tblib==3.2.2"
        "tornado==6.6.1" "zict==3.0.0")
if [ "${1:-}" = "--check" ]; then
  miss=0
  for w in "${wanted[@]}"; do
    n="${w%%==*}"; v="${w##*==}"
    ls .whl/"${n//-/_}"-"${v}"-*.whl >/dev/null 2>&1 || ls .whl/"${n}"-"${v}"-*.whl >/dev/null 2>&1 ||
      { echo "missing: $w" >&2; miss=1; }
  done
  exit $miss
fi
mkdir -p .whl
exclude="$(git rev-parse --git-path info/exclude)"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
for w in "${wanted[@]}"; do
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$w"
done
ls -la .whl >&2
du -sh .whl >&2
