"""Shared test fixtures: float64 by default where precision matters, and the repository root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

# Check the shape annotations of the public API at every call (attention_dynamics.core.shapes); set before the package is
# imported, since the check is decided at import.
os.environ.setdefault("ATTENTION_DYNAMICS_CHECK_SHAPES", "1")

from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root() -> Path:
    """Return the repository root."""
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _single_thread_determinism():
    """Run each test with the same thread count so float reductions are reproducible."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------------
# The HTML book, built once per session (the book, browser and reading-budget tests read it)
# --------------------------------------------------------------------------------------------


@dataclass
class BuiltBook:
    """The HTML book built by the session fixture."""

    root: Path  # the --path-output folder
    command: list[str]
    returncode: int
    log: str

    @property
    def html(self) -> Path:
        return self.root / "_build" / "html"

    @property
    def screenshots(self) -> Path:
        return self.root / "_build" / "screenshots"

    def problems(self) -> list[str]:
        """Return the build's warning and error lines."""
        return [line for line in self.log.splitlines() if re.search(r"WARNING|ERROR|Error|error:", line)]

    def pages(self) -> list[Path]:
        """Return every HTML page of the site (generated indexes and source pages included)."""
        skip = {"_static", "_sources", "_images"}
        return sorted(p for p in self.html.rglob("*.html") if not skip & set(p.relative_to(self.html).parts))


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> BuiltBook:
    """Build the book from committed outputs with warnings as errors (``--keep-going``).

    A build with warnings still writes every page, so the page checks run on it either way;
    ``test_book_builds_with_warnings_as_errors`` reports the warnings. ``$BOOK_TEST_DIR``: build there instead of a
    temporary folder. ``$BOOK_TEST_BUILT``: a folder that already holds ``_build/html`` (e.g. the repository root after
    ``python -m attention_dynamics build``), used as it is, without building (its build log is not known).
    """
    reuse = os.environ.get("BOOK_TEST_BUILT")
    if reuse:
        root = Path(reuse).resolve()
        if not (root / "_build" / "html" / "index.html").exists():
            pytest.fail(f"BOOK_TEST_BUILT={reuse} holds no built book (_build/html/index.html)", pytrace=False)
        return BuiltBook(root=root, command=["(reused)", str(root)], returncode=0, log="")
    chosen = os.environ.get("BOOK_TEST_DIR")
    root = Path(chosen).resolve() if chosen else tmp_path_factory.mktemp("book")
    if (root / "_build").exists():
        shutil.rmtree(root / "_build")
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(REPO_ROOT), "--warningiserror", "--nitpick",
           "--keep-going", "--path-output", str(root)]
    result = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    book = BuiltBook(root=root, command=cmd, returncode=result.returncode, log=result.stdout + result.stderr)
    if not (book.html / "index.html").exists():
        pytest.fail(f"the book build wrote no HTML ({' '.join(cmd)}):\n" + "\n".join(book.problems()[-40:]
                    or book.log.splitlines()[-40:]), pytrace=False)
    return book
