"""Reports end to end: real pytest runs with real torch, checked as a user (and a CI log) sees
them."""

from __future__ import annotations

import json
import os
import re

import pytest

TWIN = """
import pytest, torch

@pytest.mark.benchmark
def test_add():
    torch.ones({n}) + 1
"""


def test_same_named_tests_in_two_modules_get_their_own_rows(
    pytester: pytest.Pytester, run_bench
) -> None:  # type: ignore[no-untyped-def]
    """Issue 10: two same-named tests in different files collapsed into one row of the table."""
    pytester.makepyfile(
        test_one=TWIN.format(n=4), test_two=TWIN.format(n=4) + "    torch.ones(4).clone()\n"
    )
    result = run_bench("--bench-mode=ops")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "[ test_add ]  (test_one.py)" in out and "[ test_add ]  (test_two.py)" in out
    table = out[out.index("torchbench ops") :]
    values = re.findall(r"^\s+(\d+)\s*$", table, flags=re.M)
    assert len(values) == 2 and values[0] != values[1], (
        table
    )  # the clone adds ops: both values are shown


PARAMS = """
import pytest, torch

@pytest.mark.parametrize("name", ["a", "a.", "a_", "a-"])
def test_p(benchmark, name):
    benchmark(lambda: torch.ones(len(name)) + 1)
"""


def test_bench_profile_traces_are_unique_and_linked_from_the_html(
    pytester: pytest.Pytester, run_bench
) -> None:  # type: ignore[no-untyped-def]
    """Issue 8: ids that fold to one file name overwrote each other's trace; the HTML read
    ``extras["trace"]``, which nothing wrote, so it never linked a trace."""
    pytester.makepyfile(test_p=PARAMS)
    result = run_bench(
        "--bench-mode=ops", "--bench-profile", "--bench-output=out", "--bench-html=out/report.html"
    )
    assert result.ret == 0, result.stdout.str()
    traces = sorted(p.name for p in (pytester.path / "out/traces").iterdir())
    assert len(traces) == 4, traces
    page = (pytester.path / "out/report.html").read_text(encoding="utf-8")
    links = sorted(set(re.findall(r'href="(traces/[^"]+)"', page)))
    assert len(links) == 4, links
    for link in links:
        assert (
            pytester.path / "out" / link
        ).is_file()  # relative to the report: upload both together


HOSTILE = "\x1b[2J\n::error title=pwned::forged"


def test_text_from_a_baseline_file_is_escaped_everywhere(
    pytester: pytest.Pytester,
    run_bench,
    bench_module,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 8: keys and environment facts from a committed baseline reached the terminal (and so a
    CI log, where ``::error`` is a workflow command) and the Markdown raw."""
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    path = pytester.path / "baselines/main/test_a.json"
    data = json.loads(path.read_text())
    env_id = next(iter(data["environments"]))
    data["environments"][env_id]["torch"] = HOSTILE  # not comparable: the fact is shown
    gone = dict(next(iter(data["benchmarks"].values())))
    data["benchmarks"]["test_a.py::test_gone " + HOSTILE] = gone  # missing: the key is shown
    path.write_text(json.dumps(data))
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run_bench(
        "--bench-mode=ops",
        "--bench-compare=main",
        "--bench-markdown=summary2.md",
        "--bench-html=report.html",
    )
    out = result.stdout.str()
    assert "pwned" in out  # it is shown ...
    for line in result.outlines:
        assert "\x1b" not in line and not line.lstrip().startswith(("::", "##[")), (
            line
        )  # ... escaped
    for text in (summary.read_text(), (pytester.path / "summary2.md").read_text()):
        assert "pwned" in text and "\x1b" not in text
        assert not any(line.lstrip().startswith(("::", "##[")) for line in text.splitlines())
    page = (pytester.path / "report.html").read_text()
    assert "pwned" in page and "\x1b" not in page


@pytest.mark.parametrize("kind", ["fifo", "device-link", "fifo-link"])
@pytest.mark.parametrize(
    "option", ["--bench-json", "--bench-html", "--bench-markdown", "GITHUB_STEP_SUMMARY"]
)
def test_report_path_that_is_not_a_regular_file_is_refused_before_running(
    pytester: pytest.Pytester,
    run_bench,
    bench_module,
    monkeypatch,
    option: str,
    kind: str,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 8: a device, a FIFO or a symlink to one was replaced by a regular file (or blocked);
    a symlink is refused as a symlink (issue 27: it could point at any file the user can write)."""
    pytester.makepyfile(test_a=bench_module)
    target = pytester.path / "target"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        if kind == "fifo-link":
            os.mkfifo(pytester.path / "fifo")
        target.symlink_to("/dev/null" if kind == "device-link" else pytester.path / "fifo")
    args = ["--bench-mode=ops", "--bench-save=main"]
    if option == "GITHUB_STEP_SUMMARY":
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    else:
        args.append(f"{option}={target}")
    result = run_bench(*args)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if "target" in line]
    assert len(errors) == 1 and re.search(
        r"is a (FIFO|device|symlink to \S*(null|fifo);)", errors[0]
    ), result.stderr.str()
    assert errors[0].startswith(f"ERROR: {option}=")
    assert not (pytester.path / "baselines").exists()  # nothing ran
    assert target.is_symlink() if kind != "fifo" else target.is_fifo()


PROFILED = """
import torch

def test_mm(benchmark):
    x = torch.ones(8, 8)
    benchmark(torch.mm, x, x)

def test_prof(bench_profiler):
    with bench_profiler(record_shapes=True):
        torch.ones(16, 16).relu()
"""


def test_profiles_of_bench_profile_and_bench_profiler_reach_every_report(
    pytester: pytest.Pytester,
    run_bench,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 9 item 3: ``bench_profiler`` blocks travelled in a teardown payload only the terminal
    read, so the JSON, Markdown and HTML reports never showed them; now both kinds of profile are
    in the results, in one shape, and the HTML links every trace."""
    pytester.makepyfile(test_p=PROFILED)
    result = run_bench(
        "--bench-mode=ops",
        "--bench-profile",
        "--bench-output=out",
        "--bench-save=main",
        "--bench-json=out/results.json",
        "--bench-markdown=out/summary.md",
        "--bench-html=out/report.html",
    )
    assert result.ret == 0, result.stdout.str()
    results = {
        r["key"]: r
        for r in json.loads((pytester.path / "out/results.json").read_text())["benchmarks"]
    }
    sources = {key: [p["source"] for p in r["extras"]["profiles"]] for key, r in results.items()}
    assert sources == {
        "test_p.py::test_mm": ["--bench-profile"],
        "test_p.py::test_prof": ["bench_profiler"],
    }
    traces = [p["trace"] for r in results.values() for p in r["extras"]["profiles"]]
    assert all(trace and os.path.isfile(trace) for trace in traces), traces
    assert any(
        op["name"] == "aten::relu"
        for op in results["test_p.py::test_prof"]["extras"]["profiles"][0]["top_ops"]
    )
    # A profile alone is no baseline: only the measured benchmark was saved.
    saved = json.loads((pytester.path / "baselines/main/test_p.json").read_text())
    assert list(saved["benchmarks"]) == ["test_p.py::test_mm"]
    assert "saved 1 benchmark result(s)" in result.stdout.str()
    # The HTML links both traces, relative to the report, and the files are there.
    page = (pytester.path / "out/report.html").read_text(encoding="utf-8")
    links = sorted(set(re.findall(r'href="(traces/[^"]+)"', page)))
    assert len(links) == 2 and all((pytester.path / "out" / link).is_file() for link in links), (
        links
    )
    assert "profiler trace (bench_profiler)" in page and "profiler trace (--bench-profile)" in page
    summary = (pytester.path / "out/summary.md").read_text()
    assert "**test\\_p.py::test\\_prof** (bench\\_profiler)" in summary
    assert "**test\\_p.py::test\\_mm** (--bench-profile)" in summary
    result.stdout.fnmatch_lines(
        [
            "*torchbench profiles*",
            "test_p.py::test_mm: *out/traces/*(--bench-profile)",
            "*",
            "test_p.py::test_prof: *out/traces/*(bench_profiler)",
        ],
        consecutive=False,
    )


HELPER = """
import os

import torch

FLAG = os.path.join(os.path.dirname(__file__), "extra.flag")


def work(x):
    y = x.clone()
    if os.path.exists(FLAG):
        y = y.clone()  # the new site: line 11
    return y
"""

OUTPUT_TESTS = """
import os
import sys

import torch

from helper import work


def test_changes(benchmark):
    benchmark(work, torch.ones(4))


def test_same(benchmark):
    benchmark(lambda: torch.ones(3) + 1)


def test_writes_stderr(benchmark):
    os.write(2, b"user fd2 line\\n")
    print("user sys line", file=sys.stderr)
    benchmark(lambda: torch.ones(2) * 2)
"""


def test_quiet_and_ci_show_only_the_changes_and_the_profiler_keeps_out_of_captured_stderr(
    pytester: pytest.Pytester,
    run_bench,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 27 item 19: with ``-q`` (and in CI) every metric's table listed every benchmark; the
    changes-only view lists the changed ones and one line of counts, ``-v`` everything. The op
    call sites of an op the baseline called too show each site's calls. Kineto's own
    ``profiler_start``/``profiler_stop`` lines (fd 2) landed in each test's captured stderr, as if
    the user's code wrote them; the user's own stderr stays."""
    pytester.makepyfile(helper=HELPER, test_out=OUTPUT_TESTS)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    (pytester.path / "extra.flag").write_text("")
    quiet = run_bench("--bench-mode=ops", "--bench-compare=main", "-q", "-rP")
    quiet.assert_outcomes(passed=2, failed=1)
    out = quiet.stdout.str()
    tables = out[out.index("= torchbench =") :]
    assert (
        "[ test_changes ]" in tables
        and "[ test_same ]" not in tables
        and "test_writes_stderr ]" not in tables
    )
    assert (
        "torchbench: 3 benchmark(s) against baseline 'main': 1 regression, 2 unchanged; "
        "tables show "
        "the 1 changed (-v shows every benchmark)"
    ) in out, out
    # The baseline keeps counts, not sites: each site's calls now (docs/reports.md)
    assert (
        "    aten::clone 1 -> 2 per call (helper.py:9 in work x1, helper.py:11 in work x1)" in out
    ), out
    captured = out[out.index("Captured stderr call") :]
    assert "user fd2 line" in captured and "user sys line" in captured
    assert "profiler_start" not in out and "USDT" not in out, out
    # In CI the changes-only view is the default; -v shows every benchmark.
    monkeypatch.setenv("CI", "true")
    ci = run_bench("--bench-mode=ops", "--bench-compare=main")
    assert "[ test_same ]" not in ci.stdout.str() and "tables show the 1 changed" in ci.stdout.str()


@pytest.mark.parametrize(
    ("ci", "verbose", "expected"),
    [
        ("", 0, False),
        ("", -1, True),
        ("", 1, False),
        ("true", 0, True),
        ("true", 1, False),
        ("false", 0, False),
    ],
)
def test_changes_only_with_quiet_and_in_ci_unless_verbose(
    monkeypatch: pytest.MonkeyPatch, ci: str, verbose: int, expected: bool
) -> None:
    from types import SimpleNamespace

    from pytest_torchbench.pytest.session_facts import changes_only

    monkeypatch.setenv("CI", ci)
    assert changes_only(SimpleNamespace(option=SimpleNamespace(verbose=verbose))) is expected  # type: ignore[arg-type]


def test_the_json_report_gives_each_failed_test_its_error_line(
    pytester: pytest.Pytester, run_bench
) -> None:  # type: ignore[no-untyped-def]
    # What a measured base reads to say why a benchmark has no base entry: pytest's error, not the
    # test's path:line (a fixture that does not exist has no crash entry, only "E" lines).
    pytester.makepyfile(
        test_fails="""
import torch

def test_no_fixture(benchmark, port):
    benchmark(torch.ones, 2)

def test_assert(benchmark):
    benchmark(torch.ones, 2)
    assert 1 == 2, "one is not two"
"""
    )
    run = run_bench("--bench-mode=ops", "--bench-json=out.json")
    assert run.ret == 1, run.stdout.str()
    errors = json.loads((pytester.path / "out.json").read_text())["failed_test_errors"]
    assert errors["test_fails.py::test_no_fixture"] == "fixture 'port' not found"
    assert errors["test_fails.py::test_assert"].startswith("AssertionError: one is not two")
