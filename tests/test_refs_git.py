"""Resolving --bench-compare / torchbench references: saved names, git revisions, paths.

The git cases build real repositories (git init, commits, branches, a shallow clone) because the
point is to read committed baselines without a checkout, which only real git can show.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchbench.judging.results import BenchmarkResult, OpsMetric
from pytest_torchbench.store.refs import resolve_compare
from pytest_torchbench.store.storage import BaselineError, render_baseline_document

KEY = "test_a.py::test_add"


def doc(calls: float, key: str = KEY) -> str:
    result = BenchmarkResult(
        key=key,
        module="test_a.py",
        label="test_add",
        sub_label="",
        description="",
        metrics={"ops": OpsMetric({"aten::add": calls})},
    )
    return render_baseline_document("test_a.py", [result])


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def calls(baseline_set) -> float:  # type: ignore[no-untyped-def]
    return baseline_set.entries[KEY].metrics["ops"].ops["aten::add"]


@pytest.fixture
def repo(tmp_path: Path, git: Callable[..., str]) -> Path:
    """main: c0 (no baselines) -> c1 (add=1) -> c2 (add=2); branch feature: set 'other' (add=5)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root / "README", "x\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c0")
    write(root / "baselines/main/test_a.json", doc(1))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c1")
    write(root / "baselines/main/test_a.json", doc(2))
    git(root, "commit", "-q", "-am", "c2")
    git(root, "checkout", "-q", "-b", "feature")
    shutil.rmtree(root / "baselines/main")
    write(root / "baselines/other/test_a.json", doc(5))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "feature")
    git(root, "checkout", "-q", "main")
    return root


def resolve(ref: str, root: Path, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    return resolve_compare(ref, root / "baselines", cwd or root)


def test_revisions_are_read_from_git_without_checkout(repo: Path, git: Callable[..., str]) -> None:
    # The working tree is changed and not committed: the revision still gives what was committed.
    write(repo / "baselines/main/test_a.json", doc(99))
    assert calls(resolve("HEAD", repo, repo / "baselines")) == 2
    assert calls(resolve("HEAD~1", repo)) == 1
    assert calls(resolve("HEAD~1:main", repo)) == 1
    assert calls(resolve("feature", repo)) == 5  # the only set at that revision
    assert calls(resolve("feature:other", repo)) == 5
    assert "git feature" in resolve("feature", repo).source
    assert git(repo, "status", "--porcelain").strip() == "M baselines/main/test_a.json"


def test_saved_name_wins_over_revision_and_revision_over_path(repo: Path) -> None:
    # 'main' is both a saved set (working tree, 99) and a branch (committed, 2): the saved set wins.
    write(repo / "baselines/main/test_a.json", doc(99))
    assert calls(resolve("main", repo)) == 99
    # 'feature' is a branch and also a folder in the current directory: the revision wins.
    write(repo / "feature/test_a.json", doc(7))
    assert calls(resolve("feature", repo)) == 5
    # A path that is no revision and no saved set: the path.
    write(repo / "elsewhere/set1/test_a.json", doc(3))
    assert calls(resolve("elsewhere/set1", repo)) == 3
    write(repo / "single.json", doc(4))
    assert calls(resolve("single.json", repo)) == 4


def test_revision_errors_are_one_clear_line(repo: Path) -> None:
    cases = {
        "HEAD~2": "has no committed baselines under baselines/",
        "nosuchbranch~3": "unknown git revision 'nosuchbranch~3'",
        "nosuchname": "no baseline set 'nosuchname'",
        "HEAD:nosuchset": "has no set 'nosuchset' (it has: main)",
    }
    for ref, expected in cases.items():
        with pytest.raises(BaselineError) as info:
            resolve(ref, repo)
        message = str(info.value)
        assert expected in message, message
        assert "\n" not in message
    # A reference that cannot be a set name suggests the default name, not itself.
    assert "--bench-save=main" in _error("no/such/thing", repo)


def _error(ref: str, root: Path) -> str:
    with pytest.raises(BaselineError) as info:
        resolve(ref, root)
    return str(info.value)


def test_several_sets_need_a_name(repo: Path, git: Callable[..., str]) -> None:
    write(repo / "baselines/nightly/test_a.json", doc(8))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "nightly")
    assert calls(resolve("HEAD", repo)) == 2  # 'main' is the default among several
    git(repo, "checkout", "-q", "feature")
    write(repo / "baselines/nightly/test_a.json", doc(8))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two sets, none is main")
    assert "name one as HEAD:SET" in _error("HEAD", repo)
    assert calls(resolve("HEAD:nightly", repo)) == 8


def test_corrupt_file_in_revision(repo: Path, git: Callable[..., str]) -> None:
    write(repo / "baselines/main/test_a.json", "{not json")
    git(repo, "commit", "-q", "-am", "broken")
    message = _error("HEAD", repo)
    assert "baselines/main/test_a.json at HEAD" in message and "not valid JSON" in message
    write(repo / "baselines/main/test_a.json", json.dumps({"schema": 999}))
    git(repo, "commit", "-q", "-am", "future schema")
    assert "has schema 999" in _error("HEAD", repo)
    assert calls(resolve("HEAD~2", repo)) == 2


def test_shallow_clone(repo: Path, tmp_path: Path, git: Callable[..., str]) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "main", f"file://{repo}", str(clone))
    assert calls(resolve("HEAD", clone)) == 2
    message = _error("HEAD~1", clone)
    assert "not in this shallow clone" in message and "git fetch" in message
    assert "shallow clone" in _error("feature", clone)


def test_outside_git(tmp_path: Path) -> None:
    message = _error("HEAD", tmp_path)
    assert "not inside a git repository" in message


# -- end to end ------------------------------------------------------------------------------------


def test_compare_with_revisions_end_to_end(  # type: ignore[no-untyped-def]
    pytester: pytest.Pytester,
    run_bench,
    git: Callable[..., str],
    bench_module: str,
) -> None:
    root = pytester.path
    pytester.makepyfile(test_a=bench_module)
    git(root, "init", "-q", "-b", "main")
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "baselines")
    # A branch whose committed baselines claim fewer ops: comparing with it is a regression.
    git(root, "checkout", "-q", "-b", "lean")
    path = root / "baselines/main/test_a.json"
    document = json.loads(path.read_text())
    for entry in document["benchmarks"].values():
        entry["metrics"]["ops"]["ops"] = {
            op: 0.5 * n for op, n in entry["metrics"]["ops"]["ops"].items()
        }
    path.write_text(json.dumps(document))
    git(root, "commit", "-q", "-am", "lean baselines")
    git(root, "checkout", "-q", "main")
    shutil.rmtree(root / "baselines")  # nothing saved in the working tree: only git has them

    same = run_bench("--bench-mode=ops", "--bench-compare=HEAD")
    assert same.ret == 0, same.stdout.str()
    # Shown as the revision given, not as the set 'main' (which reads as this checkout's set or
    # branch).
    same.stdout.fnmatch_lines(["*no changes beyond the limits against baseline 'HEAD' (git HEAD*"])
    named = run_bench("--bench-mode=ops", "--bench-compare=lean~1:main")
    assert named.ret == 0, named.stdout.str()
    named.stdout.fnmatch_lines(
        ["*no changes beyond the limits against baseline 'lean~1:main' (git lean~1*"]
    )
    # git resolves revisions that carry control characters and a workflow command on a line of its
    # own: the name is shown escaped, as any text a run did not write itself.
    for hostile in ("HEAD^{/\x1b*}", "HEAD@{now\n##[error]forged}"):
        shown = run_bench("--bench-mode=ops", f"--bench-compare={hostile}")
        assert shown.ret == 0, shown.stdout.str()
        out = shown.stdout.str()
        assert "\x1b" not in out and not any(
            line.startswith(("::", "##[")) for line in out.splitlines()
        )
        shown.stdout.fnmatch_lines(["*no changes beyond the limits against baseline 'HEAD*\\x*"])
    worse = run_bench("--bench-mode=ops", "--bench-compare=lean", "--bench-base=stored")
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(["*op counts changed*", "*delta vs baseline 'lean')*"])
    # In auto mode what failed against lean's committed set is judged against lean measured
    # here, whose code is this checkout's: the set claimed what lean's code does not do.
    rechecked = run_bench("--bench-mode=ops", "--bench-compare=lean")
    assert rechecked.ret == 0, rechecked.stdout.str()
    rechecked.stdout.fnmatch_lines(
        ["*test_a.py::*: judged against lean (*) measured here: it failed against its entry*"]
    )

    missing = run_bench("--bench-mode=ops", "--bench-compare=HEAD~5")
    assert missing.ret == 4
    missing.stderr.fnmatch_lines(["*--bench-compare=HEAD~5: unknown git revision 'HEAD~5'*"])
