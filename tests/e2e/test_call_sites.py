"""Op deltas with their call sites (issue 13 item 2), end to end: real pytest runs, real torch."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

GRAY = """
import os

import torch

FLAG = os.path.join(os.path.dirname(__file__), "extra.flag")


def grayscale_to_rgb(image):
    out = image.expand(3, -1, -1)
    if os.path.exists(FLAG):
        out = out.clone()  # the regression: line 12
    return out
"""

TEST = """
import torch

from color.gray import grayscale_to_rgb


def test_gray(benchmark):
    image = torch.ones(1, 8, 8)
    benchmark(grayscale_to_rgb, image)


def test_unchanged(benchmark):
    x = torch.ones(4, 4)
    benchmark(lambda: x + x)
"""


@pytest.fixture
def color_project(pytester: pytest.Pytester):  # type: ignore[no-untyped-def]
    """A test project whose helper lives in another module (``color/gray.py``)."""
    pytester.mkpydir("color")
    (pytester.path / "color" / "gray.py").write_text(GRAY)
    pytester.makepyfile(test_color=TEST)
    return pytester.path / "color" / "extra.flag"


def test_a_changed_op_names_the_users_line_that_calls_it(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    assert run_bench("--bench-mode=ops", "--bench-compare=main").ret == 0  # A/A: nothing re-run
    color_project.write_text("")  # grayscale_to_rgb now clones
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-json=out.json")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "torchbench: test_color.py::test_gray: ops op counts changed: "
            "ops 2 -> 6 calls per call (4 op(s) changed)",
            "    aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)",
        ]
    )
    # The nested ops of the clone come from the same line; the path is relative to the rootdir.
    assert "aten::copy_ 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in out
    assert str(pytester.path) + "/color" not in out
    # The re-run happens after the test's capture ended: torch's Kineto start/stop lines (fd 2) must
    # not reach the user's terminal from it.
    assert "profiler_start" not in result.stderr.str()
    # The call sites are part of the verdict: the JSON report has them too.
    verdicts = json.loads((pytester.path / "out.json").read_text())["verdicts"]
    failed = [v for v in verdicts if v["key"] == "test_color.py::test_gray"]
    assert (
        "aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in failed[0]["details"]
    )


@pytest.mark.slow
def test_under_xdist_the_controller_reruns_the_failed_test_for_its_call_sites(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    """The judging process (xdist's controller) does not hold the measured callable: at the end
    of the session it re-runs the failed test serially, and the FAILED report, the verdict lines
    and the JSON get the call sites."""
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    color_project.write_text("")
    result = run_bench(
        "--bench-mode=ops", "--bench-compare=main", "-n", "2", "--bench-json=out.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    failures = out[out.index("= FAILURES =") : out.index("short test summary")]
    assert "    aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in failures, out
    assert (
        out.count("aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)") == 2
    )  # + verdict lines
    verdicts = json.loads((pytester.path / "out.json").read_text())["verdicts"]
    failed = [v for v in verdicts if v["key"] == "test_color.py::test_gray"]
    assert (
        "aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in failed[0]["details"]
    )


SCORE_BEFORE = """
import torch


def score(x):
    scale = x.sum() / x.numel()
    mean = x.sum() / 4
    var = (x * x).sum() / 4 / 1
    return scale + mean + var
"""

#: One more aten::div per call, on a new line 7 (the old line 7 is line 8 now); the most frequent
#: div site is the line below (two divs), so only the tag tells the edited line.
SCORE_AFTER = SCORE_BEFORE.replace(
    "    scale = x.sum() / x.numel()\n", "    scale = x.sum() / x.numel()\n    x = x / x.max()\n"
)

SCORE_TEST = """
import torch

from stats.score import score


def test_score(benchmark):
    benchmark(score, torch.arange(4.0))
"""


def test_the_edited_line_is_named_first_among_an_ops_call_sites(
    pytester: pytest.Pytester,
    run_bench,
    git,  # type: ignore[no-untyped-def]
) -> None:
    """The baseline keeps op counts, not their lines: when an op already called from several lines
    is called once more, the line the change edited (git: since --bench-compare's revision, or
    since the saved set's last commit) comes first, tagged, in the serial run and in the re-run
    that explains a test measured in an xdist worker."""
    pytester.mkpydir("stats")
    (pytester.path / "stats" / "score.py").write_text(SCORE_BEFORE)
    pytester.makepyfile(test_score=SCORE_TEST)
    (pytester.path / ".gitignore").write_text(
        ".torchbench/\n__pycache__/\n*.json\n!baselines/**/*.json\n"
    )
    git(pytester.path, "init", "-q", "-b", "main")
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "before")
    (pytester.path / "stats" / "score.py").write_text(SCORE_AFTER)
    git(pytester.path, "commit", "-q", "-am", "after: one more div")
    # the base's code of score, run for its sites: the new line 7 moved, line 9 (was 8) did not
    tagged = (
        "aten::div 4 -> 5 per call (stats/score.py:7 in score +1 [changed since {}]; "
        "as before: stats/score.py:9 in score x2, +2 more)"
    )
    # (-n 2: the parent finds the revision and hands it to the re-run, whose baseline is a folder)
    for args, since in (
        (("--bench-compare=HEAD~1", "--bench-base=measure", "-n", "2"), "HEAD~1"),
        (("--bench-compare=main",), "baselines/main was committed"),
    ):
        result = run_bench("--bench-mode=ops", *args)
        result.assert_outcomes(failed=1)
        assert tagged.format(since) in result.stdout.str(), result.stdout.str()
    # saved since its last commit: no commit names the code it was measured on, so nothing is tagged
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    (pytester.path / "stats" / "score.py").write_text(SCORE_BEFORE)
    result = run_bench("--bench-mode=ops", "--bench-compare=main")
    result.assert_outcomes(failed=1)
    assert (
        "aten::div 5 -> 4 per call "
        "(stats/score.py:8 in score x2, stats/score.py:6 in score x1, +1 more)"
        in result.stdout.str()
    ), result.stdout.str()


@pytest.mark.slow
def test_the_rerun_names_its_test_where_the_checkout_path_holds_brackets(
    pytester: pytest.Pytester,
    run_bench,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    """A CI job's folder may be called ``job[3]``. pytest reads ``[`` in an argument as a
    parameter id and refuses a path holding one, so the re-run, which named its test by absolute
    path, stopped with a usage error and the call sites were lost (a time slowdown's confirmation
    goes through the same re-run). It names its tests relative to the folder it starts in.

    The test file is named on the command line: pytest 9.2 itself, started there with no path,
    refuses the folder it would collect (its absolute path holds the brackets)."""
    root = pytester.path / "job[3]"
    (root / "color").mkdir(parents=True)
    (root / "color" / "__init__.py").write_text("")
    (root / "color" / "gray.py").write_text(GRAY)
    (root / "test_color.py").write_text(TEST)
    monkeypatch.chdir(root)
    assert run_bench("--bench-mode=ops", "--bench-save=main", "test_color.py").ret == 0
    (root / "color" / "extra.flag").write_text("")
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "-n", "2", "test_color.py")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "re-run for call sites" not in out, out
    assert "aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in out, out


WORKER_ONLY = """
import os

import torch


def grayscale_to_rgb(image):
    out = image.expand(3, -1, -1)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        out = out.clone()  # only in xdist workers: the serial re-run cannot reproduce it
    return out
"""


@pytest.mark.slow
def test_a_rerun_that_does_not_reproduce_the_failure_says_so(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    (pytester.path / "color" / "gray.py").write_text(WORKER_ONLY)
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert re.search(r"^    aten::clone 0 -> 1 per call$", out, flags=re.M), (
        out
    )  # the verdict stands
    assert (
        "call sites: not found "
        "(the test ran in another process, and re-running it did not give them)" in out
    )
    assert "`pytest test_color.py::test_gray --bench-mode=ops`" in out
    assert "torchbench: the re-run for call sites did not reproduce 1 failure(s)" in out


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_mode_the_main_ci_command_gets_call_sites_too(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    """``--bench-mode=instructions,ops``: the tests run in valgrind workers, the controller judges;
    the failed test is re-run natively at the end of the session for its call sites."""
    assert (
        run_bench("--bench-mode=instructions,ops", "--bench-save=main", "-k", "test_gray").ret == 0
    )
    color_project.write_text("")
    result = run_bench("--bench-mode=instructions,ops", "--bench-compare=main", "-k", "test_gray")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    failures = out[out.index("= FAILURES =") : out.index("short test summary")]
    assert "instructions regressed" in failures
    assert "    aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in failures, out


REPORT_HOOK = """
import os


def pytest_torchbench_report(config, results, verdicts):
    with open(os.path.join(os.path.dirname(__file__), "hook.log"), "a") as log:
        log.write(f"report {len(results)}\\n")
"""


@pytest.mark.slow
def test_the_rerun_writes_none_of_the_users_outputs(
    pytester: pytest.Pytester,
    run_bench,
    color_project,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """The re-run reads the same ini file (its ``addopts``) and environment as the user's run: it
    must not append a second summary to the CI job summary, rewrite the user's Markdown, HTML or
    JUnit reports with its own, save baselines, or call the user's report hooks a second time.
    Its only output is its JSON."""
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    pytester.makeconftest(REPORT_HOOK)
    color_project.write_text("")
    pytester.makeini(
        "[pytest]\naddopts = --bench-markdown=report.md --bench-html=report.html "
        "--junitxml=junit.xml --bench-save=after\n"
    )
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)" in out  # it re-ran
    assert (
        summary.read_text().strip() == (pytester.path / "report.md").read_text().strip()
    )  # one summary: the run's
    assert (
        "test\\_unchanged" in (pytester.path / "report.md").read_text()
    )  # the run's report, not the re-run's
    assert "test_unchanged" in (pytester.path / "report.html").read_text()
    assert "test_unchanged" in (pytester.path / "junit.xml").read_text()
    assert (pytester.path / "hook.log").read_text() == "report 2\n"
    assert "saved 2 benchmark result(s) to baseline set 'after'" in out


NEEDS_OPTION = """
import pytest


def pytest_addoption(parser):
    parser.addoption("--device")


def pytest_configure(config):
    if config.getoption("--device") is None:
        raise pytest.UsageError("give --device")
"""


@pytest.mark.slow
def test_the_rerun_gets_the_users_own_options(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    """A conftest that requires an option of its own (``--device``): the re-run gets it, so it
    starts and gives the call sites (before, it was left out and the re-run stopped at once)."""
    pytester.makeconftest(NEEDS_OPTION)
    assert run_bench("--device=cpu", "--bench-mode=ops", "--bench-save=main").ret == 0
    color_project.write_text("")
    result = run_bench(
        "--device", "cpu", "--bench-mode=ops", "--bench-compare=main", "-n", "2", "test_color.py"
    )
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert out.count("aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)") == 2, out
    assert "re-run for call sites" not in out


INSISTS_ON_XDIST = """
import pytest


def pytest_configure(config):
    if config.getoption("numprocesses", None) == 0:
        raise pytest.UsageError("\\x1b[2J::error::this suite runs under xdist only")
"""


@pytest.mark.slow
def test_a_rerun_that_cannot_start_says_why_with_its_text_escaped(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    """A conftest that refuses the serial re-run: the note quoting the re-run's output reaches the
    terminal escaped; the verdict stands with the line saying how to get the call sites."""
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    pytester.makeconftest(INSISTS_ON_XDIST)
    color_project.write_text("")
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "torchbench: the re-run for call sites ran no test (exit 4: " in out
    assert "\x1b" not in out
    assert "\\x1b[2J::error::this suite runs under xdist only" in out
    assert "call sites: not found" in out


LEAVES_A_HELPER = """
import os
import subprocess
import sys

import torch

from color.gray import grayscale_to_rgb


def test_gray(benchmark):
    # A helper process the test starts and leaves running (a server, say), holding the output.
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.path.join(os.path.dirname(__file__), "helpers.txt"), "a") as pids:
        pids.write(f"{helper.pid}\\n")
    benchmark(grayscale_to_rgb, torch.ones(1, 8, 8))
"""


@pytest.mark.slow
def test_a_helper_process_left_running_does_not_hold_up_the_session(
    pytester: pytest.Pytester,
    run_bench,
    color_project,  # type: ignore[no-untyped-def]
) -> None:
    """With ``-s`` the re-run's tests write straight to its output, and so do the processes they
    start: read from a pipe, the session waited for a helper left running to exit (forever, when
    it never does) after the re-run itself was done."""
    pytester.makepyfile(test_color=LEAVES_A_HELPER)
    helpers = pytester.path / "helpers.txt"
    try:
        assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
        color_project.write_text("")
        started = time.monotonic()
        result = run_bench("-s", "--bench-mode=ops", "--bench-compare=main", "-n", "2")
        took = time.monotonic() - started
        result.assert_outcomes(failed=1)
        assert (
            "aten::clone 0 -> 1 per call (color/gray.py:12 in grayscale_to_rgb)"
            in result.stdout.str()
        )
        # a session that waits for the helper takes its 600 s; one that does not, 40-70 s here
        assert took < 300, f"the session took {took:.0f} s: it waited for the helper (600 s)"
    finally:
        for pid in helpers.read_text().split() if helpers.exists() else []:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


INSTALLED_PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-rgb"
version = "0.1"

[tool.setuptools]
packages = ["tinyrgb"]
package-dir = {"" = "src"}
"""

INSTALLED_LIBRARY = """
import os

import torch


def to_rgb(image):
    out = image.expand(3, -1, -1)
    if os.environ.get("TINYRGB_EXTRA"):
        out = out.clone()  # the regression: line 10
    return out
"""

INSTALLED_TEST = """
import torch

import tinyrgb


def test_rgb(benchmark):
    image = torch.ones(1, 8, 8)
    benchmark(tinyrgb.to_rgb, image)
"""


def test_call_sites_inside_the_project_installed_into_site_packages(
    pytester: pytest.Pytester, bench_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27 item 13: CI installs the library it tests (``pip install .``, not editable); its
    files live in site-packages, which was skipped as "not user code", so every site printed
    ``(?)``. A real virtualenv (torch from this one, through a ``.pth``) with the project installed
    non-editable: the failure names the line inside the installed package and the test's line."""
    import subprocess
    import sys

    (pytester.path / "pyproject.toml").write_text(INSTALLED_PYPROJECT)
    (pytester.path / "src" / "tinyrgb").mkdir(parents=True)
    (pytester.path / "src" / "tinyrgb" / "__init__.py").write_text(INSTALLED_LIBRARY)
    pytester.makepyfile(test_rgb=INSTALLED_TEST)
    venv = pytester.path.parent / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    import torch

    # this environment's site-packages (torch, pytest) after the virtualenv's own
    (Path(site) / "parent.pth").write_text(os.path.dirname(os.path.dirname(torch.__file__)) + "\n")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(pytester.path),
        ],
        check=True,
        capture_output=True,
        cwd=pytester.path.parent,
    )
    shutil.rmtree(pytester.path / "build", ignore_errors=True)
    where = subprocess.run(
        [str(python), "-c", "import tinyrgb; print(tinyrgb.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=pytester.path.parent,
    ).stdout
    assert f"{os.sep}site-packages{os.sep}tinyrgb{os.sep}" in where, where

    def run(*args: str) -> pytest.RunResult:
        return pytester.run(
            str(python),
            "-m",
            "pytest",
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            *args,
            timeout=300,
        )

    assert run("--bench-mode=ops,calls", "--bench-save=main").ret == 0
    monkeypatch.setenv("TINYRGB_EXTRA", "1")
    result = run("--bench-mode=ops,calls", "--bench-compare=main")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    site = "tinyrgb/__init__.py:10 in to_rgb, from test_rgb.py:8 in test_rgb"
    assert f"    aten::clone 0 -> 1 per call ({site})" in out, out
    assert "site-packages" not in out  # named from its import path, not the virtualenv's
    # the calls metric too: os.environ.get's helper, called from the library's line 9
    assert "called from tinyrgb/__init__.py:9 in to_rgb, from test_rgb.py:8 in test_rgb)" in out, (
        out
    )
    # The unknown-site phrase of an installed package that is not the project's:
    # tests/engines/test_sites.py


def test_bench_sites_that_is_not_a_package_name_is_one_line_and_exit_4(
    pytester: pytest.Pytester,
    run_bench,
    bench_module,  # type: ignore[no-untyped-def]
) -> None:
    pytester.makepyfile(test_a=bench_module)
    result = run_bench("--bench-mode=ops", "--bench-sites=mylib,my-lib")
    assert result.ret == 4
    assert (
        "ERROR: --bench-sites=mylib,my-lib: 'my-lib' is not a Python package name; "
        "give import names, "
        "e.g. --bench-sites=mylib,mylib_ext"
    ) in result.stderr.lines, result.stderr.str()


#: An installed library (a ``site-packages`` folder on ``sys.path``): twelve clones per call, all
#: attributed to the user's line that calls it.
LOSSY = """
def loss(x):
    y = x
    for _ in range(12):
        y = y.clone()
    return y
"""

WRAPPER_BEFORE = """
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "vendor", "site-packages"))

import lossy


def wrapped(x):
    return lossy.loss(x)
"""

#: Lines moved down by three (the commit before the change), then the wrapper's line edited in
#: place (``return`` becomes an assignment: the same twelve clones) and two clones on a new line.
WRAPPER_SHIFTED = WRAPPER_BEFORE.replace("import lossy\n", "import lossy\n\nLIMIT = 3\n\n")
WRAPPER_AFTER = WRAPPER_SHIFTED.replace(
    "    return lossy.loss(x)\n", "    y = lossy.loss(x)\n    return y.clone().clone()\n"
)

WRAPPER_TEST = """
import torch

from conftest import wrapped


def test_wrapped(benchmark):
    benchmark(wrapped, torch.ones(4))
"""


def test_a_site_is_shown_by_how_its_count_moved_not_by_its_line_being_edited(
    pytester: pytest.Pytester,
    run_bench,
    git,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 48 item 9: an installed library's twelve clones are all attributed to the wrapper's
    line that calls it; the commit edits that line (same call, same twelve clones) and adds two
    clones on the next line. Both lines are edited, so both were tagged, and the edited line
    with twelve calls came first: ``conftest.py:14 in wrapped x12 [changed since HEAD~2]``. The
    base's code of the edited wrapper is run again for its sites: the new line moved +2, the
    edited one did not, across an earlier commit that moved every line down."""
    (pytester.path / "vendor" / "site-packages" / "lossy").mkdir(parents=True)
    (pytester.path / "vendor" / "site-packages" / "lossy" / "__init__.py").write_text(LOSSY)
    (pytester.path / "conftest.py").write_text(WRAPPER_BEFORE)
    (pytester.path / "test_wrapped.py").write_text(WRAPPER_TEST)
    (pytester.path / ".gitignore").write_text(".torchbench/\n__pycache__/\n*.json\n")
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    for text, message in ((WRAPPER_SHIFTED, "a constant"), (WRAPPER_AFTER, "two more clones")):
        (pytester.path / "conftest.py").write_text(text)
        git(pytester.path, "commit", "-q", "-am", message)
    assert WRAPPER_AFTER.splitlines()[15 - 1] == "    return y.clone().clone()"
    for args in ((), ("-n", "2")):
        result = run_bench(
            "--bench-mode=ops", "--bench-compare=HEAD~2", "--bench-base=measure", *args
        )
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        assert (
            "aten::clone 12 -> 14 per call (conftest.py:15 in wrapped +2 [changed since HEAD~2]; "
            "as before: conftest.py:14 in wrapped x12)"
        ) in out, out
        assert "x12 [changed" not in out, out


WRAPPER_REPEATED = """
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "vendor", "site-packages"))

import lossy

REPEAT = 1


def wrapped(x):
    y = lossy.loss(x)
    for _ in range(REPEAT):
        y = y.clone()
    return y
"""


def test_base_sites_that_do_not_add_up_to_the_baseline_are_not_shown_as_moves(
    pytester: pytest.Pytester,
    run_bench,
    git,  # type: ignore[no-untyped-def]
) -> None:
    """The base's code runs with the checkout's module-level values: a changed constant
    (``REPEAT = 3``) makes its run give this run's counts, not the baseline's. Then no line is
    said to have moved, and the sites show their calls now, as without the base's."""
    (pytester.path / "vendor" / "site-packages" / "lossy").mkdir(parents=True)
    (pytester.path / "vendor" / "site-packages" / "lossy" / "__init__.py").write_text(LOSSY)
    (pytester.path / "conftest.py").write_text(WRAPPER_REPEATED)
    (pytester.path / "test_wrapped.py").write_text(WRAPPER_TEST)
    (pytester.path / ".gitignore").write_text(".torchbench/\n__pycache__/\n*.json\n")
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    (pytester.path / "conftest.py").write_text(WRAPPER_REPEATED.replace("= 1\n", "= 3\n"))
    git(pytester.path, "commit", "-q", "-am", "three")
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base=measure")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert (
        "aten::clone 13 -> 15 per call "
        "(conftest.py:13 in wrapped x12, conftest.py:15 in wrapped x3)"
    ) in out, out


CACHED_BEFORE = """
import torch

#: What every call of work saw: a later test reads it.
SEEN = []


def work(x):
    SEEN.append(1000)
    return x * 2
"""

CACHED_TEST = """
import torch

import scaled


def test_a_work(benchmark):
    benchmark(scaled.work, torch.ones(4))


def test_b_sees_the_checkouts_code():
    assert set(scaled.SEEN) == {2}
"""


def test_the_base_revisions_code_never_runs_where_later_tests_still_count(
    pytester: pytest.Pytester,
    run_bench,
    git,  # type: ignore[no-untyped-def]
) -> None:
    """How each call site moved is found by running the base revision's code of the changed files;
    what that code leaves (1000 in a module's list, where the checkout's code puts 2) must not
    reach a later test of the same process. So a serial run explains at once without it, and the
    end-of-session re-run, a process that ends after, gives the moves."""
    (pytester.path / "scaled.py").write_text(CACHED_BEFORE)
    pytester.makepyfile(test_scaled=CACHED_TEST)
    (pytester.path / ".gitignore").write_text(".torchbench/\n__pycache__/\n*.json\n")
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    after = CACHED_BEFORE.replace("append(1000)", "append(2)").replace(
        "return x * 2", "return (x * 2).clone()"
    )
    (pytester.path / "scaled.py").write_text(after)
    git(pytester.path, "commit", "-q", "-am", "a clone")
    result = run_bench("--bench-mode=ops", "--bench-compare=HEAD~1", "--bench-base=measure")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*aten::clone 0 -> 1 per call (scaled.py:10 in work*"])
