"""The dynamo engine on real torch.compile (backend="eager": no compiler needed, fast)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch

from pytest_torchbench.common import compat as _compat
from pytest_torchbench.engines import dynamo

HELPERS = """
import torch

def noisy(x):
    print("hello")
    return x

def with_break(x):
    y = x + 1
    y = noisy(y)
    return y * 2

def clean(x):
    return torch.sin(x) + 1

def in_loop(x):
    for i in range(2):
        x = x + 1
        print(i)
    return x

def eager_only(x):
    return x + 1
"""


def _load(path: Path, name: str, source: str) -> ModuleType:
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def helpers(tmp_path: Path) -> ModuleType:
    return _load(tmp_path / "helpers_mod.py", f"helpers_mod_{tmp_path.name}", HELPERS)


def test_a_clean_function_is_one_graph_and_a_warm_rerun_counts_the_same(
    helpers: ModuleType, tmp_path: Path
) -> None:
    compiled = torch.compile(helpers.clean, backend="eager")
    x = torch.ones(4)
    compiled(x)  # already compiled before counting: the reset makes the count start afresh
    first = dynamo.count_compiles(lambda: compiled(x), rootdir=tmp_path)
    again = dynamo.count_compiles(lambda: compiled(x), rootdir=tmp_path)
    assert (first.graphs, first.breaks, first.recompiles, first.calls) == (1, [], [], 3)
    assert (again.graphs, again.breaks, again.recompiles) == (
        first.graphs,
        first.breaks,
        first.recompiles,
    )


def test_a_break_has_its_reason_and_the_users_line_relative_to_rootdir(
    helpers: ModuleType, tmp_path: Path
) -> None:
    compiled = torch.compile(helpers.with_break, backend="eager")
    counts = dynamo.count_compiles(lambda: compiled(torch.ones(4)), rootdir=tmp_path)
    assert counts.graphs == 2
    wheres = {event.where for event in counts.breaks}
    assert wheres == {"helpers_mod.py:5"}  # the print inside the helper, not the call site
    assert all("print" in event.reason and "0x" not in event.reason for event in counts.breaks)
    assert str(tmp_path) not in repr(counts)


def test_a_new_input_shape_is_a_recompile_with_its_guard(
    helpers: ModuleType, tmp_path: Path
) -> None:
    compiled = torch.compile(helpers.clean, backend="eager")
    shapes = iter([4, 5, 6, 7])
    counts = dynamo.count_compiles(lambda: compiled(torch.ones(next(shapes))), rootdir=tmp_path)
    # 4 compiles static; 5 recompiles with a dynamic size; 6 and 7 reuse it.
    assert counts.graphs == 2 and len(counts.recompiles) == 1
    (event,) = counts.recompiles
    assert event.where == "helpers_mod.py:13" and "size mismatch" in event.reason


def test_a_frame_skipped_for_a_break_in_a_loop_counts_as_a_break(
    helpers: ModuleType, tmp_path: Path
) -> None:
    compiled = torch.compile(helpers.in_loop, backend="eager")
    counts = dynamo.count_compiles(lambda: compiled(torch.ones(2)), rootdir=tmp_path)
    assert counts.graphs == 0
    if _compat.torch_version() < (2, 10):
        # torch 2.5.1 and 2.9.1 record this break with no fail_type and no line (only a count in
        # counters["unimplemented"]): compile mode cannot see it there (docs/torch-versions.md).
        # 2.13 records it; the releases between were not run.
        assert counts.breaks == []
        return
    assert [event.where for event in counts.breaks] == ["helpers_mod.py:19"]
    assert "frame skipped" in counts.breaks[0].reason


def test_code_that_compiles_nothing_counts_zero(helpers: ModuleType) -> None:
    counts = dynamo.count_compiles(lambda: helpers.eager_only(torch.ones(2)), warmup=0)
    assert (counts.graphs, counts.breaks, counts.recompiles, counts.frames, counts.calls) == (
        0,
        [],
        [],
        0,
        1,
    )


def test_the_benchmarks_exception_propagates(helpers: ModuleType) -> None:
    strict = torch.compile(helpers.with_break, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="print"):
        dynamo.count_compiles(lambda: strict(torch.ones(2)))
    # dynamo is usable afterwards
    assert (
        dynamo.count_compiles(
            lambda: torch.compile(helpers.clean, backend="eager")(torch.ones(2))
        ).graphs
        == 1
    )


def test_reasons_are_one_deterministic_line() -> None:
    text = (
        "Failed to trace builtin operator\n  Explanation: cannot trace <function f at 0x7f3a2b> "
        "from /home/u/proj/src/model.py and /venv/lib/python3.11/site-packages/torch/nn/x.py\n"
        "  Hint: something\n\n  Developer debug context: 0xdeadbeef"
    )
    short = dynamo.short_reason(text, "/home/u/proj")
    assert short == (
        "Failed to trace builtin operator: cannot trace <function f at 0x...> from src/model.py "
        "and torch/nn/x.py"
    )
    assert dynamo.short_reason("") == "unknown reason"
    kept = "x: and/or /x https://example.org/a/b"  # not absolute file paths: left alone
    assert dynamo.short_reason(kept, "/home/u/proj") == kept
    assert len(dynamo.short_reason("x" * 1000)) == 300


def test_locations_never_hold_absolute_paths() -> None:
    assert dynamo.relative_location("/home/u/proj/pkg/m.py", 3, "/home/u/proj") == "pkg/m.py:3"
    assert (
        dynamo.relative_location("/usr/lib/python3/site-packages/torch/a.py", 9, "/home/u/proj")
        == "torch/a.py:9"
    )
    assert dynamo.relative_location("/elsewhere/m.py", 1, "/home/u/proj") == "m.py:1"
    assert dynamo.relative_location("<string>", 1, None) == "<string>:1"


def test_short_reason_drops_object_ids_and_keeps_the_file_name_of_guard_frames() -> None:
    """Identity guards print a heap address in decimal; torch shortens the guard's file relative to
    its own install folder (a suffix depending on the checkout's path): neither may be stored."""
    reason = (
        "___check_type_id(m, 94895022958240), type=<class 'model.M'>  # return m(x)  "
        "# mp/pytest-of-root/my checkout/model.py:11 in h (HINT: type M)\n"
        "User stack trace:\n  File x"
    )
    assert dynamo.short_reason(reason) == (
        "___check_type_id(m, ...), type=<class 'model.M'>  # return m(x)  "
        "# model.py:11 in h (HINT: type M)"
    )
    assert dynamo.short_reason(
        "___check_obj_id(fn.__code__, 140086386882000), type=<class 'code'>"
    ) == ("___check_obj_id(fn.__code__, ...), type=<class 'code'>")
    assert dynamo.short_reason("tensor 'x' size mismatch at index 0. expected 4, actual 5") == (
        "tensor 'x' size mismatch at index 0. expected 4, actual 5"
    )
    # torch 2.11 names the swapped code object, with its absolute file path in quotes
    # (spaces and all)
    swapped = (
        "___check_obj_id(fn.__code__, 139637), type=<code object g2 at 0x7f1e2c, file "
        '"/tmp/t/another checkout/swapped.py", line 21>  # return fn(x)  # swapped.py:11 in f'
    )
    expected = (
        "___check_obj_id(fn.__code__, ...), type=<code object g2 at 0x..., "
        'file "swapped.py", line 21>'
        "  # return fn(x)  # swapped.py:11 in f"
    )
    assert dynamo.short_reason(swapped, "/tmp/t/another checkout") == expected
    assert dynamo.short_reason(swapped.replace("another checkout", "a"), "/tmp/t/a") == expected


def test_is_compiled_knows_compiled_functions_and_modules():
    import torch

    from pytest_torchbench.engines.dynamo import is_compiled

    def plain(x):
        return x + 1

    module = torch.nn.Linear(2, 2)
    in_place = torch.nn.Linear(2, 2)
    in_place.compile(backend="eager")
    assert is_compiled(torch.compile(plain, backend="eager"))
    assert is_compiled(torch.compile(module, backend="eager"))
    assert is_compiled(in_place)
    assert not is_compiled(plain) and not is_compiled(module) and not is_compiled(torch.add)
