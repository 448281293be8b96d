"""A child session of an alternated round that measures in turns with its partner
(``engines/duet.py``): it finds its end of the pair, takes the first turn before its first test
and gives the pair up when its session ends.

Why here and not in the engine: only pytest knows when a session starts and ends its tests, and
which process is the one that measures (an xdist controller or a process whose tests run in
launched workers holds the turn for its whole test loop, so the pair is measured one after the
other, as without turns).
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from ..common.text import safe_text
from ..engines import duet
from .workers import runs_tests_in_workers

#: Set by ``pytest/base.py`` in the environment of each child of a round: ``FD,PID,CPU,FIRST``
#: (``duet.describe``). Read once and removed, so that no process this one starts can take it.
PAIR_ENV = "TORCHBENCH_PAIR"
#: ``TORCHBENCH_ROUNDS=sequential`` measures each round's base and head one after the other, as
#: before turns (kept for comparing the two, benchmarks/figures_time_paired.py).
ROUNDS_ENV = "TORCHBENCH_ROUNDS"
#: Set by ``pytest/base.py`` in each child of an alternated round, turns or not: the share of its
#: usual measuring time a time measurement takes there (``MeasureContext.share``).
SHARE_ENV = "TORCHBENCH_ROUND_SHARE"
#: Why half: each benchmark is measured in at least 2 rounds x 2 sides, and a round's pair shares
#: the machine's moments, so its ratio needs fewer blocks than a lone measurement's figure; at
#: half, an unchanged suite's paired ratios stayed within a few percent (docs/design/time-gate.md,
#: "At once").
ROUND_SHARE = 0.5


def measuring_share() -> float:
    """This process's share of the usual measuring time: ``SHARE_ENV``'s in a child of a round
    (a value that is no number in (0, 1] counts as 1), 1 anywhere else."""
    try:
        share = float(os.environ.get(SHARE_ENV, "1"))
    except ValueError:
        return 1.0
    return share if 0.0 < share <= 1.0 else 1.0


#: ``TORCHBENCH_PAIRS=N``: at most N rounds' pairs measure at once, each on its own CPU (default:
#: one per CPU this process may run on; 1 where CUDA is available, as the pairs would share the
#: GPU).
PAIRS_ENV = "TORCHBENCH_PAIRS"


def pairs_at_once() -> int:
    """How many rounds' pairs measure at once: one per CPU (``duet.pair_cpus``), at most
    ``PAIRS_ENV``'s, 1 where CUDA is available. ValueError, with one line, for a value of
    ``PAIRS_ENV`` that is no positive whole number.

    Why: a pair in turns measures on one CPU, and everything else it does waits for its turn too,
    so a second CPU stood idle; two pairs at once took little more than one pair's time for twice
    the rounds, and an unchanged suite stayed green (docs/design/time-gate.md, "Pairs at once")."""
    value = os.environ.get(PAIRS_ENV, "").strip()
    cap = None
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(
                f"{PAIRS_ENV}={safe_text(value)!r} is not a positive whole number; unset it "
                "(one pair per CPU) or set 1 for one pair at a time"
            )
        cap = int(value)
    if _cuda_available():
        return 1
    count = max(len(duet.pair_cpus()), 1)
    return min(count, _cpu_quota() or count, cap or count)


def _cpu_quota(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """The whole CPUs this process's cgroup (v2) may use, at least 1; None without a quota.
    Why: in a container limited to fewer CPUs than it sees, pinned pairs past the quota are
    throttled in periods longer than a turn, which one side of a pair takes alone."""
    try:
        with open(path, encoding="ascii") as file:
            quota, _, period = file.read().strip().partition(" ")
        return max(int(int(quota) / int(period)), 1)
    except (OSError, ValueError, ZeroDivisionError):
        return None  # "max" (no quota), no cgroup v2, or unreadable


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # a broken CUDA set-up: one pair at a time, as before
        return True


def turns_wanted() -> bool:
    """Whether rounds are measured in turns (the default) rather than one side after the other:
    not where the OS cannot pin a thread to a CPU (unpinned turns pair nothing: engines/duet.py).
    ValueError, with one line, for a value of ``TORCHBENCH_ROUNDS`` that is neither."""
    value = os.environ.get(ROUNDS_ENV, "").strip().lower()
    if value not in ("", "turns", "sequential"):
        raise ValueError(
            f"{ROUNDS_ENV}={safe_text(value)!r} is neither 'turns' (the default) nor 'sequential'; "
            "unset it or set one of those"
        )
    return value != "sequential" and hasattr(os, "sched_setaffinity")


class PairPlugin:
    """Holds the turn around the test loop (the engine hands it over inside measurements), keys
    each test's measurements by its node id, and gives the pair up when the session ends."""

    def __init__(self, baton: duet.Baton) -> None:
        self.baton = baton

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, None, object]:
        self.baton.tests = {item.nodeid for item in session.items}
        self.baton.start()
        if runs_tests_in_workers(session.config):
            # the tests run in xdist or launched workers, which measure alone: this side keeps the
            # turn for its whole loop, and the other waits for it (one after the other)
            self.baton.hold_long()
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, object]:
        self.baton.begin_test(item.nodeid)
        return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        """After the results are saved: the other process measures alone from here on, and
        nothing of this session runs beside it but the interpreter's exit."""
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
