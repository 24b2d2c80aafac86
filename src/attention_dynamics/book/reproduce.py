"""The book's runner: ``python -m attention_dynamics reproduce`` (what ``make book`` calls; the command line is
:mod:`attention_dynamics.book.cli`).

It re-executes the chapters listed in ``_toc.yml`` with papermill (only those whose inputs
changed, unless ``--force``), normalises and writes them atomically, rebuilds the claims ledger
from the executed notebooks, records per-chapter run times, and builds the HTML book.

All-or-nothing: chapters execute into a staging folder; only when every selected chapter
succeeded are the notebooks moved into ``book/`` (one atomic rename each) and the ledger
rewritten. A failing or interrupted run therefore leaves every committed file untouched and says
which chapter failed and why.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from ..core import paths
from ..core.provenance import package_commit, package_is_committed
from ..ledger.claims import atomic_write_text, ledger_problems, write_ledger
from .ledger_commands import (
    _collect_claims,
    _read_status,
    _read_status_file,
)
from .notebooks import (
    METADATA_KEY,
    BookError,
    Chapter,
    book_chapters,
    colab_pin,
    ensure_colab_cell,
    input_hash,
    normalise_notebook,
    notebook_text,
    repository_url,
    select_chapters,
)

__all__ = ["reproduce", "write_text_forms", "format_command", "build_html", "build_book"]


def reproduce(root: Path, args: argparse.Namespace) -> int:
    """Execute the selected chapters, then write the ledger and status and build the book."""
    import papermill

    chapters = book_chapters(root)
    if not chapters:
        raise BookError(f"_toc.yml in {root} lists no chapter notebooks")
    selected = select_chapters(chapters, args.chapter)
    scale = args.scale
    parameters: dict[str, Any] = {}
    if scale != "book":
        parameters["scale"] = scale
    if args.device != "auto":
        parameters["device"] = args.device
    if args.steps is not None:
        parameters["steps"] = args.steps
    if args.seed is not None:
        if args.seed < 0:
            raise BookError(f"--seed must be a non-negative integer, got {args.seed}")
        parameters["seed"] = args.seed
    committed = not parameters  # only default runs write the committed notebooks and ledger
    run_name = "-".join(f"{k}-{v}" for k, v in parameters.items())
    out_dir = root / "book" if committed else root / "build" / "runs" / run_name
    (root / "build").mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=root / "build"))  # private to this run

    for chapter in selected:  # validate every parameter before executing anything
        declared = papermill.inspect_notebook(str(chapter.path))
        for key in parameters:
            if key not in declared:
                raise BookError(f"{chapter} has no parameter {key!r} (its parameters: {', '.join(declared) or 'none'})")

    package_dir = root / "src" / "attention_dynamics"
    if not package_dir.is_dir():
        package_dir = paths.PACKAGE_DIR
    extra = [root / "requirements.txt"]
    timings: dict[str, float] = {}
    cell_timings: dict[str, dict[str, float]] = {}
    staged: list[tuple[Path, Path]] = []
    repo_url, commit = repository_url(root), package_commit(root)
    pin = commit or "main"  # without git (an unpacked archive) the cell installs the branch head
    status = _read_status(root) if committed else _read_status_file(out_dir / "status.json")
    digests = {c: input_hash(c.path, package_dir, parameters, extra) for c in selected}
    stale = [c for c in selected if args.force or _stored_hash(out_dir / c.path.name) != digests[c]]
    for chapter in selected:
        if chapter not in stale:
            print(up_to_date_message(chapter, status.get(chapter.name), _last_run(root, out_dir / chapter.path.name,
                                                                                  status.get(chapter.name))))
    if not stale:
        total = sum(float(status.get(c.name, {}).get("seconds", 0)) for c in selected)
        print(f"Nothing to execute: {'the chapter is' if len(selected) == 1 else f'all {len(selected)} chapters are'} "
              f"up to date. Add --force to re-execute {'it' if len(selected) == 1 else 'them'}"
              + (f" (about {_duration_text(total)}, the last runs' times in status.json)." if total else "."))
    else:
        expected = [float(status[c.name]["seconds"]) for c in stale if c.name in status]
        about = (f", expected about {_duration_text(sum(expected))} (the last runs' times in status.json)"
                 if len(expected) == len(stale) else "")
        print(f"Executing {len(stale)} of {len(selected)} chapter(s) at scale '{scale}' into "
              f"{out_dir.relative_to(root)}/{about}")
    for chapter in stale:
        target = out_dir / chapter.path.name
        digest = digests[chapter]
        t0 = time.perf_counter()
        staged_path = staging / chapter.path.name
        info = status.get(chapter.name, {})
        print(f"  {chapter}: executing" + (f", expected about {_duration_text(info['seconds'])}" if "seconds" in info else ""))
        try:
            cell_timings[chapter.name] = _execute(chapter, staged_path, parameters, digest, timeout=args.timeout,
                                                  repo_url=repo_url, ref=pin, expected=info)
        except BaseException:
            _keep_failed(staged_path.with_suffix(".raw.ipynb"), root / "build" / "failed" / chapter.path.name)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        timings[chapter.name] = time.perf_counter() - t0
        staged.append((staged_path, target))
        print(f"  {chapter}: executed in {_duration_text(timings[chapter.name])}")

    out_dir.mkdir(parents=True, exist_ok=True)
    for src, dst in staged:
        os.replace(src, dst)
    shutil.rmtree(staging, ignore_errors=True)
    if committed and repo_url and commit:
        _refresh_colab_pins([out_dir / c.path.name for c in chapters], repo_url, pin, root)
    if committed:
        write_text_forms(chapters)

    ledger_path = paths.CLAIMS_PATH if root == paths.REPO_ROOT else root / "book" / "claims.json"
    if not committed:
        ledger_path = out_dir / "claims.json"
    # A scratch run's ledger holds every chapter executed into its folder so far (runs of single
    # chapters with the same parameters add up), the committed ledger every chapter of the book.
    notebooks = [out_dir / c.path.name for c in chapters if committed or (out_dir / c.path.name).exists()]
    claims = _collect_claims(notebooks, root)
    write_ledger(claims, ledger_path)
    print(f"Wrote {len(claims)} claims to {ledger_path.relative_to(root)}")
    for problem in ledger_problems(claims):
        print(f"  ledger problem: {problem}", file=sys.stderr)
    if timings:
        _write_status(out_dir / "status.json", timings, cell_timings)
    if committed and not args.no_build:
        return build_book(root)
    return 0


def _kernel_manager_class() -> type:
    """Return the kernel manager the runner starts chapters with: CurveZMQ-encrypted where possible.

    A kernel started over plain TCP logs a warning about it (one screen per chapter); with the
    transport encrypted, as the kernelspec allows when pyzmq has CurveZMQ, it does not.
    """
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum

    if not zmq.has("curve"):
        return AsyncKernelManager

    class EncryptedKernelManager(AsyncKernelManager):
        transport_encryption = CaselessStrEnum(["disabled", "auto", "required"], default_value="auto", config=True)

    return EncryptedKernelManager


def write_text_forms(chapters: Sequence[Chapter]) -> None:
    """Write (or refresh) every chapter's text form, ``book/text/<chapter>.py``, and its launch notebook.

    The launch notebook (``notebooks/<chapter>.ipynb``, :mod:`attention_dynamics.book.launch_notebooks`) is
    the chapter as the Binder and Colab buttons open it: numbers, citations and equation numbers as text.
    """
    import nbformat

    from .launch_notebooks import write_launch_notebooks
    from .notebooks import text_form, text_form_path

    for chapter in chapters:
        path = text_form_path(chapter.path)
        text = text_form(nbformat.read(chapter.path, as_version=4))
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
    if chapters:
        write_launch_notebooks(chapters[0].path.parent.parent, list(chapters))


def _keep_failed(raw: Path, target: Path) -> None:
    """Keep the partly executed notebook of a failing chapter (its error outputs) at ``target``."""
    if raw.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(raw, target)
        print(f"  the failing notebook, with its error, is kept at {target}", file=sys.stderr)


def _refresh_colab_pins(notebooks: list[Path], repo_url: str, pin: str, root: Path) -> None:
    """Point every committed chapter's Colab install cell at ``pin``, the commit of the package's code.

    The cell has no outputs, so this rewrites only its source: nothing is re-executed.
    """
    import nbformat

    if not package_is_committed(root):
        print(f"warning: the package has uncommitted changes; the Colab install cells pin {pin[:12]}, the last "
              "commit of the package. Commit the package, then run `make book` again to refresh the pin.",
              file=sys.stderr)
    for path in notebooks:
        if not path.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        if colab_pin(nb) == (repo_url.rstrip("/"), pin):
            continue
        ensure_colab_cell(nb, repo_url, pin)
        atomic_write_text(path, notebook_text(nb))
        print(f"  {path.name}: Colab install cell now pins {pin[:12]}")


def _execute(
    chapter: Chapter, out_path: Path, parameters: dict[str, Any], digest: str, *, timeout: int,
    repo_url: str | None, ref: str = "main", expected: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Execute ``chapter`` into ``out_path`` (normalised); return its code cells' run times, s, by index.

    ``expected``: the chapter's entry of ``book/status.json`` (its run time and its cells'), which the
    progress lines quote.
    """
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    raw = out_path.with_suffix(".raw.ipynb")
    source = nbformat.read(chapter.path, as_version=4)
    stale = [c for c in source.cells if "injected-parameters" in c.metadata.get("tags", [])]
    input_path = chapter.path
    if stale:  # parameters left by an earlier run with other settings must not leak into this one
        source.cells = [c for c in source.cells if c not in stale]
        input_path = out_path.with_suffix(".input.ipynb")
        nbformat.write(source, input_path)
    env_backup = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        papermill.execute_notebook(
            str(input_path),
            str(raw),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(chapter.path.parent),
            progress_bar=False,
            engine_name=_progress_engine(chapter, expected or {}),
            log_output=False,
            execution_timeout=timeout,
            kernel_manager_class=_kernel_manager_class(),
        )
    except PapermillExecutionError as exc:
        raise BookError(
            f"{chapter} failed in cell {exc.cell_index + 1} ({exc.ename}: {exc.evalue}); "
            "no committed notebook or ledger was changed"
        ) from None
    except Exception as exc:  # kernel death, timeout, bad notebook
        raise BookError(f"{chapter} could not be executed: {type(exc).__name__}: {exc}") from None
    finally:
        if input_path != chapter.path:
            input_path.unlink(missing_ok=True)
        if env_backup is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = env_backup
    nb = nbformat.read(raw, as_version=4)
    seconds = cell_durations(nb)
    if repo_url:
        ensure_colab_cell(nb, repo_url, ref)
    normalise_notebook(nb)
    nb.metadata[METADATA_KEY] = {"input_hash": digest}
    atomic_write_text(out_path, notebook_text(nb))
    raw.unlink()
    return seconds


#: A code cell expected to run at least this long (s) is announced when it starts; cells of
#: unknown length (no earlier run in book/status.json) are always announced.
ANNOUNCE_CELLS_FROM = 10.0


def cell_durations(nb) -> dict[str, float]:
    """Return ``{cell index: seconds}`` of the code cells papermill timed that ran at least 1 s."""
    out = {}
    for i, cell in enumerate(nb.cells):
        duration = cell.get("metadata", {}).get("papermill", {}).get("duration")
        if cell.cell_type == "code" and duration is not None and duration >= 1.0:
            out[str(i)] = round(float(duration), 1)
    return out


def cell_progress_line(chapter_name: str, code_cell: int, code_cells: int, elapsed: float,
                       cell_seconds: float | None, chapter_seconds: float | None) -> str:
    """Return the progress line printed when a code cell starts (times from book/status.json)."""
    line = f"    {chapter_name}: cell {code_cell}/{code_cells}"
    if cell_seconds is not None:
        line += f", expected about {_duration_text(cell_seconds)}"
    line += f" (chapter: {_duration_text(elapsed)} so far"
    line += f" of about {_duration_text(chapter_seconds)})" if chapter_seconds else ")"
    return line


def _progress_engine(chapter: Chapter, expected: dict[str, Any]) -> str:
    """Register a papermill engine that prints :func:`cell_progress_line` for long cells; return its name."""
    from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines

    cells = {int(k): float(v) for k, v in expected.get("cells", {}).items()}
    known = bool(expected.get("cells"))
    chapter_seconds = float(expected["seconds"]) if "seconds" in expected else None

    class ProgressManager(NotebookExecutionManager):
        def notebook_start(self, **kwargs):
            super().notebook_start(**kwargs)
            self._started = time.perf_counter()
            self._code = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]

        def cell_start(self, cell, cell_index=None, **kwargs):
            super().cell_start(cell, cell_index=cell_index, **kwargs)
            if cell_index is None or cell_index not in self._code:
                return
            seconds = cells.get(cell_index, 0.0) if known else None
            if seconds is None or seconds >= ANNOUNCE_CELLS_FROM:
                print(cell_progress_line(chapter.name, self._code.index(cell_index) + 1, len(self._code),
                                         time.perf_counter() - self._started, seconds, chapter_seconds), flush=True)

    class ProgressEngine(NBClientEngine):
        @classmethod
        def execute_notebook(cls, nb, kernel_name, output_path=None, progress_bar=True, log_output=False,
                             autosave_cell_every=30, **kwargs):
            nb_man = ProgressManager(nb, output_path=output_path, progress_bar=False, log_output=log_output,
                                     autosave_cell_every=autosave_cell_every)
            nb_man.notebook_start()
            try:
                cls.execute_managed_notebook(nb_man, kernel_name, log_output=log_output, **kwargs)
            finally:
                nb_man.cleanup_pbar()
                nb_man.notebook_complete()
            return nb_man.nb

    name = "attention-dynamics-progress"
    papermill_engines.register(name, ProgressEngine)
    return name


def _duration_text(seconds: float) -> str:
    """Return a duration as ``42 s`` or ``3 min 05 s``."""
    seconds = round(float(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def _last_run(root: Path, notebook: Path, info: dict[str, Any] | None) -> str | None:
    """Return when a chapter was last executed (YYYY-MM-DD): book/status.json, else the notebook's last commit."""
    if info and info.get("executed"):
        return str(info["executed"])[:10]
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%cs", "--", str(notebook)],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return out or None


def up_to_date_message(chapter: Chapter, info: dict[str, Any] | None, since: str | None) -> str:
    """Return what the runner says of a chapter it skips: up to date since when, how long a re-run takes, how to force it."""
    line = f"  {chapter}: up to date"
    if since:
        line += f" since {since}"
    line += " (its cells, the package and the pinned requirements are unchanged)"
    if info and "seconds" in info:
        line += f"; --force re-executes it (about {_duration_text(info['seconds'])})"
    else:
        line += "; --force re-executes it"
    return line


def _stored_hash(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, json.JSONDecodeError):
        return None
    return meta.get(METADATA_KEY, {}).get("input_hash")


def format_command(root: Path) -> int:
    """Format every chapter's code cells with ruff, leaving the outputs untouched."""
    import nbformat

    from .notebooks import format_code_cells

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        raise BookError("ruff is not installed in this environment (requirements.txt pins it)")
    for chapter in book_chapters(root):
        nb = nbformat.read(chapter.path, as_version=4)
        changed = format_code_cells(nb, ruff)
        if changed:
            atomic_write_text(chapter.path, notebook_text(nb))
        print(f"  {chapter}: {changed} cell(s) reformatted")
    write_text_forms(book_chapters(root))
    return 0


def environment_summary() -> dict[str, str]:
    """Return the versions and device a run used (Python, torch, numpy, platform, device)."""
    import numpy
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(terse=True),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "cpu_threads": str(torch.get_num_threads()),
    }


def _write_status(path: Path, timings: dict[str, float], cells: dict[str, dict[str, float]] | None = None) -> None:
    status: dict[str, Any] = {"chapters": {}}
    if path.exists():
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            pass
    status.setdefault("chapters", {})
    env = environment_summary()
    executed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name, seconds in timings.items():
        status["chapters"][name] = {"seconds": round(seconds, 1), "executed": executed, "environment": env,
                                    "cells": (cells or {}).get(name, {})}
    status["chapters"] = dict(sorted(status["chapters"].items()))
    atomic_write_text(path, json.dumps(status, indent=2) + "\n")


def build_html(root: Path) -> int:
    """Build the HTML book from committed outputs with warnings as errors; return the exit status."""
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    if jb is None:
        raise BookError("jupyter-book is not installed in this environment (run `make book`)")
    cmd = [jb, "build", str(root), "--warningiserror", "--nitpick", "--keep-going", "--quiet"]
    print("Building the HTML book:", " ".join(cmd[1:]))
    result = subprocess.run(cmd, cwd=root)
    if result.returncode != 0:
        print("error: the book build failed (warnings are errors); see the messages above", file=sys.stderr)
        return result.returncode
    print(f"The book is ready: open {root / '_build' / 'html' / 'index.html'}")
    return 0


def build_book(root: Path) -> int:
    """Build the HTML book, then the PDF into the site (``_build/html/book.pdf``); return the exit status.

    Without Chromium the PDF is skipped with a note (the HTML book does not need it).
    """
    status = build_html(root)
    if status != 0:
        return status
    from .pdf import build_pdf, find_chromium

    try:
        find_chromium()
    except BookError as exc:
        print(f"note: no PDF this time: {exc}", file=sys.stderr)
        return 0
    pdf = build_pdf(root)
    site_copy = root / "_build" / "html" / "book.pdf"
    shutil.copyfile(pdf, site_copy)
    print(f"The PDF is ready: {pdf} (and in the site: {site_copy})")
    return 0

