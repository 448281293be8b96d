"""The words every layer shares: verdict statuses, ``Verdict``, ``Policy``, ``Environment``,
number rounding and the figures a metric can ask a report to draw.

Why a module of its own, at the bottom: a metric (``metrics/``) judges and shows itself, so it
needs ``Verdict`` and ``Policy``; the results model, the gate, storage and the reports need them
too. Kept here, below all of them, a metric never has to import the results model, the gate or a
report, and nothing imports upward. This module imports nothing of ours but ``text``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

# --------------------------------------------------------------------------------------------------
# Verdict statuses
# --------------------------------------------------------------------------------------------------

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
MISSING = "missing"
NOT_COMPARABLE = "not comparable"
#: A time slowdown beyond the limit but within what the machine's load explains: listed, not failed.
NOISY = "noisy"
#: A time benchmark measured alternately with its base whose paired ratios spread more than its
#: limit: the gate cannot judge it at that limit. Not failed, not passed: in CI it counts as
#: "could not judge", as a baseline that is not comparable does.
TOO_NOISY = "too noisy"
#: A regression the change accepts (a ``Bench-Accept:`` trailer, ``--bench-accept``): shown with its
#: reason, not failed (judging/accept.py).
ACCEPTED = "accepted"

DEFAULT_ALPHA = 0.001

#: Prefix of environment facts added by the pytest_torchbench_environment hook.
USER_FACT_PREFIX = "user."


def round_sig(value: float, digits: int = 6) -> float:
    """Round to significant digits so that JSON numbers stay short and stable across platforms."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.{digits}g}")


def as_float(value: Any) -> float:
    """float() that turns an integer too large for a float into inf instead of raising."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def format_percent(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%" if abs(fraction) >= 0.001 else f"{fraction * 100:+.3f}%"


#: Time units from largest to smallest, as torch.utils.benchmark names them.
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def time_unit(seconds: float) -> tuple[str, float]:
    """(unit, scale) to show ``seconds`` in: the largest unit it is at least one of.

    Why not torch's ``select_unit``: it raises on 0, NaN and inf (``int(log10(0) // 3)``), picks
    seconds for anything under a nanosecond, and builds a tensor per call; a baseline can hold any
    of those values (measured with torch 2.13: ``select_unit(0.0)`` is a ValueError). Same units."""
    if seconds > 0 and math.isfinite(seconds):
        for unit, scale in TIME_UNITS:
            if seconds >= scale:
                return unit, scale
        return "ns", 1e-9
    return "s", 1.0


def format_seconds(seconds: float) -> str:
    """Four significant digits in the unit :func:`time_unit` picks (torch's ``trim_sigfig`` goes
    through a float32 tensor: ``trim_sigfig(0.1234567, 3)`` is 0.12300000339746475)."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    unit, scale = time_unit(abs(seconds))
    return f"{seconds / scale:.4g} {unit}"


# --------------------------------------------------------------------------------------------------
# Environment fingerprint
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Environment:
    """Facts about where a metric was measured; each metric says which facts matter to it."""

    facts: Mapping[str, str]

    @property
    def id(self) -> str:
        """A short content hash, so a baseline file can refer to one environment from many
        entries."""
        blob = json.dumps(dict(self.facts), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def to_json(self) -> dict[str, str]:
        return {key: str(self.facts[key]) for key in sorted(self.facts)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Environment:
        if not isinstance(data, Mapping):
            raise ValueError("environment must be an object")
        return cls({str(k): str(v) for k, v in data.items()})

    def merged(self, extra: Mapping[str, str]) -> Environment:
        return Environment({**self.facts, **{k: str(v) for k, v in extra.items()}})


# --------------------------------------------------------------------------------------------------
# Policy and verdicts
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Policy:
    """What the user asked of the gate. ``limits`` holds the limits the user gave; a metric not in
    it is judged with its own default limit (``Metric.default_limit``)."""

    limits: dict[str, float] = dataclasses.field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA
    strict_environment: bool = False  # a not-comparable baseline fails
    fail_stale: bool = False  # an improvement beyond the limit fails (baselines kept exact)

    def with_limits(self, overrides: Mapping[str, float]) -> Policy:
        return dataclasses.replace(self, limits={**self.limits, **overrides})


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One metric of one benchmark judged. Frozen: each step of the verdict path
    (``judging/judgement.py``) returns a new one (:meth:`replace`), so what a report shows is what
    the path built, and no later step can change a verdict another step already acted on.
    ``failed`` is the path's decision from the status and the policy (strictness, stale
    baselines), which the user's ``pytest_torchbench_verdict`` hook may override by returning a
    changed copy."""

    key: str
    metric: str
    status: str
    baseline: float | None = None
    current: float | None = None
    limit: float = 0.0
    p_value: float | None = None
    summary: str = ""
    details: Sequence[str] = ()
    failed: bool = False

    def __post_init__(self) -> None:
        # A string is a sequence too: read from a file, it would become one line per character.
        if isinstance(self.details, (str, bytes)):
            raise TypeError(f"verdict details must be a list of lines, got {self.details!r}")
        object.__setattr__(self, "details", tuple(self.details))

    def replace(self, **changes: Any) -> Verdict:
        """A copy with ``changes`` (the fields' names), e.g. ``verdict.replace(failed=False)``."""
        return dataclasses.replace(self, **changes)

    def with_details(self, before: Sequence[str] = (), after: Sequence[str] = ()) -> Verdict:
        """A copy with lines added before and after the details."""
        return dataclasses.replace(self, details=(*before, *self.details, *after))

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.current is None or self.baseline == 0:
            return None
        return self.current / self.baseline - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "metric": self.metric,
            "status": self.status,
            "baseline": self.baseline,
            "current": self.current,
            "delta": self.delta,
            "limit": self.limit,
            "p_value": self.p_value,
            "summary": self.summary,
            "details": list(self.details),
            "failed": self.failed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


# --------------------------------------------------------------------------------------------------
# Figures: what a metric asks the HTML report to draw (the report owns the drawing)
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Heading:
    """A plot's title line (escaped by the report)."""

    text: str


@dataclasses.dataclass(frozen=True)
class Distribution:
    """Per-call samples of the current run against the baseline's (density, quartiles)."""

    current: Sequence[float]
    baseline: Sequence[float] | None


@dataclasses.dataclass(frozen=True)
class Bars:
    """Signed changes (or plain values when ``neutral``) as horizontal bars, one per name."""

    items: Sequence[tuple[str, float]]
    axis: str
    neutral: bool = False
    label_width: int | None = None


#: One plot: its parts, drawn in order in one box of the card.
Plot = Sequence["Heading | Distribution | Bars"]
