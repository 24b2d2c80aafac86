"""Stored results: what a heavy computation is made of, and its one I/O (small JSON files with their provenance).

Results too heavy for a chapter's time budget (many seeds, long runs) are declared by their chapter as a
:class:`StoredResult`: a list of independent :class:`Job` s per scale and an ``assemble`` step that turns the
jobs' outputs into the files the chapter loads. ``python -m attention_dynamics compute <result>``
(:mod:`attention_dynamics.book.compute`) runs the jobs locally or on a cluster, resumes from the jobs already done,
and writes the files under ``build/compute/``; ``--promote`` copies a reviewed result into the package's
``data/`` folder, from which the chapters load it (:func:`load_results`). :func:`save_results` adds the
provenance: the package version, the last commit that changed the package's code (when git can tell), and the
library versions and platform that computed it.
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from .. import __version__
from ..core.paths import REPO_ROOT
from ..core.provenance import package_commit
from ..core.settings import SCALES
from .claims import atomic_write_text

__all__ = ["Job", "StoredResult", "provenance", "save_results", "load_results"]


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


_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=-]*$")


@dataclass(frozen=True)
class Job:
    """One independent piece of a stored result: ``fn(**kwargs)`` returns its JSON-ready output.

    ``key`` names the job within its result (a file name: letters, digits and ``_.=-``); ``fn`` is a top-level
    function of the package (a cluster worker imports it); ``kwargs`` are plain JSON values. If ``fn`` takes a
    ``job_dir`` argument, the runner passes a folder where the job may leave files too big for JSON (weights).
    ``cost``: a relative estimate, so the longest jobs start first.
    """

    key: str
    fn: Callable[..., Any]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    cost: float = 1.0

    def __post_init__(self) -> None:
        if not _KEY.match(self.key):
            raise ValueError(f"a job key is a plain file name, got {self.key!r}")
        json.dumps(dict(self.kwargs))  # a job must be describable as plain JSON


@dataclass(frozen=True)
class StoredResult:
    """A result computed once and stored: ``compute <name>`` makes its ``files`` (relative to ``data/``).

    ``jobs(scale, seeds)`` lists the independent jobs at a scale (``seeds``: ``None`` for the result's own);
    ``assemble(scale, outputs, folder)`` writes the files from ``{job key: output}`` into ``folder`` (the jobs'
    own folders are ``folder/jobs/<key>/``). ``scales`` are among the book's (``fast``, ``book``, ``paper``: the
    chapters' scales); ``committed_scale`` is the scale of the files in ``data/``;
    ``expected`` gives, per scale, the size of the computation in words (e.g. ``"12 jobs, ~40 CPU-min"``).
    """

    name: str
    chapter: str
    about: str
    files: tuple[str, ...]
    scales: tuple[str, ...]
    committed_scale: str
    expected: Mapping[str, str]
    jobs: Callable[[str, Sequence[int] | None], list[Job]]
    assemble: Callable[[str, Mapping[str, Any], Path], None]
    takes_seeds: bool = True

    def __post_init__(self) -> None:
        unknown = [s for s in self.scales if s not in SCALES]
        if unknown:  # one set of scale names for the chapters and the stored results (reproduce and compute)
            raise ValueError(f"{self.name}: scales {unknown} are not among the book's scales {', '.join(SCALES)}")
        if self.committed_scale not in self.scales:
            raise ValueError(f"{self.name}: committed scale {self.committed_scale!r} is not one of {self.scales}")

    def check_scale(self, scale: str) -> str:
        """Return ``scale`` if the result has it, else raise ``ValueError`` naming its scales."""
        if scale not in self.scales:
            raise ValueError(f"{self.name} has scales {', '.join(self.scales)}, got {scale!r}")
        return scale
