"""Instructions mode where users run it: a fresh virtualenv (plain venv, virtualenv, uv venv;
activated or not), the user's environment variables reaching the tests, and workers that cannot
start.

These tests start real pytest sessions under real valgrind from real interpreters, so they are slow
(the fresh virtualenv is created once per test session: about 40-60 s for venv + pip install).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")

#: A benchmark that also tells where it ran: which interpreter, which prefix, which variable values.
PROBE_TEST = """
import json, os, sys
import pytest, torch

@pytest.mark.benchmark
def test_add():
    torch.ones(4) + 1

def test_where(benchmark):
    benchmark(lambda: torch.ones(3) * 2)
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump({"executable": sys.executable, "prefix": sys.prefix,
                   "data": os.environ.get("MY_DATASET_PATH"),
                   "flag": os.environ.get("MY_FEATURE_FLAG"),
                   "hashseed": os.environ.get("PYTHONHASHSEED"),
                   "callgrind": "TORCHBENCH_CALLGRIND_DIR" in os.environ}, out)
"""


def clean_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a user who never activated this project's virtualenv.

    No PYTHONPATH (the interpreter must find the plugin in its own site-packages), no
    VIRTUAL_ENV, PATH without any virtualenv's bin folder, and a private TMPDIR so that the run's
    temporary folders can be checked afterwards.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTHONHOME", "PYTEST_CURRENT_TEST")
    }
    parts = [
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p
        and not (Path(p) / "activate").exists()
        and not (Path(p) / "pyvenv.cfg").exists()
        and not (Path(p).parent / "pyvenv.cfg").exists()
    ]
    env["PATH"] = os.pathsep.join(parts)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmpdir)
    env.update(extra)
    return env


def assert_nothing_left(tmp_path: Path) -> None:
    """No /tmp/torchbench-callgrind-* folder and no valgrind process of this run is left."""
    tmpdir = tmp_path / "tmp"
    assert not list(tmpdir.glob("torchbench-callgrind-*")), list(tmpdir.iterdir())
    deadline = time.monotonic() + 10  # execnet gives workers a moment to exit
    while True:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        ours = [line for line in ps.splitlines() if str(tmpdir) in line and "ps -eo" not in line]
        if not ours or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not ours, ours


def run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 400
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def write_project(path: Path, test_source: str = PROBE_TEST, conftest: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "pytest.ini").write_text("[pytest]\n")
    (path / "test_probe.py").write_text(test_source)
    if conftest is not None:
        (path / "conftest.py").write_text(conftest)
    return path


# -- a real, fresh virtualenv with the plugin installed as the README says -------------------------


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m venv`` + ``pip install -c constraints.txt -e <checkout>``: its own site-packages.

    Created from the base interpreter (venv does so even when this suite runs in a virtualenv).
    """
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    env = clean_environment(tmp_path_factory.mktemp("venv-build"))
    made = run([sys.executable, "-m", "venv", str(venv)], ROOT, env, timeout=300)
    assert made.returncode == 0, made.stderr
    pip = run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-c",
            str(ROOT / "constraints.txt"),
            "-e",
            str(ROOT),
        ],
        ROOT,
        env,
        timeout=900,
    )
    if pip.returncode != 0:
        pytest.fail(
            f"pip install into a fresh venv failed:\n{pip.stdout[-2000:]}\n{pip.stderr[-3000:]}"
        )
    return venv


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def check_probe(
    done: subprocess.CompletedProcess[str], probe: Path, venv: Path, tmp_path: Path
) -> dict:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    facts = json.loads(probe.read_text())
    assert facts["callgrind"], "the test did not run in a counted worker"
    assert Path(facts["prefix"]) == venv, facts  # the worker ran inside the virtualenv
    assert facts["executable"] == str(venv / "bin" / "python"), facts
    results = json.loads((tmp_path / "out.json").read_text())["benchmarks"]
    counts = {r["key"]: r["metrics"]["instructions"]["instructions_per_run"] for r in results}
    assert set(counts) == {"test_probe.py::test_add", "test_probe.py::test_where"} and all(
        c > 0 for c in counts.values()
    ), counts
    assert_nothing_left(tmp_path)
    return facts


@pytest.mark.slow
@needs_valgrind
def test_fresh_venv_not_activated(fresh_venv: Path, tmp_path: Path) -> None:
    """`venv/bin/python -m pytest --bench-mode=instructions` with the virtualenv NOT on PATH."""
    project = write_project(tmp_path / "project")
    probe = tmp_path / "probe.json"
    env = clean_environment(
        tmp_path, PROBE_OUT=str(probe), MY_DATASET_PATH="/data/set 1", MY_FEATURE_FLAG="on"
    )
    done = run(
        [
            str(fresh_venv / "bin" / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--bench-mode=instructions",
            f"--bench-json={tmp_path / 'out.json'}",
        ],
        project,
        env,
    )
    facts = check_probe(done, probe, fresh_venv, tmp_path)
    assert (
        facts["data"] == "/data/set 1" and facts["flag"] == "on"
    )  # the user's variables reach the test
    assert facts["hashseed"] == "0"  # what counting needs is pinned


@pytest.mark.slow
@needs_valgrind
def test_fresh_venv_activated(fresh_venv: Path, tmp_path: Path) -> None:
    """`. venv/bin/activate && pytest --bench-mode=instructions` (the console script, from PATH)."""
    project = write_project(tmp_path / "project")
    probe = tmp_path / "probe.json"
    env = clean_environment(tmp_path, PROBE_OUT=str(probe))
    env["PATH"] = f"{fresh_venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(fresh_venv)
    done = run(
        [
            "pytest",
            "-p",
            "no:cacheprovider",
            "--bench-mode=instructions",
            f"--bench-json={tmp_path / 'out.json'}",
        ],
        project,
        env,
    )
    check_probe(done, probe, fresh_venv, tmp_path)


def linked_venv(fresh_venv: Path, venv: Path) -> None:
    """Make ``venv`` (made by another tool) see the fresh venv's packages, through its OWN
    site-packages.

    Why not a second ``pip install`` (another 40 s of torch): what is tested is that the worker
    runs the interpreter of the environment pytest was started from. The ``.pth`` file lies in
    ``venv``'s own site-packages, which the interpreter only reads when started as
    ``venv/bin/python``: a worker that left the virtualenv (the realpath of the interpreter) would
    not find pytest.
    """
    (site_packages(venv) / "torchbench_test_link.pth").write_text(
        f"import site; site.addsitedir({str(site_packages(fresh_venv))!r})\n"
    )


@pytest.mark.slow
@needs_valgrind
@pytest.mark.parametrize("tool", ["virtualenv", "uv"])
def test_other_virtualenv_tools(fresh_venv: Path, tmp_path: Path, tool: str) -> None:
    env = clean_environment(tmp_path)
    installed = run(
        [
            str(fresh_venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            tool,
        ],
        tmp_path,
        env,
        timeout=300,
    )
    if installed.returncode != 0:
        pytest.skip(f"{tool} is not installable here: {installed.stderr.strip().splitlines()[-1:]}")
    venv = tmp_path / f"{tool}-venv"
    base = os.path.realpath(sys.executable)
    if tool == "virtualenv":
        argv = [str(fresh_venv / "bin" / "python"), "-m", "virtualenv", "-q", "-p", base, str(venv)]
    else:
        argv = [str(fresh_venv / "bin" / "uv"), "venv", "-q", "--python", base, str(venv)]
    made = run(argv, tmp_path, env, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    linked_venv(fresh_venv, venv)
    project = write_project(tmp_path / "project")
    probe = tmp_path / "probe.json"
    env["PROBE_OUT"] = str(probe)
    done = run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--bench-mode=instructions",
            f"--bench-json={tmp_path / 'out.json'}",
        ],
        project,
        env,
    )
    check_probe(done, probe, venv, tmp_path)


# -- the user's environment reaches the tests (this checkout on PYTHONPATH, no venv needed) --------


def checkout_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = clean_environment(tmp_path, **extra)
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.slow
@needs_valgrind
def test_tests_see_the_users_variables(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    probe = tmp_path / "probe.json"
    env = checkout_environment(
        tmp_path,
        PROBE_OUT=str(probe),
        MY_DATASET_PATH="/srv/data/ünïcode",
        MY_FEATURE_FLAG="x" * 1000,
        PYTHONHASHSEED="123",
    )
    done = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
            f"--bench-json={tmp_path / 'out.json'}",
        ],
        project,
        env,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    facts = json.loads(probe.read_text())
    assert facts["callgrind"]
    assert facts["data"] == "/srv/data/ünïcode" and facts["flag"] == "x" * 1000
    assert facts["hashseed"] == "0"
    assert_nothing_left(tmp_path)


# -- a worker that cannot start stops the run: one line, exit 4, nothing left behind ---------------


def assert_one_line_stop(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    output = done.stdout + done.stderr
    assert done.returncode == 4, output[-4000:]
    lines = [line for line in output.splitlines() if "could not start" in line]
    assert len(lines) == 1, output[-4000:]
    for text in expected:
        assert text in lines[0], lines[0]
    assert "replacing crashed worker" not in output and "INTERNALERROR" not in output, output[
        -4000:
    ]
    assert "Traceback" not in output, output[-4000:]
    return lines[0]


WORKER_ONLY_CONFTEST = """
import os
if "TORCHBENCH_CALLGRIND_DIR" in os.environ:  # only in the counted worker
    raise RuntimeError("this conftest refuses to load in the worker \\x1b[31m")
"""


@pytest.mark.slow
@needs_valgrind
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "n2"])
def test_worker_conftest_error_stops_the_run(tmp_path: Path, workers: list[str]) -> None:
    project = write_project(tmp_path / "project", conftest=WORKER_ONLY_CONFTEST)
    env = checkout_environment(tmp_path, PROBE_OUT=str(tmp_path / "probe.json"))
    started = time.monotonic()
    done = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
            *workers,
        ],
        project,
        env,
        timeout=240,
    )
    line = assert_one_line_stop(
        done, "RuntimeError: this conftest refuses to load in the worker", "\\x1b"
    )
    assert "\x1b[31m" not in line  # the worker's text is escaped
    assert time.monotonic() - started < 200
    assert_nothing_left(tmp_path)


MISSING_EXECNET = """
import os, sys
if "TORCHBENCH_CALLGRIND_DIR" in os.environ:  # the worker's interpreter "lacks" execnet
    sys.modules["execnet"] = None
"""


@pytest.mark.slow
@needs_valgrind
def test_worker_without_execnet_stops_the_run(tmp_path: Path) -> None:
    """The issue's case: the worker's interpreter cannot import execnet (a sitecustomize hides
    it)."""
    project = write_project(tmp_path / "project")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(MISSING_EXECNET)
    env = checkout_environment(tmp_path)
    env["PYTHONPATH"] = f"{site}{os.pathsep}{ROOT}"
    done = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
        ],
        project,
        env,
        timeout=240,
    )
    assert_one_line_stop(done, "execnet", "pip install")
    assert_nothing_left(tmp_path)


FAKE_VALGRIND = """#!/bin/sh
if [ "$1" = "--version" ]; then echo valgrind-3.19.0; exit 0; fi
echo "valgrind: Bad option: --no-such-option" >&2
echo "valgrind: Use --help for more information or consult the user manual." >&2
exit 1
"""


@pytest.mark.slow
@needs_valgrind
def test_valgrind_that_fails_stops_the_run(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "valgrind"
    fake.write_text(FAKE_VALGRIND)
    fake.chmod(0o755)
    env = checkout_environment(tmp_path)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    done = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
        ],
        project,
        env,
        timeout=120,
    )
    assert_one_line_stop(
        done, "valgrind: Bad option: --no-such-option", "valgrind --tool=callgrind"
    )
    assert_nothing_left(tmp_path)


def test_stale_folders_of_killed_runs_are_removed(tmp_path: Path) -> None:
    from pytest_torchbench.pytest.workers import fixed_dump_dir, remove_stale_dump_dirs

    prefix = "torchbench-callgrind-"

    dead = subprocess.Popen(["true"])
    dead.wait()
    uid = os.getuid()
    stale = tmp_path / f"torchbench-callgrind-{uid}-00"
    live = tmp_path / f"torchbench-callgrind-{uid}-01"
    creating = tmp_path / f"torchbench-callgrind-{uid}-02"  # no owner file yet: being created
    other = tmp_path / "torchbench-callgrind-notapid"
    for folder, owner in (
        (stale, dead.pid),
        (live, os.getpid()),
        (creating, None),
        (other, dead.pid),
    ):
        folder.mkdir()
        (folder / "callgrind.out.1.1").write_text("x")
        if owner is not None:
            (folder / "owner.pid").write_text(str(owner))
    remove_stale_dump_dirs(prefix, str(tmp_path))
    assert not stale.exists() and live.exists() and creating.exists() and other.exists()
    # A killed run's slot is taken back by the next run rather than used up.
    stale.mkdir()
    (stale / "owner.pid").write_text(str(dead.pid))
    taken = fixed_dump_dir(prefix, str(tmp_path))
    assert taken == stale and (taken / "owner.pid").read_text() == str(os.getpid())
    assert not list(taken.glob("callgrind.out.*"))
    # The next free slot after the live and the creating ones.
    assert fixed_dump_dir(prefix, str(tmp_path)) == tmp_path / f"torchbench-callgrind-{uid}-03"


# -- CI runs the README's two commands exactly as written ------------------------------------------


def readme_commands() -> list[str]:
    """The ```sh blocks of README.md's "The two commands" section, read here independently of
    .ci/run."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## The two commands\n", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```sh\n")[1:]
    return [block.split("\n```", 1)[0] for block in blocks]


def test_ci_runs_the_readme_commands_exactly() -> None:
    commands = readme_commands()
    assert len(commands) == 2 and all(
        c.startswith("python -m pip install -c constraints.txt -e ") for c in commands
    )
    listed = subprocess.run(
        [str(ROOT / ".ci" / "run"), "--list"], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == commands
    script = (ROOT / ".ci" / "run").read_text()
    assert "-m venv" in script and 'bash -euo pipefail -c "$command"' in script
