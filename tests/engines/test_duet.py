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


def _play(
    baton: duet.Baton,
    side: str,
    tests: list[tuple[str, int]],
    log: list[tuple[str, str]],
    turns: dict[str, int],
    measured: set[str] | None = None,
) -> None:
    """A session: collection (``tests``), the first turn, then per test ``slices`` slices of one
    measurement (each logged; a test not in ``measured`` fails before measuring), then done."""
    baton.tests = {test for test, _ in tests}
    baton.start()
    for test, slices in tests:
        baton.begin_test(test)
        if measured is not None and test not in measured:
            continue
        baton.measuring(baton.next_key(), pin=False)
        for _ in range(slices):
            log.append((side, test))
            baton.boundary()
        turns[f"{side} {test}"] = baton.turns
        baton.finished_measurement()
    baton.finish()


def _pair(
    monkeypatch: pytest.MonkeyPatch,
    base: list[tuple[str, int]],
    head: list[tuple[str, int]],
    head_measures: set[str] | None = None,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    monkeypatch.setattr(duet, "SLICE_SECONDS", 0.0)  # every boundary ends a slice
    left, right = socket.socketpair()
    log: list[tuple[str, str]] = []
    turns: dict[str, int] = {}
    threads = [
        threading.Thread(
            target=_play, args=(duet.Baton(left, holds=True), "base", base, log, turns), daemon=True
        ),
        threading.Thread(
            target=_play,
            args=(duet.Baton(right, holds=False), "head", head, log, turns, head_measures),
            daemon=True,
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), log
    return log, turns


def test_the_two_sides_take_turns_and_stay_on_the_same_benchmark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slices alternate; the side that finishes a benchmark first waits until the other has
    finished it too, so neither runs ahead to the next benchmark; a hand-over counts as a turn
    when the other side measured the same benchmark."""
    log, turns = _pair(monkeypatch, [("a", 3), ("b", 2)], [("a", 5), ("b", 2)])
    assert log == [
        ("base", "a"),
        ("head", "a"),
        ("base", "a"),
        ("head", "a"),
        ("base", "a"),
        ("head", "a"),
        ("head", "a"),
        ("head", "a"),  # the base finished a: the head finishes it alone
        ("head", "b"),
        ("base", "b"),
        ("head", "b"),
        ("base", "b"),  # the last to finish a starts b
    ]
    assert turns == {"base a": 3, "head a": 3, "base b": 2, "head b": 2}


def test_a_benchmark_one_side_lacks_is_measured_alone_and_the_rest_stay_paired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head has a new benchmark the base lacks: while the head measures it, the base hands
    the baton straight back instead of measuring ``a`` unpaired; ``a`` and ``b`` are then
    measured in turns on both sides."""
    log, turns = _pair(monkeypatch, [("a", 4), ("b", 4)], [("new", 4), ("a", 4), ("b", 4)])
    new = [i for i, entry in enumerate(log) if entry == ("head", "new")]
    assert new == list(range(new[0], new[0] + 4)), log  # all four slices of new in a row
    assert log[: new[0]] == [("base", "a")]  # the base's first slice, before it knew
    assert turns["head new"] == 0
    assert (
        turns["base a"] >= 2
        and turns["head a"] >= 2
        and turns["base b"] >= 2
        and turns["head b"] >= 2
    ), turns


def test_a_renamed_test_is_measured_alone_on_each_side_and_the_rest_stay_paired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The base has ``old``, the head ``new`` in its place (a renamed test, another parameter
    id): each is a test the other lacks. Neither waits for the other forever; ``c`` is then
    measured in turns on both sides."""
    log, turns = _pair(monkeypatch, [("old", 3), ("c", 4)], [("new", 3), ("c", 4)])
    assert turns["base old"] == 0 and turns["head new"] == 0
    assert turns["base c"] >= 2 and turns["head c"] >= 2, (turns, log)


def test_a_test_that_did_not_measure_on_one_side_leaves_the_next_paired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head's test ``a`` failed before measuring: the head is already on ``b`` while the
    base measures ``a``; the head, having passed ``a``, hands the baton back until the base
    comes to ``b``, and ``b`` is measured in turns."""
    log, turns = _pair(monkeypatch, [("a", 4), ("b", 4)], [("a", 4), ("b", 4)], head_measures={"b"})
    assert "head a" not in turns
    assert turns["base b"] >= 2 and turns["head b"] >= 2, (turns, log)


def test_two_sides_each_measuring_elsewhere_for_the_other_do_not_pass_the_baton_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The base is on ``k``, a test the head lacks, having finished ``p``; the head is on ``p``:
    each would hand the baton straight back to the other. A baton sent straight back is not sent
    straight back again, so both finish (before that rule they passed it to and fro forever)."""
    monkeypatch.setattr(duet, "SLICE_SECONDS", 0.0)
    left, right = socket.socketpair()
    base, head = duet.Baton(left, holds=True), duet.Baton(right, holds=False)
    base.tests, base.finished, base.done_tests = {"p", "k"}, {"p#1"}, {"p"}
    head.tests = {"p"}
    log: list[tuple[str, str]] = []

    def play(baton: duet.Baton, side: str, test: str) -> None:
        baton.start()
        baton.begin_test(test)
        baton.measuring(baton.next_key(), pin=False)
        for _ in range(3):
            log.append((side, test))
            baton.boundary()
        baton.finished_measurement()
        baton.finish()

    threads = [
        threading.Thread(target=play, args=(base, "base", "k"), daemon=True),
        threading.Thread(target=play, args=(head, "head", "p"), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads), "the baton went to and fro forever"
    assert sorted(log) == [("base", "k")] * 3 + [("head", "p")] * 3
    assert base.handovers < 20 and head.handovers < 20


class _Interrupted(Exception):
    pass


class _RecvRaisesOnce:
    """A socket whose first wait is cut short, as a test timeout's signal cuts a blocking read."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.raised = sock, False

    def recv(self, size: int) -> bytes:
        if not self.raised:
            self.raised = True
            raise _Interrupted
        return self.sock.recv(size)

    def __getattr__(self, name: str) -> object:
        return getattr(self.sock, name)


def test_a_wait_cut_short_by_an_exception_does_not_let_both_run_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The base's measurement raises while it waits for its turn (a timeout's signal); handing over
    at the end of that measurement first takes back the turn it is owed, so the two sides never
    run at the same time afterwards."""
    monkeypatch.setattr(duet, "SLICE_SECONDS", 0.0)
    left, right = socket.socketpair()
    base, head = duet.Baton(left, holds=True), duet.Baton(right, holds=False)
    base.tests = head.tests = {"a", "b"}
    running = [0]
    overlaps = []

    def slice_of_work() -> None:
        running[0] += 1
        time.sleep(0.002)
        if running[0] != 1:
            overlaps.append(running[0])
        running[0] -= 1

    def play(baton: duet.Baton, interrupt: bool) -> None:
        baton.start()
        for test in ("a", "b"):
            baton.begin_test(test)
            baton.measuring(baton.next_key(), pin=False)
            try:
                for number in range(4):
                    slice_of_work()
                    if interrupt and test == "a" and number == 1:
                        baton._sock = _RecvRaisesOnce(baton._sock)  # type: ignore[assignment]
                    baton.boundary()
            except _Interrupted:
                pass
            finally:
                if baton.key is not None:
                    baton.finished_measurement()
        baton.finish()

    threads = [
        threading.Thread(target=play, args=(base, True), daemon=True),
        threading.Thread(target=play, args=(head, False), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    assert overlaps == []


def test_a_peer_that_exits_sticks_or_holds_long_on_purpose(monkeypatch: pytest.MonkeyPatch) -> None:
    """End of file (the peer exited or crashed) or a wait past the limit: alone from then on. A
    peer that said it holds the turn long (its tests run in workers) is waited for."""
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

    left, right = socket.socketpair()
    holder, patient = duet.Baton(left, holds=True), duet.Baton(right, holds=False)

    def hold() -> None:
        holder.start()
        holder.hold_long()
        time.sleep(0.6)
        holder.finish()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    started = time.perf_counter()
    patient.start()
    waited = time.perf_counter() - started
    thread.join(timeout=10)
    assert waited > 0.5 and patient.alone  # waited past the limit, freed by the end of the session


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
        fd = os.dup(right.fileno())
        os.set_inheritable(fd, True)
        baton = duet.connect(duet.describe(fd, 7, 1, False), 7)
        assert baton is not None and not baton.holds and baton.cpu == 1
        assert not os.get_inheritable(fd)  # processes the child starts do not keep the pair open
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
duet.current.tests = {"test_sum"}
duet.current.start()
duet.current.begin_test("test_sum")
before = os.sched_getaffinity(0)
m = TimeMetric.from_measurement(
    walltime.measure(lambda: sum(range(300)), walltime.TimeSpec(min_run_time=0.2))
)
assert os.sched_getaffinity(0) == before  # pinned while measuring only
duet.current.finish()
print(m.turns, m.cpu_share, duet.current.waited, duet.current.handovers, duet.current._affinity)
"""


def test_two_processes_measure_in_turns_on_one_cpu() -> None:
    """Real processes, real measurements: each hands over about every 10 ms while the other
    measures the same benchmark, waits meanwhile, and runs on the pair's CPU only while it
    measures."""
    left, right = socket.socketpair()
    cpu = duet.pair_cpu()
    children = []
    try:
        for end, first in ((left, True), (right, False)):
            description = duet.describe(end.fileno(), os.getpid(), cpu, first)
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, description],
                    pass_fds=[end.fileno()],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
    finally:
        left.close()
        right.close()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        turns, _, waited, handovers, affinity = out.split(maxsplit=4)
        assert int(turns) >= 5, out  # 0.2 s of blocks in 10 ms slices, the other side as long
        assert int(turns) <= int(handovers) <= int(turns) + 2, out  # + the end of its measurement
        assert float(waited) > 0.05, out
        assert affinity.strip() != "None", out  # it was pinned
