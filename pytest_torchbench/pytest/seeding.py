"""Seeding the random generators a benchmark may draw from, for the counting modes.

Why: a random augmentation (crop or flip chosen with ``torch.rand``) dispatches different ops and
executes different instructions depending on what it draws, so unseeded it counts differently
run to run and fails A/A comparisons. The plugin seeds each benchmark test before its fixtures
(what they and the test body draw must not depend on the tests before it); counting engines
call the hook returned by :func:`seeder` before their warm-up (ops and memory again before the
counted region; never inside it: the seeding itself would be counted). Wall time is never
seeded: it is a statistic over many calls.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Callable, Iterator


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, numpy's global generator (when numpy is imported: importing it
    here would cost time in runs that never use it) and torch (CPU and every CUDA device).
    torch first: importing it imports numpy, which must then be seeded too."""
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


@contextlib.contextmanager
def kept_generators() -> Iterator[None]:
    """The generators seed_everything seeds are put back as they were when the block ends (CUDA
    devices' only when CUDA is already initialised: never initialise it here)."""
    import torch

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    python_state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(python_state)
            if numpy is not None:
                numpy.random.set_state(numpy_state)


def seeder(seed: int | None) -> Callable[[], None] | None:
    """The hook for a benchmark's ``seed=`` (None: leave the generators alone, no hook)."""
    if seed is None:
        return None
    return lambda: seed_everything(seed)


def chain(*hooks: Callable[[], None] | None) -> Callable[[], None] | None:
    """One hook that calls the given ones in order (None when there is none)."""
    present = [hook for hook in hooks if hook is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def run() -> None:
        for hook in present:
            hook()

    return run
