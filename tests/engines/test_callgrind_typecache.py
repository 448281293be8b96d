"""The type-cache miss path, measured under real valgrind on this interpreter, and kept."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from pytest_torchbench.engines.callgrind import typecache

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")


@needs_valgrind
def test_a_miss_costs_the_same_every_run_and_about_what_its_path_does() -> None:
    """3.10-3.13 measured 34-36 instructions (the lookup's own path, assign_version_tag and the
    slot's write); the start-up's own misses are not counted, so two runs agree exactly."""
    first = typecache.measure_miss_path(sys.executable)
    assert 15.0 <= first <= 80.0
    assert typecache.measure_miss_path(sys.executable) == first


def test_the_figure_is_measured_once_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[str] = []

    def measure(python: str) -> float:
        measured.append(python)
        return 34.0

    monkeypatch.setattr(typecache, "measure_miss_path", measure)
    assert typecache.miss_path_cost(sys.executable, tmp_path, "valgrind-3.19.0") == 34.0
    assert typecache.miss_path_cost(sys.executable, tmp_path, "valgrind-3.19.0") == 34.0
    assert measured == [sys.executable]
    assert typecache.miss_path_cost(sys.executable, tmp_path, "valgrind-3.20.0") == 34.0  # another valgrind
    assert len(measured) == 2


@pytest.mark.parametrize("kept", ['{"miss_path": NaN}', '{"miss_path": -3}', '{"miss_path": 1e9}',
                                  '{"miss_path": "34"}', '{"miss_path": [1]}', "not json", '["x"]'])
def test_a_kept_figure_that_no_miss_path_has_is_measured_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                kept: str) -> None:
    """A damaged or hand-edited cache file never reaches the counts (a NaN would make every count NaN)."""
    monkeypatch.setattr(typecache, "measure_miss_path", lambda python: 34.0)
    typecache.miss_path_cost(sys.executable, tmp_path, None)
    (path,) = tmp_path.glob("typecache-miss-*.json")
    path.write_text(kept)
    assert typecache.miss_path_cost(sys.executable, tmp_path, None) == 34.0
    assert json.loads(path.read_text())["miss_path"] == 34.0  # written again, whole


def test_an_unwritable_cache_folder_still_gives_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(typecache, "measure_miss_path", lambda python: 34.0)
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    assert typecache.miss_path_cost(sys.executable, blocker, None) == 34.0


def test_a_fifo_or_a_link_in_the_kept_figures_place_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO would block the run before any benchmark, a link to /dev/zero fill its memory."""
    import os

    monkeypatch.setattr(typecache, "measure_miss_path", lambda python: 34.0)
    typecache.miss_path_cost(sys.executable, tmp_path, None)
    (path,) = tmp_path.glob("typecache-miss-*.json")
    path.unlink()
    os.mkfifo(path)
    assert typecache.miss_path_cost(sys.executable, tmp_path, None) == 34.0  # measured, not blocked
    path.unlink()
    path.symlink_to("/dev/zero")
    assert typecache.miss_path_cost(sys.executable, tmp_path, None) == 34.0
    assert not list(tmp_path.glob(".typecache-*"))  # no temporary file left behind


def test_an_implausible_measurement_is_an_error_not_a_subtraction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    monkeypatch.setattr(typecache, "measure_miss_path", lambda python: 5000.0)
    with pytest.raises(subprocess.SubprocessError, match="more than any CPython's path"):
        typecache.miss_path_cost(sys.executable, tmp_path, None)
    assert not list(tmp_path.iterdir())  # nothing kept
