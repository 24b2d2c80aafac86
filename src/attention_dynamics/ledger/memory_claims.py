"""The claims a chapter states with the memory ladder (:mod:`attention_dynamics.diagnostics.memory_ladder`).

A model's KL stated as the memory it matches, decided by the window rule (:func:`memory_claim`); the ladder's own
levels, each checked against a sum over every hidden path where that is cheap (:func:`window_claims`); and the glue
of a ladder's numbers for the prose (:func:`glue_ladder`, :func:`glue_memory`). The claim ids are written out by the
chapters (6 and 7) that call these.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..diagnostics.memory_ladder import (
    LADDER_WINDOWS,
    RULE_LONGEST_WINDOW,
    RULE_MEASURABLE_FRACTION,
    MemoryLadder,
    seed_interval,
)
from ..science import calibration
from ..tasks import hmm
from . import claims

__all__ = ["memory_claim", "ENUMERATION_MAX_WINDOW", "window_claims", "glue_ladder", "glue_memory"]


def memory_claim(claim_id: str, kl_bits: float | Sequence[float], ladder: MemoryLadder, *, model: str,
                 realises: bool | None, params: Mapping[str, Any], tunnel_text: str,
                 undecided_because: str | None = None):
    """Record ``claim_id``: the memory (in steps) that a model's KL matches on ``ladder`` (:meth:`MemoryLadder.memory_steps`).

    ``kl_bits``: one KL or one per seed (then the claim is the memory of the mean KL, with the memories of the
    interval's ends as its interval). Bounds: the window rule — more than :attr:`MemoryLadder.rule_window` steps for
    a model said to realise transport (``realises``), at most that many for one said not to; ``undecided_because``:
    why the measurement cannot decide it (as the model's KL claim). Returns the claim.
    """
    values = np.atleast_1d(np.asarray(kl_bits, dtype=float))
    k_rule = ladder.rule_window
    bounds = ({"lower": None, "upper": None} if realises is None else
              {"lower": k_rule + 1, "upper": None} if realises else {"lower": None, "upper": k_rule})
    mean = float(values.mean())
    interval, extra = None, {}
    if values.size > 1:
        ci = seed_interval(values)
        low_kl, high_kl = max(ci["low"], 0.0), ci["high"]
        extra = {"seeds_kl_bits": values.tolist(), "kl_interval_bits": [ci["low"], ci["high"]],
                 "memory_per_seed": [ladder.memory_steps(v) for v in values], "interval": "Student-t 95% over seeds"}
        if realises is not None:  # an interval claim needs a bound; memory falls as KL rises
            interval = (ladder.memory_steps(high_kl), ladder.memory_steps(low_kl))
    steps = ladder.memory_steps(mean)
    said = ("no verdict in Paper I" if realises is None else
            f"Paper I: {'realises' if realises else 'does not realise'} transport")
    return claims.record(
        claim_id, steps, unit="steps of memory", interval=interval, undecided_because=undecided_because,
        description=(f"{model} on {tunnel_text}: the memory its KL to the exact filter matches — the smallest k whose "
                     f"exact k-step window posterior is at or below it ({ladder.memory_text(mean)}; KL "
                     f"{mean:.4g} bits{'' if values.size == 1 else f', mean over {values.size} seeds'}); transport "
                     f"needs more than {k_rule} steps ({said})"),
        params={**params, **extra, "rule_window": k_rule, "rule_level_bits": ladder.rule_level,
                "ladder_kl_bits": {str(k): ladder.level(k) for k in LADDER_WINDOWS}},
        explanation=(f"the model's KL ({mean:.4g} bits) is {ladder.memory_text(mean)}, so a look-back of {steps} steps "
                     f"does as well; transport here asks for more than {k_rule} steps (the {k_rule}-step window's "
                     f"level, {ladder.rule_level:.3g} bits, the longest window up to {RULE_LONGEST_WINDOW} steps that "
                     f"is still at least {RULE_MEASURABLE_FRACTION:.0%} of the context-blind level)"),
        **bounds)


#: Windows longer than this are not cross-checked by enumerating paths (5^k paths per position).
ENUMERATION_MAX_WINDOW = 4


def window_claims(ids: Mapping[int, str], transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor,
                  posterior: torch.Tensor, ladder: MemoryLadder, *, params: Mapping[str, Any], tunnel_text: str):
    """Record the ladder claims ``ids`` (window k → claim id, written out by the chapter) and return them by id.

    Each level comes from the forward recursion (:func:`~attention_dynamics.tasks.hmm.window_posterior`) and, for
    windows up to :data:`ENUMERATION_MAX_WINDOW`, is checked against the same level computed by summing over every
    hidden path of the window (:func:`~attention_dynamics.tasks.hmm.window_posterior_by_path_enumeration`); longer
    windows are exact too but recorded as new (the unit tests check the recursion against enumeration).
    """
    out = {}
    for k, claim_id in ids.items():
        expected, tolerance = None, None
        if k <= ENUMERATION_MAX_WINDOW:
            q = hmm.window_posterior_by_path_enumeration(transition, emission, observations, k)
            expected, tolerance = calibration.calibration_report(posterior, q.log()).kl_bits, 1e-9
        out[claim_id] = claims.record(
            claim_id, ladder.level(k), unit="bits", expected=expected, tolerance=tolerance,
            description=(f"{tunnel_text}: KL from the exact filter of the exact posterior given only the last {k} "
                         f"observations and the matrices ({ladder.level(k) / ladder.context_blind_kl_bits:.3f} × the "
                         f"context-blind level){'; checked against the sum over every hidden path of the window' if expected is not None else ''}"),
            params={**params, "window": k, "n_sequences": ladder.n_sequences})
    return out


def glue_ladder(prefix: str, ladder: MemoryLadder) -> None:
    """Glue a ladder's levels for the prose: ``<prefix>_k<k>`` (bits) and ``<prefix>_k<k>_ratio`` (× context-blind) for
    the :data:`LADDER_WINDOWS`, ``<prefix>_rule_window`` and ``<prefix>_rule_level``."""
    for k in LADDER_WINDOWS:
        claims.glue(f"{prefix}_k{k}", ladder.level(k))
        claims.glue(f"{prefix}_k{k}_ratio", ladder.level(k) / ladder.context_blind_kl_bits)
    claims.glue(f"{prefix}_rule_window", ladder.rule_window)
    claims.glue(f"{prefix}_rule_level", ladder.rule_level)


def glue_memory(name: str, ladder: MemoryLadder, kl_bits: float) -> str:
    """Glue (and return) the memory a KL matches: ``<name>_memory`` (text) and ``<name>_memory_steps``."""
    text = ladder.memory_text(kl_bits)
    claims.glue(f"{name}_memory", text)
    claims.glue(f"{name}_memory_steps", ladder.memory_steps(kl_bits))
    return text
