"""Profiler options: how ``torch.profiler.profile`` is configured, as plain values.

Why a module of its own: the marker (``profile={...}``), the ``bench_profiler`` fixture and
``--bench-profile`` all describe a profiler set-up; validating it here, once, turns a typo into a
line naming the keyword instead of a TypeError deep inside torch while measuring.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch.profiler import ProfilerActivity

__all__ = ["ProfilerOptions", "ScheduleOptions", "cuda_usable", "default_activities"]


def cuda_usable() -> bool:
    """Whether a CUDA device can be used by this process (the profiler's CUDA activity, CUDA peak
    memory and kernel counts need one)."""
    return bool(torch.cuda.is_available())


def default_activities() -> tuple[ProfilerActivity, ...]:
    """CPU always, CUDA when a CUDA device is usable: the profiler's own default, made explicit so
    that it is recorded in results and the same options can be replayed."""
    activities = [ProfilerActivity.CPU]
    if cuda_usable():
        activities.append(ProfilerActivity.CUDA)
    return tuple(activities)


@dataclasses.dataclass(frozen=True)
class ScheduleOptions:
    """Arguments of ``torch.profiler.schedule``; kept as data so they can be validated, printed and
    stored, which a schedule callable cannot."""

    wait: int
    warmup: int
    active: int
    repeat: int = 1
    skip_first: int = 0

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "active", "repeat", "skip_first"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"profiler schedule {name} must be a non-negative int, got {value!r}"
                )
        if self.active < 1:
            raise ValueError("profiler schedule active must be >= 1")

    @property
    def steps_needed(self) -> int:
        """Steps until the first cycle's trace is complete."""
        return self.skip_first + self.wait + self.warmup + self.active

    def build(self) -> Callable[[int], Any]:
        return torch.profiler.schedule(
            wait=self.wait,
            warmup=self.warmup,
            active=self.active,
            repeat=self.repeat,
            skip_first=self.skip_first,
        )


_ACTIVITY_NAMES: dict[str, ProfilerActivity] = {
    "cpu": ProfilerActivity.CPU,
    "cuda": ProfilerActivity.CUDA,
}


@dataclasses.dataclass(frozen=True)
class ProfilerOptions:
    """How to configure ``torch.profiler.profile``; a plain value so marker keywords, ini options
    and stored results can all describe the same profiler set-up."""

    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    schedule: ScheduleOptions | None = None
    activities: tuple[ProfilerActivity, ...] = dataclasses.field(default_factory=default_activities)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ProfilerOptions:
        """Build options from user keywords (marker or fixture arguments).

        Unknown keywords are an error naming the keyword: a typo such as ``profile_memroy=True``
        would otherwise silently measure something else than the author asked for.
        ``schedule`` may be a :class:`ScheduleOptions`, a mapping of its fields or None;
        ``activities`` may hold ``ProfilerActivity`` members or the strings ``"cpu"`` / ``"cuda"``.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(
                f"unknown profiler option {unknown[0]!r}"
                + (f" (and {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else "")
                + f"; valid options are: {', '.join(sorted(known))}"
            )
        values: dict[str, Any] = {}
        for name in ("record_shapes", "profile_memory", "with_stack", "with_flops"):
            if name in kwargs:
                value = kwargs[name]
                if not isinstance(value, bool):
                    raise TypeError(
                        f"profiler option {name!r} must be True or False, got {value!r}"
                    )
                values[name] = value
        if "schedule" in kwargs:
            values["schedule"] = _coerce_schedule(kwargs["schedule"])
        if "activities" in kwargs:
            values["activities"] = _coerce_activities(kwargs["activities"])
        return cls(**values)

    @property
    def one_cycle(self) -> bool:
        """Whether the run records one cycle (no schedule, or one that does not repeat: torch's
        ``repeat=0`` repeats until the end)."""
        return self.schedule is None or self.schedule.repeat == 1

    def profile_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.profiler.profile`` (without ``on_trace_ready``)."""
        return {
            "activities": list(self.activities),
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "with_flops": self.with_flops,
            "schedule": self.schedule.build() if self.schedule is not None else None,
        }

    @property
    def uses_cuda(self) -> bool:
        return ProfilerActivity.CUDA in self.activities


def _coerce_schedule(value: object) -> ScheduleOptions | None:
    if value is None or isinstance(value, ScheduleOptions):
        return value
    if isinstance(value, Mapping):
        fields = {f.name for f in dataclasses.fields(ScheduleOptions)}
        unknown = sorted(set(value) - fields)
        if unknown:
            raise TypeError(
                f"unknown profiler schedule option {unknown[0]!r}; "
                f"valid: {', '.join(sorted(fields))}"
            )
        return ScheduleOptions(**value)
    raise TypeError(
        "profiler option 'schedule' must be None, a ScheduleOptions or a mapping with "
        f"wait/warmup/active[/repeat/skip_first], got {value!r}"
    )


def _coerce_activities(value: object) -> tuple[ProfilerActivity, ...]:
    if isinstance(value, (str, ProfilerActivity)):
        value = [value]
    if not isinstance(value, Iterable):
        raise TypeError(f"profiler option 'activities' must be a list of activities, got {value!r}")
    result: list[ProfilerActivity] = []
    for item in value:
        if isinstance(item, str):
            key = item.lower()
            if key not in _ACTIVITY_NAMES:
                raise ValueError(
                    f"unknown profiler activity {item!r}; use one of {', '.join(_ACTIVITY_NAMES)}"
                )
            item = _ACTIVITY_NAMES[key]
        if not isinstance(item, ProfilerActivity):
            raise TypeError(f"profiler activity must be a ProfilerActivity or a name, got {item!r}")
        if item not in result:
            result.append(item)
    if not result:
        raise ValueError("profiler option 'activities' must not be empty")
    return tuple(result)
