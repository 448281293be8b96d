"""Baseline sets on disk: one folder per set, one JSON file per test module.

Why this shape: baselines are committed to git and reviewed in pull requests, so a file per module
keeps diffs local to what changed, sorted keys and rounded numbers keep them stable, and environments
are stored once per file and referred to by id. Writes go to a temporary file in the same folder
and are renamed into place, so an interrupted run never leaves a half-written baseline. Files are
only ever parsed as JSON.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from .results import SCHEMA_VERSION, BenchmarkResult, Environment, metric_from_json

SET_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class BaselineError(Exception):
    """A baseline problem the user must fix; the message is one line that says what and where."""


@dataclasses.dataclass
class BaselineSet:
    """A named collection of baseline entries, from a folder, a file or a git revision."""

    name: str
    source: str  # where it came from, for messages
    entries: dict[str, BenchmarkResult] = dataclasses.field(default_factory=dict)

    def get(self, key: str) -> BenchmarkResult | None:
        return self.entries.get(key)


def module_file_name(module: str) -> str:
    """``tests/bench/test_ops.py`` -> ``tests/bench/test_ops.json`` (mirrors the test tree)."""
    path = module.replace("\\", "/").lstrip("/")
    path = re.sub(r"\.py$", "", path)
    parts = [part for part in path.split("/") if part not in ("", ".", "..")]
    return "/".join(parts or ["_"]) + ".json"


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


def parse_baseline_document(text: str, where: str) -> dict[str, BenchmarkResult]:
    """Parse one baseline file's text; every problem becomes a BaselineError naming ``where``."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"baseline file {where} is not valid JSON ({exc.msg} at line {exc.lineno}); "
            "it was left untouched: restore it from git or delete it and save again"
        ) from None
    if not isinstance(document, dict):
        raise BaselineError(f"baseline file {where} is not a JSON object; it was left untouched")
    schema = document.get("schema")
    if schema != SCHEMA_VERSION:
        raise BaselineError(
            f"baseline file {where} has schema {schema!r}, this pytest-torchbench reads schema "
            f"{SCHEMA_VERSION}; it was left untouched: re-save the baselines with this version"
        )
    try:
        environments = {
            env_id: Environment.from_json(facts)
            for env_id, facts in document.get("environments", {}).items()
        }
        module = str(document["module"])
        entries: dict[str, BenchmarkResult] = {}
        for key, entry in document["benchmarks"].items():
            metrics: dict[str, Any] = {}
            metric_envs: dict[str, Environment] = {}
            for metric_name, data in entry["metrics"].items():
                metrics[metric_name] = metric_from_json(metric_name, data)
                env_id = data.get("env")
                if env_id is not None:
                    if env_id not in environments:
                        raise ValueError(f"{key}: unknown environment id {env_id!r}")
                    metric_envs[metric_name] = environments[env_id]
            entries[str(key)] = BenchmarkResult(
                key=str(key),
                module=module,
                label=str(entry.get("label", "")),
                sub_label=str(entry.get("sub_label", "")),
                description=str(entry.get("description", "")),
                metrics=metrics,
                environments=metric_envs,
            )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise BaselineError(
            f"baseline file {where} is malformed ({detail}); it was left untouched: "
            "restore it from git or delete it and save again"
        ) from None
    return entries


def load_baseline_file(path: Path) -> dict[str, BenchmarkResult]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"baseline file {path} cannot be read ({exc})") from None
    return parse_baseline_document(text, str(path))


def load_set_from_folder(folder: Path, name: str) -> BaselineSet:
    baseline_set = BaselineSet(name=name, source=str(folder))
    for path in sorted(folder.rglob("*.json")):
        baseline_set.entries.update(load_baseline_file(path))
    return baseline_set


def available_sets(baselines_dir: Path) -> list[str]:
    if not baselines_dir.is_dir():
        return []
    return sorted(p.name for p in baselines_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def validate_set_name(name: str) -> None:
    if not SET_NAME_PATTERN.match(name):
        raise BaselineError(
            f"--bench-save={name!r}: a baseline set name is letters, digits, '.', '_' and '-' "
            "(it becomes a folder under the baselines folder)"
        )


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def render_baseline_document(module: str, entries: Iterable[BenchmarkResult]) -> str:
    """The committed text for one module: deterministic, so saving twice gives the same bytes."""
    environments: dict[str, dict[str, str]] = {}
    benchmarks: dict[str, Any] = {}
    for entry in sorted(entries, key=lambda e: e.key):
        metrics: dict[str, Any] = {}
        for metric_name, metric in sorted(entry.metrics.items()):
            data = metric.to_json()
            env = entry.environments.get(metric_name)
            if env is not None:
                environments[env.id] = env.to_json()
                data["env"] = env.id
            metrics[metric_name] = data
        benchmarks[entry.key] = {
            "label": entry.label,
            "sub_label": entry.sub_label,
            "description": entry.description,
            "metrics": metrics,
        }
    document = {
        "schema": SCHEMA_VERSION,
        "module": module,
        "environments": environments,
        "benchmarks": benchmarks,
    }
    text = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False)
    # Lists of numbers (raw replicate times) on one line each: a re-save changes one line per
    # benchmark in the diff instead of a hundred.
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text) + "\n"


_NUMBER_LIST = re.compile(r"\[\s*((?:-?[0-9.eE+-]+,?\s*)+)\]")


def merge_entries(
    existing: Mapping[str, BenchmarkResult], new: Iterable[BenchmarkResult]
) -> dict[str, BenchmarkResult]:
    """Saving updates what ran and keeps the rest, metric by metric.

    A time-mode run must not erase the instruction counts saved by an instructions-mode run of the
    same benchmark, so metrics are replaced one by one, not whole entries.
    """
    merged = {key: dataclasses.replace(e, metrics=dict(e.metrics), environments=dict(e.environments))
              for key, e in existing.items()}
    for result in new:
        old = merged.get(result.key)
        if old is None:
            merged[result.key] = dataclasses.replace(result, extras={})
            continue
        old.label, old.sub_label, old.description = result.label, result.sub_label, result.description
        old.module = result.module
        for metric_name, metric in result.metrics.items():
            # A metric that keeps earlier saved runs (time: their medians, the spread between
            # runs) carries them over when the new run was measured in the same environment.
            previous, saved_over = old.metrics.get(metric_name), getattr(metric, "saved_over", None)
            same_env = (old.environments.get(metric_name) is not None
                        and old.environments.get(metric_name) == result.environments.get(metric_name))
            if previous is not None and saved_over is not None and same_env and type(previous) is type(metric):
                metric = saved_over(previous)
            old.metrics[metric_name] = metric
        for metric_name in result.metrics:
            env = result.environments.get(metric_name)
            if env is None:
                old.environments.pop(metric_name, None)
            else:
                old.environments[metric_name] = env
    return merged


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_many(files: Mapping[Path, str]) -> None:
    """Write every file to a temporary sibling first, then rename them all into place.

    If anything fails before the renames, no baseline file has changed.
    """
    staged: list[tuple[Path, str]] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            # mkstemp creates 0600; a baseline is an ordinary file of the repository
            os.chmod(tmp, 0o666 & ~_umask())
            staged.append((path, tmp))  # before writing: a failed write must not leave it behind
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        for path, tmp in staged:
            os.replace(tmp, path)
        staged.clear()
    finally:
        for _, tmp in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def save_set(folder: Path, results: Iterable[BenchmarkResult]) -> list[Path]:
    """Write ``results`` into the set at ``folder``, keeping entries of tests that did not run.

    Returns the files that changed. Existing files are parsed first: a corrupt file raises
    BaselineError and nothing is written.
    """
    by_file: dict[Path, list[BenchmarkResult]] = {}
    modules: dict[Path, str] = {}
    for result in results:
        path = folder / module_file_name(result.module)
        by_file.setdefault(path, []).append(result)
        modules[path] = result.module
    texts: dict[Path, str] = {}
    for path, new_results in by_file.items():
        existing: dict[str, BenchmarkResult] = {}
        old_text = None
        if path.exists():
            old_text = path.read_text(encoding="utf-8")
            existing = parse_baseline_document(old_text, str(path))
        merged = merge_entries(existing, new_results)
        text = render_baseline_document(modules[path], merged.values())
        if text != old_text:
            texts[path] = text
    atomic_write_many(texts)
    return sorted(texts)
