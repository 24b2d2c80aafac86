"""What a chapter's outputs depend on, and the fingerprint the runner records in its notebook.

A chapter's outputs are made by its cells, by the package modules those cells import (transitively, imports
inside functions included, since a chapter may call them), by the stored results those modules read from the
package's ``data/`` folder, and by the pinned libraries. :func:`chapter_dependencies` lists those files;
:func:`chapter_fingerprint` hashes them. A change to a module that a chapter never imports leaves its
fingerprint, and so its committed outputs, as they are; any change to what it does import makes it stale,
and a test (``tests/test_reproduce.py``) fails on a committed chapter whose recorded fingerprint differs.

The closure is found statically, from the source (``ast``), so it can be computed without executing the
chapter and it over-approximates rather than misses: an import in a branch that never runs still counts,
and so does a module named by a string (``"attention_dynamics.chapters.x.y:function"``, how a stored result's job
names its function). A data file counts when its name (for a folder of files, the folder's name) appears in the
source of a module of the closure: a stored result's declaration writes its files' names out
(``RESULT_FILE = "hmm_longmem.json"``, ``DATA_FOLDER = "long_tier"``), and the chapters read them through it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable

import nbformat

__all__ = ["PACKAGE_NAME", "SKIPPED_CELL_TAGS", "imported_modules", "module_closure", "chapter_dependencies",
           "chapter_fingerprint"]

PACKAGE_NAME = "attention_dynamics"
#: Cells whose source is not part of a chapter's inputs: the parameters papermill injects (recorded as
#: parameters instead) and the Colab install cell (it pins the commit, which changes on every commit).
SKIPPED_CELL_TAGS = ("injected-parameters", "colab-install")
_MODULE_STRING = re.compile(rf"^{PACKAGE_NAME}(\.[A-Za-z_]\w*)+(:\w+)?$")


def _module_file(package_dir: Path, module: str) -> Path | None:
    """Return the source file of ``attention_dynamics.<...>`` module ``module`` under ``package_dir``, or None."""
    parts = module.split(".")[1:]
    if not parts:
        return package_dir / "__init__.py"
    base = package_dir.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _with_parents(module: str) -> list[str]:
    """Return ``module`` and every package above it (importing ``a.b.c`` runs ``a`` and ``a.b`` first)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _parse(source: str) -> ast.Module:
    """Parse a module or a notebook cell, leaving out IPython's magic and shell lines (``%pip``, ``!ls``)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def imported_modules(source: str, *, module: str | None = None, is_package: bool = False) -> set[str]:
    """Return the ``attention_dynamics`` modules (and candidate submodules) that ``source`` imports.

    ``module`` is the dotted name of the file being read (None for a notebook cell), so relative imports
    resolve; ``is_package`` says the file is a package's ``__init__``. ``from x import name`` yields both ``x``
    and ``x.name`` (the latter only counts where it is a module: see :func:`module_closure`).
    """
    tree = _parse(source)
    package = (module.split(".") if is_package else module.split(".")[:-1]) if module else []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE_NAME}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE_NAME:
                continue
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names if alias.name != "*"}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            found.add(node.value.split(":")[0])
    return found


def module_closure(roots: Iterable[str], package_dir: Path) -> dict[str, Path]:
    """Return every package module that importing ``roots`` can reach, by dotted name, with its source file."""
    closure: dict[str, Path] = {}
    pending = [PACKAGE_NAME, *roots]
    while pending:
        name = pending.pop()
        for candidate in _with_parents(name):
            if candidate in closure:
                continue
            path = _module_file(package_dir, candidate)
            if path is None:  # an attribute imported by name (``from x import function``), not a module
                continue
            closure[candidate] = path
            pending.extend(imported_modules(path.read_text(encoding="utf-8"), module=candidate,
                                            is_package=path.name == "__init__.py"))
    return dict(sorted(closure.items()))


def _code_cells(nb) -> list[str]:
    return [cell.source for cell in nb.cells if cell.cell_type == "code"
            and not set(cell.metadata.get("tags", [])) & set(SKIPPED_CELL_TAGS)]


def _code_form(source: str) -> str:
    """Return what a code cell computes, without its layout and comments: the dump of its syntax tree (IPython lines
    starting with ``%`` or ``!`` kept as they are). Reformatting a cell (``make format``) or editing a comment leaves a
    chapter current; changing what the cell does makes it stale. A cell that does not parse is taken as written."""
    lines = source.splitlines()
    magics = [line.strip() for line in lines if line.lstrip().startswith(("%", "!"))]
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)
    try:
        tree = ast.dump(ast.parse(code), annotate_fields=False)
    except SyntaxError:
        return source
    return "\n".join([*magics, tree])


def _string_constants(source: str) -> set[str]:
    """Return the string literals of a module's code, docstrings left out (they name files without reading them)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def chapter_dependencies(nb_path: Path, package_dir: Path) -> dict[str, list[Path]]:
    """Return the files a chapter's outputs depend on: ``{"modules": [...], "data": [...]}`` (sorted paths).

    Modules: the closure of the package modules its code cells import. Data: the entries of the package's
    ``data/`` folder (files, or folders of files) whose name is a string literal in the code of a module of that
    closure (``RESULT_FILE = "hmm_longmem.json"``, ``DATA_FOLDER = "long_tier"``; docstrings do not count).
    """
    nb = nbformat.read(nb_path, as_version=4)
    roots: set[str] = set()
    for source in _code_cells(nb):
        roots |= imported_modules(source)
    modules = module_closure(roots, package_dir)
    literals: set[str] = set()
    for path in modules.values():
        literals |= _string_constants(path.read_text(encoding="utf-8"))
    data_dir = package_dir / "data"
    data: list[Path] = []
    for entry in sorted(data_dir.iterdir()) if data_dir.is_dir() else []:
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.name in literals:
            data.extend(sorted(p for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else [entry])
    return {"modules": sorted(modules.values()), "data": data}


def chapter_fingerprint(nb_path: Path, package_dir: Path, parameters: dict[str, Any],
                        extra_files: Iterable[Path] = ()) -> str:
    """Return a hash of everything a chapter's outputs depend on (16 hex digits).

    That is: the chapter's code cells as syntax trees (its prose is rendered around the outputs at build time and
    does not make them, nor do a cell's layout and comments: editing a sentence or reformatting leaves the chapter
    current), the package modules it imports and the data files they
    read (:func:`chapter_dependencies`), the ``extra_files`` (the pinned requirements) and the parameters injected into it. Files are hashed by their
    path relative to the package and their bytes, so moving a module changes the fingerprint too.
    """
    h = hashlib.sha256()
    nb = nbformat.read(nb_path, as_version=4)
    for source in _code_cells(nb):  # the prose is rendered around the outputs, it does not make them
        h.update(_code_form(source).encode())  # nor do the code's layout and comments
        h.update(b"\0")
    deps = chapter_dependencies(nb_path, package_dir)
    for path in [*deps["modules"], *deps["data"]]:
        h.update(path.relative_to(package_dir).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
    for path in extra_files:
        if path.exists():
            h.update(path.name.encode())
            h.update(path.read_bytes())
    h.update(json.dumps(parameters, sort_keys=True).encode())
    return h.hexdigest()[:16]
