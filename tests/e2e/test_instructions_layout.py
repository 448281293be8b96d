"""Counts that do not move with memory layout: CPython's type-attribute cache, reproduced.

A small library with deep class hierarchies looks up 48 names with ``getattr`` on three types per
call. Before each measurement the test consumes a different number of type version tags (throwaway
classes), as a conftest, an import or an earlier test would: which (type, name) pairs then collide
in the cache's 4,096 slots changes, and with it how often ``_PyType_Lookup`` misses and walks the
MRO. The same work, counted under four tag offsets in one session, must count the same; the cost of
the misses is kept apart and reported (docs/design/counting.md, "Type-cache misses are kept apart").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed"),
]

LIBRARY = '''
"""Deep class hierarchies with many attribute lookups per call (dataclass-like containers)."""


def _chain(prefix, depth, names):
    bases = (object,)
    for level in range(depth):
        namespace = {f"{prefix}_{name}_{level}": level for name in names[level::depth]}
        bases = (type(f"{prefix}{level}", bases, namespace),)
    return bases[0]


NAMES = [f"field{i:02d}" for i in range(48)]


def make_types():
    """Three fresh 12-deep class chains: their version tags are handed out at their first lookup."""
    return [_chain("A", 12, NAMES), _chain("B", 12, NAMES), _chain("C", 12, NAMES)]


def lookup_all(objs, lookups):
    total = 0
    for obj in objs:
        for name in lookups[type(obj)]:
            total += getattr(obj, name)
    return total
'''

TESTS = """
import pytest
import deep

_KEEP = []


@pytest.mark.parametrize("tags", [0, 1, 2, 3])
def test_lookups(benchmark, tags):
    for i in range(tags):  # consume version tags: runs none of the benchmark's code
        cls = type(f"Throwaway{tags}_{i}", (), {})
        cls.attr = i
        getattr(cls, "attr")
        _KEEP.append(cls)
    types = deep.make_types()  # the same classes each time, with tags that start further on
    _KEEP.append(types)
    lookups = {t: [n for k in t.__mro__ for n in vars(k) if not n.startswith("__")] for t in types}
    benchmark(deep.lookup_all, [t() for t in types], lookups)
"""


def test_type_cache_collisions_move_no_count(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "deep.py").write_text(LIBRARY)
    (project / "test_deep.py").write_text(TESTS)
    report = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            "--bench-mode=instructions",
            f"--bench-json={report}",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    values = [
        entry["metrics"]["instructions"] for entry in json.loads(report.read_text())["benchmarks"]
    ]
    assert len(values) == 4
    counted = [v["instructions_per_run"] for v in values]
    misses = [v.get("type_cache_misses", 0.0) for v in values]
    raw = [c + m for c, m in zip(counted, misses)]
    figures = f"counted {counted}, misses {misses}, all instructions {raw}"
    print(figures)
    spread = max(counted) / min(counted) - 1
    assert spread < 0.01, figures  # within the default limit, whatever collided
    if max(raw) / min(raw) - 1 < 0.02:
        pytest.skip(
            f"no collision reproduced in this environment (all instructions within 2%): {figures}"
        )
    assert spread < (max(raw) / min(raw) - 1) / 5, figures
