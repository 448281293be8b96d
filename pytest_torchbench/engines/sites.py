"""Which frame of a stack is the user's code, and how a call site is named: shared by the op call
sites (``profiler.ops``) and the Python call sites (``pycalls``). No torch here: the Python-calls
engine runs without it.

The user's code is what is neither torch, pytest (with pluggy, xdist, execnet) nor this plugin, nor
Python's standard library, nor an installed package (``site-packages``): except the project's own
packages (``own_dirs``), which are the user's code wherever they are installed. Why: a library
tested as CI installs it (``pip install .``, not editable) lives in site-packages, and its lines
are the ones a failure must name. Why the standard library by its folder: 3.11+ freezes the
modules every start imports (``os``, ``runpy``: ``<frozen os>``, never a user's file), 3.10 does
not, and there ``os.py`` and ``runpy.py`` were named as the user's lines.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable
from pathlib import Path

from .base_code import BASE_MARK

__all__ = [
    "Site",
    "chain_locations",
    "chain_name",
    "locate",
    "own_dirs",
    "relocated",
    "skipped_dirs",
    "site_name",
    "user_frame",
]

#: This plugin's own folder (``pytest_torchbench/``), with a trailing separator.
PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

#: (absolute path, line, function) of one frame.
Site = tuple[str, int, str]

#: Why no site: no frame of the user's code on the stack, and none of an installed package either.
ONLY_TORCH = "site unknown: only torch, pytest, the standard library or generated frames"

_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")

#: The standard library's folders (with a trailing separator); site-packages lies inside them on
#: POSIX and is told apart by :data:`_INSTALLED`.
_STDLIB = tuple(
    dict.fromkeys(
        os.path.abspath(folder).rstrip(os.sep) + os.sep
        for folder in (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib"))
        if folder
    )
)


def _package_dir(module: types.ModuleType | None) -> str | None:
    file = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(file)) + os.sep if file else None


def skipped_dirs() -> tuple[str, ...]:
    """Folders whose frames are never the user's: torch, pytest and what runs it (pluggy, xdist,
    execnet) and this plugin."""
    dirs = [
        _package_dir(sys.modules.get(name))
        for name in ("torch", "_pytest", "pytest", "pluggy", "xdist", "execnet")
    ]
    dirs.append(PLUGIN_DIR)
    return tuple(d for d in dirs if d)


def own_dirs(packages: Iterable[str]) -> tuple[str, ...]:
    """Where the project's own top-level ``packages`` are, as imported in this process: their
    folders (with a trailing separator) or, for a single-file module, its file. A name that is not
    importable gives nothing (the names may be guesses from the project's metadata); folders of
    torch, pytest or this plugin never count as the user's."""
    found: list[str] = []
    skipped = skipped_dirs()
    for name in dict.fromkeys(packages):
        module = sys.modules.get(name)
        locations: list[str] = []
        if module is not None and getattr(module, "__path__", None) is not None:
            locations = list(module.__path__)
        elif module is not None and getattr(module, "__file__", None):
            locations = [str(module.__file__)]
        else:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            if spec is not None and spec.submodule_search_locations:
                locations = list(spec.submodule_search_locations)
            elif spec is not None and spec.origin and os.path.isabs(spec.origin):
                locations = [spec.origin]
        for location in locations:
            path = os.path.abspath(location)
            if os.path.isdir(path):
                path = path.rstrip(os.sep) + os.sep
            if not (path + os.sep).startswith(skipped) and path not in found:
                found.append(path)
    return tuple(found)


def _installed(path: str) -> bool:
    return any(part in path for part in _INSTALLED)


def _installed_package(path: str) -> str:
    """The top-level name of the installed package a file belongs to (``numpy`` for
    ``.../site-packages/numpy/core/x.py``)."""
    for part in _INSTALLED:
        if part in path:
            first = path.rsplit(part, 1)[1].split(os.sep, 1)[0]
            return first[:-3] if first.endswith(".py") else first
    return "?"


@functools.lru_cache(maxsize=4096)
def _kind(
    filename: str, skipped: tuple[str, ...], own: tuple[str, ...]
) -> tuple[str, bool, str | None]:
    """(absolute path, whether it is the user's code, the installed package it is in or None):
    memoised, because the call sites look up every frame of the stack at every call."""
    path = os.path.abspath(filename)
    if path.startswith(skipped):
        return path, False, None
    if not _installed(path) and path.startswith(_STDLIB):
        return path, False, None
    installed = _installed_package(path) if _installed(path) else None
    return path, installed is None or path.startswith(own), installed


def user_frame(
    frame: types.FrameType | None, skipped: tuple[str, ...], own: tuple[str, ...] = ()
) -> Site | None:
    """The innermost frame, from ``frame`` outwards, that is the user's code: not in ``skipped``
    folders, not in an installed package (``site-packages``, ``dist-packages``) unless in one of
    the project's own (``own``, from :func:`own_dirs`), not frozen or generated (``<string>``).
    (absolute path, line, function) or None."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            path, user, _ = _kind(filename, skipped, own)
            if user:
                return path, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


def locate(
    frame: types.FrameType | None,
    skipped: tuple[str, ...],
    own: tuple[str, ...] = (),
    caller: Site | None = None,
) -> tuple[Site, Site | None] | str:
    """Where a call comes from: (the innermost frame of the user's code, the test's line that led
    there or None), or, when the stack holds no frame of the user's code, why, in a short phrase.

    The test's line (the outermost frame of the user's code that is not installed) is given only
    when the innermost one is inside an installed copy of the project's package: that path is not
    one the user edits nor one their tests name, so the line of their test that led there is shown
    too. ``caller`` (the line that called ``benchmark``) stands for it when the stack does not
    reach the test (the callable is re-run after the test for its call sites), and is the site of
    what the plugin calls straight (``benchmark(torch.mm, x, y)``)."""
    inner: Site | None = None
    test_line: Site | None = None
    installed: str | None = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            path, user, package = _kind(filename, skipped, own)
            if user:
                here = (path, frame.f_lineno, frame.f_code.co_name)
                if package is None:
                    if inner is None:
                        return here, None  # the project's own file: nothing more to look for
                    test_line = here
                elif inner is None:
                    inner = here
            elif installed is None and inner is None and package is not None:
                installed = package
        frame = frame.f_back
    if inner is None:
        if installed is not None:
            return (
                f"site unknown: in installed package '{installed}' "
                f"(yours? --bench-sites={installed})"
            )
        # torch called straight by the plugin: ``benchmark(torch.mm, x, y)``'s line is the site
        return (caller, None) if caller is not None else ONLY_TORCH
    return inner, test_line if test_line is not None else caller


def _shown_path(path: str, root: Path) -> str:
    """``path`` relative to ``root`` when under it, else to the ``sys.path`` entry it was imported
    from (``mylib/ops.py`` rather than a virtualenv's absolute path), else as it is."""
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        pass
    entries = sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True)
    for entry in entries:
        base = entry.rstrip(os.sep) + os.sep
        if path.startswith(base) and _installed(base):
            return Path(path[len(base) :]).as_posix()
    return Path(path).as_posix()


def site_name(site: Site, root: Path) -> str:
    """``path:line in function``, the path relative to ``root`` when under it (to its
    site-packages folder when installed)."""
    path, line, function = site
    return f"{_shown_path(path, root)}:{line} in {function}"


def chain_name(located: tuple[Site, Site | None] | str, root: Path) -> str:
    """A :func:`locate` answer as text: ``mylib/ops.py:12 in f, from test_a.py:8 in test_f``, or
    the reason there is no site."""
    if isinstance(located, str):
        return located
    inner, outer = located
    name = site_name(inner, root)
    return f"{name}, from {site_name(outer, root)}" if outer is not None else name


#: :func:`chain_name`'s text: ``path:line in function``, maybe followed by ``, from `` and another.
#: The path is the shortest that fits, so a folder named ``runs, from 2024`` stays in the path.
_SITE_TEXT = re.compile(r"(?P<path>.+?):(?P<line>\d+) in (?P<function>\S+)(?:, from (?P<rest>.+))?")


def chain_locations(name: str) -> list[tuple[str, int]]:
    """The (path, line) pairs a :func:`chain_name` text names, inner site first: its inverse, for
    matching a site shown to the user with the lines changed since a revision. A reason (no site)
    names none."""
    found = []
    while name:
        match = _SITE_TEXT.fullmatch(name)
        if match is None:
            break
        found.append((match["path"], int(match["line"])))
        name = match["rest"] or ""
    return found


def relocated(name: str, line_of: Callable[[str, int], int | None]) -> tuple[str, bool]:
    """A :func:`chain_name` text whose locations in the base revision's code (a path ending in
    ``base_code.BASE_MARK``) are renamed to the checkout's lines: ``line_of(path, line)``, or None
    for a line removed since (it keeps the base's number); and whether one was removed."""
    parts = []
    removed = False
    while name:
        match = _SITE_TEXT.fullmatch(name)
        if match is None:
            break
        path, line = match["path"], int(match["line"])
        if path.endswith(BASE_MARK):
            path = path[: -len(BASE_MARK)]
            now = line_of(path, line)
            removed = removed or now is None
            line = line if now is None else now
        parts.append(f"{path}:{line} in {match['function']}")
        name = match["rest"] or ""
    return ", from ".join([*parts, name] if name else parts), removed
