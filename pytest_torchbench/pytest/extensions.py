"""Calling the extension hooks (see hookspecs.py) from the pytest glue, in one place.

Kept apart from plugin.py so that the glue only gains one call per hook, and so that the rules
(how returned dicts merge, what a failing report hook does) are written down once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ..common.text import safe_text
from ..common.vocabulary import USER_FACT_PREFIX, Verdict
from ..judging.results import BenchmarkResult
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
    names are stored with the ``user.`` prefix. A hook that returns something else is one
    usage-error line naming it."""
    merged: dict[str, str] = {}
    # Registration order (pluggy calls the last registered first): the conftest closest to the
    # tests, registered last, has the final word.
    for implementation in _implementations(config.hook.pytest_torchbench_environment):
        facts = implementation.function(**{name: config for name in implementation.argnames})
        if facts is None:
            continue
        if not isinstance(facts, Mapping):
            raise pytest.UsageError(
                f"the pytest_torchbench_environment hook {_where(implementation.function)} "
                f"returned a {type(facts).__name__}, not a dict of facts or None: return e.g. "
                "{'image': os.environ.get('IMAGE', 'local')} (values become strings), or None"
            )
        merged.update({_fact_name(str(k)): str(v) for k, v in facts.items()})
    return merged


def _implementations(hook: Any) -> list[Any]:
    """The hook's implementations in registration order, without wrappers (they return nothing
    of their own)."""
    return [
        implementation
        for implementation in hook.get_hookimpls()
        if not (
            getattr(implementation, "hookwrapper", False)
            or getattr(implementation, "wrapper", False)
        )
    ]


def _where(function: Any) -> str:
    """``module.function (file)``, escaped: which implementation of a hook, for a message."""
    code = getattr(function, "__code__", None)
    return safe_text(
        f"{getattr(function, '__module__', '?')}.{getattr(function, '__name__', '?')} "
        f"({getattr(code, 'co_filename', '?')})"
    )


def _fact_name(name: str) -> str:
    """User facts are stored as ``user.NAME``: they can never clash with the built-in facts, and
    judgement knows that every one of them decides comparability, for every metric."""
    return name if name.startswith(USER_FACT_PREFIX) else USER_FACT_PREFIX + name


def review_verdicts(
    config: pytest.Config,
    result: BenchmarkResult,
    verdicts: Sequence[Verdict],
    baseline: BenchmarkResult | None,
) -> list[Verdict]:
    """Each verdict as the pytest_torchbench_verdict implementations leave it: each sees what the
    one before it returned, in pluggy's calling order (the last registered first)."""
    implementations = list(reversed(_implementations(config.hook.pytest_torchbench_verdict)))
    reviewed = []
    for verdict in verdicts:
        for implementation in implementations:
            arguments = {
                "config": config,
                "verdict": verdict,
                "result": result,
                "baseline": baseline,
            }
            verdict = _reviewed(implementation, verdict, arguments)
        reviewed.append(verdict)
    return reviewed


def _reviewed(implementation: Any, verdict: Verdict, arguments: dict[str, Any]) -> Verdict:
    """What one hook implementation made of ``verdict``: its return value, a Verdict or None
    (unchanged). A hook that changes the frozen verdict in place (as hooks did before verdicts
    were frozen) or returns something else fails the verdict, saying how to write the hook,
    rather than waive a regression silently or crash the run."""
    function = implementation.function
    where = safe_text(
        f"{getattr(function, '__module__', '?')}.{getattr(function, '__name__', '?')}"
    )
    try:
        returned = function(**{name: arguments[name] for name in implementation.argnames})
    except (dataclasses.FrozenInstanceError, AttributeError) as exc:
        if not isinstance(exc, dataclasses.FrozenInstanceError) and "tuple" not in str(exc):
            raise
        problem = "changed the verdict in place, which a frozen verdict does not allow"
    else:
        if returned is None or isinstance(returned, Verdict):
            return returned or verdict
        problem = f"returned a {type(returned).__name__}, not a Verdict or None"
    line = (
        f"the pytest_torchbench_verdict hook {where} {problem}: return a changed copy instead, "
        "e.g. `return verdict.replace(failed=False)`"
    )
    # In the summary: a failed verdict's details may be replaced by its explanation's re-run.
    return verdict.replace(failed=True, summary=f"{verdict.summary}; {line}")


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
