"""The torchbench command line tool: exit codes, same resolution as --bench-compare, reports."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from pytest_torchbench.cli import main
from pytest_torchbench.store.storage import save_set


def _sets(root: Path) -> None:
    from conftest import sample_data  # tests/ is on sys.path (rootdir conftest)

    current, _, base = sample_data()
    save_set(root / "baselines/main", base.values())
    save_set(root / "baselines/pr", current)
    save_set(root / "baselines/same", base.values())


def test_compare_exit_codes_and_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "main", "same"]) == 0
    assert "no changes beyond the limits against baseline 'main'" in capsys.readouterr().out
    code = main(["compare", "main", "pr", "--markdown", "out.md", "--html", "out.html", "--json", "out.json"])
    out = capsys.readouterr().out
    assert code == 1
    assert "regression (3):" in out and "+25,000  aten::add_impl" in out and "missing (2):" in out
    assert "Regressions" in (tmp_path / "out.md").read_text()
    assert "<svg" in (tmp_path / "out.html").read_text()
    assert json.loads((tmp_path / "out.json").read_text())["verdicts"]
    # Looser limits: the instruction and time regressions pass, op counts are exact and still fail.
    assert main(["compare", "main", "pr", "--fail", "instructions:50%,time:50%"]) == 1
    assert main(["compare", "baselines/main/bench/test_m.json", "same"]) == 0  # a file path


def test_usage_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
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
    assert main(["compare", "main", "pr", "--html", "blocker/x.html"]) == 4  # over the regression's 1
    capsys.readouterr()


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "symlink"])
@pytest.mark.parametrize("command", [["compare", "main", "pr"], ["show", "main"]])
@pytest.mark.parametrize("option", ["--html", "--markdown", "--json"])
def test_a_report_path_that_is_not_a_regular_file_is_a_usage_error_before_comparing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        kind: str, command: list[str], option: str) -> None:
    """Item 8: compare --html=/dev/null printed ERROR and exited 0 (and a symlink was written through)."""
    import os

    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = {"device": "/dev/null", "fifo": str(tmp_path / "fifo"), "folder": str(tmp_path),
              "symlink": str(tmp_path / "link.html")}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    if kind == "symlink":
        os.symlink(victim, target)
    assert main([*command, option, target]) == 4
    captured = capsys.readouterr()
    assert captured.err.startswith(f"torchbench: error: {option}={target}: is ") and captured.err.count("\n") == 1, captured.err
    assert captured.out == ""  # refused before anything was compared or printed
    assert victim.read_text() == "keep me"


def test_show_and_git_revisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git: Callable[..., str],
                                capsys: pytest.CaptureFixture[str]) -> None:
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
    done = subprocess.run([sys.executable, "-m", "pytest_torchbench", "compare", "main", "pr"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "comparing 'pr'" in done.stdout
    done = subprocess.run([sys.executable, "-m", "pytest_torchbench", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "compare" in done.stdout


@pytest.mark.parametrize("plugin_text, needle", [
    (None, "-p nosuch_plugin_module: import failed: ModuleNotFoundError"),
    ("x = 1\n", "defines no pytest_torchbench_register_metrics(config)"),
    ("raise RuntimeError('boom')\n", "import failed: RuntimeError: boom"),
    # A conftest given as -p often skips itself when an optional package is missing, or exits.
    ("import pytest\npytest.importorskip('nonexistent_mod_xyz')\n",
     "import failed: Skipped: could not import 'nonexistent_mod_xyz'"),
    ("import sys\nsys.exit('\\x1b[2Jbye')\n", "import failed: SystemExit: \\x1b[2Jbye"),
    ("def pytest_torchbench_register_metrics(config):\n    raise SystemExit(3)\n",
     "pytest_torchbench_register_metrics failed: SystemExit: 3"),
    ("def pytest_torchbench_register_metrics(config):\n    return 'lines'\n",
     "must return a list of pytest_torchbench.Metric instances or None, got str"),
    ("def pytest_torchbench_register_metrics(config):\n    raise KeyError(config)\n",
     "pytest_torchbench_register_metrics failed: KeyError: None"),
])
def test_plugin_option_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str], plugin_text: str | None,
                                           needle: str) -> None:
    _sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    plugin = "nosuch_plugin_module"
    if plugin_text is not None:
        (tmp_path / "myplugin.py").write_text(plugin_text)
        plugin = "myplugin.py"
    assert main(["-p", plugin, "show", "main"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("torchbench: error: ") and needle in err and err.count("\n") == 1, err


def test_plugin_errors_are_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A user's module can raise any text; it reaches the terminal (and CI logs) escaped."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.py").write_text("raise ValueError('\\x1b[2J\\n::error::pwned')\n")
    assert main(["-p", "evil.py", "show", "main"]) == 4
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1 and "import failed: ValueError" in err, err
