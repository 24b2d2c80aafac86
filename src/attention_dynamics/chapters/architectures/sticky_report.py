"""Chapter 7's sticky-HMM section: its claims (each family's KL to the filter against the sticky tunnel's transport
bound, stated at the longest run made) and the numbers its prose states, from the stored runs (:mod:`~attention_dynamics.chapters.architectures.sticky_hmm`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping

from ...ledger import claims
from ...models.registry import family_label
from ...science.settling import late_drop
from ...tasks.wind_tunnels import STICKY_HMM_TASK, STICKY_SELF_TRANSITION
from .report import not_decided_reason, outcome_words, sticky_claim_id
from .runs import (
    ChapterSetup,
    paper_verdict_bounds,
    pd_table,
    positive_control_fails,
    realised_threshold,
    sticky_levels,
)
from .settings import PAPER_I_RESULTS, STICKY_TRANSPORT_FRACTION_OF_BLIND
from .sticky_hmm import LONGER_FACTOR

__all__ = [
    "record_sticky_claims",
    "STICKY_GLUE",
    "glue_sticky",
    "glue_sticky_outcomes",
]


def record_sticky_claims(stored: Mapping[str, Any]):
    """Record the sticky tunnel's claims (``hmm_sticky.context_blind_kl_bits``, ``hmm_sticky.kl_bits_<family>``) and
    return the table (KL, multiple of the context-blind level, late change, status).

    Each family's KL carries Paper I's transport verdict as bounds (:func:`paper_verdict_bounds`: at most
    :data:`~attention_dynamics.chapters.architectures.settings.STICKY_TRANSPORT_FRACTION_OF_BLIND` of the
    context-blind level for a family that realises transport, above it for one that does not). As in chapter
    7's grid, a "does not realise" row is undecided while the transformer misses its bound. Where a 4× longer run
    was made (``stored["longer"]``), the claim is stated at it (the longest run made decides; the table shows
    both). Without one, a model that misses a "realises" bound is undecided
    (:func:`not_decided_reason`: its learning rate decays to zero), and so is a "does not realise" pass by a model
    already below the context-blind level (it carries the belief part of the way; more training may take it over
    the threshold). A "does not realise" row that a model beats is a fail no training can undo.
    """


    levels = sticky_levels(stored)
    blind = levels.context_blind[STICKY_HMM_TASK]["kl_bits"]
    settings, runs = stored["settings"], stored["runs"]
    params = {"seed": stored["seed"], "scale": stored["scale"], **settings, "source": "data/sticky_hmm.json"}
    design = (f"HMM filtering with S = {settings['hmm_states']}, O = {settings['hmm_symbols']}, K = "
              f"{settings['hmm_length']}, each transition row {1 - STICKY_SELF_TRANSITION:.1f}·Dirichlet(1) row + "
              f"{STICKY_SELF_TRANSITION:.1f}·identity")
    claims.record("hmm_sticky.context_blind_kl_bits", blind, unit="bits",
                  description=f"KL from the exact filter of the exact context-blind posterior q_t ∝ (π₀Tᵗ)·E(·, o_t), on "
                              f"{settings['eval_sequences']} held-out sequences; {design}",
                  params=params)
    threshold = realised_threshold(STICKY_HMM_TASK, "kl_bits", levels)
    results = {(f, STICKY_HMM_TASK): SimpleNamespace(metrics=run["metrics"]) for f, run in runs.items()}
    rows = {}
    for family, run in runs.items():
        longer = stored.get("longer", {}).get(family)
        stated = longer or run  # the longest run made for the claim states it
        value = stated["metrics"]["kl_bits"]
        bounds = paper_verdict_bounds(family, STICKY_HMM_TASK, levels)
        verdict = PAPER_I_RESULTS[family]["realises"]
        said = ("no verdict in Paper I" if verdict is None else
                f"Paper I: {'realises' if verdict['hmm'] else 'does not realise'} transport")
        bound_text = ("" if bounds == {"lower": None, "upper": None} else
                      f"; bound: KL {'≤' if bounds['upper'] is not None else '≥'} "
                      f"{STICKY_TRANSPORT_FRACTION_OF_BLIND:.1f} × the context-blind level ({threshold:.4f} bits)")
        status = claims.claim_status(value, **bounds)
        because, explanation = None, None
        history = (f"{run['metrics']['kl_bits'] / blind:.2f} × the context-blind level after {run['steps']} steps"
                   + ("" if longer is None else f", {value / blind:.2f} × after {longer['steps']} steps "
                                                f"(a {longer['steps'] // run['steps']}× longer run)"))
        if (verdict is not None and not verdict["hmm"] and family != "transformer"
                and positive_control_fails(STICKY_HMM_TASK, results, levels)):
            because = ("The positive control fails: the transformer misses its transport bound on the sticky HMMs at "
                       "this budget, so this model's missing it too says nothing about its architecture: not decided "
                       "at this scale.")
        elif status == "fail" and bounds["upper"] is not None:
            if longer is None:
                because = not_decided_reason(run["kl_curve_bits"], 0.0) + f"Its KL: {history}."  # KL = excess over floor
            else:
                explanation = f"A longer run does not change the verdict: {history}."
        elif status == "pass" and bounds["lower"] is not None and value < blind and longer is None:
            because = (f"Not decided at this scale: the model already carries the belief part of the way ({history}, "
                       f"where no model without memory gets below 1 ×), and no longer run was made, so nothing shows "
                       f"that more training would not take it below the threshold.")
        elif status == "fail":
            explanation = (f"Paper I reports that the {family_label(family)} does not realise transport (on its random "
                           f"HMMs, where transport is worth little); on the sticky HMMs ours does: {history}, below the "
                           f"threshold, and more training cannot undo a KL that is already this low.")
        claim = claims.record(
            sticky_claim_id(family), value, unit="bits", undecided_because=because, explanation=explanation,
            description=f"{family_label(family)} on sticky HMMs: KL to the exact filter in bits ({said}{bound_text}); "
                        f"{design}",
            params={**params, "family": family, "n_params": run["n_params"], "width": run["width"],
                    "steps": stated["steps"]}, **bounds)
        rows[family_label(family)] = {
            "KL (bits)": round(run["metrics"]["kl_bits"], 4), "× context-blind": round(run["metrics"]["kl_bits"] / blind, 3),
            "KL fell over the last 20% of training by": f"{late_drop(run['kl_curve_bits']):.0%}",
            f"{LONGER_FACTOR}× longer run: × context-blind": "—" if longer is None else
            round(longer["metrics"]["kl_bits"] / blind, 3),
            "steps": run["steps"], "parameters": run["n_params"], "status": claim.status}
    rows["context-blind (exact best)"] = {"KL (bits)": round(blind, 4), "× context-blind": 1.0,
                                          "KL fell over the last 20% of training by": "—",
                                          f"{LONGER_FACTOR}× longer run: × context-blind": "—", "steps": "—",
                                          "parameters": "—", "status": "—"}
    return pd_table(rows, index_name="model")


#: The glue names of each family's numbers on the sticky HMMs, written out (the prose cites them): its KL as a
#: multiple of the context-blind level, how much its KL still fell over the last 20 % of training, the same multiple
#: after a run four times as long and that run's steps (where one was made), and its outcome in words.
STICKY_GLUE = {
    "transformer": {"ratio": "architectures.sticky_ratio_transformer",
                    "late_drop": "architectures.sticky_late_drop_transformer",
                    "longer_ratio": "architectures.sticky_longer_ratio_transformer",
                    "longer_steps": "architectures.sticky_longer_steps_transformer",
                    "outcome": "architectures.sticky_outcome_transformer"},
    "mamba": {"ratio": "architectures.sticky_ratio_mamba", "late_drop": "architectures.sticky_late_drop_mamba",
              "longer_ratio": "architectures.sticky_longer_ratio_mamba",
              "longer_steps": "architectures.sticky_longer_steps_mamba",
              "outcome": "architectures.sticky_outcome_mamba"},
    "lstm": {"ratio": "architectures.sticky_ratio_lstm", "late_drop": "architectures.sticky_late_drop_lstm",
             "longer_ratio": "architectures.sticky_longer_ratio_lstm",
             "longer_steps": "architectures.sticky_longer_steps_lstm", "outcome": "architectures.sticky_outcome_lstm"},
    "mlp_window": {"ratio": "architectures.sticky_ratio_mlp_window",
                   "late_drop": "architectures.sticky_late_drop_mlp_window",
                   "longer_ratio": "architectures.sticky_longer_ratio_mlp_window",
                   "longer_steps": "architectures.sticky_longer_steps_mlp_window",
                   "outcome": "architectures.sticky_outcome_mlp_window"},
    "mlp_blind": {"ratio": "architectures.sticky_ratio_mlp_blind",
                  "late_drop": "architectures.sticky_late_drop_mlp_blind",
                  "longer_ratio": "architectures.sticky_longer_ratio_mlp_blind",
                  "longer_steps": "architectures.sticky_longer_steps_mlp_blind",
                  "outcome": "architectures.sticky_outcome_mlp_blind"},
}


def glue_sticky(stored: Mapping[str, Any], setup: ChapterSetup) -> None:
    """Glue the numbers of chapter 7's sticky-HMM section: the design, its levels beside Paper I's random HMMs at
    the same length, the threshold, and each family's KL as a multiple of the context-blind level with its late
    change (:data:`STICKY_GLUE`)."""

    blind = stored["reference"]["context_blind"]["kl_bits"]
    random_blind = setup.paper_hmm_levels.context_blind["hmm"]["kl_bits"]
    values = {
        "architectures.sticky_mix": STICKY_SELF_TRANSITION,
        "architectures.sticky_random_share": 1 - STICKY_SELF_TRANSITION,
        "architectures.sticky_K": stored["settings"]["hmm_length"],
        "architectures.sticky_steps": stored["settings"]["steps"],
        "architectures.sticky_steps_mamba": stored["runs"]["mamba"]["steps"] if "mamba" in stored["runs"] else None,
        "architectures.sticky_eval_sequences": stored["settings"]["eval_sequences"],
        "architectures.sticky_lr": stored["settings"]["lr"],
        "architectures.sticky_random_blind_kl_bits": random_blind, "architectures.sticky_vs_random": blind / random_blind,
        "architectures.sticky_blind_mae_bits": stored["reference"]["context_blind"]["entropy_mae_bits"],
        "architectures.sticky_fraction": STICKY_TRANSPORT_FRACTION_OF_BLIND,
        "architectures.sticky_threshold_bits": STICKY_TRANSPORT_FRACTION_OF_BLIND * blind,
    }
    for family, run in stored["runs"].items():
        names = STICKY_GLUE.get(family, {})
        values[names.get("ratio")] = run["metrics"]["kl_bits"] / blind
        values[names.get("late_drop")] = late_drop(run["kl_curve_bits"])
    for family, run in stored.get("longer", {}).items():
        names = STICKY_GLUE.get(family, {})
        values[names.get("longer_ratio")] = run["metrics"]["kl_bits"] / blind
        values[names.get("longer_steps")] = run["steps"]
    for name, value in values.items():
        if name is not None:
            claims.glue(name, value)


def glue_sticky_outcomes(recorded: Mapping[str, Any], stored: Mapping[str, Any]) -> None:
    """Glue each family's outcome on the sticky HMMs in the reader's words
    (:func:`~attention_dynamics.chapters.architectures.report.outcome_words`), from its recorded claim (``recorded``:
    the claims by id) at the longest run made: realises transport when its KL is at most the threshold."""
    threshold = STICKY_TRANSPORT_FRACTION_OF_BLIND * stored["reference"]["context_blind"]["kl_bits"]
    for family, names in STICKY_GLUE.items():
        claim = recorded.get(sticky_claim_id(family))
        if claim is not None:
            verdict = PAPER_I_RESULTS[family]["realises"]
            claims.glue(names["outcome"], outcome_words(claim.status, None if verdict is None else bool(verdict["hmm"]),
                                                        claim.value <= threshold))
