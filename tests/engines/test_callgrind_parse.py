"""The Callgrind dump parser on a small hand-written dump (fast; no valgrind needed).

The expected figures follow callgrind_annotate's attribution rules; where callgrind_annotate is
installed the same file is also checked against it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_torchbench.engines.callgrind.parse import (
    annotate_counts,
    function_counts,
    parse_callgrind,
    parse_callgrind_file,
)

PART_ONE = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 42
cmd:  python -c x=1
part: 1

desc: I1 cache: 
desc: Timerange: Basic block 0 - 10
desc: Trigger: Client Request: first

positions: line
events: Ir
summary: 0

ob=(1) /lib/libpython.so
fl=(1) /src/a.c
fn=(1) main
10 100
cfl=(2) /src/b.c
cfn=(2) helper
calls=2 5
11 50
fi=(3) /src/inl.h
+2 7
fe=(1)
* 3
cfn=(3) local
calls=1 20
12 30

ob=(2) /lib/libb.so
fl=(2)
fn=(2)
5 40
cfi=(1)
cfn=(3)
calls=1 20
6 10

fl=(1)
fn=(3)
20 40

totals: 190
"""

PART_TWO = """\
part: 2
desc: Trigger: Client Request: second
events: Ir
ob=(1)
fl=(1)
fn=(1)
10 5
totals: 5
"""

EXCLUSIVE = {
    "/src/a.c:main [/lib/libpython.so]": 103,
    "/src/inl.h:main": 7,
    "/src/b.c:helper [/lib/libb.so]": 40,
    "/src/a.c:local [/lib/libb.so]": 40,
}
INCLUSIVE = {
    "/src/a.c:main [/lib/libpython.so]": 183,
    "/src/inl.h:main": 7,
    "/src/b.c:helper [/lib/libb.so]": 50,
    "/src/a.c:local [/lib/libb.so]": 40,
}


def as_dict(counts: object) -> dict[str, int]:
    return {row.function: row.count for row in counts}  # type: ignore[attr-defined]


def test_exclusive_and_inclusive_follow_annotate_rules() -> None:
    (part,) = parse_callgrind(PART_ONE)
    assert part.trigger == "Client Request: first"
    assert part.events == ["Ir"]
    assert part.totals == 190 and part.summary == 0 and part.total == 190
    assert as_dict(function_counts(part, inclusive=False)) == EXCLUSIVE
    assert as_dict(function_counts(part, inclusive=True)) == INCLUSIVE
    assert function_counts(part, inclusive=False).sum() == 190


def test_sorted_like_torch_and_totals_dropped_only_on_request() -> None:
    (part,) = parse_callgrind(PART_ONE)
    rows = list(function_counts(part, inclusive=False))
    assert rows == sorted(rows, reverse=True)
    # a root whose inclusive cost equals the program total is dropped as torch's reader does
    lines = PART_ONE.replace("totals: 190", "totals: 183")
    (part,) = parse_callgrind(lines)
    kept = as_dict(function_counts(part, inclusive=True))
    dropped = as_dict(function_counts(part, inclusive=True, drop_program_totals=True))
    assert "/src/a.c:main [/lib/libpython.so]" in kept
    assert "/src/a.c:main [/lib/libpython.so]" not in dropped


def test_several_parts_are_split_and_summed() -> None:
    parts = parse_callgrind(PART_ONE + PART_TWO)
    assert [p.part for p in parts] == [1, 2]
    assert parts[1].trigger == "Client Request: second"
    assert as_dict(function_counts(parts[1], inclusive=False)) == {
        "/src/a.c:main [/lib/libpython.so]": 5
    }
    merged = as_dict(function_counts(parts, inclusive=False))
    assert merged["/src/a.c:main [/lib/libpython.so]"] == 108


def test_strip_prefix_and_file_input(tmp_path: Path) -> None:
    path = tmp_path / "callgrind.out.42.1"
    path.write_text(PART_ONE)
    parts = parse_callgrind_file(path, strip_prefix="/src/")
    assert "a.c:main [/lib/libpython.so]" in as_dict(function_counts(parts, inclusive=False))


@pytest.mark.skipif(shutil.which("callgrind_annotate") is None, reason="needs callgrind_annotate")
@pytest.mark.parametrize("inclusive", [False, True])
def test_hand_written_dump_matches_callgrind_annotate(tmp_path: Path, inclusive: bool) -> None:
    path = tmp_path / "dump"
    path.write_text(PART_ONE)
    ours = as_dict(function_counts(parse_callgrind_file(path), inclusive=inclusive))
    assert ours == annotate_counts(path, inclusive)


def test_exclusive_counts_total_is_what_torch_counts_gives() -> None:
    """The controller's total must equal CallgrindStats.counts() (the sum of exclusive rows), not
    the dump's ``totals:`` line, so dumps read natively count as before."""
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import FunctionCounts

    from pytest_torchbench.engines.callgrind.parse import (
        exclusive_counts,
        function_counts,
        parse_callgrind,
    )

    text = "\n".join(
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
            "fl=(1) a.c",
            "fn=(1) f",
            "0 70",
            "fn=(2) g",
            "0 40",
            "totals: 100",
        ]
    )
    parts = parse_callgrind(text)
    exclusive, total = exclusive_counts(parts)
    counts: FunctionCounts = function_counts(parts, inclusive=False)
    assert exclusive == {"a.c:f": 70, "a.c:g": 40}
    assert total == counts.sum() == 110


def test_inclusive_cost_of_a_function_is_what_every_call_into_it_cost() -> None:
    """``local`` is called from ``main`` (20) and from ``helper`` (20): the type-cache miss cost is
    read this way (``find_name_in_mro`` called from ``_PyType_Lookup``, with its dict lookups)."""
    from pytest_torchbench.engines.callgrind.parse import inclusive_cost_of

    parts = parse_callgrind(PART_ONE + "\n" + PART_TWO)
    assert inclusive_cost_of(parts, "local") == 40
    assert inclusive_cost_of(parts, "helper") == 50
    assert inclusive_cost_of(parts, "main") == 0  # never called: a root
    assert inclusive_cost_of(parts, "find_name_in_mro") == 0  # absent (or inlined in this build)


def test_exclusive_cost_of_a_function_sums_its_rows_of_every_file() -> None:
    """The type-cache lookup's own cost is read this way: ``_PyType_Lookup`` has a row for its
    file and one for each header a piece of it was inlined from, all of them its cost."""
    from pytest_torchbench.engines.callgrind.parse import exclusive_cost_of

    text = "\n".join(
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
            "fi=(2) Include/object.h",
            "0 5",
            "fe=(1)",
            "fn=(2) _PyType_LookupRef",
            "0 9",
            "fn=(3) not_PyType_Lookup",
            "0 40",
            "totals: 124",
        ]
    )
    parts = parse_callgrind(text)
    assert exclusive_cost_of(parts, "_PyType_Lookup") == 75
    assert exclusive_cost_of(parts, "_PyType_LookupRef") == 9
    assert exclusive_cost_of(parts, "find_name_in_mro") == 0
    assert exclusive_cost_of(parts, "_PyType_Lookup", "_PyType_LookupRef", "find_name_in_mro") == 84
