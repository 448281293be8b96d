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
    """Callgrind counts of the measured region; ``functions`` are exclusive counts per run."""

    instructions_per_run: float
    number_per_run: int
    functions: dict[str, float]  # standardized function name -> exclusive instructions per run
    stats: Any = None  # torch CallgrindStats, when measured in this process

    #: Functions kept in baselines: the largest, until they cover this share of the total.
    COVERAGE = 0.99

    @classmethod
    def from_stats(cls, stats: Any) -> InstructionsMetric:
        """From torch's CallgrindStats: names standardized (``as_standardized``), counts per run."""
        number = int(stats.number_per_run)
        exclusive = stats.as_standardized().stats(inclusive=False).transform(_stable_function_name)
        total = stats.counts()
        functions: dict[str, float] = {}
        covered = 0
        for count, name in sorted(exclusive, key=lambda fc: (-abs(fc.count), fc.function)):
            if total > 0 and covered >= cls.COVERAGE * total:
                break
            functions[name] = functions.get(name, 0.0) + count / number
            covered += count
        return cls(instructions_per_run=total / number, number_per_run=number,
                   functions=functions, stats=stats)

    def to_json(self) -> dict[str, Any]:
        return {
            "instructions_per_run": round_sig(self.instructions_per_run, 9),
            "number_per_run": self.number_per_run,
            "functions": {k: round_sig(v, 7) for k, v in sorted(self.functions.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstructionsMetric:
        functions = data.get("functions", {})
        if not isinstance(functions, Mapping):
            raise ValueError("instructions.functions must be an object")
        return cls(
            instructions_per_run=float(data["instructions_per_run"]),
            number_per_run=int(data["number_per_run"]),
            functions={str(k): float(v) for k, v in functions.items()},
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
