"""Which lines of the checkout changed since the baseline's revision, read from git: the lines a
failed verdict's call sites are tagged with (``metrics.base.sites_text``).

Why: an op, a kernel or a Python function whose count changed is usually called from several
lines, and a baseline keeps counts, not call sites (a site's line number moves with every edit
above it, and sites would make the committed files several times larger). The failure lists the
lines that call it now; the one a reviewer wants is the one the change touched. git knows it:
``git diff -U0 <commit>`` against the working tree gives the new side's line numbers of every
edited hunk, uncommitted edits included (they are what ran). A file that did not exist at the
commit is new in all its lines when git tracks it now; one git does not know (never added) is
not changed in any: tagging all its lines would single none out.

Since when: ``--bench-compare=REV`` (or ``REV:SET``) gives REV's commit; a saved set name gives
the last commit of that set's folder, when the folder has no uncommitted change (a set saved
since its last commit came from code git cannot name, and nothing is tagged then).

Never raises and never blocks a verdict: no git, a path outside the repository, a failing or slow
git all mean "not changed", and the failure shows its sites untagged as before.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .refs import exists_at, git_toplevel

__all__ = ["ChangedLines", "for_revision", "for_saved_set"]

#: A hunk header of ``git diff -U0``: the new side starts at line c and spans d lines (1 if absent).
_HUNK = re.compile(rb"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", re.MULTILINE)

#: A full object id (SHA-1 or SHA-256).
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

#: git's answer time, at most: a tag is not worth a stalled session.
_GIT_SECONDS = 30.0


class _Everything(frozenset[int]):
    """Every line: a file new since the commit."""

    def __contains__(self, item: object) -> bool:
        return True


class ChangedLines:
    """The lines of files under ``toplevel`` that differ from ``commit`` in the working tree;
    ``label`` says since when ("since HEAD~1"). Paths may be absolute or relative to ``root``
    (the rootdir, as call sites show them). Each file is asked of git once."""

    def __init__(self, toplevel: Path, commit: str, label: str, root: Path) -> None:
        self.toplevel = toplevel.resolve()
        self.commit = commit
        self.label = label
        self.root = root
        self._files: dict[str, frozenset[int]] = {}

    def __call__(self, path: str, line: int) -> bool:
        relative = self._relative(path)
        if relative is None:
            return False
        if relative not in self._files:
            self._files[relative] = self._changed(relative)
        return line in self._files[relative]

    def _relative(self, path: str) -> str | None:
        try:
            absolute = (self.root / path).resolve()  # an absolute path stays itself
            relative = absolute.relative_to(self.toplevel).as_posix()
        except (OSError, ValueError, RuntimeError):
            return None
        if relative.startswith("-") or "\0" in relative or not absolute.is_file():
            return None
        return relative

    def _changed(self, relative: str) -> frozenset[int]:
        if not _COMMIT.fullmatch(self.commit):
            return frozenset()  # only an object id reaches git (one handed down by environment too)
        try:
            if not exists_at(self.commit, relative, self.toplevel):
                # new since the commit when git tracks it now; a file git does not know (never
                # added) says nothing: tagging all its lines would single none out
                tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "--", relative], cwd=self.toplevel,
                                         capture_output=True, stdin=subprocess.DEVNULL, timeout=_GIT_SECONDS,
                                         check=False).returncode == 0
                return _Everything() if tracked else frozenset()
            done = subprocess.run(
                ["git", "diff", "--no-color", "--no-ext-diff", "--no-renames", "--no-textconv", "-U0",
                 self.commit, "--", relative],
                cwd=self.toplevel, capture_output=True, stdin=subprocess.DEVNULL, timeout=_GIT_SECONDS,
                check=False)
        except (OSError, subprocess.SubprocessError):
            return frozenset()
        if done.returncode != 0:
            return frozenset()
        lines: set[int] = set()
        for match in _HUNK.finditer(done.stdout):
            start, count = int(match[1]), int(match[2]) if match[2] is not None else 1
            lines.update(range(start, start + count))
        return frozenset(lines)


def for_revision(toplevel: Path, commit: str, revision: str, root: Path) -> ChangedLines:
    """The lines changed since ``--bench-compare``'s revision (as the user typed it)."""
    return ChangedLines(toplevel, commit, f"since {revision}", root)


def for_saved_set(folder: Path, root: Path) -> ChangedLines | None:
    """The lines changed since the last commit of a saved set's folder, or None when it is not in
    git, never committed, or changed since (then no commit names the code it came from)."""
    toplevel = git_toplevel(folder)
    if toplevel is None:
        return None
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", "."],
                                cwd=folder, capture_output=True, stdin=subprocess.DEVNULL,
                                timeout=_GIT_SECONDS, check=False)
        last = subprocess.run(["git", "log", "-1", "--format=%H", "--", "."], cwd=folder,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=_GIT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = last.stdout.decode("ascii", "replace").strip()
    if status.returncode != 0 or status.stdout.strip() or last.returncode != 0 or not commit:
        return None
    try:
        shown = folder.resolve().relative_to(Path(toplevel).resolve()).as_posix()
    except ValueError:
        shown = folder.name
    return ChangedLines(Path(toplevel), commit, f"since {shown} was committed", root)
