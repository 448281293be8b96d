"""The README stays a README for users, and the documentation's links lead somewhere.

- README.md: at most 300 lines, ``pip install pytest-torchbench`` in its first 60, and every
  ``--bench-*`` option that ``options.py`` defines in its options table.
- README.md, CHANGELOG.md and docs/**.md: every relative link names a file that exists, and every
  ``#anchor`` a heading of that file (GitHub's anchor rules).
- The package's docstrings and comments say why, not how much: measured figures (a percentage
  with decimals, a signed change, a range, "about 10 s"), dates, issue numbers and references to
  FACTS.md or README sections belong in docs/design/, where they keep their date.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: Pages that other branches of this round write; links to them are allowed before they land.
PENDING = {"docs/ci.md", "docs/calls.md", "docs/troubleshooting.md", "docs/pytest-benchmark.md"}
#: Options whose README row the lead writes at the merge (branches do not edit README.md).
README_PENDING_OPTIONS: set[str] = set()


def _without_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _anchor(m.group(1))
        for m in re.finditer(r"^#+ (.*)$", _without_code(path.read_text()), re.M)
    }


def _pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_readme_is_short_and_starts_with_the_install() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300
    assert any("pip install pytest-torchbench" in line for line in lines[:60])
    assert "## The two commands" in lines


def test_readme_options_table_lists_every_option() -> None:
    defined = set(
        re.findall(
            r'addoption\(\s*"(--bench-[a-z-]+)"',
            (ROOT / "pytest_torchbench" / "pytest/options.py").read_text(),
        )
    )
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


_UNIT = r"(?:%|(?:s|ms|us|µs|ns|min|KB|MB|GB|KiB|MiB|GiB)\b)"
#: What a measured figure looks like in prose; a constant ("default 10%", "2 MiB or more") does not.
FIGURE = re.compile(rf"""(?xi)
  \d+[.,]\d+\s?{_UNIT}                                  # 0.25%, 2.5 ms
| (?<![\w.])[+-]\d+(?:\.\d+)?\s?%                       # a signed change: +74.6%, -38%
| \d+(?:\.\d+)?\s?-\s?\d+(?:\.\d+)?\s?{_UNIT}            # a range: 40-75%, 548-670 us
| (?:about|~|took|costs?)\s*\d[\d.,]*\s?{_UNIT}          # about 10 s, ~0.4 s
| \b20\d\d-\d\d-\d\d\b                                  # a date
| \bissues?\s+\#?\d+                                     # an issue number
| FACTS\.md
| README(?:'s)?,?\s+(?:section\s+)?["“]                  # a README section
| \bmeasured(?::|\s+on\b|\))                            # measured: / measured on ...
""")
#: Real constants that look like figures: (file, the matched text).
ALLOWED: set[tuple[str, str]] = set()
#: Files still holding figures while a branch rewrites them, with how many: a file may lose figures,
#: never gain one. Remove a file's line once it is clean. None is pending now.
PENDING_FIGURES: dict[str, int] = {}


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring line and comment of a Python file."""
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found += [
                    (node.body[0].lineno + i, line) for i, line in enumerate(doc.splitlines())
                ]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    return found


def figures_in(path: Path, relative: str | None = None) -> list[str]:
    relative = relative or path.relative_to(ROOT).as_posix()
    hits = []
    for line, text in _prose(path):
        match = FIGURE.search(text)
        if match and (relative, match.group(0)) not in ALLOWED:
            hits.append(f"{relative}:{line}: {match.group(0)!r} in {text.strip()!r}")
    return hits


def test_the_figure_pattern_finds_figures_and_passes_constants(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    cases = {
        "moved counts by 0.25% from run to run": True,
        "a CI run failed at +74.6%": True,
        "40-75% between minutes": True,
        "about 10 s instead": True,
        "(~0.4 s under valgrind)": True,
        "on 2026-11-21": True,
        "the lopsidedness of issue 12": True,
        "FACTS.md says": True,
        'README, "How the gate decides"': True,
        "(measured: 0-5 of 208)": True,
        "the limit (default 10%)": False,
        "tensors of 2 MiB or more": False,
        "a fraction: 0.01 is 1%": False,
        "the measured region": False,
        "--bench-fail=NAME:5%": False,
    }
    probe.write_text("".join(f"# {text}\n" for text in cases), encoding="utf-8")
    found = figures_in(probe, "probe.py")
    flagged = {text for text in cases if any(text in hit for hit in found)}
    assert flagged == {text for text, figure in cases.items() if figure}


def test_package_docstrings_hold_no_measured_figures() -> None:
    """Code says why; the figures live in docs/design/ with their dates (measurements.md, "Moved
    from the code")."""
    new = []
    for path in sorted((ROOT / "pytest_torchbench").rglob("*.py")):
        hits = figures_in(path)
        if len(hits) > PENDING_FIGURES.get(path.relative_to(ROOT).as_posix(), 0):
            new += hits
    assert not new, "\n".join(new)


#: A reference to a section of a page, as the package writes one: docs/ci.md, "Exit statuses".
SECTION_REFERENCE = re.compile(r'(docs/[\w/.-]+\.md), "([^"]+)"')


def _texts(path: Path) -> list[str]:
    """Every string literal of a Python file (docstrings and messages; implicit concatenations
    joined by the parser), and each run of consecutive comment lines as one text."""
    source = path.read_text(encoding="utf-8")
    texts = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    run: list[str] = []
    last = -1
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        if token.start[0] != last + 1 and run:
            texts.append(" ".join(run))
            run = []
        run.append(re.sub(r"^#:?", "", token.string))
        last = token.start[0]
    return [*texts, " ".join(run)]


def _headings(page: Path) -> list[str]:
    return [
        " ".join(m.group(1).replace("`", "").split())
        for m in re.finditer(r"^#+ (.*)$", _without_code(page.read_text()), re.M)
    ]


def broken_section_references(files: list[Path]) -> list[str]:
    """``file: docs/PAGE.md, "Section"`` of each reference whose page has no heading that is the
    section, or starts with it (a design log's heading goes on with its date)."""
    broken = []
    for path in files:
        for text in _texts(path):
            for page, section in SECTION_REFERENCE.findall(" ".join(text.split())):
                name = section.replace("`", "")
                target = ROOT / page
                headings = _headings(target) if target.is_file() else []
                if not any(re.match(re.escape(name) + r"(?!\w)", h) for h in headings):
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                    broken.append(f'{where}: {page}, "{section}"')
    return broken


def test_the_package_names_sections_that_exist() -> None:
    """A message or comment that sends the reader to a section names one the page has."""
    files = sorted((ROOT / "pytest_torchbench").rglob("*.py"))
    found = sum(
        len(SECTION_REFERENCE.findall(" ".join(text.split())))
        for path in files
        for text in _texts(path)
    )
    assert found >= 20  # the scan reads the package's references at all
    assert not broken_section_references(files)


def test_a_reference_to_a_missing_section_is_found(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        'X = \'see (docs/ci.md, "Exit statuses") and (docs/ci.md, "No such section")\'\n'
        '# split across comment lines (docs/design/counting.md, "How many calls\n'
        '# are counted"), and (docs/ci.md, "Gone\n# away")\n',
        encoding="utf-8",
    )
    assert broken_section_references([probe]) == [
        'probe.py: docs/ci.md, "No such section"',
        'probe.py: docs/ci.md, "Gone away"',
    ]
