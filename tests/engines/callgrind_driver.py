"""Counted-process script for the Callgrind engine tests (run under valgrind, not by pytest).

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
    number = int(os.environ.get("TORCHBENCH_TEST_NUMBER", "100"))
    keep = os.environ.get("TORCHBENCH_TEST_KEEP") == "1"
    results: dict[str, object] = {"fingerprint": counting_fingerprint(), "statements": {}}
    for name in order:
        started = time.perf_counter()
        stats = measure(STATEMENTS[name], number=number, out_dir=out_dir, keep_output=keep)
        elapsed = time.perf_counter() - started
        entry = {
            "counts": stats.counts(),
            "per_run": stats.counts() / stats.number_per_run,
            "seconds": elapsed,
            "n_exclusive": len(stats.stats(inclusive=False)),
            "n_inclusive": len(stats.stats(inclusive=True)),
            # torch's own tools must work on what measure() returns
            "standardized_counts": stats.as_standardized().counts(),
            "self_delta_rows": len(stats.delta(stats)),
            "denoised_counts": stats.counts(denoise=True),
        }
        if keep and stats.stmt_callgrind_out is not None:
            dump = os.path.join(out_dir, f"kept-{name}.callgrind")
            with open(dump, "w", encoding="utf-8") as handle:
                handle.write(stats.stmt_callgrind_out)
            entry["dump"] = dump
            entry["exclusive"] = [[c.count, c.function] for c in stats.stats(inclusive=False)]
            entry["inclusive"] = [[c.count, c.function] for c in stats.stats(inclusive=True)]
        results["statements"][name] = entry  # type: ignore[index]
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    sys.stdout.flush()
    os._exit(0)  # a normal exit under valgrind costs about 4 s


if __name__ == "__main__":
    main()
