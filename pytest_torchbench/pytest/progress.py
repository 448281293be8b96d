"""Progress of the child pytest runs a run waits for (a base measured in the job, alternated
rounds): each child keeps "tests done, tests collected" in a file, and the waiting run prints a
line now and then, in pytest's style, quiet under ``-q``.

Why: a base measured in the job can take as long as the run itself (torchrl's 33 objectives
benchmarks in instructions mode: about 15 minutes), and the terminal said nothing in between but
"measuring it". A file rather than the child's output: the child's output is the user's tests'
(any format, ``-v`` or not), a file of two numbers is ours.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

__all__ = ["PROGRESS_ENV", "ProgressFile", "ProgressLines"]

#: Set in a child run's environment: the file its terminal-owning process keeps "done total" in.
PROGRESS_ENV = "TORCHBENCH_CHILD_PROGRESS"
#: Seconds between progress lines (default 30), for CI logs that want more or fewer.
EVERY_ENV = "TORCHBENCH_PROGRESS_SECONDS"


def _every() -> float:
    try:
        return max(float(os.environ.get(EVERY_ENV, "30")), 0.0)
    except ValueError:
        return 30.0


class ProgressFile:
    """The child's side, a plugin of the process that owns its terminal: after each test's
    teardown, writes "done total" (replacing the file at once, so a reader never sees half)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = 0
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        self.done += 1
        total = getattr(self.session, "testscollected", 0) or 0  # xdist's controller sets it too
        staging = self.path.with_name(self.path.name + ".tmp")
        try:
            staging.write_text(f"{self.done} {total}", encoding="utf-8")
            os.replace(staging, self.path)
        except OSError:
            pass  # progress is a courtesy: a full disk must not fail the child's tests


def _duration(seconds: float) -> str:
    """``42 s``, ``2 min 31 s``: for a person waiting."""
    whole = max(int(round(seconds)), 0)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"


def read_progress(path: Path) -> tuple[int, int] | None:
    """(done, total) from a child's progress file; None while there is none (or it is
    unreadable)."""
    try:
        done, total = (int(part) for part in path.read_text(encoding="utf-8").split())
    except (OSError, ValueError):
        return None
    return done, total


class ProgressLines:
    """The waiting side: :meth:`poll` while children run; a line at most every ``every`` seconds
    (:data:`EVERY_ENV`), the first after as long (a short wait prints nothing), none without
    ``write``."""

    def __init__(self, write: Callable[[str], None] | None, every: float | None = None) -> None:
        self.write = write
        self.every = _every() if every is None else every
        self.started = time.monotonic()
        self.last = self.started
        self.phase = ""
        self.phase_started = self.started

    def poll(self, what: str, children: Sequence[tuple[str, Path]]) -> None:
        """``what``: the phase ("the base HEAD~1 (3f2a9c1e0b7d)", "round 2 of 4"); ``children``:
        (side, progress file) of the children running now."""
        now = time.monotonic()
        if what != self.phase:
            self.phase, self.phase_started = what, now
        if self.write is None or now - self.last < self.every:
            return
        self.last = now
        found = [(side, read_progress(path)) for side, path in children]
        parts = [
            f"{side} {counts[0]}/{counts[1]} tests"
            if counts and counts[1] > 0
            else f"{side} starting"
            for side, counts in found
        ]
        left = self._left([counts for _, counts in found], now - self.phase_started)
        state = (
            ""
            if left is None
            else " (finishing)"
            if left == 0
            else f" (about {_duration(left)} left of it)"
        )
        self.write(
            f"torchbench: {what}: {', '.join(parts)}{state}; {_duration(now - self.started)} so far"
        )

    @staticmethod
    def _left(found: Sequence[tuple[int, int] | None], elapsed: float) -> float | None:
        """What is left of the phase: of its slowest child, at that child's pace so far (None
        before each has finished a test)."""
        worst = None
        for counts in found:
            if counts is None or counts[0] <= 0 or counts[1] <= 0:
                return None
            done, total = counts
            left = elapsed / done * max(total - done, 0)
            worst = left if worst is None else max(worst, left)
        return worst
