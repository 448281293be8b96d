"""Command-line options and ini settings, and the validated settings object built from them.

Everything a user can type is checked here once, at configure time, so a typo is one clear line
and exit status 4 before any test runs (pytest.UsageError), not a traceback at the end.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..common.text import safe_text
from ..common.vocabulary import Policy
from ..judging.accept import AcceptError, AcceptSpec, parse_spec
from ..judging.judgement import LimitSpecError, parse_limits
from ..metrics import registry
from ..metrics.identity import Identity
from ..metrics.measuring import Measuring
from ..reports import benchmark_json
from ..reports.paths import ReportPathError, check_report_path, option_targets_error
from ..store.storage import BaselineError, validate_set_name
from . import children


def modes() -> tuple[str, ...]:
    """The mode names: one per registered metric (plugins may add theirs)."""
    return registry.names()


#: ``--bench-base`` values: committed baselines only, always measure REV, or measure where needed.
BASE_CHOICES = ("auto", "stored", "measure")

#: The exit status of a run in CI that compared nothing for some benchmark (its baseline was not
#: comparable and nothing was measured in its place). Distinct from pytest's own 0-5, so that a CI
#: script can tell "the gate was off" from "a benchmark regressed" (1) and from a usage error (4).
EXIT_INCOMPARABLE = 6


#: ``--bench-rounds`` when not given: rounds of base and head measured alternately (time mode
#: against a measured base). Even, so that each side runs first as often as second.
DEFAULT_ROUNDS = 4

#: The built-in modes (``modes()`` also lists those registered by plugins).
MODES = registry.BUILTIN


def addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchbench", "pytest-torchbench: performance regression testing")
    _add_what_options(group)
    _add_base_options(group)
    _add_limit_options(group)
    _add_report_options(group)
    _add_baseline_options(group)
    _add_measuring_options(group)
    _add_selection_options(group)
    parser.addini(
        "bench_baselines_dir", "folder of baseline sets, relative to rootdir", default="baselines"
    )
    parser.addini(
        "bench_sites",
        "the project's own packages (see --bench-sites), comma or space separated",
        default="",
    )


def _add_what_options(group: pytest.OptionGroup) -> None:
    """What is measured, and saved or compared with."""
    group.addoption(
        "--bench-mode",
        metavar="MODES",
        default=None,
        help="measure benchmarks: "
        + ", ".join(
            f"{m.name} ({m.help})" if m.help else m.name for m in registry.all_metrics(Identity)
        )
        + "; several as 'time,ops'. Marked tests run once as plain tests when no --bench-* option "
        "is given.",
    )
    group.addoption(
        "--bench-save",
        metavar="NAME",
        default=None,
        help="write this run's results as baseline set NAME in the baselines folder",
    )
    group.addoption(
        "--bench-compare",
        metavar="REF",
        default=None,
        help="compare with baseline set REF: a saved name, a git revision, or a path",
    )


def _add_base_options(group: pytest.OptionGroup) -> None:
    """How a base from ``--bench-compare=REV`` is had: stored or measured here."""
    group.addoption(
        "--bench-base",
        metavar="HOW",
        default=None,
        choices=BASE_CHOICES,
        help="--bench-compare=REV (a git revision): 'stored' compares with the baselines "
        "committed at REV only; 'measure' measures REV in this job (a temporary git worktree, "
        "the same interpreter, environment, selection and modes); 'auto' (default) uses the "
        "committed ones where they are comparable and measures REV where they are missing "
        "or not comparable, or where a benchmark failed against them",
    )
    group.addoption(
        "--bench-base-prepare",
        metavar="CMD",
        default=None,
        help="a shell command run in REV's temporary worktree before measuring it, e.g. a "
        "build step 'python setup.py build_ext --inplace' (not 'pip install -e .', which "
        "would point the installed project at the worktree)",
    )
    group.addoption(
        "--bench-rounds",
        metavar="N",
        type=int,
        default=None,
        help="time mode against a base measured from --bench-compare=REV: measure REV and this "
        "checkout alternately, N rounds of fresh processes (each round's two taking 10 ms turns "
        "on one CPU, the first turn swapped every round; the first half of every benchmark, "
        "the rest of those not unchanged within 70%% of the limit), then passes of 2 rounds (of N "
        "one side after the other) of the benchmarks those did not decide, up to 2N more, and "
        "judge each on the fastest "
        f"call of each side per round (default {DEFAULT_ROUNDS}; 1: one base run, then this "
        "run, as for counting modes)",
    )


def _add_limit_options(group: pytest.OptionGroup) -> None:
    """What fails the run: accepted regressions, incomparable baselines, limits."""
    group.addoption(
        "--bench-accept",
        metavar="SPEC",
        action="append",
        default=None,
        help="accept an intended regression: 'TEST-IDS METRICS -- REASON' (test ids with * globs, "
        "comma-separated; metrics comma-separated or *), as a Bench-Accept: commit trailer between "
        "the baseline's commit and HEAD does; repeatable",
    )
    group.addoption(
        "--bench-allow-incomparable",
        action="store_true",
        default=False,
        help="in CI (the CI variable set), do not fail the run when a benchmark's baseline "
        "could not be compared and nothing was measured in its place (default: exit "
        f"{EXIT_INCOMPARABLE})",
    )
    group.addoption(
        "--bench-fail",
        metavar="SPEC",
        default=None,
        help="regression limits, e.g. 'instructions:1%%,time:10%%' (defaults: "
        + ", ".join(f"{m} {v * 100:g}%%" for m, v in registry.default_limits().items())
        + ")",
    )


def _add_report_options(group: pytest.OptionGroup) -> None:
    """The report files."""
    group.addoption(
        "--bench-json",
        metavar="PATH",
        default=None,
        help="write the run's results and verdicts as JSON to PATH",
    )
    group.addoption(
        "--bench-markdown",
        metavar="PATH",
        default=None,
        help="write a Markdown summary (regressions first, explanations folded) to PATH; "
        "in GitHub Actions it is also appended to GITHUB_STEP_SUMMARY",
    )
    group.addoption(
        "--bench-html",
        metavar="PATH",
        default=None,
        help="write a self-contained HTML report with plots to PATH",
    )


def _add_baseline_options(group: pytest.OptionGroup) -> None:
    """How strictly baselines are held, and where they are."""
    group.addoption(
        "--bench-strict",
        action="store_true",
        default=False,
        help="fail benchmarks whose baseline comes from a different environment "
        "(default: report them as not comparable)",
    )
    group.addoption(
        "--bench-fail-stale",
        action="store_true",
        default=False,
        help="fail instruction/op/memory counts that improved beyond the limit, so "
        "baselines are kept exact",
    )
    group.addoption(
        "--bench-baselines-dir",
        metavar="DIR",
        default=None,
        help="the baselines folder (default: ini bench_baselines_dir, else 'baselines')",
    )


def _add_measuring_options(group: pytest.OptionGroup) -> None:
    """How long time mode measures, profiling, and where artifacts go."""
    group.addoption(
        "--bench-min-run-time",
        metavar="SECONDS",
        type=float,
        default=None,
        help="time mode: measure each benchmark for at least this long (default 0.1)",
    )
    group.addoption(
        "--bench-profile",
        action="store_true",
        default=False,
        help="after measuring, run each benchmark a few more times under torch.profiler: "
        "top ops by self time in the report, a trace per benchmark in the output folder",
    )
    group.addoption(
        "--bench-output",
        metavar="DIR",
        default=None,
        help="folder for traces and other artifacts (default: .torchbench under rootdir)",
    )


def _add_selection_options(group: pytest.OptionGroup) -> None:
    """Which tests are benchmarks, and which code is the project's own."""
    group.addoption(
        "--bench-only",
        action="store_true",
        default=False,
        help="run only the benchmarks (tests marked benchmark or using the benchmark, "
        "bench_timer or bench_profiler fixture); the others are skipped, as "
        "pytest-benchmark's --benchmark-only. Does not turn measuring on by itself",
    )
    group.addoption(
        "--bench-skip",
        action="store_true",
        default=False,
        help="skip the benchmarks (as pytest-benchmark's --benchmark-skip)",
    )
    group.addoption(
        "--bench-sites",
        metavar="PKG[,PKG]",
        default=None,
        help="the project's own packages, whose lines are call sites of a changed op or "
        "function even when installed into site-packages (default: ini bench_sites, else "
        "read from the rootdir's pyproject.toml and src/ folder)",
    )


@dataclasses.dataclass(frozen=True)
class BenchSettings:
    """The run's benchmark settings, validated."""

    active: bool
    modes: tuple[str, ...]
    save: str | None
    compare: str | None
    json_path: Path | None
    baselines_dir: Path
    policy: Policy
    min_run_time: float | None
    rootdir: Path
    profile: bool = False
    output_dir: Path | None = None
    markdown_path: Path | None = None
    html_path: Path | None = None
    base: str = "auto"  # --bench-base: stored / measure / auto
    base_prepare: str | None = None  # --bench-base-prepare: a build step in REV's worktree
    allow_incomparable: bool = False  # --bench-allow-incomparable
    accepts: tuple[AcceptSpec, ...] = ()  # --bench-accept
    rounds: int = DEFAULT_ROUNDS  # --bench-rounds: base and head alternately, in time mode
    only: bool = False  # --bench-only: skip tests that are not benchmarks
    skip: bool = False  # --bench-skip: skip the benchmarks
    #: pytest-benchmark's --benchmark-json, in a run torchbench owns: its format, our wall times
    benchmark_json_path: Path | None = None
    #: --bench-sites / ini bench_sites, else the project's packages read from its metadata
    own_packages: tuple[str, ...] = ()


def mode_names(raw: str | None) -> tuple[str, ...]:
    """The names ``--bench-mode`` gives, as written (unchecked), or the default modes."""
    if raw is None:
        return registry.DEFAULT_MODES
    return tuple(dict.fromkeys(m.strip() for m in str(raw).split(",") if m.strip()))


def _parse_modes(raw: str | None) -> tuple[str, ...]:
    modes = mode_names(raw)
    if raw is None:
        return modes
    unknown = [m for m in modes if not registry.known(m)]
    if unknown or not modes:
        raise pytest.UsageError(
            f"--bench-mode={raw!r}: unknown mode {', '.join(map(repr, unknown)) or '(empty)'}; "
            f"choose from {', '.join(registry.names())} (several as 'time,ops')"
        )
    for mode in modes:
        reason = registry.get(mode, Measuring).unavailable()
        if reason is not None:
            raise pytest.UsageError(reason)
    for mode in modes:
        excludes = registry.get(mode, Measuring).excludes
        clash = next((other for other in excludes if other in modes), None)
        if clash is not None:
            first, second = sorted((mode, clash), key=registry.rank)
            why = (
                excludes[clash]
                if isinstance(excludes, Mapping)
                else "they cannot measure in the same process"
            )
            raise pytest.UsageError(
                f"--bench-mode: '{first}' and '{second}' cannot run together ({why}); "
                f"run them as two pytest invocations"
            )
    return modes


def is_active(opt: Any) -> bool:
    """Whether the parsed options ``opt`` (``config.option``, or pytest's early
    ``known_args_namespace``) turn the plugin on: any option that measures, saves or compares."""
    return any(
        getattr(opt, name, None) is not None and getattr(opt, name, None) is not False
        for name in (
            "bench_mode",
            "bench_save",
            "bench_compare",
            "bench_json",
            "bench_fail",
            "bench_profile",
            "bench_markdown",
            "bench_html",
        )
    )


def settings_from_config(config: pytest.Config) -> BenchSettings:
    opt = config.option
    rootdir = Path(config.rootpath)
    # A folder typed on the command line is relative to where the user is; the ini's to rootdir.
    if opt.bench_baselines_dir:
        baselines_dir = Path(opt.bench_baselines_dir).absolute()
    else:
        baselines_dir = rootdir / (config.getini("bench_baselines_dir") or "baselines")
    active = is_active(opt)
    modes = _parse_modes(opt.bench_mode)
    if (target_error := option_targets_error(opt, active)) is not None:
        raise pytest.UsageError(target_error)
    if opt.bench_only and opt.bench_skip:
        raise pytest.UsageError(
            "--bench-only and --bench-skip together would skip every test; give one"
        )
    try:
        limits = parse_limits(opt.bench_fail) if opt.bench_fail is not None else {}
    except LimitSpecError as exc:
        raise pytest.UsageError(safe_text(exc)) from None
    if opt.bench_save is not None:
        try:
            validate_set_name(opt.bench_save)
        except BaselineError as exc:
            raise pytest.UsageError(safe_text(exc)) from None
    if (opt.bench_base is not None or opt.bench_base_prepare) and opt.bench_compare is None:
        raise pytest.UsageError(
            f"{'--bench-base' if opt.bench_base is not None else '--bench-base-prepare'} needs "
            "--bench-compare=REV (the git revision whose baselines to use or measure)"
        )
    if opt.bench_rounds is not None and opt.bench_rounds < 1:
        raise pytest.UsageError(
            f"--bench-rounds={opt.bench_rounds}: must be a whole number >= 1, e.g. 4"
        )
    if opt.bench_min_run_time is not None and not (
        math.isfinite(opt.bench_min_run_time) and opt.bench_min_run_time > 0
    ):  # nan, inf: never ends
        raise pytest.UsageError(
            f"--bench-min-run-time={opt.bench_min_run_time}: "
            "must be > 0 seconds and finite, e.g. 0.1"
        )
    policy = Policy(
        limits=limits,
        strict_environment=bool(opt.bench_strict),
        fail_stale=bool(opt.bench_fail_stale),
    )
    json_path = Path(opt.bench_json).absolute() if opt.bench_json else None
    rerun = children.in_rerun()  # the end-of-session re-run writes only its JSON
    benchmark_json = (
        _benchmark_json_path(opt, bench_option_given(config), active, modes) if not rerun else None
    )
    return BenchSettings(
        active=active,
        modes=modes,
        save=None if rerun else opt.bench_save,
        compare=opt.bench_compare,
        json_path=json_path,
        baselines_dir=baselines_dir,
        policy=policy,
        min_run_time=opt.bench_min_run_time,
        rootdir=rootdir,
        profile=bool(opt.bench_profile) and not rerun,
        output_dir=Path(opt.bench_output).absolute()
        if opt.bench_output
        else rootdir / ".torchbench",
        markdown_path=Path(opt.bench_markdown).absolute()
        if opt.bench_markdown and not rerun
        else None,
        html_path=Path(opt.bench_html).absolute() if opt.bench_html and not rerun else None,
        base="stored" if rerun else (opt.bench_base or "auto"),
        base_prepare=opt.bench_base_prepare or None,
        allow_incomparable=bool(opt.bench_allow_incomparable),
        accepts=_accepts(getattr(opt, "bench_accept", None)),
        rounds=opt.bench_rounds if opt.bench_rounds is not None else DEFAULT_ROUNDS,
        only=bool(opt.bench_only),
        skip=bool(opt.bench_skip),
        benchmark_json_path=benchmark_json,
        own_packages=_own_packages(opt.bench_sites, config.getini("bench_sites"), rootdir),
    )


_PACKAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _own_packages(option: str | None, ini: str, rootdir: Path) -> tuple[str, ...]:
    """The project's own import packages: ``--bench-sites``, else ini ``bench_sites``, else read
    from the project (:func:`project_packages`). Why the project's own: a library that CI installs
    into site-packages (``pip install .``) is still the code whose lines a failure must name."""
    given, source = (option, "--bench-sites") if option is not None else (ini, "bench_sites")
    names = [name for name in re.split(r"[\s,]+", str(given or "")) if name]
    for name in names:
        if not _PACKAGE_NAME.fullmatch(name):
            raise pytest.UsageError(
                f"{source}={safe_text(str(given))}: "
                f"{safe_text(name)!r} is not a Python package name; "
                "give import names, e.g. --bench-sites=mylib,mylib_ext"
            )
    if option is not None and not names:
        raise pytest.UsageError(
            "--bench-sites is empty; give import names, e.g. --bench-sites=mylib"
        )
    return tuple(dict.fromkeys(names)) if names else project_packages(rootdir)


def _table(data: Any, key: str) -> dict[str, Any]:
    found = data.get(key) if isinstance(data, dict) else None
    return found if isinstance(found, dict) else {}


def project_packages(rootdir: Path) -> tuple[str, ...]:
    """The import names a project at ``rootdir`` declares, best effort: its ``pyproject.toml``'s
    ``[project] name`` (``my-lib`` -> ``my_lib``), ``[tool.setuptools] packages`` and
    ``py-modules``, ``[tool.poetry] packages``, and the packages of a ``src/`` layout. Names that
    are not importable are harmless (``sites.own_dirs`` skips them); an unreadable file gives
    none."""
    names: list[str] = []
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
        except ImportError:
            tomllib = None  # type: ignore[assignment]
    pyproject = rootdir / "pyproject.toml"
    data: dict[str, Any] = {}
    if tomllib is not None and pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = {}
    name = _table(data, "project").get("name")
    if isinstance(name, str):
        names.append(re.sub(r"[-.]+", "_", name).lower())
    tool = _table(data, "tool")
    setuptools = _table(tool, "setuptools")
    for key in ("packages", "py-modules"):
        listed = setuptools.get(key)
        if isinstance(listed, list):
            names += [item.split(".")[0] for item in listed if isinstance(item, str)]
    poetry = _table(tool, "poetry").get("packages")
    if isinstance(poetry, list):
        names += [
            p["include"].split("/")[0]
            for p in poetry
            if isinstance(p, dict) and isinstance(p.get("include"), str)
        ]
    src = rootdir / "src"
    if src.is_dir():
        try:
            names += sorted(p.name for p in src.iterdir() if (p / "__init__.py").is_file())
        except OSError:
            pass
    return tuple(name for name in dict.fromkeys(names) if _PACKAGE_NAME.fullmatch(name))


def _benchmark_json_path(
    opt: Any, owned: bool, active: bool, modes: tuple[str, ...]
) -> Path | None:
    """pytest-benchmark's ``--benchmark-json=PATH`` (its option exists where it is installed), when
    torchbench owns the run (``owned``: a --bench-* option was given): written in pytest-benchmark's
    format with this run's wall times.

    Why not ignore it: a CI job that uploads that file would silently upload nothing. A run that
    measures no time has nothing for that format: one line, before any test runs."""
    raw = getattr(opt, "benchmark_json", None)
    if not owned or raw is None:
        return None  # no --bench-* option: pytest-benchmark's own run writes it
    # pytest-benchmark before 5.3 parses the option as argparse.FileType("wb"): an open (already
    # emptied) file, whose name is the path; "-" is standard output. From 5.3 "-" arrives as is.
    if not isinstance(raw, (str, os.PathLike)):
        name = getattr(raw, "name", None)
        raw = "-" if not isinstance(name, str) or name in ("<stdout>", "<stderr>") else name
    if str(raw) == "-":  # standard output, which this run does not write
        raise pytest.UsageError(
            "--benchmark-json=-: give a file path (pytest-torchbench writes the wall times "
            "there in pytest-benchmark's format)"
        )
    if not active:
        raise pytest.UsageError(
            f"--benchmark-json={safe_text(str(raw))}: this run measures nothing (its --bench-* "
            f"options only select tests); add --bench-mode={benchmark_json.METRIC} to write "
            "pytest-benchmark's JSON of the wall times"
        )
    if benchmark_json.METRIC not in modes:
        raise pytest.UsageError(
            f"--benchmark-json={safe_text(str(raw))}: pytest-benchmark's format holds wall times, "
            f"and this run (--bench-mode={','.join(modes)}) measures none; "
            f"add {benchmark_json.METRIC} to --bench-mode "
            f"(e.g. --bench-mode={benchmark_json.METRIC},{modes[0]}), "
            "or use --bench-json=PATH for this run's results"
        )
    try:
        return check_report_path(Path(str(raw)).absolute(), "--benchmark-json")
    except ReportPathError as exc:
        raise pytest.UsageError(str(exc)) from None


def bench_option_given(config: pytest.Config) -> bool:
    """Whether any ``--bench-*`` option was given: then pytest-torchbench owns the ``benchmark``
    fixture and marker for the run, even when pytest-benchmark is installed."""
    return any(
        name.startswith("bench_") and value is not None and value is not False
        for name, value in vars(config.option).items()
    )


def _accepts(texts: list[str] | None) -> tuple[AcceptSpec, ...]:
    """``--bench-accept`` values, read now: one that cannot be read is a usage error (exit 4)."""
    try:
        return tuple(parse_spec(text, "--bench-accept", registry.names()) for text in texts or ())
    except AcceptError as exc:
        raise pytest.UsageError(str(exc)) from None
