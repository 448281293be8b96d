"""Time against a stored baseline saved in another machine state (issue 48, item 2): the verdict
is "not comparable", and in CI the run cannot pass (exit 6), whatever the times say."""

from __future__ import annotations

import json
import os

import pytest

from pytest_torchbench.engines import walltime

# Two threads: no CPU share is measured, so the runnable threads per CPU are the machine's state.
# The count a session records is made up (walltime.RunnableSampler.mean patched in this process):
# other processes on a shared machine add their own threads, so a real load is not reliable here.
# Full at the save and now, by different amounts: whichever way the times move, each side's
# threads waited in their own way (a quiet save against a full run would keep an improvement).
TWO_THREADS = """
import pytest
import torch

A = torch.rand(64, 64)

@pytest.mark.benchmark(num_threads=2, max_run_time=0.1)
def test_mm():
    torch.mm(A, A)
"""


def test_a_baseline_saved_on_a_full_machine_is_not_comparable_on_another_full_one(
    bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench.pytester.makepyfile(test_bench=TWO_THREADS)
    cpus = os.cpu_count() or 1
    args = ("-p", "no:benchmark", "-p", "no:cacheprovider", "--bench-mode=time")
    monkeypatch.setattr(walltime.RunnableSampler, "mean", lambda self: 1.5 * cpus)
    saved = bench.pytester.runpytest(*args, "--bench-save=main")
    assert saved.ret == 0, saved.stdout.str()
    stored = bench.load("main")["benchmarks"]["test_bench.py::test_mm"]["metrics"]["time"]
    assert stored["cpus"] == cpus and stored["runnable"] == pytest.approx(1.5 * cpus, abs=0.01)
    monkeypatch.setattr(walltime.RunnableSampler, "mean", lambda self: 3.0 * cpus)
    monkeypatch.setenv("CI", "true")
    out = bench.path / "out.json"
    compared = bench.pytester.runpytest(*args, "--bench-compare=main", f"--bench-json={out}")
    text = compared.stdout.str()
    assert compared.ret == 6, text
    verdicts = json.loads(out.read_text())["verdicts"]
    assert [(v["metric"], v["status"], v["failed"]) for v in verdicts] == [
        ("time", "not comparable", False)
    ]
    summary = verdicts[0]["summary"]
    assert summary.startswith("time: not comparable: the machine's state differs from the ")
    assert (
        f"runnable threads {1.5 * cpus:.1f} on {cpus} CPUs beside the baseline, "
        f"{3.0 * cpus:.1f} on {cpus} beside this run (1.5 or more per CPU" in summary
    )
    assert "ERROR: in CI this fails the run (exit 6)" in text
    assert "--bench-compare=REV" in text
