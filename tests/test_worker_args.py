"""What counted workers are told: the controller's command line less what only the controller acts
on, so that a serial run's worker and a ``-n 2`` run's workers get the same arguments (their
length alone moves the stack, and with it the counts of Python-heavy code)."""

from __future__ import annotations

import pytest

from pytest_torchbench.pytest.workers import worker_args


@pytest.mark.parametrize(
    "args",
    [
        ("-n", "2", "-q"),
        ("-n2", "-q"),
        ("-nauto", "-q"),
        ("--numprocesses=2", "-q"),
        ("--dist", "load", "-q"),
        ("--dist=worksteal", "--maxprocesses", "3", "-q"),
        ("--bench-save=main", "-q"),
        ("--bench-compare", "main", "--bench-rounds=3", "-q"),
    ],
)
def test_workers_get_the_arguments_a_serial_run_gives_them(args: tuple[str, ...]) -> None:
    assert worker_args(("--bench-mode=instructions", *args)) == ("--bench-mode=instructions", "-q")


def test_other_arguments_reach_the_workers() -> None:
    args = ("--bench-mode=instructions", "-k", "not slow", "--noconftest", "tests/test_a.py")
    assert worker_args(args) == args
