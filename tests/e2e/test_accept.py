"""Accepting an intended regression in the change itself (issue 47, item 1): a ``Bench-Accept:``
trailer in a commit since the baseline's, or ``--bench-accept``. Real git repositories, real
pytest runs in ops mode (exact): the accepted regression passes with its own verdict in every
report; an accept never hides another benchmark's or another metric's regression; one that
matches nothing, or cannot be read, is said.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

import pytest

LIB = (
    "import torch\n\n\ndef work():\n    return torch.ones(4) + 1\n\n\n"
    "def other():\n    return torch.ones(4) * 2\n"
)
TESTS = (
    "import pytest\nimport mylib\n\n\n@pytest.mark.benchmark\n"
    "def test_work():\n    mylib.work()\n\n\n"
    "@pytest.mark.benchmark\ndef test_other():\n    mylib.other()\n"
)
WORK_KEY = "test_perf.py::test_work"


@pytest.fixture
def change(pytester: pytest.Pytester, git: Callable[..., str]) -> Callable[..., Path]:
    """``change(message, slower=("work",))``: the project committed, then a commit that clones the
    result of each function named in ``slower`` (one aten op more per call) with ``message``."""

    def make(message: str, slower: tuple[str, ...] = ("work",)) -> Path:
        root = pytester.path
        (root / "mylib").mkdir()
        (root / "mylib/__init__.py").write_text(LIB)
        (root / "test_perf.py").write_text(TESTS)
        (root / ".gitignore").write_text(
            "__pycache__/\n*.json\n*.md\n*.xml\n!baselines/**/*.json\n"
        )
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "base")
        text = LIB
        for name in slower:
            text = text.replace(
                f"def {name}():\n    return torch.ones(4)",
                f"def {name}():\n    return torch.ones(4).clone()",
            )
        (root / "mylib/__init__.py").write_text(text)
        git(root, "commit", "-q", "-am", message)
        return root

    return make


def _compare(run_bench, *extra: str) -> pytest.RunResult:  # type: ignore[no-untyped-def]
    return run_bench(
        "--bench-mode=ops,calls",
        "--bench-compare=HEAD~1",
        "--bench-base=measure",
        "--bench-json=out.json",
        "--bench-markdown=s.md",
        "--junitxml=j.xml",
        *extra,
    )


def test_an_accepted_regression_passes_with_its_reason_in_every_report(
    pytester: pytest.Pytester, run_bench, change
) -> None:  # type: ignore[no-untyped-def]
    root = change(
        "Copy the result\n\nCallers kept mutating it.\n\n"
        f"Bench-Accept: {WORK_KEY} ops,calls -- the copy protects callers\n"
    )
    result = _compare(run_bench)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "accepted (1):",
            f"  {WORK_KEY}: ops 8 -> 11 calls per call (3 op(s) changed); "
            "accepted: the copy protects callers",
            "      accepted by Bench-Accept in * (Copy the result): the copy protects callers",
        ]
    )
    assert "matched no regression" not in result.stdout.str()
    verdicts = {
        (v["key"], v["metric"]): v for v in json.loads((root / "out.json").read_text())["verdicts"]
    }
    assert (
        verdicts[(WORK_KEY, "ops")]["status"] == "accepted"
        and not verdicts[(WORK_KEY, "ops")]["failed"]
    )
    assert verdicts[("test_perf.py::test_other", "ops")]["status"] == "unchanged"
    markdown = (root / "s.md").read_text()
    assert (
        ":white_check_mark: passed" in markdown and "2 accepted" not in markdown
    )  # counted per test
    assert (
        "1 accepted" in markdown
        and "### Accepted (1)" in markdown
        and "the copy protects callers" in markdown
    )
    case = next(
        c
        for c in ElementTree.parse(root / "j.xml").iter("testcase")
        if c.get("name") == "test_work"
    )
    assert case.find("failure") is None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["torchbench.verdict.ops"] == "accepted"
    assert props["torchbench.accepted.ops"].endswith(": the copy protects callers")


def test_an_accept_never_covers_another_test_or_metric_and_one_that_matches_nothing_is_said(
    pytester: pytest.Pytester, run_bench, change
) -> None:  # type: ignore[no-untyped-def]
    change(
        "Slower both\n\nBench-Accept: test_perf.py::test_oth* ops -- the other one is meant\n"
        f"Bench-Accept: {WORK_KEY} calls -- a metric this change does not regress\n",
        slower=("work", "other"),
    )
    result = _compare(run_bench)
    assert result.ret == 1, result.stdout.str()
    out = result.stdout.str()
    # test_other's ops accepted; test_work's ops regression stands: neither accept names it
    assert "accepted (1):" in out and "test_perf.py::test_other: ops 8 -> 11" in out
    result.stdout.fnmatch_lines(["FAILED test_perf.py::test_work*"])
    assert "FAILED test_perf.py::test_other" not in out
    result.stdout.fnmatch_lines(
        [f"torchbench: Bench-Accept in * (Slower both) matched no regression: {WORK_KEY} calls"]
    )


def test_the_option_accepts_as_a_trailer_does_and_a_bad_accept_is_one_line(
    pytester: pytest.Pytester, run_bench, change
) -> None:  # type: ignore[no-untyped-def]
    change("Copy the result\n\nBench-Accept: test_perf.py::test_work -- no metrics named\n")
    label = f"--bench-accept={WORK_KEY} * -- labelled perf-accepted on the pull request"
    result = _compare(run_bench, label)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "      accepted by --bench-accept: labelled perf-accepted on the pull request",
            "torchbench: Bench-Accept in * (Copy the result): "
            "'test_perf.py::test_work -- no metrics named' is not an "
            "accept: write TEST-IDS METRICS -- REASON*; its regressions stay failed",
        ]
    )
    bad = run_bench("--bench-mode=ops", "--bench-accept=test_perf.py::test_work opps -- typo")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        [
            "ERROR: --bench-accept: 'test_perf.py::test_work opps -- typo' names unknown metric(s) "
            "opps (known: *)"
        ]
    )
