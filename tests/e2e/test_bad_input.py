"""Bad input gets one clear line, exit status 4 for usage errors, and loses nothing."""

from __future__ import annotations

import calendar
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FAST, own_lines

OPS = "--bench-mode=ops"  # deterministic: no timing noise on a loaded machine

BENCH = """
import os, pytest

@pytest.mark.benchmark(max_run_time=0.3)
def test_ok():
    sum(range(100))

@pytest.mark.benchmark(max_run_time=0.3)
def test_may_raise():
    if os.environ.get("BENCH_RAISE"):
        raise ValueError("boom from the benchmark")
    sum(range(50))
"""


@pytest.fixture
def saved(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=2)
    return bench


def _one_clear_line(result, *needles):
    assert result.ret == 4
    err = result.stderr.str()
    lines = own_lines(err)  # torch may warn at import (a CUDA build without a GPU): not counted
    assert len(lines) == 1, err
    assert "Traceback" not in err + result.stdout.str()
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "content, needle",
    [
        ('{"schema": 1, "module": "test_bench.py", "benchm', "is not valid JSON"),
        ("", "is not valid JSON"),
        ('{"schema": 99, "module": "test_bench.py", "benchmarks": {}}', "has schema 99"),
        ("[1, 2]", "is not a JSON object"),
        (
            '{"schema": 1, "module": "m.py", '
            '"benchmarks": {"k": {"metrics": {"time": {"raw_times": "x"}}}}}',
            "time.raw_times is 'x'; it must be a number",
        ),
    ],
)
@pytest.mark.parametrize("option", ["--bench-compare=main", "--bench-save=main"])
def test_bad_baseline_file_is_named_kept_and_exits_4(saved, content, needle, option):
    path = saved.baseline("main")
    path.write_text(content)
    before = path.read_bytes()
    result = saved.run(option, FAST)
    _one_clear_line(result, str(path), needle, "left untouched")
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["test_bench.json"]  # no temp files


def test_unknown_baseline_name_lists_existing_sets(saved):
    saved.run("--bench-save=other", FAST, "-k", "ok").assert_outcomes(passed=1)
    result = saved.run("--bench-compare=mian", FAST)
    _one_clear_line(result, "no baseline set 'mian'", "existing sets: main, other")


def test_missing_baselines_folder(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    result = bench.run("--bench-compare=main", FAST)
    _one_clear_line(result, "no baseline set 'main'", "does not exist", "--bench-save=main")
    assert not (bench.path / "baselines").exists()
    # --bench-save creates the folder, and a custom one from the ini (ops: what is tested here is
    # where the files go, and a time compare can fail on a machine that slowed down in between)
    bench.pytester.makeini("[pytest]\nbench_baselines_dir = perf/base\n")
    bench.run("--bench-save=main", OPS).assert_outcomes(passed=2)
    assert (bench.path / "perf" / "base" / "main" / "test_bench.json").is_file()
    compared = bench.run("--bench-compare=main", OPS)
    compared.assert_outcomes(passed=2)
    compared.stdout.fnmatch_lines(
        ["no changes beyond the limits against baseline 'main' (*perf/base/main)"]
    )


@pytest.mark.slow
def test_baselines_folder_is_made_before_collection_and_never_searched(bench, monkeypatch):
    """A save run's workers collect with the folder there, as every later run's do (its presence
    moved their heap: the first save counted differently), and no run walks it for tests."""
    bench.pytester.makepyfile(
        test_bench="""
        import os
        def test_folder_is_there(benchmark):
            assert os.path.isdir("baselines"), "the save run made the folder before the tests"
            benchmark(len, "x")
    """
    )
    # every file pytest looks at while collecting, so that a walk of the baselines shows
    bench.pytester.makeconftest("""
        import os
        def pytest_collect_file(file_path, parent):
            with open(os.environ["SEEN_FILES"], "a") as seen:
                seen.write(str(file_path) + "\\n")
    """)
    seen = bench.path / "seen.txt"
    monkeypatch.setenv("SEEN_FILES", str(seen))
    (bench.path / "test_fails.py").write_text(
        "def test_fails(benchmark):\n    raise AssertionError('no')\n"
    )
    # a save that writes nothing leaves no folder behind
    bench.run("--bench-save=main", OPS, "test_fails.py").assert_outcomes(failed=1)
    assert not (bench.path / "baselines").exists()
    bench.run("--bench-save=main", OPS, "test_bench.py").assert_outcomes(passed=1)
    (bench.path / "test_fails.py").unlink()
    assert bench.baseline("main").is_file()
    seen.unlink()
    bench.run("--bench-compare=main", OPS).assert_outcomes(passed=1)
    walked = seen.read_text().splitlines()
    assert any(line.endswith("test_bench.py") for line in walked)
    assert not [line for line in walked if line.startswith(str(bench.path / "baselines"))], walked
    # xdist workers take the main process's decision, not a stale one from the environment
    seen.unlink()
    monkeypatch.setenv("TORCHBENCH_SKIPPED_BASELINES_DIR", "")
    bench.run("--bench-compare=main", OPS, "-p", "xdist", "-n", "2").assert_outcomes(passed=1)
    walked = seen.read_text().splitlines()
    assert any(line.endswith("test_bench.py") for line in walked)
    assert not [line for line in walked if line.startswith(str(bench.path / "baselines"))], walked
    # a folder holding Python files, at any depth, is the user's: collected as usual
    nested = bench.path / "baselines" / "main" / "nested"
    nested.mkdir()
    (nested / "test_theirs.py").write_text(
        "def test_theirs():\n    raise AssertionError('collected')\n"
    )
    bench.run("--bench-compare=main", OPS).assert_outcomes(passed=1, failed=1)


def test_a_baselines_folder_that_holds_the_tests_is_still_collected(bench):
    """``--bench-baselines-dir=tests`` with the tests in subfolders: the baselines go there and
    the tests still run."""
    unit = bench.path / "tests" / "unit"
    unit.mkdir(parents=True)
    (unit / "test_ops.py").write_text(
        "import torch\n\ndef test_add(benchmark):\n    benchmark(torch.add, torch.ones(4), 1)\n"
    )
    bench.run("--bench-save=main", OPS, "--bench-baselines-dir=tests").assert_outcomes(passed=1)
    assert (bench.path / "tests" / "main" / "tests" / "unit" / "test_ops.json").is_file()
    bench.run("--bench-compare=main", OPS, "--bench-baselines-dir=tests").assert_outcomes(passed=1)


@pytest.mark.slow
def test_counting_workers_skip_the_folder_the_main_process_skips(bench):
    """Counting workers are not given ``--bench-baselines-dir`` (only the main process acts on
    it): they take the skipped folder from the main process, so a user's own package named
    ``baselines`` (where the default baselines folder would be) is collected there too."""
    (bench.path / "test_bench.py").write_text(
        "import torch\n\ndef test_add(benchmark):\n    benchmark(torch.add, torch.ones(4), 1)\n"
    )
    theirs = bench.path / "baselines"
    theirs.mkdir()
    (theirs / "__init__.py").write_text("")
    (theirs / "test_theirs.py").write_text("def test_theirs():\n    pass\n")
    result = bench.run(
        "--bench-save=main",
        "--bench-mode=instructions",
        "--bench-baselines-dir=perf/base",
        timeout=300,
    )
    result.assert_outcomes(passed=2)
    assert (bench.path / "perf" / "base" / "main" / "test_bench.json").is_file()


def test_a_baselines_folder_pytest_could_find_tests_in_is_left_to_pytest(bench, tmp_path_factory):
    """What the search cannot rule out is collected: a linked folder (pytest follows links), a
    file given as the folder."""
    shared = tmp_path_factory.mktemp("shared")
    (shared / "test_linked.py").write_text("def test_linked():\n    pass\n")
    (bench.path / "linked").mkdir()
    (bench.path / "linked" / "unit").symlink_to(shared, target_is_directory=True)
    bench.run(OPS, "--bench-baselines-dir=linked").assert_outcomes(passed=1)
    bench.pytester.makepyfile(test_bench="def test_plain():\n    pass\n")
    bench.run(OPS, "--bench-baselines-dir=test_bench.py").assert_outcomes(passed=2)


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("time", "cannot read 'time'"),
        ("time:fast", "cannot read 'time:fast'"),
        ("speed:5%", "unknown metric 'speed'"),
        ("", "empty limits"),
    ],
)
def test_bad_bench_fail_spec_exits_4(bench, spec, needle):
    bench.pytester.makepyfile(test_bench=BENCH)
    _one_clear_line(bench.run(f"--bench-fail={spec}"), "--bench-fail", needle)


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--bench-mode=speed",), "unknown mode 'speed'"),
        (("--bench-save=../x",), "a baseline set name is"),
        (("--bench-mode=time", "--bench-min-run-time=0"), "must be > 0"),
        (
            ("--bench-mode=time", "--bench-rounds=0"),
            "--bench-rounds=0: must be a whole number >= 1",
        ),
    ],
)
def test_other_usage_errors_exit_4(bench, args, needle):
    bench.pytester.makepyfile(test_bench=BENCH)
    _one_clear_line(bench.run(*args), needle)


def test_benchmark_that_raises_fails_and_keeps_its_old_entry(saved, monkeypatch):
    before = saved.load("main")["benchmarks"]
    monkeypatch.setenv("BENCH_RAISE", "1")
    json_path = saved.path / "run.json"
    result = saved.run("--bench-save=main", FAST, f"--bench-json={json_path}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ValueError: boom from the benchmark*"])
    after = saved.load("main")["benchmarks"]
    assert after["test_bench.py::test_may_raise"] == before["test_bench.py::test_may_raise"]
    assert after["test_bench.py::test_ok"] != before["test_bench.py::test_ok"]
    keys = [b["key"] for b in json.loads(json_path.read_text())["benchmarks"]]
    assert keys == ["test_bench.py::test_ok"]


def test_benchmark_raising_inside_the_fixture_stores_nothing(bench):
    bench.pytester.makepyfile(
        test_bench="""
        calls = []
        def flaky():
            calls.append(1)
            if len(calls) > 3:
                raise RuntimeError("fails while measured")
        def test_flaky(benchmark):
            benchmark(flaky)
    """
    )
    result = bench.run("--bench-save=main", FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: fails while measured*"])
    assert not (bench.path / "baselines" / "main").exists()
    assert "no benchmark results: baseline set 'main' left as it was" in result.stdout.str()


def test_interrupted_run_writes_no_baseline_and_says_so(saved):
    before = saved.baseline("main").read_bytes()
    saved.pytester.makepyfile(
        test_bench=BENCH
        + """
def test_interrupt():
    raise KeyboardInterrupt
"""
    )
    result = saved.run("--bench-save=main", FAST, "--bench-json=run.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*torchbench: run interrupted: baselines were not written*"])
    assert saved.baseline("main").read_bytes() == before
    assert not (saved.path / "run.json").exists()
    assert sorted(p.name for p in saved.baseline("main").parent.iterdir()) == ["test_bench.json"]


# -- issue 8: hostile input and faults around baselines --------------------------------------------

#: The installed ``torchbench`` command, as a user runs it; ``python -m pytest_torchbench`` where
#: the project was installed without its scripts (``pip install --target``, as
#: benchmarks/gpu_check.sh does).
_SCRIPT = Path(sys.executable).parent / "torchbench"
TORCHBENCH = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "pytest_torchbench"]


def _cli(cwd, *args):
    return subprocess.run(
        [*TORCHBENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _cli_one_clear_line(done, *needles):
    assert done.returncode == 4, (done.stdout, done.stderr)
    lines = own_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("torchbench: error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _pytest_popen(path, *args, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:benchmark", "-p", "no:cacheprovider", *args],
        cwd=path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )


SAVE_BARRIER = '''
import os, time
from pathlib import Path
import pytest_torchbench.store.storage as storage

_merge = storage.merge_entries

def merge_entries(existing, new):
    """Inside the save window (after reading the file, before writing it): wait until the other
    run is here too (or 8 s), so that two unserialised saves always read the same old file."""
    folder = Path(os.environ["BARRIER"])
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 8
    while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return _merge(existing, new)

storage.merge_entries = merge_entries
'''


def test_concurrent_saves_into_one_module_lose_nothing(bench, tmp_path):
    """Two real pytest runs save different tests of one module into one set at the same moment."""
    bench.pytester.makepyfile(test_bench=BENCH)
    bench.pytester.makeconftest(SAVE_BARRIER)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {"BARRIER": str(barrier)}
    runs = [
        _pytest_popen(bench.path, "--bench-save=main", FAST, "-k", name, env=env)
        for name in ("test_ok", "test_may_raise")
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    for run, output in zip(runs, outputs):
        assert run.returncode == 0, output
        assert "saved 1 benchmark result(s) to baseline set 'main'" in output, output
    assert len(list(barrier.iterdir())) == 2  # both really were in the save window
    keys = sorted(bench.load("main")["benchmarks"])
    assert keys == ["test_bench.py::test_may_raise", "test_bench.py::test_ok"]
    assert sorted(p.name for p in bench.baseline("main").parent.iterdir()) == ["test_bench.json"]


def _set_metric(path, metric, data, key="test_bench.py::test_ok"):
    document = json.loads(path.read_text())
    document["benchmarks"][key]["metrics"][metric] = data
    path.write_text(json.dumps(document))  # NaN and Infinity as Python's json writes them


@pytest.mark.parametrize(
    "metric, data, needle",
    [
        # one case per metric here (each runs pytest twice and the CLI twice); the full matrix of
        # values is tests/test_storage.py::test_nonsense_numbers_name_file_key_and_field
        (
            "time",
            {"number_per_run": 10, "raw_times": [0.0, 1e-3]},
            "time.raw_times[0] is 0.0; it must be > 0",
        ),
        (
            "instructions",
            {"instructions_per_run": 0, "number_per_run": 100, "functions": {}},
            "instructions.instructions_per_run is 0; it must be > 0",
        ),
        (
            "ops",
            {"ops": {"aten::add": float("nan")}},
            'ops.ops["aten::add"] is nan; it must be a finite number',
        ),
        ("memory", {"peak_bytes": {"cpu": float("inf")}}, 'memory.peak_bytes["cpu"] is inf'),
    ],
)
def test_nonsense_numbers_in_a_baseline_are_rejected(saved, metric, data, needle):
    """A zero/negative/NaN/infinite baseline value would let every comparison pass: refuse the file
    in pytest (compare and save) and in the torchbench CLI (compare and show), naming file and
    key."""
    path = saved.baseline("main")
    _set_metric(path, metric, data)
    before = path.read_bytes()
    for option in ("--bench-compare=main", "--bench-save=main"):
        result = saved.run(option, FAST)
        _one_clear_line(
            result, str(path), "benchmark 'test_bench.py::test_ok'", needle, "left untouched"
        )
    for args in (("compare", "main", "main"), ("show", "main")):
        _cli_one_clear_line(_cli(saved.path, *args), str(path), needle)
    assert path.read_bytes() == before


def test_zero_ops_and_memory_are_real_measurements(saved):
    """0 calls of an op, 0 bytes allocated: legitimate, and the gate still works on them."""
    path = saved.baseline("main")
    _set_metric(path, "ops", {"ops": {"aten::add": 0.0}})
    _set_metric(path, "memory", {"peak_bytes": {"cpu": 0}})
    done = _cli(saved.path, "show", "main")
    assert done.returncode == 0, done.stderr


BAD_JSON = {
    "huge integer": (
        '{"schema": 1, "module": "test_bench.py", "benchmarks": {}, "x": ' + "9" * 5000 + "}",
        "is not usable JSON (Exceeds the limit (4300",
    ),
    "deep nesting": (
        '{"schema": 1, "module": "test_bench.py", "benchmarks": {}, "x": '
        + "[" * 100_000
        + "]" * 100_000
        + "}",
        "is not usable JSON (nested too deeply)",
    ),
    "huge number": (
        '{"schema": 1, "module": "test_bench.py", "benchmarks": {"k": {"metrics": {"time": '
        '{"number_per_run": 1, "raw_times": [' + "9" * 400 + "]}}}}}",
        "it must be a finite number",
    ),
    "not UTF-8": (
        b'{"schema": 1, "module": "test_bench.py", "benchmarks": {}, "x": "\xff\xfe"}',
        "is not UTF-8 text (byte 0xff at offset 65)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_unusable_json_is_one_line_from_disk_git_and_cli(saved, git, case):
    content, needle = BAD_JSON[case]
    data = content if isinstance(content, bytes) else content.encode()
    path = saved.baseline("main")
    path.write_bytes(data)
    for option in ("--bench-compare=main", "--bench-save=main"):
        _one_clear_line(saved.run(option, FAST), str(path), needle)
    _cli_one_clear_line(_cli(saved.path, "show", "main"), str(path), needle)
    # the same bytes committed to git, read from the revision (no checkout)
    git(saved.path, "init", "-q", "-b", "main")
    git(saved.path, "add", "baselines")
    git(saved.path, "commit", "-q", "-m", "bad baseline")
    where = "baselines/main/test_bench.json at HEAD"
    _one_clear_line(saved.run("--bench-compare=HEAD:main", FAST), where, needle)
    _cli_one_clear_line(_cli(saved.path, "compare", "HEAD:main", "main"), where, needle)
    assert path.read_bytes() == data


def test_overlong_set_names_are_one_line(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    name = "a" * 300
    _one_clear_line(
        bench.run(f"--bench-save={name}", FAST),
        "--bench-save",
        "at most 100 characters, this one has 300",
    )
    _one_clear_line(
        bench.run(f"--bench-compare={name}", FAST),
        f"no baseline set '{name}'",
        "create one with pytest --bench-save=main",
    )
    _cli_one_clear_line(_cli(bench.path, "show", name), f"no baseline set '{name}'")
    assert not (bench.path / "baselines").exists()


PARAM_IDS = """
import pytest, torch

@pytest.mark.benchmark
@pytest.mark.parametrize("x", ["a [b", "c #d", "e"])
def test_p(x):
    torch.ones(2) + 1
"""


@pytest.mark.slow
def test_parametrize_ids_with_bracket_or_hash_are_not_missing_when_deselected(bench):
    """The node id is stored, not parsed back out of the key: 'test_p[a [b]' is not 'test_p[a'."""
    bench.pytester.makepyfile(test_bench=PARAM_IDS)
    bench.run("--bench-save=main", OPS).assert_outcomes(passed=3)
    result = bench.run(
        "--bench-compare=main",
        OPS,
        "--deselect=test_bench.py::test_p[a [b]",
        "--deselect=test_bench.py::test_p[c #d]",
    )
    result.assert_outcomes(passed=1, deselected=2)
    assert "missing (" not in result.stdout.str(), result.stdout.str()
    entries = bench.load("main")["benchmarks"]
    assert {k: v["nodeid"] for k, v in entries.items()} == {
        "test_bench.py::test_p[a [b]": "test_bench.py::test_p[a [b]",
        "test_bench.py::test_p[c #d]": "test_bench.py::test_p[c #d]",
        "test_bench.py::test_p[e]": "test_bench.py::test_p[e]",
    }
    # A file written before the node id was stored (schema 1 without "nodeid") reads as before,
    # and the node id is found among the collected tests.
    path = bench.baseline("main")
    document = json.loads(path.read_text())
    for entry in document["benchmarks"].values():
        del entry["nodeid"]
    path.write_text(json.dumps(document))
    result = bench.run(
        "--bench-compare=main",
        OPS,
        "--deselect=test_bench.py::test_p[a [b]",
        "--deselect=test_bench.py::test_p[c #d]",
    )
    result.assert_outcomes(passed=1, deselected=2)
    assert "missing (" not in result.stdout.str(), result.stdout.str()
    # ...while a test that really is gone is still reported missing
    bench.pytester.makepyfile(test_bench=PARAM_IDS.replace('"a [b", ', ""))
    result = bench.run("--bench-compare=main", OPS)
    result.stdout.fnmatch_lines(
        ["missing (1):", "*test_bench.py::test_p[[]a [[]b]: ops: in the baseline, not measured*"]
    )


def test_revisions_never_reach_git_as_options(saved, git, tmp_path, monkeypatch):
    """GIT_TRACE logs every git command the plugin runs: a user's string only ever follows
    --end-of-options, and one that starts with '-' is not given to git at all."""
    git(saved.path, "init", "-q", "-b", "main")
    git(saved.path, "add", "baselines")
    git(saved.path, "commit", "-q", "-m", "baselines")
    trace = tmp_path / "git-trace.txt"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    target = tmp_path / "written-by-git"
    refs = (f"--output={target}", "--all", f"-o{target}:main")
    runs = [
        (saved.run(f"--bench-compare={ref}", FAST), _cli(saved.path, "show", "--", ref))
        for ref in refs
    ]
    saved.run("--bench-compare=HEAD:main", "--bench-mode=ops").assert_outcomes(passed=2)
    commands = [
        line.split("trace: built-in: ", 1)[1]
        for line in trace.read_text().splitlines()
        if "trace: built-in: " in line
    ]
    assert any("--end-of-options 'HEAD^{commit}'" in c for c in commands), commands
    for command in commands:
        assert (
            "--output" not in command
            and "--all" not in command
            and "-o" + str(target) not in command
        ), command
    assert not target.exists()
    for result, done in runs:
        _one_clear_line(result, "no baseline set")
        _cli_one_clear_line(done, "no baseline set")


def test_bare_number_limit_is_rejected_with_the_percent_spelling(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    _one_clear_line(
        bench.run("--bench-fail=time:5"), "--bench-fail: limit time:5 has no '%'; write time:5%"
    )
    _cli_one_clear_line(
        _cli(bench.path, "compare", "a", "b", "--fail", "instructions:1"),
        "--fail: limit instructions:1 has no '%'; write instructions:1%",
    )
    bench.run("--bench-fail=time:50%,ops:0", FAST).assert_outcomes(passed=2)


STALL_IN_SAVE = '''
import os, time
from pathlib import Path

_fsync = os.fsync

def fsync(fd):
    """Stall while a baseline's temporary file exists, and say so."""
    _fsync(fd)
    if os.environ.get("STALL"):
        Path(os.environ["STALL"]).touch()
        time.sleep(60)

os.fsync = fsync
'''


def test_sigterm_during_save_leaves_no_temporary_files(saved, tmp_path):
    before = saved.baseline("main").read_bytes()
    saved.pytester.makeconftest(STALL_IN_SAVE)
    stall = tmp_path / "in-save"
    run = _pytest_popen(saved.path, "--bench-save=main", FAST, env={"STALL": str(stall)})
    deadline = time.monotonic() + 180
    while not stall.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stall.exists(), run.communicate()[0]
    assert [p.name for p in saved.baseline("main").parent.glob(".*.tmp")]  # the window is real
    run.send_signal(signal.SIGTERM)
    output = run.communicate(timeout=60)[0]
    assert run.returncode == -signal.SIGTERM, output  # ends as a SIGTERM'd process does
    assert sorted(p.name for p in saved.baseline("main").parent.iterdir()) == ["test_bench.json"]
    assert saved.baseline("main").read_bytes() == before  # nothing half-written


@pytest.mark.slow
def test_save_records_commit_and_time_and_resaving_unchanged_writes_the_same_bytes(bench, git):
    bench.pytester.makepyfile(test_bench=BENCH)
    bench.run("--bench-save=main", "--bench-mode=ops").assert_outcomes(passed=2)
    stamp = bench.load("main")["benchmarks"]["test_bench.py::test_ok"]["saved"]
    assert stamp["commit"] is None  # not a git repository
    assert (
        abs(time.time() - calendar.timegm(time.strptime(stamp["time"], "%Y-%m-%dT%H:%M:%SZ"))) < 600
    )
    git(bench.path, "init", "-q", "-b", "main")
    git(bench.path, "commit", "-q", "--allow-empty", "-m", "first")
    head = git(bench.path, "rev-parse", "HEAD").strip()
    shutil.rmtree(bench.path / "baselines")
    bench.run("--bench-save=main", "--bench-mode=ops").assert_outcomes(passed=2)
    first = bench.baseline("main").read_bytes()
    assert {e["saved"]["commit"] for e in bench.load("main")["benchmarks"].values()} == {head}
    # op counts are identical run to run: the entries did not change, so neither do the bytes
    time.sleep(1.1)
    bench.run("--bench-save=main", "--bench-mode=ops").assert_outcomes(passed=2)
    assert bench.baseline("main").read_bytes() == first
    # the stamp is not part of comparability
    bench.run("--bench-compare=main", "--bench-mode=ops", "--bench-strict").assert_outcomes(
        passed=2
    )
