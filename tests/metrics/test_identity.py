"""A metric's numbers as they come from a file (metrics/identity.py, ``invalid_number``): the one
pass over a sound file and the checks that name what is wrong agree on every value."""

from __future__ import annotations

import copy
import enum
from typing import Any

import pytest

from pytest_torchbench.metrics.identity import Identity
from pytest_torchbench.metrics.registry import get
from pytest_torchbench.metrics.time import TimeMetric


class _Float(float):
    """A float of another type, as numpy's float64 is."""


class _List(list):  # type: ignore[type-arg]
    pass


class _Level(enum.IntEnum):
    BELOW = -1


#: Values a corrupt or hand-edited file can hold where a number belongs, and values a metric's
#: ``to_json`` can hand over when saving (numbers and lists of other types).
WRONG: list[Any] = [
    _Float("nan"),
    _Float(-2.0),
    _Level.BELOW,
    _List([1.0, float("nan")]),
    float("nan"),
    float("inf"),
    -1.0,
    -1,
    0.0,
    0,
    True,
    None,
    "1",
    2**1100,  # too large for a float
    [1.0, float("nan")],
    {"nested": -1},
    [True],
]


def _time_data() -> dict[str, Any]:
    metric = TimeMetric(
        number_per_run=4,
        raw_times=[1e-3 * (1.0 + i / 100) for i in range(40)],
        cpu_share=0.97,
        load=1.5,
        cpus=2,
        reference={"probe": 1, "compute": 2e-3},
    )
    return metric.to_json()


def test_a_sound_time_result_has_nothing_wrong() -> None:
    assert get("time", Identity).invalid_number(_time_data()) is None


@pytest.mark.parametrize("wrong", WRONG, ids=repr)
@pytest.mark.parametrize(
    "field",
    ["raw_times", "raw_times[3]", "median", "iqr", "cpu_share", "load", "cpus", "reference.compute",
     "label", "unknown"],
)  # fmt: skip
def test_the_one_pass_and_the_named_checks_agree(field: str, wrong: Any) -> None:
    """Wherever a wrong value sits (a whole field, one raw time, inside an object, a field no
    rule names), ``invalid_number`` finds a problem exactly where the named checks do, and then
    says what they say."""
    metric = get("time", Identity)
    data = _time_data()
    name, _, rest = field.partition("[")
    if rest:
        data[name][int(rest.rstrip("]"))] = copy.deepcopy(wrong)
    elif "." in field:
        outer, inner = field.split(".")
        data[outer][inner] = copy.deepcopy(wrong)
    else:
        data[field] = copy.deepcopy(wrong)
    found, named = metric.invalid_number(data), metric._named_problem(data)
    assert (found is None) == (named is None)
    if found is not None:
        assert found.startswith("time.")


@pytest.mark.parametrize("name", ["instructions", "memory", "ops", "calls", "compile", "kernels"])
@pytest.mark.parametrize("wrong", WRONG, ids=repr)
def test_every_metric_agrees_with_its_named_checks(name: str, wrong: Any) -> None:
    metric = get(name, Identity)
    fields = metric.number_fields + metric.positive_fields + metric.count_fields
    for field in fields:
        data: dict[str, Any] = {f: 1 for f in fields}
        data[field] = copy.deepcopy(wrong)
        assert (metric.invalid_number(data) is None) == (metric._named_problem(data) is None), field
