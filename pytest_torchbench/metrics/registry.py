"""The metrics this process knows, in display order: the only list of them.

Options (mode names), the results model (JSON), storage (validation), the gate (limits,
comparability, judges), the session (measuring), the terminal, JUnit, Markdown and HTML all ask
this module and never name a metric. Each asks for the part of a metric it reads
(``get(name, Display)``: ``metrics/metric.py`` lists the parts), so what it may use is typed.
Built-in metrics are registered here; a plugin adds its own
through the ``pytest_torchbench_register_metrics`` hook (``pytest/hookspecs.py``), called at
configure time, and they are removed again at unconfigure (an in-process pytest run leaves no
trace).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from .calls import Calls
from .compile import Compile
from .gpu_time import GpuTime
from .instructions import Instructions
from .kernels import Kernels
from .memory import Memory
from .metric import Metric
from .ops import Ops
from .time import Time

_METRICS: dict[str, Metric] = {}

#: A part of a metric (``Identity``, ``Measuring``, ``Judging``, ``Explaining``, ``Display``), or
#: ``Metric`` itself for what registers and lists them.
Part = TypeVar("Part")


def register(metric: Metric) -> Metric:
    """Add a metric (after the built-in ones, in registration order). A second metric of the same
    name is an error: it would silently change how existing baselines are read and judged."""
    name = getattr(metric, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a metric needs a name that is an identifier, got {name!r} ({metric!r})")
    if not isinstance(metric, Metric):
        raise TypeError(
            f"metric {name!r} must be an instance of pytest_torchbench.Metric, got "
            f"{type(metric).__name__}"
        )
    value_type = getattr(metric, "value_type", None)
    if not (
        isinstance(value_type, type)
        and callable(getattr(value_type, "from_json", None))
        and callable(getattr(value_type, "to_json", None))
    ):
        raise TypeError(
            f"metric {name!r} needs a value_type: the class of its values, with to_json() "
            f"and a from_json(data) classmethod, got {value_type!r}"
        )
    existing = _METRICS.get(name)
    if existing is not None and existing is not metric:
        raise ValueError(f"metric {name!r} is registered twice ({existing!r} and {metric!r})")
    _METRICS[name] = metric
    return metric


def unregister(name: str) -> None:
    if name in BUILTIN:
        raise ValueError(f"metric {name!r} is built in")
    _METRICS.pop(name, None)


def get(name: str, part: type[Part]) -> Part:
    """The metric called ``name``, as the ``part`` of it the caller reads; KeyError when none is."""
    return _as(_METRICS[name], part)


def find(name: str, part: type[Part]) -> Part | None:
    """The metric called ``name``, as its ``part``; None when none is."""
    metric = _METRICS.get(name)
    return None if metric is None else _as(metric, part)


def known(name: str) -> bool:
    return name in _METRICS


def names() -> tuple[str, ...]:
    return tuple(_METRICS)


def all_metrics(part: type[Part]) -> Iterator[Part]:
    """Every registered metric in display order, as its ``part``."""
    return iter([_as(metric, part) for metric in _METRICS.values()])


def _as(metric: Metric, part: type[Part]) -> Part:
    if not isinstance(metric, part):  # every Metric is each of its parts
        raise TypeError(f"{metric!r} is not a {part.__name__}")
    return metric


def rank(name: str) -> int:
    """A metric's place in reports (registration order); unknown names last."""
    order = list(_METRICS)
    return order.index(name) if name in order else len(order)


def default_limits() -> dict[str, float]:
    return {metric.name: metric.default_limit for metric in _METRICS.values()}


def register_all(metrics: Iterable[Metric]) -> list[str]:
    """Register several; returns the names added (for unregistering them later)."""
    added = []
    for metric in metrics:
        if metric.name not in _METRICS:
            added.append(metric.name)
        register(metric)
    return added


def register_returned(returned: object, source: str) -> list[str]:
    """Register what one ``pytest_torchbench_register_metrics`` implementation returned (a list of
    Metric instances, or None); the names added. Anything else is a ValueError naming ``source``,
    and nothing of that return value stays registered. Shared by the pytest glue and the CLI."""
    if returned is None:
        return []
    if isinstance(returned, Metric) or not isinstance(returned, (list, tuple)):
        raise ValueError(
            f"{source} must return a list of pytest_torchbench.Metric instances or None, "
            f"got {type(returned).__name__}"
        )
    added: list[str] = []
    for metric in returned:
        try:
            added += register_all([metric])
        except (TypeError, ValueError) as exc:
            for name in added:
                unregister(name)
            raise ValueError(f"{source}: {exc}") from None
    return added


for _builtin in (Time(), Instructions(), Ops(), Calls(), Memory(), Kernels(), GpuTime(), Compile()):
    register(_builtin)
#: The metrics that ship with pytest-torchbench.
BUILTIN = names()
#: What ``--bench-*`` measures when no ``--bench-mode`` is given.
DEFAULT_MODES: tuple[str, ...] = ("time",)
