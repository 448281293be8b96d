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
from typing import Any, Mapping

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
    """Wall time: the raw replicate block times are kept, because significance tests need samples."""

    number_per_run: int
    raw_times: list[float]  # seconds per block of ``number_per_run`` calls, as Measurement.raw_times
    measurement: Any = None  # torch.utils.benchmark.Measurement, when measured in this process

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

    @classmethod
    def from_measurement(cls, measurement: Any) -> TimeMetric:
        return cls(
            number_per_run=int(measurement.number_per_run),
            raw_times=[float(t) for t in measurement.raw_times],
            measurement=measurement,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "number_per_run": self.number_per_run,
            "median": round_sig(self.median),
            "iqr": round_sig(self.iqr),
            "raw_times": [round_sig(t) for t in self.raw_times],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimeMetric:
        raw = data["raw_times"]
        number = int(data["number_per_run"])
        if not isinstance(raw, list) or not raw or number < 1:
            raise ValueError("time needs a non-empty raw_times list and number_per_run >= 1")
        return cls(number_per_run=number, raw_times=[float(t) for t in raw])


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
    """The test a result key belongs to: keys are ``nodeid``, ``nodeid [description]`` or
    ``nodeid #2`` (see fixtures.ItemRecorder.key_for)."""
    return key.split(" [", 1)[0].split(" #", 1)[0]


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

    def to_json(self) -> dict[str, Any]:
        """The wire form (xdist, --bench-json): self-contained, environments inline."""
        return {
            "key": self.key,
            "module": self.module,
            "label": self.label,
            "sub_label": self.sub_label,
            "description": self.description,
            "metrics": {name: m.to_json() for name, m in sorted(self.metrics.items())},
            "environments": {name: e.to_json() for name, e in sorted(self.environments.items())},
            "extras": self.extras,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        return cls(
            key=str(data["key"]),
            module=str(data["module"]),
            label=str(data.get("label", "")),
            sub_label=str(data.get("sub_label", "")),
            description=str(data.get("description", "")),
            metrics={name: metric_from_json(name, m) for name, m in data.get("metrics", {}).items()},
            environments={
                name: Environment.from_json(e) for name, e in data.get("environments", {}).items()
            },
            extras=dict(data.get("extras", {})),
        )
