"""The one place that knows where the book's files and outputs live."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "PACKAGE_DIR",
    "DATA_DIR",
    "REPO_ROOT",
    "BOOK_DIR",
    "CLAIMS_PATH",
    "STATUS_PATH",
    "TOLERANCES_PATH",
    "TOC_PATH",
    "BUILD_DIR",
    "SCRATCH_DIR",
    "HTML_DIR",
    "data_path",
]

#: The package's folder (``src/attention_dynamics``; this module is in its ``core/`` folder).
PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: Small committed result files (e.g. ``--scale paper`` runs) shipped with the package, so a chapter
#: can load them wherever the package is installed (Binder, Colab, a laptop).
DATA_DIR = PACKAGE_DIR / "data"
#: The repository root (``src/attention_dynamics`` is two levels down). Only meaningful for a
#: source checkout; the runner checks that ``_toc.yml`` exists there.
REPO_ROOT = PACKAGE_DIR.parent.parent
BOOK_DIR = REPO_ROOT / "book"
CLAIMS_PATH = BOOK_DIR / "claims.json"
STATUS_PATH = BOOK_DIR / "status.json"
#: Measured cross-machine tolerances of the claims (``ledger --measure-spread``), keyed by claim id.
TOLERANCES_PATH = BOOK_DIR / "claim_tolerances.json"
TOC_PATH = REPO_ROOT / "_toc.yml"
#: Everything generated and not committed goes under build/ (scratch runs) or _build/ (HTML).
BUILD_DIR = REPO_ROOT / "build"
SCRATCH_DIR = BUILD_DIR / "runs"
HTML_DIR = REPO_ROOT / "_build" / "html"


def data_path(name: str) -> Path:
    """Return the path of the committed data file ``name`` under the package's ``data/`` folder."""
    if "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"data file names are plain file names, got {name!r}")
    return DATA_DIR / name
