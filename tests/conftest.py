"""Shared test helpers.

pytest-benchmark is installed on the development machines and defines the same ``benchmark``
fixture, so every pytest run we start passes ``-p no:benchmark``; subprocess runs also get this
checkout on PYTHONPATH so they import the code under test, not another installed copy.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_torchbench.judging.results import BenchmarkResult

ROOT = Path(__file__).resolve().parents[1]

# torch is imported once, before any test: a first import inside a test that uses pytester is
# undone by pytester's snapshot of sys.modules at its teardown, and the next import of torch in
# that process fails ("SystemError: ... bad call flags", then a segfault in the xdist worker),
# depending on which tests the worker drew.
with contextlib.suppress(ImportError):
    import torch  # noqa: F401

# Test projects that end-to-end tests copy and run with pytester; not tests of this suite.
collect_ignore = ["e2e/projects"]
FAST = "--bench-min-run-time=0.02"

# What torch itself writes to stderr when importing torch.utils.cpp_extension (torch.utils.benchmark
# imports it) on a CUDA build with no GPU where it finds a CUDA toolkit (nvcc on PATH): torch 2.5.1
# prints it, 2.9.1 and 2.13 log it as a warning, prefixed "W1126 09:34:44.293000 18763
# torch/utils/cpp_extension.py:117] ". PyPI has only CUDA builds of older torch releases
# (benchmarks/torch_versions.sh), and the FACTS saw it on Python 3.12 too. Not the plugin's output.
TORCH_IMPORT_NOISE = re.compile(
    r"^(.*cpp_extension\.py:\d+\] )?No CUDA runtime is found, using CUDA_HOME="
)


class _ForkServer:
    """The test process's side of ``tests/zygote.py``: ``python -m pytest`` runs forked from a
    process that has imported torch already (see that file for why and what a fork cannot give).

    One per test process, started at its first run, ended when the test process exits.
    ``TORCHBENCH_TESTS_FORK=0`` turns it off: every run is then a fresh interpreter.
    """

    def __init__(self, import_env: tuple[str | None, ...]) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.pending = b""
        self.import_env = import_env
        self.log = ROOT / ".pytest_cache" / f"zygote-{os.getpid()}-{abs(hash(import_env)):x}.log"
        atexit.register(self.close)

    def _start(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            env = {
                k: v
                for k, v in os.environ.items()
                if not k.startswith("PYTEST_")
                and k != "PYTHONPATH"
                and k not in IMPORT_TIME_VARIABLES
            }
            env.update(
                {k: v for k, v in zip(IMPORT_TIME_VARIABLES, self.import_env) if v is not None}
            )
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    [sys.executable, str(Path(__file__).with_name("zygote.py"))],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    cwd=ROOT,
                )
            self.pending = b""
        return self.process

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def reply(self, deadline: float | None) -> dict:
        """The server's next answer; TimeoutError when none came by ``deadline`` (monotonic)."""
        process = self._start()
        assert process.stdout is not None
        fd = process.stdout.fileno()
        while b"\n" not in self.pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
                raise RuntimeError(
                    f"tests/zygote.py ended unexpectedly; its log ({self.log}):\n{log}"
                )
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def start(self, request: dict) -> _ForkedRun:
        """Start one ``python -m pytest`` (``request``: see ``tests/zygote.py``)."""
        process = self._start()
        assert process.stdin is not None
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        return _ForkedRun(self, int(self.reply(time.monotonic() + 120)["pid"]))


class _ForkedRun:
    """What :meth:`pytest.Pytester.run` uses of the process it starts (``stdin``, ``wait``,
    ``kill``), for a run forked by the server: pytester does the rest (arguments, output files,
    timeout, result) as for any process."""

    stdin = None

    def __init__(self, server: _ForkServer, pid: int) -> None:
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                reply = self.server.reply(None if timeout is None else time.monotonic() + timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(f"forked pytest {self.pid}", timeout or 0) from None
            self.returncode = int(reply["returncode"])
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


#: What the interpreter and torch read once, at start or import: a forked run gets the values its
#: server started with, so each combination of them has a server of its own (started with them).
#: Before, the server took the environment of the first test that needed it: a test that set
#: ``OMP_NUM_THREADS=1`` (``bench``) got torch's default thread count of a server started
#: without it, as the test order decided (seen with ``--dist worksteal``).
IMPORT_TIME_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TORCH_LOGS",
    "PYTHONHASHSEED",
    "PYTHONMALLOC",
)
_FORK_SERVERS: dict[tuple[str | None, ...], _ForkServer] = {}


def _fork_server(env: dict[str, str]) -> _ForkServer:
    """The server whose start-time environment is ``env``'s."""
    key = tuple(env.get(name) for name in IMPORT_TIME_VARIABLES)
    if key not in _FORK_SERVERS:
        _FORK_SERVERS[key] = _ForkServer(key)
    return _FORK_SERVERS[key]


@functools.cache
def _cuda_device_here() -> bool:
    """Whether this machine has an NVIDIA GPU: there, every run is a fresh interpreter.

    The server's imports touch CUDA (torch marks the process at its first device query), and a
    process forked from one that did cannot use CUDA: on an H200 (2026-11-27) every GPU test run
    failed with "Cannot re-initialize CUDA in forked subprocess" at its first CUDA tensor.

    Told by the driver's device files, not by ``torch.cuda.is_available()``: this runs inside the
    ``pytester`` fixture, after pytester took its snapshot of ``sys.modules``, so a first import of
    torch here was undone at the test's teardown, and the next test that imported torch imported
    it a second time in the same process ("SystemError: ... method: bad call flags" in the report
    tests, 2026-11-27, depending on which tests an xdist worker drew)."""
    return os.path.exists("/dev/nvidiactl") or any(Path("/dev").glob("nvidia[0-9]*"))


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester, whose ``runpytest_subprocess`` runs are forked from a warm process
    (``tests/zygote.py``) instead of started afresh: pytester's own :meth:`~pytest.Pytester.run`
    builds the command and reads the result; only the process behind its ``popen`` differs.

    Only the command ``runpytest_subprocess`` builds (``python -mpytest ...``) is forked. Tests
    that need what only a fresh interpreter gives start one with
    ``pytester.run(sys.executable, "-m", "pytest", ...)``.
    """
    if (
        os.environ.get("TORCHBENCH_TESTS_FORK", "1") == "0"
        or not hasattr(os, "fork")
        or _cuda_device_here()
    ):
        return pytester
    fresh_popen = pytester.popen

    def popen(
        cmdargs: Sequence[str | os.PathLike[str]],
        stdout: Any = subprocess.PIPE,
        stderr: Any = subprocess.PIPE,
        stdin: Any = pytester.CLOSE_STDIN,
        **kw: Any,
    ) -> Any:
        argv = [os.fspath(arg) for arg in cmdargs]
        if (
            argv[:2] != [sys.executable, "-mpytest"]
            or kw
            or not hasattr(stdout, "name")
            or not hasattr(stderr, "name")
        ):
            return fresh_popen(cmdargs, stdout, stderr, stdin, **kw)
        env = os.environ.copy()  # as pytester.popen: the working directory leads PYTHONPATH
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
        return _fork_server(env).start(
            {
                "argv": argv[2:],
                "cwd": os.getcwd(),
                "env": env,
                "stdout": stdout.name,
                "stderr": stderr.name,
            }
        )

    pytester.popen = popen  # type: ignore[method-assign]
    return pytester


@pytest.fixture
def bench_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYTHONPATH for subprocesses (pytester subprocess runs, the CLI, git hooks)."""
    existing = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + (os.pathsep + existing if existing else ""))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # pytest prints whole failure messages in the short test summary when it sees CI or
    # BUILD_NUMBER: the inner runs must print the same on a laptop and in CI.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    # When this suite itself runs under xdist (the README's test command does), its workers'
    # variables must not reach the runs it starts: those are their own sessions.
    for name in [name for name in os.environ if name.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def run_bench(pytester: pytest.Pytester, bench_env: None) -> Callable[..., pytest.RunResult]:
    """``run_bench(*args)``: a pytester subprocess run with ``-p no:benchmark`` added.

    A subprocess, because in-process pytester restores sys.modules after each run and torch does
    not survive being imported twice in one process (its operator libraries register once).
    """

    def run(*args: str, subprocess: bool = True) -> pytest.RunResult:
        full = ("-p", "no:benchmark", *args)
        if subprocess:
            return pytester.runpytest_subprocess(*full)
        return pytester.runpytest(*full)

    return run


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity; fail the test with git's message on error."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
    }
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


BENCH_MODULE = """
import pytest, torch

@pytest.mark.benchmark
def test_add():
    torch.ones(4) + 1

def test_mul(benchmark):
    benchmark(lambda: torch.ones(3) * 2)
"""


@functools.cache
def import_noise() -> frozenset[str]:
    """The lines this interpreter writes to stderr when it starts and imports torch: none on most
    machines; torch's CUDA build on a machine with a CUDA toolkit and no GPU prints
    ``No CUDA runtime is found, using CUDA_HOME=...``. Not ours, and in every run's stderr."""
    done = subprocess.run(
        [sys.executable, "-c", "import torch"], capture_output=True, text=True, timeout=600
    )
    return frozenset(line for line in done.stderr.splitlines() if line.strip())


def own_lines(stderr: str) -> list[str]:
    """The non-empty lines of ``stderr`` less what starting Python and importing torch print here
    (:func:`import_noise`): "one clear line" tests count these, so they hold wherever torch
    warns."""
    noise = import_noise()
    return [
        line
        for line in stderr.splitlines()
        if line.strip() and line not in noise and not TORCH_IMPORT_NOISE.match(line)
    ]


@pytest.fixture(name="git")
def git_fixture() -> Callable[..., str]:
    """``git(cwd, *args)``: see :func:`git` (a fixture, because tests/ is not a package)."""
    return git


@pytest.fixture
def bench_module() -> str:
    """A test module with two tiny benchmarks (marker only, and the benchmark fixture)."""
    return BENCH_MODULE


def profile_record(
    trace: str | None, source: str = "--bench-profile", error: str | None = None
) -> dict:
    """A profile as results carry it, made by the engine's own ``ProfileSummary.record`` (the one
    shape ``--bench-profile`` and ``bench_profiler`` write), not built by hand."""
    from pathlib import Path

    from pytest_torchbench.engines.profiler import OpStat, ProfileSummary

    top = [OpStat("aten::add", 3, 12.5, 20.0)]
    local = trace is not None and "://" not in trace and not trace.startswith("javascript:")
    record = ProfileSummary(
        3, top, "table", Path(trace) if local and trace else None, error
    ).record(source)
    if trace is not None and not local:
        record["trace"] = trace  # e.g. a report hook that uploaded the trace and points at its URL
    return record


def make_result(
    key: str,
    times: list[float] | None = None,
    instructions: float | None = None,
    functions: dict[str, float] | None = None,
    ops: dict[str, float] | None = None,
    extras: dict | None = None,
) -> BenchmarkResult:
    """A synthetic result (no measuring): reports and the CLI are tested on exact numbers."""
    from pytest_torchbench.judging.results import (
        BenchmarkResult,
        InstructionsMetric,
        OpsMetric,
        TimeMetric,
    )

    metrics: dict = {}
    if times is not None:
        metrics["time"] = TimeMetric(number_per_run=10, raw_times=[t * 10 for t in times])
    if instructions is not None:
        metrics["instructions"] = InstructionsMetric(instructions, 100, dict(functions or {}))
    if ops is not None:
        metrics["ops"] = OpsMetric(dict(ops))
    module, _, name = key.partition("::")
    return BenchmarkResult(
        key=key,
        module=module,
        label=name,
        sub_label="",
        description="",
        metrics=metrics,
        extras=dict(extras or {}),
    )


@pytest.fixture
def sample_comparison() -> tuple[list, list, dict]:
    """See :func:`sample_data`."""
    return sample_data()


def sample_data() -> tuple[list, list, dict]:
    """(current results, verdicts, baseline entries): one regression with function- and op-level
    explanations, one improvement, one new and one missing benchmark."""
    from pytest_torchbench.common.vocabulary import Policy
    from pytest_torchbench.judging.judgement import judge_result, missing_verdicts

    base = {
        "bench/test_m.py::test_slow": make_result(
            "bench/test_m.py::test_slow",
            times=[
                1.00e-5,
                1.02e-5,
                0.99e-5,
                1.01e-5,
                1.00e-5,
                1.03e-5,
                0.98e-5,
                1.04e-5,
                1.01e-5,
                1.0e-5,
            ],
            instructions=100_000,
            functions={"aten::add_impl": 60_000, "PyEval": 40_000},
            ops={"aten::add": 1, "aten::empty": 1},
        ),
        "bench/test_m.py::test_fast": make_result(
            "bench/test_m.py::test_fast",
            instructions=50_000,
            functions={"f": 50_000},
            ops={"aten::mul": 2},
        ),
        "bench/test_m.py::test_gone": make_result(
            "bench/test_m.py::test_gone", instructions=10_000, ops={"aten::mul": 1}
        ),
    }
    current = [
        make_result(
            "bench/test_m.py::test_slow",
            times=[
                1.30e-5,
                1.31e-5,
                1.29e-5,
                1.33e-5,
                1.30e-5,
                1.32e-5,
                1.27e-5,
                1.36e-5,
                1.31e-5,
                1.29e-5,
            ],
            instructions=130_000,
            functions={"aten::add_impl": 85_000, "PyEval": 40_000, "aten::copy_": 5_000},
            ops={"aten::add": 1, "aten::empty": 2, "aten::copy_": 1},
            extras={"profiles": [profile_record("/tmp/traces/test_slow.json.gz")]},
        ),
        make_result(
            "bench/test_m.py::test_fast",
            instructions=40_000,
            functions={"f": 40_000},
            ops={"aten::mul": 2},
        ),
        make_result("bench/test_m.py::test_new", instructions=1_000, ops={"aten::sum": 1}),
    ]
    policy = Policy()
    verdicts = []
    for result in current:
        verdicts += judge_result(result, base.get(result.key), policy)
    verdicts += missing_verdicts(base, {r.key for r in current}, {"instructions", "ops", "time"})
    return current, verdicts, base


# -- helper for the foundation's end-to-end tests -----------------------------------------------

#: pytest-benchmark is installed on the machines this runs on and defines the same names.
BASE_ARGS = ("-p", "no:benchmark", "-p", "no:cacheprovider")


class BenchRunner:
    """Runs pytest in a subprocess in pytester's folder, always without pytest-benchmark."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path

    def run(self, *args: str, timeout: float = 120) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(*BASE_ARGS, *args, timeout=timeout)

    def baseline(self, name: str, module: str = "test_bench.json") -> Path:
        return self.path / "baselines" / name / module

    def load(self, name: str, module: str = "test_bench.json") -> dict:
        return json.loads(self.baseline(name, module).read_text(encoding="utf-8"))


@pytest.fixture
def bench(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, bench_env: None
) -> BenchRunner:
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # rootdir = pytester's folder, so baselines/ lands there
    pytester.makeini("[pytest]\n")
    return BenchRunner(pytester)
