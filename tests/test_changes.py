"""The lines changed since a revision (``store/changes.py``), read from a real git repository:
they tag the call sites of a failed verdict, so a wrong answer points the reader at the wrong
line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchbench.metrics.explaining import sites_text
from pytest_torchbench.store import changes

LIB = "import torch\n\n\ndef f(x):\n    y = x * 2\n    return y.sum()\n"


@pytest.fixture
def repo(tmp_path: Path, git: Callable[..., str]) -> tuple[Path, str]:
    """A repository whose first commit holds ``lib/ops.py``; returns (top folder, that commit)."""
    root = tmp_path / "repo"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "ops.py").write_text(LIB)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def test_an_edited_and_an_added_line_are_changed_and_the_others_not(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    root, base = repo
    # line 5 edited, a line inserted after it (6); the old line 6 is now line 7, unchanged
    (root / "lib" / "ops.py").write_text(
        LIB.replace("    y = x * 2\n", "    y = x * 3\n    y = y.clone()\n")
    )
    git(root, "commit", "-q", "-am", "head")
    lines = changes.for_revision(root, base, "HEAD~1", root)
    assert lines.label == "since HEAD~1"
    assert [n for n in range(1, 9) if lines("lib/ops.py", n)] == [5, 6]
    # an absolute path is the same file
    assert lines(str(root / "lib" / "ops.py"), 6)


def test_uncommitted_edits_count_since_they_are_what_ran(repo: tuple[Path, str]) -> None:
    root, base = repo
    (root / "lib" / "ops.py").write_text(LIB + "\n\ndef g(x):\n    return x + 1\n")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert [n for n in range(1, 12) if lines("lib/ops.py", n)] == [7, 8, 9, 10]


def test_a_file_new_since_the_commit_is_changed_in_every_line_once_git_tracks_it(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    root, base = repo
    (root / "lib" / "new.py").write_text("x = 1\ny = 2\n")
    assert not changes.ChangedLines(root, base, "since main", root)(
        "lib/new.py", 1
    )  # untracked: unknown
    git(root, "add", "lib/new.py")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert lines("lib/new.py", 1) and lines("lib/new.py", 2)


def test_a_moved_file_is_changed_only_where_it_was_edited(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    root, base = repo
    (root / "lib" / "core").mkdir()
    git(root, "mv", "lib/ops.py", "lib/core/ops.py")
    text = (root / "lib" / "core" / "ops.py").read_text()
    (root / "lib" / "core" / "ops.py").write_text(text.replace("x * 2", "x * 5"))
    git(root, "commit", "-q", "-am", "moved")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert [n for n in range(1, 8) if lines("lib/core/ops.py", n)] == [5]


def test_the_users_git_settings_do_not_widen_the_lines(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    """Hunks merged over unchanged lines (diff.interHunkContext), other prefixes, colours, an
    external diff tool, CRLF endings in the working tree: the lines are still the edited ones."""
    root, base = repo
    for key, value in (
        ("diff.interHunkContext", "5"),
        ("diff.noprefix", "true"),
        ("color.ui", "always"),
        ("diff.external", "/bin/false"),
        ("diff.mnemonicPrefix", "true"),
    ):
        git(root, "config", key, value)
    (root / "lib" / "ops.py").write_text(
        LIB.replace("import torch", "import torch as t").replace("x * 2", "x * 7")
    )
    lines = changes.ChangedLines(root, base, "since main", root)
    assert [n for n in range(1, 8) if lines("lib/ops.py", n)] == [1, 5]
    (root / "lib" / "ops.py").write_bytes(
        LIB.replace("x * 2", "x * 7").replace("\n", "\r\n").encode()
    )
    lines = changes.ChangedLines(root, base, "since main", root)
    assert [n for n in range(1, 8) if lines("lib/ops.py", n)] == [5]


def test_an_added_line_that_reads_like_a_header_is_a_line(repo: tuple[Path, str]) -> None:
    """In a hunk, an added line ``++ b/lib/other.py`` is written ``+++ b/lib/other.py``: still a
    line of this file, not the start of another's."""
    root, base = repo
    (root / "lib" / "ops.py").write_text(LIB + "++ b/lib/other.py\n--- a/x\nz = 1\n")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert [n for n in range(1, 11) if lines("lib/ops.py", n)] == [7, 8, 9]


def test_names_reach_git_as_no_pattern(repo: tuple[Path, str], git: Callable[..., str]) -> None:
    root, base = repo
    for name in ("t1.py", "t[12].py", "dir with space.py"):
        (root / "lib" / name).write_text("a = 1\nb = 2\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "more")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "lib" / "t1.py").write_text("a = 1\nb = 3\n")
    (root / "lib" / "dir with space.py").write_text("a = 0\nb = 2\n")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert not lines("lib/t[12].py", 2) and lines("lib/t1.py", 2)
    assert lines("lib/dir with space.py", 1) and not lines("lib/dir with space.py", 2)


def test_a_site_in_the_installed_project_is_found_in_src(
    tmp_path: Path, git: Callable[..., str]
) -> None:
    """CI installs the project (``pip install .``): its sites are named from their import path
    (``pkg/mod.py``), and in a src layout that file is ``src/pkg/mod.py``."""
    root = tmp_path / "proj"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("a = 1\nb = 2\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "src" / "pkg" / "mod.py").write_text("a = 1\nb = 3\n")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert lines("pkg/mod.py", 2) and not lines("pkg/mod.py", 1)
    # the test's line after "from" is the same for every site: only the inner line tags
    assert (
        sites_text([("pkg/mod.py:1 in f, from tests/test_a.py:2 in t", 1.0)], lines, 1)
        == "pkg/mod.py:1 in f, from tests/test_a.py:2 in t"
    )


def test_what_git_cannot_answer_is_not_changed(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, base = repo
    (root / "lib" / "ops.py").write_text("changed everywhere\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    lines = changes.ChangedLines(root, base, "since main", root)
    assert not lines(str(outside), 1)  # outside the repository
    assert not lines("lib/missing.py", 1)  # no such file
    assert not lines("site unknown", 1)
    # an id that is not a full object id never reaches git (it would be read as an option); a
    # commit git does not have (handed down from another repository) tags nothing
    for commit in ("--output=/tmp/x", "HEAD", base[:12], "0" * 40):
        assert not changes.ChangedLines(root, commit, "since x", root)("lib/ops.py", 1)


def test_a_saved_set_dates_from_its_last_commit_and_not_when_saved_since(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    root, _ = repo
    folder = root / "baselines" / "main"
    folder.mkdir(parents=True)
    (folder / "test_a.json").write_text("{}\n")
    assert changes.for_saved_set(folder, root) is None  # never committed
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "baselines")
    (root / "lib" / "ops.py").write_text(LIB.replace("x * 2", "x * 4"))
    lines = changes.for_saved_set(folder, root)
    assert lines is not None and lines.label == "since baselines/main was committed"
    assert lines("lib/ops.py", 5) and not lines("lib/ops.py", 4)
    (folder / "test_a.json").write_text('{"saved": "again"}\n')
    assert changes.for_saved_set(folder, root) is None  # saved after its last commit


def test_a_shallow_clone_whose_history_starts_after_the_set_tags_nothing(
    repo: tuple[Path, str], git: Callable[..., str], tmp_path: Path
) -> None:
    """``actions/checkout`` clones one commit deep: the set's last commit git finds there is
    where the clone starts, not when the set was committed."""
    root, _ = repo
    (root / "baselines" / "main").mkdir(parents=True)
    (root / "baselines" / "main" / "test_a.json").write_text("{}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "baselines")
    (root / "lib" / "ops.py").write_text(LIB.replace("x * 2", "x * 4"))
    git(root, "commit", "-q", "-am", "edit")
    deep = changes.for_saved_set(root / "baselines" / "main", root)
    assert deep is not None and deep("lib/ops.py", 5)
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", root.as_uri(), str(clone))
    assert changes.for_saved_set(clone / "baselines" / "main", clone) is None


def test_sites_on_changed_lines_come_first_tagged(repo: tuple[Path, str]) -> None:
    root, base = repo
    (root / "lib" / "ops.py").write_text(
        LIB.replace("    y = x * 2\n", "    y = x * 2\n    y = y / 1\n")
    )
    lines = changes.ChangedLines(root, base, "since HEAD~1", root)
    sites = [
        ("lib/ops.py:5 in f", 3.0),
        ("lib/ops.py:7 in f", 2.0),
        ("lib/ops.py:6 in f, from test_a.py:9 in t", 1.0),
        ("site unknown: only torch", 1.0),
    ]
    assert sites_text(sites, lines, 2, counted=True) == (
        "lib/ops.py:6 in f, from test_a.py:9 in t x1 [changed since HEAD~1], "
        "lib/ops.py:5 in f x3, +2 more"
    )
    # without git's answer: as before, the most calls first
    assert (
        sites_text(sites, None, 2, counted=True)
        == "lib/ops.py:5 in f x3, lib/ops.py:7 in f x2, +2 more"
    )


def test_a_line_of_the_base_is_found_where_it_is_now(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    """What the base's per-site counts need: a line of the base's text named by the checkout's
    number. Two commits: two lines inserted at the top (every line moves down by two), then line
    5 edited in place with a line added after it (a removed line: the diff test below)."""
    root, base = repo
    text = "import os\n\n" + LIB
    (root / "lib" / "ops.py").write_text(text)
    git(root, "commit", "-q", "-am", "an import")
    text = text.replace("    y = x * 2\n", "    z = x * 2\n    y = z.clone()\n")
    (root / "lib" / "ops.py").write_text(text)
    lines = changes.ChangedLines(root, base, "since HEAD~2", root)
    # 1-4 moved by two; 5 (y = x * 2) is the edited 7, paired in place; 6 (return) is 9 now
    assert [lines.head_line("lib/ops.py", n) for n in range(1, 7)] == [3, 4, 5, 6, 7, 9]
    assert lines.changed_files() == {str(root.resolve() / "lib" / "ops.py")}
    assert lines.base_text(str(root / "lib" / "ops.py")) == LIB
    # a file that did not change keeps its numbers; one git does not know has no base text
    (root / "other.py").write_text("x = 1\n")
    assert lines.head_line("other.py", 9) == 9
    assert lines.base_text("other.py") is None


def test_a_moved_file_has_the_base_text_of_its_old_name(
    repo: tuple[Path, str], git: Callable[..., str]
) -> None:
    root, base = repo
    git(root, "mv", "lib/ops.py", "lib/kernels.py")
    (root / "lib" / "kernels.py").write_text("# moved\n" + LIB)
    git(root, "commit", "-q", "-am", "moved")
    lines = changes.ChangedLines(root, base, "since HEAD~1", root)
    assert lines.base_text("lib/kernels.py") == LIB
    assert lines.head_line("lib/kernels.py", 4) == 5
    # a file new since the base has no base
    (root / "new.py").write_text("y = 2\n")
    git(root, "add", "new.py")
    assert str(root.resolve() / "new.py") not in lines.changed_files()
    assert changes.ChangedLines(root, base, "x", root).base_text("new.py") is None


def test_blocks_pair_removed_and_added_lines_in_place() -> None:
    """The blocks of a hunk with context (a user's ``diff.context``): context lines end a block."""
    diff = (
        b"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
        b"@@ -2,4 +2,4 @@ def f():\n"
        b"-a\n+A\n+A2\n b\n-c\n-d\n+D\n"
        b"@@ -9,0 +10,2 @@\n+e\n+f\n"
    )
    file = changes.read_diff(diff)["m.py"]
    # an insertion after the old line 9 starts before the old line 10
    assert file.blocks == ((2, 1, 2, 2), (4, 2, 5, 1), (10, 0, 10, 2))
    assert file.added == {2, 3, 5, 10, 11}
    assert [file.new_line(n) for n in (1, 2, 3, 4, 5, 6, 9, 10)] == [1, 2, 4, 5, None, 6, 9, 12]
