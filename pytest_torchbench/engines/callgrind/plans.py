"""The plans of a counted run: how many calls (and warm-up calls) each test was counted over in its
baseline, handed from the run's main process to its counted workers, one small file per test.

Why: a benchmark whose first call lies near a bucket edge otherwise picked the other bucket when
other tests ran around it, and its count was "not comparable" in CI where a comparison was wanted
(docs/design/counting.md, "How many calls are counted").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

#: Names the folder where a run's main process left the plans of its baseline: for each test whose
#: one instructions entry is keyed by its node id, the number of calls and warm-up calls it was
#: counted with (one small file per test, :func:`write_plans`). The main process sets it for
#: everything it starts (its counted workers, the base run of ``--bench-compare=REV``, re-runs),
#: empty when it has no baseline, so that the environment has the same variables in a save and in
#: a compare. A counted worker takes it out of its environment before its first test
#: (:func:`load_test_plan`): a pytest that a test starts finds its own baseline's plans.
PLANS_VARIABLE = "TORCHBENCH_CALL_PLANS"


def plan_file(folder: str | os.PathLike[str], nodeid: str) -> Path:
    """A test's plan file: named by a hash of its node id (any characters, any length)."""
    return Path(folder) / hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def write_plans(folder: Path, plans: Mapping[str, tuple[int, int]]) -> int:
    """Write each test's ``(number, warmup)`` plan, by node id, into ``folder``; the number
    written."""
    for nodeid, (number, warmup) in plans.items():
        plan_file(folder, nodeid).write_text(f"{number} {warmup}\n")
    return len(plans)


def read_plan(folder: str | os.PathLike[str], nodeid: str) -> tuple[int, int] | None:
    """The ``(number, warmup)`` left for ``nodeid`` in ``folder``; None when there is none or the
    file does not hold two integers. Whether a plan is followed is decided after the probe
    (``collect.plan_followed``)."""
    try:
        with open(plan_file(folder, nodeid), "rb") as handle:
            number, warmup = (int(field) for field in handle.read(64).split())
    except (OSError, ValueError):
        return None
    return number, warmup


#: This worker's plans folder, taken out of its environment at its first test (None: not yet).
_plans_folder: str | None = None
#: The running test's plan, until its first count takes it.
_test_plan: tuple[int, int] | None = None


def load_test_plan(nodeid: str) -> None:
    """Before a test's heap epoch (``CallgrindLaunch.before_test``): read its plan, so that what
    the reading allocates (paths, a file buffer, an exception when there is no plan) lies outside
    the epoch. Read inside it, a compare run (plans) and a save run (none) laid the test's
    objects out differently, and a Python-heavy count moved by a few instructions per call."""
    global _plans_folder, _test_plan
    if _plans_folder is None:
        _plans_folder = os.environ.pop(PLANS_VARIABLE, "")
    _test_plan = read_plan(_plans_folder, nodeid) if _plans_folder else None


def take_test_plan() -> tuple[int, int] | None:
    """The running test's plan, once: its first count uses it, a second recording is adaptive."""
    global _test_plan
    plan, _test_plan = _test_plan, None
    return plan
