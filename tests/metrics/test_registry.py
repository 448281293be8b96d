"""The metrics registry and the layering it relies on; the committed baselines survive the move
of every metric into its own module byte for byte."""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

import pytest

from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.metric import Metric
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
    diff = [
        line
        for line in difflib.ndiff(text.splitlines(True), rendered.splitlines(True))
        if line[:2] in ("- ", "+ ")
    ]
    assert all(line.startswith("+ ") and _NODEID_LINE.match(line[2:]) for line in diff), diff[:5]
    # one added line per entry saved before the field existed; none for a file saved since
    assert len(diff) == sum(1 for e in entries.values() if f'"{e.key}": {{' in text) - text.count(
        '\n   "nodeid": '
    )
    again = parse_baseline_document(rendered, str(path))
    assert render_baseline_document(module, again.values()) == rendered


def test_committed_baselines_exist() -> None:
    assert COMMITTED, (
        "baselines/ has no committed files: the byte-for-byte test above tested nothing"
    )


def test_builtin_metrics_in_display_order() -> None:
    assert registry.names()[:8] == (
        "time",
        "instructions",
        "ops",
        "calls",
        "memory",
        "kernels",
        "gpu_time",
        "compile",
    )
    assert registry.BUILTIN == (
        "time",
        "instructions",
        "ops",
        "calls",
        "memory",
        "kernels",
        "gpu_time",
        "compile",
    )
    for metric in registry.all_metrics(Metric):
        assert isinstance(metric, Metric) and metric.name.isidentifier()
        assert metric.default_limit >= 0 and metric.table_title


def test_a_second_metric_of_the_same_name_is_refused() -> None:
    class Other(registry.Time):  # type: ignore[misc,name-defined]
        pass

    with pytest.raises(ValueError, match="registered twice"):
        registry.register(Other())
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("time")
    assert type(registry.get("time", Metric)).__name__ == "Time"


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
_ALLOWED = (
    "pytest_torchbench.common.vocabulary",
    "pytest_torchbench.common.text",
    "pytest_torchbench.common.statistics",
    "pytest_torchbench.common.compat",
    "pytest_torchbench.engines",
    "pytest_torchbench.metrics",
)


@pytest.mark.parametrize("path", sorted((PACKAGE / "metrics").glob("*.py")), ids=lambda p: p.name)
def test_metrics_import_only_lower_layers(path: Path) -> None:
    upward = sorted(name for name in _imports(path) if not name.startswith(_ALLOWED))
    assert upward == [], f"{path.name} imports {upward}"


@pytest.mark.parametrize("name", ["common/vocabulary.py", "common/text.py", "common/compat.py"])
def test_vocabulary_imports_nothing_above_it(name: str) -> None:
    allowed = ("pytest_torchbench.common.text", "pytest_torchbench.common.vocabulary")
    assert sorted(n for n in _imports(PACKAGE / name) if not n.startswith(allowed)) == []


_NAMES = ("time", "instructions", "ops", "calls", "memory", "kernels", "gpu_time", "compile")
#: Modules that iterate over the registry and must never name a metric (as a string literal).
_GENERIC = (
    "pytest/options.py",
    "store/storage.py",
    "judging/judgement.py",
    "judging/gate.py",
    "pytest/session.py",
    "judging/results.py",
    "reports/terminal.py",
    "reports/junit.py",
    "reports/markdown.py",
    "reports/html.py",
    "reports/common.py",
    "cli.py",
    "pytest/controller.py",
    "pytest/children.py",
)


@pytest.mark.parametrize("name", _GENERIC)
def test_generic_modules_never_name_a_metric(name: str) -> None:
    tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
    # A profile's top op has a "calls" field, read as ``op.get("calls", 0)``: a field, not the
    # metric.
    fields = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "op"
    }
    named = sorted(
        {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in _NAMES
            and id(node) not in fields
        }
    )
    assert named == [], f"{name} names {named}"


def test_type_cache_misses_are_kept_apart_from_the_count_and_named_when_they_move() -> None:
    """Which (type, name) pairs collide in CPython's type cache follows version tags and string
    addresses, i.e. what ran before: a conftest consuming one tag moved a count by 10.6%
    (docs/design/counting.md). Their inclusive cost is not counted, and shown when it moves."""
    from pytest_torchbench.common.vocabulary import Policy
    from pytest_torchbench.metrics.instructions import InstructionsMetric

    exclusive = {
        "Objects/typeobject.c:find_name_in_mro": 2_000,
        "Python/ceval.c:_PyEval_EvalFrameDefault": 8_000,
    }
    collided = InstructionsMetric.from_counts(
        exclusive, 10_000 + 9_000, 10, type_cache_misses=9_000
    )
    assert collided.instructions_per_run == 1_000 and collided.type_cache_misses == 900
    assert (
        collided.functions["Objects/typeobject.c:find_name_in_mro"] == 200
    )  # the table stays as counted
    clean = InstructionsMetric.from_counts(
        {"Python/ceval.c:_PyEval_EvalFrameDefault": 8_000, "x": 2_000}, 10_000, 10
    )
    assert clean.instructions_per_run == 1_000 and clean.type_cache_misses == 0
    again = InstructionsMetric.from_json(collided.to_json())
    assert again.type_cache_misses == 900 and again.instructions_per_run == 1_000
    assert "type_cache_misses" not in clean.to_json()  # nothing stored when there were none
    verdict = registry.get("instructions", Metric).judge("t.py::t", collided, clean, 0.01, Policy())
    assert verdict.status == "unchanged"
    assert any(
        line.startswith("type-cache misses (not counted")
        and "0 -> 900 instructions per run" in line
        for line in verdict.details
    )
    quiet = registry.get("instructions", Metric).judge("t.py::t", clean, clean, 0.01, Policy())
    assert not any("type-cache" in line for line in quiet.details)


def test_a_counted_dump_leaves_the_type_cache_misses_and_the_lookups_own_cost_out(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The controller reads a worker's dump: ``find_name_in_mro`` (called from ``_PyType_Lookup``,
    200 with what it called) and the lookups' own rows (70 in typeobject.c, 5 inlined from
    object.h, 9 in 3.13's ``_PyType_LookupRef``) are out of the count; the table keeps them."""
    from pytest_torchbench.metrics.instructions import InstructionsLaunch, InstructionsMetric

    dump = tmp_path / "callgrind.out.1.1"
    dump.write_text(
        "\n".join(
            [
                "version: 1",
                "creator: callgrind-3.19.0",
                "pid: 1",
                "cmd: python",
                "part: 1",
                "desc: Trigger: Client Request: r",
                "positions: line",
                "events: Ir",
                "summary: 0",
                "fl=(1) Objects/typeobject.c",
                "fn=(1) _PyType_Lookup",
                "0 70",
                "cfn=(2) find_name_in_mro",
                "calls=1 0",
                "0 200",
                "fi=(2) Include/object.h",
                "0 5",
                "fe=(1)",
                "fn=(2) find_name_in_mro",
                "0 150",
                "cfl=(3) Objects/dictobject.c",
                "cfn=(3) _Py_dict_lookup",
                "calls=3 0",
                "0 50",
                "fn=(4) _PyType_LookupRef",
                "0 9",
                "fl=(3)",
                "fn=(3)",
                "0 50",
                "fl=(4) Python/ceval.c",
                "fn=(5) eval",
                "0 1000",
                "totals: 1284",
                "",
            ]
        )
    )
    data = InstructionsLaunch().finish(
        {"dump": str(dump), "number_per_run": 10, "warmup": 10}, tmp_path
    )
    metric = InstructionsMetric.from_json(data)
    assert metric.type_cache_misses == 20 and metric.type_cache_lookups == 8.4
    assert metric.instructions_per_run == 100  # (1284 - 200 - 84) / 10: the interpreter's own work
    assert metric.functions["Objects/typeobject.c:_PyType_Lookup"] == 7.0
    assert not dump.exists()


class _Value:
    def __init__(self, n: float) -> None:
        self.n = n

    def to_json(self) -> dict[str, float]:
        return {"n": self.n}

    @classmethod
    def from_json(cls, data: dict[str, float]) -> _Value:
        return cls(data["n"])


def test_a_metric_must_say_measure_and_headline() -> None:
    """The required part of the interface is abstract: a subclass that leaves out ``measure`` or
    ``headline`` fails when it is instantiated (naming what is missing), not at its first report."""
    assert Metric.__abstractmethods__ == frozenset({"measure", "headline"})

    class NoHeadline(Metric):
        name = "no_headline"
        value_type = _Value

        def measure(self, fn, context):  # type: ignore[no-untyped-def]
            return _Value(1)

    with pytest.raises(TypeError, match="headline"):
        NoHeadline()  # type: ignore[abstract]

    class NoMeasure(Metric):
        name = "no_measure"
        value_type = _Value

        def headline(self, value):  # type: ignore[no-untyped-def]
            return value.n

    with pytest.raises(TypeError, match="measure"):
        NoMeasure()  # type: ignore[abstract]


def test_a_metric_without_a_value_type_is_refused_at_registration() -> None:
    class Minimal(Metric):
        name = "minimal_probe"

        def measure(self, fn, context):  # type: ignore[no-untyped-def]
            return _Value(1)

        def headline(self, value):  # type: ignore[no-untyped-def]
            return value.n

    with pytest.raises(TypeError, match="needs a value_type"):
        registry.register(Minimal())
    assert registry.find("minimal_probe", Metric) is None
    Minimal.value_type = _Value
    try:
        registry.register(Minimal())
        assert registry.get("minimal_probe", Metric).from_json({"n": 3.0}).n == 3.0
    finally:
        registry.unregister("minimal_probe")


def test_the_defaults_derive_from_the_headline() -> None:
    """A metric that says only the four required members is judged, shown and stored."""
    from pytest_torchbench.common.vocabulary import Policy

    class Minimal(Metric):
        name = "minimal"
        value_type = _Value

        def measure(self, fn, context):  # type: ignore[no-untyped-def]
            return _Value(fn())

        def headline(self, value):  # type: ignore[no-untyped-def]
            return value.n

    metric = Minimal()
    verdict = metric.judge("t.py::t", _Value(120), _Value(100), 0.1, Policy())
    assert (verdict.status, verdict.baseline, verdict.current) == ("regression", 100, 120)
    assert verdict.summary == "minimal 100 -> 120 (+20.0%, limit 10%)"
    assert metric.judge("t.py::t", _Value(105), _Value(100), 0.1, Policy()).status == "unchanged"
    assert metric.judge("t.py::t", _Value(80), _Value(100), 0.1, Policy()).status == "improvement"
    assert metric.cell(_Value(1234.5), 1.0) == "1234.5"
    assert metric.junit_properties(_Value(2), "torchbench.") == [("torchbench.minimal.value", 2)]
    assert metric.from_json(metric.to_json(_Value(7))).n == 7
    assert metric.invalid_number({"n": -1}) == "minimal.n is -1; it must be >= 0"
    assert not metric.explains_failures and not metric.confirms_failures


def test_explaining_and_confirming_are_derived_from_the_overrides() -> None:
    """``explains_failures`` / ``confirms_failures`` are not said but derived: a metric that
    overrides ``explain`` gets its callable kept for the re-run, one that overrides ``confirm``
    gets its failed regressions measured again."""
    flags = {
        m.name: (m.explains_failures, m.confirms_failures) for m in registry.all_metrics(Metric)
    }
    assert {name for name, (explains, _) in flags.items() if explains} == {
        "ops",
        "calls",
        "kernels",
    }
    assert {name for name, (_, confirms) in flags.items() if confirms} == {"time"}


def test_seconds_metrics_share_their_display() -> None:
    time, gpu_time = registry.get("time", Metric), registry.get("gpu_time", Metric)
    for metric in (time, gpu_time):
        assert metric.table_scale([2e-6, 5e-6]) == ("us", 1e-6)
        assert (
            metric.cell_delta(0.0004) == " (+0.0%)"
            and metric.delta_title == "the fastest call (judged) and its delta"
        )
        assert metric.format_value(0.0015) == time.format_value(0.0015)
    assert registry.get("instructions", Metric).cell_delta(0.0004) == " (+0.04%)"


def test_modes_that_exclude_each_other_are_one_usage_error_with_why() -> None:
    """``excludes`` maps a mode to why the two cannot share a session; one side of the pair says it,
    and the error names them in registration order, whichever order the option gives."""
    from pytest_torchbench.pytest.options import _parse_modes

    for raw in ("time,instructions", "instructions,time"):
        with pytest.raises(pytest.UsageError) as error:
            _parse_modes(raw)
        assert str(error.value) == (
            "--bench-mode: 'time' and 'instructions' cannot run together (wall time "
            "under valgrind means nothing); run them as two pytest invocations"
        )
    assert _parse_modes("instructions,ops") == ("instructions", "ops")

    class Legacy(Metric):  # a plugin written before excludes took reasons: a tuple of names
        name = "legacy_probe"
        value_type = _Value
        excludes = ("ops",)

        def measure(self, fn, context):  # type: ignore[no-untyped-def]
            return _Value(1)

        def headline(self, value):  # type: ignore[no-untyped-def]
            return value.n

    registry.register(Legacy())
    try:
        with pytest.raises(
            pytest.UsageError, match=r"'ops' and 'legacy_probe' cannot run together \(they cannot"
        ):
            _parse_modes("legacy_probe,ops")
    finally:
        registry.unregister("legacy_probe")


@pytest.mark.parametrize(
    "name, value_type, counted, things, title",
    [
        ("ops", "OpsMetric", "calls", "op(s)", "aten op calls per run"),
        ("calls", "CallsMetric", "calls", "function(s)", "Python function calls per run"),
        ("kernels", "KernelsMetric", "launches", "kernel(s)", "CUDA kernel launches per run"),
    ],
)
def test_exact_count_metrics_share_their_judging_and_showing(
    name: str, value_type: str, counted: str, things: str, title: str
) -> None:
    """ops, calls and kernels judge, head, list in JUnit and plot their counts by name one way
    (``NamedCounts``), each with its own words."""
    import importlib

    from pytest_torchbench.common.vocabulary import Bars, Heading, Policy

    metric = registry.get(name, Metric)
    make = getattr(importlib.import_module(f"pytest_torchbench.metrics.{name}"), value_type)
    then, now = make({"a": 2.0, "b": 1.0}), make({"a": 3.0, "b": 1.0, "c": 1.0})
    verdict = metric.judge("t.py::t", now, then, 0.0, Policy())
    assert (verdict.status, verdict.failed) == ("regression", True)
    assert verdict.summary == f"{name} 3 -> 5 {counted} per call (2 {things} changed)"
    assert list(verdict.details) == ["a 2 -> 3 per call", "c 0 -> 1 per call"]
    assert (
        metric.judge("t.py::t", then, make({"b": 1.0, "a": 2.0}), 0.0, Policy()).status
        == "unchanged"
    )
    assert metric.headline(now) == 5.0
    assert metric.junit_properties(now, "p.") == [
        (f"p.{name}.{counted}_per_run", 5.0),
        (f"p.{name}.distinct", 3),
    ]
    [[heading, bars]] = metric.figures(now, then, True, 10)
    assert isinstance(heading, Heading) and heading.text == f"{title}: change vs baseline"
    assert (
        isinstance(bars, Bars)
        and bars.items == [("a", 1.0), ("c", 1.0)]
        and bars.axis == f"{counted} per run"
    )
    assert metric.figures(then, then, False, 10) == []
    [[heading, bars]] = metric.figures(now, None, False, 2)
    assert (
        heading.text == f"{title} (no baseline)"
        and bars.items == [("a", 3.0), ("b", 1.0)]
        and bars.neutral
    )
