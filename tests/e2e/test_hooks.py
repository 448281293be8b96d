"""Extension hooks, each implemented by a conftest.py in a real pytest run."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import own_lines


def test_environment_hook_adds_facts(pytester: pytest.Pytester, run_bench, bench_module) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    pytester.makeconftest("""
import os
def pytest_torchbench_environment(config):
    return {"image": os.environ.get("IMAGE", "local"), "runner": 1}
""")
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    saved = json.loads((pytester.path / "baselines/main/test_a.json").read_text())
    facts = next(iter(saved["environments"].values()))
    assert facts["user.image"] == "local" and facts["user.runner"] == "1"
    # A different fact makes the baseline not comparable (shown, and failing with --bench-strict).
    pytester.makeconftest("""
def pytest_torchbench_environment(config):
    return {"image": "other", "runner": 1}
""")
    result = run_bench("--bench-mode=ops", "--bench-compare=main")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*baseline from a different environment (user.image: local -> other)*"]
    )
    assert run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-strict").ret == 1


def test_the_closest_conftest_has_the_last_word_on_a_fact(
    pytester: pytest.Pytester, run_bench, bench_module
) -> None:  # type: ignore[no-untyped-def]
    """A conftest loaded during collection (a subfolder's) is asked too, and wins over the
    rootdir's on a fact both give."""
    pytester.makeconftest(
        "def pytest_torchbench_environment(config):\n"
        "    return {'image': 'root', 'runner': 'root'}\n"
    )
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "def pytest_torchbench_environment():\n    return {'image': 'sub'}\n"
    )
    (sub / "test_a.py").write_text(bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    saved = json.loads((pytester.path / "baselines/main/sub/test_a.json").read_text())
    facts = next(iter(saved["environments"].values()))
    assert facts["user.image"] == "sub" and facts["user.runner"] == "root"


@pytest.mark.parametrize(
    "where, args",
    [
        ("conftest.py", ("--bench-mode=ops",)),
        ("conftest.py", ("--bench-mode=ops", "-n", "2")),
        ("sub/conftest.py", ("--bench-mode=ops",)),
        pytest.param(
            "conftest.py",
            ("--bench-mode=instructions",),  # its workers are launched even without -n
            marks=pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind"),
        ),
    ],
    ids=["serial", "xdist", "collected-conftest", "instructions"],
)
def test_an_environment_hook_returning_no_dict_is_one_usage_error_line(
    pytester: pytest.Pytester, run_bench, bench_module, where: str, args: tuple[str, ...]
) -> None:  # type: ignore[no-untyped-def]
    """Said once, before any test runs, naming the hook (it failed every benchmark with a
    traceback, exit status 1)."""
    sub = pytester.mkpydir("sub")
    (sub / "test_a.py").write_text(bench_module)
    conftest = pytester.path / where
    conftest.write_text("def pytest_torchbench_environment(config):\n    return ['gpu']\n")
    result = run_bench(*args)
    assert result.ret == 4, result.stdout.str()
    module = where.removesuffix(".py").replace("/", ".")  # sub/ is a package
    assert own_lines(result.stderr.str()) == [
        f"ERROR: the pytest_torchbench_environment hook {module}.pytest_torchbench_environment "
        f"({conftest}) returned a list, not a dict of facts or None: return e.g. "
        "{'image': os.environ.get('IMAGE', 'local')} (values become strings), or None"
    ]
    assert "Traceback" not in result.stdout.str() and "passed" not in result.stdout.str()


def test_verdict_hook_can_waive_a_regression(
    pytester: pytest.Pytester, run_bench, bench_module
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    path = pytester.path / "baselines/main/test_a.json"
    document = json.loads(path.read_text())
    for entry in document["benchmarks"].values():  # the baseline did half the work: a regression
        entry["metrics"]["ops"]["ops"] = {
            op: n / 2 for op, n in entry["metrics"]["ops"]["ops"].items()
        }
    path.write_text(json.dumps(document))
    assert run_bench("--bench-mode=ops", "--bench-compare=main").ret == 1
    pytester.makeconftest("""
def pytest_torchbench_verdict(config, verdict, result, baseline):
    assert baseline is not None and result.key == verdict.key
    if result.label == "test_add":
        return verdict.replace(failed=False, details=(*verdict.details, "waived by conftest"))
""")
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-markdown=out.md")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_a.py::test_mul*"])
    result.stdout.fnmatch_lines(["*test_add: ops * (waived by a hook)"])  # not read as a failure
    summary = (pytester.path / "out.md").read_text()
    assert "waived by conftest" in summary and "regressed (waived)" in summary


def test_the_verdict_hook_comes_last_so_its_lines_outlive_the_explanation(
    pytester: pytest.Pytester, run_bench, bench_module
) -> None:  # type: ignore[no-untyped-def]
    """An ops failure is explained by a re-run (call sites), which tells the judge's lines again;
    the user's hook runs after it, so what the hook adds is kept and it sees the call sites."""
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    path = pytester.path / "baselines/main/test_a.json"
    document = json.loads(path.read_text())
    for entry in document["benchmarks"].values():
        entry["metrics"]["ops"]["ops"] = {
            op: n / 2 for op, n in entry["metrics"]["ops"]["ops"].items()
        }
    path.write_text(json.dumps(document))
    pytester.makeconftest("""
def pytest_torchbench_verdict(config, verdict, result, baseline):
    if verdict.failed:
        sites = any("test_a.py:" in line for line in verdict.details)
        return verdict.with_details(after=[f"owner: team-a (saw call sites: {sites})"])
""")
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-markdown=out.md")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*test_a.py:*", "*owner: team-a (saw call sites: True)*"])
    assert "owner: team-a (saw call sites: True)" in (pytester.path / "out.md").read_text()


def test_under_xdist_the_explanation_keeps_what_the_hook_decided_and_reruns_skip_the_hook(
    pytester: pytest.Pytester, run_bench, bench_module
) -> None:  # type: ignore[no-untyped-def]
    """Under xdist call sites come from a re-run at the end of the session: it must not undo the
    hook (a waived verdict came back failed, its lines lost), and the re-run itself does not call
    the hook (its parent applies it last)."""
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops,calls", "--bench-save=main").ret == 0
    path = pytester.path / "baselines/main/test_a.json"
    document = json.loads(path.read_text())
    for entry in document["benchmarks"].values():
        for metric in ("ops", "calls"):
            counts = entry["metrics"][metric][metric]
            entry["metrics"][metric][metric] = {name: n / 2 for name, n in counts.items()}
    path.write_text(json.dumps(document))
    pytester.makeconftest("""
import os
def pytest_torchbench_verdict(config, verdict, result, baseline):
    with open("hook.log", "a") as log:
        log.write(os.environ.get("TORCHBENCH_EXPLAIN_RERUN", "0") + "\\n")
    if verdict.failed and verdict.metric == "ops" and result.label == "test_add":
        return verdict.replace(failed=False, details=(*verdict.details, "WAIVED-BY-CONFTEST"))
    if verdict.failed:
        return verdict.with_details(after=["owner: team-a"])
""")
    result = run_bench(
        "-n", "1", "--bench-mode=ops,calls", "--bench-compare=main", "--bench-json=out.json"
    )
    assert result.ret == 1
    verdicts = json.loads((pytester.path / "out.json").read_text())["verdicts"]
    by = {(v["key"], v["metric"]): v for v in verdicts}
    waived = by[("test_a.py::test_add", "ops")]
    assert waived["status"] == "regression" and waived["failed"] is False
    assert "WAIVED-BY-CONFTEST" in waived["details"]
    kept = by[("test_a.py::test_mul", "ops")]
    assert kept["failed"] is True and kept["details"][-1] == "owner: team-a"
    assert any("test_a.py:" in line for line in kept["details"])  # the re-run's call sites
    assert set((pytester.path / "hook.log").read_text().split()) == {"0"}


def test_a_verdict_hook_that_changes_the_frozen_verdict_in_place_fails_it_saying_how(
    pytester: pytest.Pytester, run_bench, bench_module
) -> None:  # type: ignore[no-untyped-def]
    """Verdicts are frozen: a hook written to change one in place (``verdict.failed = False``, as
    the hook was once documented) must neither waive the regression silently nor crash the run."""
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    pytester.makeconftest("""
def pytest_torchbench_verdict(config, verdict, result, baseline):
    verdict.failed = False
""")
    result = run_bench("--bench-mode=ops", "--bench-compare=main")
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*the pytest_torchbench_verdict hook conftest.pytest_torchbench_verdict changed the "
            "verdict in place, which a frozen verdict does not allow: return a changed copy "
            "instead, e.g. `return verdict.replace(failed=False)`*"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_report_hook_sees_everything_and_errors_are_one_line(
    pytester: pytest.Pytester, run_bench, bench_module
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    pytester.makeconftest("""
import json
def pytest_torchbench_report(config, results, verdicts):
    with open("custom.json", "w") as f:
        json.dump({"keys": sorted(r.key for r in results),
                   "verdicts": [v.status for v in verdicts]}, f)
""")
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    assert run_bench("--bench-mode=ops", "--bench-compare=main").ret == 0
    data = json.loads((pytester.path / "custom.json").read_text())
    assert data == {
        "keys": ["test_a.py::test_add", "test_a.py::test_mul"],
        "verdicts": ["unchanged", "unchanged"],
    }
    pytester.makeconftest("""
def pytest_torchbench_report(config, results, verdicts):
    raise RuntimeError("dashboard down")
""")
    result = run_bench("--bench-mode=ops", "--bench-compare=main")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["torchbench: ERROR: a pytest_torchbench_report hook failed: RuntimeError: dashboard down"]
    )
