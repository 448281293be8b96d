"""Calling the extension hooks (see hookspecs.py) from the pytest glue, in one place.

Kept apart from plugin.py so that the glue only gains one call per hook, and so that the rules
(how returned dicts merge, what a failing report hook does) are written down once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from ..core.results import BenchmarkResult
from ..core.vocabulary import USER_FACT_PREFIX, Verdict
from ..metrics import registry


def register_metrics(config: pytest.Config) -> list[str]:
    """Register the metrics returned by pytest_torchbench_register_metrics; the names added, so
    that the caller can unregister them at the end. A bad return value is one usage-error line."""
    added: list[str] = []
    for metrics in reversed(config.hook.pytest_torchbench_register_metrics(config=config)):
        try:
            added += registry.register_returned(metrics, "pytest_torchbench_register_metrics")
        except ValueError as exc:
            for name in added:
                registry.unregister(name)
            raise pytest.UsageError(str(exc)) from None
    return added


def environment_facts(config: pytest.Config) -> dict[str, str]:
    """Merge the dicts returned by pytest_torchbench_environment (later hooks win on a clash);
    names are stored with the ``user.`` prefix."""
    merged: dict[str, str] = {}
    # pluggy calls the last registered implementation first: reverse so the conftest closest to
    # the tests (registered last) has the final word.
    for facts in reversed(config.hook.pytest_torchbench_environment(config=config)):
        if facts is None:
            continue
        if not isinstance(facts, Mapping):
            raise pytest.UsageError(
                "pytest_torchbench_environment must return a dict of facts or None, "
                f"got {type(facts).__name__}"
            )
        merged.update({_fact_name(str(k)): str(v) for k, v in facts.items()})
    return merged


def _fact_name(name: str) -> str:
    """User facts are stored as ``user.NAME``: they can never clash with the built-in facts, and
    judgement knows that every one of them decides comparability, for every metric."""
    return name if name.startswith(USER_FACT_PREFIX) else USER_FACT_PREFIX + name


def review_verdicts(
    config: pytest.Config,
    result: BenchmarkResult,
    verdicts: Sequence[Verdict],
    baseline: BenchmarkResult | None,
) -> None:
    """Let pytest_torchbench_verdict implementations see or change each verdict in place."""
    for verdict in verdicts:
        config.hook.pytest_torchbench_verdict(
            config=config, verdict=verdict, result=result, baseline=baseline
        )


def report(
    config: pytest.Config, results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict]
) -> str | None:
    """Call pytest_torchbench_report; an exception becomes one error line (returned), not a
    crash."""
    try:
        config.hook.pytest_torchbench_report(
            config=config, results=list(results), verdicts=list(verdicts)
        )
    except Exception as exc:  # noqa: BLE001 - a user's report must not hide the run's own result
        return f"ERROR: a pytest_torchbench_report hook failed: {type(exc).__name__}: {exc}"
    return None
