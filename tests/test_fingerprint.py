"""What a chapter depends on, and that every committed chapter is what the code at HEAD makes.

What it protects: ``make book`` on a fresh clone executes nothing (every committed chapter's recorded fingerprint
equals the one its inputs give now), and the fingerprint changes exactly when something the chapter uses changes:
a module it imports (directly or not), a stored result such a module reads, its own code cells, the pinned
requirements; and not when a module it never imports changes, nor when its prose does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_dynamics.book.fingerprint import chapter_dependencies, chapter_fingerprint, imported_modules
from attention_dynamics.book.notebooks import METADATA_KEY, book_chapters, input_hash
from attention_dynamics.core.paths import PACKAGE_DIR, REPO_ROOT


@pytest.mark.parametrize("chapter", book_chapters(REPO_ROOT), ids=lambda c: c.name)
def test_every_committed_chapter_is_current(chapter):
    recorded = json.loads(chapter.path.read_text(encoding="utf-8"))["metadata"].get(METADATA_KEY, {})
    now = input_hash(chapter.path, PACKAGE_DIR, {}, [REPO_ROOT / "requirements.txt"])
    assert recorded.get("input_hash") == now, (
        f"{chapter.path.name} is stale: its inputs changed since it was executed (recorded "
        f"{recorded.get('input_hash')}, now {now}); re-execute it: python -m attention_dynamics reproduce "
        f"--chapter {chapter.number}")


def _toy_package(root: Path) -> Path:
    pkg = root / "attention_dynamics"
    (pkg / "data").mkdir(parents=True)
    (pkg / "sub").mkdir()
    (pkg / "__init__.py").write_text('"""A toy package."""\n')
    (pkg / "used.py").write_text("from .sub import deep\n\nFILE = 'stored.json'\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("def f():\n    from ..lazy import g\n    return g()\n")
    (pkg / "lazy.py").write_text("def g():\n    return 1\n")
    (pkg / "unused.py").write_text("X = 1\n")
    (pkg / "data" / "stored.json").write_text("{}\n")
    (pkg / "data" / "other.json").write_text("{}\n")
    return pkg


def _toy_chapter(path: Path) -> Path:
    nb = new_notebook(cells=[new_markdown_cell("# Toy"), new_code_cell("from attention_dynamics import used")])
    nbformat.write(nb, path)
    return path


def test_dependencies_follow_imports_lazy_ones_included_and_the_data_they_name(tmp_path):
    pkg = _toy_package(tmp_path)
    deps = chapter_dependencies(_toy_chapter(tmp_path / "ch.ipynb"), pkg)
    names = {p.relative_to(pkg).as_posix() for p in deps["modules"]}
    assert names == {"__init__.py", "used.py", "sub/__init__.py", "sub/deep.py", "lazy.py"}
    assert [p.name for p in deps["data"]] == ["stored.json"]


@pytest.mark.parametrize("edit, changes", [
    ("unused.py", False), ("data/other.json", False),
    ("lazy.py", True), ("sub/deep.py", True), ("data/stored.json", True),
])
def test_fingerprint_moves_exactly_with_what_the_chapter_uses(tmp_path, edit, changes):
    pkg = _toy_package(tmp_path)
    chapter = _toy_chapter(tmp_path / "ch.ipynb")
    before = chapter_fingerprint(chapter, pkg, {})
    target = pkg / edit
    target.write_text(target.read_text() + "\n# edited\n" if target.suffix == ".py" else '{"edited": 1}\n')
    assert (chapter_fingerprint(chapter, pkg, {}) != before) is changes


def test_fingerprint_moves_with_cells_parameters_and_requirements(tmp_path):
    pkg = _toy_package(tmp_path)
    chapter = _toy_chapter(tmp_path / "ch.ipynb")
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.13.0\n")
    base = chapter_fingerprint(chapter, pkg, {}, [req])
    assert chapter_fingerprint(chapter, pkg, {"seed": 1}, [req]) != base
    req.write_text("torch==2.14.0\n")
    assert chapter_fingerprint(chapter, pkg, {}, [req]) != base
    nb = nbformat.read(chapter, as_version=4)
    nb.cells[0].source += " (edited)"  # the prose: rendered around the outputs, it does not make them
    nbformat.write(nb, chapter)
    assert chapter_fingerprint(chapter, pkg, {}) == chapter_fingerprint(_toy_chapter(tmp_path / "b.ipynb"), pkg, {})
    nb.cells[1].source = "from  attention_dynamics  import (used)  # reformatted, commented"
    nbformat.write(nb, chapter)
    assert chapter_fingerprint(chapter, pkg, {}) == chapter_fingerprint(_toy_chapter(tmp_path / "b.ipynb"), pkg, {})
    nb.cells[1].source += "\nx = 1"  # a code cell: the outputs may change
    nbformat.write(nb, chapter)
    assert chapter_fingerprint(chapter, pkg, {}) != chapter_fingerprint(_toy_chapter(tmp_path / "b.ipynb"), pkg, {})


def test_imports_are_read_from_source_relative_and_by_registry_string():
    src = ("import attention_dynamics.a\nfrom attention_dynamics.b import c\nfrom . import d\n"
           "NAME = 'attention_dynamics.e.f:RESULT'\n%matplotlib inline\n")
    found = imported_modules(src.replace("%matplotlib inline\n", ""), module="attention_dynamics.x")
    assert {"attention_dynamics.a", "attention_dynamics.b", "attention_dynamics.b.c", "attention_dynamics.d",
            "attention_dynamics.e.f"} <= found
    assert "attention_dynamics.a" in imported_modules(src)  # magic lines are skipped in notebook cells


def test_a_moved_module_changes_the_fingerprint(tmp_path):
    pkg = _toy_package(tmp_path)
    chapter = _toy_chapter(tmp_path / "ch.ipynb")
    before = chapter_fingerprint(chapter, pkg, {})
    shutil.move(pkg / "lazy.py", pkg / "sub" / "lazy.py")
    (pkg / "sub" / "deep.py").write_text("def f():\n    from .lazy import g\n    return g()\n")
    assert chapter_fingerprint(chapter, pkg, {}) != before
