"""Two processes measuring in turns: a baton passed between a base and a head process, so that
their wall times come from the same moments of the same CPU.

Why: on a shared machine the same code runs at one of two speeds, far apart, depending on the
moment and on the CPU the process runs on, and a base measured seconds or minutes before its head
draws its own speed. Two processes pinned to one CPU and taking turns every few milliseconds see
the same moments of the same CPU, so their paired ratio keeps the code's change; turns alone
(unpinned) or pinning alone did not do it (docs/design/time-gate.md, "Measured in turns",
``benchmarks/figures_turns.py``).

The protocol, over a connected socket pair (one end per process), one line per message: exactly
one process holds the baton and runs; the other waits in a blocking read. Each process says when
it is ready to measure (``R``: the first waits for it, so the second's start-up does not run
beside the first's measurements). The holder hands the baton over at a *slice boundary* (between
two timed blocks, once it has measured for :data:`SLICE_SECONDS`) with ``T key`` (measuring
``key``), at the end of a measurement with ``E key`` (finished ``key``: a peer measuring the same
key then keeps the baton until it has finished it too), and for good at the end of its session
with ``D`` (or by exiting: end of file). ``L`` says the holder keeps the baton for a long time on
purpose (its tests run in other processes), so the waiter does not take it for a stuck peer.

Pairs are made by key, not by order: a hand-over counts as a *turn* of a measurement only when
the peer measured the same benchmark in between. A peer measuring a benchmark this process has
already finished is behind (a benchmark this side lacks, a test that failed here): it gets the
baton straight back (``B key``) until it catches up, and so does a peer measuring a benchmark of
a test this process does not have. A baton sent straight back is never sent straight back again:
one of the two always measures. Everything a process does outside a measurement (setup,
teardown, reports) happens while it holds the baton, so the two never run at the same time.

Engine-level: nothing here knows pytest (``pytest/turns.py`` hands a baton to the engine when
its process is one of a pair, ``pytest/base.py`` starts the pair).
"""

from __future__ import annotations

import os
import socket
import sys
import time

#: How long a process measures before handing the baton over: short against the windows of a
#: slower machine (docs/design/time-gate.md, "The rule"), long against the cost of a hand-over
#: (two context switches).
SLICE_SECONDS = 0.01
#: A wait longer than this means the pair is stuck (the holder waits on something the waiter
#: holds, such as a lock both sides' fixtures take): the waiter then runs on alone, unpinned, and
#: its measurements from then on count no turns (judged as measured one after the other).
WAIT_LIMIT_SECONDS = 1800.0

_READY, _TURN, _END, _DONE, _LONG, _BACK = "R", "T", "E", "D", "L", "B"


class Baton:
    """This process's end of a pair (see the module docstring)."""

    def __init__(self, sock: socket.socket, holds: bool, cpu: int | None = None) -> None:
        self._sock = sock
        self._buffer = b""
        self.holds = holds
        self.cpu = cpu
        self.alone = False  # the peer is gone (finished its session, exited) or stuck
        self.key: str | None = None  # the benchmark this process is measuring
        self.finished: set[str] = set()  # the benchmarks this process has measured
        self.peer: tuple[str, str] = ("", "")  # the peer's last word: (message, key)
        self.turns = 0  # hand-overs of this measurement while the peer measured the same key
        self.pinned = False  # this measurement runs on the pair's CPU
        self.handovers = 0
        self.waited = 0.0  # seconds spent waiting for the peer
        self._slice_start = time.perf_counter()
        self._long = False
        self._affinity: set[int] | None = None
        self._test = ""
        self._in_test = 0
        #: The tests this process will run (None: not known) and those it has run: a peer
        #: measuring one of the first it lacks, or one of the second, is not measuring with it.
        self.tests: set[str] | None = None
        self.done_tests: set[str] = set()

    def begin_test(self, name: str) -> None:
        """A test begins: its measurements are keyed by its name and their order within it (the
        same on both sides of a pair)."""
        if self._test:
            self.done_tests.add(self._test)
        self._test, self._in_test = name, 0

    def next_key(self) -> str:
        """The key of the measurement about to begin."""
        self._in_test += 1
        return f"{self._test}#{self._in_test}"

    # -- the session ------------------------------------------------------------------------

    def start(self) -> None:
        """Ready to measure: the first process waits until the second is too (its imports and
        collection would run beside the first measurements); the second waits for its turn."""
        if self.holds:
            self._receive(until=_READY)
        else:
            self._send(_READY)
            self._receive()

    def hold_long(self) -> None:
        """This process keeps the baton for its whole test loop (its tests run elsewhere): the
        waiter waits as long as it takes."""
        self._send(_LONG)

    def finish(self) -> None:
        """This process is done: the peer runs alone from now on."""
        self._go_alone()
        try:
            self._sock.close()
        except OSError:
            pass

    # -- a measurement ------------------------------------------------------------------------

    def measuring(self, key: str, pin: bool = True) -> None:
        """A measurement of ``key`` begins in this process; with ``pin``, on the pair's CPU (both
        processes of a pair measure on the same CPU, one while the other waits)."""
        self.key = key
        self.turns = 0
        self.pinned = pin and self._pin()
        self._slice_start = time.perf_counter()

    def boundary(self) -> float:
        """Between two timed blocks: hand over if this slice is done. Returns the seconds spent
        waiting (to leave out of the measurement's wall time)."""
        if (
            self.alone
            or self.peer == (_END, self.key)
            or time.perf_counter() - self._slice_start < SLICE_SECONDS
        ):
            return 0.0
        started = time.perf_counter()
        handed = self._hand_over(_TURN)
        # straight back to a peer measuring elsewhere (``B``), until it comes to what this process
        # measures; never back to a peer that sent the baton straight back itself: one of the two
        # must measure (two processes each waiting for the other would pass it to and fro forever)
        while handed and self._peer_elsewhere() and self.peer[0] != _BACK:
            handed = self._hand_over(_BACK)
        self._slice_start = time.perf_counter()
        return time.perf_counter() - started

    def _peer_elsewhere(self) -> bool:
        """The peer measures a benchmark this process will not measure along with it: one this
        process has finished or passed (the peer is behind), or one of a test this process does
        not have (a benchmark the other revision lacks). It gets the baton straight back."""
        key = self.peer[1]
        if not key or key == self.key:
            return False
        test = key.rpartition("#")[0]
        return (
            key in self.finished
            or test in self.done_tests
            or (self.tests is not None and test not in self.tests)
        )

    def finished_measurement(self) -> int | None:
        """A measurement ended: hand over until the peer has finished its own (unless it already
        had: then this process goes on first). Returns the measurement's turns, None where it
        was not pinned (unpinned turns pair nothing: the module docstring)."""
        key, turns, pinned = self.key, self.turns, self.pinned
        if key is not None:
            self.finished.add(key)
        self._unpin()
        if not self.alone and self.peer != (_END, key):
            self._hand_over(_END)
        self.key = None
        return turns if pinned else None

    # -- the wire -----------------------------------------------------------------------------

    def _hand_over(self, message: str) -> bool:
        """Send ``message`` with this measurement's key, wait for the baton; False when alone."""
        started = time.perf_counter()
        if not self.holds:
            # an exception (a test timeout's signal) left a wait unfinished: take the baton this
            # process is owed before handing it over, or both would run at once from here on
            self._receive()
            if self.alone:
                return False
        if not self._send(message, self.key or ""):
            return False
        self.holds = False
        self.handovers += 1
        self._receive()
        self.waited += time.perf_counter() - started
        if self.alone:
            return False
        if self.key is not None and self.peer[1] == self.key and self.peer[0] != _BACK:
            self.turns += 1  # the peer measured this benchmark meanwhile
        return True

    def _send(self, message: str, key: str = "") -> bool:
        line = f"{message}{key}".replace("\n", "\\n").encode("utf-8", "replace") + b"\n"
        try:
            self._sock.sendall(line)
        except OSError:
            self._go_alone()
            return False
        return True

    def _receive(self, until: str | None = None) -> None:
        """Wait for the peer's word (the baton comes with ``T``, ``E``; ``D`` or end of file
        leave this process alone); ``until``: wait for that message instead."""
        while True:
            line = self._read_line()
            if line is None:
                self._go_alone()
                return
            message, key = line[:1], line[1:]
            if message == _LONG:
                self._long = True
                continue
            if message == _DONE:
                self._go_alone()
                return
            if until is not None:
                if message == until:
                    return
                continue
            if message in (_TURN, _END, _BACK):
                self.peer = (message, key)
                self.holds = True
                return
            # a stray ready word (the peer started after this process handed over): keep waiting

    def _read_line(self) -> str | None:
        while b"\n" not in self._buffer:
            self._sock.settimeout(None if self._long else WAIT_LIMIT_SECONDS)
            try:
                chunk = self._sock.recv(4096)
            except TimeoutError:
                print(
                    f"pytest-torchbench: the other process of the pair held the turn for over "
                    f"{WAIT_LIMIT_SECONDS:.0f} s; measuring alone from now on",
                    file=sys.stderr,
                )
                return None
            except OSError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def _go_alone(self) -> None:
        """From now on this process runs alone; the peer is told (done), so that one stuck
        holding the baton does not wait for it again when it goes on."""
        if not self.alone:
            self.alone = True
            try:
                self._sock.sendall(f"{_DONE}\n".encode())
            except OSError:
                pass
        self.holds = True
        self._unpin()

    def _pin(self) -> bool:
        if self.cpu is None or self.alone or not hasattr(os, "sched_setaffinity"):
            return False
        try:
            if self._affinity is None:
                self._affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {self.cpu})
        except OSError:
            return False
        return True

    def _unpin(self) -> None:
        """Back to every CPU this thread had: threads and processes started between measurements
        (a thread pool, a data loader's workers) are not confined to the pair's CPU."""
        if self.pinned and self._affinity is not None:
            try:
                os.sched_setaffinity(0, self._affinity)
            except OSError:
                pass
        self.pinned = False


#: This process's baton while it is one of a pair (``pytest/turns.py`` sets it); None otherwise.
current: Baton | None = None


def _forget_in_forked_child() -> None:
    """A forked process (a data loader's worker) is no end of the pair: it closes its copy of
    the socket, so that the peer still sees the end of file when this process exits."""
    global current
    if current is not None:
        try:
            current._sock.close()
        except OSError:
            pass
    current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        after_in_child=_forget_in_forked_child
    )  # a forked worker is no end of the pair


def connect(description: str, parent_pid: int) -> Baton | None:
    """The baton that ``description`` (``FD,PID,CPU,FIRST``, see :func:`describe`) names, where it
    is meant for this process (its parent is ``PID`` and ``FD`` is a socket); None otherwise: a
    grandchild that inherited the description (a re-run, a worker) must not read another
    process's file descriptor."""
    try:
        fd_text, pid_text, cpu_text, first_text = description.split(",")
        fd, pid, first = int(fd_text), int(pid_text), first_text == "1"
        cpu = int(cpu_text) if cpu_text else None
    except ValueError:
        return None
    if pid != parent_pid:
        return None
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    if sock.type != socket.SOCK_STREAM:
        sock.detach()
        return None
    try:
        os.set_inheritable(fd, False)  # processes this one starts must not keep the pair open
    except OSError:
        pass
    return Baton(sock, holds=first, cpu=cpu)


def describe(fd: int, parent_pid: int, cpu: int | None, first: bool) -> str:
    """What a child of ``parent_pid`` needs to find its end of a pair (:func:`connect`)."""
    return f"{fd},{parent_pid},{'' if cpu is None else cpu},{1 if first else 0}"


def pair_cpu() -> int | None:
    """The CPU a pair measures on: the last one this process may run on (None where the OS
    cannot pin)."""
    cpus = pair_cpus()
    return cpus[0] if cpus else None


def pair_cpus() -> list[int]:
    """The CPUs pairs measured at once measure on, one each: those this process may run on, the
    last first (none where the OS cannot pin)."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    try:
        return sorted(os.sched_getaffinity(0), reverse=True)
    except OSError:
        return []
