"""The one escaping rule for text from files, and report paths that must be regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_torchbench.common.text import markdown_code_block, markdown_text, safe_number, safe_text
from pytest_torchbench.reports.paths import ReportPathError, check_report_path


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("plain key [1-2]", "plain key [1-2]"),
        ("\x1b[2Jclear", "\\x1b[2Jclear"),
        ("a\nb\rc\td", "a\\x0ab\\x0dc\\x09d"),
        ("::error title=x::boom", "\\x3a:error title=x::boom"),
        ("  ::warning::x", "  \\x3a:warning::x"),
        ("##[error]x", "\\x23#[error]x"),
        ("tests/test_x.py::test_a", "tests/test_x.py::test_a"),  # node ids keep their ::
        ("\u202eevil", "\\u202eevil"),
        ("\x85next", "\\x85next"),
    ],
)
def test_safe_text(raw: str, expected: str) -> None:
    assert safe_text(raw) == expected


def test_no_line_of_escaped_text_is_a_workflow_command() -> None:
    hostile = "x\n::error title=t::forged\n  ##[warning]y\r\n::set-output name=a::b"
    escaped = safe_text(hostile)
    assert "\n" not in escaped and "\r" not in escaped
    assert not escaped.lstrip().startswith(("::", "##["))


def test_markdown_text_and_code_blocks() -> None:
    cell = markdown_text("a|b <script>x</script> `code` *em* [link](u)\n::error::x")
    assert "|" not in cell.replace("\\|", "") and "<script>" not in cell and "\n" not in cell
    assert "\\`code\\`" in cell and "\\*em\\*" in cell and "\\[link\\]" in cell
    block = markdown_code_block(["ok", "``` closes? ````", "::error::x"])
    fence = block[0]
    assert fence == block[-1] and set(fence) == {"`"} and len(fence) == 5
    assert all(fence not in line for line in block[1:-1])
    assert block[3] == "\\x3a:error::x"


def test_safe_number_never_raises() -> None:
    assert safe_number(float("nan")) == "nan" and safe_number(float("-inf"), ",.0f") == "-inf"
    assert safe_number(1e308, ",.0f").startswith("100,000")
    assert safe_number(None) == "None" and safe_number("x\n") == "x\\x0a"


def test_report_paths_regular_or_absent(tmp_path: Path) -> None:
    assert check_report_path(tmp_path / "new.html", "--bench-html") == tmp_path / "new.html"
    regular = tmp_path / "r.html"
    regular.write_text("old")
    assert check_report_path(regular, "--bench-html") == regular
    link = tmp_path / "link.html"
    link.symlink_to(regular)
    with pytest.raises(
        ReportPathError,
        match=r"^--bench-html=.*link.html: is a symlink to .*r.html; a report is never "
        "written through a link",
    ):  # it could point at any file the user can write
        check_report_path(link, "--bench-html")
    assert regular.read_text() == "old" and link.is_symlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(
        ReportPathError, match=r"^--bench-json=.*fifo: is a FIFO; reports are written only"
    ):
        check_report_path(fifo, "--bench-json")
    dev_link = tmp_path / "null.md"
    dev_link.symlink_to("/dev/null")
    with pytest.raises(ReportPathError, match="is a device"):
        check_report_path("/dev/null", "--bench-markdown")
    with pytest.raises(ReportPathError, match="is a symlink to /dev/null"):
        check_report_path(dev_link, "--bench-markdown")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(ReportPathError, match="is a symlink to .*nowhere"):
        check_report_path(dangling, "--bench-html")
    with pytest.raises(ReportPathError, match="is a directory"):
        check_report_path(tmp_path, "--bench-html")


def test_writers_refuse_a_device_and_leave_the_link(tmp_path: Path, sample_comparison) -> None:  # type: ignore[no-untyped-def]
    """Before: the atomic rename replaced a symlink to /dev/null with a regular file."""
    from pytest_torchbench.reports import jsonreport, markdown
    from pytest_torchbench.reports.publish import ReportTargets, RunOutcome, write_reports

    current, verdicts, base = sample_comparison
    targets = []
    for name in ("md", "html", "summary", "json"):
        link = tmp_path / name
        link.symlink_to("/dev/null")
        targets.append(link)
    notes = write_reports(
        RunOutcome(current, verdicts, baseline_entries=base, baseline_name="main"),
        ReportTargets(*targets[:3]),
    )
    # the job summary (the CI's variable, not an option) is a warning, the others errors
    assert [n.split(":")[0] for n in notes] == ["ERROR", "WARNING", "ERROR"] and all(
        "is a symlink to /dev/null" in n for n in notes
    )
    with pytest.raises(OSError, match="is a symlink to /dev/null"):
        jsonreport.write(targets[3], current, verdicts, {})
    assert all(t.is_symlink() and os.readlink(t) == "/dev/null" for t in targets)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="is a FIFO"):  # checked before opening: appending would block
        markdown.write(fifo, "x", append=True)


def test_natural_order_of_test_ids() -> None:
    from pytest_torchbench.common.text import natural_key

    ids = [
        "t.py::test_mm[16]",
        "t.py::test_mm[1]",
        "t.py::test_mm[2]",
        "t.py::test_add",
        "t.py::test_mm[x10]",
    ]
    assert sorted(ids, key=natural_key) == [
        "t.py::test_add",
        "t.py::test_mm[1]",
        "t.py::test_mm[2]",
        "t.py::test_mm[16]",
        "t.py::test_mm[x10]",
    ]
