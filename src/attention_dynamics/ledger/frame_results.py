"""Chapter 4's frame results as every chapter reads them: the stored freeze runs and definitions, and the frame row.

Chapter 4 computes and stores the freeze runs (``data/frame_freeze.json``, ``data/frame_freeze_full.json``) and the
recall head's frame–precision order under four definitions (``data/frame_definitions.json``), declaring each as a
stored result; no chapter imports another, so the chapters that read them too do so here: chapter 6 re-reads the
tunnel's freeze runs, and chapters 2 and 8 state the verdict of chapter 4's frame row without recording its claims
(:func:`frame_row_verdict`). The measures these results are read with are in
:mod:`attention_dynamics.diagnostics.frame_order`.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import claims, verdicts
from .results import load_data

__all__ = [
    "FRAME_FREEZE_FILE",
    "load_frame_freeze",
    "FRAME_FREEZE_FULL_FILE",
    "load_frame_freeze_full",
    "FRAME_DEFINITIONS_FILE",
    "TOY_ORDER_CLAIMS",
    "load_frame_definitions",
    "frame_row_verdict",
]


#: The file of chapter 4's stored result ``frame_freeze`` (freeze runs of the recall head and of chapter 6's tunnel).
FRAME_FREEZE_FILE = "frame_freeze.json"


#: The file of chapter 4's stored result ``frame_freeze_full`` (the tunnel frozen at initialisation, full budget).
FRAME_FREEZE_FULL_FILE = "frame_freeze_full.json"


def load_frame_freeze_full(path=None) -> dict[str, Any]:
    """Return the stored full-budget freeze runs ``data/frame_freeze_full.json`` (the tunnel's, under ``"tunnel"``):
    chapter 6's causal reading of the geometry."""
    return load_data(FRAME_FREEZE_FULL_FILE, path)


def load_frame_freeze(path=None) -> dict[str, Any]:
    """Return the stored freeze runs ``data/frame_freeze.json`` (or the file at ``path``): chapter 4 records them, and
    chapter 6 re-reads the tunnel's as its fourth definition of the order."""
    return load_data(FRAME_FREEZE_FILE, path)


# ---------------------------------------------------------------------------------------------
# Chapter 4's frame row, read from its stored result
# ---------------------------------------------------------------------------------------------

#: The file of chapter 4's stored result ``frame_definitions`` (the recall head under four definitions).
FRAME_DEFINITIONS_FILE = "frame_definitions.json"

#: Chapter 4's order claims: (claim id, definition, optimiser). The chapter records each (a test checks that it
#: records exactly these); the frame row of the verdict page is decided by them.
TOY_ORDER_CLAIMS = (
    ("frame_precision.order_path_sgd", "path", "sgd"),
    ("frame_precision.order_path_adam", "path", "adam"),
    ("frame_precision.order_function_sgd", "function", "sgd"),
    ("frame_precision.order_function_adam", "function", "adam"),
    ("frame_precision.order_function_log_sgd", "function_log", "sgd"),
    ("frame_precision.order_function_log_adam", "function_log", "adam"),
    ("frame_precision.order_intervention_sgd", "intervention", "sgd"),
    ("frame_precision.order_intervention_adam", "intervention", "adam"),
)


def load_frame_definitions(path=None) -> dict[str, Any]:
    """Return chapter 4's stored result ``data/frame_definitions.json`` (or the file at ``path``)."""
    return load_data(FRAME_DEFINITIONS_FILE, path)


def frame_row_verdict(result: Mapping[str, Any]):
    """Return the verdict of chapter 4's frame–precision row (:func:`attention_dynamics.ledger.verdicts.verdict_of`) from the
    stored result, recording no claim: for a chapter that states the verdict but does not own its claims."""
    H = str(result["main_horizon"])
    ledger = []
    for claim_id, definition, optimiser in TOY_ORDER_CLAIMS:
        row = result["toy"][optimiser]["horizons"][H][definition]
        status = claims.claim_status(row["share"], lower=0.5, interval=(row["low"], row["high"]))
        ledger.append({"id": claim_id, "status": status, "value": row["share"], "interval": [row["low"], row["high"]]})
    return verdicts.verdict_of("frame_precision_toy", ledger)
