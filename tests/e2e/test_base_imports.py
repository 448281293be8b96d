"""A measured base counts like the checkout (issue 48, items 8 and 6): both sides import their own
tree's code through import paths of the same shape.

Found on torchrl's objectives benchmarks: an unchanged commit compared with its base measured in
the job read -1.1% to -1.5% in instructions. Its losses try an optional import in every forward,
which scans every entry of ``sys.path``; the base run had one entry more (its worktree, put on
``PYTHONPATH``), and imported the worktree's source where the run it was compared with imported
the release installed in site-packages. Here a small project in a real git repository does the
same, in calls mode (exact: each scanned entry is a few more Python calls per call).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

OPTIONAL_IMPORT = """import torch


def work():
    try:  # an optional dependency, looked for in every call (as torchrl's losses do)
        import _torchbench_absent_accelerator  # noqa: F401
    except ImportError:
        pass
    return torch.ones(4) + 1
"""
REGRESSED = OPTIONAL_IMPORT.replace(
    "return torch.ones(4) + 1", "return (torch.ones(4) + 1).clone()"
)
TEST = (
    "import pytest\nimport mylib\n\n\n@pytest.mark.benchmark\ndef test_work():\n    mylib.work()\n"
)


@pytest.fixture
def repository(pytester: pytest.Pytester, git: Callable[..., str]) -> Callable[[str], Path]:
    """``repository(head_lib)``: mylib committed as OPTIONAL_IMPORT, then ``head_lib``, in a real
    repository; its tests in ``tests/`` (so that no entry of sys.path is the checkout by
    accident)."""

    def make(head_lib: str, test: str = TEST) -> Path:
        root = pytester.path
        (root / "mylib").mkdir()
        (root / "mylib/__init__.py").write_text(OPTIONAL_IMPORT)
        (root / "tests").mkdir()
        (root / "tests/test_work.py").write_text(test)
        (root / ".gitignore").write_text("__pycache__/\n")  # .torchbench/ ignores itself
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "base")
        (root / "mylib/__init__.py").write_text(head_lib)
        (root / "README").write_text("unrelated\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "head")
        return root

    return make


def _run(
    pytester: pytest.Pytester, command: list[str], pythonpath: list[Path] = ()
) -> pytest.RunResult:  # type: ignore[assignment]
    """A fresh pytest with ``-p no:benchmark``, with PYTHONPATH as a user's would be: ``pythonpath``
    and the plugin's checkout (bench_env), not the checkout in front as ``pytester.run`` puts it."""
    value = os.pathsep.join([*map(str, pythonpath), os.environ["PYTHONPATH"]])
    return pytester.run(
        "env",
        f"PYTHONPATH={value}",
        *command,
        "-p",
        "no:benchmark",
        "--bench-compare=HEAD~1",
        "--bench-base=measure",
    )


def _pytest_script() -> str:
    """The ``pytest`` script of this environment: started through it, ``sys.path[0]`` is its
    folder."""
    script = Path(sys.executable).with_name("pytest")
    if not script.is_file():
        pytest.skip(f"no pytest script beside {sys.executable}")
    return str(script)


@pytest.mark.parametrize("started_as", [["-m", "pytest"], ["script"]])
def test_an_unchanged_commit_counts_alike_against_its_measured_base(
    pytester: pytest.Pytester,
    repository,
    bench_env: None,
    monkeypatch: pytest.MonkeyPatch,
    git: Callable[..., str],
    started_as: list[str],
) -> None:
    """Fresh interpreters (not the test suite's forked ones, whose sys.path is rebuilt by hand),
    started as ``python -m pytest`` (sys.path[0]: the folder) and as the ``pytest`` script."""
    repository(OPTIONAL_IMPORT)
    monkeypatch.setenv("CI", "true")
    command = [sys.executable, *started_as] if started_as != ["script"] else [_pytest_script()]
    result = _run(pytester, [*command, "--bench-mode=calls,ops"])
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*1 benchmark(s) against baseline 'HEAD~1': 1 unchanged*"])
    assert (
        pytester.path / ".torchbench" / "bases"
    ).is_dir()  # the cached base is there, yet git sees nothing
    assert ".torchbench" not in git(pytester.path, "status", "--porcelain", "--untracked-files=all")


def test_an_installed_copy_does_not_stand_in_for_the_checkout(
    pytester: pytest.Pytester,
    repository,
    bench_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The release installed in site-packages (here: a folder on PYTHONPATH) is the base's code;
    the checkout has the regression. The run must measure the checkout, not the installed copy
    (which would pass the regression silently)."""
    repository(REGRESSED)
    installed = tmp_path_factory.mktemp("site")
    (installed / "mylib").mkdir()
    (installed / "mylib/__init__.py").write_text(OPTIONAL_IMPORT)
    result = _run(pytester, [_pytest_script(), "--bench-mode=ops"], [installed])
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*aten::clone 0 -> 1 per call*"])


def test_a_copy_imported_before_pytest_started_is_refused(
    pytester: pytest.Pytester,
    repository,
    bench_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A copy imported at start-up (a sitecustomize here; a .pth file does the same) cannot be
    put behind the checkout: one line saying so, exit 4, before the base is measured."""
    repository(REGRESSED)
    installed = tmp_path_factory.mktemp("site")
    (installed / "mylib").mkdir()
    (installed / "mylib/__init__.py").write_text(OPTIONAL_IMPORT)
    (installed / "sitecustomize.py").write_text("import mylib\n")
    result = _run(pytester, [_pytest_script(), "--bench-mode=ops"], [installed])
    assert result.ret == 4, result.stdout.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr.str()
    assert (
        f"this run imports mylib from {installed / 'mylib' / '__init__.py'}, not from this checkout"
        in errors[0]
    )
    assert "measured in this job" not in result.stdout.str()


SLOW_TESTS = """import time
import pytest
import mylib


@pytest.mark.parametrize("n", range(4))
@pytest.mark.benchmark
def test_work(n):
    time.sleep(0.2)
    mylib.work()
"""


def test_a_long_base_run_shows_its_progress_and_q_hides_it(
    pytester: pytest.Pytester, run_bench, repository, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    repository(OPTIONAL_IMPORT, SLOW_TESTS)
    monkeypatch.setenv("TORCHBENCH_PROGRESS_SECONDS", "0.5")
    result = run_bench(
        "--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base=measure", "tests"
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["torchbench: the base HEAD~1 (*): base [1-3]/4 tests (about * left of it); * so far"]
    )
    quiet = run_bench(
        "-q",
        "--bench-mode=ops",
        "--bench-compare=HEAD~1",
        "--bench-base=measure",
        "tests",
        "--bench-output=elsewhere",
    )  # another cache: measured again
    assert quiet.ret == 0, quiet.stdout.str()
    assert "measured in this job" in quiet.stdout.str()
    assert " so far" not in quiet.stdout.str()
