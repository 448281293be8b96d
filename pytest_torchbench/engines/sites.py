"""Which frame of a stack is the user's code, and how a call site is named: shared by the op call
sites (``profiler.ops``) and the Python call sites (``pycalls``). No torch here: the Python-calls
engine runs without it.
"""
from __future__ import annotations

import os
import sys
import types
from pathlib import Path

__all__ = ["skipped_dirs", "site_name", "user_frame"]

#: This plugin's own folder (``pytest_torchbench/``), with a trailing separator.
PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _package_dir(module: types.ModuleType | None) -> str | None:
    file = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(file)) + os.sep if file else None


def skipped_dirs() -> tuple[str, ...]:
    """Folders whose frames are never the user's: torch, pytest, pluggy and this plugin."""
    dirs = [_package_dir(sys.modules.get(name)) for name in ("torch", "_pytest", "pytest", "pluggy")]
    dirs.append(PLUGIN_DIR)
    return tuple(d for d in dirs if d)


def user_frame(frame: types.FrameType | None, skipped: tuple[str, ...]) -> tuple[str, int, str] | None:
    """The innermost frame, from ``frame`` outwards, that is the user's code: not in ``skipped``
    folders, not in an installed package (``site-packages``, ``dist-packages``), not frozen or
    generated (``<string>``). (absolute path, line, function) or None."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            path = os.path.abspath(filename)
            installed = f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path
            if not installed and not path.startswith(skipped):
                return path, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


def site_name(site: tuple[str, int, str], root: Path) -> str:
    """``path:line in function``, the path relative to ``root`` when under it."""
    path, line, function = site
    try:
        shown = Path(path).relative_to(root).as_posix()
    except ValueError:
        shown = Path(path).as_posix()
    return f"{shown}:{line} in {function}"
