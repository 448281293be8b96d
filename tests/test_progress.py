"""Progress lines of the child runs a run waits for (pytest/progress.py)."""

from __future__ import annotations

from pathlib import Path

from pytest_torchbench.pytest.progress import ProgressLines, read_progress


def test_lines_name_each_child_and_what_is_left(tmp_path: Path) -> None:
    lines: list[str] = []
    base, head = tmp_path / "base", tmp_path / "head"
    progress = ProgressLines(lines.append, every=0.0)
    progress.poll("round 1 of 4", [("base", base), ("this checkout", head)])
    assert lines[-1].startswith("torchbench: round 1 of 4: base starting, this checkout starting; ")
    base.write_text("3 12")
    head.write_text("2 12")
    progress.poll("round 1 of 4", [("base", base), ("this checkout", head)])
    assert (
        "base 3/12 tests, this checkout 2/12 tests (about " in lines[-1]
        and " left of it); " in lines[-1]
    )
    base.write_text("12 12")
    progress.poll("round 1 of 4", [("base", base)])
    assert "base 12/12 tests (finishing); " in lines[-1]


def test_a_short_wait_prints_nothing_and_none_without_a_writer(tmp_path: Path) -> None:
    lines: list[str] = []
    ProgressLines(lines.append, every=60.0).poll("the base", [("base", tmp_path / "p")])
    ProgressLines(None, every=0.0).poll("the base", [("base", tmp_path / "p")])
    assert lines == []


def test_a_torn_or_missing_file_reads_as_nothing(tmp_path: Path) -> None:
    assert read_progress(tmp_path / "missing") is None
    (tmp_path / "torn").write_text("3")
    assert read_progress(tmp_path / "torn") is None
