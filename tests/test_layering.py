"""The package's layers are its folders: every import runs downward (or within its folder).

Bottom up: ``common/`` (the shared vocabulary, text, statistics, the private APIs used); the
engines; the metrics and their registry; ``judging/`` (the results model, judgement, the gate)
and ``store/``; the reports; the pytest glue (``pytest/``) and the command line on top. The
package's ``__init__`` (the public API) sits with the results model. No module outside a folder
but the command line's (``cli``, ``bisect``, ``comment``, ``__main__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_torchbench"

#: bottom up: (layer, its folders or top-level modules); a module is in the layer of its folder
LAYERS = (
    ("common: vocabulary, text, statistics, compat", ("pytest_torchbench.common",)),
    ("engines", ("pytest_torchbench.engines",)),
    ("metrics and their registry", ("pytest_torchbench.metrics",)),
    ("judging and storage", ("pytest_torchbench.judging", "pytest_torchbench.store")),
    ("reports", ("pytest_torchbench.reports",)),
    (
        "pytest glue and the command line",
        (
            "pytest_torchbench.pytest",
            "pytest_torchbench.cli",
            "pytest_torchbench.bisect",
            "pytest_torchbench.comment",
            "pytest_torchbench.__main__",
        ),
    ),
)
#: the package itself (``__init__.py``: the public API) is in this layer
ROOT_LAYER = 3
#: top-level modules left outside the folders, with the layer their imports put them in
UNPLACED: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """The package's modules that ``path`` imports (relative imports resolved, ``from . import x``
    counted as module ``x`` where it is one)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            for alias in node.names:
                found.add(f"{name}.{alias.name}" if f"{name}.{alias.name}" in MODULES else name)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "pytest_torchbench" and name != module}


def _layer(module: str) -> int | None:
    if module in UNPLACED:
        return UNPLACED[module]
    if module == "pytest_torchbench":
        return ROOT_LAYER
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def test_every_module_is_in_a_layer() -> None:
    assert [m for m in MODULES if _layer(m) is None] == [], "put the module in a layer's folder"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_downward(module: str) -> None:
    own = _layer(module)
    assert own is not None
    upward = sorted(
        f"{name} ({LAYERS[layer][0]})"
        for name in _imports(module, MODULES[module])
        if (layer := _layer(name)) is not None and layer > own
    )
    assert upward == [], f"{module} ({LAYERS[own][0]}) imports from above: {upward}"


def test_the_folders_exist() -> None:
    for folder in ("common", "engines", "metrics", "judging", "store", "reports", "pytest"):
        assert (PACKAGE / folder / "__init__.py").is_file(), folder


def test_every_folder_is_one_layer() -> None:
    """A layer is named by folders (and the command line's top-level modules), never by a module
    inside a folder, so a folder cannot hold two layers again."""
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    named = [prefix for _, prefixes in LAYERS for prefix in prefixes]
    inside = [p for p in named if p.count(".") > 1]
    assert inside == []
    assert folders <= {p.split(".")[1] for p in named}, "give the new folder a layer"


def _top_level_imports(path: Path) -> set[str]:
    """The first part of every module name ``path`` imports, standard library included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", sorted((PACKAGE / "judging").glob("*.py")), ids=lambda p: p.name)
def test_judging_neither_imports_pytest_nor_starts_a_process(path: Path) -> None:
    """The verdict path is pure: pytest and child processes are the glue's (``pytest/children.py``
    starts every child pytest)."""
    found = _top_level_imports(path) & {"pytest", "_pytest", "subprocess"}
    assert not found, f"{path.name} imports {sorted(found)}"


def test_the_import_check_sees_subprocess() -> None:
    assert "subprocess" in _top_level_imports(PACKAGE / "pytest" / "children.py")
