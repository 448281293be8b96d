"""The metrics registry and the layering it relies on; the committed baselines survive the move
of every metric into its own module byte for byte."""
from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

import pytest

from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.base import Metric
from pytest_torchbench.store.storage import parse_baseline_document, render_baseline_document

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_torchbench"
COMMITTED = sorted((ROOT / "baselines").rglob("*.json"))


_NODEID_LINE = re.compile(r'^ {3}"nodeid": ".*",\n$')


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_baselines_load_and_render_byte_for_byte(path: Path) -> None:
    """render(parse(file)) is the file: the metric modules read and write exactly what the old
    tables did. The committed files predate the ``nodeid`` field, which any re-save adds (the old
    code too: its render of these files was checked identical, sha256 per file, when the metrics
    moved), so the only difference allowed is that one added line per benchmark."""
    text = path.read_text(encoding="utf-8")
    entries = parse_baseline_document(text, str(path))
    assert entries, "a committed baseline file with no benchmarks"
    module = next(iter(entries.values())).module
    rendered = render_baseline_document(module, entries.values())
    diff = [line for line in difflib.ndiff(text.splitlines(True), rendered.splitlines(True))
            if line[:2] in ("- ", "+ ")]
    assert all(line.startswith("+ ") and _NODEID_LINE.match(line[2:]) for line in diff), diff[:5]
    # one added line per entry saved before the field existed; none for a file saved since
    assert len(diff) == sum(1 for e in entries.values() if f'"{e.key}": {{' in text) - text.count('\n   "nodeid": ')
    again = parse_baseline_document(rendered, str(path))
    assert render_baseline_document(module, again.values()) == rendered


def test_committed_baselines_exist() -> None:
    assert COMMITTED, "baselines/ has no committed files: the byte-for-byte test above tested nothing"


def test_builtin_metrics_in_display_order() -> None:
    assert registry.names()[:8] == ("time", "instructions", "ops", "calls", "memory", "kernels", "gpu_time", "compile")
    assert registry.BUILTIN == ("time", "instructions", "ops", "calls", "memory", "kernels", "gpu_time", "compile")
    for metric in registry.all_metrics():
        assert isinstance(metric, Metric) and metric.name.isidentifier()
        assert metric.default_limit >= 0 and metric.table_title


def test_a_second_metric_of_the_same_name_is_refused() -> None:
    class Other(registry.Time):  # type: ignore[misc,name-defined]
        pass

    with pytest.raises(ValueError, match="registered twice"):
        registry.register(Other())
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("time")
    assert type(registry.get("time")).__name__ == "Time"


def _imports(path: Path) -> set[str]:
    """The pytest_torchbench modules a file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("pytest_torchbench")}


# What a metric may import: the shared vocabulary, text, statistics, the compat shims, engines and
# other metric modules (the registry imports them). Never the results model, the gate, storage,
# a report or the pytest glue.
_ALLOWED = ("pytest_torchbench.core.vocabulary", "pytest_torchbench.core.text", "pytest_torchbench.core.statistics",
            "pytest_torchbench._compat", "pytest_torchbench.engines", "pytest_torchbench.metrics")


@pytest.mark.parametrize("path", sorted((PACKAGE / "metrics").glob("*.py")), ids=lambda p: p.name)
def test_metrics_import_only_lower_layers(path: Path) -> None:
    upward = sorted(name for name in _imports(path) if not name.startswith(_ALLOWED))
    assert upward == [], f"{path.name} imports {upward}"


@pytest.mark.parametrize("name", ["core/vocabulary.py", "core/text.py", "_compat.py"])
def test_vocabulary_imports_nothing_above_it(name: str) -> None:
    allowed = ("pytest_torchbench.core.text", "pytest_torchbench.core.vocabulary")
    assert sorted(n for n in _imports(PACKAGE / name) if not n.startswith(allowed)) == []


_NAMES = ("time", "instructions", "ops", "calls", "memory", "kernels", "gpu_time", "compile")
#: Modules that iterate over the registry and must never name a metric (as a string literal).
_GENERIC = ("pytest/options.py", "store/storage.py", "core/judgement.py", "core/gate.py", "pytest/session.py", "core/results.py",
            "reports/terminal.py", "reports/junit.py", "reports/markdown.py", "reports/html.py",
            "reports/common.py", "cli.py", "pytest/controller.py", "core/explain.py")


@pytest.mark.parametrize("name", _GENERIC)
def test_generic_modules_never_name_a_metric(name: str) -> None:
    tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
    # A profile's top op has a "calls" field, read as ``op.get("calls", 0)``: a field, not the metric.
    fields = {id(node.args[0]) for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
              and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "op"}
    named = sorted({node.value for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _NAMES
                    and id(node) not in fields})
    assert named == [], f"{name} names {named}"


def test_type_cache_misses_are_kept_apart_from_the_count_and_named_when_they_move() -> None:
    """Which (type, name) pairs collide in CPython's type cache follows version tags and string
    addresses, i.e. what ran before: a conftest consuming one tag moved a count by 10.6%
    (docs/design/counting.md). Their inclusive cost is not counted, and shown when it moves."""
    from pytest_torchbench.metrics.instructions import InstructionsMetric
    from pytest_torchbench.core.vocabulary import Policy

    exclusive = {"Objects/typeobject.c:find_name_in_mro": 2_000, "Python/ceval.c:_PyEval_EvalFrameDefault": 8_000}
    collided = InstructionsMetric.from_counts(exclusive, 10_000 + 9_000, 10, type_cache_misses=9_000)
    assert collided.instructions_per_run == 1_000 and collided.type_cache_misses == 900
    assert collided.functions["Objects/typeobject.c:find_name_in_mro"] == 200  # the table stays as counted
    clean = InstructionsMetric.from_counts({"Python/ceval.c:_PyEval_EvalFrameDefault": 8_000, "x": 2_000}, 10_000, 10)
    assert clean.instructions_per_run == 1_000 and clean.type_cache_misses == 0
    again = InstructionsMetric.from_json(collided.to_json())
    assert again.type_cache_misses == 900 and again.instructions_per_run == 1_000
    assert "type_cache_misses" not in clean.to_json()  # nothing stored when there were none
    verdict = registry.get("instructions").judge("t.py::t", collided, clean, 0.01, Policy())
    assert verdict.status == "unchanged"
    assert any(line.startswith("type-cache misses (not counted") and "0 -> 900 instructions per run" in line
               for line in verdict.details)
    quiet = registry.get("instructions").judge("t.py::t", clean, clean, 0.01, Policy())
    assert not any("type-cache" in line for line in quiet.details)
