#!/usr/bin/env bash
# The GPU check: every CUDA path of pytest-torchbench on one GPU, in about 5 minutes, with no network.
#
# On a GPU machine that has torch, pytest, pytest-xdist and numpy (and no package registry), from the
# repository root:   bash benchmarks/gpu_check.sh
# It installs the project from this checkout into a folder of its own (no dependencies fetched),
# then runs benchmarks/gpu_check.py: the GPU suite in every mode, A/A across processes, one
# injected regression per metric, the GPU-path tests and the fast tests; it prints each figure
# against its target and exits non-zero when one is missed. Logs and JSON go to $OUT (or a
# temporary folder). docs/design/gpu.md holds the figures of the last run.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
site=$(mktemp -d "${TMPDIR:-/tmp}/torchbench-site-XXXXXX")
trap 'rm -rf "$site"' EXIT
if ! "$python" -m pip install -q --no-deps --no-index --no-build-isolation --target "$site" . ; then
    echo "gpu_check: could not install the project into $site (pip install --no-deps --no-index)" >&2
    exit 4
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
"$python" -c "import pytest, torch; print('pytest', pytest.__version__, 'torch', torch.__version__)"
exec "$python" benchmarks/gpu_check.py
