"""Chapter 7 at a glance: which primitive each family realises on each tunnel, beside Paper I (the chapter's key
figure, from the claims the chapter records), and the settings of the stored runs the chapter reads, glued for its
folded settings table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...ledger import claims
from ...models.registry import family_label, family_names
from .formats_report import CH6_SETTING_KL_CLAIM_IDS
from .memory_report import LONGMEM_KL_CLAIM_IDS
from .report import STICKY_CLAIM_IDS, TABLE_CLAIM_IDS, outcome_words
from .settings import (
    PAPER_I_RESULTS,
    REALISED_BINDING_ACCURACY,
    REALISED_FRACTION_OF_BLIND,
    STICKY_TRANSPORT_FRACTION_OF_BLIND,
    TRANSPORT_FRACTION_OF_BLIND,
)

__all__ = ["PRIMITIVE_COLUMNS", "Cell", "primitive_map", "glue_stored_settings"]

#: The key figure's columns: (heading, the primitive in Paper I's verdicts, the claims of the book's families).
PRIMITIVE_COLUMNS = (
    ("\naccumulation\n(bijection)", "bijection",
     {f: TABLE_CLAIM_IDS[("bijection_mae_bits", f)] for f in STICKY_CLAIM_IDS}),
    ("transport\n(Paper I's\nHMMs)", "hmm", CH6_SETTING_KL_CLAIM_IDS),
    ("transport\n(sticky\nHMMs)", "hmm", STICKY_CLAIM_IDS),
    ("transport\n(long\nmemory)", "hmm", LONGMEM_KL_CLAIM_IDS),
    ("\nbinding\n(recall)", "binding", {f: TABLE_CLAIM_IDS[("binding_accuracy", f)] for f in STICKY_CLAIM_IDS}),
)


@dataclass(frozen=True)
class Cell:
    """One family on one tunnel: ``share`` of what the context is worth that the model recovers (0: the context-blind
    level, 1: the exact posterior), whether it ``realised`` the primitive (its value on the realised side of the
    tunnel's threshold), and its ``outcome`` beside Paper I in the reader's words."""

    share: float
    realised: bool
    open: bool
    outcome: str


def primitive_map(recorded: Mapping[str, claims.Claim], levels: Mapping[str, float]) -> dict[str, Any]:
    """Return the key figure's data from the recorded claims (by id): ``{"rows": [family labels], "columns":
    [headings], "cells": {(row, column): Cell}}``.

    ``levels``: the context-blind level of each column's measure (``bijection`` entropy error, ``hmm`` KL at chapter
    6's setting, ``hmm_sticky`` and ``hmm_longmem`` KL, all in bits; ``binding`` accuracy) and ``hmm_longmem_rule``,
    the long-memory tunnel's rule-window level (bits), which transport there must reach.
    """
    thresholds = {0: REALISED_FRACTION_OF_BLIND * levels["bijection"], 1: TRANSPORT_FRACTION_OF_BLIND * levels["hmm"],
                  2: STICKY_TRANSPORT_FRACTION_OF_BLIND * levels["hmm_sticky"], 3: levels["hmm_longmem_rule"],
                  4: REALISED_BINDING_ACCURACY}
    blind = {0: levels["bijection"], 1: levels["hmm"], 2: levels["hmm_sticky"], 3: levels["hmm_longmem"],
             4: levels["binding"]}
    rows, cells = [], {}
    for family in family_names():
        row = family_label(family)
        for c, (heading, task, ids) in enumerate(PRIMITIVE_COLUMNS):
            claim = recorded.get(ids.get(family, ""))
            if claim is None:
                continue
            if row not in rows:
                rows.append(row)
            value = float(claim.value)
            if task == "binding":
                share, realised = (value - blind[c]) / (1 - blind[c]), value >= thresholds[c]
            else:
                share, realised = 1 - value / blind[c], value <= thresholds[c]
            verdict = PAPER_I_RESULTS[family]["realises"]
            cells[(row, heading)] = Cell(share=share, realised=realised, open=claim.status == "undecided",
                                         outcome=outcome_words(claim.status, None if verdict is None else
                                                               bool(verdict[task]), realised))
    return {"rows": rows, "columns": [heading for heading, _, _ in PRIMITIVE_COLUMNS], "cells": cells}


def glue_stored_settings(*, sticky: Mapping[str, Any], longmem: Mapping[str, Any], ch6: Mapping[str, Any],
                         formats: Mapping[str, Any], grid_steps: int) -> None:
    """Glue the settings of the stored runs that the chapter's settings table states (each from its file's
    ``settings``): chapter 6's setting, the long-memory tunnel and the input formats (the sticky HMMs' are glued with
    their section, :func:`~attention_dynamics.chapters.architectures.sticky_report.glue_sticky`)."""
    c, m, f = ch6["settings"], longmem["settings"], formats["settings"]
    values = {
        "architectures.ch6_K": c["hmm_length"], "architectures.ch6_lr": c["lr"], "architectures.ch6_steps": c["steps"],
        "architectures.ch6_steps_mamba": c["steps_mamba"], "architectures.ch6_n_seeds": len(c["seeds"]),
        "architectures.ch6_eval_sequences": c["eval_sequences"], "architectures.ch6_batch_size": c["batch_size"],
        "architectures.ch6_step_ratio": c["steps"] / grid_steps,
        "architectures.longmem_K": m["hmm_length"], "architectures.longmem_self_transition": m["self_transition"],
        "architectures.longmem_switch_share": 1 - m["self_transition"],
        "architectures.longmem_stay_steps": 1 / (1 - m["self_transition"]),
        "architectures.longmem_emission_uniform_share": m["emission_uniform_share"],
        "architectures.longmem_emission_dirichlet_share": 1 - m["emission_uniform_share"],
        "architectures.longmem_lr": m["lr"], "architectures.longmem_n_seeds": len(m["seeds"]),
        "architectures.longmem_longer_factor": m["longer_factor"],
        "architectures.formats_K": f["hmm_length"], "architectures.formats_grid": f["grid"],
        "architectures.formats_lr": f["lr"], "architectures.formats_steps_sticky": f["steps"],
        "architectures.formats_steps_random": f["steps_hmm"], "architectures.formats_n_seeds": len(f["seeds"]),
        "architectures.sticky_seed": sticky["seed"],
    }
    for name, value in values.items():
        claims.glue(name, value)
