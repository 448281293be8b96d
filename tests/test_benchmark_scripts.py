"""Every script under benchmarks/ runs, at its tiny size, so that none rots unnoticed.

Each Python script runs as its own process from the repository root with ``--tiny`` (its smallest
work that still calls every part of the package it uses: real pytest sessions where it starts
them, with the fewest benchmarks, sessions and rounds) and must exit 0 having printed its figures'
headers, which it prints only when it ran through. The figures themselves mean nothing at that
size and are not checked. The GPU scripts run with no CUDA device visible: they must say so and
exit with their documented status. Shell scripts get a syntax check (``bash -n``) only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


class Script(NamedTuple):
    args: tuple[str, ...]
    #: Lines (or parts of lines) the script prints only once it got through its work.
    printed: tuple[str, ...]
    timeout: float
    exit_code: int = 0
    needs: tuple[str, ...] = ()  # programs it runs
    env: tuple[tuple[str, str], ...] = ()
    slow: bool = True  # over ~5 s: the slow tier


#: The GPU scripts' status with no CUDA device (their docstrings say so).
NO_DEVICE = 2
NO_GPU = (("CUDA_VISIBLE_DEVICES", ""),)

SCRIPTS: dict[str, Script] = {
    "figures_calls.py": Script(
        ("--tiny",),
        (
            "| callable | Python calls per call",
            "| session (6 benchmarks) |",
            "one extra helper call",
        ),
        300,
    ),
    "figures_gate.py": Script(
        ("--tiny",), ("head only", "base measured (cold)", "ops  A/A exit"), 400, needs=("git",)
    ),
    "figures_instructions.py": Script(
        ("--tiny",),
        ("== sensitivity:", "instructions per call:", "== baseline size:", "== parser:", "ours "),
        900,
        needs=("valgrind", "callgrind_annotate"),
    ),
    "figures_profile.py": Script(
        ("--tiny",), ("== --bench-profile cost", "added per benchmark:", "-n 2 identical:"), 400
    ),
    "figures_rounds_drawn.py": Script(
        ("--tiny",), ("two speeds (made up): 9 round figures", "x1.2  up to 20 rounds:"), 120
    ),
    "figures_time.py": Script(
        ("--tiny",),
        ("(suite (-k", "(gate) 1 compare sessions", "(classes) 10 us", "s in all;"),
        600,
    ),
    "figures_time_cost.py": Script(
        ("--tiny",),
        ("A/A run 1: exit", "cost: the gate took", "A/A: exit 0 in"),
        600,
        needs=("git",),
    ),
    "figures_time_paired.py": Script(
        ("--tiny",),
        ("A/A run 1: exit", "false failure(s) in", "session time:"),
        600,
        needs=("git",),
    ),
    "figures_time_stored.py": Script(
        ("--tiny",), ("quiet-loaded, compared with 2 hogs A/B: exit", "A/A wrong-direction"), 400
    ),
    "figures_turns.py": Script(("--tiny",), ("run 1 add", "paired ratios beyond 10%"), 300),
    "figures_xdist.py": Script(
        ("--tiny",),
        ("serial  wall", "-n 2    wall", "speed-up:", "counts: 2 benchmarks"),
        900,
        needs=("valgrind",),
    ),
    "gpu_check.py": Script(
        (), ("gpu_check: no CUDA device",), 120, exit_code=NO_DEVICE, env=NO_GPU, slow=False
    ),
    "gpu_clocks.py": Script(
        (), ("gpu_clocks: no CUDA device",), 120, exit_code=NO_DEVICE, env=NO_GPU, slow=False
    ),
    "time_designs.py": Script(
        ("--tiny",), ("A/A false regressions over", "slowdown caught", "session 2: load"), 300
    ),
}

SHELL_SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.sh"))


def _env(tmp_path: Path, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """This process's environment without what would steer the script's runs: no PYTHONPATH (the
    installed package, as a user runs the script), no PYTEST_* (PYTEST_ADDOPTS, xdist's worker
    variables), no CI (pytest prints differently); temporary folders under ``tmp_path``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and not k.startswith("PYTEST_") and k not in ("CI", "BUILD_NUMBER")
    }
    env["TMPDIR"] = str(tmp_path)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _run(command: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"") + (exc.stderr or b"")
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        pytest.fail(f"{' '.join(command)} ran over {timeout} s:\n{text[-4000:]}")
    return done.returncode, done.stdout + done.stderr


def test_every_script_is_run() -> None:
    """A script added to benchmarks/ needs its line in SCRIPTS (a tiny size and what it prints)."""
    assert sorted(p.name for p in BENCHMARKS.glob("*.py")) == sorted(SCRIPTS)


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=[pytest.mark.slow] if s.slow else []) for name, s in SCRIPTS.items()],
)
def test_script_runs_tiny(name: str, tmp_path: Path) -> None:
    script = SCRIPTS[name]
    missing = [program for program in script.needs if shutil.which(program) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    code, output = _run(
        [sys.executable, str(BENCHMARKS / name), *script.args],
        script.timeout,
        _env(tmp_path, script.env),
    )
    assert code == script.exit_code, f"exit {code}:\n{output[-6000:]}"
    absent = [line for line in script.printed if line not in output]
    assert not absent, f"not printed: {absent}\n{output[-6000:]}"


@pytest.mark.parametrize("name", ["gpu_check.py", "gpu_clocks.py"])
def test_gpu_script_imports(name: str, tmp_path: Path) -> None:
    """The GPU scripts import (and define main) on a machine without a GPU, creating nothing."""
    code, output = _run(
        [
            sys.executable,
            "-c",
            "import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('script', {str(BENCHMARKS / name)!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "assert callable(module.main)\n"
            "print('imported')\n",
        ],
        120,
        _env(tmp_path, NO_GPU),
    )
    assert code == 0 and "imported" in output, output[-4000:]
    assert not list(tmp_path.iterdir()), "importing the script created files"


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_shell_script_syntax(name: str) -> None:
    done = subprocess.run(
        ["bash", "-n", str(BENCHMARKS / name)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
