"""Chapter 6's HMM numbers against short memories: the memory ladder of its held-out sets and the memory each
transformer matches (claims ``hmm.window_kl_bits_k<k>``, ``hmm.memory_steps_transformer*``, ``hmm_long.memory_steps*``).

The exact posterior given the last k observations (:func:`~attention_dynamics.tasks.hmm.window_posterior`) is the
reference a "carries the belief forward" sentence is read against: on Paper I's random HMMs a 2-step window already
passes every transport bound of the chapter, so transport is decided against the rule window of the ladder
(:attr:`~attention_dynamics.diagnostics.memory_ladder.MemoryLadder.rule_window`) at each test length.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ...diagnostics.memory_ladder import MemoryLadder, ladder_of_batch
from ...ledger.memory_claims import glue_ladder, glue_memory, memory_claim, window_claims
from ...tasks import hmm
from ...training.wind_tunnels import hmm_batch_for_eval
from .long_tier import LongRun
from .settings import HMM_PLATEAU_RATIO

__all__ = ["WINDOW_CLAIM_IDS", "LENGTH_ROLES", "MEMORY_CLAIM_IDS", "MAX_WINDOW", "LADDER_GLUES", "chapter6_ladders",
           "long_tier_ladders", "length_roles", "record_chapter6_memory", "glue_chapter6_ladders"]

#: The random HMMs' ladder claims at the training length, written out: window → id.
WINDOW_CLAIM_IDS = {2: "hmm.window_kl_bits_k2", 3: "hmm.window_kl_bits_k3", 4: "hmm.window_kl_bits_k4"}
#: The three test lengths of chapter 6's HMM tunnel by role: the training length, the middle and the longest test
#: length (K = 20, 30, 50 at the book's scale; 8, 12, 20 at the fast one).
LENGTH_ROLES = ("train", "mid", "long")
#: Chapter 6's memory claims, written out: (model, length role) → id (the ids name the book's lengths).
#: ``chapter6``: the transformer trained in the chapter; ``long_tier``: the stored deeper model trained six times as
#: long (``hmm_long``).
MEMORY_CLAIM_IDS = {
    ("chapter6", "train"): "hmm.memory_steps_transformer", ("chapter6", "mid"): "hmm.memory_steps_transformer_len30",
    ("chapter6", "long"): "hmm.memory_steps_transformer_len50",
    ("long_tier", "train"): "hmm_long.memory_steps", ("long_tier", "mid"): "hmm_long.memory_steps_len30",
    ("long_tier", "long"): "hmm_long.memory_steps_len50",
}
#: Chapter 6's ladders go up to this window (enough for every model on Paper I's HMMs, where the 8-step window is
#: the filter to a millionth of a bit; the cost grows as the square of the longest window).
MAX_WINDOW = 12


#: The glue prefixes of the ladder at each test length, by role, and the names they make, written out
#: (:func:`~attention_dynamics.ledger.memory_claims.glue_ladder` glues ``<prefix>_k<k>`` in bits and
#: ``<prefix>_k<k>_ratio`` × the context-blind level for k = 1, 2, 3, 4, 6, 8, then ``<prefix>_rule_window`` and
#: ``<prefix>_rule_level``; :func:`~attention_dynamics.ledger.memory_claims.glue_memory` glues the model's
#: ``<name>_memory`` in words and ``<name>_memory_steps``).
LADDER_GLUES = {
    "train": ("manifolds.ladder_train", "manifolds.hmm_train"),
    "mid": ("manifolds.ladder_mid", "manifolds.hmm_mid"),
    "long": ("manifolds.ladder_long", "manifolds.hmm_long"),
}
LADDER_GLUE_NAMES = (
    "manifolds.ladder_train_k1", "manifolds.ladder_train_k1_ratio", "manifolds.ladder_train_k2",
    "manifolds.ladder_train_k2_ratio", "manifolds.ladder_train_k3", "manifolds.ladder_train_k3_ratio",
    "manifolds.ladder_train_k4", "manifolds.ladder_train_k4_ratio", "manifolds.ladder_train_k6",
    "manifolds.ladder_train_k6_ratio", "manifolds.ladder_train_k8", "manifolds.ladder_train_k8_ratio",
    "manifolds.ladder_train_rule_window", "manifolds.ladder_train_rule_level",
    "manifolds.hmm_train_memory", "manifolds.hmm_train_memory_steps",
    "manifolds.ladder_mid_k1", "manifolds.ladder_mid_k1_ratio", "manifolds.ladder_mid_k2",
    "manifolds.ladder_mid_k2_ratio", "manifolds.ladder_mid_k3", "manifolds.ladder_mid_k3_ratio",
    "manifolds.ladder_mid_k4", "manifolds.ladder_mid_k4_ratio", "manifolds.ladder_mid_k6",
    "manifolds.ladder_mid_k6_ratio", "manifolds.ladder_mid_k8", "manifolds.ladder_mid_k8_ratio",
    "manifolds.ladder_mid_rule_window", "manifolds.ladder_mid_rule_level",
    "manifolds.hmm_mid_memory", "manifolds.hmm_mid_memory_steps",
    "manifolds.ladder_long_k1", "manifolds.ladder_long_k1_ratio", "manifolds.ladder_long_k2",
    "manifolds.ladder_long_k2_ratio", "manifolds.ladder_long_k3", "manifolds.ladder_long_k3_ratio",
    "manifolds.ladder_long_k4", "manifolds.ladder_long_k4_ratio", "manifolds.ladder_long_k6",
    "manifolds.ladder_long_k6_ratio", "manifolds.ladder_long_k8", "manifolds.ladder_long_k8_ratio",
    "manifolds.ladder_long_rule_window", "manifolds.ladder_long_rule_level",
    "manifolds.hmm_long_memory", "manifolds.hmm_long_memory_steps",
)


def glue_chapter6_ladders(ladders: Mapping[int, MemoryLadder], model_kl_bits: Mapping[int, float]) -> None:
    """Glue, at each test length, the ladder's levels and the memory the chapter's transformer matches
    (:data:`LADDER_GLUES`)."""
    for K, role in length_roles(ladders).items():
        ladder_prefix, memory_name = LADDER_GLUES[role]
        glue_ladder(ladder_prefix, ladders[K])
        glue_memory(memory_name, ladders[K], float(model_kl_bits[K]))


def chapter6_ladders(eval_hmm: Mapping[int, hmm.HMMBatch]) -> dict[int, MemoryLadder]:
    """Return the memory ladder of chapter 6's held-out set at every test length (length → ladder)."""
    return {K: ladder_of_batch(b, max_window=MAX_WINDOW) for K, b in eval_hmm.items()}


def long_tier_ladders(lr: LongRun, *, chapter_batches: Mapping[int, hmm.HMMBatch] | None = None,
                      chapter_ladders: Mapping[int, MemoryLadder] | None = None) -> dict[int, MemoryLadder]:
    """Return the memory ladders of the long tier's held-out sets (those its KL is measured on, length → ladder).

    Where they are the chapter's own sets (the same HMMs and observations at the same lengths: the book scale with
    seed 0), the chapter's ladders (``chapter_ladders``, measured on ``chapter_batches``) are returned as they are.
    """
    s, seed = lr.settings, lr.results["seed"]
    batches = {K: hmm_batch_for_eval(s.tunnel, K, seed=seed, n=s.n_eval) for K in s.tunnel.test_lengths}
    if chapter_batches is not None and chapter_ladders is not None and set(chapter_batches) == set(batches) and all(
            torch.equal(batches[K].observations, chapter_batches[K].observations)
            and torch.equal(batches[K].transition, chapter_batches[K].transition) for K in batches):
        return dict(chapter_ladders)
    return chapter6_ladders(batches)


def length_roles(lengths) -> dict[int, str]:
    """Return each of the three test lengths' role (:data:`LENGTH_ROLES`, shortest first): ``{20: "train", …}``."""
    lengths = sorted(lengths)
    if len(lengths) != len(LENGTH_ROLES):
        raise ValueError(f"chapter 6 tests {len(LENGTH_ROLES)} lengths, got {lengths}")
    return dict(zip(lengths, LENGTH_ROLES))


def record_chapter6_memory(ladders: Mapping[int, MemoryLadder], model_kl_bits: Mapping[int, float], *, model: str,
                           params: Mapping[str, Any], ratio_late_change: Mapping[int, float] | None = None,
                           eval_hmm: Mapping[int, hmm.HMMBatch] | None = None) -> dict[str, Any]:
    """Record chapter 6's memory claims of one transformer (``model``: ``"chapter6"`` or ``"long_tier"``) at every test
    length, and, with ``eval_hmm``, the random HMMs' ladder claims (``hmm.window_kl_bits_k2`` … at the training
    length, checked against path enumeration). Returns the claims by id.

    The three lengths are read by role (:func:`length_roles`): the training length, the middle and the longest.
    Paper I says the transformer realises transport, so each memory claim asks for more than the rule window's steps
    (:attr:`MemoryLadder.rule_window`). ``ratio_late_change``: how much the model's KL ratio moved over the last 20 % of
    its run, per length (the long tier stores it); a miss with a move below :data:`.settings.HMM_PLATEAU_RATIO` is a plateau and
    decided; otherwise, and for the book-scale model (no longer run of the same model), it is not decided here.
    """
    lengths = sorted(ladders)
    roles = length_roles(lengths)
    out = {}
    if eval_hmm is not None:
        b = eval_hmm[lengths[0]]
        out.update(window_claims(WINDOW_CLAIM_IDS, b.transition, b.emission, b.observations, b.posterior, ladders[lengths[0]],
                                 params={**params, "length": lengths[0]},
                                 tunnel_text=f"Paper I's random HMMs at K = {lengths[0]}"))
    for K in lengths:
        ladder, kl = ladders[K], float(model_kl_bits[K])
        because = None
        if kl > ladder.rule_level:
            moved = None if ratio_late_change is None else ratio_late_change.get(K)
            if moved is None:
                because = ("Not decided at this scale: this model was not trained longer; the long tier's deeper model, "
                           "trained six times as long, is the longer run (hmm_long.memory_steps).")
            elif moved >= HMM_PLATEAU_RATIO:
                because = (f"Not decided at this scale: its KL ratio still moved by {moved:.3f} over the last 20% of "
                           f"the run (plateau amount {HMM_PLATEAU_RATIO}).")
        claim_id = MEMORY_CLAIM_IDS[(model, roles[K])]
        out[claim_id] = memory_claim(claim_id, kl, ladder, model=("chapter 6's transformer" if model == "chapter6" else
                                                                  "the long tier's HMM transformer (stored weights)"),
                                     realises=True, params={**params, "length": K},
                                     tunnel_text=f"Paper I's random HMMs at K = {K}", undecided_because=because)
    return out
