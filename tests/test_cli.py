"""The torchbench command line tool: exit codes, same resolution as --bench-compare, reports."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchbench.cli import main
from pytest_torchbench.store.storage import save_set


def _sets(root: Path) -> None:
    from conftest import sample_data  # tests/ is on sys.path (rootdir conftest)

    current, _, base = sample_data()
    save_set(root / "baselines/main", base.values())
    save_set(root / "baselines/pr", current)
    save_set(root / "baselines/same", base.values())


def test_compare_exit_codes_and_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "main", "same"]) == 0
    assert "no changes beyond the limits against baseline 'main'" in capsys.readouterr().out
    code = main(
        [
            "compare",
            "main",
            "pr",
            "--markdown",
            "out.md",
            "--html",
            "out.html",
            "--json",
            "out.json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "regression (3):" in out and "+25,000  aten::add_impl" in out and "missing (2):" in out
    assert "Regressions" in (tmp_path / "out.md").read_text()
    assert "<svg" in (tmp_path / "out.html").read_text()
    assert json.loads((tmp_path / "out.json").read_text())["verdicts"]
    # Looser limits: the instruction and time regressions pass, op counts are exact and still fail.
    assert main(["compare", "main", "pr", "--fail", "instructions:50%,time:50%"]) == 1
    assert main(["compare", "baselines/main/bench/test_m.json", "same"]) == 0  # a file path


def test_usage_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    for argv, expected in [
        (["compare", "main"], "the following arguments are required: B"),
        (["compare", "nosuch", "pr"], "baseline=nosuch: no baseline set 'nosuch'"),
        (["compare", "main", "pr", "--fail", "speed:5%"], "--fail: unknown metric 'speed'"),
        ([], "name a command"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ]:
        assert main(argv) == 4, argv
        err = capsys.readouterr().err
        assert err.startswith("torchbench: error: ") and expected in err, err
        assert err.count("\n") == 1, err
    (tmp_path / "blocker").write_text("")
    # A report that cannot be written fails the command: a CI step uploading it must not pass.
    assert main(["compare", "main", "same", "--html", "blocker/x.html"]) == 4
    assert "ERROR: --html=blocker/x.html: cannot write" in capsys.readouterr().err
    assert (
        main(["compare", "main", "pr", "--html", "blocker/x.html"]) == 4
    )  # over the regression's 1
    capsys.readouterr()


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "symlink"])
@pytest.mark.parametrize("command", [["compare", "main", "pr"], ["show", "main"]])
@pytest.mark.parametrize("option", ["--html", "--markdown", "--json"])
def test_a_report_path_that_is_not_a_regular_file_is_a_usage_error_before_comparing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    command: list[str],
    option: str,
) -> None:
    """Item 8: compare --html=/dev/null printed ERROR and exited 0 (and a symlink was written
    through)."""
    import os

    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = {
        "device": "/dev/null",
        "fifo": str(tmp_path / "fifo"),
        "folder": str(tmp_path),
        "symlink": str(tmp_path / "link.html"),
    }[kind]
    if kind == "fifo":
        os.mkfifo(target)
    if kind == "symlink":
        os.symlink(victim, target)
    assert main([*command, option, target]) == 4
    captured = capsys.readouterr()
    assert (
        captured.err.startswith(f"torchbench: error: {option}={target}: is ")
        and captured.err.count("\n") == 1
    ), captured.err
    assert captured.out == ""  # refused before anything was compared or printed
    assert victim.read_text() == "keep me"


def test_show_and_git_revisions(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    git: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "sets")
    assert main(["show", "HEAD:pr"]) == 0
    out = capsys.readouterr().out
    assert "baseline set 'pr' (git HEAD" in out and "test_new" in out
    assert main(["compare", "HEAD:main", "HEAD:pr"]) == 1
    assert main(["compare", "HEAD~3", "pr"]) == 4
    assert "unknown git revision 'HEAD~3'" in capsys.readouterr().err


def test_entry_points(tmp_path: Path, bench_env: None) -> None:
    _sets(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_torchbench", "compare", "main", "pr"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    assert "comparing 'pr'" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "pytest_torchbench", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "compare" in done.stdout


@pytest.mark.parametrize(
    "plugin_text, needle",
    [
        (None, "-p nosuch_plugin_module: import failed: ModuleNotFoundError"),
        ("x = 1\n", "defines no pytest_torchbench_register_metrics(config)"),
        ("raise RuntimeError('boom')\n", "import failed: RuntimeError: boom"),
        # A conftest given as -p often skips itself when an optional package is missing, or exits.
        (
            "import pytest\npytest.importorskip('nonexistent_mod_xyz')\n",
            "import failed: Skipped: could not import 'nonexistent_mod_xyz'",
        ),
        ("import sys\nsys.exit('\\x1b[2Jbye')\n", "import failed: SystemExit: \\x1b[2Jbye"),
        (
            "def pytest_torchbench_register_metrics(config):\n    raise SystemExit(3)\n",
            "pytest_torchbench_register_metrics failed: SystemExit: 3",
        ),
        (
            "def pytest_torchbench_register_metrics(config):\n    return 'lines'\n",
            "must return a list of pytest_torchbench.Metric instances or None, got str",
        ),
        (
            "def pytest_torchbench_register_metrics(config):\n    raise KeyError(config)\n",
            "pytest_torchbench_register_metrics failed: KeyError: None",
        ),
    ],
)
def test_plugin_option_errors_are_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plugin_text: str | None,
    needle: str,
) -> None:
    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    plugin = "nosuch_plugin_module"
    if plugin_text is not None:
        (tmp_path / "myplugin.py").write_text(plugin_text)
        plugin = "myplugin.py"
    assert main(["-p", plugin, "show", "main"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("torchbench: error: ") and needle in err and err.count("\n") == 1, err


def test_plugin_errors_are_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's module can raise any text; it reaches the terminal (and CI logs) escaped."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.py").write_text("raise ValueError('\\x1b[2J\\n::error::pwned')\n")
    assert main(["-p", "evil.py", "show", "main"]) == 4
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1 and "import failed: ValueError" in err, err


# -- torchbench merge (the e2e test with real shards: tests/e2e/test_merge.py) ---------------------


def _shard(path: Path, keys: list[str], verdict_status: str = "unchanged", **meta: object) -> None:
    """A --bench-json document as a shard writes it (jsonreport.write), with one ops verdict per
    key."""
    from conftest import make_result

    from pytest_torchbench.common.vocabulary import Environment, Verdict
    from pytest_torchbench.reports import jsonreport

    results = [make_result(key, ops={"aten::add": 1}) for key in keys]
    for result in results:
        result.environments["ops"] = Environment({"torch": "2.13.0+cpu", "num_threads": "1"})
    verdicts = [Verdict(key, "ops", verdict_status, 1.0, 1.0) for key in keys]
    jsonreport.write(
        path,
        results,
        verdicts,
        {
            "modes": ["ops"],
            "compared_with": "baselines/main",
            "baseline": "main",
            "policy": {"limits": {}, "strict": False, "fail_stale": False},
            "failed_tests": [],
            **meta,
        },
    )


def test_merge_conflicts_are_one_escaped_line_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _shard(tmp_path / "a.json", ["t.py::test_a", "t.py::test_\x1b[2Jevil"])
    _shard(
        tmp_path / "b.json",
        ["t.py::test_b", "t.py::test_\x1b[2Jevil"],
        baseline="nightly",
        policy={"limits": {"ops": 0.1}, "strict": False, "fail_stale": False},
    )
    assert main(["merge", "out.json", "a.json", "b.json", "--save-dir", "merged"]) == 4
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 3, err
    lines = err.splitlines()
    assert lines[0] == (
        "torchbench: error: merge: t.py::test_\\x1b[2Jevil is in both a.json and b.json: "
        "each benchmark must run in one shard only (check how the jobs split the suite)"
    )
    assert lines[1].startswith(
        'torchbench: error: merge: a.json compared with baseline ["main", "baselines/main"], '
        'b.json ["nightly", "baselines/main"]: run every shard with the same --bench-compare'
    )
    assert "a.json judged with limits" in lines[2] and '"ops": 0.1' in lines[2], lines[2]
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "merged").exists()
    document = json.loads((tmp_path / "a.json").read_text())
    for broken, needle in [
        ({**document, "schema": 99}, "a2.json: schema 99, this torchbench reads schema 1"),
        (
            {**document, "benchmarks": [{"key": 1}]},
            "a2.json is not a --bench-json output of "
            "pytest-torchbench (a benchmark or verdict cannot be read: KeyError: 'module')",
        ),
        (
            {"benchmarks": []},
            "a2.json is not a --bench-json output of pytest-torchbench (no 'tool'",
        ),
    ]:
        (tmp_path / "a2.json").write_text(json.dumps(broken))
        assert main(["merge", "out.json", "a2.json"]) == 4
        err = capsys.readouterr().err
        assert err.startswith(f"torchbench: error: merge: {needle}") and err.count("\n") == 1, err
    assert main(["merge", "out.json", "nosuch.json"]) == 4
    assert "merge: cannot read nosuch.json: No such file or directory" in capsys.readouterr().err


def test_merge_saves_one_set_checked_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _shard(tmp_path / "a.json", ["t.py::test_a"])
    _shard(tmp_path / "b.json", ["u.py::test_b"])
    (tmp_path / "blocker").write_text("")
    assert main(["merge", "out.json", "a.json", "b.json", "--save-dir", "blocker/set"]) == 4
    assert "--save-dir: cannot write baseline set folder" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
    assert main(["merge", "out.json", "a.json", "b.json", "--save", "bad name"]) == 4
    capsys.readouterr()
    assert main(["merge", "out.json", "a.json", "b.json", "--save", "main"]) == 0
    assert sorted(p.name for p in (tmp_path / "baselines/main").iterdir()) == ["t.json", "u.json"]
    assert main(["show", "main"]) == 0
    assert "baseline set 'main'" in capsys.readouterr().out
    merged = json.loads((tmp_path / "out.json").read_text())
    assert [b["key"] for b in merged["benchmarks"]] == ["t.py::test_a", "u.py::test_b"]
    assert merged["merged_from"] == ["a.json", "b.json"] and merged["saved_as"] == "main"


def test_merge_in_ci_fails_when_a_benchmark_was_compared_with_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the gate: exit 6 in CI, 0 outside it or with --allow-incomparable; 1 wins over it."""
    monkeypatch.chdir(tmp_path)
    _shard(tmp_path / "a.json", ["t.py::test_a"], verdict_status="not comparable")
    _shard(tmp_path / "b.json", ["u.py::test_b"])
    monkeypatch.delenv("CI", raising=False)
    assert main(["merge", "out.json", "a.json", "b.json"]) == 0
    assert "1 verdict(s) compared with nothing" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert main(["merge", "out.json", "a.json", "b.json"]) == 6
    assert "in CI this fails the merge (exit 6)" in capsys.readouterr().err
    assert main(["merge", "out.json", "a.json", "b.json", "--allow-incomparable"]) == 0
    _shard(tmp_path / "b.json", ["u.py::test_b"], failed_tests=["u.py::test_c"])
    assert main(["merge", "out.json", "a.json", "b.json", "--markdown", "s.md"]) == 1
    # one count of failed tests, as the Markdown has it
    assert (
        "torchbench: 1 test(s) failed (0 failing verdict(s), 1 benchmark test(s) failed by pytest)"
        in capsys.readouterr().out
    )
    assert "1 test(s) failed" in (tmp_path / "s.md").read_text()


def test_compare_in_ci_fails_when_a_benchmark_was_compared_with_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the gate and merge: exit 6 in CI, 0 outside it or with --allow-incomparable."""
    from conftest import make_result

    from pytest_torchbench.common.vocabulary import Environment

    monkeypatch.chdir(tmp_path)
    for name, torch_version in (("main", "2.13.0+cpu"), ("same", "2.13.0+cpu"), ("other", "2.5.1")):
        result = make_result("t.py::test_a", ops={"aten::add": 1})
        result.environments["ops"] = Environment({"torch": torch_version, "num_threads": "1"})
        save_set(tmp_path / "baselines" / name, [result])
    monkeypatch.delenv("CI", raising=False)
    assert main(["compare", "main", "other"]) == 0
    assert "verdict(s) compared with nothing" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert main(["compare", "main", "other"]) == 6
    assert "in CI this fails the comparison (exit 6)" in capsys.readouterr().err
    assert main(["compare", "main", "other", "--allow-incomparable"]) == 0
    assert main(["compare", "main", "same"]) == 0
