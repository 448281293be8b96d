"""How the processes of a measurement that needs its own are launched: the protocol between an
engine that must measure in special processes (Callgrind: under valgrind) and the pytest glue
that starts xdist workers that way (``pytest/workers.py``), which knows neither the engine nor
the metric. No pytest here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar


class LaunchUnavailable(RuntimeError):
    """A metric's worker processes cannot be launched here (a missing tool, an unsupported
    platform): the message says what to install or change."""


class WorkerLaunch:
    """How the processes of a metric that needs its own are launched (``Measuring.worker_launch``).

    The pytest glue (``pytest/workers.py``) knows xdist and nothing of the metric: it asks this
    object for the command that starts a worker's interpreter and for the environment, gives every
    run a folder of its own (named ``folder_prefix`` + ``<uid>-<slot>``, the same on every run), and
    hands each value a worker measured to :meth:`finish` before the controller judges it. No
    pytest here, so a metric module can define one.
    """

    #: The run folder's name starts with this (workers see its path: keep it the same every run).
    folder_prefix: ClassVar[str] = "torchbench-workers-"

    def prepare(self, python: str) -> None:
        """Check the tools and build what the launches need, once per run, in the controller;
        raise :class:`LaunchUnavailable` with one clear line when that cannot be done."""

    def command(
        self, python: str, folder: Path, environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """``(argv, environment)`` of a worker: ``argv`` ends with the interpreter, to which the
        worker's own arguments are appended; ``folder`` is the run's folder."""
        return [python], dict(environ)

    def finish(self, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """A value as a worker sent it (JSON) -> the value to judge; runs in the controller."""
        return data

    def hand_over(
        self, entries: Mapping[str, Any] | None, folder: Path, environ: Mapping[str, str]
    ) -> dict[str, str]:
        """Runs in the controller once, after :meth:`prepare` and before any process of the run
        starts, with the entries of the baseline the run judges against (None when it has none)
        and the run's folder: the environment variables that carry what the workers need of that
        baseline (instructions: the number of calls each benchmark was counted over).

        The glue sets them in its own environment for the rest of the run, so every process the
        run starts inherits them: its workers, the base run of ``--bench-compare=REV`` and
        re-runs, which then count as the head does; it restores the environment at the end."""
        return {}

    def before_test(self, nodeid: str) -> None:
        """Runs in a launched worker before each test, before :meth:`isolate`: what the test's
        measuring needs from outside (instructions: the baseline's number of calls), read where
        what the reading allocates is not the test's."""

    def isolate(self) -> None:
        """Runs in a launched worker before its collection and before each test: make what follows
        independent of what ran before in the process (instructions: a new heap epoch, so a test's
        allocations get the same addresses whatever ran before it)."""

    def collected(self) -> None:
        """Runs in a launched worker once, after its tests are collected and before the first
        runs (instructions: what import and collection left behind is set aside for good)."""

    def describe(self, python: str) -> str:
        """The worker, for messages (``valgrind --tool=callgrind /usr/bin/python``)."""
        return python

    def check_hint(self, python: str) -> str:
        """A command that shows whether a worker can start at all, for the start-up failure line."""
        return f"{python} -c pass"
