"""refs: what --bench-compare=REF resolves to, and in which order."""

from __future__ import annotations

import subprocess

import pytest

from pytest_torchbench.judging.results import BenchmarkResult, Environment, TimeMetric
from pytest_torchbench.store.refs import resolve_compare
from pytest_torchbench.store.storage import BaselineError, save_set


def _save(folder, key):
    result = BenchmarkResult(key, "test_a.py", "t", "", "")
    result.metrics["time"] = TimeMetric(1, [1e-3])
    result.environments["time"] = Environment({"torch": "2"})
    save_set(folder, [result])


@pytest.fixture
def layout(tmp_path):
    baselines = tmp_path / "baselines"
    _save(baselines / "main", "from-saved-set")
    _save(tmp_path / "main", "from-path")  # a folder named like the set, relative to cwd
    _save(tmp_path / "other" / "set", "from-other-path")
    return tmp_path, baselines


def test_saved_name_wins_over_a_path_of_the_same_name(layout):
    root, baselines = layout
    found = resolve_compare("main", baselines, root)
    assert list(found.entries) == ["from-saved-set"] and found.name == "main"


def test_paths_relative_absolute_and_files(layout):
    root, baselines = layout
    assert list(resolve_compare("other/set", baselines, root).entries) == ["from-other-path"]
    assert list(resolve_compare(str(root / "other" / "set"), baselines, root).entries) == [
        "from-other-path"
    ]
    assert list(resolve_compare("./main", baselines, root).entries) == ["from-path"]
    single = resolve_compare("other/set/test_a.json", baselines, root)
    assert single.name == "test_a" and list(single.entries) == ["from-other-path"]


def test_unknown_ref_lists_existing_sets(layout):
    root, baselines = layout
    _save(baselines / "nightly", "n")
    with pytest.raises(
        BaselineError, match=r"no baseline set 'mian'.*existing sets: main, nightly"
    ):
        resolve_compare("mian", baselines, root)
    with pytest.raises(BaselineError, match="does not exist.*no sets are saved yet"):
        resolve_compare("main", root / "nowhere", root / "other")
    with pytest.raises(BaselineError, match="needs a baseline set name"):
        resolve_compare("", baselines, root)


def test_git_revision_between_saved_name_and_path(layout):
    root, baselines = layout

    def git(*args):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=t", "add", "baselines")
    git("-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "baselines")
    git("tag", "v1")
    # change the working copy: the revision must be read from git, not from disk
    _save(baselines / "main", "added-after-commit")
    from_git = resolve_compare("v1", baselines, root)
    assert list(from_git.entries) == ["from-saved-set"] and from_git.source.startswith("git v1")
    assert list(resolve_compare("v1:main", baselines, root).entries) == ["from-saved-set"]
    with pytest.raises(BaselineError, match="has no set 'nope'"):
        resolve_compare("v1:nope", baselines, root)
    # a saved set name is found before a git revision of the same name
    git("tag", "main")
    assert sorted(resolve_compare("main", baselines, root).entries) == [
        "added-after-commit",
        "from-saved-set",
    ]


def test_a_revision_given_as_its_hash_is_named_once_and_short() -> None:
    from pytest_torchbench.store.refs import revision_label, shown_ref

    commit = "c6a49cbbb408" + "0" * 28
    assert revision_label(commit, commit) == "c6a49cbbb408"
    assert revision_label("c6a49cb", commit) == "c6a49cbbb408"
    assert revision_label("HEAD~1", commit) == "HEAD~1 (c6a49cbbb408)"
    assert (
        revision_label("cafe", commit) == "cafe (c6a49cbbb408)"
    )  # a branch named like hex, not the commit
    assert shown_ref(f"{commit}:nightly", commit) == "c6a49cbbb408:nightly"
    assert shown_ref("origin/main", commit) == "origin/main"
