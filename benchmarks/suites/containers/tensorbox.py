"""A small Python-heavy library of tensor containers: dataclass-like classes with long inheritance
chains and many attribute lookups per call (the hard case for counting under ``-n``: its counts
follow CPython's caches and specialisation, not only the tensors' work)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch


class Field:
    """A declared field: name, default, an optional check."""

    def __init__(
        self, name: str, default: Any = None, check: Callable[[Any], bool] | None = None
    ) -> None:
        self.name = name
        self.default = default
        self.check = check


class Base:
    """Fields are declared per level of the hierarchy and gathered along the MRO at each call."""

    FIELDS: tuple[Field, ...] = ()

    def __init__(self, **values: Any) -> None:
        for field in self.all_fields():
            value = values.pop(field.name, field.default)
            if field.check is not None and value is not None and not field.check(value):
                raise TypeError(f"{type(self).__name__}.{field.name}: bad value {value!r}")
            setattr(self, field.name, value)
        if values:
            raise TypeError(f"unknown fields {sorted(values)}")

    @classmethod
    def all_fields(cls) -> Iterator[Field]:
        seen = set()
        for klass in reversed(cls.__mro__):
            for field in klass.__dict__.get("FIELDS", ()):
                if field.name not in seen:
                    seen.add(field.name)
                    yield field

    def items(self) -> Iterator[tuple[str, Any]]:
        for field in self.all_fields():
            yield field.name, getattr(self, field.name)

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Base:
        values = {}
        for name, value in self.items():
            if isinstance(value, torch.Tensor):
                values[name] = fn(value)
            elif isinstance(value, Base):
                values[name] = value.apply(fn)
            else:
                values[name] = value
        return type(self)(**values)

    def flatten(self) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        for _, value in self.items():
            if isinstance(value, torch.Tensor):
                out.append(value)
            elif isinstance(value, Base):
                out.extend(value.flatten())
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for (_, a), (_, b) in zip(self.items(), other.items()):  # type: ignore[attr-defined]
            if isinstance(a, torch.Tensor):
                if not torch.equal(a, b):
                    return False
            elif a != b:
                return False
        return True


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _level(name: str, parent: type, fields: list[str]) -> type:
    return type(name, (parent,), {"FIELDS": tuple(Field(f, None, _is_tensor) for f in fields)})


def chain(prefix: str, depth: int, per_level: int) -> type:
    """A ``depth``-deep class chain adding ``per_level`` tensor fields at each level."""
    klass: type = Base
    for level in range(depth):
        klass = _level(
            f"{prefix}{level}", klass, [f"{prefix.lower()}{level}_{i}" for i in range(per_level)]
        )
    return klass


Observation = chain("Obs", 8, 2)
Action = chain("Act", 4, 2)
Reward = chain("Rew", 2, 1)


class Step(Base):
    FIELDS = (Field("obs"), Field("action"), Field("reward"), Field("index", 0))


def make_tensors(klass: type, size: int) -> dict[str, torch.Tensor]:
    return {field.name: torch.full((size,), float(i)) for i, field in enumerate(klass.all_fields())}


def make_step(size: int) -> Step:
    return Step(
        obs=Observation(**make_tensors(Observation, size)),
        action=Action(**make_tensors(Action, size)),
        reward=Reward(**make_tensors(Reward, size)),
        index=1,
    )


def stack(steps: list[Step]) -> Step:
    """One Step whose tensors stack the steps' tensors (a batch)."""
    first = steps[0]

    def stacked(klass: type, parts: list[Base]) -> Base:
        values = {}
        for field in klass.all_fields():
            column = [getattr(p, field.name) for p in parts]
            if isinstance(column[0], torch.Tensor):
                values[field.name] = torch.stack(column)
            elif isinstance(column[0], Base):
                values[field.name] = stacked(type(column[0]), column)
            else:
                values[field.name] = column[0]
        return klass(**values)

    return stacked(type(first), steps)  # type: ignore[return-value]
