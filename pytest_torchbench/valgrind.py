"""pytest glue for instructions mode: test processes run under valgrind, launched identically.

Design: instructions mode always runs the tests in pytest-xdist workers, each one process under
``valgrind --tool=callgrind`` with instrumentation off until the first benchmark (imports and
collection run about 3x faster than instrumented). A serial run gets one worker, ``-n 2`` two.
Why not re-exec pytest itself under valgrind: counts move by tenths of a percent with the
process's argv and environment (stack and heap layout, FACTS.md), so a re-exec'd ``pytest ...``
and an xdist worker (``python -u -c <bootstrap>``) would count differently. Launching every counted
process the same way (same whitelisted, padded environment, same interpreter arguments, same
working directory) gives serial and parallel runs the same counts by construction. xdist also
brings Ctrl-C handling, crash reports naming the test that was running, and result transport.
"""
from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .engines import callgrind
from .session import DUMP_DIR_VARIABLE



def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-torchbench"


def fixed_dump_dir() -> Path:
    """A dump folder with the same name on every run: ``<tmp>/torchbench-callgrind-<uid>-<slot>``.

    Why not mkdtemp: its random name reaches the counted process (environment, command line,
    strings built from paths), and reruns should give bit-identical counts. The first free slot
    is taken (``mkdir`` is atomic), so concurrent runs still get folders of their own.
    """
    base = Path(tempfile.gettempdir())
    for slot in range(100):
        path = base / f"torchbench-callgrind-{os.getuid()}-{slot:02d}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return path
    return Path(tempfile.mkdtemp(prefix="torchbench-callgrind-"))


class CallgrindWorkers:
    """Controller-side plugin: turns xdist's worker specs into valgrind launches."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.valgrind_version = callgrind.check_valgrind()
        self.allocator = callgrind.build_allocator(cache_dir())
        self.dump_dir = fixed_dump_dir()
        self.crashed: list[str] = []

    def counted_command(self) -> str:
        """The interpreter command every worker gets: ``env -i VARS valgrind ... python``."""
        environment = callgrind.counted_environment(
            os.environ, self.allocator,
            extra={DUMP_DIR_VARIABLE: str(self.dump_dir)},
            valgrind_version=self.valgrind_version,
        )
        python = sys.executable  # the virtualenv's own path: realpath leaves the venv
        argv = [
            "env", "-i", *(f"{k}={v}" for k, v in environment.items()),
            *callgrind.valgrind_argv(python, callgrind.out_file_pattern(self.dump_dir)),
            python,
        ]
        return shlex.join(argv)

    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        command = self.counted_command()
        for spec in specs:
            if not spec.popen or spec.ssh or spec.socket:
                raise pytest.UsageError(
                    f"--bench-mode=instructions runs workers locally under valgrind; the xdist "
                    f"spec {spec} is not a local popen worker"
                )
            spec.python = command

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        """Read the workers' Callgrind dumps here, natively, before the controller judges them.

        A worker hands over its region's dump unread (``instructions.dump``): parsing it under
        valgrind cost ~0.4 s per benchmark, here ~20 ms. Only files in this run's dump folder
        are read; each is deleted once read.
        """
        payload = getattr(report, "torchbench", None)
        if isinstance(payload, dict):
            for result in payload.get("results") or ():
                metrics = result.get("metrics") or {}
                data = metrics.get("instructions")
                if isinstance(data, dict) and data.get("dump"):
                    metrics["instructions"] = self._read_dump(data)
        return (yield)

    def _read_dump(self, data: dict[str, Any]) -> dict[str, Any]:
        from .engines.callgrind.parse import exclusive_counts, parse_callgrind_file
        from .results import InstructionsMetric

        path = Path(str(data["dump"]))
        if path.resolve().parent != self.dump_dir.resolve():
            raise RuntimeError(f"a counted worker named a dump outside {self.dump_dir}: {path}")
        exclusive, total = exclusive_counts(parse_callgrind_file(path))
        path.unlink()
        warmup = data.get("warmup")
        return InstructionsMetric.from_counts(exclusive, total, int(data["number_per_run"]),
                                              int(warmup) if warmup is not None else None).to_json()

    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        self.crashed.append(crashitem)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for leftover in self.dump_dir.glob("*"):
            try:
                leftover.unlink()
            except OSError:
                pass
        try:
            self.dump_dir.rmdir()
        except OSError:
            pass


def configure_controller(config: pytest.Config) -> CallgrindWorkers:
    """Check valgrind, build the allocator, and make xdist run the tests in counted workers."""
    if not config.pluginmanager.has_plugin("xdist"):
        raise pytest.UsageError(
            "--bench-mode=instructions runs tests in pytest-xdist workers under valgrind; "
            "pytest-xdist is disabled or missing (pip install pytest-xdist; do not pass -p no:xdist)"
        )
    try:
        workers = CallgrindWorkers(config)
    except (callgrind.ValgrindUnavailable, callgrind.UnsupportedPlatform) as exc:
        raise pytest.UsageError(str(exc)) from None
    if getattr(config.option, "dist", "no") == "no" or not getattr(config.option, "tx", None):
        config.option.dist = "load"
        config.option.tx = ["popen"]
    config.pluginmanager.register(workers, "torchbench-callgrind-workers")
    return workers
