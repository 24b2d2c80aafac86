"""pytest plugin for nbval: the book's output comparison across machines, and the re-executed ledger.

Loaded by ``make nbval`` (``pytest -p attention_dynamics.book.nbval_plugin --nbval ...``). It changes
three things in nbval's run of every chapter:

1. Claim records are left out of nbval's comparison (their MIME type joins the collector's skip
   list, and the glued value of each claim is set aside with it): the claims comparator
   (``python -m attention_dynamics ledger --compare``) checks them with each claim's own tolerance.
2. Numbers in the other outputs are compared by tolerance, per kind (:mod:`attention_dynamics.book.nbcompare`):
   where a re-executed output agrees with the committed one in that sense, nbval sees the committed
   text; where it does not, nbval reports the difference as usual. The figures of a cell tagged
   ``trained-output`` are not compared (what they draw is compared in the cell's text and claims).
3. With ``--book-executed-dir DIR``, every re-executed chapter is written to ``DIR/<chapter>.ipynb``
   (the committed notebook with the new outputs; a failing cell is marked in its metadata) and
   their claims to ``DIR/claims.json``, with the numerical environment in ``DIR/environment.json``:
   the one re-execution serves the output comparison, the claims comparator and, on failure, the
   artifact a maintainer downloads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ..ledger.claims import CLAIM_GLUE_PREFIX, CLAIM_MIME_TYPE, write_ledger
from .nbcompare import IMAGE_MIME_TYPES, TRAINED, cell_tolerance, claim_output_names, snap_outputs

#: The MIME key under which myst-nb's glue stores a claim record in a notebook output.
CLAIM_RECORD_KEY = "application/papermill.record/" + CLAIM_MIME_TYPE

_EXECUTED: dict[str, dict[int, dict[str, Any]]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attention_dynamics", "the book's nbval comparison")
    group.addoption(
        "--book-executed-dir",
        default=None,
        help="write every re-executed chapter, its claims ledger and the environment into this folder",
    )


def _glue_name(output: Any) -> str | None:
    return (output.get("metadata") or {}).get("scrapbook", {}).get("name")


def _without_claims(outputs: list, ids: set[str]) -> list:
    """Return the outputs less the records of the claims ``ids`` and the glued values of those claims."""
    names = ids | {CLAIM_GLUE_PREFIX + i for i in ids}
    return [o for o in outputs if _glue_name(o) not in names]


def pytest_configure(config: pytest.Config) -> None:
    try:
        from nbval import plugin as nbval_plugin
    except ImportError:  # pragma: no cover - nbval is a test dependency
        return
    cell_class = nbval_plugin.IPyNbCell
    if getattr(cell_class, "_book_compare", False):
        return
    original = cell_class.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        # A claim recorded on either side is set aside on both: one missing on one side is then
        # reported by the claims comparator, which names it.
        ids = claim_output_names(ref, CLAIM_GLUE_PREFIX) | claim_output_names(test, CLAIM_GLUE_PREFIX)
        ref_kept = _without_claims(list(ref), ids)
        test_kept = _without_claims(list(test), ids)
        tolerance = cell_tolerance(self.cell)
        snapped = snap_outputs(test_kept, ref_kept, tolerance, sanitize=self.sanitize)
        if tolerance is TRAINED:  # a trained figure's pixels: see attention_dynamics.book.nbcompare
            skip_compare = tuple(skip_compare or self.parent.skip_compare) + IMAGE_MIME_TYPES
        return original(self, [nbformat.from_dict(o) for o in snapped], ref_kept, skip_compare)

    cell_class.compare_outputs = compare_outputs
    cell_class._book_compare = True


def pytest_collectstart(collector: pytest.Collector) -> None:
    from nbval.plugin import IPyNbFile

    if isinstance(collector, IPyNbFile) and CLAIM_RECORD_KEY not in collector.skip_compare:
        collector.skip_compare = collector.skip_compare + (CLAIM_RECORD_KEY,)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    if call.when != "call" or not hasattr(item, "cell_num") or not hasattr(item, "test_outputs"):
        return
    report = outcome.get_result()
    _EXECUTED.setdefault(str(item.fspath), {})[item.cell_num] = {
        "outputs": list(item.test_outputs or []),
        "failed": bool(report.failed),
    }


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = session.config.getoption("--book-executed-dir", default=None)
    if not target or not _EXECUTED:
        return
    write_executed(Path(target), _EXECUTED)


def write_executed(target: Path, executed: dict[str, dict[int, dict[str, Any]]]) -> Path:
    """Write the re-executed chapters, their ledger and the environment into ``target``; return it."""
    import torch

    from ..ledger.claims import atomic_write_text, claims_from_notebook
    from .notebooks import normalise_notebook, notebook_text

    target.mkdir(parents=True, exist_ok=True)
    claims = []
    for path_text, cells in sorted(executed.items()):
        path = Path(path_text)
        nb = nbformat.read(path, as_version=4)
        code_cells = [c for c in nb.cells if c.cell_type == "code"]
        for number, cell in enumerate(code_cells):
            run = cells.get(number)
            if run is None:
                cell.outputs = []
                cell.metadata["attention_dynamics"] = {"nbval": "not run"}
                continue
            cell.outputs = [nbformat.from_dict(_plain_output(o)) for o in run["outputs"]]
            if run["failed"]:
                cell.metadata["attention_dynamics"] = {"nbval": "outputs differ or the cell failed"}
        normalise_notebook(nb)
        atomic_write_text(target / path.name, notebook_text(nb))
        claims.extend(claims_from_notebook(nb, path.stem))
    write_ledger(claims, target / "claims.json")
    environment = {
        "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
    }
    atomic_write_text(target / "environment.json", json.dumps(environment, indent=2) + "\n")
    return target


def _plain_output(output: Any) -> dict[str, Any]:
    """Return an nbval output (a NotebookNode of a kernel message) as a valid notebook output."""
    out = dict(output)
    kind = out.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": out.get("name", "stdout"), "text": out.get("text", "")}
    if kind == "error":
        return {"output_type": "error", "ename": out.get("ename", ""), "evalue": out.get("evalue", ""),
                "traceback": out.get("traceback", [])}
    result = {"output_type": kind, "data": dict(out.get("data", {})), "metadata": dict(out.get("metadata", {}))}
    if kind == "execute_result":
        result["execution_count"] = out.get("execution_count")
    return result
