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
had_build=$([ -e build ] && echo 1 || true)
installed=1
"$python" -m pip install -q --no-deps --no-index --no-build-isolation --target "$site" . || installed=
# pip builds in the checkout: its build/ folder would shadow the 'build' package for the tests
[ -z "$had_build" ] && rm -rf build
if [ -z "$installed" ]; then
    # No build backend there: the checkout itself on the path, and the plugin's entry point declared
    # by hand (pytest finds plugins through installed distributions' entry points).
    echo "gpu_check: pip could not build the project; using the checkout with a declared entry point" >&2
    info="$site/pytest_torchbench-0.1.0.dist-info"
    mkdir -p "$info"
    printf 'Metadata-Version: 2.1\nName: pytest-torchbench\nVersion: 0.1.0\n' >"$info/METADATA"
    printf '[pytest11]\ntorchbench = pytest_torchbench.pytest.plugin\n' >"$info/entry_points.txt"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
"$python" -c "import pytest, torch; print('pytest', pytest.__version__, 'torch', torch.__version__)"
# Not exec: the EXIT trap must still remove the temporary install folder.
"$python" benchmarks/gpu_check.py
