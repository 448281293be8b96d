"""Extension hooks of pytest-torchbench, for conftest.py files and other plugins.

Why hooks: teams need to add facts that decide comparability (a docker image digest, a driver
version), to apply house rules to verdicts (waive a known regression, make a metric advisory) and
to send results elsewhere (a dashboard, a database) without forking the plugin. They are ordinary
pluggy hook specifications, registered in ``pytest_addhooks``; implement them by defining a
function of the same name in a ``conftest.py`` or a plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from pluggy import HookspecMarker

if TYPE_CHECKING:
    from ..common.vocabulary import Verdict
    from ..judging.results import BenchmarkResult
    from ..metrics.metric import Metric

_spec = HookspecMarker("pytest")


@_spec
def pytest_torchbench_register_metrics(config: pytest.Config | None) -> Sequence[Metric] | None:
    """Return metrics (instances of ``pytest_torchbench.Metric`` subclasses) to add to the built-in
    ones (time, instructions, ops, calls, memory, kernels, gpu_time, compile).

    Called once per process (each xdist worker too) in ``pytest_configure``, before the options
    are validated, so ``--bench-mode=NAME`` and ``--bench-fail=NAME:5%`` accept the new names.
    A registered metric is measured, saved, compared and shown like a built-in one (see
    docs/metrics.md); it is removed again when pytest unconfigures. A name that is
    already registered is a usage error. The ``torchbench`` command calls it with
    ``config=None`` when given ``-p MODULE`` (or ``-p path/to/conftest.py``), so that it can read
    and judge sets that hold the metric. Example::

        def pytest_torchbench_register_metrics(config):
            return [MyMetric()]
    """


@_spec
def pytest_torchbench_environment(config: pytest.Config) -> Mapping[str, Any] | None:
    """Return extra environment facts (name -> value) for this process's fingerprint.

    Called once per process that measures: a serial run's before its first test, a worker's at
    its first benchmark; the controller of workers (``-n``, instructions mode) calls it once too,
    before they start. A value that is neither a dict nor None is a usage error. All returned
    dicts are merged into every metric's environment and stored with the baseline as
    ``user.NAME`` (values turned into strings); every such fact decides comparability for every
    metric. A fact whose value differs between the baseline and the run is shown in the "not
    comparable" verdict; with ``--bench-strict`` such a difference fails. Return None to add
    nothing. Example::

        def pytest_torchbench_environment(config):
            return {"image": os.environ.get("IMAGE_DIGEST", "local")}
    """


@_spec
def pytest_torchbench_verdict(
    config: pytest.Config,
    verdict: Verdict,
    result: BenchmarkResult,
    baseline: BenchmarkResult | None,
) -> Verdict | None:
    """See one verdict of one benchmark, before it can fail the test; return a changed copy to
    change it (None keeps it).

    Called where results are judged: the process that owns the terminal (the serial run or the
    xdist controller), when the test's call report arrives and before it is marked failed: last,
    after the fresh-process confirmation, ``Bench-Accept`` and the call sites of a re-run, so the
    verdict is the settled one and what the hook adds is kept.
    Verdicts are frozen: ``return verdict.replace(failed=False)`` waives a regression,
    ``failed=True`` makes any status fail, ``verdict.with_details(after=["why"])`` adds your own
    explanation. Several implementations run in pluggy's order, each seeing what the one before
    returned. The returned verdict is what the terminal, JSON, Markdown and HTML reports show.
    ``baseline`` is the baseline entry of the benchmark (None for a new one).
    """


@_spec
def pytest_torchbench_report(
    config: pytest.Config, results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict]
) -> None:
    """Write your own report at the end of the session, once, from all results and verdicts.

    Called in the process that owns the terminal (the serial run or the xdist controller), after
    baselines and the built-in reports were written, whether benchmarks failed or not (not after
    an interrupted run). An exception raised here is reported as one ``torchbench: ERROR`` line
    and does not change the run's exit status.
    """
