"""A child session of an alternated round that measures in turns with its partner
(``engines/duet.py``): it finds its end of the pair, takes the first turn before its first test
and gives the pair up when its tests are done.

Why here and not in the engine: only pytest knows when a session starts and ends its tests, and
which process is the one that measures (an xdist controller or a process whose tests run in
launched workers holds the turn for its whole test loop, so the pair is measured one after the
other, as without turns).
"""
from __future__ import annotations

import os
from typing import Generator

import pytest

from ..engines import duet

#: Set by ``pytest/base.py`` in the environment of each child of a round: ``FD,PID,CPU,FIRST``
#: (``duet.describe``). Read once and removed, so that no process this one starts can take it.
PAIR_ENV = "TORCHBENCH_PAIR"
#: ``TORCHBENCH_ROUNDS=sequential`` measures each round's base and head one after the other, as
#: before turns (kept for comparing the two, benchmarks/figures_time_paired.py).
ROUNDS_ENV = "TORCHBENCH_ROUNDS"


def turns_wanted() -> bool:
    """Whether rounds are measured in turns (the default) rather than one side after the other."""
    return os.environ.get(ROUNDS_ENV, "").strip().lower() != "sequential"


class PairPlugin:
    """Holds the turn around the test loop; the engine hands it over inside measurements."""

    def __init__(self, baton: duet.Baton) -> None:
        self.baton = baton

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, None, object]:
        self.baton.start()
        try:
            return (yield)
        finally:
            self.finish()

    def pytest_unconfigure(self) -> None:
        self.finish()

    def finish(self) -> None:
        self.baton.finish()
        if duet.current is self.baton:
            duet.current = None


def join_pair(config: pytest.Config) -> None:
    """In a child of an alternated round (``PAIR_ENV`` set for this very process): register the
    pair. Anywhere else, and in an xdist worker, nothing (the variable is removed either way)."""
    description = os.environ.pop(PAIR_ENV, None)
    if description is None or hasattr(config, "workerinput"):
        return
    baton = duet.connect(description, os.getppid())
    if baton is None:
        return
    duet.current = baton
    config.pluginmanager.register(PairPlugin(baton), "torchbench-pair")
