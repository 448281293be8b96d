"""Text that came from files, made safe to show: one escaping rule for every report.

Why: keys, labels, descriptions, environment facts and function names are read back from baseline
files that anyone can commit. Printed raw, a control character rewrites the terminal (``\\x1b[2J``),
a newline forges a line of our own output, and a line starting with ``::error title=...::`` (or the
older ``##[error]``) is executed by GitHub Actions as a workflow command when it reaches the log.
:func:`safe_text` is the single rule; the terminal, Markdown and HTML reports all go through it
(Markdown and HTML add their own syntax escaping on top), and so can failure messages
(``judgement``) and metrics: import it from ``pytest_torchbench.common.text``; it imports nothing of
ours, so every layer may use it.

Also here: number formatting that never raises (NaN, infinities, 1e308 in a baseline must print as
text, not end the report in a traceback), and the rule that turns a test id into a file name
(:func:`safe_file_stem`, for traces and other artifacts).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata

__all__ = [
    "safe_text",
    "markdown_text",
    "markdown_code_block",
    "safe_number",
    "finite",
    "safe_file_stem",
    "one_line",
    "natural_key",
]

# C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi overrides that can
# reorder or split what a reader sees; and lone surrogates (JSON's "\udc80" reads back as one),
# which no UTF-8 terminal, log or report file can take: writing one raises UnicodeEncodeError.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# A workflow command is recognised after leading whitespace: "::cmd ...::" and the legacy "##[cmd]".
_COMMAND_START = re.compile(r"^(\s*)(:|#)(?=:|#\[)")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: object) -> str:
    """``value`` as one printable line: control characters as ``\\xNN`` escapes (lone surrogates as
    ``\\udNNN``), and a leading ``::`` or ``##[`` broken (its first character escaped) so it can
    never start a workflow command, wherever on a line the text lands."""
    text = _CONTROL.sub(_escape_control, str(value))
    return _COMMAND_START.sub(
        lambda m: m.group(1) + ("\\x3a" if m.group(2) == ":" else "\\x23"), text
    )


# Markdown punctuation that can open emphasis, links, code, tables or headings (HTML: entities).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")


def one_line(text: str, most: int = 300) -> str:
    """The first non-blank line of ``text``, stripped, at most ``most`` characters (an error
    message in a verdict or a closing block; not escaped: :func:`safe_text` is applied where it is
    shown, and a line escaped first is cut after escaping)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= most else first[: most - 1] + "…"


def markdown_text(value: object) -> str:
    """Text for a Markdown line or table cell: :func:`safe_text`, then Markdown and HTML syntax
    escaped (``<``, ``>`` and ``&`` as entities, so no tag from a file is ever rendered)."""
    text = safe_text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def markdown_code_block(lines: list[str]) -> list[str]:
    """A fenced code block that no content can close: each line through :func:`safe_text`, and a
    fence longer than any run of backticks inside (CommonMark's rule)."""
    body = [safe_text(line) for line in lines]
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *body, fence]


def finite(value: object) -> bool:
    """A real, finite number (reports draw and scale only those)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def safe_number(value: object, spec: str = "g") -> str:
    """``format(value, spec)`` that never raises: NaN, inf and non-numbers print as text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return safe_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    try:
        return format(value, spec)
    except (ValueError, OverflowError):  # pragma: no cover - specs we use accept every float
        return repr(value)


# -- file names from test ids ------------------------------------------------------------------

_MAX_STEM = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_WINDOWS_RESERVED = (
    {"CON", "PRN", "AUX", "NUL"}
    | {f"COM{i}" for i in range(1, 10)}
    | {f"LPT{i}" for i in range(1, 10)}
)


def safe_file_stem(test_id: str, *, max_length: int = _MAX_STEM) -> str:
    """A file name stem for a pytest node id: readable, safe on every common filesystem,
    deterministic and unique per id.

    ``tests/a/test_x.py::TestC::test_f[param]`` becomes
    ``tests_a_test_x.py__TestC__test_f-param-<hash>`` where ``<hash>`` is 8 hex digits of the full
    id. The readable part folds characters (``/`` and ``::`` to ``_``, anything outside
    ``[A-Za-z0-9._-]`` to ``_``, trailing ``._-`` stripped), so ids such as ``test[a]``,
    ``test[a.]``, ``test[a_]`` and ``test[a-]`` share it; the hash, always appended, keeps their
    traces apart. The stem leaves room for suffixes like ``.pt.trace.json.gz`` under the 255-byte
    name limit.
    """
    if max_length < 16:
        raise ValueError("max_length must be at least 16")
    digest = hashlib.sha1(test_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    base, bracket, param = test_id.partition("[")
    if bracket and param.endswith("]"):
        param = param[:-1]

    def clean(text: str) -> str:
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        return _UNSAFE.sub("_", text)

    stem = clean(base.replace("::", "__").replace("/", "_").replace("\\", "_"))
    if bracket:
        stem += "-" + clean(param)
    stem = stem.strip("._-")
    if stem.split(".")[0].upper() in _WINDOWS_RESERVED:
        stem = "_" + stem
    if not stem:
        return f"test-{digest}"
    return stem[: max_length - 9].rstrip("._-") + "-" + digest


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers in test ids by value: ``test_mm[2]`` before
    ``test_mm[16]``, as pytest collects them, where plain string order puts ``[16]`` first."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text) if part
    )
