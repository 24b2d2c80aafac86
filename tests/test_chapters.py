"""The chapter folders (src/attention_dynamics/chapters/): one folder of the same shape per chapter of the book, and
every claim of the ledger written out literally in its chapter's folder, so that a search for an id finds where it is
recorded."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from attention_dynamics.core.paths import CLAIMS_PATH, REPO_ROOT

CHAPTERS_DIR = REPO_ROOT / "src" / "attention_dynamics" / "chapters"
SHAPE = ("settings.py", "runs.py", "report.py", "figures.py")


def chapter_folder(ledger_chapter: str) -> Path:
    """Return the folder of a ledger chapter (``"06-bayesian-manifolds"`` → ``chapters/bayesian_manifolds``)."""
    number, slug = ledger_chapter.split("-", 1)
    assert number.isdigit(), ledger_chapter
    return CHAPTERS_DIR / slug.replace("-", "_")


def _ledger() -> list[dict]:
    return json.loads(CLAIMS_PATH.read_text(encoding="utf-8"))["claims"]


def _string_literals(folder: Path) -> set[str]:
    """Every plain string literal in the folder's modules (f-strings are not literals: their parts do not count)."""
    out = set()
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        joined = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        out |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in joined}
    return out


def test_every_chapter_folder_has_the_same_shape():
    folders = sorted(p for p in CHAPTERS_DIR.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    assert len(folders) == 9
    for folder in folders:
        missing = [m for m in ("__init__.py", *SHAPE) if not (folder / m).exists()]
        assert not missing, f"{folder.name} lacks {missing}"


def test_every_ledger_chapter_has_its_folder():
    chapters = {c["chapter"] for c in _ledger()}
    assert len(chapters) == 9
    for chapter in chapters:
        assert chapter_folder(chapter).is_dir(), chapter


@pytest.mark.parametrize("chapter", sorted({c["chapter"] for c in _ledger()}))
def test_every_claim_id_is_a_literal_string_in_its_chapters_folder(chapter):
    folder = chapter_folder(chapter)
    literals = _string_literals(folder)
    text = "\n".join(p.read_text(encoding="utf-8") for p in folder.glob("*.py"))
    ids = [c["id"] for c in _ledger() if c["chapter"] == chapter]
    missing = [i for i in ids if i not in literals or f'"{i}"' not in text]
    assert not missing, f"claim ids of {chapter} not written out in {folder.relative_to(REPO_ROOT)}: {missing}"


def test_the_literal_check_does_not_count_f_strings(tmp_path):
    (tmp_path / "m.py").write_text('name = "x"\nA = "sticky.speedup_values_only"\nB = f"sticky.speedup_{name}"\n')
    literals = _string_literals(tmp_path)
    assert "sticky.speedup_values_only" in literals and "sticky.speedup_" not in literals
