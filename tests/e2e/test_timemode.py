"""Time mode end to end: the table, saved baselines, comparing, the regression gate,
--bench-json."""

from __future__ import annotations

import json
import os
import re
import socket

import pytest
from conftest import FAST

from pytest_torchbench.engines import walltime

# Each benchmark busy-waits a fixed time scaled by a factor read from factors.json beside the
# test file, so the same test can be made slower (or faster) between two runs. Busy-waiting on
# perf_counter gives a ~50 us workload (a deadline: preemption does not stretch it past its end,
# and calls under 100 us are judged on the limit alone, however busy the machine is).
WORKLOADS = """
import json, os, time, pytest

FACTORS = json.load(open(os.path.join(os.path.dirname(__file__), "factors.json")))

def work(name):
    end = time.perf_counter() + 0.00005 * FACTORS.get(name, 1.0)
    while time.perf_counter() < end:
        pass

@pytest.mark.benchmark(max_run_time=0.5)
def test_steady():
    work("steady")

@pytest.mark.benchmark(max_run_time=0.5)
def test_slows():
    work("slows")

@pytest.mark.benchmark(max_run_time=0.5)
def test_speeds():
    work("speeds")
"""


# A regression in these tests is 3x, not 2x: the gate excuses a slowdown of up to 1.1x the
# machine's own (its reference workload, metrics/time.py), and this VM's reference has run up to
# 1.83x slower from one session to the next; the workloads here busy-wait on a deadline, so a slower
# machine does not slow them, but it would excuse a 2x (1.1 x 1.83 = 2.01).
SLOWER = 3.0

# Times print with four significant digits (``.4g``), which drops trailing zeros: 152.0 us prints
# as "152 us", so the patterns below take the decimals as optional (CI on 2026-11-22 failed on it).


def _write(bench, factors=None, extra=""):
    (bench.path / "factors.json").write_text(json.dumps(factors or {}))
    bench.pytester.makepyfile(test_bench=WORKLOADS + extra)


def test_table_shows_rows_columns_median_and_iqr(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        @pytest.mark.parametrize("n", [16, 1024])
        @pytest.mark.benchmark(label="add", description="x + y", max_run_time=0.5)
        def test_add(benchmark, n):
            x, y = torch.ones(n), torch.ones(n)
            benchmark(torch.add, x, y)
        @pytest.mark.parametrize("n", [16, 1024])
        @pytest.mark.benchmark(label="add", description="x.add_(y)", max_run_time=0.5)
        def test_add_(benchmark, n):
            x, y = torch.ones(n), torch.ones(n)
            benchmark(x.add_, y)
    """
    )
    result = bench.run("--bench-mode=time", FAST)
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    result.stdout.re_match_lines(
        [
            r".*torchbench time \(median ± IQR per call, (ns|us)\).*",
            r"\[ add \]",
            r"\s+x \+ y\|\s+x\.add_\(y\)",
            r"  16\s+[0-9.]+ ± [0-9.]+\|\s+[0-9.]+ ± [0-9.]+",
            r"  1024\s+[0-9.]+ ± [0-9.]+\|\s+[0-9.]+ ± [0-9.]+",
        ]
    )
    assert "delta vs baseline" not in out


def test_save_writes_deterministic_json_with_schema_environment_and_raw_times(bench):
    _write(bench)
    result = bench.run("--bench-save=main", FAST)  # --bench-save alone turns time mode on
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*saved 3 benchmark result(s) to baseline set 'main'*"])
    path = bench.baseline("main")
    text = path.read_text()
    document = json.loads(text)
    assert document["schema"] == 1
    assert document["module"] == "test_bench.py"
    assert sorted(document["benchmarks"]) == [
        "test_bench.py::test_slows",
        "test_bench.py::test_speeds",
        "test_bench.py::test_steady",
    ]
    (env,) = document["environments"].values()
    import torch

    assert env["torch"] == torch.__version__ and env["python"] and env["cpu_model"]
    time = document["benchmarks"]["test_bench.py::test_steady"]["metrics"]["time"]
    assert time["env"] in document["environments"]
    assert len(time["raw_times"]) >= 30
    assert 40e-6 < min(time["raw_times"]) / time["number_per_run"] < 75e-6
    # diff-friendly: sorted keys, one line per raw time list, trailing newline; re-rendering the
    # parsed document gives the same bytes
    assert text.endswith("}\n")
    assert any(
        line.strip().startswith('"raw_times": [0.') and line.rstrip().rstrip(",").endswith("]")
        for line in text.splitlines()
    )
    from pytest_torchbench.store.storage import parse_baseline_document, render_baseline_document

    entries = parse_baseline_document(text, str(path))
    assert render_baseline_document("test_bench.py", entries.values()) == text


def test_saving_again_updates_what_ran_and_keeps_the_rest(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    before = bench.load("main")
    # add a metric the time run does not produce: it must survive (metric-level merge)
    before["benchmarks"]["test_bench.py::test_steady"]["metrics"]["ops"] = {
        "ops": {"aten::add": 1.0}
    }
    bench.baseline("main").write_text(json.dumps(before, indent=1, sort_keys=True))
    result = bench.run("--bench-save=main", FAST, "-k", "steady")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*saved 1 benchmark result(s)*"])
    after = bench.load("main")
    assert (
        after["benchmarks"]["test_bench.py::test_slows"]
        == before["benchmarks"]["test_bench.py::test_slows"]
    )
    assert (
        after["benchmarks"]["test_bench.py::test_speeds"]
        == before["benchmarks"]["test_bench.py::test_speeds"]
    )
    steady_before = before["benchmarks"]["test_bench.py::test_steady"]["metrics"]
    steady_after = after["benchmarks"]["test_bench.py::test_steady"]["metrics"]
    assert steady_after["ops"] == {"ops": {"aten::add": 1.0}}
    assert steady_after["time"]["raw_times"] != steady_before["time"]["raw_times"]


def test_regression_fails_its_own_test_with_the_numbers(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    _write(
        bench,
        {"slows": SLOWER, "speeds": 0.5},
        extra="""
@pytest.mark.benchmark(max_run_time=0.5)
def test_new():
    work("new")
""",
    )
    json_path = bench.path / "run.json"
    result = bench.run("--bench-compare=main", FAST, f"--bench-json={json_path}", "-rA")
    result.assert_outcomes(passed=3, failed=1)
    assert result.ret == 1
    out = result.stdout.str()
    result.stdout.re_match_lines(
        [
            r"_+ test_slows _+",
            r"torchbench: test_bench.py::test_slows: time regressed: "
            r"time 5\d(?:\.\d+)? us -> 1\d\d(?:\.\d+)? us \(\+\d+\.\d%, limit 10%; "
            r"judged on the fastest block: "
            r"baseline \d+ blocks, this run \d+; median \d+\.?\d* us -> \d+\.?\d* us\)",
            r"    this run: had a CPU \d+% of its wall time, load average \d+\.\d",
            r"    baseline: had a CPU \d+% of its wall time, load average \d+\.\d",
        ]
    )
    # Where the machine was slower at the save (its reference workload, metrics/time_gate.py), an
    # improvement goes the way that state pushed: left unjudged, never read the other way. Seen
    # in 1 of 5 runs alone and once in the fast tier, before and after 2026-11-29's changes.
    speeds_unjudged = "test_bench.py::test_speeds: time: not comparable: the machine's state" in out
    assert speeds_unjudged or (
        "improvement (1):" in out and "test_bench.py::test_speeds: time 5" in out
    ), out
    assert "new (1):" in out and "test_bench.py::test_new" in out
    # The table shows the median and judges the fastest call: the compared cell shows both.
    assert "the fastest call (judged) and its delta vs baseline 'main'" in out
    assert re.search(
        r"^ +\d[\d.]* \u00b1 [\d.]+, fastest [\d.]+ \(\+\d+\.\d%\)!$", out, flags=re.M
    ), out
    assert "test_steady" not in out.split("FAILED")[-1]
    document = json.loads(json_path.read_text())
    statuses = {v["key"]: v["status"] for v in document["verdicts"]}
    # On a machine whose load moved between the save and this run, the unchanged benchmark may be
    # left unjudged (the machine's state, metrics/time_gate.py); it never gets a direction.
    assert statuses.pop("test_bench.py::test_steady") in ("unchanged", "not comparable")
    assert statuses.pop("test_bench.py::test_speeds") == (
        "not comparable" if speeds_unjudged else "improvement"
    )
    assert statuses == {
        "test_bench.py::test_new": "new",
        "test_bench.py::test_slows": "regression",
    }
    slows = next(v for v in document["verdicts"] if v["key"] == "test_bench.py::test_slows")
    assert slows["failed"] and 1.4 < slows["delta"] < 2.6
    assert document["compared_with"].endswith("main")
    assert {b["key"] for b in document["benchmarks"]} == {
        *statuses,
        "test_bench.py::test_steady",
        "test_bench.py::test_speeds",
    }


def test_missing_benchmark_is_reported_and_limits_come_from_option_and_marker(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    # test_speeds removed; test_slows 30% slower is under --bench-fail=time:50%; test_steady 3.5x
    # slower fails through its marker's 5% limit (3.5x: it must fail even on a busy machine, and a
    # slower machine excuses at most 1.05 x MACHINE_MAX = 3.15x; 2.5x left a margin of 1.3x over
    # the slowest reference seen, 1.83x)
    bench.pytester.makepyfile(
        test_bench=WORKLOADS.replace(
            "@pytest.mark.benchmark(max_run_time=0.5)\ndef test_steady",
            "@pytest.mark.benchmark(max_run_time=0.5, limits='time:5%')\ndef test_steady",
        ).split("@pytest.mark.benchmark(max_run_time=0.5)\ndef test_speeds")[0]
    )
    (bench.path / "factors.json").write_text(json.dumps({"slows": 1.3, "steady": 3.5}))
    result = bench.run("--bench-compare=main", "--bench-fail=time:50%", FAST)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert (
        "missing (1):" in out
        and "test_bench.py::test_speeds: time: in the baseline, not measured" in out
    )
    result.stdout.re_match_lines(
        [r"torchbench: test_bench.py::test_steady: time regressed: .*limit 5%.*"]
    )
    result.stdout.fnmatch_lines(["FAILED test_bench.py::test_steady*"])


def test_deselected_tests_are_not_missing(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    result = bench.run("--bench-compare=main", FAST, "-k", "steady")
    result.assert_outcomes(passed=1)
    assert "missing (" not in result.stdout.str()


def test_compare_with_a_path_to_a_folder_or_file(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    (bench.path / "elsewhere").mkdir()
    moved = bench.path / "elsewhere" / "main"
    (bench.path / "baselines" / "main").rename(moved)
    json_path = bench.path / "run.json"
    for ref in (str(moved), "elsewhere/main", str(moved / "test_bench.json")):
        result = bench.run(
            f"--bench-compare={ref}", FAST, "-k", "steady", f"--bench-json={json_path}"
        )
        result.assert_outcomes(passed=1)
        document = json.loads(json_path.read_text())
        assert document["compared_with"].startswith(str(moved)), result.stdout.str()
        # Compared with the moved set: judged, or left unjudged where this VM's reference workload
        # ran slower through the save's short measurement (metrics/time_gate.py; in 4 of 10 runs
        # of this test on 2026-11-29) — never "new", which is what a set not found would give.
        [verdict] = document["verdicts"]
        assert verdict["status"] in ("unchanged", "not comparable"), result.stdout.str()


def _edit_environment(bench, *dropped, **facts):
    """Set ``facts`` and drop the facts named in ``dropped`` in every environment of 'main'."""
    document = bench.load("main")
    for env in document["environments"].values():
        env.update(facts)
        for fact in dropped:
            del env[fact]
    text = json.dumps(document, indent=1, sort_keys=True)
    bench.baseline("main").write_text(text)
    return text


def test_times_saved_by_the_blocks_of_an_earlier_version_are_not_comparable(bench):
    """Baselines saved before blocks were timed as ``Timer.blocked_autorange`` times them carry
    no ``time_blocks`` fact: their times are not compared with this version's (a slowdown there
    is not judged either way), and the line names the fact."""
    _write(bench)
    bench.run("--bench-save=main", FAST, "-k", "slows").assert_outcomes(passed=1)
    environments = bench.load("main")["environments"]
    assert environments
    for env in environments.values():
        assert env["time_blocks"] == "blocked_autorange"
    _edit_environment(bench, "time_blocks")
    (bench.path / "factors.json").write_text(json.dumps({"slows": SLOWER}))
    result = bench.run("--bench-compare=main", FAST, "-k", "slows")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "not comparable (1):",
            "*test_bench.py::test_slows: time: "
            "baseline from a different environment (time_blocks: - -> blocked_autorange)*",
        ]
    )


def test_other_environment_is_reported_not_failed_unless_strict(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST, "-k", "slows").assert_outcomes(passed=1)
    text = _edit_environment(bench, torch="1.0.0")
    (bench.path / "factors.json").write_text(json.dumps({"slows": 2.0}))
    result = bench.run("--bench-compare=main", FAST, "-k", "slows")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "not comparable (1):",
            "*test_bench.py::test_slows: time: "
            "baseline from a different environment (torch: 1.0.0 -> *)",
        ]
    )
    strict = bench.run("--bench-compare=main", FAST, "-k", "slows", "--bench-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(
        [
            "torchbench: test_bench.py::test_slows: time not comparable (strict environment): "
            "*torch: 1.0.0 -> *",
            "FAILED test_bench.py::test_slows*",
        ]
    )
    assert bench.baseline("main").read_text() == text


def test_bench_json_alone_turns_time_mode_on(bench):
    _write(bench)
    path = bench.path / "sub" / "results.json"
    path.parent.mkdir()
    result = bench.run(f"--bench-json={path}", FAST, "-k", "steady")
    result.assert_outcomes(passed=1)
    document = json.loads(path.read_text())
    assert document["schema"] == 1 and document["modes"] == ["time"]
    assert document["compared_with"] is None and document["saved_as"] is None
    (entry,) = document["benchmarks"]
    assert entry["key"] == "test_bench.py::test_steady" and entry["module"] == "test_bench.py"
    assert entry["metrics"]["time"]["raw_times"] and entry["environments"]["time"]["torch"]
    assert not (bench.path / "baselines").exists()


def test_saved_runs_form_a_band_and_the_verdict_names_it(bench):
    _write(bench)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    document = bench.load("main")
    for key in ("test_bench.py::test_steady", "test_bench.py::test_slows"):
        (earlier,) = document["benchmarks"][key]["metrics"]["time"]["history"]
        assert 45e-6 < earlier < 75e-6  # the first run's fastest call, kept beside the second run
        # the thread's CPU time per call is kept too (the busy-machine verdict uses it); the
        # workload busy-waits 50 us, so it cannot exceed that by much
        assert 0 < document["benchmarks"][key]["metrics"]["time"]["cpu_fastest"] < 75e-6
    _write(bench, {"slows": 3.5})  # beyond any slower machine's excuse (1.1 x MACHINE_MAX = 3.3x)
    result = bench.run("--bench-compare=main", FAST)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.re_match_lines(
        [  # 175 us against saved runs of 50-59 us: +197% to +252%
            r"torchbench: test_bench.py::test_slows: time regressed: "
            r"time 5\d(?:\.\d+)? us -> 1\d\d(?:\.\d+)? us .*"
            r"; 2 saved runs 5\d(?:\.\d+)? us-5\d(?:\.\d+)? us, "
            r"\+(?:19\d|2\d\d)\.\d% over the slowest\)",
        ]
    )


# Work for the busy-machine tests (busy-waiting on a wall clock takes less CPU time when preempted,
# so its CPU time says nothing), measured in this thread's CPU time: a call spins until it has had
# FACTOR/140 ms of CPU. Other processes stretch its wall time, not its CPU time, as with real work;
# unlike real work (it was a loop of 64x64 mm), a machine that got faster or slower between the save
# and the compare does not change it: this VM flips between speeds for minutes (a reference workload
# 4.0 us or 6.2-7.1 us per call), and a save on the slow side made +20% of mm work measure -10%.
COMPUTE = """
import json, os, time, pytest

FACTORS = json.load(open(os.path.join(os.path.dirname(__file__), "factors.json")))

@pytest.mark.benchmark(max_run_time=0.5)
def test_slows():
    end = time.thread_time() + 0.001 * FACTORS["slows"] / 140
    while time.thread_time() < end:
        pass
"""


def _beside_hogs(bench, *args):
    """Run with twice as many spinning processes as cores: the measuring thread gets well under
    90% of a core (and under the share at which the CPU-time limit reaches 50%). Saved beside them
    too, so that both runs are busy alike: a quiet save against a busy run is another machine state,
    judged "not comparable" (tests/metrics/test_time_state.py, test_time_stored_state.py)."""
    import os
    import subprocess
    import sys

    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        return bench.run(FAST, *args)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_busy_machine_gives_a_noisy_verdict_not_a_failure(bench):
    """A slowdown of a 1 ms call whose CPU time rose less than a busy machine allows is reported,
    not failed."""
    (bench.path / "factors.json").write_text(json.dumps({"slows": 140}))  # about 1 ms per call
    bench.pytester.makepyfile(test_bench=COMPUTE)
    _beside_hogs(bench, "--bench-save=main").assert_outcomes(passed=1)
    (bench.path / "factors.json").write_text(json.dumps({"slows": 168}))  # 20% more work
    result = _beside_hogs(
        bench, "--bench-compare=main", "--bench-markdown=summary.md", "--bench-html=report.html"
    )
    result.assert_outcomes(passed=1)
    summary = (bench.path / "summary.md").read_text()
    assert "### Noisy (1): not failed, the machine cannot be told from the code" in summary
    assert "test\\_bench.py::test\\_slows: time +" in summary
    assert "1 test(s) noisy</b>" in (bench.path / "report.html").read_text()
    result.stdout.re_match_lines(
        [
            r"noisy \(1\):",
            r"  test_bench.py::test_slows: time [\d.]+ [mu]s -> [\d.]+ [mu]s \(\+\d+\.\d%, .*; "
            r"CPU time per call [\d.]+ [mu]s -> [\d.]+ [mu]s \(\+\d+\.\d%\)\): "
            r"the machine was busy, so CPU time decides and it "
            r"must rise more than \d+% to fail; not failed, rerun on a quieter machine",
            r"      this run: had a CPU \d+% of its wall time, load average \d+\.\d",
        ]
    )


@pytest.mark.slow
def test_busy_machine_still_fails_a_tripled_call(bench):
    """Three times the work fails however busy the machine: its CPU time per call triples (3x, not
    2x: see SLOWER)."""
    (bench.path / "factors.json").write_text(json.dumps({"slows": 140}))
    bench.pytester.makepyfile(test_bench=COMPUTE)
    _beside_hogs(bench, "--bench-save=main").assert_outcomes(passed=1)
    (bench.path / "factors.json").write_text(json.dumps({"slows": 3 * 140}))
    result = _beside_hogs(bench, "--bench-compare=main")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r"torchbench: test_bench.py::test_slows: time regressed: "
            r".*CPU time per call [\d.]+ [mu]s -> "
            r"[\d.]+ [mu]s \(\+\d+\.\d%\)\)",
            r"    disturbed \(CPU share \d+% < 90%\): judged on CPU time per call, .*",
        ]
    )


HUGE_PAGES_PROBE = """
import pytest, torch

def _huge_kib():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return -1

@pytest.mark.benchmark(max_run_time=0.2)
def test_flip(benchmark):
    img = torch.rand(8, 3, 256, 256)  # 6 MiB, allocated by the test before anything is measured
    benchmark(img.flip, -1)
    with open("huge.txt", "w") as out:
        out.write(str(_huge_kib()))
"""


def _kernel_policy() -> str:
    # imported at the top: pytester drops modules first imported inside a test, and torch
    # must not be imported twice in one process
    return walltime.kernel_huge_pages()


def test_time_mode_backs_large_tensors_with_huge_pages(bench, monkeypatch):
    # Memory-bound calls on image batches moved by up to 70% between processes with 4 KiB pages
    # (page walks, depending on where pages lie) and about 20% with huge pages: time mode asks
    # torch for them (THP_MEM_ALLOC_ENABLE) at configure, before the test allocates anything.
    if _kernel_policy() not in ("madvise", "always"):
        pytest.skip(f"the kernel's transparent huge pages are {_kernel_policy()!r}")
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    monkeypatch.delenv("TORCHBENCH_MALLOC", raising=False)
    bench.pytester.makepyfile(test_bench=HUGE_PAGES_PROBE)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=1)
    assert int((bench.path / "huge.txt").read_text()) >= 2048
    (env,) = bench.load("main")["environments"].values()
    assert env["huge_pages"] == f"kernel {_kernel_policy()}; THP_MEM_ALLOC_ENABLE=1"
    # xdist workers inherit the setting from the controller
    bench.run("--bench-mode=time", "-n", "1", FAST).assert_outcomes(passed=1)
    assert int((bench.path / "huge.txt").read_text()) >= 2048


def test_huge_pages_are_left_alone_on_request_and_baselines_across_it_are_not_comparable(
    bench, monkeypatch
):
    if _kernel_policy() != "madvise":  # with "always" every process gets them anyway
        pytest.skip(f"needs the kernel's huge-page policy 'madvise' (it is {_kernel_policy()!r})")
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    bench.pytester.makepyfile(test_bench=HUGE_PAGES_PROBE)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=1)
    monkeypatch.setenv("TORCHBENCH_MALLOC", "default")
    result = bench.run("--bench-compare=main", FAST)
    result.assert_outcomes(passed=1)
    assert int((bench.path / "huge.txt").read_text()) == 0
    result.stdout.fnmatch_lines(
        [
            "*baseline from a different environment (huge_pages: kernel madvise; "
            "THP_MEM_ALLOC_ENABLE=1 -> kernel madvise; THP_MEM_ALLOC_ENABLE=-)*"
        ]
    )


def test_a_slowdown_a_fresh_process_does_not_measure_is_not_a_failure(bench):
    # test_flaky is slow only in the first process that imports it after slow_once.txt appears
    # (as a call can be, between processes, when its memory lies badly); test_slows is slow in
    # every process. Both regress in the compare run; the fresh process measuring them again
    # confirms test_slows and not test_flaky, which is listed as noisy, not failed.
    _write(
        bench,
        extra="""
SLOW_ONCE = os.path.join(os.path.dirname(__file__), "slow_once.txt")
FLAKY = 1.0
if os.path.exists(SLOW_ONCE):
    os.remove(SLOW_ONCE)
    FLAKY = 3.0

@pytest.mark.benchmark(max_run_time=0.5)
def test_flaky():
    end = time.perf_counter() + 0.00005 * FLAKY
    while time.perf_counter() < end:
        pass
""",
    )
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=4)
    (bench.path / "factors.json").write_text(json.dumps({"slows": SLOWER}))
    (bench.path / "slow_once.txt").write_text("")
    json_path = bench.path / "run.json"
    result = bench.run("--bench-compare=main", FAST, f"--bench-json={json_path}")
    result.stdout.re_match_lines(
        [
            r"torchbench: test_bench.py::test_slows: time regressed: "
            r"time 5\d(?:\.\d+)? us -> 1\d\d(?:\.\d+)? us .*\); "
            r"confirmed: a fresh process measured 1\d\d(?:\.\d+)? us \(\+\d+\.\d%\)",
        ]
    )
    verdicts = {v["key"]: v for v in json.loads(json_path.read_text())["verdicts"]}
    flaky = verdicts["test_bench.py::test_flaky"]
    if "the fresh process gave no comparison for it: not comparable" in "".join(flaky["details"]):
        # the fresh process drew a slower state of this VM's reference workload than the save
        # (engines/reference.py): it refutes nothing, so the run's own verdict stands (1 in 3
        # fast tiers on 2026-11-29)
        result.assert_outcomes(passed=2, failed=2)
        assert flaky["status"] == "regression" and "judged on this run alone" in "".join(
            flaky["details"]
        )
        return
    result.assert_outcomes(passed=3, failed=1)
    assert flaky["status"] == "noisy" and not flaky["failed"], flaky
    assert 1.4 < flaky["delta"] < 2.6  # what the compare run measured
    assert "; not confirmed: a fresh process measured 5" in flaky["summary"]
    assert "so not failed" in flaky["summary"]
    assert any("spread between processes" in line for line in flaky["details"])
    assert verdicts["test_bench.py::test_slows"]["failed"]
    assert not (bench.path / "slow_once.txt").exists()
    assert "not confirmed" in result.stdout.str()  # listed in the terminal


def _save_then_double_two(bench):
    """Save, then compare with test_steady and test_slows twice as slow: the verdicts by key."""
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=3)
    (bench.path / "factors.json").write_text(json.dumps({"slows": SLOWER, "steady": SLOWER}))
    json_path = bench.path / "run.json"
    result = bench.run(
        "--bench-compare=main", FAST, f"--bench-json={json_path}", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=1, failed=2)
    return {v["key"]: v for v in json.loads(json_path.read_text())["verdicts"]}


def test_confirmations_are_bounded_per_session(bench):
    # Each confirmation is a pytest start; past the bound (lowered here by the inner conftest) a
    # regression fails on this run alone and says why.
    bench.pytester.makeconftest(
        "import pytest_torchbench.pytest.children as c\nc.MAX_CONFIRMATIONS = 1\n"
    )
    _write(bench)
    verdicts = _save_then_double_two(bench)
    slows, steady = verdicts["test_bench.py::test_slows"], verdicts["test_bench.py::test_steady"]
    assert "; confirmed: a fresh process measured" in steady["summary"]  # test_steady runs first
    assert slows["failed"] and "confirmed" not in slows["summary"]
    assert any(
        "not re-measured in a fresh process (1 slowdowns were re-measured already in this session"
        in line
        for line in slows["details"]
    ), slows["details"]


def test_huge_pages_apply_when_a_conftest_allocates_at_import(bench, monkeypatch):
    # torch reads THP_MEM_ALLOC_ENABLE once, at the process's first CPU allocation of any size; a
    # conftest's module-level tensor (normalisation constants) is allocated before pytest_configure.
    if _kernel_policy() not in ("madvise", "always"):
        pytest.skip(f"the kernel's transparent huge pages are {_kernel_policy()!r}")
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    monkeypatch.delenv("TORCHBENCH_MALLOC", raising=False)
    bench.pytester.makeconftest("import torch\nMEAN = torch.tensor([0.485, 0.456, 0.406])\n")
    bench.pytester.makepyfile(test_bench=HUGE_PAGES_PROBE)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=1)
    assert int((bench.path / "huge.txt").read_text()) >= 2048
    (env,) = bench.load("main")["environments"].values()
    assert env["huge_pages"] == f"kernel {_kernel_policy()}; THP_MEM_ALLOC_ENABLE=1"


def test_the_huge_pages_fact_says_when_torch_read_the_switch_before_it_was_set(bench, monkeypatch):
    # A plugin given with -p is imported before any hook of ours runs: when it allocates, torch has
    # read its switch already, and the recorded fact must say huge pages were not applied.
    if _kernel_policy() != "madvise":
        pytest.skip(f"needs the kernel's huge-page policy 'madvise' (it is {_kernel_policy()!r})")
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    monkeypatch.delenv("TORCHBENCH_MALLOC", raising=False)
    bench.pytester.makepyfile(early_alloc="import torch\nONE = torch.zeros(1)\n")
    bench.pytester.makepyfile(test_bench=HUGE_PAGES_PROBE)
    monkeypatch.setenv("PYTHONPATH", f"{bench.path}{os.pathsep}{os.environ['PYTHONPATH']}")
    bench.run("-p", "early_alloc", "--bench-save=main", FAST).assert_outcomes(passed=1)
    assert int((bench.path / "huge.txt").read_text()) == 0
    (env,) = bench.load("main")["environments"].values()
    assert env["huge_pages"] == (
        "kernel madvise; THP_MEM_ALLOC_ENABLE=1, not applied "
        "(torch had allocated memory before it was set)"
    )


def test_a_confirmation_that_measured_nothing_says_why_in_one_escaped_line(bench):
    # The regressed test needs a port its session fixture holds: the fresh process's fixture finds
    # it taken (the parent still holds it) and errors; the detail line must show that error, with
    # the colour codes of the error message escaped, not just "measured nothing".
    bench.pytester.makeconftest("""
        import socket, pytest
        @pytest.fixture(scope="session")
        def server():
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", 0 if not hasattr(pytest, "_port") else pytest._port))
            except OSError as exc:
                raise RuntimeError(f"\\x1b[31mport busy: {exc}\\x1b[0m") from None
            s.listen()
            open("port.txt", "w").write(str(s.getsockname()[1]))
            yield s
            s.close()
    """)
    _write(
        bench,
        extra="""
@pytest.fixture(autouse=True)
def _fixed_port(request):
    yield

@pytest.mark.benchmark(max_run_time=0.5)
def test_serves(server):
    work("slows")
""",
    )
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=4)
    port = (bench.path / "port.txt").read_text()
    # from now on the fixture wants the port the first run found free: the compare run takes it
    conftest = bench.path / "conftest.py"
    conftest.write_text("import pytest\npytest._port = " + port + "\n" + conftest.read_text())
    (bench.path / "factors.json").write_text(json.dumps({"slows": SLOWER}))
    result = bench.run("--bench-compare=main", FAST, "-k", "serves")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "\x1b[31m" not in out
    assert (
        "(exit 1: " in out and "=====" not in out.split("(exit 1: ")[1].splitlines()[0]
    )  # no rules
    result.stdout.re_match_lines(
        [
            r"    not re-measured in a fresh process "
            r"\(the re-run to confirm a slowdown measured nothing for it "
            r"\(exit 1: .*RuntimeError: \\x1b\[31mport busy: .*Address already in use.*\)\): "
            r"judged on this run alone",
        ]
    )


def test_a_confirmation_that_hangs_stops_the_later_ones(bench):
    # A session fixture holds a lock the fresh process's fixture waits for: each re-run would wait
    # out the whole timeout (300 s; lowered here), 25 times over. After one, no more are started.
    bench.pytester.makeconftest("""
        import fcntl, pytest
        import pytest_torchbench.pytest.children as e
        e.TIMEOUT = 4.0
        @pytest.fixture(scope="session")
        def lock():
            with open("lock", "w") as f:
                fcntl.flock(f, fcntl.LOCK_EX)  # blocks in the fresh process while this one holds it
                yield
    """)
    _write(
        bench,
        extra="""
@pytest.fixture(autouse=True)
def _lock(lock):
    yield
""",
    )
    verdicts = _save_then_double_two(bench)
    steady, slows = verdicts["test_bench.py::test_steady"], verdicts["test_bench.py::test_slows"]
    assert any(
        "the re-run to confirm a slowdown took over 4 s and was stopped" in line
        for line in steady["details"]
    ), steady["details"]
    assert any(
        "not re-measured in a fresh process "
        "(earlier in this session the re-run to confirm a slowdown "
        "took over 4 s and was stopped (test_bench.py::test_steady): no more are started)" in line
        for line in slows["details"]
    ), slows["details"]


def test_a_slowdown_the_fresh_process_skipped_still_fails(bench):
    # The fresh process cannot run the test (its session fixture skips when the port it wants is
    # taken, and this run still holds it): a skipped test is a baseline entry "missing" there, not
    # a measurement that clears the slowdown.
    bench.pytester.makeconftest("""
        import os, socket, pytest
        @pytest.fixture(scope="session")
        def server():
            s = socket.socket()
            port = int(os.environ.get("BENCH_PORT", "0"))
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                pytest.skip(f"port {port} is taken")
            s.listen()
            yield s
            s.close()
    """)
    _write(
        bench,
        extra="""
@pytest.mark.benchmark(max_run_time=0.5)
def test_serves(server):
    work("slows")
""",
    )
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=4)
    (bench.path / "factors.json").write_text(json.dumps({"slows": SLOWER}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    os.environ["BENCH_PORT"] = str(free)
    try:
        result = bench.run("--bench-compare=main", FAST, "-k", "serves")
    finally:
        del os.environ["BENCH_PORT"]
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r"    not re-measured in a fresh process "
            r"\(the re-run to confirm a slowdown measured nothing for it "
            r"\(exit 0: .*1 skipped in .*\)\): judged on this run alone"
        ]
    )


def _as_if_saved_on_a_faster_machine(bench, times: float, reference: float) -> None:
    """Scale the saved baseline's times by ``times`` and its reference workload's by ``reference``:
    a baseline saved while the machine ran that much faster (what a shared VM does for minutes)."""
    document = bench.load("main")
    for entry in document["benchmarks"].values():
        time_entry = entry["metrics"]["time"]
        time_entry["raw_times"] = [t * times for t in time_entry["raw_times"]]
        for field in ("median", "iqr", "cpu_fastest"):
            if field in time_entry:
                time_entry[field] *= times
        time_entry["reference"]["compute"] *= reference
    bench.baseline("main").write_text(json.dumps(document, indent=1, sort_keys=True))


def test_a_machine_slower_than_when_the_baseline_was_saved_is_named_not_failed(bench):
    """The code did not change; the baseline was measured while the machine was faster (its times
    cut to 0.6, its reference workload's to a quarter, so that the machine's own swings between the
    two sessions, up to 1.8x either way here, cannot undo it: the ratio counts as 3x at most): the
    +67% is listed as the machine's, not failed. The CI run this comes from failed two trivial
    benchmarks at +74.6% at CPU share 0.99."""
    _write(bench)
    bench.run("--bench-save=main", FAST, "-k", "steady").assert_outcomes(passed=1)
    saved = bench.load("main")["benchmarks"]["test_bench.py::test_steady"]["metrics"]["time"]
    assert saved["reference"]["probe"] == 1 and 0 < saved["reference"]["compute"] < 1e-3
    _as_if_saved_on_a_faster_machine(bench, times=0.6, reference=0.25)
    json_path = bench.path / "run.json"
    result = bench.run("--bench-compare=main", FAST, "-k", "steady", f"--bench-json={json_path}")
    result.assert_outcomes(passed=1)
    verdict = json.loads(json_path.read_text())["verdicts"][0]
    assert verdict["status"] == "noisy" and not verdict["failed"], verdict
    assert 0.4 < verdict["delta"] < 1.2
    assert ": the machine itself was +" in verdict["summary"]
    assert "rerun when the machine is back to speed" in verdict["summary"]
    assert any(
        line.startswith("the machine was slower: a reference workload took ")
        for line in verdict["details"]
    )
    result.stdout.fnmatch_lines(["noisy (1):", "*test_steady: time * the machine itself was +*"])


def test_a_slowdown_the_machine_does_not_explain_still_fails(bench):
    """The same, with only the times cut to a third (the reference workload ran as fast then as
    now): the machine was not slower, so the +200% is the code's and fails, confirmed by a fresh
    process (3x, not 2x: see SLOWER)."""
    _write(bench)
    bench.run("--bench-save=main", FAST, "-k", "steady").assert_outcomes(passed=1)
    _as_if_saved_on_a_faster_machine(bench, times=1 / SLOWER, reference=1.0)
    result = bench.run("--bench-compare=main", FAST, "-k", "steady")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r"torchbench: test_bench.py::test_steady: time regressed: .*; confirmed: "
            r"a fresh process measured"
        ]
    )
    assert "the machine itself" not in result.stdout.str()
