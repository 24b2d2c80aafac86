"""Where the package's code comes from: the last commit that changed it, and whether the work tree holds it.

The runner pins the Colab install cell of every chapter to :func:`package_commit`, and every stored result records
it as its code version (:func:`attention_dynamics.ledger.results.provenance`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["PACKAGE_PATHS", "package_commit", "package_is_committed"]

#: What the package's code is made of: a commit that pins these paths pins the code the outputs came from.
PACKAGE_PATHS = ("src/attention_dynamics", "pyproject.toml")


def package_commit(root: Path) -> str | None:
    """Return the last commit that changed the package's code (``PACKAGE_PATHS``), or None without git.

    The Colab install cell pins this commit: it holds exactly the code that executed the chapters as
    long as the package has no uncommitted changes (the runner warns when it has).
    """
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%H", "--", *PACKAGE_PATHS],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def package_is_committed(root: Path) -> bool:
    """Whether the package's code in the work tree is the committed one (no changes to ``PACKAGE_PATHS``)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *PACKAGE_PATHS],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return not out.strip()
