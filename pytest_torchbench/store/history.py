"""A baseline set's history, read from git: every commit that changed the set's folder, oldest
first, and the set as that commit saved it. No server: the series is the project's own history,
kept by a record job that commits the set (docs/ci.md, "Keeping the history").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..judging.history import Commit
from ..judging.results import BenchmarkResult
from .refs import _git, _git_commit, git_toplevel, load_set_from_git
from .storage import BaselineError

__all__ = ["HistoryError", "commits_of", "snapshots"]


class HistoryError(BaselineError):
    """The history cannot be read at all (not in git, an unknown revision): one line, exit 4."""


def commits_of(
    baselines_dir: Path, set_name: str, since: str | None = None
) -> tuple[Path, list[Commit]]:
    """(the repository's top folder, the commits that changed ``baselines_dir/set_name``, oldest
    first; with ``since``, only those after it: ``since..HEAD``)."""
    toplevel = git_toplevel(baselines_dir if baselines_dir.is_dir() else Path.cwd())
    if toplevel is None:
        raise HistoryError(
            f"history: {baselines_dir} is not in a git repository: the history is read from git"
        )
    try:
        relative = (baselines_dir / set_name).resolve().relative_to(toplevel.resolve()).as_posix()
    except ValueError:
        raise HistoryError(
            f"history: the baselines folder {baselines_dir} is outside the repository {toplevel}"
        ) from None
    span = ["HEAD"]
    if since is not None:
        start = _git_commit(since, toplevel)
        if start is None:
            raise HistoryError(f"history: --since={since}: unknown git revision in {toplevel}")
        span = [f"{start}..HEAD"]
    done = _git(
        ["log", "--reverse", "-z", "--format=%H%x1f%ct%x1f%s", *span, "--", relative], toplevel
    )
    if done.returncode != 0:
        raise HistoryError(f"history: git log failed in {toplevel}: {done.stderr.strip()[:200]}")
    commits = []
    for record in done.stdout.split("\0"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) == 3 and fields[1].isdigit():
            commits.append(Commit(fields[0], int(fields[1]), fields[2]))
    return toplevel, commits


def snapshots(
    baselines_dir: Path, set_name: str, toplevel: Path, commits: list[Commit]
) -> Iterator[tuple[Commit, dict[str, BenchmarkResult] | None, str | None]]:
    """(commit, the set as it saved it, None) per commit; (commit, None, why) where it holds none
    (the set deleted) or cannot be read there (one line: the series skips that commit)."""
    for commit in commits:
        try:
            found = load_set_from_git(
                commit.sha, set_name, baselines_dir, toplevel, option="history"
            )
        except BaselineError as exc:
            yield commit, None, str(exc)
            continue
        yield (
            commit,
            (found.entries if found is not None else None),
            None if found is not None else "no such commit",
        )
