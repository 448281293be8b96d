"""The gate in CI (issue 25): nothing passes silently, reports agree with pytest, and a base
measured in the same job from a git revision.

Real pytest runs of a real project in a real git repository (two commits, a regression between
them: one more aten op per call), in ops mode (cheap and exact). The project's code is a package
beside its tests, imported from the checkout as a user's would be; the environment fact that makes
committed baselines "not comparable" is a user fact (``RUNNER``) from the project's conftest, as a
team would add its CI image's name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

LIB_BEFORE = "import torch\n\n\ndef work():\n    return torch.ones(4) + 1\n"
LIB_AFTER = "import torch\n\n\ndef work():\n    return (torch.ones(4) + 1).clone()\n"
TEST = (
    "import pytest\nimport mylib\n\n\n@pytest.mark.benchmark\ndef test_work():\n    mylib.work()\n"
)
CONFTEST = """
import os


def pytest_torchbench_environment(config):
    return {"runner": os.environ.get("RUNNER", "local")}
"""
KEY = "test_work.py::test_work"
EXIT_INCOMPARABLE = 6


@pytest.fixture
def project(
    pytester: pytest.Pytester, git: Callable[..., str], run_bench, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., None]:  # type: ignore[no-untyped-def]
    """``project(save_before=True)``: commit the project as it was (with baselines saved on the
    'laptop' runner when ``save_before``), then the regression; this run is on runner 'ci'."""

    def make(save_before: bool = True, conftest: str = CONFTEST, prefix: str = "") -> None:
        root = pytester.path
        (root / "mylib").mkdir()
        (root / "mylib/__init__.py").write_text(prefix + LIB_BEFORE)
        (root / "test_work.py").write_text(TEST)
        (root / "conftest.py").write_text(conftest)
        (root / ".gitignore").write_text(
            ".torchbench/\n__pycache__/\n_built.py\n*.json\n!baselines/**/*.json\n"
        )
        git(root, "init", "-q", "-b", "main")
        if save_before:
            monkeypatch.setenv("RUNNER", "laptop")
            result = run_bench("--bench-mode=ops", "--bench-save=main")
            assert result.ret == 0, result.stdout.str()
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "before")
        (root / "mylib/__init__.py").write_text(prefix + LIB_AFTER)
        git(root, "commit", "-q", "-am", "after: one more op per call")
        monkeypatch.setenv("RUNNER", "ci")

    return make


def _json(pytester: pytest.Pytester, name: str = "out.json") -> dict:  # type: ignore[type-arg]
    return json.loads((pytester.path / name).read_text(encoding="utf-8"))


# -- nothing passes silently ----------------------------------------------------------------------


def test_not_comparable_fails_in_ci_warns_locally_and_can_be_accepted(
    pytester: pytest.Pytester, run_bench, project, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Committed baselines from another runner and nothing measured in their place: one block
    naming the benchmark and the fact; exit 6 in CI, 0 locally with a warning, 0 when accepted."""
    project()
    stored = ("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base=stored")
    local = run_bench(*stored)
    assert local.ret == 0, local.stdout.str()
    local.stdout.fnmatch_lines(
        [
            "torchbench: 1 benchmark(s) were compared with nothing*",
            f"torchbench:   {KEY} [[]ops[]]: user.runner: laptop -> ci",
            "torchbench: WARNING: these were not gated*",
        ]
    )
    monkeypatch.setenv("CI", "true")
    in_ci = run_bench(*stored)
    assert in_ci.ret == EXIT_INCOMPARABLE, in_ci.stdout.str()
    in_ci.stdout.fnmatch_lines(
        [
            f"torchbench:   {KEY} [[]ops[]]: user.runner: laptop -> ci",
            "torchbench: ERROR: in CI this fails the run (exit 6)*--bench-allow-incomparable",
        ]
    )
    accepted = run_bench(*stored, "--bench-allow-incomparable")
    assert accepted.ret == 0, accepted.stdout.str()
    accepted.stdout.fnmatch_lines(["*accepted by --bench-allow-incomparable*"])
    monkeypatch.setenv("CI", "false")  # set by hand to say "not CI"
    assert run_bench(*stored).ret == 0


def test_saved_set_from_another_environment_fails_in_ci(
    pytester: pytest.Pytester, run_bench, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Outside git too (a saved set name): the README's job on another Python or torch build."""
    pytester.makepyfile(
        test_a="import pytest, torch\n\n@pytest.mark.benchmark\n"
        "def test_add():\n    torch.ones(4) + 1\n"
    )
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("RUNNER", "laptop")
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    monkeypatch.setenv("RUNNER", "ci")
    monkeypatch.setenv("CI", "1")
    result = run_bench("--bench-mode=ops", "--bench-compare=main")
    assert result.ret == EXIT_INCOMPARABLE, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_a.py::test_add [[]ops[]]: user.runner: laptop -> ci"])


# -- reports agree with pytest --------------------------------------------------------------------

FAILING = """
import pytest, torch

@pytest.mark.benchmark
def test_good():
    torch.ones(4) + 1

@pytest.fixture
def broken():
    raise RuntimeError("no data")

def test_setup_error(benchmark, broken):
    benchmark(lambda: torch.ones(4))

@pytest.mark.benchmark
def test_fails_first():
    assert torch.ones(1).item() == 2.0
"""


def test_reports_count_tests_that_failed_before_measuring(
    pytester: pytest.Pytester, run_bench
) -> None:  # type: ignore[no-untyped-def]
    """Markdown and HTML said "passed" while pytest exited 1: a benchmark that failed or errored
    before measuring counts as failed, and is named."""
    pytester.makepyfile(test_a=FAILING)
    assert run_bench("--bench-mode=ops", "--bench-save=main", "-k", "good").ret == 0
    result = run_bench(
        "--bench-mode=ops",
        "--bench-compare=main",
        "--bench-markdown=s.md",
        "--bench-html=r.html",
        "--bench-json=out.json",
    )
    assert result.ret == 1, result.stdout.str()
    summary = (pytester.path / "s.md").read_text(encoding="utf-8")
    headline = summary.splitlines()[2]
    assert headline.startswith(":x: **failed**: 3 test(s)"), summary
    assert "2 failed before measuring" in headline and "2 test(s) failed" in headline, headline
    assert (
        "- :x: test\\_a.py::test\\_fails\\_first" in summary
        and "test\\_a.py::test\\_setup\\_error" in summary
    )
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert ">2 failed</span>" in page and "2 benchmark test(s) failed before measuring" in page
    assert _json(pytester)["failed_tests"] == [
        "test_a.py::test_fails_first",
        "test_a.py::test_setup_error",
    ]


# -- a base measured in the same job ---------------------------------------------------------------


def test_not_comparable_base_is_measured_and_the_regression_caught(
    pytester: pytest.Pytester, run_bench, project, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The committed baselines come from the laptop: REV is measured here (a worktree, the same
    selection), the extra op is caught, and every report says where the baseline came from.
    A second run takes the base from the cache."""
    project()
    monkeypatch.setenv("CI", "true")
    result = run_bench(
        "--bench-mode=ops",
        "--bench-compare=HEAD~1",
        "--bench-json=out.json",
        "--bench-markdown=s.md",
    )
    assert result.ret == 1, result.stdout.str()
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["*aten::clone*", "*1 failed*"])
    assert "compared with nothing" not in out
    assert "measured in this job in" in out, out
    # and it says why it did not use what is committed (issue 48 item 4)
    result.stdout.fnmatch_lines(
        [
            "torchbench: the base HEAD~1 (*): measuring it in a temporary git worktree (or taking "
            "it from the cache); because the committed ops baselines are not comparable "
            "(user.runner: laptop -> ci)",
            "torchbench: the base HEAD~1 (*): measured in this job in *; because the committed "
            "ops baselines are not comparable (user.runner: laptop -> ci)",
        ]
    )
    head = pytester.run("git", "rev-parse", "HEAD~1").stdout.str().strip()
    document = _json(pytester)
    assert document["baseline_origins"] == {KEY: f"measured from HEAD~1 ({head[:12]}) in this job"}
    assert f"1 measured from HEAD~1 ({head[:12]}) in this job" in document["compared_with"]
    assert "1 measured from HEAD\\~1" in (pytester.path / "s.md").read_text(
        encoding="utf-8"
    )  # Markdown-escaped
    assert not (
        pytester.path / "baselines/base"
    ).exists()  # nothing of the base run lands in the project
    worktrees = pytester.run("git", "worktree", "list").stdout.str().strip().splitlines()
    assert len(worktrees) == 1, worktrees  # the temporary worktree is gone

    again = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-json=out.json")
    assert again.ret == 1, again.stdout.str()
    assert "taken from the cache" in again.stdout.str()
    assert _json(pytester)["baseline_origins"] == {
        KEY: f"cached measurement of HEAD~1 ({head[:12]})"
    }
    # Another environment is another cache entry: measured again, never served from the cache.
    monkeypatch.setenv("RUNNER", "ci-2")
    other = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1")
    assert other.ret == 1 and "measured in this job in" in other.stdout.str(), other.stdout.str()


LOCKING_CONFTEST = (
    CONFTEST
    + """
import fcntl

import pytest


@pytest.fixture(scope="session", autouse=True)
def exclusive_resource():
    # as a fixed port or a lock file would: one session at a time holds it
    with open(LOCK_PATH, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
"""
)


def test_a_benchmark_that_failed_in_the_base_run_is_not_passed_as_new(
    pytester: pytest.Pytester,
    run_bench,
    project,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:  # type: ignore[no-untyped-def]
    """A session fixture that only one session can hold (a lock, a fixed port) makes the base run,
    started while this session holds it, fail the benchmark at REV: that is no new benchmark but
    one the gate could not judge. It is named with the error; CI exits 6; nothing is cached."""
    lock = tmp_path_factory.mktemp("lock") / "resource.lock"
    project(save_before=False, conftest=LOCKING_CONFTEST.replace("LOCK_PATH", repr(str(lock))))
    monkeypatch.setenv("CI", "true")
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-json=out.json")
    out = result.stdout.str()
    assert result.ret == EXIT_INCOMPARABLE, out
    result.stdout.fnmatch_lines(
        [
            "torchbench: 1 benchmark(s) were compared with nothing*",
            f"torchbench:   {KEY} [[]ops[]]: the base run of HEAD~1 (*) measured nothing for it: "
            "failed: *BlockingIOError*; whole output in *base-*-output.txt",
            "torchbench: ERROR: in CI this fails the run (exit 6); "
            "the base runs while this session runs: where "
            "the error is a port or a lock *",
            "torchbench: the base HEAD~1 (*): measured in this job in *, not cached: "
            "1 of its tests failed*",
        ]
    )
    verdicts = {(v["key"], v["metric"]): v for v in _json(pytester)["verdicts"]}
    assert verdicts[(KEY, "ops")]["status"] == "not comparable", verdicts
    assert "BlockingIOError" in verdicts[(KEY, "ops")]["summary"]
    accepted = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-allow-incomparable")
    assert accepted.ret == 0, accepted.stdout.str()
    # This session no longer holds the lock (the checkout's fixture is not autouse): the base is
    # measured again, not served from the cache, and the extra op fails.
    plain = LOCKING_CONFTEST.replace("LOCK_PATH", repr(str(lock))).replace(
        "autouse=True", "autouse=False"
    )
    (pytester.path / "conftest.py").write_text(plain)
    freed = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1")
    assert freed.ret == 1, freed.stdout.str()
    freed.stdout.fnmatch_lines(["*aten::clone*", "*measured in this job in *, cached in*"])


def test_a_metric_the_committed_entry_lacks_is_not_new_when_the_base_run_failed(
    pytester: pytest.Pytester,
    run_bench,
    project,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:  # type: ignore[no-untyped-def]
    """--bench-base=auto: the committed entry has ops, this run also wants calls, so REV is
    measured, and the benchmark fails there. ops is judged against the committed entry (the extra
    op fails); calls is not passed as new."""
    lock = tmp_path_factory.mktemp("lock") / "resource.lock"
    project(conftest=LOCKING_CONFTEST.replace("LOCK_PATH", repr(str(lock))))
    monkeypatch.setenv("RUNNER", "laptop")  # the committed ops entry is comparable
    result = run_bench("--bench-mode=ops,calls", "--bench-compare=HEAD~1")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*aten::clone*",
            f"torchbench:   {KEY} [[]calls[]]: the base run of HEAD~1 (*) measured nothing for it: "
            "failed: *BlockingIOError*",
        ]
    )


def _fixed_at_head(
    root: Path, git: Callable[..., str], files: dict[str, str], lib_after: str
) -> None:
    """Commit REV (mylib without ``FIXED``, ``files`` beside it, among them a benchmark skipped
    until the fix), then HEAD with ``mylib`` = ``FIXED = True`` + ``lib_after``."""
    (root / "mylib").mkdir()
    (root / "mylib/__init__.py").write_text(LIB_BEFORE)
    for name, text in {**files, "test_b_skip.py": SKIPPED_UNTIL_FIXED}.items():
        (root / name).write_text(text)
    (root / ".gitignore").write_text(".torchbench/\n__pycache__/\n*.json\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "before")
    (root / "mylib/__init__.py").write_text("FIXED = True\n" + lib_after)
    git(root, "commit", "-q", "-am", "after: fixed")


SKIPPED_UNTIL_FIXED = (
    "import pytest, torch\nimport mylib\n\n\n@pytest.mark.benchmark\ndef test_later():\n"
    "    if not getattr(mylib, 'FIXED', False):\n        pytest.skip('the service is not up')\n"
    "    torch.ones(2) * 2\n"
)


def test_a_failure_before_the_benchmarks_at_rev_stops_nothing_and_a_skip_there_is_not_new(
    pytester: pytest.Pytester, run_bench, git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The user's ``-x`` reaches the base run, where a plain test fails before the benchmarks (the
    pull request fixes it): the base run still measures them, so the extra op fails. A benchmark
    skipped at REV (a fixture's ``pytest.skip``) and run here is not passed as new."""
    _fixed_at_head(
        pytester.path,
        git,
        {
            "test_a_plain.py": "import mylib\n\n\n"
            "def test_fixed():\n    assert getattr(mylib, 'FIXED', False)\n",
            "test_work.py": TEST,
        },
        LIB_AFTER,
    )  # fixed, and one more op per call
    monkeypatch.setenv("CI", "true")
    result = run_bench("-x", "--bench-mode=ops", "--bench-compare=HEAD~1")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*aten::clone*",
            "torchbench: 1 benchmark(s) were compared with nothing: "
            "their test is at the base revision but failed, "
            "was skipped or did not run in the base run:",
            "torchbench:   test_b_skip.py::test_later [[]ops[]]: "
            "the base run of HEAD~1 (*) measured nothing for it: "
            "skipped: Skipped: the service is not up; whole output in *",
        ]
    )


def test_a_benchmark_skipped_at_rev_stays_unjudged_when_the_base_comes_from_the_cache(
    pytester: pytest.Pytester, run_bench, git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A skip is no transient failure: the base is cached, with the skip's reason, and a run served
    from the cache still names the benchmark as not judged. An xfail says so."""
    _fixed_at_head(
        pytester.path,
        git,
        {
            "test_work.py": TEST
            + "\n\n@pytest.mark.benchmark\n@pytest.mark.xfail(not hasattr(mylib, 'FIXED'), "
            "reason='needs the fix', strict=True)\ndef test_fixed():\n"
            "    assert mylib.FIXED\n    mylib.work()\n"
        },
        LIB_BEFORE,
    )
    monkeypatch.setenv("CI", "true")
    lines = [
        "torchbench:   test_b_skip.py::test_later [[]ops[]]: "
        "the base run of HEAD~1 (*) measured nothing "
        "for it: skipped: Skipped: the service is not up*",
        "torchbench:   test_work.py::test_fixed [[]ops[]]: "
        "the base run of HEAD~1 (*) measured nothing "
        "for it: skipped: expected to fail: needs the fix*",
    ]
    first = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1")
    assert first.ret == EXIT_INCOMPARABLE, first.stdout.str()
    first.stdout.fnmatch_lines([*lines, "*measured in this job in *, cached in *"])
    again = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1")
    assert again.ret == EXIT_INCOMPARABLE, again.stdout.str()
    again.stdout.fnmatch_lines([*lines, "*taken from the cache*"])


def test_the_cache_plugins_options_in_addopts_do_not_stop_the_base_run(
    pytester: pytest.Pytester, run_bench, project, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The base run starts without the cache plugin; a user's PYTEST_ADDOPTS or ini addopts with
    its options (--ff, --lfnf) reached it anyway and it refused them (exit 4 for the whole run)."""
    project(save_before=False)
    (pytester.path / "pytest.ini").write_text("[pytest]\naddopts = --lfnf=all\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--ff")
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1")
    assert result.ret == 1, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*aten::clone*"])


def test_comparable_committed_baselines_are_used_as_they_are(
    pytester: pytest.Pytester, run_bench, project, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A benchmark that passes against its committed entry is judged on it: nothing measured.
    One that regresses is judged again against REV measured here, which confirms a real one."""
    project()
    monkeypatch.setenv("RUNNER", "laptop")
    (pytester.path / "mylib/__init__.py").write_text(LIB_BEFORE)  # this checkout: as REV
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-json=out.json")
    assert result.ret == 0, result.stdout.str()
    assert "temporary git worktree" not in result.stdout.str()
    rev = pytester.run("git", "rev-parse", "HEAD~1").stdout.str().strip()
    assert _json(pytester)["baseline_origins"] == {KEY: f"committed at HEAD~1 ({rev[:12]})"}

    (pytester.path / "mylib/__init__.py").write_text(LIB_AFTER)  # one more op per call
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-json=out.json")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "torchbench: the base HEAD~1 (*): measuring it in a temporary git worktree (or taking "
            f"it from the cache); because {KEY} failed against its committed baseline, which "
            "may predate the code of HEAD~1 (*)",
            "*aten::clone*",
        ]
    )
    assert _json(pytester)["baseline_origins"] == {
        KEY: f"measured from HEAD~1 ({rev[:12]}) in this job"
    }


def test_an_accepted_or_unmeasurable_recheck_keeps_the_committed_verdict(
    pytester: pytest.Pytester, run_bench, project, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A regression the run accepts is not measured again (nothing to gain); where REV cannot be
    measured, the verdict against the committed entry stands (exit 1, not a usage error) and a
    note says why."""
    project()
    monkeypatch.setenv("RUNNER", "laptop")
    accepted = run_bench(
        "--bench-mode=ops",
        "--bench-compare=HEAD~1",
        f"--bench-accept={KEY} ops -- the clone is needed",
    )
    assert accepted.ret == 0, accepted.stdout.str()
    assert "temporary git worktree" not in accepted.stdout.str()

    unmeasurable = run_bench(
        "--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base-prepare=exit 3"
    )
    assert unmeasurable.ret == 1, unmeasurable.stdout.str() + unmeasurable.stderr.str()
    unmeasurable.stdout.fnmatch_lines(
        [
            "*the base HEAD~1 (*) could not be measured here to judge again what failed against "
            "its committed baselines, so those stand: *--bench-base-prepare='exit 3' failed*",
        ]
    )
    unmeasurable.stdout.fnmatch_lines(["*1 failed*"])


def test_a_stale_improvement_is_judged_again_with_fail_stale(
    pytester: pytest.Pytester, run_bench, project, git, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """REV dropped the clone and its set was not re-recorded: with --bench-fail-stale this
    checkout, which is REV, "improved" against the committed set; judged against REV measured
    here it is unchanged (exit 0), where the committed set alone fails it."""
    project()
    monkeypatch.setenv("RUNNER", "laptop")
    root = pytester.path
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0  # with the clone
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "record baselines")
    (root / "mylib/__init__.py").write_text(LIB_BEFORE)
    git(root, "commit", "-q", "-am", "drop the clone; not re-recorded")
    stale = ("--bench-mode=ops", "--bench-compare=HEAD", "--bench-fail-stale")
    stored = run_bench(*stale, "--bench-base=stored")
    assert stored.ret == 1, stored.stdout.str()
    result = run_bench(*stale)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"*{KEY}: judged against HEAD (*) measured here*"])


def test_a_set_recorded_before_revs_last_change_fails_no_pull_request(
    pytester: pytest.Pytester, run_bench, project, git, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """main's last commit added an op and its record job has not committed the new set yet: a
    pull request branched there that changes only its README regressed against the committed
    set, but not against main's code, measured here (exit 0 in CI); one that adds an op more
    still fails, against main as measured."""
    project()
    monkeypatch.setenv("RUNNER", "laptop")
    monkeypatch.setenv("CI", "true")
    root = pytester.path
    git(root, "checkout", "-q", "-b", "pr")
    (root / "README.md").write_text("docs only\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "docs only")
    main = pytester.run("git", "rev-parse", "main").stdout.str().strip()  # as CI's merge base
    result = run_bench("--bench-mode=ops", f"--bench-compare={main}", "--bench-json=out.json")
    assert result.ret == 0, result.stdout.str()
    assert "failed against its committed baseline" in result.stdout.str()
    document = _json(pytester)
    assert document["baseline_origins"] == {KEY: f"measured from {main[:12]} in this job"}
    assert [v["status"] for v in document["verdicts"]] == ["unchanged"]

    (root / "mylib/__init__.py").write_text(
        LIB_AFTER.replace(".clone()", ".clone().clone()")
    )  # one more op than main
    result = run_bench("--bench-mode=ops", f"--bench-compare={main}")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*aten::clone 1 -> 2 per call*"])


def test_missing_base_is_measured_with_a_build_step(
    pytester: pytest.Pytester, run_bench, project
) -> None:  # type: ignore[no-untyped-def]
    """No baselines committed at REV: measured. The project needs a build step (a generated,
    untracked module, as a compiled extension would be): --bench-base-prepare runs it in REV's
    worktree first; without it, or when it fails, the base cannot be measured: one line, exit 4."""
    build = "python -c \"open('mylib/_built.py', 'w').write('BUILT = 1')\""
    project(save_before=False, prefix="from . import _built  # noqa: F401\n")
    assert pytester.run("sh", "-c", build).ret == 0  # the checkout is built
    failing = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base-prepare=exit 3")
    assert failing.ret == 4, failing.stdout.str()
    failing.stderr.fnmatch_lines(
        [
            "ERROR: --bench-compare=HEAD~1: --bench-base-prepare='exit 3' failed in the "
            "worktree of * (exit 3)*"
        ]
    )
    unbuilt = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1")
    assert unbuilt.ret == 4, unbuilt.stdout.str()
    unbuilt.stderr.fnmatch_lines(
        [
            "ERROR: --bench-compare=HEAD~1: the base run of * failed (exit 2): "
            "ImportError: cannot import name '_built'*; whole output in *last-failure.txt"
        ]
    )
    result = run_bench(
        "--bench-mode=ops",
        "--bench-compare=HEAD~1",
        f"--bench-base-prepare={build}",
        "--bench-json=out.json",
    )
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*aten::clone*"])
    assert "measured from HEAD~1" in _json(pytester)["baseline_origins"][KEY]


REDIRECTING_CONFTEST = (
    CONFTEST
    + """
import sys
sys.path.insert(0, CHECKOUT)  # as an editable install or a sitecustomize might
import mylib
"""
)


def test_a_base_imported_from_the_checkout_is_refused(
    pytester: pytest.Pytester, run_bench, project
) -> None:  # type: ignore[no-untyped-def]
    """The base run must measure REV's code: a project whose imports resolve to the checkout
    (here a conftest that puts it first on sys.path) is refused with one line naming the module."""
    project(
        save_before=False,
        conftest=REDIRECTING_CONFTEST.replace("CHECKOUT", repr(str(pytester.path))),
    )
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base=measure")
    assert result.ret == 4, result.stdout.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr.str()
    assert (
        f"imported mylib from {pytester.path / 'mylib' / '__init__.py'}, not from the worktree"
        in errors[0]
    )


def test_measure_needs_a_revision(pytester: pytest.Pytester, run_bench) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(
        test_a="import pytest, torch\n\n@pytest.mark.benchmark\n"
        "def test_add():\n    torch.ones(4) + 1\n"
    )
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-base=measure")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: --bench-base=measure: --bench-compare=main is not a git revision*"]
    )
    assert run_bench("--bench-mode=ops", "--bench-base=auto").ret == 4


@pytest.mark.slow
def test_under_xdist_the_measured_base_also_explains_the_regression(
    pytester: pytest.Pytester, run_bench, project
) -> None:  # type: ignore[no-untyped-def]
    """Under xdist the controller judges, and explains a failure by re-running the test at the end:
    that re-run judges against the measured base too (its folder), so the call sites are found,
    and the line the change edited is tagged (the revision is handed to the re-run)."""
    project()
    result = run_bench("-p", "xdist", "-n", "2", "--bench-mode=ops", "--bench-compare=HEAD~1")
    assert result.ret == 1, result.stdout.str()
    assert (
        "aten::clone 0 -> 1 per call (mylib/__init__.py:5 in work [changed since HEAD~1])"
        in result.stdout.str()
    )
    assert "compared with nothing" not in result.stdout.str()
