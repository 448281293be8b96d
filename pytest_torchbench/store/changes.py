"""Which lines of the checkout changed since the baseline's revision, read from git: the lines a
failed verdict's call sites are tagged with (``metrics.explaining.sites_text``).

Why: an op, a kernel or a Python function whose count changed is usually called from several
lines, and a baseline keeps counts, not call sites (a site's line number moves with every edit
above it, and sites would make the committed files several times larger). The failure lists the
lines that call it now; the one a reviewer wants is the one the change touched. git knows it:
one ``git diff -U0 -M <commit>`` of the whole tree against the working tree gives every added
line's number on the new side, uncommitted edits included (they are what ran). A file added since
the commit and tracked now counts in every line; a moved file only in the lines that changed
(renames are followed); a file git does not know (never added) in none, since tagging all its
lines would single none out. Lines are read from the hunks' ``+`` lines, not their headers (a
user's ``diff.interHunkContext`` widens headers over unchanged lines), ignoring a carriage return
at the end of a line.

The same diff says where each line of the commit's text is now (its blocks of removed and added
lines), and ``git cat-file`` gives that text: what the base's counts per call site need (an
edited line is not always the one whose calls changed: ``metrics.ops``, ``engines.base_code``).

Since when: ``--bench-compare=REV`` (or ``REV:SET``) gives REV's commit; a saved set name gives
the last commit of that set's folder, when the folder has no uncommitted change (a set saved
since its last commit came from code git cannot name) and the clone is deep enough to know it (a
shallow clone's oldest commit stands for all the history it lacks).

Never raises and never blocks a verdict: no git, a commit git does not have, a path outside the
repository, a failing git all mean "not changed", and the failure shows its sites untagged as
before. git is asked once per run, with prompts and lazy fetches off and 30 s at most.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

from .refs import git_toplevel

__all__ = ["ChangedLines", "FileDiff", "for_revision", "for_saved_set", "read_diff"]

#: A hunk header of ``git diff``: where each side starts, and how many lines (1 when not given).
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

#: A full object id (SHA-1 or SHA-256).
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

#: git's answer time, at most, for all it is asked in a run: a tag is not worth a stalled session.
_GIT_SECONDS = 30.0

#: git never waits for a person (a credential prompt on the terminal) nor fetches a missing object
#: of a partial clone from its remote; what it cannot answer at once it answers with an error.
_QUIET_GIT = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_PAGER": "cat",
    "GIT_EXTERNAL_DIFF": "",
}


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes] | None:
    """git's answer, or None when it could not give one in time."""
    env = {**os.environ, **_QUIET_GIT}
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=_GIT_SECONDS,
            check=False,
            env=env,
        )
    except (OSError, subprocess.SubprocessError):
        return None


@dataclasses.dataclass(frozen=True)
class FileDiff:
    """One file of a diff: its path on the old side (None when new), its added lines (new side's
    numbers), and its blocks of consecutive removed and added lines, each ``(first old line,
    removed, first new line, added)``, the first numbers being where the block starts on each side
    (an insertion's old line is the one it comes before)."""

    old: str | None
    added: frozenset[int]
    blocks: tuple[tuple[int, int, int, int], ...]

    def new_line(self, line: int) -> int | None:
        """The new side's number of the old side's ``line``, or None when it was removed. A line
        edited in place is paired with the new line at its place in its block (the n-th removed
        with the n-th added), as a reader pairs them: ``return f(x)`` made ``y = f(x)``."""
        shift = 0
        for old_first, removed, new_first, added in self.blocks:
            if line < old_first:
                break
            if line < old_first + removed:
                place = line - old_first
                return new_first + place if place < added else None
            shift = new_first + added - (old_first + removed)
        return line + shift


def _file_name(raw: bytes, prefix: bytes) -> str | None:
    """A ``--- a/x`` or ``+++ b/x`` line's path, or None (``/dev/null``, a name git quoted, not
    UTF-8)."""
    name = raw[4:].rstrip(b"\r")
    name = name[:-1] if name.endswith(b"\t") else name  # git ends a name holding a space with a tab
    if not name.startswith(prefix):
        return None
    try:
        return name[len(prefix) :].decode("utf-8")
    except UnicodeDecodeError:
        return None


class _FileReader:
    """Reads one file's hunks of a ``git diff``, line by line, into a :class:`FileDiff`."""

    def __init__(self, old: str | None) -> None:
        self.old = old
        self.added: set[int] = set()
        self.blocks: list[tuple[int, int, int, int]] = []
        self.old_next = self.new_next = 0
        self.block: list[int] | None = None  # [old first, removed, new first, added]

    def hunk(self, header: bytes) -> None:
        self.close()
        match = _HUNK.match(header)
        if match is None:
            self.old_next = self.new_next = 0
            return
        old, new = int(match[1]), int(match[3])
        # git numbers an empty side by the line before it
        self.old_next = old + 1 if match[2] == b"0" else old
        self.new_next = new + 1 if match[4] == b"0" else new

    def line(self, raw: bytes) -> None:
        if not self.new_next or raw[:1] not in (b"+", b"-", b" "):
            return
        if raw.startswith(b" "):
            self.close()
            self.old_next += 1
            self.new_next += 1
            return
        if self.block is None:
            self.block = [self.old_next, 0, self.new_next, 0]
        if raw.startswith(b"+"):
            self.added.add(self.new_next)
            self.block[3] += 1
            self.new_next += 1
        else:
            self.block[1] += 1
            self.old_next += 1

    def close(self) -> None:
        if self.block is not None:
            old_first, removed, new_first, added = self.block
            self.blocks.append((old_first, removed, new_first, added))
            self.block = None

    def result(self) -> FileDiff:
        self.close()
        return FileDiff(self.old, frozenset(self.added), tuple(self.blocks))


def read_diff(diff: bytes) -> dict[str, FileDiff]:
    """Each file of a ``git diff`` written with ``a/`` and ``b/`` as its prefixes, by its path on
    the new side (relative to the top folder). A path git had to quote (tabs, quotes, control
    characters in the name) is skipped: no call site names such a file."""
    found: dict[str, FileDiff] = {}
    name: str | None = None
    reader: _FileReader | None = None
    old: str | None = None
    header = (
        False  # between "diff --git" and the file's first hunk: an added line "++ x" reads "+++ x"
    )
    for raw in diff.split(b"\n"):
        if header and raw.startswith(b"--- "):
            old = _file_name(raw, b"a/")
        elif header and raw.startswith(b"+++ "):
            name = _file_name(raw, b"b/")
            reader = _FileReader(old) if name is not None else None
        elif raw.startswith(b"@@"):
            header = False
            if reader is not None:
                reader.hunk(raw)
        elif raw.startswith(b"diff --git "):
            if reader is not None and name is not None:
                found[name] = reader.result()
            header, reader, name, old = True, None, None, None
        elif reader is not None:
            reader.line(raw)
    if reader is not None and name is not None:
        found[name] = reader.result()
    return found


def added_lines(diff: bytes) -> dict[str, frozenset[int]]:
    """The new side's added lines of each file of a ``git diff -U0`` (:func:`read_diff`)."""
    return {path: file.added for path, file in read_diff(diff).items()}


class ChangedLines:
    """The lines of files under ``toplevel`` that differ from ``commit`` in the working tree;
    ``label`` says since when ("since HEAD~1"). Paths may be absolute or relative to ``root``
    (the rootdir, as call sites show them), or to its ``src/`` (a site inside the project as
    installed is named from its import path). git is asked at the first question.

    It also answers what the base's per-site counts need (``metrics.ops.LineHistory``): which
    files changed, their text at ``commit``, and where a line of that text is now."""

    def __init__(self, toplevel: Path, commit: str, label: str, root: Path) -> None:
        self.toplevel = toplevel.resolve()
        self.commit = commit
        self.label = label
        self.root = root
        self._files: dict[str, FileDiff] | None = None

    def __call__(self, path: str, line: int) -> bool:
        file = self._file(path)
        return file is not None and line in file.added

    def changed_files(self) -> frozenset[str]:
        """The absolute paths of the files that changed and were there at ``commit`` too."""
        return frozenset(
            str(self.toplevel / name) for name, file in self._diff().items() if file.old is not None
        )

    def base_text(self, path: str) -> str | None:
        """The text ``path`` (absolute, or as :meth:`__call__` takes it) had at ``commit``; None
        when it was not there, is not UTF-8, or git cannot say."""
        file = self._file(path)
        if file is None or file.old is None:
            return None
        done = _git(["cat-file", "blob", f"{self.commit}:{file.old}"], self.toplevel)
        if done is None or done.returncode != 0:
            return None
        try:
            return done.stdout.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def head_line(self, path: str, line: int) -> int | None:
        """Which line of ``path`` in the working tree ``line`` of its text at ``commit`` is now
        (:meth:`FileDiff.new_line`); None when it was removed. A file that did not change keeps
        its numbers."""
        file = self._file(path)
        return line if file is None else file.new_line(line)

    def _file(self, path: str) -> FileDiff | None:
        relative = self._relative(path)
        return None if relative is None else self._diff().get(relative)

    def _diff(self) -> dict[str, FileDiff]:
        if self._files is None:
            self._files = self._ask_git()
        return self._files

    def _relative(self, path: str) -> str | None:
        for candidate in (
            Path(self.root) / path,
            Path(self.root) / "src" / path,
        ):  # absolute stays itself
            try:
                if candidate.is_file():
                    return candidate.resolve().relative_to(self.toplevel).as_posix()
            except (OSError, ValueError, RuntimeError):
                continue
        return None

    def _ask_git(self) -> dict[str, FileDiff]:
        if not _COMMIT.fullmatch(self.commit):
            return {}  # only an object id reaches git (one handed down by environment too)
        done = _git(
            [
                "-c",
                "core.quotePath=false",
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "-U0",
                "--inter-hunk-context=0",
                "--find-renames",
                "--ignore-cr-at-eol",
                "--src-prefix=a/",
                "--dst-prefix=b/",
                self.commit,
            ],
            self.toplevel,
        )
        if done is None or done.returncode != 0:
            return {}
        return read_diff(done.stdout)


def for_revision(toplevel: Path, commit: str, revision: str, root: Path) -> ChangedLines:
    """The lines changed since ``--bench-compare``'s revision (as the user typed it)."""
    return ChangedLines(toplevel, commit, f"since {revision}", root)


def for_saved_set(folder: Path, root: Path) -> ChangedLines | None:
    """The lines changed since the last commit of a saved set's folder, or None when it is not in
    git, never committed, changed since (then no commit names the code it came from), or when
    that commit is where a shallow clone's history starts (the set may be older)."""
    toplevel = git_toplevel(folder)
    if toplevel is None:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=all", "--", "."], folder)
    last = _git(["log", "-1", "--format=%H", "--", "."], folder)
    if (
        status is None
        or last is None
        or status.returncode != 0
        or status.stdout.strip()
        or last.returncode != 0
    ):
        return None
    commit = last.stdout.decode("ascii", "replace").strip()
    if not _COMMIT.fullmatch(commit) or commit in _shallow_boundary(folder):
        return None
    try:
        shown = folder.resolve().relative_to(Path(toplevel).resolve()).as_posix()
    except ValueError:
        shown = folder.name
    return ChangedLines(Path(toplevel), commit, f"since {shown} was committed", root)


def _shallow_boundary(folder: Path) -> set[str]:
    """The commits a shallow clone's history starts at (none for a full clone)."""
    done = _git(["rev-parse", "--git-path", "shallow"], folder)
    if done is None or done.returncode != 0:
        return set()
    path = Path(done.stdout.decode("utf-8", "replace").strip())
    try:
        return set((path if path.is_absolute() else folder / path).read_text("ascii").split())
    except (OSError, ValueError):
        return set()


def trailers_since(toplevel: Path, commit: str, key: str) -> list[tuple[str, str, str]]:
    """``(commit, subject, value)`` of each ``key:`` trailer (``Bench-Accept``) in the commits
    after ``commit`` up to HEAD (those of the change: ``commit..HEAD``), oldest first; none when
    git cannot answer. Values are unfolded to one line; text is decoded leniently."""
    if not _COMMIT.fullmatch(commit) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", key):
        return []
    fmt = f"--format=%H%x1f%s%x1f%(trailers:key={key},valueonly,unfold,separator=%x1e)"
    done = _git(["log", "--reverse", "--no-color", "-z", fmt, f"{commit}..HEAD"], toplevel)
    if done is None or done.returncode != 0:
        return []
    found: list[tuple[str, str, str]] = []
    for record in done.stdout.decode("utf-8", "replace").split("\0"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) != 3:
            continue
        sha, subject, values = fields
        found.extend(
            (sha, subject, value.strip()) for value in values.split("\x1e") if value.strip()
        )
    return found
