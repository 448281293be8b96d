"""Baseline sets on disk: one folder per set, one JSON file per test module.

Why this shape: baselines are committed to git and reviewed in pull requests, so a file per module
keeps diffs local to what changed, sorted keys and rounded numbers keep them stable, and
environments are stored once per file and referred to by id. Writes go to a temporary file in the
same folder and are renamed into place, so an interrupted run never leaves a half-written baseline.
Files are only ever parsed as JSON, and only from regular files of bounded size (a FIFO or a link to
a device committed where a baseline should be must not hang or exhaust the run); they are written by
a serialiser that knows where strings end, so no text in them is ever rewritten.

Saving is read-merge-write under an exclusive lock on the set folder (``flock`` on the folder
itself, so no lock file shows up in ``git status``): two runs saving into the same set at once
are serialised, and the second merges into what the first wrote instead of overwriting it.

Schema evolution: ``schema`` changes only for a change an older reader would misread. Fields added
since schema 1 (``nodeid`` and ``saved`` per benchmark) are optional: readers ignore fields they do
not know, and a missing ``nodeid`` is derived from the key as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..common.text import safe_text
from ..judging.results import (
    SCHEMA_VERSION,
    BenchmarkResult,
    Environment,
    UnknownMetricError,
    invalid_number,
    limits_from_json,
    metric_from_json,
    metric_to_json,
)

SET_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: A set name is a folder name, and appears in messages and commands: keep it well under NAME_MAX.
SET_NAME_MAX = 100


class BaselineError(Exception):
    """A baseline problem the user must fix; the message is one line that says what and where."""


class NotASetError(BaselineError):
    """A folder named as a baseline set is far too big to be one (the message names the folder)."""


@dataclasses.dataclass
class BaselineSet:
    """A named collection of baseline entries, from a folder, a file or a git revision."""

    name: str
    source: str  # where it came from, for messages
    entries: dict[str, BenchmarkResult] = dataclasses.field(default_factory=dict)
    # What reports call it where the name alone would mislead: a set read from (or measured at) a
    # git revision is shown as the revision the user gave ('HEAD~1', 'origin/main:nightly'), not as
    # 'main', which reads as the saved set of this checkout (or the branch) and, for a measured
    # base, names a set that was never read.
    label: str = ""

    def get(self, key: str) -> BenchmarkResult | None:
        return self.entries.get(key)

    @property
    def shown_as(self) -> str:
        """The baseline's name in tables, summaries and reports."""
        return self.label or self.name


def module_file_name(module: str) -> str:
    """``tests/bench/test_ops.py`` -> ``tests/bench/test_ops.json`` (mirrors the test tree)."""
    path = module.replace("\\", "/").lstrip("/")
    path = re.sub(r"\.py$", "", path)
    parts = [part for part in path.split("/") if part not in ("", ".", "..")]
    return "/".join(parts or ["_"]) + ".json"


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


_FIX = "it was left untouched: restore it from git or delete it and save again"


def parse_baseline_document(text: str | bytes, where: str) -> dict[str, BenchmarkResult]:
    """Parse one baseline file's text (or raw bytes); every problem becomes a BaselineError naming
    ``where``, with one line: a baseline comes from disk or from git, and either can hold
    anything."""
    document = _check_document(_load_json(_decoded(text, where), where), where)
    try:
        environments = {
            env_id: Environment.from_json(facts)
            for env_id, facts in document.get("environments", {}).items()
        }
        module = str(document["module"])
        return {
            str(key): _parse_entry(
                key, entry, module=module, environments=environments, where=where
            )
            for key, entry in document["benchmarks"].items()
        }
    except UnknownMetricError as exc:
        raise BaselineError(
            f"baseline file {where} holds metric {exc.metric!r}, which no loaded plugin registers "
            "(metrics beyond the built-in ones come from a plugin or conftest's "
            "pytest_torchbench_register_metrics): run where that plugin is loaded (for the "
            "torchbench command: -p MODULE or -p path/to/conftest.py); the file was left untouched"
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        if len(detail) > 200:
            detail = detail[:200] + "..."
        raise BaselineError(f"baseline file {where} is malformed ({detail}); {_FIX}") from None


def _decoded(text: str | bytes, where: str) -> str:
    """The text of a file read as bytes: UTF-8, or a BaselineError naming the first bad byte."""
    if not isinstance(text, bytes):
        return text
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(
            f"baseline file {where} is not UTF-8 text (byte 0x{text[exc.start]:02x} at offset "
            f"{exc.start}); {_FIX}"
        ) from None


def _load_json(text: str, where: str) -> Any:
    """The parsed JSON, or a BaselineError saying why it cannot be read (a key twice in one object
    counts: only one of them would be read)."""
    try:
        return json.loads(text, object_pairs_hook=_object_without_duplicates)
    except _DuplicateKey as exc:
        raise BaselineError(
            f"baseline file {where} is not usable JSON (key {safe_text(json.dumps(exc.key))} "
            f"appears twice in one object, and only one of them would be read); {_FIX}"
        ) from None
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"baseline file {where} is not valid JSON ({exc.msg} at line {exc.lineno}); {_FIX}"
        ) from None
    except ValueError as exc:  # e.g. an integer longer than Python's int conversion limit
        detail = str(exc).split(";")[0].split(":")[0].strip()
        raise BaselineError(
            f"baseline file {where} is not usable JSON ({detail}); {_FIX}"
        ) from None
    except RecursionError:
        raise BaselineError(
            f"baseline file {where} is not usable JSON (nested too deeply); {_FIX}"
        ) from None


def _check_document(document: Any, where: str) -> dict[str, Any]:
    """The document itself when it is a baseline file of this schema; a BaselineError otherwise
    (a run's results file, a newer or older schema)."""
    if not isinstance(document, dict):
        raise BaselineError(f"baseline file {where} is not a JSON object; it was left untouched")
    schema = document.get("schema")
    if isinstance(document.get("benchmarks"), list) and "tool" in document:
        raise BaselineError(
            f"{where} is the results file of a run (--bench-json), not a baseline file; it was "
            "left untouched: to compare against a run, save it as a baseline set "
            "(pytest --bench-save=NAME) and name that set"
        )
    if type(schema) is int and schema > SCHEMA_VERSION:
        raise BaselineError(
            f"baseline file {where} has schema {schema}, written by a newer pytest-torchbench "
            f"(this one reads schema {SCHEMA_VERSION}); it was left untouched: upgrade "
            "pytest-torchbench"
        )
    if type(schema) is not int or schema != SCHEMA_VERSION:
        raise BaselineError(
            f"baseline file {where} has schema {_shown(schema)}, this pytest-torchbench reads "
            f"schema {SCHEMA_VERSION}; it was left untouched: restore it from git, or re-save the "
            "baselines with this version"
        )
    return document


def _parse_entry(
    key: Any,
    entry: Any,
    *,
    module: str,
    environments: Mapping[str, Environment],
    where: str,
) -> BenchmarkResult:
    """One benchmark's entry; a malformed one raises what the caller turns into a BaselineError
    (KeyError, TypeError, ValueError...)."""
    metrics: dict[str, Any] = {}
    metric_envs: dict[str, Environment] = {}
    for metric_name, data in entry["metrics"].items():
        problem = invalid_number(str(metric_name), data)
        if problem:
            raise BaselineError(f"baseline file {where}: benchmark {key!r}: {problem}; {_FIX}")
        metrics[metric_name] = metric_from_json(metric_name, data)
        env_id = data.get("env")
        if env_id is not None:
            if env_id not in environments:
                raise ValueError(f"{key}: unknown environment id {env_id!r}")
            metric_envs[metric_name] = environments[env_id]
    saved = entry.get("saved") or {}
    if not isinstance(saved, dict):
        raise ValueError(f"{key}: 'saved' must be an object")
    return BenchmarkResult(
        key=str(key),
        nodeid=str(entry.get("nodeid") or ""),
        saved=dict(saved),
        module=module,
        label=str(entry.get("label", "")),
        sub_label=str(entry.get("sub_label", "")),
        description=str(entry.get("description", "")),
        metrics=metrics,
        environments=metric_envs,
        group=str(entry.get("group", "")),
        extra_info=dict(entry.get("extra_info", {})),
        limits=limits_from_json(entry.get("limits")),
    )


#: The largest baseline file read. Far above what a test module's benchmarks write, and low enough
#: that parsing one cannot exhaust memory: past it, the file is not a baseline.
MAX_BASELINE_BYTES = 64 * 1024 * 1024
#: The most files and folders a baseline set folder may hold. A set mirrors a test tree; a folder
#: with more (``--bench-compare=/``, a home folder) is not a set, and walking it would take hours.
MAX_SET_ENTRIES = 50_000


def file_type_words(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words, for messages about paths that are not regular
    files (baselines, reports)."""
    return (
        "a regular file"
        if stat.S_ISREG(mode)
        else "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )


def read_baseline_bytes(path: Path) -> bytes:
    """The bytes of a baseline file, which must be a regular file of at most MAX_BASELINE_BYTES.

    Why not ``read_bytes``: anyone can commit or place a symlink to ``/dev/zero`` (read until
    memory runs out) or a FIFO (``open`` waits forever for a writer) where a baseline is expected.
    The file is opened without blocking and checked on the open descriptor, so what is checked is
    what is read."""
    shown = safe_text(path)
    via = " (through a symlink)" if os.path.islink(path) else ""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise BaselineError(
            f"baseline file {shown} cannot be read ({exc.strerror or exc})"
        ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BaselineError(
            f"baseline file {shown} is {file_type_words(mode)}{via}, not a regular file; "
            "it was left untouched: remove it, or point to the set's folder or a saved .json file"
        )
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_BASELINE_BYTES + 1)
    if len(data) > MAX_BASELINE_BYTES:
        raise BaselineError(
            f"baseline file {shown} is over {MAX_BASELINE_BYTES // (1024 * 1024)} MiB, more than "
            f"any baseline file holds; it was left untouched: {_FIX.split(': ', 1)[1]}"
        )
    return data


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique: json keeps the last of two equal keys and drops the
    other silently (a baseline key written twice by hand, a merge gone wrong)."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return document


def _shown(value: Any) -> str:
    text = safe_text(repr(value))
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def load_baseline_file(path: Path) -> dict[str, BenchmarkResult]:
    return parse_baseline_document(read_baseline_bytes(path), str(path))


def baseline_files(folder: Path) -> list[Path]:
    """The ``.json`` files of a set folder, at any depth, sorted; symlinked folders are not
    followed. BaselineError when the folder holds more than MAX_SET_ENTRIES files and folders:
    it is not a set, and the user is told so instead of waiting for a walk of the whole disk."""
    found: list[Path] = []
    seen = 0
    for top, folders, files in os.walk(folder):
        seen += len(folders) + len(files)
        if seen > MAX_SET_ENTRIES:
            raise NotASetError(
                f"folder {safe_text(folder)} holds over {MAX_SET_ENTRIES:,} files and folders, so "
                "it is not a baseline set (a set folder, such as baselines/main, holds the .json "
                "files that --bench-save wrote); name a set, a set folder or a baseline file"
            )
        found.extend(Path(top) / name for name in files if name.endswith(".json"))
        # A folder named as a baseline file is where a save would write one: say so now.
        found.extend(Path(top) / name for name in folders if name.endswith(".json"))
    return sorted(found)


def load_set_from_folder(folder: Path, name: str) -> BaselineSet:
    baseline_set = BaselineSet(name=name, source=str(folder))
    for path in baseline_files(folder):
        baseline_set.entries.update(load_baseline_file(path))
    return baseline_set


def available_sets(baselines_dir: Path) -> list[str]:
    if not baselines_dir.is_dir():
        return []
    return sorted(
        p.name for p in baselines_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
    )


def validate_set_name(name: str, option: str = "--bench-save") -> None:
    """A set name becomes a folder: ASCII letters, digits, '.', '_', '-', starting with a letter or
    digit, at most SET_NAME_MAX characters (a longer one fails deep in the file system)."""
    if len(name) > SET_NAME_MAX:
        raise BaselineError(
            f"{option}: a baseline set name is at most {SET_NAME_MAX} characters, this one has "
            f"{len(name)} ({name[:20]!r}...); choose a shorter name"
        )
    if not SET_NAME_PATTERN.match(name):
        raise BaselineError(
            f"{option}={name!r}: a baseline set name is letters, digits, '.', '_' and '-', "
            f"starting with a letter or digit, at most {SET_NAME_MAX} characters "
            "(it becomes a folder under the baselines folder)"
        )


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def check_save_folder(folder: Path, option: str) -> None:
    """Raise BaselineError when a set cannot be written at ``folder``: a part of its path is not a
    folder, or the deepest existing folder is not writable. Nothing is created.

    Why before the run: the save is the last thing a run does; a baselines path that is a file
    found only then costs the user every benchmark's measurement (hours of instruction counts)."""
    probe = folder
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    for part in (probe, *probe.parents):
        if os.path.lexists(part) and not part.is_dir():
            raise BaselineError(
                f"{option}: cannot write baseline set folder {safe_text(folder)}: "
                f"{safe_text(part)} is {_kind(part)}, not a folder; move it, or choose another "
                "folder (--bench-baselines-dir)"
            )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BaselineError(
            f"{option}: cannot write baseline set folder {safe_text(folder)}: {safe_text(probe)} "
            "is not writable; fix its permissions, or choose another folder "
            "(--bench-baselines-dir)"
        )


def _kind(path: Path) -> str:
    try:
        return file_type_words(os.stat(path).st_mode)
    except OSError:
        return "a broken symlink"


def render_baseline_document(module: str, entries: Iterable[BenchmarkResult]) -> str:
    """The committed text for one module: deterministic, so saving twice gives the same bytes."""
    environments: dict[str, dict[str, str]] = {}
    benchmarks: dict[str, Any] = {}
    for entry in sorted(entries, key=lambda e: e.key):
        metrics: dict[str, Any] = {}
        for metric_name, metric in sorted(entry.metrics.items()):
            data = metric_to_json(metric_name, metric)
            env = entry.environments.get(metric_name)
            if env is not None:
                environments[env.id] = env.to_json()
                data["env"] = env.id
            metrics[metric_name] = data
        benchmarks[entry.key] = _entry_document(entry, metrics)
    document = {
        "schema": SCHEMA_VERSION,
        "module": module,
        "environments": environments,
        "benchmarks": benchmarks,
    }
    return dumps_baseline_json(document) + "\n"


def dumps_baseline_json(value: Any) -> str:
    """``json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)``, except that a list of
    numbers is written on one line and a lone surrogate is written as a ``\\uXXXX`` escape.

    Why a serialiser of our own rather than a rewrite of json's text: lists of numbers (raw
    replicate times) on one line each make a re-save change one line per benchmark in the diff
    instead of a hundred, and only code that knows where a string ends can do that without ever
    touching a string (a parametrize id ``"8 8"`` in a key must stay that id). Every scalar is
    formatted by ``json`` itself. A lone surrogate (from ``extra_info``, or read from another
    file) cannot be encoded as UTF-8: escaped, it is valid JSON that reads back as the same string.
    """
    # One pass through json first: tuples become lists, non-string keys strings, and a value json
    # cannot write fails here with json's own error, exactly as json.dumps would.
    plain = json.loads(json.dumps(value, sort_keys=True, ensure_ascii=False))
    return _dumps(plain, "")


def _dumps(value: Any, indent: str) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + " "
        items = (
            f"{inner}{_json_string(key)}: {_dumps(item, inner)}"
            for key, item in sorted(value.items())
        )
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in value):
            return "[" + ", ".join(json.dumps(item) for item in value) + "]"
        inner = indent + " "
        return (
            "[\n" + ",\n".join(inner + _dumps(item, inner) for item in value) + "\n" + indent + "]"
        )
    if isinstance(value, str):
        return _json_string(value)
    return json.dumps(value)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_string(text: str) -> str:
    return _SURROGATE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False)
    )


def _entry_document(entry: BenchmarkResult, metrics: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {
        "label": entry.label,
        "sub_label": entry.sub_label,
        "description": entry.description,
        "metrics": metrics,
        "nodeid": entry.nodeid,
    }
    # Only when set, so that baselines of suites that use neither keep their bytes.
    if entry.group:
        document["group"] = entry.group
    if entry.extra_info:
        document["extra_info"] = entry.extra_info
    if entry.saved:
        document["saved"] = dict(entry.saved)
    if entry.limits:  # the marker's limits=, so that torchbench compare judges as pytest did
        document["limits"] = dict(sorted(entry.limits.items()))
    return document


def _entry_content(entry: BenchmarkResult) -> str:
    """One entry's committed content without its ``saved`` stamp: did a save change it?"""
    metrics: dict[str, Any] = {}
    for metric_name, metric in sorted(entry.metrics.items()):
        data = metric_to_json(metric_name, metric)
        env = entry.environments.get(metric_name)
        if env is not None:
            data["env"] = env.id
        metrics[metric_name] = data
    return json.dumps(
        _entry_document(dataclasses.replace(entry, saved={}), metrics), sort_keys=True
    )


def merge_entries(
    existing: Mapping[str, BenchmarkResult], new: Iterable[BenchmarkResult]
) -> dict[str, BenchmarkResult]:
    """Saving updates what ran and keeps the rest, metric by metric.

    A time-mode run must not erase the instruction counts saved by an instructions-mode run of the
    same benchmark, so metrics are replaced one by one, not whole entries.
    """
    merged = {
        key: dataclasses.replace(e, metrics=dict(e.metrics), environments=dict(e.environments))
        for key, e in existing.items()
    }
    for result in new:
        old = merged.get(result.key)
        if old is None:
            merged[result.key] = dataclasses.replace(result, extras={})
            continue
        old.label, old.sub_label, old.description = (
            result.label,
            result.sub_label,
            result.description,
        )
        old.group, old.extra_info = result.group, dict(result.extra_info)
        old.module, old.nodeid, old.limits = result.module, result.nodeid, dict(result.limits)
        for metric_name, metric in result.metrics.items():
            # A metric that keeps earlier saved runs (time: their medians, the spread between
            # runs) carries them over when the new run was measured in the same environment.
            previous, saved_over = old.metrics.get(metric_name), getattr(metric, "saved_over", None)
            same_env = old.environments.get(metric_name) is not None and old.environments.get(
                metric_name
            ) == result.environments.get(metric_name)
            if (
                previous is not None
                and saved_over is not None
                and same_env
                and type(previous) is type(metric)
            ):
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


#: Signals whose default action ends the process without running ``finally`` blocks (SIGINT
#: raises KeyboardInterrupt, which does). Caught only while files are being written.
_WRITE_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class _WriteInterrupted(BaseException):
    """A terminating signal arrived while temporary files were being written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_held(state: dict[str, Any]) -> Iterator[None]:
    """While writing, turn SIGTERM/SIGHUP into an exception (so temporary files are removed) and,
    once ``state["phase"]`` is "renaming", hold them until the renames are done (so a set is not
    left half renamed). Afterwards the signal is delivered again to the previous handler: the
    process still ends as it would have, just without litter. Main thread only (Python's rule)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        if state.get("phase") == "renaming":
            pending.append(signum)
        else:
            raise _WriteInterrupted(signum)

    previous = {}
    try:
        for signum in _WRITE_SIGNALS:
            previous[signum] = signal.signal(signum, handler)
        yield
    except _WriteInterrupted as exc:
        pending.append(exc.signum)
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    if pending:
        signal.raise_signal(pending[0])  # the previous handler (by default: terminate) now runs
        if state.get("phase") != "renaming":  # that handler returned: the write did not happen
            raise InterruptedError(
                f"interrupted by signal {pending[0]} while writing; nothing was written"
            )


def _temp_prefix(path: Path) -> str:
    """``.NAME.PID.`` : the writer's pid is in the name, so a later save can tell a dead writer's
    leftovers (removed) from a live writer's file (never touched)."""
    return f".{path.name}.{os.getpid()}."


_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[^.]+\.tmp$")


def atomic_write_many(files: Mapping[Path, str]) -> None:
    """Write every file to a temporary sibling first, then rename them all into place.

    If anything fails before the renames, no file has changed and no temporary file is left,
    also when SIGTERM/SIGHUP arrive meanwhile (they are acted on once the files are cleaned up).
    """
    staged: list[tuple[Path, str]] = []
    state = {"phase": "staging"}
    with _signals_held(state):
        try:
            for path, text in files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(
                    prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent
                )
                staged.append((path, tmp))  # first: a failed write must not leave it behind
                # mkstemp creates 0600; a baseline is an ordinary file of the repository
                os.chmod(tmp, 0o666 & ~_umask())
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
            state["phase"] = "renaming"
            for path, tmp in staged:
                os.replace(tmp, path)
            staged.clear()
        finally:
            for _, tmp in staged:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def sweep_stale_temp_files(folder: Path) -> list[Path]:
    """Remove temporary files that writers which no longer run left in ``folder`` (SIGKILL,
    power loss). Only names this module makes, and only when their writer's pid is gone: a live
    writer's file is never touched. Called under the set lock."""
    removed = []
    for path in sorted(folder.rglob(".*.tmp")):
        match = _TEMP_NAME.match(path.name)
        if match is None or not path.is_file() or _pid_alive(int(match.group("pid"))):
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


@contextlib.contextmanager
def set_lock(folder: Path, timeout: float = 300.0) -> Iterator[None]:
    """An exclusive lock on a set folder for one read-merge-write, held by flock on the folder.

    Why the folder itself: a lock file would show up in ``git status`` and get committed. flock
    is released by the kernel when the process dies, so a killed run never leaves a stale lock.
    Where flock is not available (Windows), saves are not serialised.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BaselineError(
                        f"baseline set {folder} is being saved by another process for over "
                        f"{timeout:g} s; nothing was written: wait for it, or stop it and save "
                        "again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def save_set(
    folder: Path, results: Iterable[BenchmarkResult], stamp: Mapping[str, Any] | None = None
) -> list[Path]:
    """Write ``results`` into the set at ``folder``, keeping entries of tests that did not run.

    Returns the files that changed. Under the set lock, existing files are (re-)read and merged,
    so concurrent saves lose nothing; a corrupt file raises BaselineError and nothing is written.
    ``stamp`` ({"commit", "time"}) is recorded as ``saved`` on every entry whose content changed;
    an entry saved again unchanged keeps its old stamp, so saving the same results twice writes
    the same bytes.
    """
    by_file: dict[Path, list[BenchmarkResult]] = {}
    modules: dict[Path, str] = {}
    for result in results:
        problem = next(
            filter(
                None,
                (
                    invalid_number(name, metric_to_json(name, metric))
                    for name, metric in sorted(result.metrics.items())
                ),
            ),
            None,
        )
        if problem:
            raise BaselineError(f"{result.key}: {problem}; nothing was saved")
        path = folder / module_file_name(result.module)
        by_file.setdefault(path, []).append(result)
        modules[path] = result.module
    if not by_file:
        return []
    with set_lock(folder):
        sweep_stale_temp_files(folder)
        texts: dict[Path, str] = {}
        for path, new_results in by_file.items():
            existing: dict[str, BenchmarkResult] = {}
            old_text: str | None = None
            if os.path.lexists(path):
                old_bytes = read_baseline_bytes(path)
                existing = parse_baseline_document(old_bytes, str(path))
                old_text = old_bytes.decode("utf-8")
            merged = merge_entries(existing, new_results)
            for key in {r.key for r in new_results}:
                before = existing.get(key)
                if before is not None and _entry_content(before) == _entry_content(merged[key]):
                    merged[key].saved = dict(before.saved)
                elif stamp is not None:
                    merged[key].saved = dict(stamp)
            text = render_baseline_document(modules[path], merged.values())
            if text != old_text:
                texts[path] = text
        atomic_write_many(texts)
    return sorted(texts)
