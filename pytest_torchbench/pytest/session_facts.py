"""What the controller reads of pytest's session that is not its own state: whether this is a CI
job, a failed or skipped report as one line, the modules a command line narrowed, the verdicts that
compared or judged nothing, every SIGINT received, and the output folder's ``.gitignore``.

Why apart from the controller: these are facts of pytest and of the machine, each a few lines that
the controller, ``torchbench compare`` and the tests ask alike.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..common.text import one_line
from ..common.vocabulary import NOT_COMPARABLE, TOO_NOISY, Verdict


def in_ci() -> bool:
    """Whether this run is a CI job: the ``CI`` variable that GitHub Actions, GitLab CI, CircleCI,
    Travis, Buildkite and most others set, non-empty and not ``false``/``0`` (set by hand to turn
    it off)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "false", "0", "no")


def changes_only(config: pytest.Config) -> bool:
    """Whether the terminal tables show only the benchmarks whose verdict is not "unchanged" (with
    one line of counts for the rest): with ``-q``, and in CI unless ``-v`` asks for everything.
    Why: a CI log of a few hundred benchmarks buried its one regression under pages of unchanged
    rows, and the Markdown and HTML reports keep every row; locally, the full table is the point
    of running the benchmarks (docs/reports.md)."""
    verbosity = int(getattr(config.option, "verbose", 0) or 0)
    return verbosity < 0 or (in_ci() and verbosity <= 0)


def failure_line(report: pytest.TestReport) -> str:
    """A failed report's error as one line (pytest's crash message: ``OSError: [Errno 98] Address
    already in use``), at most 300 characters; escaped where it is shown, not here."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = getattr(crash, "message", None) if crash is not None else None
    if not isinstance(text, str) or not text.strip():
        # No crash entry (a fixture that does not exist, say): pytest's first "E" line holds the
        # error ("E  fixture 'port' not found"); its last line is only the test's path:line.
        raw = str(report.longrepr or "").splitlines()
        lines = [line.strip() for line in raw if line.strip()]
        # unstripped: source lines are indented, so a line of code such as "E = 5" is not taken
        errors = [line[1:].strip() for line in raw if line.startswith("E ") and line[1:].strip()]
        text = errors[0] if errors else lines[-1] if lines else f"failed in {report.when}"
    return one_line(text)


def skip_reason(report: pytest.TestReport) -> str:
    """A skipped report's reason as one line (``Skipped: port 8080 in use``; an xfail's
    ``expected to fail: <reason>``)."""
    xfail = getattr(report, "wasxfail", None)
    if xfail is not None:
        return one_line(f"expected to fail: {xfail}" if xfail else "expected to fail")
    longrepr = report.longrepr
    text = (
        longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    )
    return one_line(str(text) or "skipped")


def uncompared(verdicts: list[Verdict]) -> list[Verdict]:
    """Verdicts that compared nothing and did not fail: a baseline from another environment, with
    nothing measured in its place (``--bench-strict`` fails them on their own tests already)."""
    return [v for v in verdicts if v.status == NOT_COMPARABLE and not v.failed]


def unjudged(verdicts: list[Verdict]) -> list[Verdict]:
    """Verdicts the gate could not decide: measured alternately with the base, but the rounds
    decide nothing at the limit (too noisy to judge at it)."""
    return [v for v in verdicts if v.status == TOO_NOISY and not v.failed]


def narrowed_modules(args: Sequence[str], invocation_dir: Path, rootpath: Path) -> set[str]:
    """The test modules (paths relative to ``rootpath``, as results name them) that the command
    line narrowed to some of their nodes (``tests/test_a.py::test_x``) and did not also name whole
    (the file itself, or a folder above it): only there can a test be absent without being gone.

    Why from the arguments: pytest collects only the nodes named, so the collected ids cannot tell
    a test left out of the run from a test removed from its file."""
    whole: list[Path] = []
    narrowed: list[Path] = []
    for arg in args:
        written, has_node, _ = str(arg).partition("::")
        absolute = Path(os.path.abspath(invocation_dir / written))
        (narrowed if has_node else whole).append(absolute)
    modules = set()
    for module in narrowed:
        if any(module == named or named in module.parents for named in whole):
            continue
        try:
            modules.add(module.relative_to(rootpath).as_posix())
        except ValueError:
            modules.add(module.as_posix())
    return modules


#: Written into the output folder the first time a run leaves it behind, as pytest does for
#: ``.pytest_cache``: measured bases, traces and plans are this machine's, never the project's.
OUTPUT_GITIGNORE = (
    "# Created by pytest-torchbench: caches and traces of this machine, not for git.\n*\n"
)


def ignore_in_git(folder: Path | None) -> None:
    """Put a ``.gitignore`` that ignores everything into ``folder`` when it exists and has none."""
    if folder is None or not folder.is_dir() or (folder / ".gitignore").exists():
        return
    try:
        (folder / ".gitignore").write_text(OUTPUT_GITIGNORE, encoding="utf-8")
    except OSError:
        pass  # a read-only folder keeps what it has; nothing else depends on it


class InterruptWatch:
    """Notes every SIGINT the process receives, whatever becomes of the KeyboardInterrupt it raises.

    Why: pytest marks a run interrupted (``pytest_keyboard_interrupt``, exit status 2) while it
    handles the KeyboardInterrupt. A second Ctrl-C (or ``timeout``'s SIGINT and then the user's)
    that arrives during that handling escapes it, and pytest then finishes the session with exit
    status 0 as if nothing happened: the partial results of a run the user stopped would be saved
    as baselines. The signal itself is the one sure sign. The previous handler still runs (it
    raises the KeyboardInterrupt); an ignored or default SIGINT is left alone.

    A SIGINT within :data:`REPEAT_WINDOW` seconds of the first is the same request to stop (a
    key pressed twice, ``timeout``'s then the user's): noted, not raised again. Raised while
    pytest formats the first one, it escaped as some 150 lines of raw traceback and a run killed
    by the signal; pressed later, when stopping seems to hang, it interrupts as usual.
    """

    REPEAT_WINDOW = 3.0

    def __init__(self) -> None:
        self.received = False
        self._first: float | None = None
        self._previous: Callable[[int, Any], Any] | None = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.received = True
        now = time.monotonic()
        if self._first is not None and now - self._first < self.REPEAT_WINDOW:
            return
        self._first = now
        if self._previous is not None:
            self._previous(signum, frame)

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python's rule: handlers are set from the main thread only
        previous = signal.getsignal(signal.SIGINT)
        if callable(previous):
            self._previous = previous
            signal.signal(signal.SIGINT, self._handler)

    def uninstall(self) -> None:
        if self._previous is not None and signal.getsignal(signal.SIGINT) == self._handler:
            signal.signal(signal.SIGINT, self._previous)
        self._previous = None
