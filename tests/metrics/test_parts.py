"""A metric in parts (``metrics/metric.py``): each part declares its own members, and each reader of
a metric asks the registry for the part it reads, so what a module may use of a metric is typed
(mypy) and checked here by folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_torchbench.metrics.display import Display
from pytest_torchbench.metrics.explaining import Explaining
from pytest_torchbench.metrics.identity import Identity
from pytest_torchbench.metrics.judge import Judging
from pytest_torchbench.metrics.measuring import Measuring
from pytest_torchbench.metrics.metric import Metric

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchbench"
PARTS = (Identity, Measuring, Judging, Explaining, Display)

#: The parts each folder (or module) reads; a module's most specific entry holds.
READS = {
    "reports": {"Display"},
    "store": {"Identity"},
    "judging/results.py": {"Identity"},
    "judging/history.py": {"Identity"},
    "judging": {"Identity", "Judging", "Explaining"},
    "pytest": {"Identity", "Measuring", "Judging", "Explaining"},
    "cli.py": {"Identity"},
    "bisect.py": {"Identity"},
}


def members(cls: type) -> set[str]:
    declared = set(vars(cls)) | set(vars(cls).get("__annotations__", {}))
    return {name for name in declared if not name.startswith("_")}


def test_the_parts_split_the_members_of_a_metric() -> None:
    seen: set[str] = set()
    for part in PARTS:
        own = members(part)
        assert not own & seen, f"{part.__name__} repeats {sorted(own & seen)}"
        assert len(own) <= 13, f"{part.__name__} has {len(own)} members"
        seen |= own
    # Metric adds nothing but the two members it makes abstract (required of every metric).
    assert members(Metric) == {"measure", "headline"}
    assert Metric.__abstractmethods__ == frozenset({"measure", "headline"})
    # name and value_type are annotations only: every metric says them (the registry checks)
    public = {name for name in dir(Metric) if not name.startswith("_")}
    assert public | {"name", "value_type"} == seen


def _reads(path: Path) -> set[str]:
    """The parts a module asks the registry for (``registry.get(name, Part)`` and the like)."""
    parts = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "registry"
            and node.func.attr in {"get", "find", "all_metrics"}
        ):
            part = node.args[-1]
            parts.add(part.id if isinstance(part, ast.Name) else ast.unparse(part))
    return parts


def _allowed(relative: str) -> set[str]:
    for prefix in sorted(READS, key=len, reverse=True):
        if relative == prefix or relative.startswith(prefix + "/"):
            return READS[prefix]
    return set()


def test_each_reader_asks_for_the_part_it_reads() -> None:
    wrong = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("metrics/"):
            continue
        extra = _reads(path) - _allowed(relative)
        if extra:
            wrong[relative] = sorted(extra)
    assert not wrong, f"modules reading parts of a metric they should not: {wrong}"


def test_the_check_sees_a_module_reading_the_whole_metric(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from x import registry\nregistry.get('ops', Metric).measure\n")
    assert _reads(module) == {"Metric"}
    assert "Metric" not in _allowed("reports/terminal.py")


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_every_metric_is_each_of_its_parts(part: type) -> None:
    from pytest_torchbench.metrics import registry

    assert all(isinstance(metric, part) for metric in registry.all_metrics(Metric))
    assert [m.name for m in registry.all_metrics(part)] == list(registry.names())
