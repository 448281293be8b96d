"""The Markdown summary: order of sections, folded explanations, GitHub step summary, bad targets."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchbench.reports import markdown
from pytest_torchbench.reports.publish import write_reports


def test_regressions_first_with_folded_explanations(sample_comparison) -> None:  # type: ignore[no-untyped-def]
    current, verdicts, _ = sample_comparison
    text = markdown.render(current, verdicts, "main", "git main (abc):baselines/main/")
    assert text.startswith("## torchbench\n")
    assert ":x: **failed**" in text
    order = [text.index(h) for h in ("Regressions", "Improvements", "New benchmarks", "Missing")]
    assert order == sorted(order)
    regressions = text[text.index("Regressions"):text.index("Improvements")]
    assert "`bench/test_m.py::test_slow` **instructions** 100,000 → 130,000 (+30.0%" in regressions
    assert "<details><summary>Why: Functions (instructions per run), aten ops (calls per run)</summary>" in regressions
    assert "+25,000  aten::add_impl" in regressions  # function level
    assert "aten::empty 1 -> 2 per call" in regressions  # op level
    assert "</details>" in regressions
    improvements = text[text.index("Improvements"):text.index("New benchmarks")]
    assert "test_fast" in improvements and "<details>" not in improvements
    assert "| `bench/test_m.py::test_new` | instructions |" in text
    assert "| `bench/test_m.py::test_gone` | instructions |" in text
    assert text.count("<details>") == text.count("</details>")


def test_no_baseline_and_pipes_escaped(sample_comparison) -> None:  # type: ignore[no-untyped-def]
    current, _, _ = sample_comparison
    text = markdown.render(current, [], None)
    assert "no baseline to compare with" in text and "All results (3 benchmark(s)" in text
    assert markdown._escape("a|b\nc") == "a\\|b c"


def test_step_summary_appends_and_bad_target_is_one_line(
    sample_comparison, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    current, verdicts, base = sample_comparison
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    blocker = tmp_path / "file"
    blocker.write_text("")
    notes = write_reports(current, verdicts, base, "main", None, blocker / "x.md", None, markdown.step_summary_path())
    assert summary.read_text().startswith("earlier step\n## torchbench")
    assert len(notes) == 1 and notes[0].startswith(f"ERROR: --bench-markdown={blocker / 'x.md'}: cannot write")


def test_end_to_end_markdown_and_step_summary(pytester, run_bench, bench_module, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    assert run_bench("--bench-mode=ops", "--bench-save=main").ret == 0
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-markdown=out/summary.md")
    assert result.ret == 0
    text = (pytester.path / "out/summary.md").read_text()
    assert ":white_check_mark: passed: 2 benchmark(s) against baseline `main`" in text
    assert summary.read_text().strip() == text.strip()
    # An unwritable target: one line, and the passing run still passes.
    (pytester.path / "blocker").write_text("")
    bad = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-markdown=blocker/x.md")
    assert bad.ret == 0
    bad.stdout.fnmatch_lines(["torchbench: ERROR: --bench-markdown=*blocker/x.md: cannot write (*)"])
