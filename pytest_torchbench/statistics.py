"""Statistics shared by the engines and the metrics, pure and dependency-free.

Why here, low down: the profiler's engines and the Python-calls engine (which must not import torch)
both pick a representative iteration, and a metric imports only the shared vocabulary and this.
"""
from __future__ import annotations

import collections


def representative(counters: list[collections.Counter[str]]) -> collections.Counter[str]:
    """The per-iteration count to report: the counts most iterations agree on (ties go to the later
    iteration, which had more warm-up). For deterministic code every iteration agrees; taking a
    whole iteration's counts, rather than a per-op mean, keeps the numbers integers and consistent
    with each other when one iteration took a one-off path (a cache fill, a lazy init)."""
    frozen = [tuple(sorted(c.items())) for c in counters]
    tally = collections.Counter(frozen)
    best = max(range(len(frozen)), key=lambda i: (tally[frozen[i]], i))
    return counters[best]
