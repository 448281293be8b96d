"""The README stays a README for users, and the documentation's links lead somewhere.

- README.md: at most 300 lines, ``pip install pytest-torchbench`` in its first 60, and every
  ``--bench-*`` option that ``options.py`` defines in its options table.
- README.md, CHANGELOG.md and docs/**.md: every relative link names a file that exists, and every
  ``#anchor`` a heading of that file (GitHub's anchor rules).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: Pages that other branches of this round write; links to them are allowed before they land.
PENDING = {"docs/ci.md", "docs/calls.md", "docs/troubleshooting.md", "docs/pytest-benchmark.md"}
#: Options whose README row the lead writes at the merge (branches do not edit README.md).
README_PENDING_OPTIONS = {"--bench-rounds"}


def _without_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+ (.*)$", _without_code(path.read_text()), re.M)}


def _pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_readme_is_short_and_starts_with_the_install() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300
    assert any("pip install pytest-torchbench" in line for line in lines[:60])
    assert "## The two commands" in lines


def test_readme_options_table_lists_every_option() -> None:
    defined = set(re.findall(r'addoption\(\s*"(--bench-[a-z-]+)"', (ROOT / "pytest_torchbench" / "pytest/options.py").read_text()))
    assert len(defined) >= 10
    table = [line for line in README.read_text().splitlines() if line.startswith("| `--bench-")]
    listed = set(re.findall(r"`(--bench-[a-z-]+)", "\n".join(table)))
    assert defined == listed | README_PENDING_OPTIONS


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve(page: Path) -> None:
    broken = []
    for match in re.finditer(r"\]\(([^)\s]+)\)", _without_code(page.read_text())):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            if dest.relative_to(ROOT).as_posix() not in PENDING:
                broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading for #{anchor}")
    assert not broken
