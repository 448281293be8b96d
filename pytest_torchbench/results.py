"""The results model: what one benchmark produced, the environment it was measured in, and their JSON.

In memory the plugin keeps torch's own types (``Measurement`` for wall time, ``CallgrindStats`` for
instruction counts) so users can keep digging with the API they know. On disk everything is plain
JSON with rounded numbers and sorted keys: baselines live in git and must diff cleanly. Nothing is
ever pickled.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import re
from typing import AbstractSet, Any, Iterator, Mapping

SCHEMA_VERSION = 1

#: The metrics a benchmark can carry. Each has its own comparability rules and limits.
METRICS = ("time", "instructions", "ops", "memory")


def round_sig(value: float, digits: int = 6) -> float:
    """Round to significant digits so that JSON numbers stay short and stable across platforms."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.{digits}g}")


# --------------------------------------------------------------------------------------------------
# Environment fingerprint
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Environment:
    """Facts about where a metric was measured; judgement decides which facts matter per metric."""

    facts: Mapping[str, str]

    @property
    def id(self) -> str:
        """A short content hash, so a baseline file can refer to one environment from many entries."""
        blob = json.dumps(dict(self.facts), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def to_json(self) -> dict[str, str]:
        return {key: str(self.facts[key]) for key in sorted(self.facts)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Environment:
        if not isinstance(data, Mapping):
            raise ValueError("environment must be an object")
        return cls({str(k): str(v) for k, v in data.items()})

    def merged(self, extra: Mapping[str, str]) -> Environment:
        return Environment({**self.facts, **{k: str(v) for k, v in extra.items()}})


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_environment(num_threads: int | None = None) -> Environment:
    """The fingerprint of this process: what would make two measurements incomparable."""
    import torch

    libc_name, libc_version = platform.libc_ver()
    facts = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_build": " ".join(platform.python_build()),
        "python_compiler": platform.python_compiler(),
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", "") or "",
        "torch_cuda": str(torch.version.cuda or "none"),
        "torch_debug": str(bool(torch.version.debug)),
        "cpu_model": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": str(os.cpu_count() or 0),
        "machine": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "libc": f"{libc_name} {libc_version}".strip(),
        "pythonmalloc": os.environ.get("PYTHONMALLOC", "default"),
        "num_threads": str(num_threads if num_threads is not None else torch.get_num_threads()),
    }
    if torch.cuda.is_available():
        facts["gpu"] = torch.cuda.get_device_name()
    return Environment(facts)


# --------------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class TimeMetric:
    """Wall time: the raw replicate block times are kept, because significance tests need samples.

    ``cpu_share`` (the measuring thread's CPU time over the measurement's wall time) and ``load``
    (the load average) say how disturbed the machine was, so a verdict can say so. ``history``
    holds the fastest per-call times of earlier saved runs of the same benchmark in the same
    environment (newest last): the spread between runs, which replicates of one run cannot show.
    """

    number_per_run: int
    raw_times: list[float]  # seconds per block of ``number_per_run`` calls, as Measurement.raw_times
    measurement: Any = None  # torch.utils.benchmark.Measurement, when measured in this process
    cpu_share: float | None = None
    load: float | None = None
    history: list[float] = dataclasses.field(default_factory=list)

    #: How many earlier saved runs a baseline keeps.
    HISTORY = 4

    @property
    def times(self) -> list[float]:
        """Seconds per single call, one value per replicate."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        import numpy as np

        return float(np.median(self.times))

    @property
    def iqr(self) -> float:
        import numpy as np

        q1, q3 = np.quantile(self.times, [0.25, 0.75])
        return float(q3 - q1)

    @property
    def fastest(self) -> float:
        """The fastest replicate block, per call: what the gate compares (other processes only
        ever add time, so this is the least disturbed estimate of the code's own speed)."""
        return min(self.times)

    @classmethod
    def from_measurement(cls, measurement: Any) -> TimeMetric:
        metadata = getattr(measurement, "metadata", None) or {}
        return cls(
            number_per_run=int(measurement.number_per_run),
            raw_times=[float(t) for t in measurement.raw_times],
            measurement=measurement,
            cpu_share=_optional_float(metadata.get("cpu_share")),
            load=_optional_float(metadata.get("load")),
        )

    def saved_over(self, previous: TimeMetric) -> TimeMetric:
        """This run saved where ``previous`` was (same environment): keep the earlier runs' fastest.

        Saving the very same samples again (the same run saved twice) is not a new run: the
        history stays as it was, so saving twice writes the same bytes.
        """
        if [round_sig(t) for t in self.raw_times] == [round_sig(t) for t in previous.raw_times]:
            return dataclasses.replace(self, history=list(previous.history))
        history = [*previous.history, round_sig(previous.fastest)][-self.HISTORY:]
        return dataclasses.replace(self, history=history)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "number_per_run": self.number_per_run,
            "median": round_sig(self.median),
            "iqr": round_sig(self.iqr),
            "raw_times": [round_sig(t) for t in self.raw_times],
        }
        if self.cpu_share is not None:
            data["cpu_share"] = round(self.cpu_share, 3)
        if self.load is not None:
            data["load"] = round(self.load, 2)
        if self.history:
            data["history"] = [round_sig(t) for t in self.history]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimeMetric:
        raw = data["raw_times"]
        number = int(data["number_per_run"])
        if not isinstance(raw, list) or not raw or number < 1:
            raise ValueError("time needs a non-empty raw_times list and number_per_run >= 1")
        history = data.get("history", [])
        if not isinstance(history, list) or not all(isinstance(t, (int, float)) and t > 0 for t in history):
            raise ValueError("time.history must be a list of positive times")
        return cls(number_per_run=number, raw_times=[float(t) for t in raw],
                   cpu_share=_optional_float(data.get("cpu_share")), load=_optional_float(data.get("load")),
                   history=[float(t) for t in history])


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


_RECURSION_SUFFIX = re.compile(r"'\d+$")
_ANONYMOUS_CODE = re.compile(r"^\?\?\?:0x[0-9a-fA-F]+$")
_BUILD_PREFIX = re.compile(r"^/tmp/python-build\.[^/]+/Python-[^/]+/(?:\./)?")


def _stable_function_name(name: str) -> str:
    """Names that mean the same code in every run: no recursion depth (``f'2``), no address of
    anonymous code (an mmap'd trampoline lands elsewhere with another history), no build dir."""
    name = _RECURSION_SUFFIX.sub("", name)
    name = _BUILD_PREFIX.sub("", name)
    return "???:<anonymous code>" if _ANONYMOUS_CODE.match(name) else name


@dataclasses.dataclass
class InstructionsMetric:
    """Callgrind counts of the measured region; ``functions`` are exclusive counts per run.

    ``number_per_run`` (and ``warmup``) are recorded: counts per call depend a little on the
    number of calls, so a baseline made with another number is not comparable. ``dump`` is set
    only between a counted worker and its controller: the worker hands over the unread Callgrind
    dump and the controller, running natively, reads it (:meth:`from_counts`).
    """

    instructions_per_run: float
    number_per_run: int
    functions: dict[str, float]  # standardized function name -> exclusive instructions per run
    stats: Any = None  # torch CallgrindStats, when measured in this process
    warmup: int | None = None
    dump: str | None = None

    #: Functions kept in baselines: the largest, until they cover this share of the total, and
    #: at most MAX_FUNCTIONS of them; the rest is summed under OTHER. Why: a baseline entry with
    #: every function of a torch call is ~55 KB (hundreds of long C++ names); the functions that
    #: change when code changes are nearly always among the largest, and a change elsewhere still
    #: shows as a change of OTHER. Measured trade-off: README "Baselines on disk".
    COVERAGE = 0.95
    MAX_FUNCTIONS = 64
    OTHER = "[other functions]"

    # torch's CallgrindStats.as_standardized, as plain regular expressions (same order), so that a
    # dump read without torch (the controller) gets the very same names.
    _STANDARDIZE = (
        (re.compile(r"^.+build/\.\./"), "build/../"),
        (re.compile(r"^.+/" + re.escape("build/aten/")), "build/aten/"),
        (re.compile(r"^.+/" + re.escape("Python/")), "Python/"),
        (re.compile(r"^.+/" + re.escape("Objects/")), "Objects/"),
        (re.compile(r"\s\[.+\]$"), ""),
    )

    @classmethod
    def standardized_name(cls, name: str) -> str:
        for pattern, replacement in cls._STANDARDIZE:
            name = pattern.sub(replacement, name)
        return _stable_function_name(name)

    @classmethod
    def from_counts(cls, exclusive: Mapping[str, int], total: int, number: int,
                    warmup: int | None = None) -> InstructionsMetric:
        """From raw exclusive counts over ``number`` calls (names as Callgrind's reader spells them)."""
        merged: dict[str, int] = {}
        for name, count in exclusive.items():
            key = cls.standardized_name(name)
            merged[key] = merged.get(key, 0) + count
        functions: dict[str, float] = {}
        covered = 0
        ordered = sorted(merged.items(), key=lambda item: (-abs(item[1]), item[0]))
        for name, count in ordered:
            if total > 0 and covered >= cls.COVERAGE * total or len(functions) >= cls.MAX_FUNCTIONS:
                break
            functions[name] = count / number
            covered += count
        rest = sum(merged.values()) - covered
        if rest:
            functions[cls.OTHER] = rest / number
        return cls(instructions_per_run=total / number, number_per_run=number,
                   functions=functions, warmup=warmup)

    @classmethod
    def from_stats(cls, stats: Any, warmup: int | None = None) -> InstructionsMetric:
        """From torch's CallgrindStats: names standardized (``as_standardized``), counts per run."""
        exclusive = {fc.function: fc.count for fc in stats.stmt_exclusive_stats}
        metric = cls.from_counts(exclusive, stats.counts(), int(stats.number_per_run), warmup)
        metric.stats = stats
        return metric

    @classmethod
    def pending(cls, dump: str, number: int, warmup: int | None) -> InstructionsMetric:
        """A region counted in this process whose dump the controller will read."""
        return cls(instructions_per_run=0.0, number_per_run=number, functions={}, warmup=warmup, dump=dump)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "instructions_per_run": round_sig(self.instructions_per_run, 9),
            "number_per_run": self.number_per_run,
            "functions": {k: round_sig(v, 7) for k, v in sorted(self.functions.items())},
        }
        if self.warmup is not None:
            data["warmup"] = self.warmup
        if self.dump is not None:
            data["dump"] = self.dump
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstructionsMetric:
        functions = data.get("functions", {})
        if not isinstance(functions, Mapping):
            raise ValueError("instructions.functions must be an object")
        warmup = data.get("warmup")
        return cls(
            instructions_per_run=float(data["instructions_per_run"]),
            number_per_run=int(data["number_per_run"]),
            functions={str(k): float(v) for k, v in functions.items()},
            warmup=int(warmup) if warmup is not None else None,
        )

    def function_counts(self) -> Any:
        """The per-function counts as torch's FunctionCounts, so ``delta``/``filter`` work on baselines."""
        from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import FunctionCounts

        return FunctionCounts._from_dict(
            {name: int(round(count)) for name, count in self.functions.items()}, inclusive=False
        )


@dataclasses.dataclass
class OpsMetric:
    """aten op calls per iteration: deterministic, needs no valgrind."""

    ops: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"ops": {k: round_sig(v) for k, v in sorted(self.ops.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpsMetric:
        ops = data["ops"]
        if not isinstance(ops, Mapping):
            raise ValueError("ops.ops must be an object")
        return cls({str(k): float(v) for k, v in ops.items()})


@dataclasses.dataclass
class MemoryMetric:
    """Peak bytes allocated per iteration (CPU from profiler memory events, CUDA from torch.cuda)."""

    peak_bytes: dict[str, int]  # device ("cpu", "cuda") -> bytes

    def to_json(self) -> dict[str, Any]:
        return {"peak_bytes": {k: int(v) for k, v in sorted(self.peak_bytes.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryMetric:
        peak = data["peak_bytes"]
        if not isinstance(peak, Mapping):
            raise ValueError("memory.peak_bytes must be an object")
        return cls({str(k): int(v) for k, v in peak.items()})


METRIC_TYPES: dict[str, type] = {
    "time": TimeMetric,
    "instructions": InstructionsMetric,
    "ops": OpsMetric,
    "memory": MemoryMetric,
}


def metric_from_json(name: str, data: Mapping[str, Any]) -> Any:
    try:
        metric_type = METRIC_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}") from None
    return metric_type.from_json(data)


# --------------------------------------------------------------------------------------------------
# One benchmark's result
# --------------------------------------------------------------------------------------------------


def nodeid_of(key: str) -> str:
    """The test a result key belongs to, for results and baselines that do not store it.

    Keys are ``nodeid``, ``nodeid [description]`` or ``nodeid #2`` (see fixtures.ItemRecorder.key_for),
    so parsing them back is ambiguous when a parametrize id itself contains `` [`` or `` #``:
    results carry the node id as their own field (``BenchmarkResult.nodeid``) and this guess is
    only the fallback for baseline files written before that field existed.
    """
    return key.split(" [", 1)[0].split(" #", 1)[0]


def nodeid_among(key: str, nodeids: AbstractSet[str]) -> str:
    """The node id of ``key`` when the candidates are known (old baselines without a ``nodeid``).

    The longest collected node id that ``key`` is, or starts with followed by `` [`` or `` #``;
    :func:`nodeid_of`'s guess when none matches (the test no longer exists).
    """
    best = ""
    for nodeid in nodeids:
        if len(nodeid) > len(best) and (
            key == nodeid or key.startswith(nodeid + " [") or key.startswith(nodeid + " #")
        ):
            best = nodeid
    return best or nodeid_of(key)


# --------------------------------------------------------------------------------------------------
# Validating numbers read from baselines
# --------------------------------------------------------------------------------------------------

#: Fields whose values must be > 0: every judge divides by them or compares ratios, so a zero (or a
#: negative, NaN or infinite) value there would make every comparison pass, silently.
#: A zero op count (op not called) or zero peak memory (nothing allocated) is a real measurement
#: that the judges handle (any increase from 0 fails), so those may be 0.
POSITIVE_FIELDS: dict[str, tuple[str, ...]] = {
    "time": ("raw_times", "median"),
    "instructions": ("instructions_per_run",),
}
#: Fields that are whole numbers >= 1.
COUNT_FIELDS = ("number_per_run",)


def invalid_number(metric: str, data: Any) -> str | None:
    """What is wrong with the numbers of one metric's JSON data, or None when nothing is.

    Every number anywhere in a metric must be finite and >= 0 (times, counts and bytes cannot be
    negative), the fields in POSITIVE_FIELDS > 0, and COUNT_FIELDS whole numbers >= 1. The answer
    names the field as ``metric.field[index]`` so the user can find it in the file.
    """
    if not isinstance(data, Mapping) or metric not in METRIC_TYPES:
        return None  # metric_from_json reports the shape or the unknown name
    for field in COUNT_FIELDS:
        if field in data:
            value = data[field]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                return f"{metric}.{field} is {_shown(value)}; it must be a whole number >= 1"
    positive = POSITIVE_FIELDS.get(metric, ())
    for path, value, field in _numbers(data, metric, None):
        problem = _number_problem(value, strictly_positive=field in positive)
        if problem:
            return f"{path} is {_shown(value)}; {problem}"
    return None


def _numbers(value: Any, path: str, field: str | None) -> Iterator[tuple[str, Any, str | None]]:
    """(path, number, top-level field) for every number inside ``value``, depth first. Names
    from the file are shown JSON-escaped unless they are plain identifiers (they reach terminals)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value, field
    elif isinstance(value, Mapping):
        for key, item in value.items():
            plain = field is None and str(key).isidentifier()
            yield from _numbers(item, f"{path}.{key}" if plain else f"{path}[{json.dumps(key)}]",
                                key if field is None else field)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]", field)


def _number_problem(value: float, strictly_positive: bool) -> str | None:
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return "it must be a finite number"
    if not finite:
        return "it must be a finite number"
    if strictly_positive and value <= 0:
        return "it must be > 0 (a zero or negative baseline would let every comparison pass)"
    if value < 0:
        return "it must be >= 0"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


@dataclasses.dataclass
class BenchmarkResult:
    """Everything one benchmark (a test, or one recorded Timer inside it) produced in this run."""

    key: str  # stable identity: the test's node id, plus " [description]" for extra recordings
    module: str  # the test module's path relative to rootdir: decides the baseline file
    label: str
    sub_label: str
    description: str
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    environments: dict[str, Environment] = dataclasses.field(default_factory=dict)  # metric -> env
    extras: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. profile summary, trace
    # pytest-benchmark's benchmark.group / benchmark.extra_info (or marker group=): kept in baselines
    group: str = ""
    extra_info: dict[str, Any] = dataclasses.field(default_factory=dict)  # plain JSON values
    #: The pytest node id of the test that produced it. Stored, never parsed back out of ``key``:
    #: a parametrize id may itself contain " [" or " #". Derived from the key when not given.
    nodeid: str = ""
    #: When this entry was last saved with changed content: {"commit": sha or None, "time": ISO UTC}.
    #: Baselines only; not part of comparability.
    saved: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.nodeid:
            self.nodeid = nodeid_of(self.key)

    def to_json(self) -> dict[str, Any]:
        """The wire form (xdist, --bench-json): self-contained, environments inline."""
        return {
            "key": self.key,
            "nodeid": self.nodeid,
            "module": self.module,
            "label": self.label,
            "sub_label": self.sub_label,
            "description": self.description,
            "metrics": {name: m.to_json() for name, m in sorted(self.metrics.items())},
            "environments": {name: e.to_json() for name, e in sorted(self.environments.items())},
            "extras": self.extras,
            "group": self.group,
            "extra_info": self.extra_info,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        return cls(
            key=str(data["key"]),
            nodeid=str(data.get("nodeid") or ""),
            module=str(data["module"]),
            label=str(data.get("label", "")),
            sub_label=str(data.get("sub_label", "")),
            description=str(data.get("description", "")),
            metrics={name: metric_from_json(name, m) for name, m in data.get("metrics", {}).items()},
            environments={
                name: Environment.from_json(e) for name, e in data.get("environments", {}).items()
            },
            extras=dict(data.get("extras", {})),
            group=str(data.get("group", "") or ""),
            extra_info=dict(data.get("extra_info", {}) or {}),
        )
