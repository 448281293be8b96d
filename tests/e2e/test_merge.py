"""``torchbench merge``: the ``--bench-json`` files of CI shards as one run (issue 25, point 5).

Real shards: one suite, saved as baseline 'main', then a change that adds an aten op to one
benchmark; the suite is run whole and as two ``-k`` halves (ops mode: exact counts, so the whole
run and the merged halves must agree to the byte). The merge gives the same verdicts, the same
Markdown and HTML reports and the same exit status as the whole run, and saves one baseline set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_torchbench.cli import main

SUITE = """
import pytest, torch
import mylib


@pytest.mark.benchmark
def test_left_add():
    torch.ones(4) + 1


@pytest.mark.benchmark
def test_left_mul():
    torch.ones(4) * 2


@pytest.mark.benchmark
def test_right_work():
    mylib.work()


@pytest.mark.benchmark
def test_right_sum():
    torch.ones(4).sum()
"""
LIB_BEFORE = "import torch\n\n\ndef work():\n    return torch.ones(4) + 1\n"
LIB_AFTER = "import torch\n\n\ndef work():\n    return (torch.ones(4) + 1).clone()\n"


def _verdicts(path: Path) -> list[tuple]:  # type: ignore[type-arg]
    document = json.loads(path.read_text(encoding="utf-8"))
    return sorted(
        (v["key"], v["metric"], v["status"], v["baseline"], v["current"], v["failed"])
        for v in document["verdicts"]
    )


def test_merged_shards_give_the_verdict_and_reports_of_the_whole_run(
    pytester: pytest.Pytester,
    run_bench,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_bench=SUITE, mylib=LIB_BEFORE)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    (pytester.path / "mylib.py").write_text(LIB_AFTER)
    common = ("--bench-mode=ops", "--bench-compare=main")
    whole = run_bench(
        *common, "--bench-json=whole.json", "--bench-markdown=whole.md", "--bench-html=whole.html"
    )
    assert whole.ret == 1, whole.stdout.str()
    left = run_bench(*common, "-k", "left", "--bench-json=left.json")
    right = run_bench(*common, "-k", "right", "--bench-json=right.json")
    assert (left.ret, right.ret) == (0, 1), left.stdout.str() + right.stdout.str()
    monkeypatch.chdir(pytester.path)

    code = main(
        [
            "merge",
            "merged.json",
            "left.json",
            "right.json",
            "--markdown",
            "merged.md",
            "--html",
            "merged.html",
            "--save",
            "merged",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "test_bench.py::test_right_work: ops 8 -> 11 calls per call" in out, out
    assert _verdicts(pytester.path / "merged.json") == _verdicts(pytester.path / "whole.json")
    assert len(_verdicts(pytester.path / "merged.json")) == 4
    assert (pytester.path / "merged.md").read_text() == (pytester.path / "whole.md").read_text()
    assert (pytester.path / "merged.html").read_text() == (pytester.path / "whole.html").read_text()
    merged = json.loads((pytester.path / "merged.json").read_text())
    assert [b["key"] for b in merged["benchmarks"]] == [
        "test_bench.py::test_left_add",
        "test_bench.py::test_left_mul",
        "test_bench.py::test_right_sum",
        "test_bench.py::test_right_work",
    ]
    saved = json.loads((pytester.path / "baselines/merged/test_bench.json").read_text())
    assert "test_bench.py::test_right_work" in json.dumps(
        saved
    ) and "test_bench.py::test_left_add" in json.dumps(saved)

    # The shard without the regression merges to a pass; a regression in any shard fails the merge.
    assert main(["merge", "clean.json", "left.json"]) == 0
    assert main(["merge", "again.json", "right.json", "left.json"]) == 1
    capsys.readouterr()

    # Conflicts: one line each, exit 4, nothing written.
    other = json.loads((pytester.path / "right.json").read_text())
    for benchmark in other["benchmarks"]:
        benchmark["environments"]["ops"]["torch"] = "2.0.0"
    other["modes"] = ["time"]
    (pytester.path / "other.json").write_text(json.dumps(other))
    code = main(["merge", "bad.json", "left.json", "other.json", "left.json", "--save", "bad"])
    err = capsys.readouterr().err.splitlines()
    assert code == 4
    assert err[0] == (
        "torchbench: error: merge: "
        "test_bench.py::test_left_add is in both left.json and left.json: "
        "each benchmark must run in one shard only (check how the jobs split the suite)"
    ), err
    assert sum("is in both" in line for line in err) == 2, err
    assert any(
        line.startswith(
            'torchbench: error: merge: left.json measured modes ["ops"], other.json ["time"]'
        )
        for line in err
    ), err
    assert any(
        "left.json was measured with ops.torch=" in line and "other.json with 2.0.0" in line
        for line in err
    ), err
    assert len(err) == 4, err
    assert (
        not (pytester.path / "bad.json").exists() and not (pytester.path / "baselines/bad").exists()
    )
    assert main(["merge", "bad.json", "left.json", "whole.md"]) == 4
    assert capsys.readouterr().err == (
        "torchbench: error: merge: whole.md is not a --bench-json output of "
        "pytest-torchbench (not JSON: Expecting value: line 1 column 1 (char 0)); "
        "pass the files that pytest --bench-json=PATH wrote\n"
    )
