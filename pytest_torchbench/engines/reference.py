"""The machine's own speed, timed beside each benchmark with a fixed reference workload.

Why: on a shared VM the same code's fastest call moves by tens of percent between minutes while
the measuring thread has its core all the time, and the fresh process that re-measures a suspect
runs on the same slow machine, so it confirms the false regression. Nothing the guest can see
(CPU share, load, steal) says so; what moves is outside it (another VM on the same physical core,
the host's clock). Timing a fixed workload beside the benchmark does see it: a benchmark timed
while the reference was slow was slow too (figures: docs/design/time-gate.md, "A slower machine:
the reference workload", and docs/design/measurements.md, "Moved from the code").

The workload is a Python loop and a small torch op (the interpreter and the dispatcher: what a
slower or shared core slows). It is timed in short blocks spread over the benchmark's whole
measurement (one block at least every ``interval`` seconds, and at the start and the end), each
right after an untimed call, and the fastest block is kept: a slowdown of the machine that lasts
through the measurement shows in it, a moment's preemption does not. A second workload copying
memory was tried and dropped: it moved on its own between sessions of the same code, and judged
by the slower of the two more real slowdowns passed (docs/design/time-gate.md). The cost is one
short block per ``interval``, a small share of the measurement.

The workload is fixed: changing it changes ``PROBE`` (saved with the times), and times of another
probe are never compared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The version of the workload below; saved beside its time.
PROBE = 1
#: Calls of the workload per timed block (a block of tens of microseconds: short enough to fit
#: between preemptions, long enough for the clock).
CALLS = 20

_tensors: tuple[Any, Any] | None = None


def _workload() -> int:
    global _tensors
    if _tensors is None:  # made once per process, and written in place: no allocation per call
        import torch

        _tensors = (
            torch.ones(64, dtype=torch.float32, device="cpu"),
            torch.empty(64, dtype=torch.float32, device="cpu"),
        )
    import torch

    small, out = _tensors
    total = 0
    for i in range(40):
        total += i * i
    torch.add(small, 1.0, out=out)
    return total


class ReferenceProbe:
    """Times the reference workload now and then; keeps the fastest block per call."""

    def __init__(
        self, interval: float = 0.01, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.interval = interval
        self.clock = clock
        self.fastest = float("inf")
        self._last = -float("inf")

    def sample(self) -> None:
        """Time one block, right after an untimed call: the benchmark ran just before and left
        the caches and branch predictors its own (without it, blocks varied by tens of percent
        from sample to sample within one session)."""
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            # the same dispatch whatever mode the benchmark left on (grad, inference)
            with torch.inference_mode():
                _workload()
                start = self.clock()
                for _ in range(CALLS):
                    _workload()
                end = self.clock()
        finally:
            torch.set_num_threads(previous)
        self.fastest = min(self.fastest, (end - start) / CALLS)
        self._last = end

    def maybe_sample(self) -> None:
        """Sample when ``interval`` has passed since the last sample."""
        if self.clock() - self._last >= self.interval:
            self.sample()

    def result(self) -> dict[str, Any] | None:
        """``{"probe": PROBE, "compute": seconds per call}``, None before any sample."""
        if self.fastest == float("inf"):
            return None
        return {"probe": PROBE, "compute": self.fastest}
