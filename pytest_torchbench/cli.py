"""``torchbench``: compare or show baseline sets without running tests, and merge CI shards.

Why: in CI the measuring job and the gating job are often separate (results uploaded as an
artifact, compared later), and on a laptop one wants to see what a pull request changed between two
commits without re-running anything. References resolve exactly as ``--bench-compare`` does (saved
set name, then git revision ``REV``/``REV:SET``, then path), judgement and the terminal table are
the plugin's own, so the CLI and the plugin can never disagree. ``merge`` combines the
``--bench-json`` files of the jobs of a CI matrix into the result of one run
(:mod:`pytest_torchbench.reports.shards`): a sharded suite still gets one verdict and one report.

Exit status: 0 no failing verdict, 1 a failing verdict (regression), 4 usage error (bad
arguments, unknown reference, corrupt baseline, a report path that is not a regular file or is
a symlink) with one ``torchbench: error:`` line, as pytest's usage errors, before anything is
compared; ``merge`` also exits 4 on shards that are not parts of one run, one line per
conflict; ``compare`` and ``merge`` exit 6 in CI when a benchmark was compared with nothing, as
the gate does (``--allow-incomparable`` accepts it). A report
that still cannot be written (a missing folder, no permission) is an ERROR line after the table
and exit status 4 as well: the report is what a CI step runs this command for.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .common.text import natural_key, safe_text
from .common.vocabulary import Policy, Verdict
from .judging import gate
from .judging.judgement import LimitSpecError, parse_limits
from .judging.results import BenchmarkResult
from .metrics import registry
from .reports import jsonreport, markdown, publish, shards, terminal
from .reports.common import count_tests
from .reports.paths import ReportPathError, check_report_paths
from .store.refs import resolve_compare, save_stamp
from .store.storage import (
    BaselineError,
    BaselineSet,
    check_save_folder,
    save_set,
    validate_set_name,
)

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 4
#: The gate's exit in CI when a benchmark was compared with nothing
#: (``--bench-allow-incomparable``).
EXIT_INCOMPARABLE = 6


class UsageError(Exception):
    """A problem with what the user typed; printed as one line, exit status 4."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one clear line instead of usage + message
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="torchbench",
        description="Compare or show pytest-torchbench baseline sets without running tests. "
        "A reference is a saved set name in the baselines folder, else a git revision (REV or "
        "REV:SET, read from git without a checkout), else a path to a set folder or baseline file.",
    )
    parser.add_argument(
        "--baselines-dir",
        metavar="DIR",
        default="baselines",
        help="the baselines folder (default: ./baselines)",
    )
    parser.add_argument(
        "-p",
        dest="plugins",
        metavar="PLUGIN",
        action="append",
        default=[],
        help="load the metrics that PLUGIN registers (a module name or a .py file such as "
        "tests/conftest.py, defining pytest_torchbench_register_metrics); repeatable",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_compare(commands)
    _add_show(commands)
    _add_merge(commands)
    _add_history(commands)
    _add_bisect(commands)
    _add_comment(commands)
    return parser


def _add_hidden_globals(sub: argparse.ArgumentParser) -> None:
    """``--baselines-dir`` and ``-p`` also accepted after the command, hidden from its help."""
    sub.add_argument(
        "--baselines-dir", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub.add_argument(
        "-p",
        dest="sub_plugins",
        metavar="PLUGIN",
        action="append",
        default=[],
        help=argparse.SUPPRESS,
    )


def _add_report_options(sub: argparse.ArgumentParser, *, json: bool) -> None:
    """The hidden globals and the report files of ``compare``, ``show`` and ``merge`` (``merge``
    has no ``--json``: its OUT.json is one)."""
    _add_hidden_globals(sub)
    sub.add_argument("--markdown", metavar="PATH", type=Path, help="also write a Markdown summary")
    sub.add_argument(
        "--html", metavar="PATH", type=Path, help="also write a self-contained HTML report"
    )
    if json:
        sub.add_argument(
            "--json", metavar="PATH", type=Path, help="also write results and verdicts as JSON"
        )


def _add_allow_incomparable(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--allow-incomparable",
        action="store_true",
        help=f"in CI, do not exit {EXIT_INCOMPARABLE} when a benchmark was compared with nothing",
    )


def _add_compare(commands: argparse._SubParsersAction[_Parser]) -> None:
    compare = commands.add_parser(
        "compare", help="compare B (current) with A (baseline); exit 1 on regressions"
    )
    compare.add_argument(
        "baseline", metavar="A", help="the baseline: set name, git revision or path"
    )
    compare.add_argument(
        "current", metavar="B", help="the current results: set name, git revision or path"
    )
    compare.add_argument(
        "--fail",
        metavar="SPEC",
        default=None,
        help="limits, e.g. 'instructions:1%%,time:10%%' (defaults: "
        + ", ".join(f"{m} {v * 100:g}%%" for m, v in registry.default_limits().items())
        + ")",
    )
    compare.add_argument(
        "--strict", action="store_true", help="fail benchmarks from different environments"
    )
    compare.add_argument(
        "--fail-stale", action="store_true", help="fail counts that improved beyond the limit"
    )
    _add_allow_incomparable(compare)
    _add_report_options(compare, json=True)


def _add_show(commands: argparse._SubParsersAction[_Parser]) -> None:
    show = commands.add_parser("show", help="print the table of one baseline set")
    show.add_argument("baseline", metavar="A", help="set name, git revision or path")
    _add_report_options(show, json=True)


def _add_merge(commands: argparse._SubParsersAction[_Parser]) -> None:
    merge = commands.add_parser(
        "merge",
        help="combine the --bench-json files of CI shards into one result; exit 1 on regressions",
    )
    merge.add_argument(
        "out", metavar="OUT.json", type=Path, help="the merged --bench-json file to write"
    )
    merge.add_argument(
        "shards", metavar="SHARD.json", type=Path, nargs="+", help="the shards' --bench-json files"
    )
    saving = merge.add_mutually_exclusive_group()
    saving.add_argument(
        "--save",
        metavar="NAME",
        help="also write the merged results as baseline set NAME in the baselines folder",
    )
    saving.add_argument(
        "--save-dir", metavar="DIR", type=Path, help="also write them as a baseline set in DIR"
    )
    _add_allow_incomparable(merge)
    _add_report_options(merge, json=False)


def _add_history(commands: argparse._SubParsersAction[_Parser]) -> None:
    history = commands.add_parser(
        "history",
        help=(
            "the trend of every benchmark and metric across the commits that changed a baseline set"
        ),
    )
    history.add_argument(
        "set", metavar="SET", nargs="?", default="main", help="the baseline set (default: main)"
    )
    history.add_argument("--since", metavar="REV", help="only the commits after REV")
    history.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="only benchmarks whose id matches EXPR (as pytest's -k: substrings, and, or, not)",
    )
    history.add_argument(
        "--fail", metavar="SPEC", default=None, help="limits for steps and creep, as --bench-fail"
    )
    history.add_argument(
        "--html", metavar="PATH", type=Path, help="write one self-contained HTML page"
    )
    history.add_argument("--json", metavar="PATH", type=Path, help="write the series as JSON")
    history.add_argument("--csv", metavar="PATH", type=Path, help="write one row per point as CSV")
    _add_hidden_globals(history)


def _add_bisect(commands: argparse._SubParsersAction[_Parser]) -> None:
    bisecting = commands.add_parser(
        "bisect",
        help="the first commit whose value moved beyond the limit: torchbench bisect GOOD BAD "
        "[--bench-mode=MODES] -- PYTEST-ARGS",
    )
    bisecting.add_argument("good", metavar="GOOD", help="a commit measured within the limit")
    bisecting.add_argument("bad", metavar="BAD", help="a later commit measured beyond it")
    bisecting.add_argument(
        "--bench-mode",
        dest="modes",
        metavar="MODES",
        required=True,
        help="what to measure, as pytest's --bench-mode (counting modes decide with one "
        "measurement per commit)",
    )
    bisecting.add_argument("--fail", metavar="SPEC", default=None, help="limits, as --bench-fail")
    bisecting.add_argument(
        "--bench-base-prepare",
        dest="prepare",
        metavar="CMD",
        default=None,
        help="a command that builds each revision's worktree before it is measured",
    )


def _add_comment(commands: argparse._SubParsersAction[_Parser]) -> None:
    commenting = commands.add_parser(
        "comment",
        help="post a Markdown summary as the pull request's one benchmark comment, edited in place",
    )
    commenting.add_argument(
        "summary", metavar="SUMMARY.md", type=Path, help="the --bench-markdown file"
    )
    commenting.add_argument(
        "--pr", metavar="N", help="the pull (merge) request (default: from the CI variables)"
    )


def load_plugin_metrics(plugin: str) -> list[str]:
    """Import ``plugin`` (a module name, or a path to a .py file such as a conftest) and register
    the metrics its ``pytest_torchbench_register_metrics(config=None)`` returns.

    Why: a set saved with a plugin's metric cannot be read without that metric's JSON form and
    judge; pytest finds plugins and conftests itself, this command has to be told."""
    path = Path(plugin)
    try:
        if plugin.endswith(".py") or path.is_file():
            if not path.is_file():
                raise UsageError(f"-p {plugin}: no such file")
            name = "torchbench_plugin_" + "_".join(
                path.resolve().with_suffix("").parts[-3:]
            ).replace("-", "_")
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise UsageError(f"-p {plugin}: cannot import this file")
            module = importlib.util.module_from_spec(spec)
            sys.path.insert(
                0, str(path.resolve().parent)
            )  # as pytest does for a conftest's siblings
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(plugin)
    except (UsageError, KeyboardInterrupt):
        raise
    # Anything the user's module raises on import is one line, SystemExit and pytest's Skipped
    # (a conftest's importorskip) included: they derive from BaseException, not Exception.
    except BaseException as exc:  # noqa: BLE001
        raise UsageError(f"-p {plugin}: import failed: {type(exc).__name__}: {exc}") from None
    hook = getattr(module, "pytest_torchbench_register_metrics", None)
    if not callable(hook):
        raise UsageError(f"-p {plugin}: defines no pytest_torchbench_register_metrics(config)")
    try:
        returned = hook(config=None)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise UsageError(
            f"-p {plugin}: pytest_torchbench_register_metrics failed: {type(exc).__name__}: {exc}"
        ) from None
    try:
        return registry.register_returned(
            returned, f"-p {plugin}: pytest_torchbench_register_metrics"
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _resolve(ref: str, role: str, baselines_dir: Path) -> BaselineSet:
    try:
        return resolve_compare(ref, baselines_dir, Path.cwd(), option=role)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


def compare_sets(baseline: BaselineSet, current: BaselineSet, policy: Policy) -> list[Verdict]:
    """The plugin's gate applied to two stored sets: every current entry (with the per-test limits
    stored with it), then the missing ones. The CLI has no verdict hook (no pytest config)."""
    return gate.gate(list(current.entries.values()), baseline.entries, policy)


def _print_table(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict], baseline: BaselineSet | None
) -> None:
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    for line in terminal.render_tables(
        results, verdicts, baseline.shown_as if baseline else None, width=width
    ):
        print(line)
    if baseline is not None:
        shown = [v for v in verdicts if v.status != "unchanged"]
        for line in terminal.render_verdict_lines(shown):
            print(line)
        if not shown and results:
            print(
                f"no changes beyond the limits against baseline '{safe_text(baseline.shown_as)}' "
                f"({safe_text(baseline.source)})"
            )


def _check_report_targets(args: argparse.Namespace) -> None:
    """Before reading anything: a report path that is a device, a FIFO, a folder or a symlink is a
    usage error (the report is what this command was run for; finding out afterwards is late)."""
    try:
        check_report_paths(
            {
                "--markdown": args.markdown,
                "--html": args.html,
                "--json": getattr(args, "json", None),
                **(
                    {"OUT.json": args.out, "GITHUB_STEP_SUMMARY": markdown.step_summary_path()}
                    if args.command == "merge"
                    else {}
                ),
            }
        )
    except ReportPathError as exc:
        raise UsageError(str(exc)) from None


def _write_reports(
    args: argparse.Namespace,
    results: list[BenchmarkResult],
    verdicts: list[Verdict],
    baseline: BaselineSet | None,
    meta: dict[str, object],
) -> bool:
    """Write the reports asked for; False when one could not be written (its ERROR line printed)."""
    notes = publish.write_reports(
        publish.RunOutcome(
            results,
            verdicts,
            baseline_entries=baseline.entries if baseline else None,
            baseline_name=baseline.shown_as if baseline else None,
            baseline_source=baseline.source if baseline else None,
        ),
        publish.ReportTargets(args.markdown, args.html, None, option_prefix="--"),
    )
    if getattr(args, "json", None) is not None:
        try:
            jsonreport.write(args.json, results, verdicts, meta)
            notes.append(f"JSON written to {args.json}")
        except OSError as exc:
            notes.append(f"ERROR: --json={args.json}: cannot write ({exc.strerror or exc})")
    for note in notes:
        print(
            f"torchbench: {safe_text(note)}",
            file=sys.stderr if note.startswith("ERROR") else sys.stdout,
        )
    return not any(note.startswith("ERROR") for note in notes)


def run(argv: Sequence[str] | None = None) -> int:
    """The CLI without sys.exit: returns the exit status (tests call this)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # bisect's own arguments end at "--"; pytest's follow (elsewhere "--" ends options, as usual)
    split = argv.index("--") if "--" in argv and "bisect" in argv[: argv.index("--")] else None
    args = parser.parse_args(argv[:split] if split is not None else argv)
    args.pytest_args = argv[split + 1 :] if split is not None else []
    if args.command is None:
        raise UsageError(
            "name a command: torchbench compare A B, torchbench show A or torchbench merge "
            "OUT.json SHARD.json... (see torchbench --help)"
        )
    baselines_dir = Path(args.baselines_dir).absolute()
    added: list[str] = []
    try:
        for plugin in dict.fromkeys(
            [*args.plugins, *getattr(args, "sub_plugins", [])]
        ):  # -p X twice: once
            added += load_plugin_metrics(plugin)
        return _run_command(args, baselines_dir)
    finally:
        for name in added:  # run() is also called in-process (tests): leave the registry as found
            registry.unregister(name)


def _run_command(args: argparse.Namespace, baselines_dir: Path) -> int:
    if args.command == "bisect":
        return _bisect(args)
    if args.command == "comment":
        return _comment(args)
    if args.command == "history":
        return _history(args, baselines_dir)
    _check_report_targets(args)
    if args.command == "merge":
        return _merge(args, baselines_dir)
    if args.command == "show":
        shown = _resolve(args.baseline, "show", baselines_dir)
        results = [shown.entries[k] for k in sorted(shown.entries, key=natural_key)]
        print(
            f"baseline set '{safe_text(shown.name)}' ({safe_text(shown.source)}): {len(results)} "
            "benchmark(s)"
        )
        _print_table(results, [], None)
        written = _write_reports(
            args, results, [], None, {"set": shown.name, "source": shown.source}
        )
        return EXIT_OK if written else EXIT_USAGE
    try:
        limits = parse_limits(args.fail, "--fail") if args.fail is not None else {}
    except LimitSpecError as exc:
        raise UsageError(str(exc)) from None
    policy = Policy(limits=limits, strict_environment=args.strict, fail_stale=args.fail_stale)
    baseline = _resolve(args.baseline, "baseline", baselines_dir)
    current = _resolve(args.current, "current", baselines_dir)
    results = [current.entries[k] for k in sorted(current.entries, key=natural_key)]
    verdicts = compare_sets(baseline, current, policy)
    print(
        f"comparing '{safe_text(current.shown_as)}' ({safe_text(current.source)}) with baseline "
        f"'{safe_text(baseline.shown_as)}' ({safe_text(baseline.source)})"
    )
    _print_table(results, verdicts, baseline)
    written = _write_reports(
        args,
        results,
        verdicts,
        baseline,
        {
            "compared_with": baseline.source,
            "current": current.source,
            "modes": sorted({v.metric for v in verdicts}),
        },
    )
    failed = [v for v in verdicts if v.failed]
    if failed:
        print(f"torchbench: {len(failed)} failing verdict(s)")
    if not written:  # a CI step that uploads the report must not pass without it
        return EXIT_USAGE
    if failed:
        return EXIT_REGRESSION
    return _incomparable_exit(verdicts, args.allow_incomparable, "comparison")


def _incomparable_exit(verdicts: Sequence[Verdict], allowed: bool, what: str) -> int:
    """EXIT_INCOMPARABLE in CI when a benchmark was compared with nothing, as the gate does
    (a line naming them either way), unless ``allowed``; else EXIT_OK."""
    from .pytest.session_facts import in_ci, uncompared

    nothing = uncompared(list(verdicts))
    if not nothing:
        return EXIT_OK
    print(
        f"torchbench: {len(nothing)} verdict(s) compared with nothing (a baseline from another "
        "environment): " + ", ".join(sorted({safe_text(v.key) for v in nothing}))
    )
    if in_ci() and not allowed:
        print(
            f"torchbench: ERROR: in CI this fails the {what} (exit {EXIT_INCOMPARABLE}), as it "
            "fails the gate; accept it with --allow-incomparable",
            file=sys.stderr,
        )
        return EXIT_INCOMPARABLE
    return EXIT_OK


def _merge(args: argparse.Namespace, baselines_dir: Path) -> int:
    """``torchbench merge``: the shards' results as one run (every conflict one line, exit 4),
    its reports (the Markdown also appended to GitHub's job summary, as the gate's is: the merge
    job is where a sharded suite's result is read), optionally one baseline set (all files or
    none), and the verdict the unsharded
    run would have had: 1 on a failing verdict or a failed benchmark test; in CI, 6 when a
    benchmark was compared with nothing, as the gate does."""
    folder = _merge_save_folder(args, baselines_dir)
    try:
        merged = shards.merge([shards.read_shard(path) for path in args.shards])
    except shards.ShardError as exc:
        raise MergeConflict([f"merge: {line}" for line in exc.lines]) from None
    print(
        f"merged {len(args.shards)} shard(s): {len(merged.results)} benchmark result(s)"
        + (
            f", compared with baseline '{safe_text(merged.baseline_name)}' "
            f"({safe_text(merged.baseline_source or '')})"
            if merged.baseline_name is not None
            else ""
        )
    )
    baseline = (
        None
        if merged.baseline_name is None
        else BaselineSet(
            merged.baseline_name, merged.baseline_source or "", merged.baseline_entries or {}
        )
    )
    _print_table(merged.results, merged.verdicts, baseline)
    notes = publish.write_reports(
        publish.RunOutcome(
            merged.results,
            merged.verdicts,
            baseline_entries=merged.baseline_entries,
            baseline_name=merged.baseline_name,
            baseline_source=merged.baseline_source,
            failed_tests=merged.failed_tests,
        ),
        publish.ReportTargets(
            args.markdown, args.html, markdown.step_summary_path(), option_prefix="--"
        ),
    )
    measured = [r for r in merged.results if r.metrics]
    if folder is not None and measured:
        try:
            save_set(folder, measured, stamp=save_stamp(folder))
            notes.append(f"saved {len(measured)} benchmark result(s) to {folder}")
        except (BaselineError, OSError) as exc:
            notes.append(f"ERROR: baselines not written: {exc}")
    notes.append(_write_merged_json(args, merged))
    for note in notes:
        print(
            f"torchbench: {safe_text(note)}",
            file=sys.stderr if note.startswith("ERROR") else sys.stdout,
        )
    return _merge_exit(args, merged, written=not any(n.startswith("ERROR") for n in notes))


def _merge_save_folder(args: argparse.Namespace, baselines_dir: Path) -> Path | None:
    """The folder ``--save``/``--save-dir`` name, checked before any shard is read (a usage error
    then costs nothing); None when neither was given."""
    if args.save is None and args.save_dir is None:
        return None
    try:
        if args.save is not None:
            validate_set_name(args.save, "--save")
        folder: Path = (
            args.save_dir.absolute() if args.save_dir is not None else baselines_dir / args.save
        )
        check_save_folder(folder, "--save-dir" if args.save_dir is not None else "--save")
    except BaselineError as exc:
        raise UsageError(str(exc)) from None
    return folder


def _write_merged_json(args: argparse.Namespace, merged: shards.Merged) -> str:
    """Write OUT.json; the note saying so, or its ERROR line."""
    try:
        jsonreport.write(
            args.out,
            merged.results,
            merged.verdicts,
            {
                **merged.meta,
                "saved_as": args.save,
                "baseline_entries": {
                    k: e.to_json() for k, e in sorted((merged.baseline_entries or {}).items())
                }
                or None,
            },
        )
    except OSError as exc:
        return f"ERROR: OUT.json={args.out}: cannot write ({exc.strerror or exc})"
    return f"merged JSON written to {args.out}"


def _merge_exit(args: argparse.Namespace, merged: shards.Merged, *, written: bool) -> int:
    """The failed-tests line, then the exit status: a missing report first, as in ``compare``."""
    failed = [v for v in merged.verdicts if v.failed]
    if failed or merged.failed_tests:
        tests = count_tests(merged.results, merged.verdicts, merged.failed_tests)["failed"]
        print(
            f"torchbench: {tests} test(s) failed ({len(failed)} failing verdict(s), "
            f"{len(merged.failed_tests)} benchmark test(s) failed by pytest)"
        )
    if not written:
        return EXIT_USAGE
    if failed or merged.failed_tests:
        return EXIT_REGRESSION
    return _incomparable_exit(merged.verdicts, args.allow_incomparable, "merge")


def _history(args: argparse.Namespace, baselines_dir: Path) -> int:
    """``torchbench history``: the set as every commit that changed it saved it; steps beyond the
    limit, creep and environment breaks printed, and drawn or written where asked."""
    from .judging.history import series_of
    from .reports import history as report
    from .store.history import commits_of, snapshots

    try:
        validate_set_name(args.set, "history")
        check_report_paths({"--html": args.html, "--json": args.json, "--csv": args.csv})
        limits = parse_limits(args.fail, "--fail") if args.fail is not None else {}
        toplevel, commits = commits_of(baselines_dir, args.set, args.since)
    except (BaselineError, ReportPathError, LimitSpecError) as exc:
        raise UsageError(str(exc)) from None
    if not commits:
        raise UsageError(
            f"history: no commit changed {baselines_dir / args.set}: commit the set where it is "
            'saved (docs/ci.md, "Keeping the history")'
        )
    found, skipped = [], []
    for commit, entries, why in snapshots(baselines_dir, args.set, toplevel, commits):
        if entries is None:
            skipped.append(f"{commit.sha[:12]} skipped: {why}")
        else:
            found.append((commit, entries))
    keys = {key for _, entries in found for key in entries}
    if args.keyword:
        keys = {key for key in keys if _keyword_matches(args.keyword, key)}
    series = series_of(found, Policy(limits=limits), keys)
    for line in [*report.text_lines(series, args.set, len(commits)), *skipped]:
        print(safe_text(line))
    written = []
    for path, text in (
        (args.html, lambda: report.to_html(series, args.set, len(commits), skipped)),
        (args.json, lambda: report.to_json(series, args.set, skipped)),
        (args.csv, lambda: report.to_csv(series)),
    ):
        if path is not None:
            try:
                path.write_text(text(), encoding="utf-8")
                written.append(str(path))
            except OSError as exc:
                print(
                    f"torchbench: ERROR: {path}: cannot write ({exc.strerror or exc})",
                    file=sys.stderr,
                )
                return EXIT_USAGE
    if written:
        print(f"torchbench: written: {', '.join(written)}")
    return EXIT_OK


def _bisect(args: argparse.Namespace) -> int:
    """``torchbench bisect``: 0 when each regression between GOOD and BAD was traced to a commit,
    1 when nothing regressed between them (nothing to find), 4 on bad input or a failed
    measurement."""
    from . import bisect

    try:
        limits = parse_limits(args.fail, "--fail") if args.fail is not None else {}
        modes = tuple(m for m in args.modes.split(",") if m)
        unknown = [m for m in modes if not registry.known(m)]
        if unknown or not modes:
            raise UsageError(
                f"bisect: --bench-mode={args.modes}: unknown mode(s) "
                f"{', '.join(unknown) or '(none)'} (known: {', '.join(registry.names())})"
            )
        found = bisect.bisect(
            args.good,
            args.bad,
            modes,
            args.pytest_args,
            Policy(limits=limits),
            lambda line: print(line, flush=True),
            args.prepare,
        )
    except (LimitSpecError, BaselineError) as exc:
        raise UsageError(str(exc)) from None
    bisect.report(found, print)
    if found.unchanged and found.unjudged:
        return EXIT_INCOMPARABLE  # could not judge: never read as "nothing regressed"
    return EXIT_REGRESSION if found.unchanged else EXIT_OK


def _comment(args: argparse.Namespace) -> int:
    """``torchbench comment``: 0 when the comment was created or updated, 4 otherwise (one line)."""
    import os

    from .comment import CommentError, post, target_from

    try:
        summary = args.summary.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"comment: cannot read {args.summary}: {exc}") from None
    try:
        done = post(summary, target_from(os.environ, args.pr))
    except CommentError as exc:
        raise UsageError(str(exc)) from None
    print(f"torchbench: {done}")
    return EXIT_OK


def _keyword_matches(expression: str, key: str) -> bool:
    """pytest's ``-k``: names are substrings of the benchmark's id (case-insensitive)."""
    from .common.compat import keyword_matcher

    try:
        return keyword_matcher(expression)(key)
    except ValueError as exc:
        raise UsageError(f"history: -k {expression!r}: {exc}") from None


class MergeConflict(UsageError):
    """Shards that are not parts of one run: one line per conflict, exit 4."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``torchbench`` script and ``python -m pytest_torchbench``."""
    try:
        return run(argv)
    except MergeConflict as exc:
        for line in exc.lines:
            print(f"torchbench: error: {line}", file=sys.stderr)  # escaped where made
        return EXIT_USAGE
    except UsageError as exc:
        print(f"torchbench: error: {safe_text(exc)}", file=sys.stderr)  # may quote a user's module
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
