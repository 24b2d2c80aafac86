"""The book's chapters as files: reading ``_toc.yml`` and normalising executed notebooks.

Normalising keeps a committed notebook free of volatile metadata (papermill timestamps and
durations, random cell ids, kernel versions), so re-running an unchanged chapter writes the
same bytes and produces no diff.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import nbformat
import yaml

__all__ = [
    "BookError",
    "Chapter",
    "book_chapters",
    "select_chapters",
    "normalise_notebook",
    "ensure_colab_cell",
    "repository_url",
    "colab_pin",
    "input_hash",
    "notebook_text",
    "format_code_cells",
    "text_form",
    "text_form_path",
]

_CHAPTER_FILE = re.compile(r"^(\d{2})-([a-z0-9-]+)$")
METADATA_KEY = "attention_dynamics"
#: Tag of the first cell of every chapter, which installs the package when run on Google Colab.
COLAB_TAG = "colab-install"
COLAB_SOURCE = """# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    %pip install --quiet "attention-dynamics @ git+{url}@{ref}"
"""
_PIN = re.compile(r"git\+(?P<url>\S+?)@(?P<ref>[0-9a-f]{7,40}|[\w.\-/]+)\"")


class BookError(Exception):
    """A problem the runner reports as one clear message (exit status 1)."""


@dataclass(frozen=True)
class Chapter:
    """A chapter notebook listed in ``_toc.yml``: its number, slug and path."""

    number: int
    slug: str
    path: Path

    @property
    def name(self) -> str:
        """Return the file stem, e.g. ``01-setup-and-notation`` (the chapter's id in the ledger)."""
        return self.path.stem

    def __str__(self) -> str:
        return f"chapter {self.number} ({self.path.name})"


def _toc_files(entries: Iterable[dict[str, Any]]) -> Iterable[str]:
    for entry in entries or []:
        if "file" in entry:
            yield entry["file"]
        for key in ("parts", "chapters", "sections"):
            if key in entry:
                yield from _toc_files(entry[key])


def book_chapters(root: Path) -> list[Chapter]:
    """Return the chapter notebooks listed in ``root/_toc.yml``, in reading order.

    A chapter is a ``book/NN-slug.ipynb`` file; other pages (intro, reproducibility, API) are
    not executed.
    """
    toc_path = root / "_toc.yml"
    if not toc_path.exists():
        raise FileNotFoundError(f"no _toc.yml in {root}; run from the book's repository root")
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8")) or {}
    files = list(_toc_files([toc]))
    chapters = []
    for f in files:
        path = (root / f).with_suffix(".ipynb")
        m = _CHAPTER_FILE.match(path.stem)
        if m and path.exists():
            chapters.append(Chapter(number=int(m.group(1)), slug=m.group(2), path=path))
    return chapters


def select_chapters(chapters: list[Chapter], specs: Iterable[str] | None) -> list[Chapter]:
    """Return the chapters named by ``specs`` (numbers like ``1``/``01``, slugs or file stems).

    Raises ``ValueError`` naming the unknown spec and the available chapters.
    """
    specs = list(specs or [])
    if not specs:
        return list(chapters)
    chosen: list[Chapter] = []
    for spec in specs:
        spec = str(spec).strip()
        match = [
            c for c in chapters
            if (spec.isdigit() and int(spec) == c.number) or spec in (c.slug, c.name, c.path.name)
        ]
        if not match:
            available = ", ".join(f"{c.number} ({c.slug})" for c in chapters) or "none"
            raise ValueError(f"unknown chapter {spec!r}; the book's chapters are: {available}")
        for c in match:
            if c not in chosen:
                chosen.append(c)
    return sorted(chosen, key=lambda c: c.number)


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """Return the notebook serialised exactly as the book commits it (nbformat's canonical JSON)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


#: Where each chapter's text form lives: ``book/text/<chapter>.py`` (jupytext's percent format).
TEXT_DIR = "text"


def text_form_path(nb_path: Path) -> Path:
    """Return the path of the committed text form of the chapter notebook ``nb_path``."""
    return nb_path.parent / TEXT_DIR / (nb_path.stem + ".py")


def text_form(nb: nbformat.NotebookNode) -> str:
    """Return the chapter as text (jupytext's ``py:percent``): every cell's source and tags, no outputs.

    Committed next to the notebook (``book/text/``), it makes a change to a chapter read as a text
    diff in review. Notebook metadata is left out (it is the runner's business, not the chapter's).
    """
    import copy

    import jupytext

    bare = copy.deepcopy(nb)
    bare.metadata = {"jupytext": {"notebook_metadata_filter": "-all", "cell_metadata_filter": "tags,-all"}}
    return jupytext.writes(bare, fmt="py:percent")


def format_code_cells(nb: nbformat.NotebookNode, ruff: str, *, line_length: int = 100) -> int:
    """Format every code cell's source with ``ruff format`` in place; return how many cells changed.

    Only the sources are touched: the outputs stay byte for byte (running ``ruff format`` on the
    notebook file itself re-serialises the outputs' floats, which moves their last digit). The
    Colab install cell (an IPython magic) is left as it is.
    """
    import subprocess

    changed = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or COLAB_TAG in cell.metadata.get("tags", []) or not cell.source.strip():
            continue
        res = subprocess.run([ruff, "format", "--isolated", f"--line-length={line_length}", "-"],
                             input=cell.source, capture_output=True, text=True)
        if res.returncode != 0:
            raise ValueError(f"ruff cannot format cell {cell.get('id')}: {res.stderr.strip()}")
        formatted = res.stdout.rstrip("\n")
        if formatted != cell.source:
            cell.source = formatted
            changed += 1
    return changed


def normalise_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip volatile metadata in place and return ``nb``.

    Removes papermill's notebook and cell metadata (timestamps, durations, status), per-cell
    ``execution`` timings and widget state; gives cells stable ids (``cell-NN``, by position);
    pins the kernelspec to ``python3`` and language info to the language name.
    """
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.nbformat, nb.nbformat_minor = 4, max(int(nb.get("nbformat_minor", 5)), 5)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)
    return nb


def repository_url(root: Path) -> str | None:
    """Return ``repository.url`` from ``root/_config.yml`` (the one place a fork changes it), or None."""
    path = root / "_config.yml"
    if not path.exists():
        return None
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return (config.get("repository") or {}).get("url")


def colab_pin(nb: nbformat.NotebookNode) -> tuple[str, str] | None:
    """Return ``(repository url, ref)`` that the notebook's Colab install cell installs, or None."""
    first = nb.cells[0] if nb.cells else None
    if first is None or COLAB_TAG not in first.metadata.get("tags", []):
        return None
    match = _PIN.search(first.source)
    return (match["url"], match["ref"]) if match else None


def ensure_colab_cell(nb: nbformat.NotebookNode, url: str, ref: str = "main") -> nbformat.NotebookNode:
    """Make the first cell the Colab install cell for repository ``url`` at ``ref`` (a commit); return nb.

    The cell is inserted or refreshed. It has no outputs and does nothing off Colab, so refreshing it
    never requires re-executing the chapter (the input hash leaves it out).
    """
    if not re.fullmatch(r"[\w.\-/]+", ref):
        raise ValueError(f"not a git ref: {ref!r}")
    source = COLAB_SOURCE.format(url=url.rstrip("/"), ref=ref).rstrip("\n")
    first = nb.cells[0] if nb.cells else None
    if first is not None and COLAB_TAG in first.metadata.get("tags", []):
        first.source = source
    else:
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": [COLAB_TAG, "remove-cell"]})
        nb.cells.insert(0, cell)
    return nb


def input_hash(nb_path: Path, package_dir: Path, parameters: dict[str, Any], extra_files: Iterable[Path] = ()) -> str:
    """Return the fingerprint of everything a chapter's outputs depend on (16 hex digits).

    That is: the chapter's cells, the package modules it imports (transitively) and the stored results they
    read, the pinned requirements and the injected parameters (:func:`~attention_dynamics.book.fingerprint.chapter_fingerprint`).
    An unchanged fingerprint lets the runner skip the chapter; a changed one makes the committed chapter stale.
    """
    from .fingerprint import chapter_fingerprint

    return chapter_fingerprint(nb_path, package_dir, parameters, extra_files)
