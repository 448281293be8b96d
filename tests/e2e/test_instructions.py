"""Instructions mode end to end: real valgrind, real pytest subprocesses.

Each counted run costs 15-40 s (valgrind start plus ``import torch`` in every worker), so the runs
are made once per module (fixtures ``runs`` and ``crash_run``) and the tests assert on their
outputs. Files the runs write (JSON reports) go outside the benchmark folder: even an extra file
beside the test module moves heap layout, and the point here is to see counts that do not move.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import own_lines

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed"
)


@dataclass
class Run:
    ret: int
    out: str
    json: dict | None = None

    def results(self) -> dict[str, float]:
        assert self.json is not None
        return {
            r["key"]: r["metrics"]["instructions"]["instructions_per_run"]
            for r in self.json["benchmarks"]
            if "instructions" in r["metrics"]
        }


def run_pytest(
    cwd: Path, *args: str, json_path: Path | None = None, path: str | None = None
) -> Run:
    """``python -m pytest -p no:benchmark ARGS`` in ``cwd`` with this checkout on PYTHONPATH
    (what conftest's ``run_bench`` does, for module-scoped fixtures that pytester cannot serve)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    if path is not None:
        env["PATH"] = path
    extra = [f"--bench-json={json_path}"] if json_path else []
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            *args,
            *extra,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    data = json.loads(json_path.read_text()) if json_path and json_path.exists() else None
    return Run(done.returncode, done.stdout + done.stderr, data)


MODULE = """
import os, pytest, torch

FLAG = {flag!r}

@pytest.mark.benchmark
def test_marker():
    x = torch.ones(4, 4)
    y = x + x
    if os.path.exists(FLAG):
        for _ in range(3):
            y = y + x

def test_fixture(benchmark):
    x = torch.ones(4, 4)
    def f():
        y = torch.mm(x, x)
        if os.path.exists(FLAG):
            y = y.clone()
        return y
    assert benchmark(f).shape == (4, 4)

def test_timer(bench_timer):
    stats = bench_timer(
        "x + y", setup="import torch; x = torch.ones(4); y = torch.ones(4)"
    ).collect_callgrind(number=50)
    assert stats.number_per_run == 50
    assert stats.counts() > 1000
    functions = stats.stats()
    assert len(functions) > 10 and sum(c.count for c in functions) > 0
    assert any("add" in c.function for c in functions)
    # CallgrindStats.delta works, and a stat minus itself is empty
    assert len(stats.delta(stats)) == 0
"""

KEYS = ("test_bench.py::test_marker", "test_bench.py::test_fixture", "test_bench.py::test_timer")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """One save, then compares: same code, -k subset, -n 2, a real regression, an edited
    baseline."""
    bench = tmp_path_factory.mktemp("bench")
    out = tmp_path_factory.mktemp("out")
    flag = out / "regress.flag"
    (bench / "test_bench.py").write_text(MODULE.format(flag=str(flag)))
    mode = "--bench-mode=instructions"
    done: dict[str, Run] = {}
    done["save"] = run_pytest(bench, mode, "--bench-save=main", json_path=out / "save.json")
    saved = bench / "baselines/main/test_bench.json"
    done["saved_file"] = Run(0, saved.read_text() if saved.exists() else "")
    done["compare"] = run_pytest(
        bench, mode, "--bench-compare=main", json_path=out / "compare.json"
    )
    done["subset"] = run_pytest(
        bench, mode, "--bench-compare=main", "-k", "marker or timer", json_path=out / "subset.json"
    )
    done["xdist"] = run_pytest(
        bench, mode, "--bench-compare=main", "-n", "2", json_path=out / "xdist.json"
    )
    flag.write_text("")
    done["regress"] = run_pytest(bench, mode, "--bench-compare=main")
    flag.unlink()
    # An edited copy: test_marker's baseline counted 1.5x more (so now looks a stale improvement),
    # test_fixture's baseline made by another valgrind (not comparable).
    document = json.loads(saved.read_text())
    marker = document["benchmarks"]["test_bench.py::test_marker"]["metrics"]["instructions"]
    marker["instructions_per_run"] *= 1.5
    fixture = document["benchmarks"]["test_bench.py::test_fixture"]["metrics"]["instructions"]
    other = dict(document["environments"][fixture["env"]], valgrind="valgrind-3.0.0")
    document["environments"]["0ther0env000"] = other
    fixture["env"] = "0ther0env000"
    (bench / "baselines/edited").mkdir()
    (bench / "baselines/edited/test_bench.json").write_text(json.dumps(document))
    done["edited"] = run_pytest(bench, mode, "--bench-compare=edited", "--bench-fail-stale")
    return done


def _fail(run: Run) -> str:
    return f"exit {run.ret}\n{run.out[-6000:]}"


@pytest.mark.slow
def test_save_stores_counts_functions_and_fingerprint(runs: dict[str, Run]) -> None:
    save = runs["save"]
    assert save.ret == 0, _fail(save)  # test_timer's own asserts on CallgrindStats passed
    assert "3 passed" in save.out
    document = json.loads(runs["saved_file"].out)
    assert set(document["benchmarks"]) == set(KEYS)
    for key in KEYS:
        metric = document["benchmarks"][key]["metrics"]["instructions"]
        assert metric["instructions_per_run"] > 1000
        assert metric["number_per_run"] == (50 if key.endswith("test_timer") else 100)
        assert len(metric["functions"]) > 10
        assert sum(metric["functions"].values()) == pytest.approx(
            metric["instructions_per_run"], rel=0.01
        )
        env = document["environments"][metric["env"]]
        assert env["valgrind"].startswith("valgrind-")
        assert env["allocator"].startswith("torchbench-")
        assert env["cpu_capability"] and env["pythonmalloc"] == "malloc"
        assert env["counting_method"]


@pytest.mark.slow
def test_compare_of_the_same_code_passes(runs: dict[str, Run]) -> None:
    compare = runs["compare"]
    assert compare.ret == 0, _fail(compare)
    assert "no changes beyond the limits against baseline 'main'" in compare.out


def _worst_drift(run: Run, baseline: dict[str, float]) -> tuple[float, str]:
    worst = (0.0, "")
    for key, count in run.results().items():
        drift = abs(count / baseline[key] - 1.0)
        worst = max(worst, (drift, key))
    return worst


@pytest.mark.slow
@pytest.mark.parametrize("setup", ["compare", "subset", "xdist"])
def test_counts_do_not_move_with_rerun_selection_or_workers(
    runs: dict[str, Run], setup: str
) -> None:
    saved = runs["save"]
    assert saved.ret == 0 and runs[setup].ret == 0, _fail(runs[setup])
    baseline = saved.results()
    current = runs[setup].results()
    expected = {"subset": {KEYS[0], KEYS[2]}}.get(setup, set(KEYS))
    assert set(current) == expected
    drift, key = _worst_drift(runs[setup], baseline)
    # The target is 0.1% (benchmarks/figures_instructions.py measures it: ~0.05-0.1% here); the
    # test allows 0.2% so that a different machine's heap layout does not make it flaky, while
    # anything unpinned (hash seed: ~1.6%, thread pools, glibc malloc: ~1%) still fails it.
    assert drift <= 0.002, f"{setup}: {key} moved {drift:.4%} against the saved baseline"
    if setup == "subset":  # as a serial run says it, though the tests ran in xdist workers
        assert " passed, 1 deselected in " in runs[setup].out, runs[setup].out[-300:]


@pytest.mark.slow
def test_real_regression_fails_its_test_with_functions(runs: dict[str, Run]) -> None:
    regress = runs["regress"]
    assert regress.ret == 1, _fail(regress)
    out = regress.out
    assert (
        "FAILED test_bench.py::test_marker" in out and "FAILED test_bench.py::test_fixture" in out
    )
    assert "FAILED test_bench.py::test_timer" not in out
    for key in KEYS[:2]:
        assert f"torchbench: {key}: instructions regressed: instructions " in out
    # baseline -> current, delta and limit, e.g.
    # "instructions 20,159 -> 37,810 per run (+87.6%, limit 1%)"
    lines = re.findall(r"instructions ([\d,]+) -> ([\d,]+) per run \(\+([\d.]+)%, limit 1%\)", out)
    assert len(lines) >= 2, out
    for then, now, percent in lines[:2]:
        then_n, now_n = int(then.replace(",", "")), int(now.replace(",", ""))
        assert now_n > then_n and float(percent) > 5
    assert "top functions by change (instructions per run, largest |change| first" in out
    changed = re.findall(r"^ +\+[\d,]+  \S.*$", out, flags=re.M)  # "+1,234  file.c:function"
    assert len(changed) >= 3, out


@pytest.mark.slow
def test_stale_baseline_and_other_environment(runs: dict[str, Run]) -> None:
    edited = runs["edited"]
    assert edited.ret == 1, _fail(edited)
    out = edited.out
    assert "FAILED test_bench.py::test_marker" in out
    assert "instructions improved beyond the limit (stale baseline)" in out
    assert (
        "refresh the baselines with: "
        "pytest test_bench.py::test_marker --bench-mode=instructions --bench-save=edited" in out
    )
    # a different valgrind: shown as not comparable, not failed
    assert "FAILED test_bench.py::test_fixture" not in out
    assert "baseline from a different environment (valgrind: valgrind-3.0.0 -> valgrind-" in out


CRASHING = """
import os, signal, pytest, torch

def test_ok(benchmark):
    benchmark(lambda: torch.ones(4) + 1)

def test_killed(benchmark):
    calls = []
    def f():
        calls.append(1)
        if len(calls) > 1:  # the measured calls only: valgrind's process dies mid-run
            os.kill(os.getpid(), signal.SIGKILL)
    benchmark(f)

def test_raises(benchmark):
    calls = []
    def f():
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("boom under valgrind")
    benchmark(f)
"""


@pytest.fixture(scope="module")
def crash_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    bench = tmp_path_factory.mktemp("crash")
    out = tmp_path_factory.mktemp("crash-out")
    (bench / "test_crash.py").write_text(CRASHING)
    run = run_pytest(
        bench, "--bench-mode=instructions", "--bench-save=main", json_path=out / "r.json"
    )
    return run, bench


@pytest.mark.slow
def test_worker_dying_mid_run_names_the_test_and_saves_nothing(crash_run: tuple[Run, Path]) -> None:
    run, bench = crash_run
    assert run.ret == 1, _fail(run)
    assert "FAILED test_crash.py::test_killed" in run.out
    assert "crashed while running 'test_crash.py::test_killed'" in run.out
    assert (
        "torchbench: a test process died while running test_crash.py::test_killed: "
        "baseline set 'main' was not written"
    ) in run.out
    assert not (bench / "baselines").exists()


@pytest.mark.slow
def test_benchmark_raising_under_valgrind_fails_and_stores_nothing(
    crash_run: tuple[Run, Path],
) -> None:
    run, _ = crash_run
    assert "FAILED test_crash.py::test_raises - RuntimeError: boom under valgrind" in run.out
    assert run.json is not None
    assert set(run.results()) == {"test_crash.py::test_ok"}


def test_no_valgrind_on_path_is_one_clear_line(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (tmp_path / "test_a.py").write_text(
        "import pytest\n@pytest.mark.benchmark\ndef test_a():\n    pass\n"
    )
    run = run_pytest(tmp_path, "--bench-mode=instructions", path=str(bin_dir))
    assert run.ret == 4, _fail(run)
    lines = own_lines(run.out)  # torch may warn at import: not counted
    assert lines == [
        "ERROR: instruction counting needs valgrind, which is not on PATH; install it "
        "(Debian/Ubuntu: `apt-get install valgrind`, Fedora: `dnf install valgrind`)"
    ]


@pytest.mark.parametrize(
    "compiler, said",
    [
        ("#!/bin/sh\nexit 1\n", "exited with status 1: (it printed nothing)"),
        (
            "#!/bin/sh\necho 'allocator.c: In function f:' >&2\n"
            "echo 'allocator.c:1:1: error: no \033[31m here' >&2\nexit 2\n",
            "exited with status 2: allocator.c:1:1: error: no \\x1b[31m here",
        ),
    ],
    ids=["silent", "error-line"],
)
def test_a_compiler_that_fails_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiler: str, said: str
) -> None:
    """A broken ``CC`` stops the run with one usage-error line naming the command and its first
    error line (it was pytest's internal error, exit status 3, with a traceback)."""
    cc = tmp_path / "bin" / "broken-cc"
    cc.parent.mkdir()
    cc.write_text(compiler)
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no allocator built before
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_a.py").write_text(
        "import pytest\n@pytest.mark.benchmark\ndef test_a():\n    pass\n"
    )
    run = run_pytest(project, "--bench-mode=instructions")
    assert run.ret == 4, _fail(run)
    lines = own_lines(run.out)
    assert len(lines) == 1, run.out
    assert re.fullmatch(
        re.escape(
            "ERROR: instruction counting could not build its deterministic allocator: "
            f"`{cc} -O2 -fPIC -shared -fno-builtin -pthread -o libtorchbench_alloc-"
        )
        + "[0-9a-f]{16}"
        + re.escape(
            f".so allocator.c` {said}; fix that compiler, or set CC to a working one "
            "(unset: gcc, else cc)"
        ),
        lines[0],
    ), lines[0]
    assert "Traceback" not in run.out and "INTERNALERROR" not in run.out
