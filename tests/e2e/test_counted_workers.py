"""What xdist hands a counted worker is the same on every run of one command, whatever the
controller-only options (real pytest sessions, real valgrind workers).

Why it matters: the worker unpacks it before importing anything, and with a longer or different
string there every later allocation moves, and with it the counts of Python-heavy code: measured,
``--bench-html=...`` on the controller's command line moved nn.Module forwards by 0.2-0.4%, and
xdist's random run id moved them by up to 0.7% between runs of one command (README, Figures).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind"),
]

PROBE = """
import json, os
import pytest

@pytest.fixture
def record(request, tmp_path):
    yield
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump({"mainargv": request.config.workerinput["mainargv"],
                   "testrunuid": os.environ["PYTEST_XDIST_TESTRUNUID"],
                   "basetemp": str(tmp_path),
                   "run_folder": os.environ["TORCHBENCH_CALLGRIND_DIR"]}, out)

@pytest.mark.benchmark
def test_probe(record):
    pass
"""


def session(project: Path, out: Path, *args: str) -> dict[str, object]:
    # a private TMPDIR: the run folder's slot (and so the run id) is not taken by runs beside this
    # one
    tmpdir = project.parent / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBE_OUT": str(out), "TMPDIR": str(tmpdir)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            "timeout",
            "600",
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_workers_get_the_same_argv_run_id_and_basetemp_on_every_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_probe.py").write_text(PROBE)
    plain = session(project, tmp_path / "plain.json", f"--bench-json={tmp_path / 'a.json'}")
    more = session(
        project,
        tmp_path / "more.json",
        f"--bench-json={tmp_path / 'a-longer-name.json'}",
        f"--bench-html={tmp_path / 'report.html'}",
        "--bench-save=main",
    )
    # the controller-only options never reach the worker, in its argv nor anywhere else
    for seen in (plain, more):
        argv = seen["mainargv"]
        assert isinstance(argv, list) and "--bench-mode=instructions" in argv
        assert not any(
            str(arg).startswith(("--bench-json", "--bench-html", "--bench-save")) for arg in argv
        ), argv
    assert plain["mainargv"] == more["mainargv"]
    # xdist's run id is the same on every run (not a random uuid) and the worker's basetemp lies in
    # the run's own folder, whose name is the same on every run
    assert plain["testrunuid"] == more["testrunuid"] and len(str(plain["testrunuid"])) == 32
    for seen in (plain, more):
        assert str(seen["basetemp"]).startswith(str(seen["run_folder"]) + os.sep), seen


PAUSES = """
import sys, torch
from pytest_torchbench.engines.callgrind import collect

def test_small(benchmark):
    benchmark(torch.add, torch.ones(4), 1)
    assert collect._instrumenting, "a small region leaves instrumentation on"

def test_small_again(benchmark):  # pytest's own first-time imports after a test are done by now
    benchmark(torch.add, torch.ones(4), 2)

def test_imports_a_module(benchmark):
    assert collect._instrumenting
    assert "fresh_module" not in sys.modules
    import fresh_module  # executing a module: uncounted work, run uninstrumented
    assert not collect._instrumenting
    benchmark(torch.add, torch.ones(4), fresh_module.ONE)
    assert collect._instrumenting, "the region switched it on again"
"""


def test_imports_between_regions_run_uninstrumented(bench):
    """Instrumentation stays on after a small region; a module imported before the next one
    pauses it (a test body calling torch.compile, which imports torch._dynamo, took 53 s after a
    small benchmark and 7 s after a heavy one), and the next region switches it on again."""
    bench.pytester.makepyfile(test_bench=PAUSES, fresh_module="ONE = 1\n")
    result = bench.run(
        "--bench-mode=instructions", f"--bench-json={bench.path / 'out.json'}", timeout=300
    )
    result.assert_outcomes(passed=3)
    counts = {
        b["key"]: b["metrics"]["instructions"]["instructions_per_run"]
        for b in json.loads((bench.path / "out.json").read_text())["benchmarks"]
    }
    assert (
        counts["test_bench.py::test_small"] > 0
        and counts["test_bench.py::test_imports_a_module"] > 0
    )


def test_quiet_runs_do_not_show_the_workers_status(bench):
    """Under -q xdist printed "bringing up nodes..." twice for workers the user never asked for."""
    bench.pytester.makepyfile(
        test_bench="import pytest\n\n@pytest.mark.benchmark\ndef test_one():\n    pass\n"
    )
    result = bench.run("-q", "--bench-mode=instructions", timeout=300)
    result.assert_outcomes(passed=1)
    assert "bringing up nodes" not in result.stdout.str()
