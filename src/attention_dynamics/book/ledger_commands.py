"""The runner's ledger commands: rebuild and check the claims ledger, compare two ledgers, measure the
tolerances from repeated runs, report the margins (``python -m attention_dynamics ledger …``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..ledger.claims import (
    ATOL_FLOOR,
    RTOL_FLOOR,
    SPREAD_FACTOR,
    atomic_write_text,
    attach_tolerances,
    claims_from_notebook,
    compare_ledgers,
    load_ledger,
    load_tolerances,
    margin_problems,
    measure_tolerances,
    write_ledger,
)
from .notebooks import book_chapters

__all__ = ["ledger_command", "ledger_compare_command", "measure_spread_command", "margins_command",
           "perturbed_environment"]


def _collect_claims(notebooks: list[Path], root: Path):
    """Return the claims of the executed notebooks, with the book's measured cross-machine tolerances."""
    import nbformat

    claims = []
    for nb_path in notebooks:
        if nb_path.exists():
            claims.extend(claims_from_notebook(nbformat.read(nb_path, as_version=4), nb_path.stem))
    return attach_tolerances(claims, load_tolerances(root / "book" / "claim_tolerances.json"))


def ledger_compare_command(root: Path, other_path: Path) -> int:
    """Compare a re-executed ledger with the committed one; exit 1 listing every claim that differs."""
    committed_path = root / "book" / "claims.json"
    committed = load_ledger(committed_path)
    other = load_ledger(other_path)
    problems = compare_ledgers(committed, other)
    if problems:
        print(f"error: {len(problems)} of {len(committed)} claims do not reproduce the committed ledger:",
              file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"{other_path} reproduces {committed_path.relative_to(root)}: {len(committed)} claims, same statuses, "
          "every value within its cross-machine tolerance")
    return 0


def measure_spread_command(root: Path, runs: Sequence[Path], perturbed: Sequence[Path] = ()) -> int:
    """Update book/claim_tolerances.json from ledgers of chapters re-executed with other seeds.

    The runs may cover only some chapters (e.g. ``reproduce --chapter 6 --seed 1``): claims they hold
    are measured afresh, every other claim keeps its stored measurement, and claims no longer in the
    committed ledger are dropped. ``perturbed``: ledgers of the default seed re-executed under
    ``perturbed-env`` (e.g. ``build/nbval/claims.json`` of ``make nbval``), the spread across machines.
    """
    committed = load_ledger(root / "book" / "claims.json")
    others = []
    for run in runs:
        path = run / "claims.json" if run.is_dir() else run
        others.append(load_ledger(path))
    moved = [load_ledger(p / "claims.json" if p.is_dir() else p) for p in perturbed]
    measured = measure_tolerances(committed, others, perturbed=moved)
    path = root / "book" / "claim_tolerances.json"
    stored = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    current = {c.id for c in committed}
    kept = {cid: entry for cid, entry in stored.get("claims", {}).items() if cid in current and cid not in measured}
    reference = {c.id: c for c in committed}
    for cid, entry in measured.items():  # no new seed run holds it: keep its stored seed values
        old = stored.get("claims", {}).get(cid)
        if len(entry["values"]) == 1 and old and len(old.get("values", [])) > 1:
            values = [reference[cid].value] + list(old["values"][1:])
            sd = float(np.std(values, ddof=1))
            scale = max(abs(float(np.mean(values))), float(np.max(np.abs(values))) * 1e-3, ATOL_FLOOR)
            entry.update(values=values, sd=sd, runs=old.get("runs", stored.get("runs", [])))
            entry["rtol"] = float(f"{max(entry['rtol'], SPREAD_FACTOR * sd / scale):.3g}")
    for cid, entry in measured.items():
        entry.setdefault("runs", [str(r) for r, ledger in zip(runs, others) if any(c.id == cid for c in ledger)])
        entry["perturbed_runs"] = [str(r) for r, ledger in zip(perturbed, moved) if any(c.id == cid for c in ledger)]
    payload = {
        "about": "Cross-machine relative tolerance of each claim without a closed form: "
                 f"rtol = max({RTOL_FLOOR:g}, {SPREAD_FACTOR:g} x sample sd / |mean| of its values over the "
                 "chapters' default seeds (first value) and re-executions with other seeds (a claim's 'runs', "
                 f"or the top-level 'runs' where it names none), {SPREAD_FACTOR:g} x the largest change under a "
                 "simulated other machine / |mean| (a claim's 'perturbed_runs')). Written by "
                 "`python -m attention_dynamics ledger --measure-spread RUN ...`.",
        "runs": stored.get("runs", [str(r) for r in runs]),
        "claims": dict(sorted({**kept, **measured}.items())),
    }
    atomic_write_text(path, json.dumps(payload, indent=1) + "\n")
    print(f"Measured the tolerances of {len(measured)} claims ({len(kept)} kept from before) in "
          f"{path.relative_to(root)}")
    return 0


def margins_command(root: Path) -> int:
    """List the claims stated too close to their threshold; exit 1 if there are any."""
    problems = margin_problems(load_ledger(root / "book" / "claims.json"))
    for line in problems:
        print(line)
    print(f"{len(problems)} claim(s) could change status within their cross-machine tolerance")
    return 1 if problems else 0


#: ATen's CPU dispatch levels, best first (``torch.backends.cpu.get_cpu_capability()``).
_CAPABILITIES = ("AVX512", "AVX2", "DEFAULT")


def perturbed_environment(root: Path) -> dict[str, str]:
    """Return environment variables that make this machine compute like another one.

    A lower ATen kernel dispatch level than this CPU's own (AVX512 → avx2, otherwise default) and
    a thread count other than the one the committed chapters were executed with (from
    book/status.json): both change the kernels and reduction orders, as another CPU does.
    """
    import torch

    own = torch.backends.cpu.get_cpu_capability().upper()
    lower = "avx2" if own == "AVX512" else "default"
    executed = {str(v.get("environment", {}).get("cpu_threads")) for v in _read_status(root).values()}
    executed.discard("None")
    threads = "1" if executed != {"1"} else "2"
    return {"ATEN_CPU_CAPABILITY": lower, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def _read_status(root: Path) -> dict[str, Any]:
    return _read_status_file(root / "book" / "status.json")


def ledger_command(root: Path, *, check: bool) -> int:
    """Rebuild (or with ``check``, verify) ``book/claims.json`` from the committed notebooks."""
    claims = _collect_claims([c.path for c in book_chapters(root)], root)
    path = root / "book" / "claims.json"
    if check:
        stored = load_ledger(path) if path.exists() else []
        if [c.to_json() for c in stored] != [c.to_json() for c in claims]:
            print(f"error: {path} does not match the claims in the committed notebooks; run `make book`", file=sys.stderr)
            return 1
        print(f"{path.relative_to(root)} matches the notebooks ({len(claims)} claims)")
        return 0
    write_ledger(claims, path)
    print(f"Wrote {len(claims)} claims to {path.relative_to(root)}")
    return 0


def _read_status_file(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("chapters", {})
    except (OSError, json.JSONDecodeError):
        return {}
