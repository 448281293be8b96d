"""pytest glue for metrics that measure in processes of their own (instructions: under valgrind).

A metric says so through ``Metric.worker_launch()`` (``engines/launch.py``'s ``WorkerLaunch``): this
module then runs the tests in pytest-xdist workers started with the metric's command and
environment, serially in one worker, with ``-n 2`` in two. It knows xdist and nothing of the
metric. Why workers and not a re-exec of pytest itself (instructions mode): counts move with the
process's argv and environment (stack and heap layout, docs/design/counting.md, "What moves
counts"), so a re-exec'd ``pytest ...`` and an xdist worker (``python -u -c <bootstrap>``) would
count differently; launching every measuring process the same way (same environment, same
interpreter arguments, same working directory) gives serial and parallel runs the same counts by
construction. xdist also brings Ctrl-C handling, crash reports naming the test that was running,
and result transport.

The interpreter is ``sys.executable`` exactly as given: a virtualenv's ``bin/python`` is a symlink
to the base interpreter, and the interpreter finds the virtualenv (``pyvenv.cfg``) from the path
it was started by, so resolving the link would run the workers without the virtualenv's packages.

A worker that cannot start (an import error, a valgrind error, an interpreter that does not run)
ends the run at once with one line and exit 4: xdist would otherwise replace it again and again,
each replacement a new valgrind process importing torch. Each worker's stderr goes to a file in
the run's temporary folder, so that line can quote its tail (the folder also holds the launch's
dumps and what it hands over of the baseline: ``WorkerLaunch.hand_over``); it is removed at the
end of every run, and folders of earlier runs whose process is gone are removed at the start.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..common.compat import quiet_xdist_status
from ..engines.launch import LaunchUnavailable, WorkerLaunch
from ..metrics import registry
from ..metrics.measuring import Measuring

#: The name this module's controller-side plugin is registered under.
PLUGIN_NAME = "torchbench-launched-workers"
#: The name of its worker-side plugin (:class:`IsolatedWorker`).
WORKER_PLUGIN_NAME = "torchbench-isolated-worker"
#: The file in a run's folder that names the controller's pid: a later run can tell the folder of a
#: run that was killed (its pid gone) from one still running, and reuse or remove it.
_OWNER_FILE = "owner.pid"

#: Signals whose default action ends the controller at once, without pytest's teardown: the
#: workers it launched would run on (a valgrind worker inside a long test for minutes) and the
#: run's folder would stay. SIGINT needs nothing: it raises KeyboardInterrupt, which xdist handles.
_TERMINATING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)

#: Exceptions with which execnet reports a worker process that died before its bootstrap answered.
_START_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError)
try:  # execnet is a dependency of xdist; the name moved between versions
    from execnet.gateway_bootstrap import HostNotFound as _HostNotFound

    _START_ERRORS = (*_START_ERRORS, _HostNotFound)
except ImportError:  # pragma: no cover
    pass


def fixed_dump_dir(prefix: str, temp_dir: str | None = None) -> Path:
    """A run folder with the same name on every run: ``<tmp>/<prefix><uid>-<slot>``.

    Why not mkdtemp: its random name reaches the counted process (environment, command line,
    strings built from paths), and reruns should give bit-identical counts. The first free slot
    is taken (``mkdir`` is atomic), so concurrent runs still get folders of their own; a slot left
    by a killed run (its owner's pid gone) is taken back, so killed runs do not use slots up.
    """
    base = Path(temp_dir or tempfile.gettempdir())
    for slot in range(100):
        path = base / f"{prefix}{os.getuid()}-{slot:02d}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            if not _remove_if_stale(path):
                continue
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:  # another run took the slot between the two steps
                continue
        (path / _OWNER_FILE).write_text(str(os.getpid()))
        return path
    return Path(tempfile.mkdtemp(prefix=prefix))


def _remove_if_stale(folder: Path) -> bool:
    """Remove ``folder`` when it is ours and its owner process is gone; True when it was removed.

    A folder without an owner file is being created right now (or is not of this scheme): kept.
    The folder is first renamed to a unique name, so that of two runs seeing the same stale
    folder only one removes it, and never a folder another run has just created.
    """
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return False
        pid = int((folder / _OWNER_FILE).read_text().strip())
        os.kill(pid, 0)
        return False  # its owner still runs
    except ProcessLookupError:
        pass
    except (OSError, ValueError, OverflowError):
        return False
    trash = folder.with_name(f"{folder.name}.stale-{os.getpid()}")
    try:
        folder.rename(trash)
    except OSError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


def printable(text: str, limit: int = 300) -> str:
    """``text`` as one terminal-safe line: control characters escaped, at most ``limit`` characters
    (the end is kept: the last lines of a traceback say what went wrong)."""
    line = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text
    )
    return line if len(line) <= limit else "..." + line[-limit:]


def remove_stale_dump_dirs(prefix: str, temp_dir: str | None = None) -> None:
    """Remove the temporary folders of earlier runs whose controller process is gone (killed
    runs)."""
    base = Path(temp_dir or tempfile.gettempdir())
    try:
        candidates = list(base.glob(f"{prefix}{os.getuid()}-[0-9][0-9]"))
    except OSError:
        return
    for folder in candidates:
        _remove_if_stale(folder)


class LaunchedWorkers:
    """Controller-side plugin: turns xdist's worker specs into the metrics' launches, finishes the
    values workers send, and stops the run when a worker cannot start."""

    def __init__(self, config: pytest.Config, launches: dict[str, WorkerLaunch]) -> None:
        self.config = config
        self.launches = launches  # metric name -> its launch
        self.python = sys.executable
        if not self.python or not os.path.isfile(self.python):
            raise pytest.UsageError(
                f"--bench-mode={','.join(launches)} needs the path of this Python interpreter to "
                f"launch its workers, but sys.executable is {self.python!r}; run pytest as "
                "`/path/to/python -m pytest`"
            )
        if len(launches) > 1:
            raise pytest.UsageError(
                f"--bench-mode: {' and '.join(launches)} each need workers launched their own way; "
                "run them in separate sessions"
            )
        self.name, self.launch = next(iter(launches.items()))
        try:
            self.launch.prepare(self.python)
        except LaunchUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
        remove_stale_dump_dirs(self.launch.folder_prefix)
        self.dump_dir = fixed_dump_dir(self.launch.folder_prefix)
        self.crashed: list[str] = []
        self.collected_nodes: set[str] = set()  # gateway ids of workers that finished collecting
        self._processes: list[
            subprocess.Popen[bytes]
        ] = []  # every worker started (replacements too)
        self._signal_handlers: dict[int, Any] = {}  # signal -> the handler ours replaced

    def hand_over(self, baseline_entries: Mapping[str, Any] | None) -> None:
        """Set the launch's variables (``WorkerLaunch.hand_over``) in this process's environment
        until the end of the run: every process the run starts inherits them."""
        variables = self.launch.hand_over(baseline_entries, self.dump_dir, os.environ)
        if variables:
            patch = pytest.MonkeyPatch()
            self.config.add_cleanup(patch.undo)
            for name, value in variables.items():
                patch.setenv(name, value)

    def counted_command(self) -> str:
        """The interpreter command every worker gets: ``sh -c ... env -i VARS <launch> python``.

        The shell only sends the worker's stderr to ``stderr.<pid>`` in the run's folder (the pid
        stays the same through both ``exec``), then is replaced by the launched process; execnet
        appends ``-u -c <bootstrap>``.
        """
        argv, environment = self.launch.command(self.python, self.dump_dir, os.environ)
        return shlex.join(
            [
                "sh",
                "-c",
                'exec 2>>"$0/stderr.$$"; exec "$@"',
                str(self.dump_dir),
                "env",
                "-i",
                "--",
                *(f"{k}={v}" for k, v in environment.items()),
                *argv,
            ]
        )

    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        # xdist hands the workers the controller's command line; options that only the controller
        # uses (where to save, what to compare with, report paths) are left out, so that a save
        # run and a compare run count alike: an argument a few characters longer moved the counts
        # of an nn.Module forward (heap layout; docs/design/counting.md, "How a counted process is
        # launched").
        config.invocation_params = dataclasses.replace(
            config.invocation_params, args=worker_args(config.invocation_params.args)
        )
        command = self.counted_command()
        for spec in specs:
            if not spec.popen or spec.ssh or spec.socket:
                raise pytest.UsageError(
                    f"--bench-mode={self.name} runs workers locally "
                    f"({self.launch.describe('python')}); "
                    f"the xdist spec {spec} is not a local popen worker"
                )
            spec.python = command

    def pytest_configure_node(self, node: Any) -> None:
        """What xdist sends each worker besides its arguments, made the same on every run.

        Why: the worker unpacks it before importing anything, and strings of other lengths there
        move every later allocation, and with them the addresses CPython's type attribute cache
        and dicts hash (``--bench-html=...`` on the controller's command line moved the examples'
        nn.Module forwards, all in dict and type lookups: docs/design/measurements.md, "Counting in
        the worker"). ``mainargv`` (the controller's ``sys.argv``) loses the controller-only
        options, as the arguments do.
        """
        workerinput = getattr(node, "workerinput", None)
        if isinstance(workerinput, dict) and isinstance(workerinput.get("mainargv"), list):
            argv = workerinput["mainargv"]
            workerinput["mainargv"] = [*argv[:1], *worker_args(argv[1:])]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        """Finish the values workers sent (instructions: read the dump natively), before the
        controller judges them."""
        payload = getattr(report, "torchbench", None)
        if isinstance(payload, dict):
            for result in payload.get("results") or ():
                metrics = result.get("metrics") or {}
                data = metrics.get(self.name)
                if isinstance(data, dict):
                    metrics[self.name] = self.launch.finish(data, self.dump_dir)
        return (yield)

    # -- a worker that cannot start ends the run ---------------------------------------------------

    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        self.collected_nodes.add(str(node.gateway.id))

    @pytest.hookimpl(tryfirst=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        """A worker went down: before it finished collecting, that is a start-up failure.

        Raising here (first, before xdist's own handler) stops xdist from replacing the worker;
        pytest then tears the other workers down and reports the line as a usage error (exit 4).
        """
        pid = _worker_pid(node)
        if error == "keyboard-interrupt":  # Ctrl-C: xdist stops the run as usual
            return
        if error is None or str(node.gateway.id) in self.collected_nodes:
            self._replay_stderr(pid)
            return
        raise pytest.UsageError(self.startup_failure(error, pid))

    # -- SIGTERM to the controller alone stops its workers too --------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        popen = getattr(getattr(gateway, "_io", None), "popen", None)
        if isinstance(popen, subprocess.Popen):
            self._processes.append(popen)

    def _install_signal_handlers(self) -> None:
        """Where SIGTERM/SIGHUP would end this process as is (their default), end it the same way
        after stopping the workers and removing the run's folder. Main thread only (Python's
        rule)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in _TERMINATING_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                self._signal_handlers[signum] = signal.signal(signum, self._terminated)

    def _restore_signal_handlers(self) -> None:
        for signum, previous in self._signal_handlers.items():
            if signal.getsignal(signum) == self._terminated:
                signal.signal(signum, previous)
        self._signal_handlers.clear()

    def _terminated(self, signum: int, frame: Any) -> None:
        """Kill the workers (a measurement cut short is worth nothing), wait for them, remove the
        run's folder, then die of the signal as the process would have (exit status -signum)."""
        for process in self._processes:
            if process.poll() is None:  # Popen knows whether it reaped it: never a reused pid
                process.kill()
        for process in self._processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not refused
                pass
        shutil.rmtree(self.dump_dir, ignore_errors=True)
        self._restore_signal_handlers()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, None, None]:
        """xdist starts the workers here; one that dies before answering raises from execnet.
        Under ``-q`` its status lines are left out: the user did not ask for workers."""
        self._install_signal_handlers()
        if session.config.get_verbosity() < 0:
            quiet_xdist_status(session.config)
        try:
            return (yield)
        except _START_ERRORS as exc:
            if not _from_execnet(exc):
                raise
            self._teardown_nodes()
            raise pytest.UsageError(self.startup_failure(exc, None)) from None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, None, object]:
        """A worker replaced after a crash is started inside the loop: same rule."""
        try:
            return (yield)
        except _START_ERRORS as exc:
            if not _from_execnet(exc):
                raise
            raise pytest.UsageError(self.startup_failure(exc, None)) from None

    def startup_failure(self, error: object, pid: int | None) -> str:
        """One line: which worker failed, why (the tail of its stderr or of its traceback), what to
        do."""
        tail = _last_lines(self._stderr_text(pid), 3)
        reported = _last_lines(str(error), 1) if error is not None else ""
        if (
            reported
            and reported not in ("Not properly terminated",)
            and not isinstance(error, _START_ERRORS)
        ):
            cause = reported if not tail else f"{reported} | {tail}"
        else:
            cause = tail or reported or type(error).__name__
        if "No module named" in cause or "ModuleNotFoundError" in cause:
            todo = (
                "install what is missing into that environment "
                f"({self.python} -m pip install ...), "
                f"and check that `{self.python} -m pytest --version` works"
            )
        elif (
            self.launch.describe(self.python).split()[0].lower() in cause.lower()
        ):  # the launcher (valgrind)
            todo = f"check that `{self.launch.check_hint(self.python)}` runs"
        else:
            todo = (
                f"run the same tests without --bench-mode={self.name} to see the error, "
                f"and check that `{self.launch.check_hint(self.python)}` runs"
            )
        return (
            f"torchbench: an {self.name}-mode worker ({self.launch.describe(self.python)}) "
            f"could not start: {printable(cause)}; {todo}"
        )

    def _stderr_text(self, pid: int | None) -> str:
        """The worker's stderr file (``pid`` unknown: the most recent non-empty one)."""
        files = [self.dump_dir / f"stderr.{pid}"] if pid is not None else []
        if pid is None or not files[0].exists():
            try:
                files = sorted(
                    self.dump_dir.glob("stderr.*"), key=lambda p: p.stat().st_mtime, reverse=True
                )
            except OSError:
                files = []
        for path in files:
            try:
                text = path.read_bytes()[-8192:].decode("utf-8", errors="replace")
            except OSError:
                continue
            if text.strip():
                return text
        return ""

    def _replay_stderr(self, pid: int | None) -> None:
        """What a worker that ran normally wrote to its stderr (``-s`` output, warnings) is not
        lost."""
        if pid is None:
            return
        path = self.dump_dir / f"stderr.{pid}"
        try:
            data = path.read_bytes()
            path.unlink()
        except OSError:
            return
        if data.strip():
            sys.stderr.write(data.decode("utf-8", errors="replace"))
            sys.stderr.flush()

    def _teardown_nodes(self) -> None:
        dsession = self.config.pluginmanager.getplugin("dsession")
        nodemanager = getattr(dsession, "nodemanager", None)
        if nodemanager is not None:
            try:
                nodemanager.teardown_nodes()
            except Exception:  # noqa: BLE001 - best effort: the run is ending with a clearer error
                pass

    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        self.crashed.append(crashitem)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._restore_signal_handlers()
        shutil.rmtree(self.dump_dir, ignore_errors=True)


#: Options only the controller acts on (baselines, judging, reports): never sent to counted workers.
CONTROLLER_ONLY_OPTIONS = {
    "--bench-save": True,
    "--bench-compare": True,
    "--bench-fail": True,
    "--bench-json": True,
    "--bench-markdown": True,
    "--bench-html": True,
    "--bench-baselines-dir": True,
    "--bench-strict": False,
    "--bench-fail-stale": False,
    "--benchmark-json": True,
    "--bench-base": True,
    "--bench-base-prepare": True,
    "--bench-allow-incomparable": False,
    "--bench-rounds": True,
    "--bench-accept": True,
}  # name -> takes a value

#: xdist's own options: the controller spreads the tests, so workers never need them; left out, a
#: worker started by ``-n 2`` and one started for a serial run get the same arguments, and count
#: alike. A base run (``pytest/base.py``) keeps them: it spreads its tests as this run does.
XDIST_OPTIONS = {"-n": True, "--numprocesses": True, "--maxprocesses": True, "--dist": True}


def runs_tests_in_workers(config: pytest.Config) -> bool:
    """Whether this session's tests run in xdist or launched workers (it is their controller):
    ``-n`` or ``--dist`` from the command line, ini ``addopts`` or ``PYTEST_ADDOPTS``, or a mode
    that launches its workers (:func:`configure_controller`)."""
    return (
        not hasattr(config, "workerinput")
        and getattr(config.option, "dist", "no") != "no"
        and bool(getattr(config.option, "tx", None))
    )


def worker_args(args: Sequence[str], *, keep_xdist: bool = False) -> tuple[str, ...]:
    """``args`` without the controller-only options (``--opt=value`` and ``--opt value`` forms),
    and without xdist's (:data:`XDIST_OPTIONS`) unless ``keep_xdist``."""
    left_out = (
        CONTROLLER_ONLY_OPTIONS if keep_xdist else {**CONTROLLER_ONLY_OPTIONS, **XDIST_OPTIONS}
    )
    kept: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        name, has_value, _ = str(arg).partition("=")
        if not keep_xdist and name.startswith("-n") and not name.startswith("--") and len(name) > 2:
            name, has_value = "-n", "="  # -n2, -nauto
        if name in left_out:
            skip_next = left_out[name] and not has_value
            continue
        kept.append(arg)
    return tuple(kept)


def _from_execnet(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside execnet (starting a worker), not by other code in the
    hook."""
    tb = exc.__traceback__
    while tb is not None:
        if f"{os.sep}execnet{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _worker_pid(node: Any) -> int | None:
    """The worker process's pid (execnet's popen gateway), None when it cannot be told."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    pid = getattr(popen, "pid", None)
    return pid if isinstance(pid, int) else None


def _last_lines(text: str, count: int) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])


def configure_controller(
    config: pytest.Config, modes: Sequence[str], baseline_entries: Mapping[str, Any] | None = None
) -> LaunchedWorkers | None:
    """When a metric of ``modes`` needs launched workers: check its tools, hand them what they
    need of the baseline (``WorkerLaunch.hand_over``) and make xdist run the tests in workers
    started its way (a serial run in one). None when no metric needs them."""
    launches = {
        mode: launch
        for mode in modes
        if (launch := registry.get(mode, Measuring).worker_launch()) is not None
    }
    if not launches:
        return None
    if not config.pluginmanager.has_plugin("xdist"):
        what = ", ".join(launch.describe("python") for launch in launches.values())
        raise pytest.UsageError(
            f"--bench-mode={','.join(launches)} runs tests in pytest-xdist workers ({what}); "
            "pytest-xdist is disabled or missing "
            "(pip install pytest-xdist; do not pass -p no:xdist)"
        )
    workers = LaunchedWorkers(config, launches)
    if getattr(config.option, "dist", "no") == "no" or not getattr(config.option, "tx", None):
        config.option.dist = "load"
        config.option.tx = ["popen"]
    if getattr(config.option, "basetemp", None) is None and not hasattr(
        config, "_tmp_path_factory"
    ):
        # xdist sends each worker its basetemp, ``/tmp/pytest-of-<user>/pytest-<N>/popen-gw0``
        # with N one more on every run: a path of another length or content on every run moved
        # counts of Python-heavy code. The run's own folder has the same name every run.
        config.option.basetemp = str(workers.dump_dir / "basetemp")
    if getattr(config.option, "testrunuid", None) is None:
        # xdist's id of the run (PYTEST_XDIST_TESTRUNUID in every worker) is a random uuid by
        # default, and with it the counts of Python-heavy code moved between runs of one command
        # (pinned, repeated runs gave identical counts: docs/design/measurements.md, "Counting in
        # the worker"). Derived from the run's folder instead: the same on every run, and
        # still different for runs at the same time (each has a folder of its own).
        config.option.testrunuid = hashlib.sha256(str(workers.dump_dir).encode()).hexdigest()[:32]
    if getattr(config.option, "maxworkerrestart", None) is None:
        # A worker that crashed in a test is replaced (the crash is that test's failure), but a
        # bounded number of times: each replacement is a valgrind process importing torch.
        workers_count = getattr(config.option, "numprocesses", None)
        config.option.maxworkerrestart = str(
            4 * (workers_count if isinstance(workers_count, int) and workers_count > 0 else 1)
        )
    config.pluginmanager.register(
        workers, PLUGIN_NAME
    )  # first: its unconfigure removes the run's folder
    workers.hand_over(baseline_entries)
    return workers


class IsolatedWorker:
    """Worker-side plugin of a launched worker: the launches isolate what follows from what ran
    before, first thing before collection, before each collector (a test module's import among
    them) and before each test (``WorkerLaunch.isolate``), and settle what collection left
    (``WorkerLaunch.collected``).

    Why these points: a test's counts should depend on the test alone. Before them, the worker's
    start-up interleaves its main thread with execnet's receiver thread as timing decides, the
    folders walked before a module differ with what lies beside it (a ``baselines`` folder that a
    save run creates), and the tests run before differ with ``-k`` and order.
    """

    def __init__(self, launches: Sequence[WorkerLaunch]) -> None:
        self.launches = list(launches)

    def _isolate(self) -> None:
        for launch in self.launches:
            launch.isolate()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, None, object]:
        self._isolate()
        try:
            return (yield)
        finally:
            for launch in self.launches:
                launch.collected()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, None, object]:
        # each collector (a test module's import among them) starts afresh too: what was walked
        # before it (other folders, an extra file beside it) then does not move its objects
        self._isolate()
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, object]:
        for launch in self.launches:
            launch.before_test(item.nodeid)
        self._isolate()
        return (yield)


def configure_worker(config: pytest.Config, modes: Sequence[str]) -> None:
    """In a worker: when a metric of ``modes`` launched it, let the launch isolate each test."""
    launches = [
        launch
        for mode in modes
        if (launch := registry.get(mode, Measuring).worker_launch()) is not None
    ]
    if launches:
        config.pluginmanager.register(IsolatedWorker(launches), WORKER_PLUGIN_NAME)


def crashed_tests(config: pytest.Config) -> list[str]:
    """Tests whose launched worker died mid-run (a partial run must not become a baseline)."""
    workers = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return list(getattr(workers, "crashed", ()))
