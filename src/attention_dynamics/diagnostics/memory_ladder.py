"""HMM numbers against short memories: the memory ladder, the memory a KL matches, and the window rule of transport.

A model's KL to the exact filter says that it *carries the belief forward* only when no simpler predictor
reaches it. The context-blind posterior (the current observation and the matrices) is one such predictor;
the exact posterior given the last ``k`` observations (:func:`~attention_dynamics.tasks.hmm.window_posterior`)
is a whole ladder of them, from ``k = 1`` (context-blind) to the filter itself. This module measures that ladder
on an evaluation set (:func:`memory_ladder`, :func:`ladder_of_batch`), states a model's KL as the memory it matches
(:meth:`MemoryLadder.memory_steps`, :meth:`MemoryLadder.memory_text`: "between a 3- and a 4-step window"), decides
transport against a window that a short look-back cannot meet (:attr:`MemoryLadder.rule_window`,
:func:`transport_bounds`, :func:`verdict_reason`). The claims a chapter states with it are recorded by
:mod:`attention_dynamics.ledger.memory_claims` (the ledger's layer).

Units: KL and entropy errors in bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..core.settings import check_positive_int
from ..science import calibration, stats
from ..tasks import hmm
from ..tasks.wind_tunnels import TaskBatch

__all__ = [
    "LADDER_WINDOWS",
    "RULE_LONGEST_WINDOW",
    "RULE_MEASURABLE_FRACTION",
    "MemoryLadder",
    "memory_ladder",
    "ladder_of_batch",
    "transport_bounds",
    "seed_interval",
    "verdict_reason",
    "ladder_frame",
]

#: The windows a chapter shows beside every HMM number (1 is the context-blind posterior).
LADDER_WINDOWS = (1, 2, 3, 4, 6, 8)
#: Transport is decided against the longest window up to this many steps ...
RULE_LONGEST_WINDOW = 8
#: ... whose level is still at least this fraction of the context-blind level (shorter windows on a tunnel where the
#: 8-step window is within 1 % of the context-blind gap of the filter: beating a window that *is* the filter to the
#: evaluation set's precision would ask a model for the filter itself).
RULE_MEASURABLE_FRACTION = 0.01




@dataclass
class MemoryLadder:
    """The KL (bits) to the exact filter of the exact k-step window posterior, for k = 1 … ``len(kl_bits)``, on one set.

    ``kl_bits[k − 1]``: KL of the k-step window (``kl_bits[0]``: context-blind); windows are computed up to the
    sequence length K (the filter, KL 0) or a shorter ``max_window``; ``entropy_mae_bits[k − 1]``: its per-sample
    entropy error; ``kl_by_position[k]`` ``(K,)`` for the ladder's :data:`LADDER_WINDOWS`; ``sequence_length``: K;
    ``n_sequences``: the size of the set.
    """

    kl_bits: np.ndarray
    entropy_mae_bits: np.ndarray
    kl_by_position: dict[int, np.ndarray]
    n_sequences: int
    sequence_length: int | None = None

    def __post_init__(self) -> None:
        self.kl_bits = np.asarray(self.kl_bits, dtype=float)
        if self.sequence_length is None:
            self.sequence_length = len(self.kl_bits)

    @property
    def length(self) -> int:
        """Return the longest window measured (K, or the ``max_window`` the ladder was computed with)."""
        return len(self.kl_bits)

    def level(self, window: int) -> float:
        """Return the KL (bits) of the ``window``-step posterior (a window ≥ K is the filter: 0)."""
        window = check_positive_int("window", window)
        if window >= self.sequence_length:
            return 0.0
        if window > self.length:
            raise ValueError(f"the ladder was computed up to {self.length} steps, not {window}")
        return float(self.kl_bits[window - 1])

    @property
    def context_blind_kl_bits(self) -> float:
        """Return the KL of the one-step window, the context-blind level."""
        return self.level(1)

    def memory_steps(self, kl_bits: float) -> int:
        """Return the smallest k whose window level is at or below ``kl_bits``: a k-step look-back does as well.

        A model with this number m lies between an (m − 1)- and an m-step window; m = 1 means it is no better
        than the context-blind posterior. Below every window measured: the longest measured + 1.
        """
        at_or_below = np.nonzero(self.kl_bits <= kl_bits)[0]
        return int(at_or_below[0]) + 1 if at_or_below.size else min(self.length + 1, self.sequence_length)

    def memory_text(self, kl_bits: float) -> str:
        """Return the memory a KL matches, in words: "between a 3- and a 4-step window", "above the context-blind level"."""
        m = self.memory_steps(kl_bits)
        if kl_bits > self.context_blind_kl_bits:
            return "above the context-blind level (a one-step window does better)"
        if m == 1:
            return "at the context-blind level"
        if m > self.length:
            return f"below every window up to {self.length} steps"
        return f"between {_article(m - 1)} {m - 1}- and {_article(m)} {m}-step window"

    @property
    def rule_window(self) -> int:
        """Return the window transport is decided against: the longest k ≤ :data:`RULE_LONGEST_WINDOW` whose level is
        at least :data:`RULE_MEASURABLE_FRACTION` of the context-blind level."""
        floor = RULE_MEASURABLE_FRACTION * self.context_blind_kl_bits
        usable = [k for k in range(1, min(RULE_LONGEST_WINDOW, self.length) + 1) if self.level(k) >= floor]
        return max(usable)

    @property
    def rule_level(self) -> float:
        """Return the KL (bits) a model must reach to realise transport: the level of :attr:`rule_window`."""
        return self.level(self.rule_window)

    def table(self, windows: Sequence[int] = LADDER_WINDOWS) -> dict[str, dict[str, float]]:
        """Return ``{"k-step window": {"KL (bits)", "× context-blind", "entropy error (bits)"}}`` plus the filter."""
        rows = {}
        for k in windows:
            name = "context-blind (k = 1)" if k == 1 else f"{k}-step window"
            mae = 0.0 if k >= self.sequence_length else float(self.entropy_mae_bits[k - 1])
            rows[name] = {"KL (bits)": self.level(k), "× context-blind": self.level(k) / self.context_blind_kl_bits,
                          "entropy error (bits)": mae}
        rows["exact filter"] = {"KL (bits)": 0.0, "× context-blind": 0.0, "entropy error (bits)": 0.0}
        return rows

    def to_json(self) -> dict[str, Any]:
        """Return the ladder as plain JSON data."""
        return {"kl_bits": [float(v) for v in self.kl_bits], "entropy_mae_bits": [float(v) for v in self.entropy_mae_bits],
                "kl_by_position": {str(k): [float(v) for v in c] for k, c in self.kl_by_position.items()},
                "n_sequences": self.n_sequences, "sequence_length": self.sequence_length}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "MemoryLadder":
        """Return the ladder stored by :meth:`to_json`."""
        return cls(kl_bits=np.asarray(data["kl_bits"]), entropy_mae_bits=np.asarray(data["entropy_mae_bits"]),
                   kl_by_position={int(k): np.asarray(v) for k, v in data["kl_by_position"].items()},
                   n_sequences=int(data["n_sequences"]), sequence_length=data.get("sequence_length"))


def _article(n: int) -> str:
    """Return "an" before a number read with a vowel sound (8, 11, 18, 80 …), else "a"."""
    return "an" if str(n).startswith("8") or n in (11, 18) else "a"


def memory_ladder(transition: torch.Tensor, emission: torch.Tensor, observations: torch.Tensor,
                  posterior: torch.Tensor, *, max_window: int | None = None) -> MemoryLadder:
    """Return the :class:`MemoryLadder` of a set of sequences (matrices ``(n, S, S)``, ``(n, S, O)``, observations
    ``(n, K)``, exact filter ``(n, K, S)``), every window k = 1 … K (or … ``max_window``; the cost grows as its square)."""
    K = observations.shape[1]
    top = K if max_window is None else min(K, check_positive_int("max_window", max_window))
    kl, mae, by_position = np.empty(top), np.empty(top), {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the sums' order, and so the last digits, do not depend on the machine
    try:
        for k in range(1, top + 1):
            report = calibration.calibration_report(
                posterior, hmm.window_posterior(transition, emission, observations, k).clamp_min(1e-300).log())
            kl[k - 1], mae[k - 1] = report.kl_bits, report.entropy_mae_bits
            if k in LADDER_WINDOWS:
                by_position[k] = report.kl_by_position
    finally:
        torch.set_num_threads(threads)
    return MemoryLadder(kl_bits=kl, entropy_mae_bits=mae, kl_by_position=by_position, n_sequences=observations.shape[0],
                        sequence_length=K)


def ladder_of_batch(batch: TaskBatch | hmm.HMMBatch, *, max_window: int | None = None) -> MemoryLadder:
    """Return the :class:`MemoryLadder` of an HMM :class:`TaskBatch` (chapter 7) or :class:`~attention_dynamics.tasks.hmm.HMMBatch`
    (chapter 6)."""
    if isinstance(batch, hmm.HMMBatch):
        return memory_ladder(batch.transition, batch.emission, batch.observations, batch.posterior,
                             max_window=max_window)
    e = batch.extra
    return memory_ladder(e["transition"], e["emission"], e["observations"], batch.posterior, max_window=max_window)


def transport_bounds(realises: bool | None, ladder: MemoryLadder) -> dict[str, float | None]:
    """Return the claim bounds of a KL under the window rule: ``upper`` = the rule window's level for a model said to
    realise transport, ``lower`` for one said not to, none without a verdict."""
    if realises is None:
        return {"lower": None, "upper": None}
    return {"lower": None, "upper": ladder.rule_level} if realises else {"lower": ladder.rule_level, "upper": None}


def seed_interval(values: Sequence[float]) -> dict[str, float]:
    """Return the mean of ``values`` over seeds with its Student-t 95 % interval (``mean``, ``low``, ``high``, ``sd``, ``n``)."""
    return stats.t_interval(values)


def verdict_reason(family: str, status: str, realises: bool | None, *, control_realises: bool | None, longer: bool,
                   late_drop: float | None, longer_factor: int) -> str | None:
    """Return why a transport row cannot be decided (or ``None`` when it can), by the book's two rules.

    A "does not realise" row that passes (the model stays above the level) is undecided while the transformer, the
    positive control, does not realise transport on the same tunnel either (``control_realises`` False); one that
    fails (the model goes below the level) is a finding whatever the control does — more training cannot undo it. A
    "realises" row that fails without a run ``longer_factor``× as long is undecided, since a learning rate that decays
    to zero flattens the end of every curve (``late_drop``: how much its KL still fell over the last 20 % of training).
    """
    if realises is False:
        if status == "pass" and family != "transformer" and control_realises is False:
            return ("The positive control fails: the transformer does not realise transport on this tunnel at this "
                    "budget, so this model's not realising it says nothing about its architecture: not decided at "
                    "this scale.")
        return None
    if status in ("fail", "undecided") and not longer:
        fell = "" if late_drop is None else \
            f" (the KL still fell by up to {late_drop:.0%} over the last 20% of training)"
        return (f"Not decided at this scale: no run {longer_factor}× as long was made, and the learning rate decays "
                f"to zero, so a flat end is no plateau evidence{fell}.")
    return None


def ladder_frame(ladders: Mapping[str, MemoryLadder], *, models: Mapping[str, Mapping[str, float]] | None = None,
                 windows: Sequence[int] = LADDER_WINDOWS):
    """Return a table (``pandas.DataFrame``) of KL in bits: one column per set (e.g. a test length), one row per window
    (and the exact filter), then one row per model (``models``: row name → {column: KL}) with the memory it matches."""
    import pandas as pd

    rows: dict[str, dict[str, Any]] = {}
    for name, ladder in ladders.items():
        for k in windows:
            label = "context-blind (k = 1)" if k == 1 else f"{k}-step window"
            rows.setdefault(label, {})[name] = round(ladder.level(k), 6)
        rows.setdefault("exact filter", {})[name] = 0.0
        rows.setdefault("rule window (transport: KL at or below it)", {})[name] = f"k = {ladder.rule_window}"
    for model, kls in (models or {}).items():
        for name, kl in kls.items():
            rows.setdefault(model, {})[name] = f"{kl:.5f} ({ladders[name].memory_text(kl)})"
    return pd.DataFrame.from_dict(rows, orient="index")
