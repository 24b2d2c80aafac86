"""Stored results: what a heavy computation is made of, and its one I/O (small JSON files with their provenance).

Results too heavy for a chapter's time budget (many seeds, long runs) are declared by their chapter as a
:class:`StoredResult`, the one place that says everything about them: its settings at each scale (``specs``), the
independent :class:`Job` s of a scale (``jobs``, each naming the function that runs it), the ``assemble`` step that
turns the jobs' outputs into the files, and the files themselves. From that declaration
``python -m attention_dynamics compute <result>`` (:mod:`attention_dynamics.book.compute`, which finds every
declaration in the chapters' modules) runs the jobs locally or on a cluster, resumes from the jobs already done and
writes the files under ``build/compute/``; ``--promote`` copies a reviewed result into the package's ``data/``
folder; and the chapters read it back with :meth:`StoredData.load`. A file made outside the package (a benchmark's
figures) is declared as :class:`StoredData`, files and a reader without jobs.

:func:`save_results` adds the provenance: the package version, the last commit that changed the package's code (when
git can tell), and the library versions and platform that computed it. The helpers every result shares are here
once: :func:`load_data` (a data file, or another path), :func:`check_seeds` and :func:`one_seed` (a computation's
seeds), :func:`t_intervals` (means over seeds with their Student-t intervals) and :func:`seed_range`.
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
from ..core.paths import DATA_DIR, REPO_ROOT
from ..core.provenance import package_commit
from ..core.settings import SCALES
from ..science.stats import t_interval
from .claims import atomic_write_text

__all__ = ["Job", "StoredData", "StoredResult", "provenance", "save_results", "load_results", "load_data",
           "check_seeds", "one_seed", "t_intervals", "seed_range"]


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


def load_data(file: str, path: str | Path | None = None, *, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Return the JSON results of the package's data file ``file`` (in ``data_dir``, default the package's ``data/``),
    or of the file at ``path`` (a computation's copy, say)."""
    return load_results(path if path is not None else Path(data_dir or DATA_DIR) / file)


def check_seeds(seeds: Sequence[int] | None, default: Sequence[int], *, at_least: int = 2) -> list[int]:
    """Return ``seeds`` (``default`` when None) as a list of ints: at least ``at_least`` of them, distinct and
    non-negative, or raise ``ValueError`` (a mean over seeds with its interval needs two)."""
    out = list(default if seeds is None else seeds)
    if len(out) < at_least or len(set(out)) != len(out) or min(out, default=0) < 0:
        count = {1: "one", 2: "two"}.get(at_least, str(at_least))
        raise ValueError(f"seeds must be at least {count} distinct non-negative integers, got {out}")
    return [int(s) for s in out]


def one_seed(seeds: Sequence[int] | None, rule: str, default: int = 0) -> int:
    """Return the one seed of a computation that trains one (``default`` when ``seeds`` is None), or raise
    ``ValueError`` stating its ``rule`` (``"the sticky tunnel's runs use one seed"``)."""
    if seeds is not None and len(seeds) != 1:
        raise ValueError(f"{rule}; got {list(seeds)}")
    return int(seeds[0]) if seeds else default


def t_intervals(runs: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """Return ``{key: mean over runs with its Student-t 95 % interval}``
    (:func:`~attention_dynamics.science.stats.t_interval`) of each of ``keys`` over ``runs`` (one per seed)."""
    return {key: t_interval([run[key] for run in runs]) for key in keys}


def seed_range(spread: Mapping[str, Any], group: str, key: str) -> tuple[float, float]:
    """Return the smallest and largest per-seed value of ``key`` in run group ``group`` of a stored spread over
    seeds (``spread["runs"][group]``: one run per seed)."""
    values = [float(run[key]) for run in spread["runs"][group]]
    return min(values), max(values)


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


@dataclass(frozen=True, kw_only=True)
class StoredData:
    """Files of the package's ``data/`` folder that a chapter reads: ``name``, the ``chapter`` (its folder), what they
    hold (``about``) and the ``files`` (relative to ``data/``; written out literally where the result is declared, so
    that a chapter's fingerprint finds the files its modules read).

    :meth:`load` reads them: with a ``reader``, ``reader(*args, **kwargs)`` (files that are not one JSON file);
    otherwise the JSON of the first file, or of ``path``.
    """

    name: str
    chapter: str
    about: str
    files: tuple[str, ...]
    reader: Callable[..., Any] | None = None

    def data_path(self, file: str | None = None, *, data_dir: str | Path | None = None) -> Path:
        """Return where ``file`` (default: the result's first) lies in ``data_dir`` (default: the package's data)."""
        return Path(data_dir or DATA_DIR) / (file or self.files[0])

    def load(self, *args: Any, path: str | Path | None = None, **kwargs: Any) -> Any:
        """Return the stored result as the chapters read it (see the class)."""
        if self.reader is not None:
            return self.reader(*args, **({} if path is None else {"path": path}), **kwargs)
        if args or kwargs:
            raise TypeError(f"{self.name} is one JSON file: load() takes only path=")
        return load_data(self.files[0], path)


@dataclass(frozen=True, kw_only=True)
class StoredResult(StoredData):
    """A result computed once and stored: ``compute <name>`` makes its ``files`` (relative to ``data/``).

    ``specs``: its settings at each scale (what :meth:`spec` returns; ``scales`` are then its keys, in the book's
    order); ``jobs(scale, seeds)`` lists the independent jobs at a scale (``seeds``: ``None`` for the result's own);
    ``assemble(scale, outputs, folder)`` writes the files from ``{job key: output}`` into ``folder`` (the jobs' own
    folders are ``folder/jobs/<key>/``). ``scales`` are among the book's (``fast``, ``book``, ``paper``: the chapters'
    scales); ``committed_scale`` is the scale of the files in ``data/``; ``expected`` gives, per scale, the size of
    the computation in words (e.g. ``"12 jobs, ~40 CPU-min"``).
    """

    committed_scale: str
    expected: Mapping[str, str]
    jobs: Callable[[str, Sequence[int] | None], list[Job]]
    assemble: Callable[[str, Mapping[str, Any], Path], None]
    specs: Mapping[str, Any] | None = None
    scales: tuple[str, ...] = ()
    takes_seeds: bool = True

    def __post_init__(self) -> None:
        if self.specs is not None:
            if self.scales and set(self.scales) != set(self.specs):
                raise ValueError(f"{self.name}: its scales are its specs' ({', '.join(self.specs)}), got {self.scales}")
            object.__setattr__(self, "scales", tuple(s for s in SCALES if s in self.specs)
                               + tuple(s for s in self.specs if s not in SCALES))
        unknown = [s for s in self.scales if s not in SCALES]
        if unknown or not self.scales:  # one set of scale names for the chapters and the stored results
            raise ValueError(f"{self.name}: scales {unknown or '()'} are not among the book's scales {', '.join(SCALES)}")
        if self.committed_scale not in self.scales:
            raise ValueError(f"{self.name}: committed scale {self.committed_scale!r} is not one of {self.scales}")

    def check_scale(self, scale: str) -> str:
        """Return ``scale`` if the result has it, else raise ``ValueError`` naming its scales."""
        if scale not in self.scales:
            raise ValueError(f"{self.name} has scales {', '.join(self.scales)}, got {scale!r}")
        return scale

    def spec(self, scale: str) -> Any:
        """Return the result's settings at ``scale`` (its ``specs`` entry), or raise ``ValueError`` naming its scales."""
        if self.specs is None:
            raise ValueError(f"{self.name} declares no settings per scale")
        return self.specs[self.check_scale(scale)]
