"""The Markdown summary: order of sections, folded explanations, GitHub step summary, bad
targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchbench.reports import markdown
from pytest_torchbench.reports.publish import ReportTargets, RunOutcome, write_reports


def _table_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith(("| benchmark", "| group", "| ---"))
    ]


def test_regressions_first_in_a_real_table_with_folded_explanations(sample_comparison) -> None:  # type: ignore[no-untyped-def]
    current, verdicts, _ = sample_comparison
    text = markdown.render(current, verdicts, "main", "git main (abc):baselines/main/")
    assert text.startswith("## torchbench\n")
    assert ":x: **failed**" in text and "```\n| " not in text  # tables, not a code block
    assert "| benchmark | metric | baseline | current | delta | verdict |" in text
    rows = _table_rows(text)
    statuses = [[w for w in row[-1].split() if not w.startswith(":")][0] for row in rows]
    assert statuses[:3] == ["regressed"] * 3 and statuses.index("improved") < statuses.index(
        "new"
    ) < statuses.index("missing")
    assert rows[1][:5] == [
        "bench/test\\_m.py::test\\_slow",
        "instructions",
        "100,000",
        "130,000",
        "+30.0%",
    ]
    assert "**FAILED**" in rows[1][5]
    assert ["bench/test\\_m.py::test\\_new", "instructions", "-", "1,000", "-", ":new: new"] in rows
    # Badges/summary count tests: test_slow regressed in three metrics, counted once.
    assert "1 regressed, 1 improved, 1 new, 1 missing; 1 test(s) failed" in text
    why = text[text.index("### Why") :]
    # one per regressed benchmark, + the profiles, + the folded unchanged rows
    assert why.count("<details>") == 1 + 1 + 1
    profiles = why[why.index("<summary>Profiles (1)") :]
    assert (
        "**bench/test\\_m.py::test\\_slow** (--bench-profile): /tmp/traces/test\\_slow.json.gz"
        in profiles
    )
    # Not in a code span: CommonMark shows backslash escapes and entities inside one literally.
    assert "`/tmp/traces" not in profiles
    assert "| aten::add | 3 | 12.5 |" in profiles
    assert "+25,000  aten::add_impl" in why  # function level
    assert "aten::empty 1 -> 2 per call" in why  # op level
    assert text.count("<details>") == text.count("</details>")
    unchanged = text[text.index("All other results") :]
    assert "| bench/test\\_m.py::test\\_fast | ops | 2 | 2 |" in unchanged


def test_hostile_text_cannot_escape_cells_or_fences() -> None:
    """Issue 8: a description with ``` closed the code fence; raw ::error lines reached CI logs."""
    from pytest_torchbench.common.vocabulary import REGRESSION, Verdict
    from pytest_torchbench.judging.results import BenchmarkResult, OpsMetric

    evil = "x```\n::error title=pwned::forged | <img src=x onerror=alert(1)>"
    result = BenchmarkResult("t.py::t", "t.py", "t", "", evil, {"ops": OpsMetric({"aten::add": 2})})
    verdict = Verdict(
        "t.py::t",
        "ops",
        REGRESSION,
        1,
        2,
        summary=evil,
        details=[evil, "```", "::warning::x"],
        failed=True,
    )
    text = markdown.render([result], [verdict], evil, evil, title=evil)
    for line in text.splitlines():
        assert not line.lstrip().startswith(("::", "##[")), line
    rows = _table_rows(text)
    assert len(rows) == 1 and len(rows[0]) == 6  # the | in the text did not add a cell
    fences = [
        line for line in text.splitlines() if line.startswith("````")
    ]  # longer than any ``` inside
    assert len(fences) == 2 and fences[0] == fences[1] and set(fences[0]) == {"`"}
    outside_code, body = "".join(text.split(fences[0])[0::2]), text.split(fences[0])[1]
    assert "<img" not in outside_code and "&lt;img" in outside_code  # no HTML from a file rendered
    assert "\\x3a:warning::x" in body  # the detail line is inside the block, escaped


def test_group_column_when_groups_exist() -> None:
    from pytest_torchbench.judging.results import BenchmarkResult, OpsMetric

    results = [
        BenchmarkResult(
            "t.py::a", "t.py", "a", "", "", {"ops": OpsMetric({"x": 1})}, extras={"group": "resize"}
        ),
        BenchmarkResult("t.py::b", "t.py", "b", "", "", {"ops": OpsMetric({"x": 1})}),
    ]
    text = markdown.render(results, [], None)
    assert "| group | benchmark | metric | baseline | current | delta | verdict |" in text
    assert "| resize | t.py::a | ops | - | 1 | - | measured |" in text


def test_no_baseline_and_pipes_escaped(sample_comparison) -> None:  # type: ignore[no-untyped-def]
    current, _, _ = sample_comparison
    text = markdown.render(current, [], None)
    assert "no baseline to compare with" in text
    assert (
        text.count("<details>") == 1 and "<summary>Profiles (1)" in text
    )  # only test_slow's profile is folded
    results_part = text[: text.index("<details><summary>Profiles")]  # the profiles come last
    assert len(_table_rows(results_part)) == 3 + 2 + 2  # every measured metric of the 3 results
    assert markdown._escape("a|b\nc") == "a\\|b\\\\x0ac"  # the escape's backslash is escaped too


def test_step_summary_appends_and_bad_target_is_one_line(
    sample_comparison,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    current, verdicts, base = sample_comparison
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    blocker = tmp_path / "file"
    blocker.write_text("")
    notes = write_reports(
        RunOutcome(current, verdicts, baseline_entries=base, baseline_name="main"),
        ReportTargets(markdown_path=blocker / "x.md", step_summary=markdown.step_summary_path()),
    )
    assert summary.read_text().startswith("earlier step\n## torchbench")
    assert len(notes) == 1 and notes[0].startswith(
        f"ERROR: --bench-markdown={blocker / 'x.md'}: cannot write"
    )


def test_end_to_end_markdown_and_step_summary(
    pytester, run_bench, bench_module, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run_bench(
        "--bench-mode=ops", "--bench-compare=main", "--bench-markdown=out/summary.md"
    )
    assert result.ret == 0
    text = (pytester.path / "out/summary.md").read_text()
    assert (
        ":white_check_mark: passed: 2 test(s) (2 benchmark(s) measured) against baseline main"
        in text
    )
    assert summary.read_text().strip() == text.strip()
    # An unwritable target: one line, and exit status 4, as --bench-json's (it was 0); the job
    # summary is still appended.
    (pytester.path / "blocker").write_text("")
    bad = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-markdown=blocker/x.md")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stdout.fnmatch_lines(
        ["torchbench: ERROR: --bench-markdown=*blocker/x.md: cannot write (*)"]
    )
    assert summary.read_text().count("## torchbench") == 2


def test_a_job_summary_that_cannot_be_appended_is_a_warning_line(
    pytester, run_bench, bench_module, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """GITHUB_STEP_SUMMARY is the CI's, not an option the user gave (a container step may inherit
    it with its file out of reach): one WARNING line, the other reports written, and the exit
    status is the verdicts' (here 0); a --bench-markdown that cannot be written fails (exit 4)."""
    pytester.makepyfile(test_a=bench_module)
    (pytester.path / "blocker").write_text("")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "blocker/summary.md"))
    result = run_bench("--bench-mode=ops", "--bench-markdown=out.md")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["torchbench: WARNING: GITHUB_STEP_SUMMARY=*blocker/summary.md: cannot append (*)*"]
    )
    assert "## torchbench" in (pytester.path / "out.md").read_text()
    failed = run_bench("--bench-mode=ops", "--bench-markdown=blocker/out.md")
    assert failed.ret == pytest.ExitCode.USAGE_ERROR


def _noisy_comparison() -> tuple[list, list]:
    """One benchmark judged noisy by the real gate (slower at a CPU share of 0.4), one unchanged."""
    from conftest import make_result

    from pytest_torchbench.common.vocabulary import NOISY, Policy
    from pytest_torchbench.judging.judgement import judge_result

    times = [1.0e-3 * (1 + 0.01 * i) for i in range(10)]
    base = {key: make_result(key, times=times) for key in ("t.py::test_busy", "t.py::test_calm")}
    current = [
        make_result("t.py::test_busy", times=[t * 1.3 for t in times]),
        make_result("t.py::test_calm", times=times),
    ]
    for result in (*base.values(), *current):
        result.metrics["time"].cpu_share, result.metrics["time"].load = 0.4, 9.5
    verdicts = [v for r in current for v in judge_result(r, base[r.key], Policy())]
    assert [v.status for v in verdicts] == [NOISY, "unchanged"]
    return current, verdicts


def test_noisy_verdicts_get_their_own_section_and_do_not_fail() -> None:
    current, verdicts = _noisy_comparison()
    text = markdown.render(current, verdicts, "main")
    assert ":white_check_mark: passed" in text and "test(s) failed" not in text
    assert "1 noisy (not failed), 1 unchanged." in text
    assert ":warning: noisy (not failed)" in text  # marked in the table of changes
    section = text[
        text.index(
            "### Noisy (1): not failed, the machine cannot be told from the code "
            "(busy, slower, launch-bound with its device time held, or not measured again in a "
            "fresh process: each says which); rerun"
        ) :
    ]
    assert "<details><summary>t.py::test\\_busy: time +30.0%</summary>" in section
    assert "this run: had a CPU 40% of its wall time, load average 9.5" in section
    assert text.count("<details>") == text.count("</details>")


def test_html_marks_noisy_tests() -> None:
    from pytest_torchbench.reports import html

    current, verdicts = _noisy_comparison()
    text = html.render(current, verdicts, None, "main")
    assert "1 noisy (not failed)</span>" in text  # a badge of its own colour
    assert (
        "1 test(s) noisy</b>: slower than the limit, by no more than the machine explains" in text
    )
    assert 'class="card noisy"' in text and "this run: had a CPU 40% of its wall time" in text
