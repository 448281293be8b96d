"""Two processes measuring in turns: a baton passed between a base and a head process, so that
their wall times come from the same moments of the same CPU.

Why: on a shared machine the same code runs at one of two speeds, far apart, depending on the
moment and on the CPU the process runs on, and a base measured seconds or minutes before its head
draws its own speed. Two processes pinned to one CPU and taking turns every few milliseconds see
the same moments of the same CPU, so their paired ratio keeps the code's change; turns alone
(unpinned) or pinning alone did not do it (docs/design/time-gate.md, "Measured in turns",
``benchmarks/figures_turns.py``).

The protocol, over a connected socket pair (one end per process): exactly one process holds the
baton and runs; the other waits in a blocking read. The holder hands it over at a *slice
boundary* (between two timed blocks, once it has measured for :data:`SLICE_SECONDS`) with
``T``, at the end of a measurement with ``E`` ("I finished this benchmark": the peer then keeps
the baton until it has finished the same benchmark too, so the two stay on the same benchmark),
and for good at the end of its session with ``D`` (or by exiting: end of file). Everything a
process does outside a measurement (setup, teardown, reports) happens while it holds the baton,
so the two never run at the same time and neither disturbs the other's measurement.

Engine-level: nothing here knows pytest (``pytest/session.py`` hands a baton to the engine when
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
#: holds, such as a lock both sides' fixtures take): the waiter then runs on alone, and says so.
WAIT_LIMIT_SECONDS = 300.0

_TURN, _END, _DONE = b"T", b"E", b"D"


class Baton:
    """This process's end of a pair (see the module docstring)."""

    def __init__(self, sock: socket.socket, holds: bool, cpu: int | None = None) -> None:
        self._sock = sock
        self.holds = holds
        self.cpu = cpu
        self.peer_finished = False  # the peer finished the benchmark this process is measuring
        self.alone = False  # the peer is gone (finished its session, exited) or stuck
        self.handovers = 0
        self.waited = 0.0  # seconds spent waiting for the peer
        self._slice_start = time.perf_counter()
        self._pinned = False

    def start(self) -> None:
        """Wait for the first turn (the process that goes first has it already)."""
        if not self.holds:
            self._receive()
        self._slice_start = time.perf_counter()

    def measuring(self) -> None:
        """A measurement begins in this process: its first slice starts now. The first one pins
        this thread to the pair's CPU for good (both processes of a pair measure on the same CPU,
        one while the other waits; a process whose tests run elsewhere never measures, so never
        pins, and the processes it starts keep every CPU)."""
        if self.cpu is not None and not self._pinned and hasattr(os, "sched_setaffinity"):
            self._pinned = True
            try:
                os.sched_setaffinity(0, {self.cpu})
            except OSError:
                pass
        self._slice_start = time.perf_counter()

    def boundary(self) -> float:
        """Between two timed blocks: hand over if this slice is done. Returns the seconds spent
        waiting (to leave out of the measurement's wall time)."""
        if self.alone or self.peer_finished or time.perf_counter() - self._slice_start < SLICE_SECONDS:
            return 0.0
        waited = self._hand_over(_TURN)
        self._slice_start = time.perf_counter()
        return waited

    def finished_measurement(self) -> None:
        """A measurement ended: hand over until the peer has finished its own (unless it already
        had: then this process goes on first)."""
        if self.alone:
            return
        if self.peer_finished:
            self.peer_finished = False
            return
        self._hand_over(_END)

    def finish(self) -> None:
        """This process is done: the peer runs alone from now on."""
        if not self.alone:
            self.alone = True
            try:
                self._sock.sendall(_DONE)
            except OSError:
                pass
        try:
            self._sock.close()
        except OSError:
            pass

    def _hand_over(self, message: bytes) -> float:
        started = time.perf_counter()
        try:
            self._sock.sendall(message)
        except OSError:
            self.alone = True
            return 0.0
        self.holds = False
        self.handovers += 1
        self._receive()
        waited = time.perf_counter() - started
        self.waited += waited
        return waited

    def _receive(self) -> None:
        self._sock.settimeout(WAIT_LIMIT_SECONDS)
        try:
            message = self._sock.recv(1)
        except socket.timeout:
            message = b""
            print(f"pytest-torchbench: the other process of the pair held the turn for over "
                  f"{WAIT_LIMIT_SECONDS:.0f} s; measuring alone from now on", file=sys.stderr)
        except OSError:
            message = b""
        self.holds = True
        if message in (_TURN, _END):
            self.peer_finished = message == _END
        else:  # done, end of file, or stuck: alone from now on
            self.alone = True
            self.peer_finished = False


#: This process's baton while it is one of a pair (``pytest/session.py`` sets it); None otherwise.
current: Baton | None = None


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
    return Baton(sock, holds=first, cpu=cpu)


def describe(fd: int, parent_pid: int, cpu: int | None, first: bool) -> str:
    """What a child of ``parent_pid`` needs to find its end of a pair (:func:`connect`)."""
    return f"{fd},{parent_pid},{'' if cpu is None else cpu},{1 if first else 0}"


def pair_cpu() -> int | None:
    """The CPU a pair measures on: the last one this process may run on (None where the OS
    cannot pin)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    try:
        return max(os.sched_getaffinity(0))
    except (OSError, ValueError):
        return None
