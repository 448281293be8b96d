"""Reading the ``--bench-json`` files of CI shards back and merging them into one run's results.

Why: a CI matrix splits a large suite across jobs (``-k``, file lists, xdist groups); a reviewer
wants one verdict and one report, and the main branch one baseline set. Each shard already judged
its benchmarks against the same baseline (a saved set, or a base revision measured in its job), so
merging keeps every shard's verdicts as they are and only checks that the shards are parts of one
run: each benchmark in one shard only, the same environment, modes, baseline and limits. A shard
that disagrees would make the merged verdict a mix of two experiments, so each disagreement is a
conflict (one line each), never a guess.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..common.text import natural_key, safe_text
from ..common.vocabulary import MISSING, Verdict
from ..judging.results import SCHEMA_VERSION, BenchmarkResult, UnknownMetricError

#: Environment facts that belong to one benchmark (the marker's ``num_threads=``), not to the
#: machine: they may differ between shards.
PER_BENCHMARK_FACTS = frozenset({"num_threads"})


class ShardError(Exception):
    """The shards cannot be merged; ``lines`` says why, one line per problem."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


@dataclasses.dataclass
class Shard:
    """One shard's ``--bench-json`` document, read back."""

    path: Path
    meta: dict[str, Any]
    results: list[BenchmarkResult]
    verdicts: list[Verdict]
    baseline_entries: dict[str, BenchmarkResult]


@dataclasses.dataclass
class Merged:
    """The shards as one run: what the reports, the verdict and a saved set are made of."""

    results: list[BenchmarkResult]
    verdicts: list[Verdict]
    baseline_entries: dict[str, BenchmarkResult] | None
    baseline_name: str | None
    baseline_source: str | None
    failed_tests: list[str]
    meta: dict[str, Any]


def read_shard(path: Path) -> Shard:
    """``path`` as a ``--bench-json`` document; ShardError with one line when it is not one."""
    shown = safe_text(str(path))
    what = f"{shown} is not a --bench-json output of pytest-torchbench"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ShardError([f"cannot read {shown}: {safe_text(exc.strerror or str(exc))}"]) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ShardError(
            [
                f"{what} (not JSON: {safe_text(str(exc))}); pass the files that pytest "
                "--bench-json=PATH wrote"
            ]
        ) from None
    if (
        not isinstance(document, dict)
        or not str(document.get("tool", "")).startswith("pytest-torchbench")
        or not isinstance(document.get("benchmarks"), list)
        or not isinstance(document.get("verdicts"), list)
    ):
        raise ShardError(
            [
                f"{what} (no 'tool', 'benchmarks' and 'verdicts'); pass the files that "
                "pytest --bench-json=PATH wrote"
            ]
        )
    if document.get("schema") != SCHEMA_VERSION:
        raise ShardError(
            [
                f"{shown}: schema {safe_text(repr(document.get('schema')))}, this torchbench reads "
                f"schema {SCHEMA_VERSION}; write every shard with the same pytest-torchbench"
            ]
        )
    try:
        results = [BenchmarkResult.from_json(item) for item in document["benchmarks"]]
        verdicts = [Verdict.from_json(item) for item in document["verdicts"]]
        entries = {
            str(key): BenchmarkResult.from_json(item)
            for key, item in (document.get("baseline_entries") or {}).items()
        }
    except UnknownMetricError as exc:
        raise ShardError(
            [
                f"{shown} holds metric {safe_text(repr(exc.metric))}, which no loaded plugin "
                "registers (metrics beyond the built-in ones come from a plugin or conftest's "
                "pytest_torchbench_register_metrics): load it with -p, e.g. torchbench -p "
                "MODULE merge ... or torchbench -p path/to/conftest.py merge ..."
            ]
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ShardError(
            [
                f"{what} (a benchmark or verdict cannot be read: {safe_text(type(exc).__name__)}: "
                f"{safe_text(str(exc))})"
            ]
        ) from None
    meta = {
        k: v for k, v in document.items() if k not in ("benchmarks", "verdicts", "baseline_entries")
    }
    return Shard(path, meta, results, verdicts, entries)


def describe_origins(origins: Iterable[str]) -> str:
    """``3 committed at REV (...), 2 measured from REV (...) in this job``: a run's baselines by
    where they came from (the terminal, every report, and a merge of shards, which recounts)."""
    counts: dict[str, int] = {}
    for origin in origins:
        counts[origin] = counts.get(origin, 0) + 1
    return ", ".join(f"{n} {origin}" for origin, n in sorted(counts.items()))


def _machine_facts(shard: Shard) -> dict[str, set[str]]:
    """``metric.fact`` -> the values the shard's benchmarks were measured with."""
    facts: dict[str, set[str]] = {}
    for result in shard.results:
        for metric, environment in result.environments.items():
            for name, value in environment.facts.items():
                if name not in PER_BENCHMARK_FACTS:
                    facts.setdefault(f"{metric}.{name}", set()).add(str(value))
    return facts


def _source_prefix(source: Any) -> Any:
    """``git REV (commit)`` of ``git REV (commit): 3 committed, 2 measured``: the counts differ by
    shard."""
    return (
        source.split(": ", 1)[0]
        if isinstance(source, str) and source.startswith("git ")
        else source
    )


def conflicts(shards: Sequence[Shard]) -> list[str]:
    """Every reason the shards are not parts of one run, one line each (empty: they are)."""
    lines: list[str] = []
    first = shards[0]
    seen: dict[str, int] = {}
    for index, shard in enumerate(shards):
        for result in shard.results:
            other = seen.setdefault(result.key, index)
            if other != index:
                lines.append(
                    f"{safe_text(result.key)} is in both {safe_text(str(shards[other].path))} and "
                    f"{safe_text(str(shard.path))}: each benchmark must run in one shard only "
                    "(check how the jobs split the suite)"
                )
    checks = (
        ("modes", "measured modes", "run every shard with the same --bench-mode"),
        ("baseline", "compared with baseline", "run every shard with the same --bench-compare"),
        (
            "policy",
            "judged with limits",
            "run every shard with the same --bench-fail, --bench-strict and --bench-fail-stale",
        ),
    )
    for field, words, fix in checks:
        for shard in shards[1:]:
            mine, theirs = first.meta.get(field), shard.meta.get(field)
            if field == "modes":
                mine, theirs = sorted(mine or []), sorted(theirs or [])
            if field == "baseline":
                mine, theirs = (
                    (mine, _source_prefix(first.meta.get("compared_with"))),
                    (theirs, _source_prefix(shard.meta.get("compared_with"))),
                )
            if mine != theirs:
                lines.append(
                    f"{safe_text(str(first.path))} {words} "
                    f"{safe_text(json.dumps(mine, default=str))}, {safe_text(str(shard.path))} "
                    f"{safe_text(json.dumps(theirs, default=str))}: {fix}"
                )
    reference = _machine_facts(first)
    for shard in shards[1:]:
        facts = _machine_facts(shard)
        for name in sorted(set(reference) & set(facts)):
            if (
                len(reference[name]) == 1
                and len(facts[name]) == 1
                and reference[name] != facts[name]
            ):
                lines.append(
                    f"{safe_text(str(first.path))} was measured with {safe_text(name)}="
                    f"{safe_text(next(iter(reference[name])))}, {safe_text(str(shard.path))} with "
                    f"{safe_text(next(iter(facts[name])))}: run every shard on the same kind of "
                    "machine and image"
                )
    return lines


def merge(shards: Sequence[Shard]) -> Merged:
    """The shards as one run; ShardError listing every conflict when they are not parts of one."""
    problems = conflicts(shards)
    if problems:
        raise ShardError(problems)
    results = sorted(
        (r for shard in shards for r in shard.results), key=lambda r: natural_key(r.key)
    )
    measured = {r.key for r in results}
    verdicts: list[Verdict] = []
    missing: dict[tuple[str, str], Verdict] = {}
    for shard in shards:
        for verdict in shard.verdicts:
            if verdict.status != MISSING:
                verdicts.append(verdict)
            elif (
                verdict.key not in measured
            ):  # absent from one shard, measured by another: not missing
                missing.setdefault((verdict.key, verdict.metric), verdict)
    order = {r.key: i for i, r in enumerate(results)}
    verdicts.sort(
        key=lambda v: order.get(v.key, len(order))
    )  # stable: a result's metrics keep their order
    verdicts += [missing[k] for k in sorted(missing, key=lambda k: (natural_key(k[0]), k[1]))]
    entries: dict[str, BenchmarkResult] = {}
    for shard in shards:
        entries.update(shard.baseline_entries)
    origins: dict[str, str] = {}
    for shard in shards:
        origins.update(shard.meta.get("baseline_origins") or {})
    first = shards[0].meta
    source = first.get("compared_with")
    if origins and isinstance(source, str) and source.startswith("git "):
        source = f"{_source_prefix(source)}: {describe_origins(origins.values())}"
    failed = sorted({t for shard in shards for t in shard.meta.get("failed_tests") or []})
    errors: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for shard in shards:
        for field, merged in (("failed_test_errors", errors), ("skipped_tests", skipped)):
            found = shard.meta.get(field)
            if isinstance(found, dict):
                merged.update(
                    {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}
                )
    crashed = sorted(
        {t for shard in shards for t in shard.meta.get("crashed_tests") or [] if isinstance(t, str)}
    )
    meta = {
        "modes": first.get("modes"),
        "compared_with": source,
        "baseline": first.get("baseline"),
        "policy": first.get("policy"),
        "baseline_origins": dict(sorted(origins.items()))
        if origins
        else first.get("baseline_origins"),
        "failed_tests": failed,
        "failed_test_errors": dict(sorted(errors.items())),
        "skipped_tests": dict(sorted(skipped.items())),
        "crashed_tests": crashed,
        "merged_from": [str(shard.path) for shard in shards],
    }
    return Merged(
        results,
        verdicts,
        entries if first.get("baseline") is not None else None,
        first.get("baseline"),
        source,
        failed,
        meta,
    )


def baseline_entries_json(
    entries: Mapping[str, BenchmarkResult], keys: Sequence[str]
) -> dict[str, Any]:
    """The baseline entries a run judged ``keys`` against, for ``--bench-json`` (the HTML report
    of merged shards draws them as the run's own report does)."""
    return {key: entries[key].to_json() for key in sorted(set(keys)) if key in entries}
