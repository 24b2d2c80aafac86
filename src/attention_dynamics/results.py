"""The experiments' one results I/O: small JSON files written atomically with their provenance.

Heavy results (many seeds, long runs) are computed once by ``python -m attention_dynamics compute``
(:mod:`attention_dynamics.compute`), saved with :func:`save_results` and loaded by the chapters with
:func:`load_results`. The provenance
records the package version, the last commit that changed the package's code (when git can tell),
and the library versions and platform that computed them.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from . import __version__
from .claims import atomic_write_text
from .notebooks import package_commit
from .paths import REPO_ROOT

__all__ = ["provenance", "save_results", "load_results"]


def provenance() -> dict[str, Any]:
    """Return where a result comes from: package version and code commit, library versions, platform."""
    return {
        "package_version": __version__,
        "code_commit": package_commit(REPO_ROOT),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def save_results(results: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``results`` as JSON with their :func:`provenance`, atomically; return the path."""
    payload = dict(results)
    payload["provenance"] = provenance()
    path = Path(path)
    atomic_write_text(path, json.dumps(payload, indent=1, allow_nan=False) + "\n")
    return path


def load_results(path: str | Path) -> dict[str, Any]:
    """Return the JSON results stored at ``path``."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
