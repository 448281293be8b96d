"""docs/troubleshooting.md stays true and complete.

- Complete: every error the package raises where a user reads it, and every ``ERROR:`` or
  ``WARNING:`` note of a run's end, has its phrase on the page. Raise sites are read with
  ``ast``: a ``raise X(message)`` whose class a user meets (a usage error, a baseline file, a
  marker, the ``torchbench`` command, ...) and whose message is written there (not
  ``str(exc)``). A message's phrase is the first clause of its first literal piece of a few
  words, so rewording the words a user searches for is noticed, and a new placeholder is not.
  Errors a user cannot meet are listed below by file and class (or phrase), each with why; a new
  kind of error must be sorted into one list or the other.
- True: each heading that quotes a message (it starts with a code span) still quotes the
  package: its longer pieces between placeholders occur in the package's string literals, so a
  reworded message cannot leave a stale heading behind.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections import Counter
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_torchbench"
PAGE = ROOT / "docs" / "troubleshooting.md"

#: Exceptions whose message a user reads as it is: pytest prints a usage error as ``ERROR: ...``,
#: the ``torchbench`` command as ``torchbench: error: ...``, a test's own error in its report.
USER_FACING = {
    "UsageError",  # the torchbench command's
    "pytest.UsageError",
    "MergeConflict",
    "BaselineError",
    "NotASetError",
    "NoCommittedBaselines",
    "HistoryError",
    "BaseError",
    "BisectError",
    "CommentError",
    "ShardError",
    "AcceptError",
    "LimitSpecError",
    "MarkerError",
    "ReportPathError",
    "FixtureAlreadyUsed",
    "StatsUnavailable",
    "ProfilerActiveError",
    "DynamoUnavailable",
    "ValgrindUnavailable",
    "UnsupportedPlatform",
    "collect.NotUnderValgrind",
    "NoCudaError",
    "InterruptedError",
}

#: Built-in exceptions that reach a user from these files: the ``benchmark`` fixture's API, the
#: profiler's options (marker ``profile=``, ``bench_profiler(...)``), a metric plugin's
#: registration (a usage error), ``TORCHBENCH_ROUNDS`` (a base that cannot be measured).
USER_FACING_IN = {
    "pytest/fixtures.py": {"TypeError", "ValueError"},
    "engines/profiler/options.py": {"TypeError", "ValueError"},
    "engines/profiler/traces.py": {"ValueError"},
    "metrics/registry.py": {"TypeError", "ValueError"},
    "pytest/turns.py": {"ValueError"},
    "engines/pycalls.py": {"RuntimeError"},
    "engines/callgrind/allocator.py": {"AllocatorBuildError"},
}

#: Raise sites a user does not meet as such, by (file, class): why each group is left out.
INTERNAL = {
    # Checks of values read from a baseline or --bench-json file: their message becomes the
    # "(...)" of "baseline file PATH is malformed (...)" or of a shard's "cannot be read",
    # which the page covers.
    ("common/vocabulary.py", "ValueError"),
    ("common/vocabulary.py", "TypeError"),
    ("metrics/metric.py", "ValueError"),
    ("metrics/compile.py", "ValueError"),
    ("metrics/gpu_time.py", "ValueError"),
    ("metrics/instructions.py", "ValueError"),
    ("metrics/memory.py", "ValueError"),
    ("metrics/time.py", "ValueError"),
    ("judging/results.py", "ValueError"),
    ("judging/results.py", "UnknownMetricError"),
    ("store/storage.py", "ValueError"),
    ("store/storage.py", "_DuplicateKey"),
    ("store/storage.py", "_WriteInterrupted"),
    ("common/compat.py", "ValueError"),  # pytest's -k parser's own message, quoted by history
    # Invariants of the engines and statistics: the plugin's callers never break them.
    ("common/statistics.py", "ValueError"),
    ("common/text.py", "ValueError"),
    ("engines/callgrind/collect.py", "ValueError"),
    ("engines/callgrind/collect.py", "DumpNotFound"),
    ("engines/callgrind/collect.py", "NotUnderValgrind"),  # the engine's API; metrics say it
    ("engines/callgrind/launch.py", "FileNotFoundError"),
    ("engines/dynamo.py", "ValueError"),
    ("engines/profiler/iterations.py", "ValueError"),
    ("engines/profiler/kernels.py", "RuntimeError"),
    ("engines/profiler/memory.py", "RuntimeError"),
    ("engines/profiler/ops.py", "RuntimeError"),
    ("engines/profiler/traces.py", "RuntimeError"),
    ("engines/pycalls.py", "ValueError"),
    ("engines/callgrind/worker.py", "RuntimeError"),
    # The parts of a metric: what a metric that does not alternate, answer a Timer method or
    # count dumps is never asked.
    ("metrics/judge.py", "NotImplementedError"),
    ("metrics/measuring.py", "NotImplementedError"),
    # A module's __getattr__ for names it does not have: Python's own AttributeError.
    ("engines/callgrind/__init__.py", "AttributeError"),
    ("pytest/fixtures.py", "AttributeError"),
}

#: Messages of user-facing classes that a user cannot meet: (file, phrase), and why.
INTERNAL_PHRASES = {
    # Which of the plugin's own code paths took a profile: never given by a user.
    ("engines/profiler/traces.py", "profile source must be one of"),
}

#: The shortest literal piece that counts as a message's phrase.
SHORTEST = 12
#: A phrase is cut at the first clause's end after this many characters.
CLAUSE = 20
#: A first phrase this many messages share is a lead-in, not what tells them apart.
LEAD_IN = 3


def _pieces(node: ast.expr) -> list[str] | None:
    """The literal pieces of a message (a string, an f-string, or a sum of them), in order; a
    placeholder between pieces is an empty string. None when the message is not written here
    (``str(exc)``: the message of an error raised elsewhere, which is read there)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value if isinstance(v, ast.Constant) else "" for v in node.values]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pieces(node.left), _pieces(node.right)
        return None if left is None else [*left, "", *(right or [])]
    if isinstance(node, (ast.List, ast.ListComp)):  # ShardError and MergeConflict take lines
        element = node.elts[0] if isinstance(node, ast.List) and node.elts else None
        element = node.elt if isinstance(node, ast.ListComp) else element
        return _pieces(element) if element is not None else None
    return None


def _text(piece: str) -> str:
    return " ".join(piece.replace("`", "").split())


def candidates(pieces: list[str]) -> list[str]:
    """The phrases a message could be found by, best first: the first clause of each literal
    piece of at least :data:`SHORTEST` characters and two words (an option's name alone, such
    as ``--bench-rounds=``, is on the page anyway), else its longest piece; none when no piece
    says anything."""
    cleaned = [_text(p).strip(" :;,.()'\"=") for p in pieces]
    found = [_first_clause(p) for p in cleaned if len(p) >= SHORTEST and " " in p]
    longest = max(cleaned, key=len, default="")
    return found or ([longest] if len(longest) >= 4 else [])


def phrase(pieces: list[str], shared: Collection[str] = ()) -> str | None:
    """A message's phrase: the words a user searches the page for. A lead-in that several
    messages share (``baseline file PATH ...``) tells them apart by the next piece."""
    found = candidates(pieces)
    if len(found) > 1 and found[0] in shared:
        return found[1]
    return found[0] if found else None


def _first_clause(piece: str) -> str:
    """``piece`` up to its first clause's end: ``; `` or `` (`` after :data:`SHORTEST`
    characters, ``: `` or ``, `` after :data:`CLAUSE` (``benchmark.pedantic: ...`` is one
    clause): the head of a sentence, which the page quotes whole."""
    ends = [
        i
        for sep, start in (("; ", SHORTEST), (" (", SHORTEST), (": ", CLAUSE), (", ", CLAUSE))
        if (i := piece.find(sep, start)) >= 0
    ]
    return piece[: min(ends)] if ends else piece


#: Calls that print their message without a raise: pytest's exit and the plugin's warnings.
SAID = ("pytest.exit", "TorchbenchWarning")


def raise_sites(root: Path = PACKAGE) -> Iterator[tuple[str, int, str, list[str] | None]]:
    """(file relative to ``root``, line, class as written, the message's pieces) of every
    ``raise X(...)`` and every call of :data:`SAID` under ``root``."""
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                call = node.exc
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in SAID:
                call = node
            if call is None:
                continue
            name = ast.unparse(call.func)
            yield relative, node.lineno, name, _pieces(call.args[0]) if call.args else None


#: How a note at the end of a run starts when it reports a failure or a gap.
NOTE_PREFIX = re.compile(r"^(?:torchbench: )?(?:ERROR|WARNING): ")


def note_lines(root: Path = PACKAGE) -> Iterator[tuple[str, int, str, list[str]]]:
    """(file, line, "note", the pieces after the prefix) of every string that starts as an
    ``ERROR:`` or ``WARNING:`` note does: the run's and ``torchbench``'s end-of-run lines."""
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in inner or not isinstance(node, (ast.Constant, ast.JoinedStr)):
                continue
            pieces = _pieces(node)
            if pieces and NOTE_PREFIX.match(pieces[0]):
                yield relative, node.lineno, "note", [NOTE_PREFIX.sub("", pieces[0]), *pieces[1:]]


def user_facing(relative: str, name: str) -> bool:
    """Whether a ``raise name(...)`` in ``relative`` reaches a user (:data:`SAID` always)."""
    return name in USER_FACING or name in USER_FACING_IN.get(relative, set()) or name in SAID


def page_text() -> str:
    return _text(PAGE.read_text(encoding="utf-8"))


def missing_phrases(page: str, root: Path = PACKAGE) -> list[str]:
    """``file:line: phrase`` of every user-facing message under ``root`` whose phrase is not on
    the page."""
    sites = [
        (relative, line, name, pieces)
        for relative, line, name, pieces in raise_sites(root)
        if user_facing(relative, name) and pieces is not None
    ]
    sites += note_lines(root)
    firsts = Counter(found[0] for *_, pieces in sites if (found := candidates(pieces)))
    shared = {first for first, count in firsts.items() if count >= LEAD_IN}
    missing = []
    for relative, line, name, pieces in sites:
        found = phrase(pieces, shared)
        if found is not None and found not in page and (relative, found) not in INTERNAL_PHRASES:
            missing.append(f"{relative}:{line}: {name}: {found!r}")
    return missing


def test_every_user_facing_error_is_on_the_page() -> None:
    missing = missing_phrases(page_text())
    assert not missing, "errors docs/troubleshooting.md does not list:\n" + "\n".join(missing)


def test_every_raise_site_is_sorted_user_facing_or_internal() -> None:
    """A new kind of error (a new class, or a built-in one in another file) is a decision: list it
    on the page and in USER_FACING, or say here why a user cannot meet it."""
    unsorted = sorted(
        {
            f"{relative}: {name}"
            for relative, _, name, pieces in raise_sites()
            if pieces is not None
            and not user_facing(relative, name)
            and (relative, name) not in INTERNAL
        }
    )
    assert not unsorted, "\n".join(unsorted)


def test_a_new_usage_error_without_an_entry_fails(tmp_path: Path) -> None:
    """The check catches a usage error added without an entry: the package with one more module
    that raises one, read the same way."""
    shutil.copytree(PACKAGE, tmp_path / "package")
    (tmp_path / "package" / "probe.py").write_text(
        "import pytest\n\n\ndef f(x):\n"
        "    raise pytest.UsageError(f'--bench-frobnicate={x}: cannot frobnicate a {x}')\n",
        encoding="utf-8",
    )
    missing = missing_phrases(page_text(), tmp_path / "package")
    assert "probe.py:5: pytest.UsageError: 'cannot frobnicate a'" in missing


def test_every_internal_group_still_raises() -> None:
    """An entry of INTERNAL whose raise sites are gone is removed, so the list stays a reading of
    the code."""
    raised = {(relative, name) for relative, _, name, _ in raise_sites()}
    assert INTERNAL - raised == set()


def _package_literals() -> list[str]:
    """Every literal piece of every string in the package, whitespace and backticks normalized."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(_text(node.value))
    return found


#: The words the page writes in place of a value (``baseline file PATH``), and "...".
PLACEHOLDERS = """
    A B C F K L N P T X CC CMD DIR TOP PATH NAME REV REF SET KIND FIELD VALUE REASON TYPE MESSAGE
    TEST TESTS METRIC METRICS MODES OPTION PART SPEC SHARD SUBJECT TEXT CAUSE WHAT WHY PLUGIN
    MODULE FUNCTION EXPR GOOD BAD FACT OLD NEW KEYS VERSION LISTING M
""".split()
PLACEHOLDER = re.compile(r"\.\.\.|\{[^}]*\}|\b(?:" + "|".join(PLACEHOLDERS) + r")\b")
#: What the terminal puts before a message (pytest's usage error, the run's notes, pytest's
#: internal error), and the class that pytest shows before an exception's message
#: (``FixtureAlreadyUsed: ...``).
PRINTED_PREFIX = re.compile(
    r"^(?:ERROR: |torchbench: (?:error: |ERROR: |WARNING: )?|INTERNALERROR> )?"
    r"(?:[a-z_.]*[A-Z][a-z]+[A-Z]\w*: )?"
)


#: A Markdown code span: `text`, or ``text with `backticks` in it``.
CODE_SPAN = re.compile(r"(`+)\s?(.+?)\s?\1(?!`)")


def quoted_headings() -> list[tuple[str, list[str]]]:
    """(heading, its code spans) of every heading that starts with a quoted message."""
    found = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("### `"):
            found.append((line, [m.group(2) for m in CODE_SPAN.finditer(line)]))
    return found


def stale_pieces(literals: list[str]) -> list[str]:
    """Each quoted heading's longer pieces (between placeholders) that no package literal holds."""
    stale = []
    for heading, spans in quoted_headings():
        for span in spans:
            text = PRINTED_PREFIX.sub("", _text(span))
            pieces = [p.strip(" :;,.()'\"=/") for p in PLACEHOLDER.split(text)]
            longest = max(pieces, key=len)
            for piece in {longest, *(p for p in pieces if len(p) >= 2 * SHORTEST)}:
                if not any(piece in literal for literal in literals):
                    stale.append(f"{heading}: {piece!r}")
    return stale


def test_quoted_headings_still_quote_the_package() -> None:
    assert len(quoted_headings()) >= 40
    stale = stale_pieces(_package_literals())
    assert not stale, "headings whose message the package no longer prints:\n" + "\n".join(stale)


def test_a_reworded_message_leaves_a_stale_heading() -> None:
    literals = [
        literal.replace("is not valid JSON", "is not JSON") for literal in _package_literals()
    ]
    assert any("is not valid JSON" in line for line in stale_pieces(literals))


@pytest.mark.parametrize(
    "pieces, expected",
    [
        (["baseline file ", "", " is not valid JSON (", "", "); ", ""], "is not valid JSON"),
        (["", ": ", "", "=", "", " must be ", "", " ", ""], "must be"),
        (["", ""], None),
        (["bisect: ", "", " is not a commit of ", ""], "is not a commit of"),
    ],
)
def test_phrase(pieces: list[str], expected: str | None) -> None:
    assert phrase(pieces, shared={"baseline file"}) == expected
