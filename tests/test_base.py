"""The pieces of a measured base (base.py) that the end-to-end tests (tests/e2e/test_gate_ci.py)
cannot vary cheaply: which imports are refused, what the child run is given, what the cache key
depends on."""

from __future__ import annotations

from pathlib import Path

from pytest_torchbench.pytest.base import cache_key, project_packages, selection_args, wrong_import
from pytest_torchbench.store.refs import Revision


def _tree(root: Path, *files: str) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


def test_project_packages_flat_and_src_layouts(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        "flat/__init__.py",
        "src/srcpkg/__init__.py",
        "src/single.py",
        "setup.py",
        "notes/readme.txt",
        "tests/__init__.py",
    )
    assert project_packages(tmp_path) == {"flat", "srcpkg", "single", "tests"}


def test_imports_from_the_checkout_or_an_installed_copy_are_refused(tmp_path: Path) -> None:
    worktree, checkout, site = tmp_path / "wt", tmp_path / "checkout", tmp_path / "site-packages"
    _tree(worktree, "src/mylib/__init__.py", "src/mylib/core.py", "conftest.py")
    _tree(checkout, "src/mylib/__init__.py", "helpers.py")
    _tree(site, "mylib/__init__.py", "numpy/__init__.py")
    good = {
        "mylib": str(worktree / "src/mylib/__init__.py"),
        "mylib.core": str(worktree / "src/mylib/core.py"),
        "conftest": str(worktree / "conftest.py"),
        "numpy": str(site / "numpy/__init__.py"),
        "torch.classes": "_classes.py",
    }
    assert wrong_import(good, worktree, checkout) is None
    editable = {**good, "mylib.core": str(checkout / "src/mylib/core.py")}
    assert wrong_import(editable, worktree, checkout) == (
        "mylib.core",
        str(checkout / "src/mylib/core.py"),
    )
    installed = {**good, "mylib": str(site / "mylib/__init__.py")}
    assert wrong_import(installed, worktree, checkout) == ("mylib", str(site / "mylib/__init__.py"))
    helper = {
        **good,
        "helpers": str(checkout / "helpers.py"),
    }  # not a package, but the checkout's code
    assert wrong_import(helper, worktree, checkout) == ("helpers", str(checkout / "helpers.py"))


def test_imports_are_judged_by_their_real_paths(tmp_path: Path) -> None:
    """A module's file is judged where it really lies: through a linked folder, a linked file, or
    a ``..`` after a linked folder (each folder is resolved once, so each of these must still
    resolve)."""
    worktree, checkout = tmp_path / "wt", tmp_path / "checkout"
    _tree(worktree, "src/mylib/__init__.py")
    _tree(checkout, "helpers.py", "other/x.py")
    (tmp_path / "to-checkout").symlink_to(checkout)
    (tmp_path / "to-worktree").symlink_to(worktree)
    (worktree / "linked.py").symlink_to(checkout / "helpers.py")
    through_folder = str(tmp_path / "to-checkout" / "helpers.py")
    assert wrong_import({"helpers": through_folder}, worktree, checkout) == (
        "helpers",
        through_folder,
    )
    linked_file = str(worktree / "linked.py")
    assert wrong_import({"linked": linked_file}, worktree, checkout) == ("linked", linked_file)
    up = str(tmp_path / "to-worktree" / ".." / "checkout" / "other" / "x.py")
    assert wrong_import({"x": up}, worktree, checkout) == ("x", up)
    mine = str(tmp_path / "to-worktree" / "src" / "mylib" / "__init__.py")
    assert wrong_import({"mylib": mine}, worktree, checkout) is None


def test_the_base_run_keeps_the_selection_and_drops_what_writes() -> None:
    args = [
        "tests/test_a.py",
        "-k",
        "add and not slow",
        "-m",
        "benchmark",
        "--bench-mode=ops",
        "--bench-compare",
        "HEAD~1",
        "--bench-json=out.json",
        "--bench-markdown",
        "s.md",
        "--bench-html=r.html",
        "--junitxml=j.xml",
        "--bench-save=main",
        "--bench-output=out",
        "--bench-base=measure",
        "--bench-base-prepare",
        "make",
        "--bench-allow-incomparable",
        "--bench-rounds",
        "4",
        "--lf",
        "-n",
        "2",
    ]
    options, paths = selection_args(args, ["tests/test_a.py"])
    assert options == ["-k", "add and not slow", "-m", "benchmark", "--bench-mode=ops", "-n", "2"]
    assert paths == ["tests/test_a.py"]


def test_the_cache_key_changes_with_everything_a_base_depends_on(tmp_path: Path) -> None:
    revision = Revision("main", "main", None, "a" * 40, tmp_path)
    key = cache_key(revision, {"ops.torch": "2.13"}, ["ops"], ["-k", "x"], [], ".", None)
    assert key == cache_key(revision, {"ops.torch": "2.13"}, ["ops"], ["-k", "x"], [], ".", None)
    others = [
        cache_key(
            Revision("main", "main", None, "b" * 40, tmp_path),
            {"ops.torch": "2.13"},
            ["ops"],
            ["-k", "x"],
            [],
            ".",
            None,
        ),
        cache_key(revision, {"ops.torch": "2.14"}, ["ops"], ["-k", "x"], [], ".", None),
        cache_key(revision, {"ops.torch": "2.13"}, ["ops", "time"], ["-k", "x"], [], ".", None),
        cache_key(revision, {"ops.torch": "2.13"}, ["ops"], ["-k", "y"], [], ".", None),
        cache_key(revision, {"ops.torch": "2.13"}, ["ops"], ["-k", "x"], ["t.py"], ".", None),
        cache_key(revision, {"ops.torch": "2.13"}, ["ops"], ["-k", "x"], [], "sub", None),
        cache_key(revision, {"ops.torch": "2.13"}, ["ops"], ["-k", "x"], [], ".", "make"),
    ]
    assert len({key, *others}) == len(others) + 1


def test_alternated_rounds_pair_each_benchmark_in_round_order(tmp_path: Path) -> None:
    """MeasuredBase.pairs: (base, head) values of one benchmark and metric per round, in round
    order, leaving out rounds where either side did not measure it; the origin names the rounds."""
    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest.base import MeasuredBase
    from pytest_torchbench.store.storage import BaselineSet

    def one(seconds: float | None) -> BaselineSet:
        entries = {}
        if seconds is not None:
            entries["t.py::test_a"] = BenchmarkResult(
                "t.py::test_a", "t.py", "test_a", "", "", metrics={"time": TimeMetric(1, [seconds])}
            )
        return BaselineSet("base", "here", entries)

    revision = Revision("HEAD~1", "HEAD~1", None, "a" * 40, tmp_path)
    measured = MeasuredBase(
        revision,
        one(1.0),
        tmp_path,
        False,
        1.0,
        [(one(1.0), one(2.0)), (one(None), one(2.5)), (one(1.5), one(3.0))],
        3,
        3,
    )
    assert [(b.fastest, h.fastest) for b, h in measured.pairs("t.py::test_a", "time", 0)] == [
        (1.0, 2.0),
        (1.5, 3.0),
    ]
    assert measured.pairs("t.py::test_a", "time", 0).numbers == [1, 3]
    assert (
        measured.pairs("t.py::test_a", "ops", 0) == []
        and measured.pairs("t.py::test_b", "time", 0) == []
    )
    assert (
        measured.origin()
        == f"measured from HEAD~1 ({'a' * 12}) in this job alternately with this checkout, 3 rounds"
    )  # three first rounds, all three of every benchmark
    measured.first_rounds = measured.rounds_at_once = 2  # the third: what two did not decide
    assert measured.origin().endswith(
        "2 rounds (+1 for the benchmarks they found changed or could not decide)"
    )
    measured.first_rounds = measured.rounds_at_once = 1  # a pass of one, one of the undecided
    assert measured.origin().endswith(
        "1 rounds (+1 for the benchmarks they found changed or could not decide, "
        "+1 for those still undecided)"
    )
    measured.first_rounds, measured.rounds_at_once = 2, 1  # the second: not unchanged at once
    assert measured.origin().endswith(
        "1 rounds (+1 for the benchmarks they did not call unchanged at once, +1 for the "
        "benchmarks they found changed or could not decide)"
    )
    assert (
        MeasuredBase(revision, one(1.0), tmp_path, False, 1.0).origin()
        == f"measured from HEAD~1 ({'a' * 12}) in this job"
    )


def test_rounds_are_said_to_be_in_turns_only_where_their_measurements_took_turns(
    tmp_path: Path,
) -> None:
    """``MeasuredBase.in_turns`` reads what the children recorded (engines/duet.py), not what
    was asked: a round whose tests ran in xdist workers measured one side after the other."""
    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest.base import MeasuredBase
    from pytest_torchbench.store.storage import BaselineSet

    def one(turns: int | None) -> BaselineSet:
        metric = TimeMetric(1, [1e-3], turns=turns)
        return BaselineSet(
            "base",
            "here",
            {
                "t.py::test_a": BenchmarkResult(
                    "t.py::test_a", "t.py", "test_a", "", "", metrics={"time": metric}
                )
            },
        )

    revision = Revision("HEAD~1", "HEAD~1", None, "a" * 40, tmp_path)
    alone = MeasuredBase(
        revision, one(None), tmp_path, False, 1.0, [(one(None), one(None)), (one(0), one(0))], 2
    )
    assert not alone.in_turns
    assert MeasuredBase(
        revision, one(None), tmp_path, False, 1.0, [(one(None), one(None)), (one(4), one(5))], 2
    ).in_turns
    assert not MeasuredBase(revision, one(None), tmp_path, False, 1.0).in_turns  # one-shot


def test_the_extra_rounds_name_tests_relative_to_where_pytest_started(tmp_path: Path) -> None:
    """``BaselineSource.test_argument``: a test in the repository is named relative to the folder
    pytest was started in, both resolved (a rootdir reached through a symlink named the real
    folder's tests by a path the worktree does not have); a test outside the repository keeps
    its absolute path (it is not in the worktree either)."""
    from types import SimpleNamespace

    from pytest_torchbench.pytest.baseline_source import BaselineSource

    repo = tmp_path / "real" / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_a.py").write_text("")
    link = tmp_path / "link"
    link.symlink_to(repo)
    outside = tmp_path / "bench" / "test_b.py"
    outside.parent.mkdir()
    outside.write_text("")
    fake = SimpleNamespace(
        config=SimpleNamespace(invocation_params=SimpleNamespace(dir=repo / "tests")),
        revision=SimpleNamespace(toplevel=repo),
    )
    assert BaselineSource.test_argument(fake, link / "tests" / "test_a.py") == "test_a.py"  # type: ignore[arg-type]
    assert BaselineSource.test_argument(fake, repo / "tests" / "test_a.py") == "test_a.py"  # type: ignore[arg-type]
    assert BaselineSource.test_argument(fake, outside) == str(outside)  # type: ignore[arg-type]
    fake.config.invocation_params.dir = repo / "sub"
    assert BaselineSource.test_argument(fake, link / "tests" / "test_a.py") == "../tests/test_a.py"  # type: ignore[arg-type]


def test_each_pass_of_extra_rounds_takes_what_all_rounds_so_far_could_not_decide(
    tmp_path: Path,
) -> None:
    """``BaselineSource.undecided_tests``, the callback ``base.measure`` asks before each pass of
    extra rounds: after the first rounds, every benchmark they did not call unchanged with both
    views (a change too); after a pass, only benchmarks measured again that all their rounds,
    judged as the verdict will be, still leave undecided; never one the first rounds passed."""
    from types import SimpleNamespace

    from pytest_torchbench.common.vocabulary import Policy
    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest.baseline_source import BaselineSource
    from pytest_torchbench.store.storage import BaselineSet

    def side(**seconds: float) -> BaselineSet:
        return BaselineSet(
            "base",
            "here",
            {
                f"t.py::{name}": BenchmarkResult(
                    f"t.py::{name}",
                    "t.py",
                    name,
                    "",
                    "",
                    nodeid=f"t.py::{name}",
                    metrics={"time": TimeMetric(1, [value])},
                )
                for name, value in seconds.items()
            },
        )

    calm, slower, flipping = [(1.0, 1.0)] * 4, [(1.0, 2.0)] * 4, [(1.0, 2.0), (2.0, 1.0)] * 2
    # unchanged by the looser rule, not by the strict one (the pairs same, the sides undecided)
    gone = [(1.0, 1.3), (1.05, 1.0), (1.05, 1.0), (1.3, 1.6)]
    first = [
        (
            side(test_calm=c[0], test_slower=s[0], test_flip=f[0], test_gone=g[0]),
            side(test_calm=c[1], test_slower=s[1], test_flip=f[1], test_gone=g[1]),
        )
        for c, s, f, g in zip(calm, slower, flipping, gone)
    ]
    fake = SimpleNamespace(
        settings=SimpleNamespace(rounds=4, policy=Policy(), rootdir=tmp_path),
        again_passes={},
        test_argument=lambda path: path.relative_to(tmp_path).as_posix(),
    )
    undecided = BaselineSource.undecided_tests
    assert undecided(fake, first) == ["t.py::test_slower", "t.py::test_flip", "t.py::test_gone"]  # type: ignore[arg-type]
    # the first pass: the slowdown decided on eight rounds; the flipping one still undecided;
    # test_gone measured nothing there (its test failed), so its first rounds are still judged
    # strictly, as its verdict will be (``rounds_unfinished``), and it is taken again
    again = [
        (side(test_slower=s[0], test_flip=f[0]), side(test_slower=s[1], test_flip=f[1]))
        for s, f in zip(slower, flipping)
    ]
    assert undecided(fake, first + again) == ["t.py::test_flip", "t.py::test_gone"]  # type: ignore[arg-type]
    assert fake.again_passes == {"t.py::test_slower": 1, "t.py::test_flip": 2, "t.py::test_gone": 2}
    fake.again_passes.pop("t.py::test_gone")
    # a benchmark the first rounds passed is not taken again, whatever its rounds say
    fake.again_passes.pop("t.py::test_flip")
    assert undecided(fake, first + again) == []  # type: ignore[arg-type]


def test_in_turns_a_pass_of_extra_rounds_is_as_long_as_the_rounds_at_once(tmp_path: Path) -> None:
    """In turns a pass of extra rounds is as long as the rounds of the whole selection (2 of
    ``--bench-rounds=4``), and there are as many more passes as make the extra rounds four times
    the first rounds; one side after the other, a pass is all the first rounds, twice. The passes
    are counted the same way by the callback that picks their tests and by the rounds a verdict
    pairs."""
    from types import SimpleNamespace

    from pytest_torchbench.common.vocabulary import Policy
    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest import base
    from pytest_torchbench.pytest.baseline_source import BaselineSource
    from pytest_torchbench.store.storage import BaselineSet

    # in turns 16 extra rounds (4 x the first), in 8 passes of 2; apart 8, in 2 passes of 4
    assert [base.pass_rounds(4, True), base.extra_passes(4, True)] == [2, 8]
    assert [base.pass_rounds(4, False), base.extra_passes(4, False)] == [4, 2]
    assert [base.pass_rounds(2, True), base.extra_passes(2, True)] == [2, 4]

    def side(turns: int, **seconds: float) -> BaselineSet:
        return BaselineSet(
            "base",
            "here",
            {
                f"t.py::{name}": BenchmarkResult(
                    f"t.py::{name}", "t.py", name, "", "", nodeid=f"t.py::{name}",
                    metrics={"time": TimeMetric(1, [value], turns=turns)},
                )
                for name, value in seconds.items()
            },
        )  # fmt: skip

    def rounds(
        turns: int, flip: list[tuple[float, float]]
    ) -> list[tuple[BaselineSet, BaselineSet]]:
        return [(side(turns, test_flip=b), side(turns, test_flip=h)) for b, h in flip]

    flipping = [(1.0, 2.0), (2.0, 1.0)]
    fake = SimpleNamespace(
        settings=SimpleNamespace(rounds=4, policy=Policy(), rootdir=tmp_path),
        again_passes={},
        test_argument=lambda path: path.relative_to(tmp_path).as_posix(),
    )
    undecided = BaselineSource.undecided_tests
    first = rounds(5, flipping * 2)
    assert undecided(fake, first) == ["t.py::test_flip"]  # type: ignore[arg-type]
    # in turns, 2 rounds more are a whole pass: the flipping one, still undecided, goes on
    assert undecided(fake, first + rounds(5, flipping)) == ["t.py::test_flip"]  # type: ignore[arg-type]
    assert fake.again_passes == {"t.py::test_flip": 2}
    measured = base.MeasuredBase(
        Revision("HEAD~1", "HEAD~1", None, "a" * 40, tmp_path),
        first[0][0],
        tmp_path,
        False,
        1.0,
        first + rounds(5, flipping * 2),
        4,
        2,
    )
    assert measured.pass_size == 2 and measured.extra_rounds() == (2, 2)
    assert measured.pairs("t.py::test_flip", "time", 1).numbers == [1, 2, 3, 4, 5, 6]
    assert measured.origin().endswith(
        "2 rounds (+2 for the benchmarks they did not call unchanged at once, +2 for the "
        "benchmarks they found changed or could not decide, +2 for those still undecided)"
    )
    # one side after the other, the same 2 rounds more are half a pass: not counted as one yet
    fake.again_passes = {}
    apart = rounds(0, flipping * 2)
    assert undecided(fake, apart) == ["t.py::test_flip"]  # type: ignore[arg-type]
    assert undecided(fake, apart + rounds(0, flipping)) == []  # type: ignore[arg-type]
    measured.rounds = apart + rounds(0, flipping * 2)
    assert measured.pass_size == 4 and measured.extra_rounds() == (4, 0)
    # the first rounds size the passes: a pass that took turns where they did not (a CUDA test
    # earlier in their processes left them unpinned) does not resize the passes already measured
    fake.again_passes = {"t.py::test_flip": 1}
    assert undecided(fake, apart + rounds(5, flipping * 2)) == ["t.py::test_flip"]  # type: ignore[arg-type]
    measured.rounds = apart + rounds(5, flipping * 2)
    assert measured.pass_size == 4 and measured.pairs("t.py::test_flip", "time", 1).numbers == [
        *range(1, 9)
    ]


def test_the_first_rounds_are_completed_only_for_what_two_did_not_call_unchanged_at_once(
    tmp_path: Path,
) -> None:
    """``BaselineSource.undecided_tests(rounds, at_once=True)``, asked after the rounds of the whole
    selection (2 of ``--bench-rounds=4``, ``base.at_once_rounds``): a benchmark is unchanged at
    once only where its rounds, measured in turns, are within 70% of the limit (``base.AT_ONCE``);
    one within the limit but not within 70% of it (+8%, +9%), a change, rounds that disagree, or
    calm rounds measured one side after the other get the other two first rounds. Completing
    them is no pass of extra rounds: none is counted."""
    from types import SimpleNamespace

    from pytest_torchbench.common.vocabulary import Policy
    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest import base
    from pytest_torchbench.pytest.baseline_source import BaselineSource
    from pytest_torchbench.store.storage import BaselineSet

    assert [base.at_once_rounds(n) for n in (2, 3, 4, 5, 8)] == [2, 2, 2, 2, 4]

    def side(**seconds: float) -> BaselineSet:
        return BaselineSet(
            "base",
            "here",
            {
                f"t.py::{name}": BenchmarkResult(
                    f"t.py::{name}", "t.py", name, "", "", nodeid=f"t.py::{name}",
                    metrics={"time": TimeMetric(1, [value], turns=0 if "apart" in name else 5)},
                )
                for name, value in seconds.items()
            },
        )  # fmt: skip

    pairs = {
        "test_once": [(None, 1.0), (1.0, 1.0)],  # its base failed in round 1: one pair
        "test_calm": [(1.0, 1.04), (1.0, 0.97)],
        "test_calm_apart": [(1.0, 1.0), (1.0, 1.0)],
        "test_near": [(1.0, 1.08), (1.0, 1.09)],
        "test_slower": [(1.0, 1.3), (1.0, 1.25)],
        "test_split": [(1.0, 1.0), (1.0, 1.3)],
    }
    rounds = [
        (
            side(**{n: f[number][0] for n, f in pairs.items() if f[number][0] is not None}),
            side(**{n: f[number][1] for n, f in pairs.items()}),
        )
        for number in range(2)
    ]
    fake = SimpleNamespace(
        settings=SimpleNamespace(rounds=4, policy=Policy(), rootdir=tmp_path),
        again_passes={},
        test_argument=lambda path: path.relative_to(tmp_path).as_posix(),
    )
    assert BaselineSource.undecided_tests(fake, rounds, at_once=True) == [  # type: ignore[arg-type]
        "t.py::test_once",
        "t.py::test_calm_apart",
        "t.py::test_near",
        "t.py::test_slower",
        "t.py::test_split",
    ]
    assert fake.again_passes == {}
    # judged at the whole limit after them, the calm one (on its two rounds) is not taken again
    assert "t.py::test_calm" not in BaselineSource.undecided_tests(fake, rounds)  # type: ignore[arg-type]


def test_a_benchmark_measured_along_with_its_sibling_is_judged_on_its_own_rounds(
    tmp_path: Path,
) -> None:
    """Two benchmarks recorded in one test: the first rounds pass one and send the other to be
    measured again. A pass re-runs the whole test, so the passed one is measured along; it is
    judged on the rounds that were for it (``MeasuredBase.pairs``) and never taken for another
    pass, whatever its extra rounds say (here a burst that doubles them)."""
    from types import SimpleNamespace

    from pytest_torchbench.common.vocabulary import Policy
    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest.base import MeasuredBase
    from pytest_torchbench.pytest.baseline_source import BaselineSource
    from pytest_torchbench.store.storage import BaselineSet

    def side(calm: float, flip: float) -> BaselineSet:
        return BaselineSet(
            "base",
            "here",
            {
                key: BenchmarkResult(
                    key,
                    "t.py",
                    "test_two",
                    "",
                    "",
                    nodeid="t.py::test_two",
                    metrics={"time": TimeMetric(1, [value])},
                )
                for key, value in (("t.py::test_two::calm", calm), ("t.py::test_two::flip", flip))
            },
        )

    first = [(side(1.0, 1.0), side(1.0, 2.0)), (side(1.0, 2.0), side(1.0, 1.0))] * 2
    burst = [(side(1.0, 1.0), side(2.0, 2.0)), (side(1.0, 2.0), side(2.0, 1.0))] * 2
    fake = SimpleNamespace(
        settings=SimpleNamespace(rounds=4, policy=Policy(), rootdir=tmp_path),
        again_passes={},
        test_argument=lambda path: path.relative_to(tmp_path).as_posix(),
    )
    assert BaselineSource.undecided_tests(fake, first) == ["t.py::test_two"]  # type: ignore[arg-type]
    assert fake.again_passes == {"t.py::test_two::flip": 1}
    assert BaselineSource.undecided_tests(fake, first + burst) == ["t.py::test_two"]  # type: ignore[arg-type]
    assert fake.again_passes == {
        "t.py::test_two::flip": 2
    }  # the calm one is not judged on the burst

    measured = MeasuredBase(
        SimpleNamespace(),
        BaselineSet("base", "here"),
        tmp_path,
        False,
        1.0,  # type: ignore[arg-type]
        first + burst + burst,
        4,
    )
    calm = measured.pairs(
        "t.py::test_two::calm", "time", fake.again_passes.get("t.py::test_two::calm", 0)
    )
    assert [head.fastest / base.fastest for base, head in calm] == [1.0] * 4
    assert (
        len(
            measured.pairs(
                "t.py::test_two::flip", "time", fake.again_passes["t.py::test_two::flip"]
            )
        )
        == 12
    )
    # sent for the first pass only, measured along in the second: its first eight rounds
    assert measured.pairs("t.py::test_two::flip", "time", 1).numbers == list(range(1, 9))

    # a benchmark its test recorded only in the passes' rounds keeps those: all it has
    late = [(side(1.0, 1.0), side(1.0, 1.0))] * 4 + [
        (
            BaselineSet(
                "base",
                "here",
                {**b.entries, "t.py::test_two::late": b.entries["t.py::test_two::calm"]},
            ),
            BaselineSet(
                "head",
                "here",
                {**h.entries, "t.py::test_two::late": h.entries["t.py::test_two::calm"]},
            ),
        )
        for b, h in burst
    ]
    measured = MeasuredBase(
        SimpleNamespace(),
        BaselineSet("base", "here"),
        tmp_path,
        False,
        1.0,  # type: ignore[arg-type]
        late,
        4,
    )
    assert measured.pairs("t.py::test_two::late", "time", 0).numbers == [5, 6, 7, 8]


def test_the_order_of_a_rounds_two_children_is_read_from_the_environment(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``TORCHBENCH_ROUNDS``: unset or ``turns``, in turns (where the OS can pin); ``sequential``,
    one after the other; anything else is one line saying what it may be."""
    import os

    import pytest

    from pytest_torchbench.pytest.turns import ROUNDS_ENV, turns_wanted

    can_pin = hasattr(os, "sched_setaffinity")
    monkeypatch.delenv(ROUNDS_ENV, raising=False)
    assert turns_wanted() is can_pin
    monkeypatch.setenv(ROUNDS_ENV, " Turns ")
    assert turns_wanted() is can_pin
    monkeypatch.setenv(ROUNDS_ENV, "sequential")
    assert turns_wanted() is False
    monkeypatch.setenv(ROUNDS_ENV, "sequentail\x1b[31m")
    with pytest.raises(
        ValueError,
        match=(
            r"^TORCHBENCH_ROUNDS='sequentail.*' is neither 'turns' \(the default\) "
            r"nor 'sequential'"
        ),
    ) as caught:
        turns_wanted()
    assert "\x1b" not in str(caught.value) and "\n" not in str(caught.value)


def test_pairs_at_once_are_one_per_cpu_capped_by_the_variable_and_one_with_cuda(
    monkeypatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Rounds in turns run one pair per CPU this process may use; ``TORCHBENCH_PAIRS`` caps that
    (a bad value is one escaped line); where CUDA is available, one pair at a time (the pairs
    would share the GPU)."""
    import os

    import pytest

    from pytest_torchbench.engines import duet
    from pytest_torchbench.pytest import turns

    cpu_quota = turns._cpu_quota
    for text, quota in (("max 100000", None), ("150000 100000", 1), ("400000 100000", 4)):
        (tmp_path / "cpu.max").write_text(text + "\n")
        assert cpu_quota(str(tmp_path / "cpu.max")) == quota
    assert cpu_quota(str(tmp_path / "absent")) is None
    monkeypatch.setattr(duet, "pair_cpus", lambda: [3, 2, 1, 0])
    monkeypatch.setattr(turns, "_cuda_available", lambda: False)
    monkeypatch.setattr(turns, "_cpu_quota", lambda: None)
    monkeypatch.delenv(turns.PAIRS_ENV, raising=False)
    assert turns.pairs_at_once() == 4
    monkeypatch.setenv(turns.PAIRS_ENV, " 2 ")
    assert turns.pairs_at_once() == 2
    monkeypatch.setenv(turns.PAIRS_ENV, "9")
    assert turns.pairs_at_once() == 4
    monkeypatch.setattr(turns, "_cuda_available", lambda: True)
    assert turns.pairs_at_once() == 1
    monkeypatch.setattr(duet, "pair_cpus", lambda: [])
    monkeypatch.setattr(turns, "_cuda_available", lambda: False)
    assert turns.pairs_at_once() == 1  # no pinning: one pair, as before
    monkeypatch.setattr(duet, "pair_cpus", lambda: [3, 2, 1, 0])
    monkeypatch.setattr(turns, "_cpu_quota", lambda: 2)
    assert turns.pairs_at_once() == 2  # a container's quota of 2 CPUs of the 4 it sees
    monkeypatch.setattr(turns, "_cpu_quota", lambda: None)
    for bad in ("0", "-1", "two\x1b[31m"):
        monkeypatch.setenv(turns.PAIRS_ENV, bad)
        with pytest.raises(
            ValueError, match=r"^TORCHBENCH_PAIRS='.*' is not a positive whole"
        ) as caught:
            turns.pairs_at_once()
        assert "\x1b" not in str(caught.value) and "\n" not in str(caught.value)
    # this machine: one pair per CPU it may pin to
    monkeypatch.undo()
    monkeypatch.delenv(turns.PAIRS_ENV, raising=False)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    assert turns.pairs_at_once() in (1, cpus)


def test_a_base_runs_report_is_read_defensively(tmp_path: Path) -> None:
    """What the base run's --bench-json says of tests that measured nothing: failed ones (any
    test: a crashed worker's report names no marker) and skipped benchmarks, one escaped line of at
    most 300 characters each; a report that is missing, not an object or nested past Python's
    recursion limit reads as nothing, never as an exception in the judging process."""
    import json

    from pytest_torchbench.pytest.base import _Child

    revision = Revision("HEAD~1", "HEAD~1", "main", "a" * 40, tmp_path)

    def child() -> _Child:  # a child reads its report once: a fresh one for each report written
        return _Child(
            revision,
            [],
            [],
            tmp_path,
            {},
            tmp_path / "r1-base",
            tmp_path,
            "--bench-compare=HEAD~1",
            tmp_path,
            "base",
        )

    assert child().unmeasured_tests() == {}  # no report written
    child().report_path.write_text(
        json.dumps(
            {
                "failed_test_errors": {
                    "t.py::a": "OSError: [Errno 98] Address already in use\nsecond line",
                    "t.py::b": "\x1b[2J::error::forged " + "\x1b" * 1000,
                    "t.py::c": 3,
                    "t.py::d": None,
                },
                "skipped_tests": {"t.py::e": "Skipped: no server", "t.py::a": "later"},
            }
        )
    )
    found = child().unmeasured_tests()
    assert found["t.py::a"] == "failed: OSError: [Errno 98] Address already in use"
    assert found["t.py::b"].startswith("failed: \\x1b[2J") and "\x1b" not in found["t.py::b"]
    assert len(found["t.py::b"]) <= len("failed: ") + 300 and found["t.py::b"].endswith("…")
    assert found["t.py::c"] == "failed: 3" and found["t.py::e"] == "skipped: Skipped: no server"
    for text in ("[]", "null", "{", "[" * 100000 + "]" * 100000):
        child().report_path.write_text(text)
        assert child().unmeasured_tests() == {}


def test_the_session_reports_the_rounds_head_figures_and_measures_briefly_only_where_all_are_paired(
    tmp_path: Path,
) -> None:
    """``BaselineSource.head_measured``: a result's time is the head's of the first round that
    measured it on both sides (what its verdict pairs), its other metrics its own; one new in the
    checkout takes its first head's; a benchmark no head round measured keeps the session's.
    ``judges_on_rounds_only``: the session may measure briefly (and take those figures) only
    where no committed entry can judge a benchmark instead of the rounds (``--bench-base=
    measure``, or nothing committed at REV), and nothing is saved."""
    from types import SimpleNamespace

    from pytest_torchbench.judging.results import BenchmarkResult
    from pytest_torchbench.metrics.ops import OpsMetric
    from pytest_torchbench.metrics.time import TimeMetric
    from pytest_torchbench.pytest.baseline_source import BaselineSource
    from pytest_torchbench.store.storage import BaselineSet

    def result(key: str, seconds: float) -> BenchmarkResult:
        metrics = {"time": TimeMetric(1, [seconds]), "ops": OpsMetric({"aten::add": 1})}
        return BenchmarkResult(key, "t.py", key, "", "", metrics=metrics)

    def one(**seconds: float) -> BaselineSet:
        return BaselineSet(
            "s", "here", {f"t.py::{k}": result(f"t.py::{k}", v) for k, v in seconds.items()}
        )

    rounds = [(one(a=1.0), one(a=2.0, b=5.0, n=7.0)), (one(a=1.0, b=1.0), one(a=3.0, b=4.0))]
    fake = SimpleNamespace(
        measured=SimpleNamespace(rounds=rounds),
        settings=SimpleNamespace(base="auto", save=None),
        committed=None,
    )
    mine = result("t.py::a", 9.0)
    taken = BaselineSource.head_measured(fake, mine)  # type: ignore[arg-type]
    assert taken.metrics["time"].fastest == 2.0 and taken.metrics["ops"] is mine.metrics["ops"]
    assert mine.metrics["time"].fastest == 9.0  # a new result, the session's left as it was
    assert BaselineSource.head_measured(fake, result("t.py::b", 9.0)).metrics["time"].fastest == 4.0  # type: ignore[arg-type]
    assert BaselineSource.head_measured(fake, result("t.py::c", 9.0)).metrics["time"].fastest == 9.0  # type: ignore[arg-type]
    assert BaselineSource.head_measured(fake, result("t.py::n", 9.0)).metrics["time"].fastest == 7.0  # type: ignore[arg-type]
    assert BaselineSource.judges_on_rounds_only(fake)  # type: ignore[arg-type]
    fake.committed = one(a=1.0)  # auto: a committed entry may judge it instead of the rounds
    assert not BaselineSource.judges_on_rounds_only(fake)  # type: ignore[arg-type]
    fake.settings.base = "measure"
    assert BaselineSource.judges_on_rounds_only(fake)  # type: ignore[arg-type]
    fake.settings.save = "main"  # --bench-save keeps the session's own figures, measured in full
    assert not BaselineSource.judges_on_rounds_only(fake)  # type: ignore[arg-type]
    fake.settings.save = None
    fake.measured = SimpleNamespace(rounds=[])  # a one-shot base: the session's figures count
    assert not BaselineSource.judges_on_rounds_only(fake)  # type: ignore[arg-type]
    assert BaselineSource.head_measured(fake, mine) is mine  # type: ignore[arg-type]


def test_a_session_runs_its_tests_in_workers_as_an_xdist_controller_only() -> None:
    """``-n``/``--dist`` (or a launching mode) make a controller; its workers, and a session
    without a distribution, are not one."""
    from types import SimpleNamespace

    from pytest_torchbench.pytest.workers import runs_tests_in_workers

    def config(dist: str, tx: list[str] | None, worker: bool = False) -> object:
        made = SimpleNamespace(option=SimpleNamespace(dist=dist, tx=tx))
        if worker:
            made.workerinput = {}  # type: ignore[attr-defined]
        return made

    assert runs_tests_in_workers(config("load", ["popen"]))  # type: ignore[arg-type]
    assert not runs_tests_in_workers(config("no", None))  # type: ignore[arg-type]
    assert not runs_tests_in_workers(config("load", None))  # type: ignore[arg-type]
    assert not runs_tests_in_workers(config("load", ["popen"], worker=True))  # type: ignore[arg-type]


def test_a_base_child_leaves_at_once_with_pytests_exit_status(tmp_path: Path) -> None:
    """A child of a base measurement exits as soon as pytest returns: its atexit handlers run,
    the interpreter's teardown does not (a module-level object's ``__del__``), with pytest's own
    status and its output flushed; where something after the session decides the status (an
    exit or a usage error in ``pytest_unconfigure``) it ends as usual, with that status; and the
    processes its tests start do not inherit the request."""
    import os
    import subprocess
    import sys

    from pytest_torchbench.pytest import base as base_module
    from pytest_torchbench.pytest.base import QUICK_EXIT_ENV

    (tmp_path / "conftest.py").write_text(
        "import atexit, os\n"
        "here = os.getcwd()\n"
        "atexit.register(lambda: open(os.path.join(here, 'atexit-ran'), 'w').close())\n"
        "class Teardown:\n"
        "    def __del__(self, _open=open, _path=os.path.join(here, 'torn-down')):\n"
        "        _open(_path, 'w').close()\n"
        "teardown = Teardown()\n"
    )
    (tmp_path / "test_ok.py").write_text(
        "import os\n"
        "def test_ok():\n"
        f"    open('inherited', 'w').write(os.environ.get({QUICK_EXIT_ENV!r}, ''))\n"
    )
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert False\n")
    (tmp_path / "exits.py").write_text(
        "import sys\ndef pytest_unconfigure(config):\n    sys.exit(3)\n"
    )
    (tmp_path / "usage.py").write_text(
        "import pytest\ndef pytest_unconfigure(config):\n    raise pytest.UsageError('late')\n"
    )

    def run(*args: str, quick: bool = True) -> subprocess.CompletedProcess[str]:
        for name in ("torn-down", "atexit-ran", "inherited"):
            (tmp_path / name).unlink(missing_ok=True)
        package_root = Path(base_module.__file__).parents[2]  # the copy under test
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(package_root)])}
        env.pop(QUICK_EXIT_ENV, None)
        if quick:
            env[QUICK_EXIT_ENV] = "1"
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def left_at_once() -> bool:
        assert (tmp_path / "atexit-ran").exists()  # the handlers run either way
        return not (tmp_path / "torn-down").exists()

    usual = run("test_ok.py", quick=False)
    assert usual.returncode == 0 and not left_at_once()
    passed = run("test_ok.py")
    assert passed.returncode == 0 and "1 passed" in passed.stdout and left_at_once()
    assert (tmp_path / "inherited").read_text() == ""
    failed = run("test_bad.py")
    assert failed.returncode == 1 and "1 failed" in failed.stdout and left_at_once()
    exits = run("test_ok.py", "-p", "exits")
    assert exits.returncode == 3 and not left_at_once()
    usage = run("test_ok.py", "-p", "usage")
    assert usage.returncode == 4 and "late" in usage.stderr and not left_at_once()
