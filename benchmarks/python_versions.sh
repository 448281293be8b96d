#!/usr/bin/env bash
# pytest-torchbench's counting guarantees on other Python interpreters, each in its own venv.
#
#   bash benchmarks/python_versions.sh                # 3.10, 3.12 and 3.13
#   bash benchmarks/python_versions.sh 3.12           # one interpreter
#
# Per interpreter it finds `pythonX.Y` (on PATH, else under `pyenv root`), makes a venv under
# $PYTHON_VERSIONS_ROOT/X.Y (default /tmp/torchbench-python; never inside the repository; an existing
# venv is reused), installs torch==2.13.0 (on 3.12/3.13 PyPI has only its CUDA build, ~2.8 GB of
# wheels; it runs on the CPU) and this checkout with `pip install -e ".[test]"`, then runs from the
# repository root:
#   1. the determinism tests ($PYTHON_VERSIONS_TESTS; default: the compile leak, a test's heap and
#      counts independent of the worker's history, a heavy benchmark counted as in a fresh process);
#   2. the example suite in instructions,ops,compile,calls modes twice (A/A), and `test_mm` alone
#      (the compile leak: its counts alone against after examples/test_compile.py);
# and prints one table per interpreter against the targets: A/A identical (0 counts differ), the
# compile leak 0, the determinism tests passed. Logs and JSON reports stay in
# $PYTHON_VERSIONS_ROOT/X.Y/logs. Exit status: 0 when every target of every interpreter was met.
#
# Environment: PYTHON_VERSIONS_ROOT, PYTHON_VERSIONS_TESTS, PYTHON_VERSIONS_TIMEOUT (seconds per
# step, default 1800), PYTHON_VERSIONS_SKIP_TESTS=1 (only the example runs).
# docs/design/measurements.md ("Python versions") holds the figures of the last run.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=${PYTHON_VERSIONS_ROOT:-/tmp/torchbench-python}
step_timeout=${PYTHON_VERSIONS_TIMEOUT:-1800}
default_tests="tests/engines/test_shared_keys.py tests/e2e/test_compile_leak.py tests/e2e/test_instructions_history.py"
tests=${PYTHON_VERSIONS_TESTS:-$default_tests}
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(3.10 3.12 3.13)
mkdir -p "$root"

find_python() {
    local v=$1 found
    found=$(command -v "python$v" 2>/dev/null)
    if [ -z "$found" ] || ! "$found" -c pass 2>/dev/null; then  # a pyenv shim with no such version
        found=""
        if command -v pyenv >/dev/null; then
            found=$(ls -d "$(pyenv root)"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V | tail -1)
        fi
    fi
    echo "$found"
}

status=0
for version in "${versions[@]}"; do
    dir="$root/$version"; venv="$dir/venv"; logs="$dir/logs"
    mkdir -p "$logs"
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        echo "Python $version: not found (PATH, pyenv)"; status=1; continue
    fi
    started=$(date +%s)
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, pytest_torchbench" 2>/dev/null; then
        echo "== Python $version: venv in $venv ($python)" >&2
        { echo "torch==2.13.0"; } >"$dir/constraints.txt"
        if ! { "$python" -m venv "$venv" &&
               timeout "$step_timeout" "$venv/bin/python" -m pip install -q -c "$dir/constraints.txt" "torch==2.13.0" >"$logs/install.log" 2>&1 &&
               timeout "$step_timeout" "$venv/bin/python" -m pip install -q -c "$dir/constraints.txt" -e "$repo[test]" >>"$logs/install.log" 2>&1; }; then
            echo "Python $version: INSTALL FAILED (see $logs/install.log)"; status=1; continue
        fi
    else
        # reinstall the checkout (editable) in case the venv was made from another one
        "$venv/bin/python" -m pip install -q --no-deps -e "$repo" >>"$logs/install.log" 2>&1
    fi
    got=$("$venv/bin/python" -c "import torch, sys; print('Python', sys.version.split()[0], 'torch', torch.__version__)" 2>/dev/null)
    echo "== $got, installed in $(( $(date +%s) - started ))s" >&2

    run() {  # run NAME ARGS...: pytest from the repository root, its log in $logs/NAME.log
        local name=$1; shift
        local t0=$(date +%s)
        (cd "$repo" && env -u CI -u PYTEST_ADDOPTS timeout "$step_timeout" "$venv/bin/python" -m pytest -p no:cacheprovider "$@") \
            >"$logs/$name.log" 2>&1
        local rc=$?
        echo "== Python $version: $name exit $rc, $(( $(date +%s) - t0 ))s" >&2
        return $rc
    }
    tests_rc=skipped
    if [ -z "${PYTHON_VERSIONS_SKIP_TESTS:-}" ]; then
        eval "set -- $tests"
        run determinism-tests "$@" -q -m "slow or not slow"; tests_rc=$?
    fi
    modes=instructions,ops,compile,calls
    run examples-a examples -q -p no:benchmark --bench-mode=$modes --bench-json="$logs/a.json"; a_rc=$?
    run examples-b examples -q -p no:benchmark --bench-mode=$modes --bench-json="$logs/b.json"; b_rc=$?
    run mm-alone examples -q -p no:benchmark --bench-mode=$modes -k test_mm --bench-json="$logs/alone.json"; alone_rc=$?
    tail -1 "$logs/determinism-tests.log" 2>/dev/null | sed "s/^/determinism tests: /" >"$logs/tests-line.txt"
    "$venv/bin/python" - "$logs" "$version" "$tests_rc" "$a_rc" "$b_rc" "$alone_rc" <<'PY' || status=1
import json, sys
from pathlib import Path
logs, version, tests_rc, *rcs = sys.argv[1:]

def load(name):
    path = Path(logs) / name
    if not path.exists():
        return {}
    values = {}
    for result in json.loads(path.read_text())["benchmarks"]:
        for metric, value in result["metrics"].items():
            if metric == "instructions":
                values[(result["key"], metric)] = value["instructions_per_run"]
            elif isinstance(value, dict):
                values[(result["key"], metric)] = json.dumps(value, sort_keys=True)
    return values

a, b, alone = load("a.json"), load("b.json"), load("alone.json")
common = sorted(set(a) & set(b))
differ = [k for k in common if a[k] != b[k]]
worst = max((abs(a[k] / b[k] - 1) for k in differ if k[1] == "instructions" and b[k]), default=0.0)
leaks = {k[0]: (alone[k], a[k]) for k in alone if k in a and alone[k] != a[k]}
rows = [
    ("determinism tests", "passed", {"0": "passed", "skipped": "not run"}.get(tests_rc, f"FAILED (exit {tests_rc})")),
    ("example runs", "exit 0", "exit 0" if set(rcs) == {"0"} else f"exits {', '.join(rcs)}"),
    ("A/A: values that differ", "0", f"{len(differ)} of {len(common)}" + (f" (instructions worst {worst:.3%})" if worst else "")),
    ("test_mm alone vs after compile", "identical", "identical" if alone and not leaks else
     ("not run" if not alone else "; ".join(f"{k.split('::')[-1]}: {x:,.0f} alone, {y:,.0f} after" for k, (x, y) in leaks.items()))),
]
print(f"\nPython {version}")
print(f"| {'target':<32} | {'wanted':<9} | got")
for name, wanted, got in rows:
    print(f"| {name:<32} | {wanted:<9} | {got}")
for key in differ[:10]:
    print(f"  differs: {key[0]} [{key[1]}]: {str(a[key])[:60]} / {str(b[key])[:60]}")
ok = rows[0][2] in ("passed", "not run") and rows[1][2] == "exit 0" and not differ and alone and not leaks
sys.exit(0 if ok else 1)
PY
    cat "$logs/tests-line.txt"
done
exit $status
