"""A third-party metric, registered from a conftest through pytest_torchbench_register_metrics,
goes the whole way: measured, saved, compared (and failing its test), shown in the terminal,
JUnit, Markdown and HTML, and validated when read back. Its one file is the conftest below."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: A real metric: Python line events of one call of the benchmark (sys.settrace), deterministic.
#: It uses the defaults of pytest_torchbench.Metric for judging and showing (one headline number).
CONFTEST = """
import dataclasses, sys
from pytest_torchbench import Metric


@dataclasses.dataclass
class LinesValue:
    lines: int

    def to_json(self):
        return {"lines": self.lines}

    @classmethod
    def from_json(cls, data):
        return cls(int(data["lines"]))


class Lines(Metric):
    name = "lines"
    value_type = LinesValue
    help = "Python lines executed per call"
    default_limit = 0.05
    comparability_facts = ("python",)
    positive_fields = ("lines",)
    table_title = "Python lines per call"

    def measure(self, fn, context):
        count = 0

        def tracer(frame, event, arg):
            nonlocal count
            if event == "line":
                count += 1
            return tracer

        if context.before_region is not None:
            context.before_region()
        sys.settrace(tracer)
        try:
            fn()
        finally:
            sys.settrace(None)
        return LinesValue(count)

    def headline(self, value):
        return value.lines


def pytest_torchbench_register_metrics(config):
    return [Lines()]
"""

MODULE = """
import pytest

def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

def test_loop(benchmark):
    benchmark(work, {n})
"""


def test_a_metric_registered_by_a_plugin_goes_the_whole_way(bench) -> None:  # type: ignore[no-untyped-def]
    bench.pytester.makeconftest(CONFTEST)
    bench.pytester.makepyfile(test_bench=MODULE.format(n=10))
    saved = bench.run("--bench-mode=lines,ops", "--bench-save=main")
    assert saved.ret == 0, saved.stdout.str()
    saved.stdout.fnmatch_lines(["*torchbench lines (Python lines per call)*"])
    entry = bench.load("main")["benchmarks"]["test_bench.py::test_loop"]
    lines = entry["metrics"]["lines"]["lines"]
    assert lines > 20 and entry["metrics"]["lines"]["env"] in bench.load("main")["environments"]
    assert bench.run("--bench-mode=lines", "--bench-compare=main").ret == 0  # same code: unchanged

    bench.pytester.makepyfile(test_bench=MODULE.format(n=20))  # twice the loop: a regression
    run = bench.run(
        "--bench-mode=lines",
        "--bench-compare=main",
        "--bench-markdown=out.md",
        "--bench-html=out.html",
        "--junitxml=junit.xml",
        "--bench-json=out.json",
    )
    assert run.ret == 1
    run.stdout.fnmatch_lines(
        [
            "*torchbench: test_bench.py::test_loop: lines regressed: lines * -> * (+*%, limit 5%)",
            "*! regression*",
        ]
    )
    verdicts = json.loads((bench.path / "out.json").read_text())["verdicts"]
    assert [(v["metric"], v["status"], v["failed"]) for v in verdicts] == [
        ("lines", "regression", True)
    ]
    assert "lines" in (bench.path / "out.md").read_text()
    assert "test_bench.py::test_loop" in (bench.path / "out.html").read_text()
    properties = {
        p.get("name"): p.get("value") for p in ET.parse(bench.path / "junit.xml").iter("property")
    }
    assert properties["torchbench.verdict.lines"] == "regression (failed)"
    assert float(properties["torchbench.lines.value"]) > lines
    # The torchbench command reads and judges the same sets once told where the metric comes from;
    # without it, it says which metric is missing and how to load it (not "malformed").
    assert bench.run("--bench-mode=lines", "--bench-save=pr").ret == 0
    cli = [sys.executable, "-m", "pytest_torchbench"]
    unknown = subprocess.run(
        [*cli, "compare", "main", "pr"], cwd=bench.path, capture_output=True, text=True
    )
    assert unknown.returncode == 4, unknown.stderr
    assert "holds metric 'lines', which no loaded plugin registers" in unknown.stderr
    assert "-p path/to/conftest.py" in unknown.stderr and unknown.stderr.count("\n") == 1
    judged = subprocess.run(
        [*cli, "-p", "conftest.py", "compare", "main", "pr"],
        cwd=bench.path,
        capture_output=True,
        text=True,
    )
    assert judged.returncode == 1, judged.stdout + judged.stderr
    assert re.search(
        r"test_bench.py::test_loop: lines \d+ -> \d+ \(\+[\d.]+%, limit 5%\) FAILED", judged.stdout
    )
    same = subprocess.run(
        [*cli, "-p", "conftest.py", "compare", "main", "main", "-p", "conftest.py"],
        cwd=bench.path,
        capture_output=True,
        text=True,
    )
    assert same.returncode == 0, same.stdout + same.stderr
    # The limit option knows the new name; a bad number in its baseline is one line, exit 4.
    assert (
        bench.run("--bench-mode=lines", "--bench-compare=main", "--bench-fail=lines:200%").ret == 0
    )
    path = bench.baseline("main")
    document = json.loads(path.read_text())
    document["benchmarks"]["test_bench.py::test_loop"]["metrics"]["lines"]["lines"] = 0
    path.write_text(json.dumps(document))
    bad = bench.run("--bench-mode=lines", "--bench-compare=main")
    assert bad.ret == 4
    bad.stderr.fnmatch_lines(
        ["*benchmark 'test_bench.py::test_loop': lines.lines is 0; it must be > 0*"]
    )


def test_a_metric_name_taken_twice_is_a_usage_error(bench) -> None:  # type: ignore[no-untyped-def]
    bench.pytester.makeconftest("""
from pytest_torchbench.metrics.ops import Ops

def pytest_torchbench_register_metrics(config):
    return [Ops()]
""")
    bench.pytester.makepyfile(test_bench=MODULE.format(n=1))
    result = bench.run("--bench-mode=ops")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*pytest_torchbench_register_metrics: metric 'ops' is registered twice*"]
    )


def _documented_metric() -> str:
    """The ```python block of docs/metrics.md that registers a metric: the minimal metric the page
    shows, run as is (the page's other blocks are parts of a metric)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    complete = [b for b in blocks if "def pytest_torchbench_register_metrics" in b]
    assert len(complete) == 1, "docs/metrics.md should show exactly one complete conftest"
    return complete[0]


def test_the_documented_minimal_metric_works_as_shown(bench) -> None:  # type: ignore[no-untyped-def]
    """docs/metrics.md's conftest, read from the page (so the page cannot drift): its four members
    are enough for a save, an unchanged comparison and a failing one with the documented limit."""
    code = _documented_metric()
    assert len(code.splitlines()) <= 50
    bench.pytester.makeconftest(code)
    bench.pytester.makepyfile(test_bench=MODULE.format(n=10))
    saved = bench.run("--bench-mode=lines", "--bench-save=main")
    assert saved.ret == 0, saved.stdout.str() + saved.stderr.str()
    saved.stdout.fnmatch_lines(["*torchbench lines (Python lines per call)*"])
    assert (
        bench.load("main")["benchmarks"]["test_bench.py::test_loop"]["metrics"]["lines"]["lines"]
        > 20
    )
    assert bench.run("--bench-mode=lines", "--bench-compare=main").ret == 0
    bench.pytester.makepyfile(test_bench=MODULE.format(n=20))
    slower = bench.run("--bench-mode=lines", "--bench-compare=main")
    assert slower.ret == 1
    slower.stdout.fnmatch_lines(
        ["*test_bench.py::test_loop: lines regressed: lines * -> * (+*%, limit 5%)"]
    )


def test_merging_a_shard_of_a_plugin_metric_says_to_load_the_plugin(bench) -> None:  # type: ignore[no-untyped-def]
    """``torchbench merge`` of a shard holding a plugin's metric names the metric and says how
    to load it (it said only ``unknown metric 'lines'``); with ``-p`` it merges."""
    bench.pytester.makeconftest(CONFTEST)
    bench.pytester.makepyfile(test_bench=MODULE.format(n=10))
    shard = bench.run("--bench-mode=lines", "--bench-json=shard.json")
    assert shard.ret == 0, shard.stdout.str()
    cli = [sys.executable, "-m", "pytest_torchbench"]
    unknown = subprocess.run(
        [*cli, "merge", "out.json", "shard.json"], cwd=bench.path, capture_output=True, text=True
    )
    assert unknown.returncode == 4, unknown.stdout + unknown.stderr
    assert unknown.stderr.splitlines() == [
        "torchbench: error: merge: shard.json holds metric 'lines', which no loaded plugin "
        "registers (metrics beyond the built-in ones come from a plugin or conftest's "
        "pytest_torchbench_register_metrics): load it with -p, e.g. torchbench -p MODULE merge "
        "... or torchbench -p path/to/conftest.py merge ..."
    ]
    merged = subprocess.run(
        [*cli, "-p", "conftest.py", "merge", "out.json", "shard.json"],
        cwd=bench.path,
        capture_output=True,
        text=True,
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert json.loads((bench.path / "out.json").read_text())["benchmarks"][0]["metrics"]["lines"]
