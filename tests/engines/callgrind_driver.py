"""Counted-process script for the Callgrind engine tests (run under valgrind, not by pytest).

It counts each statement the way the plugin's counted workers do (``Instructions.measure`` ->
``count_region_for_controller``: adaptive number of calls, the dump left unread for the
controller, which the test process then reads natively), and one more through ``measure`` (what
``bench_timer(...).collect_callgrind()`` ships: torch's CallgrindStats read in the process).

The statement order and the output folder come through the environment (which is passed through
to the counted process, and its block is padded to a fixed size), so that every run has
the same argv and the same environment size whatever the order.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from pytest_torchbench.engines.callgrind import counting_fingerprint, measure
from pytest_torchbench.metrics.instructions import count_region_for_controller

x = torch.ones(4, 4)
y = torch.ones(4, 4)


def add() -> object:
    return x + y


def add_twice() -> object:
    x + y
    return x + y


def total() -> object:
    return x.sum()


def mm() -> object:
    return torch.mm(x, y)


def mm_clone() -> object:
    return torch.mm(x, y).clone()


STATEMENTS = {f.__name__: f for f in (add, add_twice, total, mm, mm_clone)}


def main() -> None:
    order = os.environ["TORCHBENCH_TEST_ORDER"].split(",")
    out_dir = os.environ["TORCHBENCH_TEST_OUT"]
    results: dict[str, object] = {"fingerprint": counting_fingerprint(), "statements": {}}
    for name in order:
        started = time.perf_counter()
        pending = count_region_for_controller(
            STATEMENTS[name], number=None, warmup=None, num_threads=1
        )
        elapsed = time.perf_counter() - started
        results["statements"][name] = {**pending.to_json(), "seconds": elapsed}  # type: ignore[index]
    # bench_timer(...).collect_callgrind(): torch's own tools must work on what measure() returns
    stats = measure(STATEMENTS[order[0]], number=100, out_dir=out_dir)
    results["timer"] = {
        "statement": order[0],
        "counts": stats.counts(),
        "n_exclusive": len(stats.stats(inclusive=False)),
        "n_inclusive": len(stats.stats(inclusive=True)),
        "standardized_counts": stats.as_standardized().counts(),
        "self_delta_rows": len(stats.delta(stats)),
        "denoised_counts": stats.counts(denoise=True),
    }
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    sys.stdout.flush()
    os._exit(0)  # a normal exit under valgrind costs about 4 s


if __name__ == "__main__":
    main()
