"""Each benchmark is counted over the number of calls its baseline was, in the head and in a base
measured from a git revision (``engines.callgrind.plans.PLANS_VARIABLE``; real valgrind, real git).

Why: the number is otherwise planned from the benchmark's first counted call, and a first call
near a bucket edge (tensordict's ``test_unsqueeze`` on Python 3.13, 0.3% under it) picked the
other bucket in another run: "not comparable", and in CI a failed job asking to re-save.
The committed baseline here says 2 calls for a benchmark whose first call plans 100 (the
neighbouring bucket): only a plan handed to both runs makes them count over 2.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import git

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed"),
]

LIB_BEFORE = "import torch\n\n\ndef work():\n    return torch.ones(4) + 1\n"
LIB_AFTER = "import torch\n\n\ndef work():\n    return (torch.ones(4) + 1).clone()\n"
TEST = (
    "import pytest\nimport mylib\n\n\n@pytest.mark.benchmark\ndef test_work():\n    mylib.work()\n"
)
CONFTEST = (
    "import os\n\n\ndef pytest_torchbench_environment(config):\n"
    "    return {'runner': os.environ.get('RUNNER')}\n"
)
KEY = "test_work.py::test_work"


def test_head_and_measured_base_count_over_the_committed_number_and_the_regression_is_caught(
    pytester: pytest.Pytester, run_bench, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    root = pytester.path
    (root / "mylib").mkdir()
    (root / "mylib/__init__.py").write_text(LIB_BEFORE)
    (root / "test_work.py").write_text(TEST)
    (root / "conftest.py").write_text(CONFTEST)
    (root / ".gitignore").write_text(".torchbench/\n__pycache__/\n*.json\n!baselines/**/*.json\n")
    git(root, "init", "-q", "-b", "main")
    monkeypatch.setenv("RUNNER", "laptop")
    saved = run_bench("--bench-mode=instructions", "--bench-save=main")
    assert saved.ret == 0, saved.stdout.str()
    path = root / "baselines/main/test_work.json"
    document = json.loads(path.read_text())
    counted = document["benchmarks"][KEY]["metrics"]["instructions"]
    assert (counted["number_per_run"], counted["warmup"]) == (100, 100)  # what its probe plans
    counted["number_per_run"], counted["warmup"] = 2, 1  # as a laptop whose first call was heavier
    path.write_text(json.dumps(document, indent=1))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "before")
    (root / "mylib/__init__.py").write_text(LIB_AFTER)
    git(root, "commit", "-q", "-am", "after: one more op per call")

    monkeypatch.setenv(
        "RUNNER", "ci"
    )  # the committed baseline is not comparable: HEAD~1 is measured
    monkeypatch.setenv("CI", "true")
    result = run_bench(
        "--bench-mode=instructions", "--bench-compare=HEAD~1", "--bench-json=out.json"
    )
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "measured in this job in" in out and "counted over" not in out, out
    report = json.loads((root / "out.json").read_text())
    head = report["benchmarks"][0]["metrics"]["instructions"]
    base = report["baseline_entries"][KEY]["metrics"]["instructions"]
    assert (
        (head["number_per_run"], head["warmup"])
        == (base["number_per_run"], base["warmup"])
        == (2, 1)
    )
    (verdict,) = [v for v in report["verdicts"] if v["metric"] == "instructions"]
    assert verdict["status"] == "regression" and verdict["failed"], verdict
