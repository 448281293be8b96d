"""``torchbench bisect GOOD BAD -- PYTEST-ARGS`` (issue 47, item 3): a real git repository of 33
commits (GOOD and 32 after it), one of which makes a benchmark slower; the command measures
revisions in worktrees and names that commit, with the metric's explanation, in at most
log2(32) + 2 = 7 measurements. Ops mode in the fast tier; instructions and time (a 2x step) slow.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = "import torch\n\n# revision {n}\n\n\ndef work(x):\n    return {body}\n"
FAST, SLOWER = "x + 1", "(x + 1).clone()"
TESTS = (
    "import pytest, torch\nimport mylib\n\n\n@pytest.mark.parametrize('n', [4, 64])\n"
    "@pytest.mark.benchmark\n"
    "def test_work(n):\n    mylib.work(torch.ones(n))\n\n\n"
    "@pytest.mark.benchmark\ndef test_other():\n"
    "    torch.ones(3) * 2\n"
)


def _line(
    root: Path,
    git: Callable[..., str],
    culprit: int,
    slower: str = SLOWER,
    count: int = 32,
    fast: str = FAST,
) -> None:
    """GOOD (revision 0), then ``count`` commits; revision ``culprit`` makes work() slower."""
    (root / "mylib").mkdir(parents=True)
    (root / "test_perf.py").write_text(TESTS)
    (root / ".gitignore").write_text(".torchbench/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    for n in range(count + 1):
        (root / "mylib/__init__.py").write_text(
            LIB.format(n=n, body=slower if n >= culprit else fast)
        )
        git(root, "add", "-A")
        git(
            root,
            "commit",
            "-q",
            "-m",
            f"revision {n}" + (": copy the result" if n == culprit else ""),
        )


def _bisect(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest_torchbench", "bisect", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


@pytest.mark.slow
def test_ops_bisect_finds_the_commit_in_seven_measurements(
    tmp_path: Path, git: Callable[..., str]
) -> None:
    root = tmp_path / "project"
    _line(root, git, culprit=21)
    done = _bisect(root, "HEAD~32", "HEAD", "--bench-mode=ops", "--", "test_perf.py")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for key in ("test_perf.py::test_work[4]", "test_perf.py::test_work[64]"):
        assert re.search(
            rf"{re.escape(key)} \[ops\]: ops 8 -> 11 calls per call .* first beyond the limit: "
            r"[0-9a-f]{12} \(revision 21: copy the result\)",
            out,
        ), out
    assert "aten::clone 0 -> 1 per call" in out  # the metric's own explanation, against the parent
    assert "test_other" not in out.split("measured")[-1]
    measured = int(re.search(r"measured (\d+) revision\(s\) for 32 commit\(s\)", out).group(1))
    assert measured <= 7, out
    # everything is in the cache now: a second bisect measures nothing again
    again = _bisect(root, "HEAD~32", "HEAD", "--bench-mode=ops", "--", "test_perf.py")
    assert again.returncode == 0 and "first beyond the limit" in again.stdout
    assert "measured in this job" not in again.stdout + again.stderr
    assert (
        f"measured {measured} revision(s) for 32 commit(s) (at most 7 for one regression), "
        f"{measured} of them "
        "from the cache" in again.stdout
    ), again.stdout


def test_nothing_to_find_and_bad_input(tmp_path: Path, git: Callable[..., str]) -> None:
    root = tmp_path / "project"
    _line(root, git, culprit=99, count=3)  # no revision is slower
    done = _bisect(root, "HEAD~3", "HEAD", "--bench-mode=ops", "--", "test_perf.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "nothing regressed beyond its limit between GOOD and BAD" in done.stdout
    bad = _bisect(root, "nosuch", "HEAD", "--bench-mode=ops")
    assert bad.returncode == 4 and "'nosuch' is not a commit" in bad.stderr, bad.stderr
    mode = _bisect(root, "HEAD~3", "HEAD", "--bench-mode=opps")
    assert mode.returncode == 4 and "unknown mode(s) opps" in mode.stderr, mode.stderr
    backwards = _bisect(root, "HEAD", "HEAD~3", "--bench-mode=ops")
    assert backwards.returncode == 4 and "is not after" in backwards.stderr, backwards.stderr


@pytest.mark.slow
def test_instructions_bisect_names_the_functions(tmp_path: Path, git: Callable[..., str]) -> None:
    root = tmp_path / "project"
    _line(root, git, culprit=9)
    done = _bisect(
        root, "HEAD~32", "HEAD", "--bench-mode=instructions", "--", "test_perf.py", "-k", "work"
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "first beyond the limit: " in out and "(revision 9: copy the result)" in out, out
    assert "top functions by change" in out, out
    assert int(re.search(r"measured (\d+) revision\(s\) for 32 commit", out).group(1)) <= 7


@pytest.mark.slow
def test_time_bisect_finds_a_2x_step(tmp_path: Path, git: Callable[..., str]) -> None:
    root = tmp_path / "project"
    once, twice = (
        "sum(float(torch.ones(4096).sum()) for _ in range(1))",
        "sum(float(torch.ones(4096).sum()) for _ in range(2))",
    )
    _line(root, git, culprit=6, slower=twice, count=8, fast=once)
    done = _bisect(
        root, "HEAD~8", "HEAD", "--bench-mode=time", "--", "test_perf.py", "-k", "work and 64"
    )
    out = done.stdout
    if done.returncode == 6:  # the machine's load moved between GOOD and BAD: never "unchanged"
        assert "could not judge test_perf.py::test_work[64] [time]" in out, out
        pytest.skip("the machine's state moved between the measurements: could not judge")
    assert done.returncode == 0, out + done.stderr
    assert "(revision 6: copy the result)" in out, out
