"""Which copy of the project a benchmarking run imports: its own git tree's, found first.

Why: a base measured in the job runs in a worktree of REV and must import REV's code from there,
and the run it is compared with must import the checkout's code the same way. Otherwise the two
sides measure different copies (the worktree's source against a release installed in
site-packages, or another checkout's editable install on a shared runner), and lay out the
import path differently: code that tries an optional import in every call (torchrl's losses do,
twice per forward) scans every entry of ``sys.path`` each time, so one entry more on the base's
side made an unchanged commit count more instructions than the limit allows
(docs/design/measurements.md, "A measured base counts like the checkout"). So every
benchmarking process (the user's run, a base run, a round's head run) puts its own tree first
the same way, at the same point of its start (:func:`put_first`, from
``pytest_load_initial_conftests``): the checkout for the user's run, the worktree for a base
run. Processes it starts inherit the order: the environment's ``PYTHONPATH`` for all of them,
and xdist's copy of ``sys.path`` for its local workers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..common.compat import xdist_worker_sys_path
from ..store.refs import git_toplevel

__all__ = [
    "tree_entries",
    "own_tree",
    "put_first",
    "map_pythonpath",
    "first_import_outside",
    "inside",
]


def tree_entries(tree: Path) -> list[str]:
    """The import path entries of a project's tree, in order: its ``src/`` (when there is one) and
    its top folder."""
    return [*([str(tree / "src")] if (tree / "src").is_dir() else []), str(tree)]


def own_tree(rootdir: Path) -> Path | None:
    """The git tree pytest's rootdir lies in (the checkout, or a base run's worktree); None
    outside git."""
    return git_toplevel(rootdir)


def put_first(entries: Sequence[str]) -> None:
    """Put ``entries`` first on this process's import path, where ``PYTHONPATH``'s entries go
    (after ``sys.path[0]``, the script's folder or the current one), and at the front of
    ``PYTHONPATH`` for the processes it starts. Nothing changes where they already are there: a
    process started with them in its environment (a base run, a re-run) has them in place
    already, so it ends with the same ``sys.path`` as one that put them there itself."""
    entries = list(entries)
    if not entries:
        return
    current = os.environ.get("PYTHONPATH", "")
    parts = current.split(os.pathsep) if current else []
    if parts[: len(entries)] != entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([*entries, *parts])
    for path_list in (sys.path, xdist_worker_sys_path()):
        if path_list is not None and path_list[1 : 1 + len(entries)] != entries:
            path_list[1:1] = entries


def map_pythonpath(value: str, checkout: Path, worktree: Path) -> str:
    """``PYTHONPATH`` for a base run: each entry inside the checkout as the same entry in the
    worktree (the base imports REV's code from where the head imports the checkout's), others
    as they are; the same entries in the same order, so both sides scan the same number."""
    if not value:
        return value
    mapped = []
    for entry in value.split(os.pathsep):
        try:
            relative = (
                Path(entry).resolve().relative_to(checkout.resolve())
                if os.path.isabs(entry)
                else None
            )
        except (ValueError, OSError):
            relative = None
        mapped.append(entry if relative is None else str(worktree / relative))
    return os.pathsep.join(mapped)


def inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def first_import_outside(names: Iterable[str], tree: Path) -> tuple[str, str] | None:
    """Of the top-level packages ``names`` (the project's), the first that this process imported,
    or would import, from outside ``tree``, as (name, file); None when each comes from the tree
    or is not importable here. A package imported before the tree went first (by a ``.pth``
    file or a ``sitecustomize``), or found by an import hook placed ahead of ``sys.path``, is
    one."""
    tree = tree.resolve()
    for name in sorted(names):
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None) if module is not None else _would_load(name)
        if not isinstance(file, str) or not os.path.isabs(file):
            continue
        try:
            if not inside(Path(file).resolve(), tree):
                return name, file
        except OSError:
            continue
    return None


def _would_load(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a broken finder or package: not ours to judge here
        return None
    return spec.origin if spec is not None and spec.has_location else None
