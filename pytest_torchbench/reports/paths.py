"""Where reports may be written: a regular file or nothing yet.

Why: reports are written atomically (a temporary file renamed over the target), which silently
replaces whatever the path named — a device such as ``/dev/null`` or ``/dev/stdout``, a FIFO another
process reads. Appending (GITHUB_STEP_SUMMARY) to a FIFO blocks the run. Following a symlink would
write over whatever file it points to (a link planted in a shared folder can aim at any file the
user can write). So a report path must be absent or name a regular file that is not a link;
anything else is one clear line, decided before any benchmark runs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..common.text import safe_text
from ..store.storage import file_type_words


class ReportPathError(OSError):
    """A report path names something that is not a regular file (the message is one line).

    An OSError, so every writer's existing "cannot write" handling reports it as one line."""


def check_report_path(path: Path | str | None, option: str | None = None) -> Path | None:
    """Return the path to write, or raise :class:`ReportPathError` when ``path`` is a symlink (to
    anything) or exists and is not a regular file. The message starts
    with ``option=path: `` when ``option`` is given (else the caller names the target)."""
    if path is None:
        return None
    path = Path(path)
    shown = safe_text(f"{option}={path}: ") if option else ""
    if os.path.islink(path):
        try:
            target = f" to {safe_text(os.readlink(path))}"
        except OSError:
            target = ""
        raise ReportPathError(
            f"{shown}is a symlink{target}; a report is never written through a link (it would "
            "replace whatever file the link points to): give the file's own path, or remove the "
            "link"
        )
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return path
    except NotADirectoryError:
        return path  # a parent is a file: the writer reports "cannot write" in its own line
    except OSError as exc:
        raise ReportPathError(f"{shown}cannot inspect ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode):
        return path
    raise ReportPathError(
        f"{shown}is {file_type_words(mode)}; reports are written only to a regular file or a new "
        "path"
    )


def check_report_paths(targets: dict[str, Path | str | None]) -> None:
    """Check several report paths (``{option: path}``) at once; the first bad one raises."""
    for option, path in targets.items():
        check_report_path(path, option)


def option_targets_error(option: object, active: bool) -> str | None:
    """For the pytest options (``config.option``): the one-line error for the first report path that
    is not a regular file (``--bench-json/-markdown/-html``, and GITHUB_STEP_SUMMARY when
    benchmarking is on), else None. Called at configure time, before any benchmark runs."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY", "").strip() if active else ""
    try:
        check_report_paths(
            {
                "--bench-json": getattr(option, "bench_json", None),
                "--bench-markdown": getattr(option, "bench_markdown", None),
                "--bench-html": getattr(option, "bench_html", None),
                "GITHUB_STEP_SUMMARY": summary or None,
            }
        )
    except ReportPathError as exc:
        return str(exc)
    return None
