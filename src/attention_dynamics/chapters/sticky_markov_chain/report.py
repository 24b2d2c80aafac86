"""Chapter 5's ledger claims and glued numbers: the chain's floors, the paper's protocol, its controls, the
learning-rate surface, the long runs and the deep variant; the reader's tables of the protocol; what the page says of
the paper's claims it tests, in the reader's words. Every glue name the prose uses is written out."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from ...core.seeding import stream
from ...ledger import claims
from ...ledger.results import StoredData
from ...ledger.verdicts import reader_label, verdict_of
from ...models.single_head import HEAD_SHAPE, INIT_STD, initial_head
from ...science.speedup import intervals_separate
from ...tasks import sticky_chain
from ...training.head_engine import SingleHeadModule, autograd_head_loss, closed_form_head_pass
from ...training.schedules import SCHEDULES
from . import lr_surface, paper_scale
from .runs import summarise_runs, trajectory_statistics
from .settings import CHAIN_PARAMS, LN8, SCHEDULE_PAIR, StickySettings

__all__ = [
    "describe_machine",
    "STICKY_CHAIN_BENCHMARK",
    "glue_settings",
    "per_seed_table",
    "summary_table",
    "ROW_GLUES",
    "glue_rows",
    "record_chains",
    "record_floors",
    "glue_filtered_floor",
    "engine_gradient_check",
    "glue_benchmark",
    "protocol_params",
    "record_protocol",
    "record_matched_control",
    "record_speedup_interval",
    "load_surface",
    "record_surface",
    "m_step_points",
    "record_long_runs",
    "glue_nominal",
    "glue_trajectories",
    "record_deep",
]


def describe_machine(machine: dict[str, Any]) -> str:
    """Return a one-line description of the machine a benchmark ran on (its ``"machine"`` record)."""
    processor = machine.get("cpu_model") or machine.get("processor") or ""
    cores = machine.get("cpu_count")
    parts = [f"{cores} cores" if cores else "", processor, machine.get("platform", "")]
    return ", ".join(part for part in parts if part) or "an unrecorded machine"


def glue_settings(cfg: StickySettings) -> None:
    """Glue the protocol's settings for the chapter's settings table: seeds, steps, sequence length, how often the
    value prototypes are recorded, the Monte Carlo length of the floor's check, the scale; and the head's number of
    weights."""
    claims.glue("sticky.setting_seeds", ", ".join(str(s) for s in cfg.seeds))
    claims.glue("sticky.setting_steps", cfg.steps)
    claims.glue("sticky.setting_length", cfg.length)
    claims.glue("sticky.setting_snapshot_every", cfg.snapshot_every)
    claims.glue("sticky.setting_monte_carlo_length", cfg.monte_carlo_length)
    claims.glue("sticky.setting_scale", cfg.scale)
    shape = HEAD_SHAPE  # W_Q, W_K: d_in × d_k; W_V: d_in × d_v; W_O: d_v × classes
    claims.glue("sticky.n_weights", shape["d_in"] * (2 * shape["d_k"] + shape["d_v"]) + shape["d_v"] * shape["n_classes"])


def record_chains() -> dict[str, torch.Tensor]:
    """Return chain kind → transition matrix, after recording the reference chain's effective self-transition
    probability against its closed form and gluing the nominal one's and the stationary laws' deviation from uniform."""
    P = {kind: sticky_chain.transition_matrix(kind) for kind in sticky_chain.CHAIN_KINDS}
    inverse_distance_sum = float((1.0 / sticky_chain.circular_distance()[0, 1:]).sum())  # Σ_{k≠i} 1/d(i, k)
    claims.record(
        "sticky.effective_self_prob_reference",
        sticky_chain.effective_self_prob(P["reference"]),
        unit="probability",
        params=CHAIN_PARAMS,
        description="effective self-transition probability of the reference script's chain (nominal 0.3)",
        expected=0.3 + 0.7 * 0.3 / (0.3 + inverse_distance_sum),
        tolerance=1e-12,
    )
    claims.glue("sticky.self_prob_nominal", sticky_chain.effective_self_prob(P["nominal"]))
    claims.glue("sticky.stationary_max_deviation", float(max(
        np.abs(sticky_chain.stationary_distribution(p) - 1 / sticky_chain.N_SYMBOLS).max() for p in P.values())))
    return P


#: The floors' glue names by chain: (claim id of H_min, its Monte Carlo estimate, that estimate's standard error, H_min
#: in bits, the stationary-weighted entropy rate).
FLOOR_GLUES = {
    "reference": ("sticky.hmin_nats_reference", "sticky.hmin_mc_reference", "sticky.hmin_mc_se_reference",
                  "sticky.hmin_bits_reference", "sticky.entropy_rate_reference"),
    "nominal": ("sticky.hmin_nats_nominal", "sticky.hmin_mc_nominal", "sticky.hmin_mc_se_nominal",
                "sticky.hmin_bits_nominal", "sticky.entropy_rate_nominal"),
}


def record_floors(P: Mapping[str, torch.Tensor], monte_carlo_length: int, *, seed: int) -> dict[str, float]:
    """Return chain kind → Bayes floor H_min (nats), each recorded as a claim against a Monte Carlo conditional
    entropy of a simulated chain (tolerance four standard errors); glues bits, entropy rates and the estimates."""
    floors = {}
    for kind, (claim_id, mc_name, mc_se_name, bits_name, rate_name) in FLOOR_GLUES.items():
        mc = sticky_chain.monte_carlo_entropy_rate(P[kind], monte_carlo_length, seed=stream(seed, "inputs"))
        floors[kind] = claims.record(
            claim_id,
            sticky_chain.bayes_floor_nats(P[kind]),
            unit="nats",
            description=f"H_min, mean row entropy of the {kind} chain, vs a Monte Carlo conditional entropy",
            expected=mc["estimate"],
            tolerance=4 * mc["standard_error"],
            params={**CHAIN_PARAMS, "chain": kind, "monte_carlo_length": monte_carlo_length, "seed": seed},
        ).value
        claims.glue(mc_name, mc["estimate"])
        claims.glue(mc_se_name, mc["standard_error"])
        claims.glue(bits_name, sticky_chain.bayes_floor_bits(P[kind]))
        claims.glue(rate_name, sticky_chain.entropy_rate_nats(P[kind]))
    claims.glue("sticky.ln8", LN8)
    claims.glue("sticky.mc_length", monte_carlo_length)
    return floors


def glue_filtered_floor(datasets: Mapping[int, sticky_chain.StickyChainData], hmin: float) -> float:
    """Return the exact forward filter's mean cross-entropy (nats) on the training sequences, glued with its gap to ``hmin``."""
    filtered = float(np.mean([sticky_chain.filtered_cross_entropy_nats(d) for d in datasets.values()]))
    claims.glue("sticky.filtered_floor_train", filtered)
    claims.glue("sticky.filtered_floor_gap", filtered - hmin)
    claims.glue("sticky.n_positions", int(next(iter(datasets.values())).x.shape[0]))
    return filtered


def engine_gradient_check(data: sticky_chain.StickyChainData, seed: int) -> float:
    """Return the largest absolute difference between the closed-form engine's gradients and autograd's
    (float64, the head initialised for ``seed`` on ``data``); glues it and the loss difference."""
    model = SingleHeadModule(initial_head(seed, dtype=torch.float64))
    x64 = data.x.double()
    autograd_loss = autograd_head_loss(model, (x64, data.y))
    autograd_loss.backward()
    engine = closed_form_head_pass(x64, model.head_params(), data.y)
    error = max(float((engine.grads[n] - getattr(model, n).grad).abs().max()) for n in engine.grads)
    claims.glue("sticky.engine_gradient_max_abs_err", error)
    claims.glue("sticky.engine_loss_abs_err", float((engine.loss - autograd_loss.detach()).abs()))
    return error


#: The engine-vs-autograd benchmark's figures, made outside the package: ``benchmarks/sticky_chain.py --promote`` copies
#: them into the package's data.
STICKY_CHAIN_BENCHMARK = StoredData(
    name="sticky_chain_benchmark", chapter="sticky_markov_chain",
    about="the closed-form engine against autograd and the authors' protocol, timed on one machine (written by "
          "benchmarks/sticky_chain.py --promote)",
    files=("sticky_chain_benchmark.json",))


def glue_benchmark(path=None) -> dict[str, Any]:
    """Return the stored engine-vs-autograd benchmark (:data:`STICKY_CHAIN_BENCHMARK`, or the file at ``path``), after
    gluing its figures.

    A timing, not a claim: it depends on the machine and its load, so it is shown with both and decides nothing.
    """
    benchmark = STICKY_CHAIN_BENCHMARK.load(path=path)
    claims.glue("sticky.engine_speedup_vs_autograd", benchmark["speedup"])
    claims.glue("sticky.benchmark_engine_ms_per_step", benchmark["engine_ms_per_step"])
    claims.glue("sticky.benchmark_autograd_ms_per_step", benchmark["autograd_ms_per_step"])
    claims.glue("sticky.benchmark_max_abs_loss_difference", benchmark["max_abs_loss_difference"])
    claims.glue("sticky.benchmark_threads", benchmark["settings"]["threads"])
    claims.glue("sticky.engine_speedup_vs_protocol", benchmark["speedup_vs_protocol"])
    claims.glue("sticky.benchmark_load", benchmark["machine"]["load_average_1min"])
    claims.glue("sticky.benchmark_machine", describe_machine(benchmark["machine"]))
    return benchmark


def protocol_params(cfg: StickySettings) -> dict[str, Any]:
    """Return the settings of the paper's protocol runs as recorded with their claims."""
    return {"seeds": cfg.seeds, "steps": cfg.steps, "length": cfg.length, "chain": "reference",
            "head": HEAD_SHAPE, "init_std": INIT_STD}


def record_protocol(runs: Mapping[tuple[str, int], Any], protocol: Mapping[str, Any], cfg: StickySettings,
                    hmin: float) -> dict[str, Any]:
    """Return the paper's speed-up (:func:`~attention_dynamics.science.speedup.paper_speedup`'s dict), after recording the two final losses
    (against the halfway mark from ln 8 to ``hmin``) and the speed-up (against the paper's 2.3) as claims and
    gluing the threshold, first steps, paired test and each schedule's share of the way from ln 8 to H_min."""
    params = protocol_params(cfg)
    final_loss = {name: summarise_runs(runs, name, "loss") for name in SCHEDULE_PAIR}
    for name, claim_id, sd_name in (("sgd", "sticky.final_loss_sgd", "sticky.final_loss_sgd_sd"),
                                    ("em_like", "sticky.final_loss_em", "sticky.final_loss_em_sd")):
        claims.record(
            claim_id, final_loss[name]["mean"], unit="nats", lower=(LN8 + hmin) / 2, upper=LN8,
            description=f"mean final training loss of {SCHEDULES[name].label} after the paper's "
            "protocol; the paper: still near ln 8 (here: less than half of the way from ln 8 "
            "down to H_min)",
            params={**params, "schedule": name},
            explanation="this schedule has covered more than half of the way from ln 8 to H_min "
            "after 1000 steps: it has left the plateau",
        )
        claims.glue(sd_name, final_loss[name]["sd"])
    speedup = protocol["speedup"]
    claims.record(
        "sticky.speedup_paper_protocol", speedup["speedup"], unit="×", paper_value=2.3, tolerance=0.23,
        description="steps / mean first step at which EM-like's loss is below SGD's mean final loss "
        "(the paper's metric)",
        explanation="the paper's metric on the paper's seeds and settings, with the reference script's data "
        "and initialisation reproduced draw for draw, gives a different mean first step; see the text",
        params=params,
    )
    claims.glue("sticky.threshold", speedup["threshold"])
    claims.glue("sticky.mean_first_step", speedup["mean_first_step"])
    claims.glue("sticky.first_step_min", min(speedup["first_steps"]))
    claims.glue("sticky.first_step_max", max(speedup["first_steps"]))
    paired = protocol["paired_test"]
    claims.glue("sticky.paired_mean_difference", paired["mean_difference"])
    claims.glue("sticky.paired_t", paired["t"])
    claims.glue("sticky.paired_t_pvalue", paired["t_pvalue"])
    claims.glue("sticky.paired_wilcoxon_pvalue", paired["wilcoxon_pvalue"])
    claims.glue("sticky.gap_sgd_to_hmin", final_loss["sgd"]["mean"] - hmin)
    claims.glue("sticky.gap_em_to_hmin", final_loss["em_like"]["mean"] - hmin)
    # the share of the way from ln 8 down to H_min covered after the protocol, and where that is in words
    claims.glue("sticky.gap_covered_sgd", sticky_chain.share_of_way(final_loss["sgd"]["mean"], hmin))
    claims.glue("sticky.gap_covered_em_like", sticky_chain.share_of_way(final_loss["em_like"]["mean"], hmin))
    claims.glue("sticky.position_sgd",
                sticky_chain.position_phrase(sticky_chain.share_of_way(final_loss["sgd"]["mean"], hmin)))
    claims.glue("sticky.position_em",
                sticky_chain.position_phrase(sticky_chain.share_of_way(final_loss["em_like"]["mean"], hmin)))
    return speedup


#: The reader's names of the protocol's schedules and measures (the tables below).
SCHEDULE_LABELS = {"sgd": "SGD", "em_like": "EM-like"}
MEASURE_LABELS = {"loss": "loss (nats)", "entropy": "predictive entropy (nats)", "accuracy": "accuracy"}


def per_seed_table(protocol: Mapping[str, Any]) -> pd.DataFrame:
    """Return the protocol's per-seed table (:func:`~attention_dynamics.chapters.sticky_markov_chain.runs.paper_protocol_summary`)
    with the reader's column labels: each schedule's final loss, entropy and accuracy, and EM-like's first step below
    the threshold."""
    def label(column: str) -> str:
        name, _, what = column.partition(" ")
        return f"{SCHEDULE_LABELS.get(name, name)} {MEASURE_LABELS.get(what, what)}"

    return protocol["per_seed"].rename(columns=label)


def summary_table(protocol: Mapping[str, Any]) -> pd.DataFrame:
    """Return the protocol's mean and standard deviation over seeds of each schedule's final loss, entropy and
    accuracy, with the reader's labels."""
    table = protocol["summary"].rename(index={**SCHEDULE_LABELS, **MEASURE_LABELS})
    table.index.names = ["schedule", "after the protocol"]
    return table.rename(columns={"mean": "mean over seeds", "sd": "standard deviation"})


def load_paper_scale() -> dict[str, Any]:
    """Return the stored paper-scale results (:data:`~attention_dynamics.chapters.sticky_markov_chain.paper_scale.PAPER_SCALE`),
    after gluing the package version they were computed with."""
    heavy = paper_scale.PAPER_SCALE.load()
    claims.glue("sticky.heavy_version", heavy["provenance"]["package_version"])
    return heavy


def record_matched_control(heavy: Mapping[str, Any]) -> claims.Claim:
    """Return the claim of EM-like's speed-up over the matched control (lr 0.1 on every matrix), after gluing
    the control's and the closed-form M-step's numbers for the prose."""
    block = heavy["ci"]["reference"]
    matched = block["em_like_speedup_over"]["sgd_matched"]
    claim = claims.record(
        "sticky.speedup_vs_matched_lr", matched["ratio"], unit="×",
        description="EM-like's speed-up over SGD with lr 0.1 on every matrix: the control's mean first step "
        "below SGD's mean final loss / EM-like's (below 1: the control is faster)",
        params={"seeds": block["seeds"]["sgd_matched"], "steps": heavy["config"]["steps"], "chain": "reference",
                "scale": "paper"},
    )
    claims.glue("sticky.matched_speedup_over_sgd", block["speedup"]["sgd_matched"]["speedup"])
    claims.glue("sticky.matched_mean_first_step", float(np.mean(matched["control_first_steps"])))
    claims.glue("sticky.em_mean_first_step_paper_seeds", float(np.mean(matched["em_like_first_steps"])))
    claims.glue("sticky.mstep_speedup_over_sgd", block["speedup"]["m_step"]["speedup"])
    claims.glue("sticky.em_speedup_over_mstep", block["em_like_speedup_over"]["m_step"]["ratio"])
    claims.glue("sticky.mstep_rho", SCHEDULES["m_step"].value_lr)
    return claim


def record_speedup_interval(heavy: Mapping[str, Any]) -> dict[str, float]:
    """Return the 20-seed bootstrap interval of EM-like's speed-up (``point``, ``low``, ``high``), after recording
    each end against the paper's 2.3 and gluing the number of seeds and the paired test's p-value."""
    block = heavy["ci"]["reference"]
    ci = block["speedup_ci"]["em_like"]
    params = {"seeds": block["seeds"]["em_like"], "steps": heavy["config"]["steps"], "chain": "reference",
              "bootstrap_resamples": heavy["config"]["bootstrap_resamples"], "method": "percentile", "scale": "paper"}
    claims.record(
        "sticky.speedup_ci95_low", ci["low"], unit="×", upper=2.3,
        description="lower end of the 95% bootstrap interval of the paper's speed-up over 20 seeds "
        "(passes if the interval reaches down to the paper's 2.3)",
        explanation="the whole 95% interval lies above the paper's 2.3", params=params)
    claims.record(
        "sticky.speedup_ci95_high", ci["high"], unit="×", lower=2.3,
        description="upper end of the 95% bootstrap interval of the paper's speed-up over 20 seeds "
        "(passes if the interval reaches up to the paper's 2.3)",
        explanation="the whole 95% interval lies below the paper's 2.3", params=params)
    # where the paper's 2.3× lies, by the same bounds as the two ends' claims
    claims.glue("sticky.ci_phrase", "the paper's 2.3× lies inside the interval" if ci["low"] <= 2.3 <= ci["high"]
                else "the paper's 2.3× lies above the interval" if ci["high"] < 2.3
                else "the paper's 2.3× lies below the interval")
    claims.glue("sticky.ci_point", ci["point"])
    claims.glue("sticky.ci_n_seeds", len(block["seeds"]["em_like"]))
    claims.glue("sticky.ci_paired_p", block["paired_test_vs_sgd"]["em_like"]["t_pvalue"])
    return ci


def load_surface(heavy: Mapping[str, Any]) -> dict[str, Any]:
    """Return the stored learning-rate surface (:data:`~attention_dynamics.chapters.sticky_markov_chain.lr_surface.LR_SURFACE`)
    with its twenty-seed block's values-only condition taken from the paper-scale file's EM-like runs
    (:func:`lr_surface.with_values_only_from`)."""
    surface = lr_surface.LR_SURFACE.load()
    return {**surface, "twenty_seeds": lr_surface.with_values_only_from(surface["twenty_seeds"], heavy["ci"]["reference"])}


#: The learning-rate surface's claims, by condition (written out so that a search for an id finds them).
SURFACE_CLAIMS = {"values_only": "sticky.speedup_values_only", "readout_only": "sticky.speedup_readout_only",
                  "routing_only": "sticky.speedup_routing_only", "values_readout": "sticky.speedup_values_readout"}


def record_surface(surface: Mapping[str, Any]) -> bool:
    """Return whether the values-only interval lies above both the readout-only and the routing-only intervals,
    after recording each of :data:`lr_surface.CLAIM_CONDITIONS` against SGD's own score by the metric and gluing
    every condition's speed-up, interval and paired ratio (5 and 20 seeds)."""
    paper, twenty = surface["paper_seeds"], surface["twenty_seeds"]
    claims.glue("sticky.surface_baseline_difference", surface["baseline_source"]["max_abs_difference_where_both"])
    sgd_self = paper["conditions"]["sgd"]["speedup"]  # SGD against its own mean final loss
    claims.glue("sticky.surface_sgd_self", sgd_self)
    for name in lr_surface.CLAIM_CONDITIONS:
        block = twenty if name in twenty["conditions"] else paper
        cond = block["conditions"][name]
        claims.record(
            SURFACE_CLAIMS[name], cond["speedup"], unit="×", lower=sgd_self,
            interval=(cond["ci"]["low"], cond["ci"]["high"]),
            description="the paper's speed-up over SGD with the learning rate ×10 on "
            + "(W_Q+W_K, W_V, W_O) × ({:g}, {:g}, {:g}); passes if its 95% bootstrap interval lies "
            "above SGD's own score by the metric (no faster than SGD)".format(*cond["ratios"]),
            explanation="the 95% interval reaches down to SGD's own score by the paper's metric: this "
            "condition is not shown to be faster than SGD",
            params={"seeds": cond.get("seeds", block["seeds"]), "ratios": cond["ratios"],
                    "steps": surface["config"]["steps"], "chain": "reference",
                    "bootstrap_resamples": surface["config"]["bootstrap_resamples"],
                    "reference": "SGD's own speed-up on the paper's seeds", "scale": "paper"},
        )
        claims.glue(f"sticky.surface_n_seeds_{name}", len(cond.get("seeds", block["seeds"])))
    for key, block in (("paper_seeds", paper), ("twenty_seeds", twenty)):
        for name, cond in block["conditions"].items():
            point, low, high = lr_surface.SURFACE_GLUES[(key, name)]
            claims.glue(point, cond["speedup"])
            claims.glue(low, cond["ci"]["low"])
            claims.glue(high, cond["ci"]["high"])
        for pair, ratio in block.get("comparisons", {}).items():
            point, low, high = lr_surface.SURFACE_GLUES[(key, pair)]
            claims.glue(point, ratio["point"])
            claims.glue(low, ratio["low"])
            claims.glue(high, ratio["high"])
    single = ("values_only", "readout_only", "routing_only")
    decisive = twenty if set(single) <= set(twenty["conditions"]) else paper
    values = decisive["conditions"]["values_only"]
    values_special = all(
        intervals_separate(values["ci"], decisive["conditions"][other]["ci"])
        and values["speedup"] > decisive["conditions"][other]["speedup"]
        for other in ("readout_only", "routing_only"))
    claims.glue(
        "sticky.surface_values_verdict",
        "the values-only interval lies above both the readout-only and the routing-only intervals"
        if values_special
        else "the values-only interval does not lie above both the readout-only and the routing-only intervals")
    claims.glue("sticky.surface_decisive_n_seeds", len(decisive["conditions"]["readout_only"]["first_steps"]))
    glue_surface_phrases(paper, twenty, sgd_self, values_special)
    return values_special


def glue_surface_phrases(paper: Mapping[str, Any], twenty: Mapping[str, Any], sgd_self: float,
                         values_special: bool) -> None:
    """Glue the sentences that read the surface: whether every condition is faster than SGD (its 95% interval above
    SGD's own score), whether values and readout agree (their paired twenty-seed interval contains 1), and what
    follows for the values."""
    slower = sorted({name for block in (paper, twenty) for name, cond in block["conditions"].items()
                     if name != "sgd" and cond["ci"]["low"] <= sgd_self})
    all_faster = not slower
    claims.glue(
        "sticky.surface_all_faster_phrase",
        "Every condition is faster than SGD (each 95% interval lies above SGD's own score)" if all_faster
        else "Not every condition is shown faster than SGD: the interval of " + ", ".join(slower)
        + " reaches down to SGD's own score")
    pair = (twenty.get("comparisons") or paper.get("comparisons") or {}).get("values_only_over_readout_only")
    same = pair is not None and pair["low"] <= 1.0 <= pair["high"]
    claims.glue(
        "sticky.surface_values_readout_phrase",
        "That values and readout give the same (their paired interval contains 1) is what one expects of two "
        "factors of one product" if same
        else "Values and readout differ (their paired interval excludes 1), although one expects two factors of one "
        "product to move alike")
    if values_special:
        reading = ("The values-only speed-up stands above the readout-only and routing-only ones: on this comparison "
                   "the speed-up is specific to the values")
    elif all_faster:
        reading = ("The speed-up is therefore not specific to an M-step on the values: whichever weights take the "
                   "larger step, the run leaves the plateau sooner")
    else:
        reading = ("The values-only interval does not stand above the others, so this comparison does not single "
                   "out the values")
    claims.glue("sticky.surface_specificity_phrase", reading)


#: The linearised M-step's glue names by target distance rho (the stored sweep's, at every scale): its first step on
#: W_V relative to SGD's, its speed-up, and that speed-up over gradient steps of the same size on the values axis.
M_STEP_GLUES = {
    0.1: ("sticky.mstep_step_ratio_0p1", "sticky.mstep_speedup_0p1", "sticky.mstep_over_gradient_0p1"),
    0.3: ("sticky.mstep_step_ratio_0p3", "sticky.mstep_speedup_0p3", "sticky.mstep_over_gradient_0p3"),
    1.0: ("sticky.mstep_step_ratio_1", "sticky.mstep_speedup_1", "sticky.mstep_over_gradient_1"),
    3.0: ("sticky.mstep_step_ratio_3", "sticky.mstep_speedup_3", "sticky.mstep_over_gradient_3"),
}
#: The values axis's glue names by the values' learning-rate ratio to SGD's.
VALUES_AXIS_GLUES = {1.0: "sticky.values_axis_1", 3.0: "sticky.values_axis_3", 10.0: "sticky.values_axis_10",
                     30.0: "sticky.values_axis_30"}


def m_step_points(heavy: Mapping[str, Any], surface: Mapping[str, Any]) -> dict[float, tuple[float, float]]:
    """Return rho → (the closed-form M-step's first step on W_V relative to SGD's, mean over its seeds; its speed-up),
    after gluing both, its speed-up over gradient steps of that size on the values axis where computed, and the axis."""
    points = {
        v["rho"]: (float(np.mean([lr_surface.m_step_value_step_ratio(s, v["rho"]) for s in v["seeds"]])),
                   v["speedup"]["speedup"])
        for v in heavy["rho_sweep"].values()
    }
    for rho, (ratio, speed) in points.items():
        tag = f"{rho:g}".replace(".", "p")  # a rho the book's sweep does not run is glued by the same pattern
        step_name, speed_name, over_name = M_STEP_GLUES.get(float(rho), (
            f"sticky.mstep_step_ratio_{tag}", f"sticky.mstep_speedup_{tag}", f"sticky.mstep_over_gradient_{tag}"))
        claims.glue(step_name, ratio)
        claims.glue(speed_name, speed)
        on_axis = lr_surface.values_axis_speedup_at(surface, ratio)  # nan beyond the computed points
        if not math.isnan(on_axis):
            claims.glue(over_name, speed / on_axis)
    axis = lr_surface.values_axis(surface)
    for ratio, speed in zip(axis["ratio"], axis["speedup"]):
        claims.glue(VALUES_AXIS_GLUES.get(float(ratio), f"sticky.values_axis_{ratio:g}"), speed)
    return points


#: The long runs' glue names by schedule: (claim id of the closest held-out gap to H_min, final training loss, final
#: held-out loss, step of the best held-out loss, final gap to the exact filter).
LONG_RUN_GLUES = {
    "em_like": ("sticky.long_run_gap_to_hmin_em", "sticky.long_final_train_em", "sticky.long_final_heldout_em",
                "sticky.long_best_step_em", "sticky.long_final_gap_filter_em"),
    "sgd": ("sticky.long_run_gap_to_hmin_sgd", "sticky.long_final_train_sgd", "sticky.long_final_heldout_sgd",
            "sticky.long_best_step_sgd", "sticky.long_final_gap_filter_sgd"),
}


def record_long_runs(heavy: Mapping[str, Any]):
    """Return the long runs' table (:func:`~attention_dynamics.chapters.sticky_markov_chain.paper_scale.long_run_table`), after recording each schedule's closest
    held-out gap to H_min and gluing its final and best losses and the exact filter's floor."""
    table = paper_scale.long_run_table(heavy)
    long_run, cfg = heavy["long_run"], heavy["config"]
    claims.glue("sticky.long_steps", long_run["steps"])
    params = {"seeds": long_run["seeds"], "steps": long_run["steps"], "chain": "reference",
              "heldout_sequences": cfg["heldout_sequences"], "heldout_every": cfg["long_heldout_every"],
              "scale": "paper"}
    for name, (claim_id, train_name, heldout_name, best_name, filter_name) in LONG_RUN_GLUES.items():
        row = table.loc[SCHEDULES[name].label]
        claims.record(
            claim_id, row["closest gap to H_min"], unit="nats",
            description=f"lowest held-out loss along the long run of {SCHEDULES[name].label} minus H_min",
            params={**params, "schedule": name})
        claims.glue(train_name, row["final training loss"])
        claims.glue(heldout_name, row["final held-out loss"])
        claims.glue(best_name, int(row["at step"]))
        claims.glue(filter_name, row["final gap to filter"])
    claims.glue("sticky.long_filter_floor",
                float(np.mean([r[0]["heldout"]["filtered_floor"] for r in long_run["runs"].values()])))
    claims.glue("sticky.long_heldout_every", cfg["long_heldout_every"])
    return table


def glue_nominal(heavy: Mapping[str, Any]):
    """Return the controls table on the nominal chain (:func:`~attention_dynamics.chapters.sticky_markov_chain.paper_scale.controls_table`), after gluing EM-like's
    speed-up over SGD and over the matched control there."""
    block = heavy["ci"]["nominal"]
    claims.glue("sticky.nominal_speedup", block["speedup"]["em_like"]["speedup"])
    claims.glue("sticky.nominal_em_over_matched", block["em_like_speedup_over"]["sgd_matched"]["ratio"])
    return paper_scale.controls_table(heavy, "nominal")


#: The trajectories' glue names by (schedule, statistic): means over the seeds.
TRAJECTORY_GLUES = {
    ("sgd", "length"): "sticky.trajectory_length_sgd", ("em_like", "length"): "sticky.trajectory_length_em_like",
    ("sgd", "coherence"): "sticky.trajectory_coherence_sgd",
    ("em_like", "coherence"): "sticky.trajectory_coherence_em_like",
    ("sgd", "specialization"): "sticky.trajectory_specialization_sgd",
    ("em_like", "specialization"): "sticky.trajectory_specialization_em_like",
    ("sgd", "initial_specialization"): "sticky.trajectory_initial_specialization_sgd",
    ("em_like", "initial_specialization"): "sticky.trajectory_initial_specialization_em_like",
    ("sgd", "length_per_lr"): "sticky.trajectory_length_per_lr_sgd",
    ("em_like", "length_per_lr"): "sticky.trajectory_length_per_lr_em_like",
}


def glue_trajectories(runs: Mapping[tuple[str, int], Any], snapshot_every: int) -> dict[str, dict[str, Any]]:
    """Return schedule → :func:`~attention_dynamics.chapters.sticky_markov_chain.runs.trajectory_statistics` for the paper's two schedules, after gluing each
    mean and the path length per unit of value learning rate."""
    claims.glue("sticky.snapshot_every", snapshot_every)
    trajectory = {name: trajectory_statistics(runs, name) for name in SCHEDULE_PAIR}
    for name, stats in trajectory.items():
        for key, summary in stats.items():
            claims.glue(TRAJECTORY_GLUES[(name, key)], summary["mean"])
        claims.glue(TRAJECTORY_GLUES[(name, "length_per_lr")], stats["length"]["mean"] / SCHEDULES[name].value_lr)
    return trajectory


def record_deep(heavy: Mapping[str, Any]) -> dict[str, float]:
    """Return the deep variant's mean test ``loss``, ``entropy`` and ``accuracy`` over its seeds, after recording
    its test gap to H_min as a claim and gluing its training numbers and its best test loss along the first run."""
    deep = heavy["deep"]
    test = {key: float(np.mean([r["test"][key] for r in deep["runs"]])) for key in ("loss", "entropy", "accuracy")}
    claims.record(
        "sticky.deep_test_gap_to_hmin", test["loss"] - deep["hmin_nats"], unit="nats",
        description="held-out test loss of the 4-layer, 4-head, d = 64 transformer minus H_min",
        params={"seeds": [r["seed"] for r in deep["runs"]], "steps": deep["steps"], **deep["settings"],
                "chain": "reference", "scale": "paper"})
    claims.glue("sticky.deep_test_loss", test["loss"])
    claims.glue("sticky.deep_test_entropy", test["entropy"])
    claims.glue("sticky.deep_test_accuracy", test["accuracy"])
    claims.glue("sticky.deep_entropy_gap", test["entropy"] - deep["hmin_nats"])
    claims.glue("sticky.deep_n_parameters", deep["runs"][0]["n_parameters"])
    claims.glue("sticky.deep_n_seeds", len(deep["runs"]))
    claims.glue("sticky.deep_train_loss", float(np.mean([r["train"]["loss"] for r in deep["runs"]])))
    claims.glue("sticky.deep_train_accuracy", float(np.mean([r["train"]["accuracy"] for r in deep["runs"]])))
    curve = deep["runs"][0]["test_curve"]
    best = int(np.argmin(curve["loss"]))
    claims.glue("sticky.deep_best_test_loss", curve["loss"][best])
    claims.glue("sticky.deep_best_test_step", curve["steps"][best])
    claims.glue("sticky.deep_best_gap", curve["loss"][best] - deep["hmin_nats"])
    return test


#: The paper's claims this chapter tests (their rows on the verdict page) and the glue names of what the page says of
#: each: (the reader's label: holds, holds in part, …; its parts grouped by label; the verdict; its readings).
ROW_GLUES = {
    "sticky_speedup": ("sticky.speedup_row_label", "sticky.speedup_row_parts", "sticky.speedup_row_verdict",
                       "sticky.speedup_row_readings"),
    "sticky_m_step_on_values": ("sticky.mstep_row_label", "sticky.mstep_row_parts", "sticky.mstep_row_verdict",
                                "sticky.mstep_row_readings"),
    "sticky_plateau": ("sticky.plateau_row_label", "sticky.plateau_row_parts", "sticky.plateau_row_verdict",
                       "sticky.plateau_row_readings"),
    "sticky_trajectories": ("sticky.trajectory_row_label", "sticky.trajectory_row_parts",
                            "sticky.trajectory_row_verdict", "sticky.trajectory_row_readings"),
}


def glue_rows(recorded) -> dict[str, str]:
    """Glue, for each paper claim of :data:`ROW_GLUES`, what the verdict page will show, from the claims at hand (e.g.
    ``claims.recorded_claims()``): the reader's label, the parts (or readings) grouped by the reader's label ("Holds:
    A; B. Does not hold: C."), the verdict and its readings; return row → reader's label."""
    order = ("holds", "holds in part", "open at this scale", "not tested here", "does not hold")
    out = {}
    for row_id, (label_name, parts_name, verdict_name, readings_name) in ROW_GLUES.items():
        row = verdict_of(row_id, recorded)
        grouped: dict[str, list[str]] = {}
        for name, verdict in row.by_group.items():
            grouped.setdefault(reader_label(verdict), []).append(name)
        parts = " ".join(f"{label[0].upper()}{label[1:]}: {'; '.join(grouped[label])}." for label in order
                         if label in grouped)
        out[row_id] = reader_label(row.verdict)
        claims.glue(label_name, out[row_id])
        claims.glue(verdict_name, row.verdict)
        if parts:  # a row decided by one group of claims has no parts
            claims.glue(parts_name, parts)
            claims.glue(readings_name, row.readings_text())
    return out
