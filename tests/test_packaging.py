"""The distribution: an sdist and a wheel built from this checkout install and run on their own.

The sdist is built from a copy of the files a release needs (pyproject.toml, README.md, LICENSE,
the package), the wheel from the unpacked sdist (as ``python -m build`` does, so a file missing
from the sdist is caught), and the wheel is installed with ``--no-deps --target`` into a folder
that is put first on ``PYTHONPATH``: the checkout's editable install stays out of the way, and the
dependencies (pytest, torch) come from the running environment. No network is needed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_torchbench"


def _run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"{args} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def _package_data() -> list[str]:
    """The package's files that are not Python source, relative to the package: each must ship."""
    return sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    )


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # the distribution, not find_spec: a checkout's own build/ folder imports as a namespace
    # package
    try:
        importlib.metadata.distribution("build")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(
            "the sdist needs the 'build' package (in the test extra: pip install -e '.[test]')"
        )
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        PACKAGE, src / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    out = tmp / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "build",
            "--sdist",
            "--no-isolation",
            "--outdir",
            str(out),
            str(src),
        ],
        cwd=tmp,
    )
    (sdist,) = out.glob("pytest_torchbench-*.tar.gz")
    with tarfile.open(sdist) as archive:
        # The "data" filter where this Python has it (3.12, and 3.10.12/3.11.4 backports).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(tmp / "unpacked", **safe)
    (unpacked,) = (tmp / "unpacked").iterdir()
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(out),
            str(unpacked),
        ],
        cwd=tmp,
    )
    (wheel,) = out.glob("pytest_torchbench-*.whl")
    return {"tmp": tmp, "sdist": sdist, "wheel": wheel}


def test_sdist_holds_the_package_its_data_the_readme_and_the_license(
    dists: dict[str, Path],
) -> None:
    with tarfile.open(dists["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"}
    expected |= {f"pytest_torchbench/{name}" for name in _package_data()}
    expected |= {
        f"pytest_torchbench/{p.relative_to(PACKAGE).as_posix()}"
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert not expected - names


def test_wheel_declares_the_plugin_the_command_and_ships_every_file(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        (dist_info,) = {name.split("/", 1)[0] for name in names if ".dist-info/" in name}
        entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
    assert "[pytest11]\ntorchbench = pytest_torchbench.pytest.plugin" in entry_points
    assert "[console_scripts]\ntorchbench = pytest_torchbench.cli:main" in entry_points
    assert "License-Expression: BSD-3-Clause" in metadata
    assert f"{dist_info}/licenses/LICENSE" in names
    assert "py.typed" in _package_data()  # the package is typed (PEP 561)
    missing = [name for name in _package_data() if f"pytest_torchbench/{name}" not in names]
    assert not missing, f"not in the wheel (pyproject's package-data): {missing}"
    sources = [
        p.relative_to(ROOT).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    ]
    assert not [name for name in sources if name not in names]
    # Nothing but the package and its metadata: no tests, examples or baselines in users'
    # site-packages.
    assert {name.split("/", 1)[0] for name in names} == {"pytest_torchbench", dist_info}


def test_installed_wheel_is_the_plugin_pytest_loads(dists: dict[str, Path]) -> None:
    target = dists["tmp"] / "site"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(dists["wheel"]),
        ],
        cwd=dists["tmp"],
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "PYTHON")) and key != "CI"
    }
    env["PYTHONPATH"] = str(target)
    work = dists["tmp"] / "elsewhere"  # not the checkout: nothing is imported from it by accident
    work.mkdir()
    check = (
        "import importlib.metadata as m, pytest_torchbench, sys;"
        "(ep,) = [e for e in m.entry_points(group='pytest11') if e.name == 'torchbench'];"
        "print(ep.value); print(pytest_torchbench.__file__); print(ep.dist.locate_file(''))"
    )
    lines = _run([sys.executable, "-c", check], cwd=work, env=env).stdout.splitlines()
    assert lines[0] == "pytest_torchbench.pytest.plugin"
    assert Path(lines[1]).is_relative_to(target), lines[1]
    assert Path(lines[2]).resolve() == target.resolve(), lines[
        2
    ]  # the wheel's metadata, not the checkout's
    helped = _run([sys.executable, "-m", "pytest", "--help"], cwd=work, env=env).stdout
    assert "--bench-mode=MODES" in helped and "--bench-compare=REF" in helped
    cli = _run([sys.executable, "-m", "pytest_torchbench", "--help"], cwd=work, env=env).stdout
    assert "compare" in cli and "show" in cli
