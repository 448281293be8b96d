#!/usr/bin/env bash
# pytest-torchbench against other torch releases, each in a fresh virtual environment.
#
#   bash benchmarks/torch_versions.sh                 # the two checked releases: 2.5.1 and 2.9.1
#   bash benchmarks/torch_versions.sh 2.5.1 2.9.1     # the same, named
#   bash benchmarks/torch_versions.sh 2.7.1           # any release PyPI has for this Python
#
# Per version it makes a fresh venv under $TORCH_VERSIONS_ROOT (default /tmp/torchbench-torch), never
# inside the repository; installs torch==VERSION with the dependencies it declares (PyPI publishes
# only CUDA builds of older releases for Linux: they run on the CPU but need the nvidia-* wheels to
# import, about 3 GB; the wheels are downloaded once into $TORCH_VERSIONS_WHEELS and installed
# from there); installs this checkout with `pip install -e ".[test]"` under a constraints file that
# pins that torch; then runs, from the repository root:
#   1. the example suite plainly:                  python -m pytest examples -p no:benchmark
#   2. the example suite in the modes that need no valgrind:
#                                                  python -m pytest examples --bench-mode=ops,compile
#   3. the fast tests: $TORCH_VERSIONS_TESTS; default: every unit test (tests/*.py, engines, metrics,
#      reports; not slow) and the end-to-end files of the torch-facing modes (compile, ops, memory),
#      about 410 tests. The whole `-m "not slow"` set (546 tests, most of its time in end-to-end
#      tests that start pytest in a subprocess) took 1,539 s on Python 3.12 with torch 2.13 and far
#      longer on a loaded 2-core machine: TORCH_VERSIONS_TESTS='-m "not slow"' runs it.
# and prints one line per version: passed/failed counts and seconds of each step. Logs stay in
# $TORCH_VERSIONS_ROOT/VERSION/logs. Exit status: 0 when every step of every version passed.
#
# Environment: PYTHON (the interpreter the venvs are made from; default python3.11),
# TORCH_VERSIONS_ROOT, TORCH_VERSIONS_WHEELS, TORCH_VERSIONS_TESTS, TORCH_VERSIONS_TIMEOUT (seconds
# per step, default 1800), TORCH_VERSIONS_REUSE=1 (keep a venv an earlier run made: rerun after a fix). docs/torch-versions.md holds the figures of the last run.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-python3.11}
root=${TORCH_VERSIONS_ROOT:-/tmp/torchbench-torch}
wheels=${TORCH_VERSIONS_WHEELS:-/tmp/torchbench-wheels}
step_timeout=${TORCH_VERSIONS_TIMEOUT:-1800}
default_tests="tests/test_*.py tests/engines tests/metrics tests/reports tests/e2e/test_compile.py tests/e2e/test_ops_memory.py -m 'not slow'"
tests=${TORCH_VERSIONS_TESTS:-$default_tests}
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(2.5.1 2.9.1)
mkdir -p "$root" "$wheels"

# "== 3 failed, 40 passed, 2 skipped in 12.3s ==" -> "40p/3f/2s"
counts() {
    local last
    last=$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected).* in [0-9.]+s|no tests ran' "$1" | tail -1)
    [ -z "$last" ] && { echo "no-summary"; return; }
    local p f e s
    p=$(grep -oE '[0-9]+ passed' <<<"$last" | grep -oE '[0-9]+'); f=$(grep -oE '[0-9]+ failed' <<<"$last" | grep -oE '[0-9]+')
    e=$(grep -oE '[0-9]+ errors?' <<<"$last" | grep -oE '[0-9]+'); s=$(grep -oE '[0-9]+ skipped' <<<"$last" | grep -oE '[0-9]+')
    echo "${p:-0}p/${f:-0}f${e:+/${e}e}${s:+/${s}s}"
}

status=0
summary=()
for version in "${versions[@]}"; do
    dir="$root/$version"
    venv="$dir/venv"
    logs="$dir/logs"
    started=$(date +%s)
    if [ -n "${TORCH_VERSIONS_REUSE:-}" ] && [ -x "$venv/bin/python" ]; then
        # Reuse the venv of an earlier run (after a fix in the checkout: it is installed editable).
        echo "== torch $version: reusing $venv" >&2
        mkdir -p "$logs"
    else
    rm -rf "$dir"
    mkdir -p "$logs"
    echo "== torch $version: fresh venv in $venv" >&2
    # Pins for this run: the chosen torch, and the repository's other pins.
    { echo "torch==$version"; grep -v '^torch==' constraints.txt | grep -vE '^\s*(#|$)' || true; } >"$dir/constraints.txt"
    if ! { "$python" -m venv "$venv" &&
           "$venv/bin/python" -m pip install -q --upgrade pip >"$logs/install.log" 2>&1 &&
           timeout "$step_timeout" "$venv/bin/python" -m pip download -q -d "$wheels" "torch==$version" >>"$logs/install.log" 2>&1 &&
           timeout "$step_timeout" "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" "torch==$version" >>"$logs/install.log" 2>&1 &&
           timeout "$step_timeout" "$venv/bin/python" -m pip install -q -c "$dir/constraints.txt" -e "$repo[test]" >>"$logs/install.log" 2>&1; }; then
        echo "torch $version: INSTALL FAILED after $(( $(date +%s) - started ))s (see $logs/install.log)"
        summary+=("torch $version: install failed")
        status=1
        continue
    fi
    fi
    installed=$(( $(date +%s) - started ))
    got=$("$venv/bin/python" -c "import torch, sys; print(torch.__version__, 'python', sys.version.split()[0])" 2>>"$logs/install.log")
    echo "== torch $version: installed in ${installed}s ($got)" >&2
    line="torch $version ($got): install ${installed}s"
    # Each step in a scratch copy of nothing: pytest runs from the repository root, its artifacts
    # (.torchbench/, .pytest_cache/) are git-ignored; the plain example run writes nothing.
    run_step() {
        local name=$1; shift
        local t0 rc
        t0=$(date +%s)
        (cd "$repo" && env -u CI timeout "$step_timeout" "$venv/bin/python" -m pytest "$@") >"$logs/$name.log" 2>&1
        rc=$?
        local secs=$(( $(date +%s) - t0 ))
        local c
        c=$(counts "$logs/$name.log")
        [ $rc -eq 124 ] && c="$c TIMEOUT"
        line="$line | $name $c ${secs}s"
        [ $rc -ne 0 ] && status=1
        echo "== torch $version: $name exit $rc, $c, ${secs}s" >&2
    }
    # pytest-benchmark (a test dependency) owns plain runs and rejects torchbench-only marker keywords
    # (label=, limits=): README, "Migrating from pytest-benchmark". The examples use them.
    run_step examples-plain examples -q -p no:cacheprovider -p no:benchmark
    run_step examples-ops-compile examples --bench-mode=ops,compile -q -p no:cacheprovider \
        --bench-output "$dir/bench-output"
    eval "set -- $tests"
    run_step fast-tests "$@" -q -p no:cacheprovider
    line="$line | total $(( $(date +%s) - started ))s"
    echo "$line"
    summary+=("$line")
done
echo
echo "Summary (logs under $root/VERSION/logs):"
printf '%s\n' "${summary[@]}"
exit $status
