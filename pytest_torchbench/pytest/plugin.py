"""pytest glue: options, the marker, fixtures and hooks. Registered as plugin ``torchbench``.

Roles, as in pytest-xdist: every process that runs tests owns a BenchSession (measure); the
process that owns the terminal (serial run or xdist controller) owns a Controller (judge, gather,
save, report), so measuring processes never read baselines. A plain ``pytest`` (no --bench-*
option) creates neither: marked tests run once and the plugin's cost is a marker lookup per
test.

Beside pytest-benchmark (which defines the same ``benchmark`` fixture and marker): a run without
any --bench-* option is left to pytest-benchmark entirely (its fixture, marker checks and
--benchmark-* options; it sees the marker without our own keywords, which it would refuse); a
run with one unregisters pytest-benchmark before it configures, and registers our ``benchmark``
fixture after it, so ours is the one tests get. No ``-p no:...`` needed.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from ..common.compat import fixture_argnames
from ..common.text import safe_text
from ..metrics import registry
from ..metrics.measuring import Measuring
from ..store.refs import (
    DEFAULT_SET,
    NoCommittedBaselines,
    Revision,
    compare_revision,
    resolve_compare,
    shown_ref,
)
from ..store.storage import BaselineError, BaselineSet, check_save_folder, load_set_from_folder
from . import children, extensions, importpath
from . import options as options_module
from .base import (
    MODULES_ENV,
    leave_when_done,
    session_depth,
    session_finished,
    take_quick_exit,
    write_imported_modules,
)
from .controller import REPORT_ATTRIBUTE, Controller
from .fixtures import BenchmarkFixture, ItemRecorder, ProfilerFixture, make_timer_factory
from .marker import (
    DEFAULT_SEED,
    MARKER_DOC,
    MARKER_NAME,
    BenchOptions,
    MarkerError,
    for_pytest_benchmark,
    options_from_marker,
)
from .options import BenchSettings
from .progress import PROGRESS_ENV, ProgressFile
from .session import BenchSession, IsolationGuard, Naming
from .turns import join_pair
from .workers import runs_tests_in_workers

settings_key = pytest.StashKey[BenchSettings]()
owns_key = pytest.StashKey[bool]()
session_key = pytest.StashKey["BenchSession | None"]()
#: The baselines folder that collection skips, or None (it holds the user's Python files).
skipped_baselines_key = pytest.StashKey["Path | None"]()
#: Set by the run's main process for its workers, which inherit its environment: the folder that
#: collection skips ("" for none). Workers take it from here, not from their own options (counted
#: workers run without ``--bench-baselines-dir``, an option only the main process acts on).
SKIPPED_BASELINES_ENV = "TORCHBENCH_SKIPPED_BASELINES_DIR"
recorder_key = pytest.StashKey[ItemRecorder]()

#: A test using one of these records what it measures itself, so its body is not measured as a
#: whole. bench_profiler is among them: it carries the benchmark marker (for -m benchmark), and
#: measuring its body in ops or memory mode would start a second profiler inside the test's own.
BENCH_FIXTURES = ("benchmark", "bench_timer", "bench_profiler")
#: A test using one of these is a benchmark (it gets the marker at collection: -m benchmark).
SELECTING_FIXTURES = ("benchmark", "bench_timer", "bench_profiler")
#: pytest-benchmark's plugin, as registered from its entry point, -p, or a conftest's
#: pytest_plugins.
PYTEST_BENCHMARK_MODULE = "pytest_benchmark.plugin"


class TorchbenchWarning(pytest.PytestWarning):
    """Warnings of pytest-torchbench (noisy settings, skipped traces...)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    options_module.addoption(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Our extension hooks (hookspecs.py): environment facts, verdict review, reports."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _pytest_benchmark_plugins(config: pytest.Config) -> list[tuple[str, object]]:
    manager = config.pluginmanager
    return [
        (name, plugin)
        for name, plugin in manager.list_name_plugin()
        if plugin is not None and getattr(plugin, "__name__", None) == PYTEST_BENCHMARK_MODULE
    ]


def _take_over_from_pytest_benchmark(config: pytest.Config) -> None:
    """With a --bench-* option, pytest-benchmark steps aside for this run.

    It is unregistered (and its names blocked) before ``pytest_configure``, so its session, its
    marker check and its fixture-type check never run. Its ``--benchmark-*`` options were added
    when it was registered, so command lines and addopts that use them still parse.
    """
    if not options_module.bench_option_given(config):
        return
    for name, plugin in _pytest_benchmark_plugins(config):
        config.pluginmanager.unregister(plugin, name)
        config.pluginmanager.set_blocked(name)
    config.pluginmanager.set_blocked(PYTEST_BENCHMARK_MODULE)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, Any, Any]:
    """Take over from pytest-benchmark; and a child of a base measurement leaves as soon as its
    session returns (``base.leave_when_done``)."""
    _take_over_from_pytest_benchmark(config)
    with session_depth():
        status = yield
    leave_when_done(status)
    return status


class BenchmarkFixturePlugin:
    """Holds our ``benchmark`` fixture, registered only when we own it (see the module docstring).

    Registered during ``pytest_configure``, after every entry-point plugin: for fixtures of the
    same name from plugins, pytest uses the one registered last.
    """

    @pytest.fixture
    def benchmark(self, request: pytest.FixtureRequest) -> BenchmarkFixture:
        """``benchmark(fn, *args, **kwargs)`` measures ``fn`` in the session's mode and returns
        its result; ``benchmark.pedantic(...)``, ``.extra_info``, ``.group`` as in
        pytest-benchmark."""
        return BenchmarkFixture(_recorder(request.node), _session(request.config), request.node)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Prepare this process for the modes the command line names, before the first conftest is
    imported (``Metric.prepare_process``; pytest calls this hook of installed plugins only).

    Why this early: torch reads its huge-page switch at the process's first CPU allocation of any
    size, and a conftest's module-level tensor (normalisation constants, say) comes long before
    ``pytest_configure``. Modes of metric plugins, known only at configure, are prepared there.

    Also: in a process this plugin started without the cache plugin (a base run, a re-run), the
    cache plugin's options that came from the user's ``PYTEST_ADDOPTS`` or ini ``addopts``
    (``--sw``, ``--lf``...) are dropped from ``args`` before pytest parses them for good: it
    would refuse them as unknown, and the whole run would end there.

    And: the project's own git tree goes first on the import path, before any conftest imports
    the project (``importpath``: the run measures the checkout's code, as a base run measures
    its worktree's). And a child of a base measurement takes its quick exit's variable out of
    the environment before any test can start a process (``base.take_quick_exit``)."""
    take_quick_exit()
    if (
        os.environ.get(MODULES_ENV) or children.in_rerun()
    ) and not early_config.pluginmanager.has_plugin("cacheprovider"):
        args[:] = children.remove_options(args, children.CACHE_OPTIONS)
    opt = early_config.known_args_namespace
    if not options_module.is_active(opt):
        return
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # workers take the order from their controller
        tree = importpath.own_tree(Path(early_config.rootpath))
        if tree is not None:
            importpath.put_first(importpath.tree_entries(tree))
    for name in options_module.mode_names(
        getattr(opt, "bench_mode", None)
    ):  # a wrong one: reported at configure
        found = registry.find(name, Measuring)
        if found is not None:
            found.prepare_process()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    # when pytest_cmdline_main was not called (pytest.main API)
    _take_over_from_pytest_benchmark(config)
    owns = not _pytest_benchmark_plugins(config)
    config.stash[owns_key] = owns
    if owns:
        config.pluginmanager.register(BenchmarkFixturePlugin(), "torchbench-benchmark-fixture")
    # Plugins' metrics first: the options below may name them.
    for name in extensions.register_metrics(config):
        config.add_cleanup(functools.partial(registry.unregister, name))
    settings = options_module.settings_from_config(config)
    if children.in_rerun():
        config.option.xmlpath = None  # the re-run leaves the user's --junitxml (from addopts) alone
    config.stash[settings_key] = settings
    config.stash[session_key] = None
    if not settings.active:
        return
    # again (it is idempotent): metric plugins' modes are known only now
    for mode in settings.modes:
        registry.get(mode, Measuring).prepare_process()
    worker = _is_xdist_worker(config)
    baseline: BaselineSet | None = None
    revision: Revision | None = None
    try:
        if settings.compare is not None and not worker:
            baseline, revision = _compare_target(settings)
        if settings.save is not None and not worker:
            _check_save_target(config, settings)
    except BaselineError as exc:
        raise pytest.UsageError(safe_text(exc)) from None
    config.stash[skipped_baselines_key] = _skipped_baselines_folder(
        config, settings.baselines_dir, worker
    )

    session = BenchSession(
        modes=settings.modes,
        min_run_time=settings.min_run_time,
        output_dir=settings.output_dir,
        profile=settings.profile,
        extra_environment=lambda: extensions.environment_facts(config),
        rootdir=str(config.rootpath),
        own_packages=settings.own_packages,
    )
    config.stash[session_key] = session
    from .workers import configure_worker

    if worker:  # a launched worker isolates each test (instructions: a fresh heap)
        configure_worker(config, settings.modes)
    else:
        _configure_controller(
            config, settings, baseline=baseline, session=session, revision=revision
        )
        if runs_tests_in_workers(config):  # (instructions mode made it one) its workers measure:
            extensions.environment_facts(config)  # a bad hook here stops the run before they start


def _compare_target(settings: BenchSettings) -> tuple[BaselineSet, Revision | None]:
    """The baseline ``--bench-compare`` names, and its revision when it may be measured here; an
    empty set, to measure, for a revision with nothing committed."""
    assert settings.compare is not None
    revision = _measurable_revision(settings)
    try:
        baseline = resolve_compare(settings.compare, settings.baselines_dir, Path.cwd())
    except NoCommittedBaselines:
        if revision is None:
            raise
        baseline = BaselineSet(
            name=revision.set_name or DEFAULT_SET,
            source=f"git {revision.label}, nothing committed",
            label=shown_ref(settings.compare, revision.commit),
        )
    return baseline, revision


def _check_save_target(config: pytest.Config, settings: BenchSettings) -> None:
    """Parse the set we will write into now: a corrupt file stops the run before any benchmark
    runs, instead of after, and is never overwritten."""
    assert settings.save is not None
    folder = settings.baselines_dir / settings.save
    check_save_folder(folder, f"--bench-save={settings.save}")
    if folder.is_dir():
        load_set_from_folder(folder, settings.save)
    else:
        _make_baselines_folder(config, settings.baselines_dir)


def _configure_controller(
    config: pytest.Config,
    settings: BenchSettings,
    *,
    baseline: BaselineSet | None,
    session: BenchSession,
    revision: Revision | None,
) -> None:
    """The process that owns the terminal (serial run or xdist controller): the Controller that
    judges and reports, and what measuring needs beside it."""
    from .workers import configure_controller

    join_pair(config)  # a child of an alternated round measures in turns with its partner
    # a metric that measures in processes of its own (instructions) gets them here, with
    # what they need of the baseline (instructions: each benchmark's number of calls)
    configure_controller(config, settings.modes, baseline.entries if baseline is not None else None)
    config.pluginmanager.register(
        Controller(config, settings, baseline, session, revision), "torchbench-controller"
    )
    if os.environ.get(PROGRESS_ENV):  # a child run whose parent waits for it: say how far it is
        config.pluginmanager.register(
            ProgressFile(Path(os.environ[PROGRESS_ENV])), "torchbench-progress"
        )
    if runs_tests_in_workers(config) and "time" in settings.modes:
        config.issue_config_time_warning(
            TorchbenchWarning(
                "wall time measured by parallel xdist workers shares the CPU with other tests: "
                "expect noisier results (use -n 0, or --bench-mode=instructions, for a gate)"
            ),
            stacklevel=2,
        )


def _measurable_revision(settings: BenchSettings) -> Revision | None:
    """The git revision of ``--bench-compare`` when its base may be measured in this run
    (``--bench-base`` auto or measure), else None. Never in a re-run (explain, confirm) nor in a
    base run itself: they judge against what their parent gives them."""
    assert settings.compare is not None
    if settings.base == "stored" or children.in_rerun() or os.environ.get(MODULES_ENV):
        return None
    revision = compare_revision(settings.compare, settings.baselines_dir, Path.cwd())
    if revision is None and settings.base == "measure":
        raise pytest.UsageError(
            f"--bench-base=measure: --bench-compare={safe_text(settings.compare)} is not a git "
            "revision (a saved set name or a path is already measured); name a revision, e.g. "
            "--bench-compare=origin/main"
        )
    return revision


# -- per-test naming and options ------------------------------------------------------------------


def _naming(item: pytest.Item, options: BenchOptions) -> Naming:
    path = Path(str(item.path))
    try:
        module = path.relative_to(item.config.rootpath).as_posix()
    except ValueError:
        module = path.as_posix()
    test_part = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name
    label = test_part.split("[", 1)[0]
    callspec = getattr(item, "callspec", None)
    sub_label = callspec.id if callspec is not None else ""
    return Naming(
        nodeid=item.nodeid,
        module=module,
        label=options.label if options.label is not None else label,
        sub_label=options.sub_label if options.sub_label is not None else sub_label,
        description=options.description or "",
    )


def _recorder(item: pytest.Item) -> ItemRecorder:
    recorder = item.stash.get(recorder_key, None)
    if recorder is None:
        marker = item.get_closest_marker(MARKER_NAME)
        try:
            options = options_from_marker(marker, item.nodeid)
        except MarkerError as exc:
            error: str | None = str(exc)
        else:
            error = None
        if error is not None:
            pytest.fail(error, pytrace=False)
        recorder = ItemRecorder(_naming(item, options), options)
        item.stash[recorder_key] = recorder
    return recorder


def _session(config: pytest.Config) -> BenchSession | None:
    return config.stash.get(session_key, None)


# -- collection ------------------------------------------------------------------------------------


def _make_baselines_folder(config: pytest.Config, folder: Path) -> None:
    """Create the baselines folder before the tests are collected (an empty folder; nothing is
    written into it before the save at the end of the run, and the folders made here are removed
    again when the run ends without saving into them: a failed save leaves nothing behind).

    Why: the processes that measure collect with the folder there in every later run, and its
    presence alone moved their heap: on a real library's suite the first ``--bench-save`` in a
    fresh project counted most benchmarks differently from every later run, so the first compare
    after the first save was never bit-identical. With the folder made here and skipped in
    collection (:func:`pytest_ignore_collect`) both runs collect alike.
    """
    missing = []  # deepest first
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # before any test runs, not after all of them
        raise BaselineError(
            f"--bench-save: cannot create the baselines folder {safe_text(folder)} "
            f"({exc.strerror or exc}); choose another folder (--bench-baselines-dir)"
        ) from None

    def remove_if_unused() -> None:
        for made in missing:
            try:
                made.rmdir()  # only ever an empty folder
            except OSError:
                return  # the save wrote into it (or someone else did)

    config.add_cleanup(remove_if_unused)


def _skipped_baselines_folder(config: pytest.Config, folder: Path, worker: bool) -> Path | None:
    """The baselines folder, unless it is the user's: then None, and it is collected as usual.

    The run's main process decides once and tells its workers through their environment;
    workers never search the folder. Why: what a search allocates depends on how many baseline
    files there are (a save run finds none, the compare after it finds them all), and a counting
    worker's heap before its tests must not depend on that (see :func:`pytest_ignore_collect`)."""
    if worker and SKIPPED_BASELINES_ENV in os.environ:
        value = os.environ[SKIPPED_BASELINES_ENV]
        return Path(value) if value else None
    skipped = None if _may_hold_tests(folder) else folder
    if not worker:
        previous = os.environ.get(SKIPPED_BASELINES_ENV)
        os.environ[SKIPPED_BASELINES_ENV] = str(skipped) if skipped is not None else ""
        config.add_cleanup(functools.partial(_restore_environ, SKIPPED_BASELINES_ENV, previous))
    return skipped


def _may_hold_tests(folder: Path) -> bool:
    """Whether the baselines folder is, or may be, the user's (``--bench-baselines-dir=tests``
    with the tests in ``tests/unit/``): a ``.py`` file at any depth. Whatever this cannot tell
    is left to pytest: a folder that is not a plain folder, one it cannot read, a symbolic link to
    a folder inside it (pytest follows those, ``os.walk`` does not)."""
    if not folder.exists():
        return False  # nothing to collect, nothing to skip
    if not folder.is_dir():
        return True

    def unreadable(error: OSError) -> None:
        raise error

    try:
        for top, folders, files in os.walk(folder, onerror=unreadable):
            if any(name.endswith(".py") for name in files):
                return True
            if any(os.path.islink(os.path.join(top, name)) for name in folders):
                return True
    except OSError:
        return True
    return False


def _restore_environ(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The baselines folder is never searched for tests: it holds our JSON, and what pytest makes
    while walking it (a node per folder, a hook call per file) would make the measuring processes'
    heap depend on how many baseline files there are. A folder of that name holding Python files
    (at any depth) is the user's, and left to pytest (:func:`_skipped_baselines_folder`)."""
    settings = config.stash.get(settings_key, None)
    if settings is None or not settings.active:
        return None
    skipped = config.stash.get(skipped_baselines_key, None)
    return True if skipped is not None and collection_path == skipped else None


def _is_benchmark(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER_NAME) is not None or any(
        name in getattr(item, "fixturenames", ()) for name in SELECTING_FIXTURES
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests that use a bench fixture (before -m selects), apply --bench-only/--bench-skip,
    and remember every collected test before -k/-m deselect some: to tell removed from
    deselected."""
    settings = config.stash[settings_key]
    # pytest-benchmark owns this run (installed, no --bench-* option) and refuses our keywords.
    theirs_to_run = not config.stash.get(owns_key, True)
    for item in items:
        uses_fixture = any(name in getattr(item, "fixturenames", ()) for name in SELECTING_FIXTURES)
        # Only when unmarked: an empty marker on the item would hide a class or module marker's
        # keywords.
        if uses_fixture and item.get_closest_marker(MARKER_NAME) is None:
            item.add_marker(MARKER_NAME)
        marker = item.get_closest_marker(MARKER_NAME) if theirs_to_run else None
        if marker is not None:  # pytest-benchmark gets the marker without our keywords
            theirs = for_pytest_benchmark(marker)
            if theirs is not None:
                item.add_marker(theirs, append=False)
        # Skipped, not deselected, as pytest-benchmark does: the summary counts them with the
        # reason.
        if settings.skip and _is_benchmark(item):
            item.add_marker(pytest.mark.skip(reason="benchmark skipped (--bench-skip)"))
        elif settings.only and not _is_benchmark(item):
            item.add_marker(pytest.mark.skip(reason="not a benchmark (--bench-only)"))
    if not settings.active:
        return
    collected = [item.nodeid for item in items]
    if _is_xdist_worker(config):
        config.workeroutput.setdefault("torchbench_collected", []).extend(collected)  # type: ignore[attr-defined]
    else:
        controller = config.pluginmanager.get_plugin("torchbench-controller")
        if controller is not None:
            controller.collected.update(collected)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A serial run asks the pytest_torchbench_environment hooks once every conftest is loaded and
    before the first test: a hook returning something other than a dict stops the run with one
    usage-error line, instead of failing every benchmark with it. (An xdist controller asks at
    configure: a worker that raised here would crash instead.)"""
    bench = _session(session.config)
    if (
        bench is not None
        and not _is_xdist_worker(session.config)
        and any(_is_benchmark(item) for item in session.items)
    ):
        bench.extra_facts()


# -- running ---------------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # When pytest-benchmark owns the run, the marker's keywords are its business.
    if item.config.stash.get(owns_key, True) and item.get_closest_marker(MARKER_NAME) is not None:
        _recorder(item)  # validates the marker: a bad keyword is an error at setup, naming it
        _seed_test(item)


def _seeds_tests(config: pytest.Config) -> bool:
    """Whether this process seeds tests and their fixtures: a counting mode is measured here and
    the run is ours (not pytest-benchmark's)."""
    session = _session(config)
    return session is not None and session.seeds_tests and config.stash.get(owns_key, True)


def _seed_test(item: pytest.Item) -> None:
    """Seed a benchmark test before its fixtures (its marker's ``seed``; ``seed=None``: not).

    Why seed a test, not only the warm-up: the inputs its fixtures and body draw, and the
    benchmark's first (real) call, would otherwise draw from wherever the tests before it left
    the generators (another -n, -k or file order counts differently) or, for a process's first
    test, from torch's per-process random seed: a random crop whose first call sometimes returned
    a view of its input kept that input's C++ reference count at 2 for the whole region or not,
    and its count changed from run to run. Fixtures above function scope
    draw from their own seeding (:func:`pytest_fixture_setup`).
    """
    if not _seeds_tests(item.config):
        return
    seed = _recorder(item).options.seed
    if seed is not None:
        from .seeding import seed_everything

        seed_everything(seed)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    """In a counting session a fixture above function scope draws from generators seeded for it
    (the default seed), and the test whose setup made it goes on from where it was, as if the
    fixture had been cached already: what the fixture and each test draw must not depend on which
    test, benchmark or not, needed the fixture first (a module fixture first set up by a plain
    test gave a benchmark a different op count in each run of one command; first set up by the
    benchmark itself, its body drew other numbers than after another benchmark)."""
    if fixturedef.scope == "function" or not _seeds_tests(request.config):
        return (yield)
    from .seeding import kept_generators, seed_everything

    with kept_generators():
        seed_everything(DEFAULT_SEED)
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A marked test without the benchmark fixtures: its whole body is the measured region."""
    session = _session(pyfuncitem.config)
    if session is None or pyfuncitem.get_closest_marker(MARKER_NAME) is None:
        return None
    if any(name in pyfuncitem.fixturenames for name in BENCH_FIXTURES):
        return None
    function = pyfuncitem.obj
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        return None  # left to the async plugin; measuring an event loop is out of scope
    arguments = {name: pyfuncitem.funcargs[name] for name in fixture_argnames(pyfuncitem)}
    session.before_first_call(function)  # as the fixture does before its first call
    function(**arguments)  # the real run: a failure fails the test and nothing is measured
    recorder = _recorder(pyfuncitem)
    # As the fixture does: a fresh copy of the test's code for the counting modes (a parametrised
    # test's earlier cases specialised it for their types), and a partial, not a closure of ours
    # (no bytecode of ours in the region; see fixtures.BenchmarkFixture.__call__).
    counted = functools.partial(session.counted_callable(function), **arguments)
    recorder.add(session.measure(counted, recorder.options, recorder.naming))
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Measuring processes only measure: judging happens where results are gathered (controller).

    Why: a process that loaded and parsed the baselines before measuring has a different heap
    than one that did not, and instruction counts of Python-heavy code follow heap addresses.
    Keeping the measuring side identical in save and compare runs keeps their counts identical.
    """
    try:
        return (yield)
    except BaseException:
        recorder = item.stash.get(recorder_key, None)
        if recorder is not None:
            recorder.results.clear()  # a benchmark that raises stores no result
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, Any, Any]:
    """Each benchmark starts from the same process state: what a test left behind (torch's thread
    count, a running profiler) is put back after it, with a warning naming the test where needed."""
    if _session(item.config) is None and item.get_closest_marker(MARKER_NAME) is None:
        return (yield)
    isolation = IsolationGuard()
    try:
        return (yield)
    finally:
        for message in isolation.restore(item.nodeid):
            _warn(message)  # inside pytest's per-test warning capture: listed under this test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    report = yield
    session = _session(item.config)
    if call.when == "call":
        recorder = item.stash.get(recorder_key, None)
        profiled = item.stash.get(profiler_key, None)
        if session is not None and recorder is not None and profiled is not None and report.passed:
            # bench_profiler blocks travel as results too: one path for every profile.
            session.add_profiles(recorder.results, profiled.records(), recorder.naming)
        if recorder is not None and recorder.results and report.passed:
            recorder.finish()  # group and extra_info as the test left them
            for (
                result
            ) in recorder.results:  # the marker's limits travel with (and are saved with) results
                result.limits = dict(recorder.options.limits)
            setattr(report, REPORT_ATTRIBUTE, {"results": [r.to_json() for r in recorder.results]})
    elif call.when == "teardown" and session is not None:
        session.forget(item.nodeid)  # the kept callables hold the test's tensors
    return report


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def bench_timer(request: pytest.FixtureRequest) -> Any:
    """``bench_timer(stmt, setup="pass", globals=None, **kw)``: a torch Timer whose results are
    recorded."""
    return make_timer_factory(_recorder(request.node), _session(request.config))


@pytest.fixture
def bench_profiler(request: pytest.FixtureRequest) -> Generator[ProfilerFixture, None, None]:
    """A configured ``torch.profiler.profile`` for the test: ``with bench_profiler as prof: ...``.

    Options come from the marker's ``profile={...}`` or from calling it:
    ``with bench_profiler(record_shapes=True, schedule=dict(wait=1, warmup=1, active=2)) as prof``.
    On exit the Chrome/Perfetto trace lands in the output folder and the op table in the report.
    """
    settings = request.config.stash[settings_key]
    recorder = _recorder(request.node)
    fixture = ProfilerFixture(
        defaults=dict(recorder.options.profile or {}),
        output_dir=settings.output_dir,
        nodeid=request.node.nodeid,
    )
    request.node.stash[profiler_key] = fixture  # its blocks join the test's results (makereport)
    yield fixture
    for error in fixture.errors():
        _warn(f"{request.node.nodeid}: {error}")


profiler_key = pytest.StashKey[ProfilerFixture]()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a base run (base.py), every process says which modules it imported, for the check that
    the base was measured from REV's worktree and not from the checkout; and a child of a base
    measurement leaves without tearing the interpreter down once pytest is done."""
    if os.environ.get(MODULES_ENV):
        write_imported_modules()
    session_finished()


def _warn(message: str) -> None:
    warnings.warn(TorchbenchWarning(message), stacklevel=2)


#: A worker's count of the tests it deselected (``-k``, ``-m``), sent to the controller.
DESELECTED_OUTPUT = "torchbench_deselected"


def pytest_deselected(items: list[pytest.Item]) -> None:
    """In an xdist worker of a benchmarking run: count what it deselected, for the controller."""
    if not items:
        return
    config = items[0].config
    output = getattr(config, "workeroutput", None)
    if isinstance(output, dict) and options_module.is_active(config.option):
        output[DESELECTED_OUTPUT] = output.get(DESELECTED_OUTPUT, 0) + len(items)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    """The controller's summary says "N deselected" as a serial run's does: xdist collects in the
    workers and drops the count, and instructions mode always runs its tests in workers. Every
    worker deselects the same tests: the first to report is counted."""
    config = node.config
    count = getattr(node, "workeroutput", {}).get(DESELECTED_OUTPUT)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if (
        not isinstance(count, int)
        or count <= 0
        or reporter is None
        or not options_module.is_active(config.option)
    ):
        return
    if not config.stash.get(deselected_counted_key, False):
        config.stash[deselected_counted_key] = True
        reporter.stats.setdefault("deselected", []).extend([_Deselected()] * count)


deselected_counted_key = pytest.StashKey[bool]()


class _Deselected:
    """Stands for a test a worker deselected in the terminal's count (only the count is read)."""
