"""``torchbench history`` (issue 47, item 2): the trend of each benchmark and metric across the
commits that changed a baseline set, read from a real git repository's history: a step beyond
the limit named with its commit, creep made of steps that each stayed within it, and an
environment change drawn as a break, not a step.

The fast test writes each commit's set with the plugin's own ``save_set`` (as a record job's
``--bench-save`` does) over 34 commits; the slow one records a real project with real pytest runs.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchbench.cli import main
from pytest_torchbench.common.vocabulary import Environment
from pytest_torchbench.store.storage import save_set

STEADY, CREEPING = "bench/test_m.py::test_steady[16]", "bench/test_m.py::test_creeping[2]"


def _record(
    root: Path, git: Callable[..., str], subject: str, steady: float, creeping: float, torch: str
) -> None:
    from conftest import make_result

    results = []
    for key, value in ((STEADY, steady), (CREEPING, creeping)):
        result = make_result(key, instructions=value, ops={"aten::add": 1})
        for metric in result.metrics:
            result.environments[metric] = Environment(
                {
                    "torch": torch,
                    "valgrind": "valgrind-3.19.0",
                    "python": "3.11.7",
                    "machine": "x86_64",
                    "libc": "glibc 2.36",
                    "pythonhashseed": "0",
                    "allocator": "a",
                }
            )
        results.append(result)
    save_set(root / "baselines/main", results)
    (root / "src.py").write_text(subject)  # the code change the record followed
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", subject)


@pytest.fixture
def repository(tmp_path: Path, git: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """34 commits: steady at 100,000 but for a +10% step at commit 12; the other creeping +0.6%
    per commit from 8 to 19 (each within 1%, +7.4% in all); torch 2.13 -> 2.14 at commit 26, where
    both read 5% lower (a break, not a step)."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    creeping = 50_000.0
    for n in range(1, 35):
        if 8 <= n <= 19:
            creeping *= 1.006
        torch = "2.13.0+cpu" if n < 26 else "2.14.0+cpu"
        factor = 0.95 if n >= 26 else 1.0
        steady = (110_000.0 if n >= 12 else 100_000.0) * factor
        jitter = (
            n % 3
        )  # the few instructions by which counts differ between record runs: every commit saves
        _record(root, git, f"change {n}", steady + jitter, creeping * factor + jitter, torch)
    git(root, "commit", "-q", "--allow-empty", "-m", "a commit that saved nothing")
    monkeypatch.chdir(root)
    return root


def test_a_step_creep_and_an_environment_break_across_34_commits(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", "--html", "h.html", "--json", "h.json", "--csv", "h.csv"]) == 0
    out = capsys.readouterr().out
    assert (
        "history of baseline set 'main': 34 commit(s), 4 series; "
        "1 step(s) beyond the limit, 1 creeping" in out
    )
    assert (
        f"step   {STEADY} [instructions]: +10.0% (limit 1%) to 110,000 at " in out
        and "(change 12)" in out
    )
    assert f"creep  {CREEPING} [instructions]: +7.4% from " in out
    assert (
        f"break  {STEADY} [instructions]: environment changed at " in out and "(change 26)" in out
    )
    document = json.loads((repository / "h.json").read_text())
    steady = next(
        s for s in document["series"] if s["key"] == STEADY and s["metric"] == "instructions"
    )
    assert len(steady["points"]) == 34
    assert [p["subject"] for p in steady["points"] if p["step"]] == ["change 12"]
    assert [p["subject"] for p in steady["points"] if p["environment_break"]] == ["change 26"]
    rows = list(csv.DictReader(io.StringIO((repository / "h.csv").read_text())))
    assert len(rows) == 4 * 34 and {r["mark"] for r in rows} == {"", "step up", "environment break"}
    page = (repository / "h.html").read_text()
    assert page.count("<svg") == 4 and "creep +7.4%" in page and "environment break at" in page


def test_since_and_k_narrow_it_and_bad_input_is_one_line(
    repository: Path, git: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    start = git(
        repository, "rev-list", "-n", "1", "HEAD~25"
    ).strip()  # "change 10" (HEAD saved nothing)
    assert main(["history", "--since", start, "-k", "steady and not creeping"]) == 0
    out = capsys.readouterr().out
    assert "24 commit(s), 2 series; 1 step(s)" in out and CREEPING not in out
    assert main(["history", "--since", "nosuchrev"]) == 4
    assert "unknown git revision" in capsys.readouterr().err
    assert main(["history", "nosuchset"]) == 4
    assert "no commit changed" in capsys.readouterr().err
    assert main(["history", "-k", "steady and ("]) == 4


def _project_run(root: Path, *args: str) -> None:
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("CI", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:benchmark", "-p", "no:cacheprovider", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_a_record_job_that_commits_the_set_keeps_a_history(
    tmp_path: Path,
    git: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Real runs of a real project, as the record job of docs/ci.md keeps it: save, commit, seven
    times; the fifth change adds a copy (three ops more per call): one step per benchmark, at that
    commit. Exact counts that did not move write the same bytes: only two commits changed the
    set."""
    root = tmp_path / "project"
    (root / "mylib").mkdir(parents=True)
    (root / "test_perf.py").write_text(
        "import pytest, mylib\n\n@pytest.mark.parametrize('n', [2, 16])\n"
        "@pytest.mark.benchmark\ndef test_work(n):\n    mylib.work(n)\n"
    )
    git(root, "init", "-q", "-b", "main")
    for n in range(1, 8):
        copy = ".clone()" if n >= 5 else ""
        (root / "mylib/__init__.py").write_text(
            f"import torch\n\n# revision {n}\n\ndef work(n):\n"
            f"    return (torch.ones(n) + 1){copy}\n"
        )
        _project_run(root, "--bench-mode=ops", "--bench-save=main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"revision {n}" + (": copy the result" if n == 5 else ""))
    monkeypatch.chdir(root)
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "2 commit(s), 2 series; 2 step(s) beyond the limit" in out
    assert "step   test_perf.py::test_work[2] [ops]: +37.5% (limit 0%) to 11 at " in out
    assert "(revision 5: copy the result)" in out
