"""The HTML report: self-contained (no network), plots present, trace links, real browser render."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_torchbench.reports import html


def _links(text: str) -> list[str]:
    return re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text)


def test_self_contained_with_plots(sample_comparison) -> None:  # type: ignore[no-untyped-def]
    current, verdicts, base = sample_comparison
    text = html.render(current, verdicts, base, "main", "git main")
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text and "<link" not in text and "@import" not in text
    external = [link for link in _links(text) if re.match(r"(?i)(https?:)?//", link)]
    assert external == []
    # Only the trace link leaves the page, and as a local file.
    assert [link for link in _links(text) if not link.startswith("#")] == ["file:///tmp/traces/test_slow.json.gz"]
    assert text.count("<svg") >= 5
    assert "wall time: baseline vs current" in text
    assert "top changed functions" in text and "aten::add_impl" in text
    assert "aten op calls per run: change vs baseline" in text
    slow, fast = text.index("bench/test_m.py::test_slow</h2>"), text.index("bench/test_m.py::test_fast</h2>")
    assert slow < fast  # regressions first
    assert "missing" in text and "test_gone" in text
    assert html.render(current, verdicts, base, "main") == html.render(current, verdicts, base, "main")


def test_escaping_and_url_traces() -> None:
    from pytest_torchbench.results import BenchmarkResult, OpsMetric

    result = BenchmarkResult("t.py::test[<b>]", "t.py", "test", "<b>", "", {"ops": OpsMetric({"aten::add": 1})},
                             extras={"trace": "https://ci.example/trace.json"})
    text = html.render([result], [], None, None)
    assert "<b>]" not in text and "&lt;b&gt;" in text
    assert 'href="https://ci.example/trace.json"' in text


def test_nice_ticks() -> None:
    assert html._nice_ticks(0.93, 1.41) == [0.8, 1.0, 1.2, 1.4, 1.6]  # the range is covered
    assert html._nice_ticks(0, 10) == [0, 2.5, 5.0, 7.5, 10.0]
    ticks = html._nice_ticks(5, 5)
    assert ticks[0] <= 5 <= ticks[-1]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="needs a chromium browser (apt-get install chromium)")
def test_renders_in_a_headless_browser(sample_comparison, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    current, verdicts, base = sample_comparison
    page = tmp_path / "report.html"
    page.write_text(html.render(current, verdicts, base, "main", "git main"), encoding="utf-8")
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,1600",
         page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses to a few KB
    dumped = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert "bench/test_m.py::test_slow" in dumped.stdout and "<svg" in dumped.stdout


def test_end_to_end_html_and_bad_target(pytester, run_bench, bench_module) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_a=bench_module)
    result = run_bench("--bench-mode=time,ops", "--bench-min-run-time=0.02", "--bench-save=main",
                       "--bench-html=report.html")
    assert result.ret == 0
    text = (pytester.path / "report.html").read_text()
    assert "test_a.py::test_add" in text and "wall time" in text
    (pytester.path / "blocker").write_text("")
    bad = run_bench("--bench-mode=ops", "--bench-compare=main", "--bench-html=blocker/r.html")
    assert bad.ret == 0
    bad.stdout.fnmatch_lines(["torchbench: ERROR: --bench-html=*blocker/r.html: cannot write (*)"])
