"""A pure-Python reader of Callgrind output files, giving per-function instruction counts.

Why not ``callgrind_annotate`` (what torch runs): it is a Perl process per dump, twice per
statement (exclusive and inclusive), and it slows down a lot with the dump's size
(docs/design/counting.md, "Reading the dumps").
This reader walks the file once and yields both views, with function names spelled exactly as
``callgrind_annotate --threshold=100 --show-percs=no`` prints them (``file:function [object]``),
so torch's ``FunctionCounts``/``CallgrindStats`` tools (``as_standardized``, ``delta``,
``denoise``) work on them unchanged. The attribution rules below mirror callgrind_annotate 3.19:

* a function's name is ``<current file>:<fn>``, where ``fi=``/``fe=`` (inlined code) change the
  current file, so inlined lines are charged to ``inlined_file.h:caller``;
* the ``[object]`` suffix is the ``ob=`` in force at the last ``fn=`` line naming the function;
* inclusive cost is the sum of the call costs *into* a function when it is ever called, and its
  own cost plus its calls' costs otherwise (the roots);
* functions whose cost is zero are not listed (torch's reader stops at the first such row).

Files with several parts (``--combine-dumps=yes``) are split into parts; name compression tables
are shared across the whole file, as Callgrind writes them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import FunctionCounts

__all__ = [
    "CallgrindPart",
    "parse_callgrind",
    "parse_callgrind_file",
    "function_counts",
    "exclusive_counts",
    "inclusive_cost_of",
    "exclusive_cost_of",
]

_COST_START = frozenset("0123456789+-*")


@dataclasses.dataclass
class CallgrindPart:
    """One profile part: per-function costs of the event ``Ir`` (or the first event)."""

    part: int
    trigger: str
    events: list[str]
    totals: int | None
    summary: int | None
    self_cost: dict[str, int]
    calls_out: dict[str, int]  # inclusive cost of the calls each function made
    calls_in: dict[str, int]  # inclusive cost of the calls made to each function
    objects: dict[str, str]

    @property
    def total(self) -> int:
        """The part's total, as callgrind_annotate's PROGRAM TOTALS: summary, else totals, else
        the sum of the functions' own costs (the ``summary:`` line is 0 in client-request dumps)."""
        if self.summary:
            return self.summary
        if self.totals:
            return self.totals
        return sum(self.self_cost.values())

    def exclusive(self) -> dict[str, int]:
        return {name: cost for name, cost in self.self_cost.items() if cost}

    def inclusive(self) -> dict[str, int]:
        names = set(self.self_cost) | set(self.calls_in)
        result: dict[str, int] = {}
        for name in names:
            if name in self.calls_in:
                cost = self.calls_in[name]
            else:
                cost = self.self_cost.get(name, 0) + self.calls_out.get(name, 0)
            if cost:
                result[name] = cost
        return result

    def display_name(self, name: str) -> str:
        obj = self.objects.get(name)
        return f"{name} [{obj}]" if obj else name


class _Names:
    """Callgrind's name compression: ``(id) name`` defines, ``(id)`` refers back."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, str]] = {"fl": {}, "fn": {}, "ob": {}}

    def get(self, context: str, raw: str) -> str:
        if raw.startswith("("):
            close = raw.find(")")
            if close > 1 and raw[1:close].isdigit():
                index = raw[1:close]
                rest = raw[close + 1 :].lstrip()
                table = self.tables[context]
                if rest:
                    table[index] = rest
                    return rest
                return table.get(index, "")
        return raw


def _new_part(number: int) -> CallgrindPart:
    return CallgrindPart(number, "", [], None, None, {}, {}, {}, {})


def parse_callgrind(
    text: str | Iterable[str], strip_prefix: str | None = None
) -> list[CallgrindPart]:
    """Parse Callgrind output (a string or an iterable of lines) into its parts.

    ``strip_prefix`` mirrors callgrind_annotate removing its working directory (with a trailing
    ``/``) from ``fl=``/``fi=``/``fe=`` file names; None strips nothing.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    return _Reader(strip_prefix).read(lines)


class _Reader:
    """One pass over a Callgrind file: the part being read, and the names in force at this line.

    ``name`` is the function (``file:function``) cost lines are charged to, ``callee`` the one
    the pending ``calls=`` line calls; a ``calls=`` line makes the next cost line a call's cost.
    """

    def __init__(self, strip_prefix: str | None) -> None:
        self.strip_prefix = strip_prefix
        self.names = _Names()
        self.parts: list[CallgrindPart] = []
        self.part = _new_part(1)
        self.in_body = False
        self.positions = 1  # how many position columns come before the costs
        self.ir_index = 0
        self.ir_column = 1  # positions + ir_index: where a cost line's Ir is
        self.file = ""
        self.function = ""
        self.name: str | None = None
        self.object = ""
        self.callee_file = ""
        self.callee = ""
        self.pending_calls = False

    def read(self, lines: Iterable[str]) -> list[CallgrindPart]:
        for raw in lines:
            line = raw.rstrip("\n")
            if not line or line[0] == "#":
                continue
            if line[0] in _COST_START:
                # Here, not in a method: cost lines are most lines, and a call per line made
                # reading a dump a few percent slower.
                name = self.name
                if name is None:
                    continue
                tokens = line.split()
                column = self.ir_column
                cost = int(tokens[column]) if len(tokens) > column else 0
                part = self.part
                if self.pending_calls:
                    self.pending_calls = False
                    part.calls_out[name] = part.calls_out.get(name, 0) + cost
                    part.calls_in[self.callee] = part.calls_in.get(self.callee, 0) + cost
                else:
                    part.self_cost[name] = part.self_cost.get(name, 0) + cost
                continue
            key, sep, value = line.partition("=")
            if sep and key.isalpha():
                self._position_line(key, value)
                continue
            key, sep, value = line.partition(":")
            if sep:
                self._header_line(key, value.strip())
        self.parts.append(self.part)
        return self.parts

    def _position_line(self, key: str, value: str) -> None:
        """A ``key=value`` line: a call's target, or the file, function or object in force.

        Calls' lines first: they are most of these lines (each call has ``cfi=``, ``cfn=`` and
        ``calls=``)."""
        names = self.names
        if key == "calls":
            self.pending_calls = True
        elif key == "cfn":
            called = names.get("fn", value)
            self.callee = f"{self.callee_file or self.file}:{called}"
            self.callee_file = ""
        elif key in ("cfi", "cfl"):
            self.callee_file = names.get("fl", value)
        elif key == "cob":
            names.get("ob", value)
        elif key in ("fi", "fe"):
            self.file = self._strip(names.get("fl", value))
            self._charge_to(f"{self.file}:{self.function}")
        elif key == "fn":
            self.function = names.get("fn", value)
            name = f"{self.file}:{self.function}"
            self.part.objects[name] = self.object
            self._charge_to(name)
        elif key == "fl":
            self.file = self._strip(names.get("fl", value))
        elif key == "ob":
            self.object = names.get("ob", value)
        elif key == "jfi":
            names.get("fl", value)
        elif key == "jfn":
            names.get("fn", value)
        # jump=/jcnd= carry no cost we report

    def _header_line(self, key: str, value: str) -> None:
        """A ``key: value`` line: the part's totals, or a header (a new part, its events)."""
        part = self.part
        if key == "totals":
            part.totals = _first_cost(value, self.ir_index)
        elif key == "summary":
            part.summary = _first_cost(value, self.ir_index)
        elif key == "part":
            self._start_part(value)
        elif key == "desc" and value.startswith("Trigger:"):
            part.trigger = value[len("Trigger:") :].strip()
        elif key == "positions":
            self.positions = max(1, len(value.split()))
            self.ir_column = self.positions + self.ir_index
        elif key == "events":
            part.events = value.split()
            self.ir_index = part.events.index("Ir") if "Ir" in part.events else 0
            self.ir_column = self.positions + self.ir_index
            self.in_body = True

    def _start_part(self, value: str) -> None:
        if self.in_body or self.parts:
            self.parts.append(self.part)
            self.part = _new_part(int(value) if value.isdigit() else self.part.part + 1)
            self.name = None
            self.pending_calls = False
        else:
            self.part.part = int(value) if value.isdigit() else 1
        self.in_body = False

    def _charge_to(self, name: str) -> None:
        self.name = name
        self.part.self_cost.setdefault(name, 0)

    def _strip(self, path: str) -> str:
        if self.strip_prefix and path.startswith(self.strip_prefix):
            return path[len(self.strip_prefix) :]
        return path


def _first_cost(value: str, index: int) -> int:
    tokens = value.split()
    return int(tokens[index]) if len(tokens) > index else 0


def parse_callgrind_file(
    path: str | os.PathLike[str], strip_prefix: str | None = None
) -> list[CallgrindPart]:
    """Parse a Callgrind output file; see :func:`parse_callgrind`."""
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        return parse_callgrind(handle, strip_prefix=strip_prefix)


def exclusive_counts(parts: Iterable[CallgrindPart]) -> tuple[dict[str, int], int]:
    """Exclusive cost per function (``file:function [object]``) summed over parts, and their sum.

    The same rows as ``function_counts(parts, inclusive=False)`` without importing torch: the
    controller of an instructions run reads workers' dumps with this, natively and torch-free.
    """
    merged: dict[str, int] = {}
    for part in parts:
        for name, cost in part.exclusive().items():
            display = part.display_name(name)
            merged[display] = merged.get(display, 0) + cost
    merged = {name: cost for name, cost in merged.items() if cost}
    # The total as torch's CallgrindStats.counts() gives it: the sum of the exclusive rows (a
    # dump's ``totals:`` line can differ from it by a few percent).
    return merged, sum(merged.values())


def inclusive_cost_of(parts: Iterable[CallgrindPart], function: str) -> int:
    """The inclusive cost of every call into a function called ``function`` (any file), summed over
    parts: what the function and everything it called cost. 0 when it was never called, or is not
    a function of its own in this binary (inlined)."""
    suffix = ":" + function
    return sum(
        cost for part in parts for name, cost in part.calls_in.items() if name.endswith(suffix)
    )


def exclusive_cost_of(parts: Iterable[CallgrindPart], *functions: str) -> int:
    """The exclusive cost of every function named one of ``functions`` (any file: the pieces of
    one inlined from headers are rows of their own), summed over parts in one pass. 0 when none
    ran."""
    suffixes = tuple(":" + function for function in functions)
    return sum(
        cost for part in parts for name, cost in part.self_cost.items() if name.endswith(suffixes)
    )


def function_counts(
    parts: CallgrindPart | Iterable[CallgrindPart],
    inclusive: bool,
    *,
    drop_program_totals: bool = False,
) -> FunctionCounts:
    """torch ``FunctionCounts`` over one part or the sum of several, sorted as torch sorts them.

    ``drop_program_totals`` mirrors torch's reader, which drops rows whose count equals the
    PROGRAM TOTALS line (in inclusive views: the roots that enclose the whole region).
    """
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
        FunctionCount,
        FunctionCounts,
    )

    if isinstance(parts, CallgrindPart):
        parts = [parts]
    merged: dict[str, int] = {}
    program_total = 0
    for part in parts:
        program_total += part.total
        costs = part.inclusive() if inclusive else part.exclusive()
        for name, cost in costs.items():
            display = part.display_name(name)
            merged[display] = merged.get(display, 0) + cost
    rows = [
        FunctionCount(cost, name)
        for name, cost in merged.items()
        if cost and not (drop_program_totals and cost == program_total)
    ]
    return FunctionCounts(tuple(sorted(rows, reverse=True)), inclusive=inclusive)


def annotate_counts(path: str | os.PathLike[str], inclusive: bool = False) -> dict[str, int]:
    """``callgrind_annotate``'s per-function rows for ``path``, read the way torch reads them.

    The reference this parser is checked against (tests and benchmarks/figures_instructions.py);
    the plugin itself never calls it: it is 5-10x slower than :func:`parse_callgrind_file`.
    """
    import re
    import subprocess

    output = subprocess.run(
        [
            "callgrind_annotate",
            f"--inclusive={'yes' if inclusive else 'no'}",
            "--threshold=100",
            "--show-percs=no",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",  # annotate strips its working directory from file names
    ).stdout
    rows: dict[str, int] = {}
    started = False
    for line in output.splitlines():
        if not started:
            started = bool(re.match(r"\s*Ir\s+file:function", line))
            continue
        match = re.match(r"^\s*([0-9,]+)\s+(.+:.+)$", line)
        if match:
            rows[match.group(2)] = int(match.group(1).replace(",", ""))
        elif re.match(r"-+", line):
            continue
        else:
            break
    return rows
