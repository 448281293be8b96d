"""Two processes measuring in turns (engines/duet.py): the protocol over a real socket pair (two
threads stand for the two processes: each blocks in a real read while the other holds the turn),
what a child accepts as its end of a pair, and two real processes timing with walltime.measure."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_torchbench.engines import duet


def _play(baton: duet.Baton, side: str, benchmarks: list[tuple[str, int]], log: list[tuple[str, str]]) -> None:
    """A session: the first turn, then per benchmark ``slices`` slices (each logged), then done."""
    baton.start()
    for key, slices in benchmarks:
        baton.measuring()
        for _ in range(slices):
            log.append((side, key))
            baton.boundary()
        baton.finished_measurement()
    baton.finish()


def _pair(monkeypatch: pytest.MonkeyPatch, base: list[tuple[str, int]], head: list[tuple[str, int]]
          ) -> list[tuple[str, str]]:
    monkeypatch.setattr(duet, "SLICE_SECONDS", 0.0)  # every boundary ends a slice
    left, right = socket.socketpair()
    log: list[tuple[str, str]] = []
    threads = [threading.Thread(target=_play, args=(duet.Baton(left, holds=True), "base", base, log)),
               threading.Thread(target=_play, args=(duet.Baton(right, holds=False), "head", head, log))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), log
    return log


def test_the_two_sides_take_turns_and_stay_on_the_same_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices alternate; the side that finishes a benchmark first waits until the other has
    finished it too, so neither runs ahead to the next benchmark."""
    log = _pair(monkeypatch, [("a", 3), ("b", 2)], [("a", 5), ("b", 2)])
    assert log == [
        ("base", "a"), ("head", "a"), ("base", "a"), ("head", "a"), ("base", "a"),
        ("head", "a"), ("head", "a"), ("head", "a"),  # the base finished a: the head finishes it alone
        ("head", "b"), ("base", "b"), ("head", "b"), ("base", "b"),  # the last to finish a starts b
    ]


def test_a_side_that_ends_its_session_leaves_the_other_to_measure_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """One side has fewer benchmarks (a test that REV lacks): when it is done, the other goes on
    without waiting."""
    log = _pair(monkeypatch, [("a", 2)], [("a", 2), ("new", 3)])
    assert log[-3:] == [("head", "new")] * 3
    assert log[:4] == [("base", "a"), ("head", "a"), ("base", "a"), ("head", "a")]


def test_a_peer_that_exits_or_sticks_frees_the_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """End of file (the peer exited or crashed) or a wait past the limit: alone from then on."""
    left, right = socket.socketpair()
    waiter = duet.Baton(right, holds=False)
    left.close()
    waiter.start()
    assert waiter.alone and waiter.holds
    monkeypatch.setattr(duet, "WAIT_LIMIT_SECONDS", 0.2)
    left, right = socket.socketpair()
    stuck = duet.Baton(right, holds=False)
    started = time.perf_counter()
    stuck.start()  # the peer never hands the turn over
    assert stuck.alone and 0.15 < time.perf_counter() - started < 5
    assert stuck.boundary() == 0.0
    left.close()
    stuck.finish()


def test_a_child_takes_only_a_pair_meant_for_it(tmp_path: Path) -> None:
    """The description names the parent: a grandchild that inherited it is refused; a file
    descriptor that is no socket is refused; a good one gives the turn and the CPU it names."""
    left, right = socket.socketpair()
    try:
        description = duet.describe(right.fileno(), os.getpid() + 1, 1, True)
        assert duet.connect(description, os.getpid()) is None  # meant for another parent's child
        with open(tmp_path / "file", "w") as file:
            assert duet.connect(duet.describe(file.fileno(), 7, None, True), 7) is None
        assert duet.connect("garbage", 7) is None
        baton = duet.connect(duet.describe(os.dup(right.fileno()), 7, 1, False), 7)
        assert baton is not None and not baton.holds and baton.cpu == 1
        baton.finish()
    finally:
        left.close()
        right.close()


CHILD = """
import os, sys, time
from pytest_torchbench.engines import duet, walltime
from pytest_torchbench.metrics.time import TimeMetric

duet.current = duet.connect(sys.argv[1], os.getppid())
assert duet.current is not None
duet.current.start()
started = time.perf_counter()
m = TimeMetric.from_measurement(walltime.measure(lambda: sum(range(300)), walltime.TimeSpec(min_run_time=0.2)))
duet.current.finish()
print(m.turns, m.cpu_share, duet.current.waited, duet.current.handovers, os.sched_getaffinity(0))
"""


def test_two_processes_measure_in_turns_on_one_cpu() -> None:
    """Real processes, real measurements: each hands over about every 10 ms, waits while the other
    measures, and both end on the pair's CPU."""
    left, right = socket.socketpair()
    cpu = duet.pair_cpu()
    children = []
    try:
        for end, first in ((left, True), (right, False)):
            description = duet.describe(end.fileno(), os.getpid(), cpu, first)
            children.append(subprocess.Popen([sys.executable, "-c", CHILD, description], pass_fds=[end.fileno()],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    finally:
        left.close()
        right.close()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        turns, _, waited, handovers, cpus = out.split(maxsplit=4)
        assert int(turns) >= 5, out  # 0.2 s of blocks in 10 ms slices, the other side as long
        assert int(handovers) in (int(turns), int(turns) + 1), out  # + the end of its measurement
        assert float(waited) > 0.05, out
        if cpu is not None:
            assert cpus.strip() == f"{{{cpu}}}", out
