"""The results model: what one benchmark produced, the environment it was measured in, and their
JSON.

In memory the plugin keeps torch's own types (``Measurement`` for wall time, ``CallgrindStats`` for
instruction counts) so users can keep digging with the API they know. Each metric's value type and
JSON form live in its own module under ``metrics/``; this module reaches them only through the
registry (``metrics.registry``), so it never names a metric. On disk everything is plain
JSON with rounded numbers and sorted keys: baselines live in git and must diff cleanly. Nothing is
ever pickled.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from ..common.vocabulary import Environment, round_sig  # noqa: F401
from ..metrics import registry
from ..metrics.identity import Identity

# Re-exported: the names hook authors and older code import from here.
from ..metrics.instructions import InstructionsMetric  # noqa: F401
from ..metrics.memory import MemoryMetric  # noqa: F401
from ..metrics.ops import OpsMetric  # noqa: F401
from ..metrics.time import TimeMetric  # noqa: F401

SCHEMA_VERSION = 1

#: The built-in metrics (``metrics.registry.names()`` also lists those plugins registered).
METRICS = registry.BUILTIN


# --------------------------------------------------------------------------------------------------
# Environment fingerprint (the Environment type is in vocabulary.py)
# --------------------------------------------------------------------------------------------------


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
# Metrics: through the registry
# --------------------------------------------------------------------------------------------------


class UnknownMetricError(ValueError):
    """Stored data names a metric no loaded plugin registered: not a corrupt file, a missing
    plugin (or conftest), so readers say which metric and how to load it instead of "malformed"."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown metric {name!r}")
        self.metric = name


def metric_from_json(name: str, data: Mapping[str, Any]) -> Any:
    metric = registry.find(name, Identity)
    if metric is None:
        raise UnknownMetricError(name)
    return metric.from_json(data)


def metric_to_json(name: str, value: Any) -> dict[str, Any]:
    metric = registry.find(name, Identity)
    return metric.to_json(value) if metric is not None else value.to_json()  # type: ignore[no-any-return]


def invalid_number(metric: str, data: Any) -> str | None:
    """What is wrong with the numbers of one metric's JSON data, or None when nothing is: each
    metric's own rule (``Metric.invalid_number``: finite, >= 0, its positive and count fields).
    The answer names the field as ``metric.field[index]`` so the user can find it in the file."""
    found = registry.find(metric, Identity)
    if found is None or not isinstance(data, Mapping):
        return None  # metric_from_json reports the shape or the unknown name
    return found.invalid_number(data)


# --------------------------------------------------------------------------------------------------
# One benchmark's result
# --------------------------------------------------------------------------------------------------


def nodeid_of(key: str) -> str:
    """The test a result key belongs to, for results and baselines that do not store it.

    Keys are ``nodeid``, ``nodeid [description]`` or ``nodeid #2`` (see
    fixtures.ItemRecorder.key_for), so parsing them back is ambiguous when a parametrize id itself
    contains `` [`` or `` #``: results carry the node id as their own field
    (``BenchmarkResult.nodeid``) and this guess is only the fallback for baseline files written
    before that field existed.
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
    # pytest-benchmark's benchmark.group / benchmark.extra_info (or marker group=): kept in
    # baselines
    group: str = ""
    extra_info: dict[str, Any] = dataclasses.field(default_factory=dict)  # plain JSON values
    #: The pytest node id of the test that produced it. Stored, never parsed back out of ``key``:
    #: a parametrize id may itself contain " [" or " #". Derived from the key when not given.
    nodeid: str = ""
    #: When this entry was last saved with changed content: {"commit": sha or None, "time": ISO
    #: UTC}. Baselines only; not part of comparability.
    saved: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The test's own limits (marker ``limits=``: metric -> fraction), over the run's: kept in
    #: results and baselines so that ``torchbench compare`` judges as the pytest run did.
    limits: dict[str, float] = dataclasses.field(default_factory=dict)

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
            "metrics": {name: metric_to_json(name, m) for name, m in sorted(self.metrics.items())},
            "environments": {name: e.to_json() for name, e in sorted(self.environments.items())},
            "extras": self.extras,
            "group": self.group,
            "extra_info": self.extra_info,
            **({"limits": dict(sorted(self.limits.items()))} if self.limits else {}),
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
            metrics={
                name: metric_from_json(name, m) for name, m in data.get("metrics", {}).items()
            },
            environments={
                name: Environment.from_json(e) for name, e in data.get("environments", {}).items()
            },
            extras=dict(data.get("extras", {})),
            group=str(data.get("group", "") or ""),
            extra_info=dict(data.get("extra_info", {}) or {}),
            limits=limits_from_json(data.get("limits")),
        )


def limits_from_json(data: Any) -> dict[str, float]:
    """Per-test limits read back (results, baselines): metric -> a finite fraction >= 0."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError("'limits' must be an object of metric: fraction")
    limits = {}
    for name, value in data.items():
        if not registry.known(str(name)):
            raise UnknownMetricError(str(name))
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"limits.{name} is {value!r}; it must be a finite fraction >= 0")
        limits[str(name)] = float(value)
    return limits
