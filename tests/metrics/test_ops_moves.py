"""How an op's calls moved per call site (``metrics/ops.py``): the base's sites against the
checkout's, tagged with the lines a real git repository says were edited."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_torchbench.metrics.ops import LineHistory, SiteMove, moves_text, site_moves
from pytest_torchbench.store import changes

WRAPPER = "import lossy\n\n\ndef wrapped(x):\n    return lossy.loss(x)\n"


def test_the_site_that_moved_comes_first_and_an_edited_line_that_did_not_is_as_before(
    tmp_path: Path, git: Callable[..., str]
) -> None:
    (tmp_path / "conftest.py").write_text(WRAPPER)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "base")
    base = git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / "conftest.py").write_text(
        WRAPPER.replace("    return lossy.loss(x)\n", "    y = lossy.loss(x)\n    return y * 2\n")
    )
    lines = changes.ChangedLines(tmp_path, base, "since HEAD~1", tmp_path)
    assert isinstance(lines, LineHistory)
    now = [("conftest.py:5 in wrapped", 12), ("conftest.py:6 in wrapped", 2)]
    before = [("conftest.py:5 in wrapped", False, 12)]
    moves = site_moves(now, before, (12.0, 14.0))
    assert moves is not None
    assert sorted(moves) == [
        SiteMove("conftest.py:5 in wrapped", False, 12, 12),
        SiteMove("conftest.py:6 in wrapped", False, 0, 2),
    ]
    assert moves_text(moves, lines, 2) == (
        "conftest.py:6 in wrapped +2 [changed since HEAD~1]; "
        "as before: conftest.py:5 in wrapped x12"
    )


def test_a_removed_line_and_a_line_not_edited_that_moved() -> None:
    now = [("a.py:9 in f", 3), ("a.py:4 in f", 1), ("a.py:5 in f", 1)]
    before = [("a.py:9 in f", False, 1), ("a.py:7 in f", True, 2), ("a.py:4 in f", False, 1)]
    moves = site_moves(now, before, (4.0, 5.0))
    assert moves is not None
    # the largest moves first (in line order when as large), then the rest left out
    assert moves_text(moves, None, 2) == (
        "a.py:7 in f -2 [removed], a.py:9 in f +2, a.py:5 in f +1, +1 more"
    )


def test_sites_that_do_not_add_up_to_the_baseline_are_not_the_bases() -> None:
    """The base's code run with the checkout's module values (a constant changed) gave other
    counts than the baseline's: no per-site moves, the caller shows the sites as before."""
    now = [("a.py:9 in f", 3)]
    assert site_moves(now, [("a.py:9 in f", False, 3)], (2.0, 3.0)) is None
    assert site_moves(now, [("a.py:9 in f", False, 2)], (2.0, 4.0)) is None
