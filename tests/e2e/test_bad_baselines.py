"""Hostile baselines, keys and paths (issue 27): each meets the user end to end as one clear line
and exit status 4, or as a correct comparison; nothing saved is lost or rewritten."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

OPS = "--bench-mode=ops"  # deterministic: no timing noise on a loaded machine


def _usage_error(result: pytest.RunResult, *needles: str) -> str:
    """Exit 4, no traceback, and one ``ERROR:`` line that says it all (other stderr lines, such as
    a warning torch prints at import, are not ours to count)."""
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    errors = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


SPACED_IDS = """
import pytest, torch

@pytest.mark.benchmark
@pytest.mark.parametrize("shape", ["8 8", "[1,2]"])
def test_f(shape):
    x = torch.ones(2)
    for _ in range(EXTRA):
        x = x + 1
"""


@pytest.mark.slow
def test_a_parametrize_id_that_looks_like_numbers_is_saved_as_written_and_compared(bench):
    """Item 3: the id "8 8" was saved as [8, 8]: never compared again, so a regression passed."""
    bench.pytester.makepyfile(test_bench=SPACED_IDS.replace("EXTRA", "1"))
    bench.run("--bench-save=main", OPS).assert_outcomes(passed=2)
    assert sorted(bench.load("main")["benchmarks"]) == [
        "test_bench.py::test_f[8 8]",
        "test_bench.py::test_f[[1,2]]",
    ]
    result = bench.run("--bench-compare=main", OPS)
    result.assert_outcomes(passed=2)
    assert not re.search(r"(missing|new) \(\d", result.stdout.str()), result.stdout.str()
    bench.pytester.makepyfile(
        test_bench=SPACED_IDS.replace("EXTRA", "11")
    )  # another size: no stale .pyc
    result = bench.run("--bench-compare=main", OPS)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*test_bench.py::test_f[[]8 8]: ops op counts changed: ops 8 -> 58*"]
    )


COLLIDING_KEYS = """
import pytest

@pytest.mark.parametrize("x", ["a", "a] [b"])
def test_f(x, bench_timer):
    if x == "a":  # key: its id plus its recording's description, 'test_f[a] [b]'
        bench_timer("sum(range(10))", description="b").timeit(10)
    else:  # key: its id, 'test_f[a] [b]'
        bench_timer("sum(range(20))").timeit(10)
"""


def test_two_tests_with_one_result_key_is_an_error_naming_both(bench):
    """Item 2: test_f[a] recording description "b" and the test whose id is 'test_f[a] [b]' had one
    key: one result was silently dropped from the baseline and a later run failed falsely."""
    bench.pytester.makepyfile(test_bench=COLLIDING_KEYS)
    result = bench.run("--bench-save=main", OPS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*torchbench: test_bench.py::test_f[[]a] [[]b]: "
            "this result key is also the key of a result of "
            "test_bench.py::test_f[[]a]*rename one*",
        ]
    )
    entries = bench.load("main")["benchmarks"]
    assert list(entries) == ["test_bench.py::test_f[a] [b]"]
    assert entries["test_bench.py::test_f[a] [b]"]["nodeid"] == "test_bench.py::test_f[a]"
    # Compared later, the colliding test fails again, with the same message, and the other passes.
    result = bench.run("--bench-compare=main", OPS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*is also the key of a result of test_bench.py::test_f[[]a]*"])


BENCH = """
import pytest

@pytest.mark.benchmark
def test_ok():
    sum(range(100))
"""


@pytest.fixture
def saved(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    bench.run("--bench-save=main", OPS).assert_outcomes(passed=1)
    return bench


def _cli(cwd, *args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "pytest_torchbench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "kind, needle",
    [
        ("fifo", "is a FIFO, not a regular file"),
        ("zero", "is a device (through a symlink), not a regular file"),
    ],
)
def test_a_special_file_among_the_baselines_is_one_line_not_a_hang(saved, kind, needle):
    """Item 4: a symlink to /dev/zero was read until MemoryError (23 GB), a FIFO hung forever,
    from pytest and from torchbench show alike."""
    special = saved.path / "baselines" / "main" / "test_other.json"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        special.symlink_to("/dev/zero")
    for option in ("--bench-compare=main", "--bench-save=main"):
        _usage_error(saved.run(option, OPS, timeout=60), str(special), needle)
    for args in (["show", "main"], ["show", str(special)], ["compare", "main", str(special)]):
        done = _cli(saved.path, *args)
        assert done.returncode == 4, done
        assert done.stderr.startswith("torchbench: error: ") and needle in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert os.path.lexists(special)


def test_compare_with_the_root_folder_is_refused_without_walking_the_disk(saved):
    """Item 10: --bench-compare=/ walked the whole file system."""
    started = time.monotonic()
    _usage_error(
        saved.run("--bench-compare=/", OPS, timeout=120),
        "--bench-compare=/: folder / holds over",
        "so it is not a baseline set",
    )
    done = _cli(saved.path, "show", "/")
    assert done.returncode == 4 and "show=/: folder / holds over" in done.stderr, done.stderr
    assert time.monotonic() - started < 100


@pytest.mark.parametrize(
    "blocker", ["baselines", "baselines/main", "baselines/main/test_bench.json/x"]
)
def test_a_save_folder_that_cannot_be_written_stops_the_run_before_the_first_test(bench, blocker):
    """Item 10: a baselines path blocked by a file was found only by the save, after every test
    ran."""
    bench.pytester.makepyfile(
        test_bench=BENCH.replace("sum(range(100))", "open('ran', 'w').close()")
    )
    parts = blocker.split("/")
    if len(parts) > 2:  # the module's file is a folder: the set is fine, the save would fail
        (bench.path / "/".join(parts[:-1])).mkdir(parents=True)
        (bench.path / blocker).write_text("")
        needle = "is a directory, not a regular file"
    else:
        (bench.path / blocker).parent.mkdir(parents=True, exist_ok=True)
        (bench.path / blocker).write_text("not a folder")
        needle = f"{bench.path / blocker} is a regular file, not a folder"
    result = bench.run("--bench-save=main", OPS)
    _usage_error(result, needle)
    assert not (bench.path / "ran").exists(), "a test ran before the error"
    assert "not a folder" not in needle or (bench.path / blocker).read_text() == "not a folder"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--bench-min-run-time=nan"], "--bench-min-run-time=nan: must be > 0 seconds and finite"),
        (["--bench-min-run-time=inf"], "--bench-min-run-time=inf: must be > 0 seconds and finite"),
        (
            ["--bench-fail=time:5%,time:6%"],
            "--bench-fail: metric 'time' has two limits; give each metric one",
        ),
        (
            ["--bench-html=link.html"],
            "--bench-html=link.html: is a symlink to victim.txt; a report is never written",
        ),
    ],
)
def test_options_that_were_accepted_are_usage_errors(bench, args, needle):
    """Item 9: nan and inf ran forever or not at all, the later of two limits silently won, and a
    report path that is a symlink overwrote the file it pointed to."""
    bench.pytester.makepyfile(test_bench=BENCH)
    (bench.path / "victim.txt").write_text("keep me")
    (bench.path / "link.html").symlink_to("victim.txt")
    _usage_error(bench.run(*args, timeout=60), needle)
    assert (bench.path / "victim.txt").read_text() == "keep me"


SURROGATES = """
import pytest

@pytest.mark.benchmark
def test_ok(benchmark):
    benchmark.extra_info["x"] = "bad \\udc80 text"
    benchmark.group = "g\\udc81"
    benchmark(lambda: sum(range(10)))
"""


def test_lone_surrogates_from_a_test_or_a_baseline_are_escaped_everywhere(bench):
    """Item 5: a lone surrogate in extra_info or in a baseline was a UnicodeEncodeError traceback
    (the save, the Markdown and HTML reports, torchbench show)."""
    bench.pytester.makepyfile(test_bench=SURROGATES)
    reports = [
        "--bench-json=r.json",
        "--bench-markdown=r.md",
        "--bench-html=r.html",
        "--junitxml=j.xml",
    ]
    result = bench.run("--bench-save=main", OPS, *reports)
    result.assert_outcomes(passed=1)
    assert result.ret == 0 and "Traceback" not in result.stdout.str() + result.stderr.str()
    entry = bench.load("main")["benchmarks"]["test_bench.py::test_ok"]
    assert entry["extra_info"] == {"x": "bad \udc80 text"} and entry["group"] == "g\udc81"
    assert "| g\\\\udc81 |" in (bench.path / "r.md").read_text(
        encoding="utf-8"
    )  # Markdown escapes the backslash
    # A baseline whose key and label hold one (JSON escapes are valid JSON: anyone can commit them).
    path = bench.baseline("main")
    document = json.loads(path.read_text(encoding="utf-8"))
    document["benchmarks"]["test_bench.py::test_ok\udc83"] = dict(
        document["benchmarks"]["test_bench.py::test_ok"], label="lab\udc82"
    )
    path.write_text(json.dumps(document), encoding="utf-8")
    result = bench.run("--bench-compare=main", OPS, *reports)
    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*test_bench.py::test_ok\\udc83: ops: in the baseline, not measured*"]
    )
    for command in (["show", "main"], ["compare", "main", "main"]):
        done = _cli(
            bench.path, *command, "--html", "s.html", "--markdown", "s.md", "--json", "s.json"
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert "lab\\udc82" in done.stdout, done.stdout


FORGED = "2.13\x1b[2J\n::error title=forged::from a baseline"


def _no_raw_control(text: str) -> None:
    assert "\x1b" not in text and not any(
        line.lstrip().startswith("::error") for line in text.splitlines()
    ), text


def test_text_from_baseline_files_is_escaped_in_strict_failures_junit_and_usage_errors(saved):
    """Item 6: environment facts reached the terminal and JUnit raw in --bench-strict failures, and
    file names in usage errors: an escape sequence rewrote the terminal, a newline forged a line
    (a GitHub Actions workflow command)."""
    path = saved.baseline("main")
    document = json.loads(path.read_text())
    for facts in document["environments"].values():
        facts["torch"] = FORGED
    path.write_text(json.dumps(document))
    result = saved.run("--bench-compare=main", OPS, "--bench-strict", "--junitxml=j.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*ops not comparable (strict environment)*torch: 2.13\\x1b[[]2J\\x0a::error title=forged*"]
    )
    _no_raw_control(result.stdout.str())
    junit = (saved.path / "j.xml").read_text()
    assert "2.13\\x1b[2J\\x0a::error title=forged" in junit
    _no_raw_control(junit.replace("&#10;", "\n"))
    # A baseline file whose name holds a control character, in a usage error.
    (saved.path / "baselines" / "main" / "bad\x1b[2Jname.json").write_text("{")
    line = _usage_error(
        saved.run("--bench-compare=main", OPS), "bad\\x1b[2Jname.json", "is not valid JSON"
    )
    _no_raw_control(line)
