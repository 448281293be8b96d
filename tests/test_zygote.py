"""The fork server the end-to-end tests run pytest through (``tests/zygote.py``): a forked run
must get what a fresh ``python -m pytest`` with its environment would get."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

THREADS_TEST = """
import torch

def test_threads():
    with open("threads.txt", "w") as out:
        out.write(str(torch.get_num_threads()))
"""


def fresh_default_threads(env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip())


def test_forked_runs_get_the_thread_count_their_environment_gives(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch reads ``OMP_NUM_THREADS`` when it is imported, which a forked run's server did
    before the run: a run without the variable and then one with ``OMP_NUM_THREADS=1`` (the
    ``bench`` fixture's) each get the count a fresh interpreter would, in this order too."""
    pytester.makepyfile(test_threads=THREADS_TEST)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    for value in (None, "1"):
        if value is None:
            monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", value)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:torchbench")
        assert result.ret == 0, result.stdout.str()
        seen = int((pytester.path / "threads.txt").read_text())
        assert seen == fresh_default_threads(dict(os.environ)), (value, seen)
