"""One command for every stored result: ``python -m attention_dynamics compute <result>``.

A stored result (:class:`~attention_dynamics.ledger.results.StoredResult`, declared by its chapter) is its settings
per scale, a list of independent jobs and an ``assemble`` step. This module finds every declaration (:func:`declared`:
it imports each chapter module whose source declares one, so a new result needs no entry here), runs the jobs and
assembles the files:

- **where**: ``build/compute/<result>/<scale>/`` (``…/<scale>-seeds-0-1-2/`` for other seeds): each job's output in
  ``jobs/<key>.json``, the assembled files beside it. Nothing is written into the package's ``data/`` folder
  until a reviewed result is promoted by an explicit step (``--promote``, committed scale only).
- **resumable per job**: a job whose output file exists (made with the same arguments) is not run again, so an
  interrupted or partly failed computation continues where it stopped; a failing job is reported with its error,
  the others still finish, and the command exits non-zero without assembling.
- **launchers**: ``local`` (default) runs the jobs in local processes, one thread each, as many at once as the
  CPUs this process may use (:func:`~attention_dynamics.training.usable_cpus`); ``slurm`` submits them as a
  job array to a SLURM cluster through `submitit <https://github.com/facebookincubator/submitit>`_ (partition,
  time limit and GPUs as options); ``submitit-local`` runs the same submitit path on this machine in processes of
  its own, and ``submitit-debug`` runs it in this process through submitit's debug executor, with the SLURM
  options passed exactly as ``slurm`` passes them (:func:`submitit_parameters`), so that path can be tried in
  seconds (a failing job there opens the debugger, as submitit's debug mode does). The result files are the same
  whichever launcher ran the jobs.
- **where, under another root**: ``python -m attention_dynamics --root R compute ...`` writes into
  ``R/build/compute/`` and promotes into ``R/src/attention_dynamics/data/``.

``compute --list`` names every stored result with its files, its scales and the expected size of each.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import re
import shutil
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core.paths import BUILD_DIR, DATA_DIR, REPO_ROOT
from ..core.settings import SCALES
from ..ledger.claims import atomic_write_text
from ..ledger.results import Job, StoredData, StoredResult
from ..training import usable_cpus

__all__ = ["LAUNCHERS", "COMPUTE_DIR", "declared", "registry", "result_folder", "compute", "promote", "list_results",
           "submitit_parameters", "submitit_executor", "positive_int", "compute_folder", "data_folder", "main"]

#: The ways jobs can run: local processes, a SLURM cluster through submitit, submitit's local executor on this
#: machine, or submitit's debug executor in this process (the SLURM options passed as for ``slurm``).
LAUNCHERS = ("local", "slurm", "submitit-local", "submitit-debug")
#: The submitit cluster each submitit launcher runs on.
_SUBMITIT_CLUSTERS = {"slurm": "slurm", "submitit-local": "local", "submitit-debug": "debug"}
#: Where computations write (never the package's data folder, see :func:`promote`).
COMPUTE_DIR = BUILD_DIR / "compute"


def compute_folder(root: Path) -> Path:
    """Return where computations write for the repository at ``root``: ``root/build/compute``."""
    return Path(root) / COMPUTE_DIR.relative_to(REPO_ROOT)


def data_folder(root: Path) -> Path:
    """Return the package's data folder in the repository at ``root``: ``root/src/attention_dynamics/data``."""
    return Path(root) / DATA_DIR.relative_to(REPO_ROOT)


#: How a chapter module declares a stored result (its source constructs one).
_DECLARES = re.compile(r"\bStored(?:Result|Data)\(")


def _declaring_modules() -> list[str]:
    """Return the chapters' modules whose source declares a stored result, chapter by chapter (folder order)."""
    chapters = importlib.import_module("attention_dynamics.chapters")
    modules = []
    for chapter in pkgutil.iter_modules(chapters.__path__):
        if not chapter.ispkg:
            continue
        folder = Path(chapters.__path__[0]) / chapter.name
        for module in pkgutil.iter_modules([str(folder)]):
            source = folder / f"{module.name}.py"
            if not module.ispkg and source.is_file() and _DECLARES.search(source.read_text(encoding="utf-8")):
                modules.append(f"{chapters.__name__}.{chapter.name}.{module.name}")
    return modules


def declared() -> dict[str, StoredData]:
    """Return every stored result the chapters declare, by name: each :class:`StoredResult` (computed here) and each
    :class:`StoredData` (files made elsewhere, read the same way), found by importing the modules that declare them."""
    found: dict[str, StoredData] = {}
    for name in _declaring_modules():
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, StoredData) and found.setdefault(value.name, value) is not value:
                raise RuntimeError(f"two declarations of the stored result {value.name!r} (one in {name})")
    return found


def registry() -> dict[str, StoredResult]:
    """Return every stored result of the book that ``compute`` makes, by name (:func:`declared`, computed ones)."""
    return {name: r for name, r in declared().items() if isinstance(r, StoredResult)}


def _get(name: str) -> StoredResult:
    """Return the stored result ``name``."""
    results = registry()
    if name not in results:
        raise ValueError(f"unknown result {name!r}; choose from {', '.join(results)} (compute --list)")
    return results[name]


def result_folder(result: StoredResult, scale: str, seeds: Sequence[int] | None = None,
                  root: Path | None = None) -> Path:
    """Return the folder a computation of ``result`` at ``scale`` (and ``seeds``) writes into."""
    tag = scale if seeds is None else f"{scale}-seeds-{'-'.join(str(int(s)) for s in seeds)}"
    return Path(root or COMPUTE_DIR) / result.name / tag


def _function_path(fn: Callable[..., Any]) -> str:
    module = inspect.getmodule(fn)
    if module is None or getattr(module, fn.__name__, None) is not fn:
        raise ValueError(f"job function {fn!r} must be a top-level function of an importable module")
    return f"{module.__name__}:{fn.__name__}"


def run_job(function: str, kwargs: Mapping[str, Any], out_file: str) -> str:
    """Run one job in this process (one thread) and write ``{"function", "kwargs", "output", "cpu_seconds"}`` to ``out_file``.

    What a worker calls, locally or on a cluster node; returns ``out_file``. The output is written atomically, so a
    file that exists is a finished job.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread per job; restored after, for a job run in the caller's own process
    try:
        module, name = function.split(":")
        fn = getattr(importlib.import_module(module), name)
        kwargs = dict(kwargs)
        if "job_dir" in inspect.signature(fn).parameters:
            job_dir = Path(out_file).with_suffix("")
            job_dir.mkdir(parents=True, exist_ok=True)
            kwargs["job_dir"] = str(job_dir)
        started = time.process_time()
        output = fn(**kwargs)
    finally:
        torch.set_num_threads(threads)
    record = {"function": function, "kwargs": {k: v for k, v in kwargs.items() if k != "job_dir"},
              "output": output, "cpu_seconds": time.process_time() - started}
    atomic_write_text(Path(out_file), json.dumps(record, allow_nan=True) + "\n")
    return out_file


def _done(job: Job, out_file: Path) -> Any | None:
    """Return the stored output of ``job`` if its file exists and was made with the same arguments."""
    if not out_file.exists():
        return None
    record = json.loads(out_file.read_text())
    if record.get("kwargs") != json.loads(json.dumps(dict(job.kwargs))) or record.get("function") != _function_path(job.fn):
        return None
    return record


def submitit_parameters(launcher: str, options: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Return the parameters a submitit launcher gives its executor (``update_parameters``).

    Every submitit launcher: the time limit (``options["time_min"]``, minutes; default 60), one CPU per job and the
    job name. ``slurm`` and ``submitit-debug`` also the SLURM options that are set: ``partition``, ``gpus`` (per job)
    and ``array_parallelism``; the debug executor checks their names and runs the jobs in this process.
    """
    if launcher not in _SUBMITIT_CLUSTERS:
        raise ValueError(f"{launcher!r} is not a submitit launcher (those are {', '.join(_SUBMITIT_CLUSTERS)})")
    params: dict[str, Any] = {"timeout_min": int(options.get("time_min") or 60), "cpus_per_task": 1, "name": name}
    if launcher in ("slurm", "submitit-debug"):
        if options.get("partition"):
            params["slurm_partition"] = options["partition"]
        if options.get("gpus"):
            params["gpus_per_node"] = int(options["gpus"])
        if options.get("array_parallelism"):
            params["slurm_array_parallelism"] = int(options["array_parallelism"])
    return params


def submitit_executor(folder: Path, launcher: str, options: Mapping[str, Any]):
    """Return the ``submitit.AutoExecutor`` that runs a computation's jobs for ``launcher`` (its logs in
    ``folder/submitit``), with :func:`submitit_parameters` applied."""
    import submitit

    params = submitit_parameters(launcher, options, name=f"attention-dynamics-{folder.parent.name}")
    executor = submitit.AutoExecutor(folder=folder / "submitit", cluster=_SUBMITIT_CLUSTERS[launcher])
    executor.update_parameters(**params)
    return executor


def _run_pending(pending: list[tuple[Job, Path]], launcher: str, processes: int | None, folder: Path,
                 options: Mapping[str, Any], log: Callable[[str], None]) -> dict[str, str]:
    """Run the pending jobs; return ``{key: error}`` of those that failed."""
    failed: dict[str, str] = {}
    total = len(pending)
    started = time.time()
    if launcher == "local":
        workers = max(1, min(usable_cpus() if processes is None else processes, total))
        if workers == 1:
            for n, (job, out) in enumerate(pending, 1):
                try:
                    run_job(_function_path(job.fn), dict(job.kwargs), str(out))
                    log(f"  [{n}/{total}] {job.key} done ({time.time() - started:.0f} s)")
                except Exception as exc:  # a failing job must not lose the others
                    failed[job.key] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                    log(f"  [{n}/{total}] {job.key} FAILED: {failed[job.key]}")
            return failed
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(run_job, _function_path(job.fn), dict(job.kwargs), str(out)): job for job, out in pending}
            for n, future in enumerate(as_completed(futures), 1):
                job = futures[future]
                try:
                    future.result()
                    log(f"  [{n}/{total}] {job.key} done ({time.time() - started:.0f} s)")
                except Exception as exc:
                    failed[job.key] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                    log(f"  [{n}/{total}] {job.key} FAILED: {failed[job.key]}")
        return failed
    executor = submitit_executor(folder, launcher, options)
    submitted = executor.map_array(run_job, [_function_path(j.fn) for j, _ in pending],
                                   [dict(j.kwargs) for j, _ in pending], [str(o) for _, o in pending])
    log(f"  submitted {total} job(s) through submitit ({launcher}); logs in {folder / 'submitit'}")
    for n, ((job, _), handle) in enumerate(zip(pending, submitted), 1):
        try:
            handle.result()
            log(f"  [{n}/{total}] {job.key} done ({time.time() - started:.0f} s)")
        except Exception as exc:
            failed[job.key] = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            log(f"  [{n}/{total}] {job.key} FAILED: {failed[job.key]}")
    return failed


def compute(result: StoredResult | str, scale: str | None = None, *, seeds: Sequence[int] | None = None,
            launcher: str = "local", processes: int | None = None, root: Path | None = None,
            options: Mapping[str, Any] | None = None, log: Callable[[str], None] = print) -> Path:
    """Run every job of ``result`` at ``scale`` not done yet, assemble its files, and return their folder.

    ``root``: the folder computations write into (default :data:`COMPUTE_DIR`; the command line passes
    :func:`compute_folder` of its ``--root``); ``processes``: local processes at once, at least 1 (default: the usable
    CPUs). Raises ``RuntimeError`` naming the failed jobs (their outputs are not assembled; the jobs that succeeded are
    kept, so running again resumes).
    """
    result = _get(result) if isinstance(result, str) else result
    scale = result.check_scale(scale or result.committed_scale)
    if launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}; choose one of {', '.join(LAUNCHERS)}")
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise ValueError(f"processes must be a positive integer (None: the usable CPUs), got {processes!r}")
    if seeds is not None and not result.takes_seeds:
        raise ValueError(f"{result.name} has no seeds to choose (its jobs are fixed by its settings)")
    jobs = result.jobs(scale, None if seeds is None else [int(s) for s in seeds])
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        raise RuntimeError(f"{result.name}: duplicate job keys")
    folder = result_folder(result, scale, seeds, root)
    (folder / "jobs").mkdir(parents=True, exist_ok=True)
    outputs: dict[str, Any] = {}
    pending = []
    for job in sorted(jobs, key=lambda j: -j.cost):
        out = folder / "jobs" / f"{job.key}.json"
        record = _done(job, out)
        if record is None:
            pending.append((job, out))
    log(f"{result.name} ({scale}): {len(jobs)} job(s), {len(jobs) - len(pending)} already done, "
        f"{len(pending)} to run with launcher {launcher}; writing to {folder}")
    failed = _run_pending(pending, launcher, processes, folder, options or {}, log) if pending else {}
    if failed:
        raise RuntimeError(f"{result.name}: {len(failed)} job(s) failed ({', '.join(failed)}); the others are kept "
                           f"in {folder / 'jobs'} and the next run resumes from them")
    for job in jobs:
        record = _done(job, folder / "jobs" / f"{job.key}.json")
        if record is None:
            raise RuntimeError(f"{result.name}: job {job.key} left no output")
        outputs[job.key] = record["output"]
    result.assemble(scale, outputs, folder)
    log(f"{result.name} ({scale}): wrote {', '.join(result.files)} in {folder}")
    return folder


def promote(result: StoredResult | str, scale: str | None = None, *, root: Path | None = None,
            data_dir: Path | None = None, log: Callable[[str], None] = print) -> list[Path]:
    """Copy the assembled files of ``result`` at its committed scale into the package's ``data/`` folder.

    The explicit step between a computation (in ``build/``) and what the chapters load: only the committed scale
    can be promoted (``scale``, if given, must be it), and only once every file has been assembled.
    """
    result = _get(result) if isinstance(result, str) else result
    if scale is not None and result.check_scale(scale) != result.committed_scale:
        raise ValueError(f"{result.name}: only its committed scale {result.committed_scale!r} is promoted into data/; "
                         f"a computation at scale {scale!r} stays in {result_folder(result, scale, None, root)}")
    folder = result_folder(result, result.committed_scale, None, root)
    missing = [f for f in result.files if not (folder / f).exists()]
    if missing:
        raise FileNotFoundError(f"{result.name}: {', '.join(missing)} not computed in {folder}; run "
                                f"`python -m attention_dynamics compute {result.name}` first")
    target = Path(data_dir or DATA_DIR)
    copied = []
    for f in result.files:
        dest = target / f
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / f, dest.with_name(dest.name + ".tmp"))
        (dest.with_name(dest.name + ".tmp")).replace(dest)
        copied.append(dest)
        log(f"promoted {folder / f} -> {dest}")
    return copied


def list_results(data: Path | None = None) -> str:
    """Return a table of every stored result: name, chapter, files, and the expected size at each scale (``data``: the
    data folder whose files it says are there; default the package's)."""
    data = Path(data or DATA_DIR)
    lines = []
    for name, r in registry().items():
        present = all((data / f).exists() for f in r.files)
        lines.append(f"{name}  (chapter {r.chapter}; committed scale {r.committed_scale}; "
                     f"{'in data/' if present else 'NOT in data/'})")
        lines.append(f"    {r.about}")
        lines.append(f"    files: {', '.join(r.files)}")
        for scale in r.scales:
            lines.append(f"    --scale {scale}: {r.expected.get(scale, '?')}")
    return "\n".join(lines)


def positive_int(text: str) -> int:
    """Return ``text`` as an integer of at least 1, for argparse (else its error: the command names the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    """Return ``text`` as an integer of at least 0, for argparse."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {value}")
    return value


#: What ``python -m attention_dynamics compute --help`` says (plain text: argparse prints it as it is).
DESCRIPTION = (
    "Compute a stored result: the runs too heavy for a chapter's time budget, as independent jobs run locally or on "
    "a SLURM cluster. A computation writes into build/compute/<result>/<scale>/ under the repository root (--root), "
    "keeps each finished job's output and resumes from them when run again; --promote copies the committed scale's "
    "files into the package's data folder, which the chapters read."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``compute`` command's arguments to ``parser``."""
    parser.add_argument("result", nargs="?", help="the stored result to compute (see --list)")
    parser.add_argument("--list", action="store_true", help="name every stored result with its size and expected time")
    parser.add_argument("--scale", choices=SCALES,
                        help="the result's scale (default: its committed one; --list shows each result's scales)")
    parser.add_argument("--seeds", type=_non_negative_int, nargs="+",
                        help="seeds instead of the result's own (where it has seeds)")
    parser.add_argument("--launcher", choices=LAUNCHERS, default="local",
                        help="local processes (default), a SLURM cluster through submitit, submitit on this machine "
                             "in processes of its own (submitit-local) or in this process with the SLURM options "
                             "checked (submitit-debug)")
    parser.add_argument("--processes", type=positive_int,
                        help="local launcher: processes at once, at least 1 (default: the usable CPUs)")
    parser.add_argument("--partition", help="slurm, submitit-debug: the partition")
    parser.add_argument("--time-min", type=positive_int, default=60,
                        help="submitit launchers: time limit of each job in minutes (default: 60)")
    parser.add_argument("--gpus", type=_non_negative_int, default=0, help="slurm, submitit-debug: GPUs per job")
    parser.add_argument("--array-parallelism", type=positive_int,
                        help="slurm, submitit-debug: jobs of the array running at once")
    parser.add_argument("--promote", action="store_true",
                        help="copy the computed files of the committed scale into the package's data folder")


def main(args: argparse.Namespace, root: Path | None = None) -> int:
    """Run the ``compute`` command (parsed by :mod:`attention_dynamics.book.cli`) for the repository at ``root``
    (default: ``args.root``): its computations go to ``root/build/compute``, its promotions to the data folder under
    ``root``."""
    root = Path(root or getattr(args, "root", None) or REPO_ROOT).resolve()
    if args.list:
        print(list_results(data_folder(root)))
        return 0
    if not args.result:
        print("error: name a result (compute --list shows them)", file=sys.stderr)
        return 2
    try:
        if args.promote:
            promote(args.result, args.scale, root=compute_folder(root), data_dir=data_folder(root))
            return 0
        compute(args.result, args.scale, seeds=args.seeds, launcher=args.launcher, processes=args.processes,
                root=compute_folder(root),
                options={"partition": args.partition, "time_min": args.time_min, "gpus": args.gpus,
                         "array_parallelism": args.array_parallelism},
                log=lambda m: print(m, flush=True))
    except (ValueError, RuntimeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
