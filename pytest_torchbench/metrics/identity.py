"""A metric's identity and storage: what it is called, what one value is, the one number a value
reads as, and how a value travels to the baseline files and back (validated on the way in).

Every other part of a metric (:mod:`.measuring`, :mod:`.judge`, :mod:`.explaining`,
:mod:`.display`) builds on this one; the store and the results model read only this one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from ..common.text import safe_number


class Identity:
    """What every reader of a metric may ask: its name, its value type and their JSON."""

    #: The name in ``--bench-mode``, ``--bench-fail``, the JSON and the reports.
    name: ClassVar[str]
    #: The class of one measured value (``to_json()`` and a ``from_json(data)`` classmethod).
    value_type: ClassVar[type]
    #: A few words for ``--bench-mode --help``.
    help: ClassVar[str] = ""
    #: Environment facts that must match for a value to be comparable with its baseline's.
    comparability_facts: ClassVar[tuple[str, ...]] = ()

    def headline(self, value: Any) -> float:
        """The one number the tables show for a value (per call / per run); the default
        judge compares it. Required: abstract on :class:`~.metric.Metric`."""
        raise NotImplementedError

    def format_value(self, number: float) -> str:
        """A finite headline number as text (Markdown, HTML, messages)."""
        return safe_number(number, "g")

    def to_json(self, value: Any) -> dict[str, Any]:
        return value.to_json()  # type: ignore[no-any-return]

    def from_json(self, data: Mapping[str, Any]) -> Any:
        return self.value_type.from_json(data)  # type: ignore[attr-defined]

    #: JSON fields (top level) whose numbers must be > 0: a judge divides by them, and a zero
    #: baseline would let every comparison pass. Others must be finite and >= 0.
    positive_fields: ClassVar[tuple[str, ...]] = ()
    #: JSON fields that are whole numbers >= 1.
    count_fields: ClassVar[tuple[str, ...]] = ("number_per_run",)
    #: JSON fields (top level) whose values, at any depth, are numbers: a string such as "1" or a
    #: boolean (which Python's ``float()`` would take as 1.0) there is a corrupt file, not a count.
    number_fields: ClassVar[tuple[str, ...]] = ()
    #: JSON fields (top level) that are fractions from 0 to 1 (shares of something).
    fraction_fields: ClassVar[tuple[str, ...]] = ()

    def invalid_number(self, data: Any) -> str | None:
        """What is wrong with the numbers of this metric's JSON data, or None when nothing is.

        Every number anywhere must be finite and >= 0 (times, counts and bytes cannot be
        negative), ``positive_fields`` > 0 and ``count_fields`` whole numbers >= 1. The answer
        names the field as ``metric.field[index]`` so the user can find it in the file."""
        if not isinstance(data, Mapping):
            return None  # from_json reports the shape
        if self._sound(data):  # the common case, without naming every number's path
            return self._invalid_counts(data) or self._invalid_fractions(data)
        return self._named_problem(data)

    def _named_problem(self, data: Mapping[str, Any]) -> str | None:
        """The first problem of ``data``, its field named; None where there is none (the checks
        that :meth:`_sound` passes over in one go)."""
        return (
            self._invalid_counts(data)
            or self._invalid_typed(data)
            or self._invalid_fractions(data)
            or next(
                (
                    f"{path} is {_shown(number)}; {problem}"
                    for path, number, top in _numbers(data, self.name, None)
                    if (problem := _number_problem(number, top in self.positive_fields))
                ),
                None,
            )
        )

    def _invalid_counts(self, data: Mapping[str, Any]) -> str | None:
        for field in self.count_fields:
            if field in data:
                value = data[field]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    return f"{self.name}.{field} is {_shown(value)}; it must be a whole number >= 1"
        return None

    def _sound(self, data: Mapping[str, Any]) -> bool:
        """Whether every number is finite and >= 0 (> 0 in ``positive_fields``) and every leaf of
        ``number_fields`` a number: what the named checks would find nothing wrong with."""
        return all(
            _sound(value, key in self.positive_fields, key in self.number_fields)
            for key, value in data.items()
        )

    def _invalid_typed(self, data: Mapping[str, Any]) -> str | None:
        for field in self.number_fields:
            for path, leaf in _leaves(data.get(field, 0), f"{self.name}.{field}"):
                if isinstance(leaf, bool) or not isinstance(leaf, (int, float)):
                    return f"{path} is {_shown(leaf)}; it must be a number"
        return None

    def _invalid_fractions(self, data: Mapping[str, Any]) -> str | None:
        for field in self.fraction_fields:
            value = data.get(field, 0)
            if (
                not isinstance(value, bool)
                and isinstance(value, (int, float))
                and not 0 <= value <= 1
            ):
                return f"{self.name}.{field} is {_shown(value)}; it must be a fraction from 0 to 1"
        return None

    def __repr__(self) -> str:
        return f"<metric {self.name}>"


#: The largest whole number :func:`_sound` takes without converting it to a float (larger ones
#: get the full check, which reports one too large for a float).
_SOUND_INT = 2**1000


def _sound(value: Any, positive: bool, typed: bool) -> bool:
    """Whether every number inside ``value`` is finite and >= 0 (> 0 where ``positive``) and,
    where ``typed``, every leaf is a number: :meth:`Identity.invalid_number`'s rules in one pass,
    without naming paths (a baseline file holds tens of thousands of raw times). What counts as
    a number, an object or a list is what :func:`_numbers` and :func:`_leaves` count, subclasses
    included (a numpy float from a metric's ``to_json``)."""
    if isinstance(value, bool):
        return not typed
    if isinstance(value, (int, float)):
        return (0 < value if positive else 0 <= value) and value < math.inf and value <= _SOUND_INT
    if type(value) is list and all(type(item) is float for item in value):
        # raw times: a NaN fails every comparison
        if positive:
            return all(0.0 < item < math.inf for item in value)
        return all(0.0 <= item < math.inf for item in value)
    if isinstance(value, list):
        return all(_sound(item, positive, typed) for item in value)
    if isinstance(value, Mapping):
        return all(_sound(item, positive, typed) for item in value.values())
    return not typed  # a string, None: not a number, which only typed fields refuse


def _numbers(value: Any, path: str, field: str | None) -> Iterator[tuple[str, Any, str | None]]:
    """(path, number, top-level field) for every number inside ``value``, depth first. Names
    from the file are shown JSON-escaped unless they are plain identifiers (they reach
    terminals)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value, field
    elif isinstance(value, Mapping):
        for key, item in value.items():
            plain = field is None and str(key).isidentifier()
            yield from _numbers(
                item,
                f"{path}.{key}" if plain else f"{path}[{json.dumps(key)}]",
                key if field is None else field,
            )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]", field)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, value) for every value inside ``value`` that is neither an object nor a list."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(
                item, f"{path}.{key}" if str(key).isidentifier() else f"{path}[{json.dumps(key)}]"
            )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def _number_problem(value: float, strictly_positive: bool) -> str | None:
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return "it must be a finite number"
    if not finite:
        return "it must be a finite number"
    if strictly_positive and value <= 0:
        return "it must be > 0 (a zero or negative baseline would let every comparison pass)"
    if value < 0:
        return "it must be >= 0"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
