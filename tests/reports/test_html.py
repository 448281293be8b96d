"""The HTML report: self-contained (no network), plots present, trace links, real browser render."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import profile_record

from pytest_torchbench.reports import html


def _links(text: str) -> list[str]:
    return re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text)


def test_self_contained_with_plots(sample_comparison) -> None:  # type: ignore[no-untyped-def]
    current, verdicts, base = sample_comparison
    text = html.render(current, verdicts, base, "main", "git main")
    assert text.startswith("<!DOCTYPE html>")
    # One inline script (sorting, filtering), nothing loaded: no src, no link, no import, no fetch.
    assert text.count("<script") == 1 and "<script>" in text and " src=" not in text
    assert (
        "<link" not in text
        and "@import" not in text
        and "fetch(" not in text
        and "XMLHttpRequest" not in text
    )
    external = [link for link in _links(text) if re.match(r"(?i)(https?:)?//", link)]
    assert external == []
    # Only the trace link leaves the page, and as a local file.
    assert [link for link in _links(text) if not link.startswith("#")] == [
        "file:///tmp/traces/test_slow.json.gz"
    ]
    assert text.count("<svg") >= 5
    assert "wall time per call: baseline vs current" in text
    assert "top changed functions" in text and "aten::add_impl" in text
    assert "aten op calls per run: change vs baseline" in text
    slow, fast = (
        text.index("bench/test_m.py::test_slow</h2>"),
        text.index("bench/test_m.py::test_fast</h2>"),
    )
    assert slow < fast  # regressions first
    assert "missing" in text and "test_gone" in text
    # Badges count tests, each once under its worst verdict: test_slow has three regressed metrics.
    assert (
        ">1 regressed</span>" in text
        and ">1 improved</span>" in text
        and ">1 failed</span>" in text
    )
    assert html.render(current, verdicts, base, "main") == html.render(
        current, verdicts, base, "main"
    )


def test_escaping_and_url_traces() -> None:
    from pytest_torchbench.judging.results import BenchmarkResult, OpsMetric

    result = BenchmarkResult(
        "t.py::test[<b>]",
        "t.py",
        "test",
        "<b>",
        "\x1b[2J\n::error title=x::boom",
        {"ops": OpsMetric({"aten::add": 1, "<script>alert(1)</script>": 2})},
        extras={"profiles": [profile_record("https://ci.example/trace.json")]},
    )
    text = html.render([result], [], None, None)
    assert "<b>]" not in text and "&lt;b&gt;" in text
    assert "<script>alert" not in text and "\x1b" not in text and "\n::error" not in text
    assert 'href="https://ci.example/trace.json"' in text
    # A trace name that would be a javascript: URL is quoted into a harmless relative link.
    evil = BenchmarkResult(
        "t.py::t",
        "t.py",
        "t",
        "",
        "",
        {},
        extras={"profiles": [profile_record("javascript:alert(1)")]},
    )
    assert 'href="javascript:' not in html.render([evil], [], None, None)


def test_trace_links_from_bench_profile_and_relative_to_the_report(tmp_path: Path) -> None:
    from pytest_torchbench.judging.results import BenchmarkResult, OpsMetric

    trace = tmp_path / "traces" / "t.py__test-1a2b3c4d.json"
    result = BenchmarkResult(
        "t.py::test",
        "t.py",
        "test",
        "",
        "",
        {"ops": OpsMetric({"aten::add": 1})},
        extras={"profiles": [profile_record(str(trace))]},
    )
    assert 'href="traces/t.py__test-1a2b3c4d.json"' in html.render(
        [result], [], None, None, page=html.HtmlPage(base=tmp_path)
    )
    assert f'href="{trace.as_uri()}"' in html.render([result], [], None, None)


def test_suite_of_310_benchmarks_stays_under_2_mb() -> None:
    """Issue 10: every replicate drawn as a dot made 8-19 MB reports; thousands of samples per
    benchmark must not grow the page."""
    from synthetic import suite

    current, verdicts, base = suite(310, modes=("time",))
    samples = sum(len(r.metrics["time"].raw_times) for r in current)
    assert len(current) == 310 and samples > 400_000
    text = html.render(current, verdicts, base, "main", "git main")
    assert len(text.encode()) <= 2_000_000
    assert text.count("<circle") == 0 and text.count('<section class="card ') == 310
    # Regressions first: the first card and the first overview row are regressions.
    assert (
        text.index('class="card regression"')
        < text.index('class="card improvement"')
        < text.index('class="card unchanged"')
    )
    first_row = text[text.index("<tbody>") :].split("</tr>")[0]
    assert 'data-s="regression"' in first_row


def test_distribution_plot_size_does_not_grow_with_samples() -> None:
    few = html.strip_box_svg([1e-5 * (1 + i / 100) for i in range(30)], [1e-5] * 30)
    many = html.strip_box_svg([1e-5 * (1 + (i % 30) / 100) for i in range(10_000)], [1e-5] * 10_000)
    assert len(many) < 1.2 * len(few) and len(many) < 4000


def test_non_finite_values_never_break_the_page() -> None:
    from pytest_torchbench.common.vocabulary import REGRESSION, Verdict
    from pytest_torchbench.judging.results import BenchmarkResult, InstructionsMetric, TimeMetric

    nan, inf = float("nan"), float("inf")
    bad = BenchmarkResult(
        "t.py::t",
        "t.py",
        "t",
        "",
        "",
        {
            "time": TimeMetric(1, [nan, inf, 1e308, 1e-6]),
            "instructions": InstructionsMetric(nan, 100, {"f": inf, "g": 1e308}),
        },
    )
    base = BenchmarkResult(
        "t.py::t",
        "t.py",
        "t",
        "",
        "",
        {
            "time": TimeMetric(1, [inf, inf]),
            "instructions": InstructionsMetric(inf, 100, {"f": nan}),
        },
    )
    verdicts = [
        Verdict("t.py::t", "instructions", REGRESSION, baseline=inf, current=nan),
        Verdict("t.py::t", "time", REGRESSION, baseline=1e308, current=inf),
    ]
    text = html.render([bad], verdicts, {"t.py::t": base}, "main")
    assert "t.py::t" in text and "NaN" not in text.split("<script>")[0].replace("nan", "")


def test_nice_ticks() -> None:
    assert html._nice_ticks(0.93, 1.41) == [0.8, 1.0, 1.2, 1.4, 1.6]  # the range is covered
    assert html._nice_ticks(0, 10) == [0, 2.5, 5.0, 7.5, 10.0]
    ticks = html._nice_ticks(5, 5)
    assert ticks[0] <= 5 <= ticks[-1]


CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)


@pytest.mark.skipif(CHROMIUM is None, reason="needs a chromium browser (apt-get install chromium)")
def test_renders_in_a_headless_browser(sample_comparison, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    current, verdicts, base = sample_comparison
    page = tmp_path / "report.html"
    page.write_text(html.render(current, verdicts, base, "main", "git main"), encoding="utf-8")
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,1600",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert (
        data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    )  # a blank page compresses to a few KB
    dumped = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile2'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "bench/test_m.py::test_slow" in dumped.stdout and "<svg" in dumped.stdout
    # The inline script runs: filtered by verdict from the URL, rows and cards of other verdicts
    # hide.
    filtered = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile3'}",
            "--dump-dom",
            page.as_uri() + "?verdict=improvement&sort=delta",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    rows = re.findall(r'<tr data-s="(\w+)"[^>]*?(style="display: none;")?>', filtered)
    assert rows and all((status == "improvement") == (not hidden) for status, hidden in rows), rows
    assert re.search(r'id="count"[^>]*>1 of 9 rows<', filtered)  # test_fast's instructions verdict
    assert 'class="up"' in filtered  # sorted by delta


def test_end_to_end_html_and_bad_target(pytester, run_bench, bench_module) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    result = run_bench(
        "--bench-mode=time,ops",
        "--bench-min-run-time=0.02",
        "--bench-save=main",
        "--bench-html=report.html",
    )
    assert result.ret == 0
    text = (pytester.path / "report.html").read_text()
    assert "test_a.py::test_add" in text and "wall time" in text
    (pytester.path / "blocker").write_text("")
    bad = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-html=blocker/r.html")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR  # a report asked for and not written (was 0)
    bad.stdout.fnmatch_lines(["torchbench: ERROR: --bench-html=*blocker/r.html: cannot write (*)"])


@pytest.mark.skipif(CHROMIUM is None, reason="needs a chromium browser (apt-get install chromium)")
def test_a_test_that_only_profiled_keeps_its_card_visible(
    sample_comparison, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """A ``bench_profiler`` test has a card (its trace link) but no row in the overview; the
    script that hides the cards of filtered-out rows hid it on every load."""
    from pytest_torchbench.judging.results import BenchmarkResult

    current, verdicts, base = sample_comparison
    profiled = BenchmarkResult(
        "bench/test_m.py::test_prof",
        "bench/test_m.py",
        "test_prof",
        "",
        "",
        {},
        extras={
            "profiles": [profile_record(str(tmp_path / "traces" / "p.json"), "bench_profiler")]
        },
    )
    page = tmp_path / "report.html"
    page.write_text(
        html.render(
            [*current, profiled], verdicts, base, "main", page=html.HtmlPage(base=tmp_path)
        ),
        encoding="utf-8",
    )
    dumped = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    cards = dict(
        re.findall(
            r'<section class="card [^"]*" id="([^"]+)"[^>]*?( style="display: none;")?>', dumped
        )
    )
    assert len(cards) == 4, cards  # test_slow, test_fast, test_new and the profiled test
    assert all(hidden == "" for hidden in cards.values()), (
        cards
    )  # nothing filtered: every card shows
    assert 'href="traces/p.json"' in dumped
