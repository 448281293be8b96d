"""Text that came from files, made safe to show: one escaping rule for every report.

Why: keys, labels, descriptions, environment facts and function names are read back from baseline
files that anyone can commit. Printed raw, a control character rewrites the terminal (``\\x1b[2J``),
a newline forges a line of our own output, and a line starting with ``::error title=...::`` (or the
older ``##[error]``) is executed by GitHub Actions as a workflow command when it reaches the log.
:func:`safe_text` is the single rule; the terminal, Markdown and HTML reports all go through it
(Markdown and HTML add their own syntax escaping on top), and so can failure messages
(``judgement``) and metrics: import it from ``pytest_torchbench.text`` (``reports.text`` re-exports
it); it imports nothing of ours, so every layer may use it.

Also here: number formatting that never raises (NaN, infinities, 1e308 in a baseline must print as
text, not end the report in a traceback).
"""
from __future__ import annotations

import math
import re

__all__ = ["safe_text", "markdown_text", "markdown_code_block", "safe_number", "finite"]

# C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi overrides that can
# reorder or split what a reader sees.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# A workflow command is recognised after leading whitespace: "::cmd ...::" and the legacy "##[cmd]".
_COMMAND_START = re.compile(r"^(\s*)(:|#)(?=:|#\[)")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: object) -> str:
    """``value`` as one printable line: control characters as ``\\xNN`` escapes, and a leading
    ``::`` or ``##[`` broken (its first character escaped) so it can never start a workflow command,
    wherever on a line the text lands."""
    text = _CONTROL.sub(_escape_control, str(value))
    return _COMMAND_START.sub(lambda m: m.group(1) + ("\\x3a" if m.group(2) == ":" else "\\x23"), text)


# Markdown punctuation that can open emphasis, links, code, tables or headings (HTML: entities).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")


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
