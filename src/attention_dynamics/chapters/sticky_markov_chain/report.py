"""Chapter 5's ledger claims and glued numbers: the chain's floors, the paper's protocol, its controls, the
learning-rate surface, the long runs and the deep variant."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ...core.seeding import stream
from ...ledger import claims
from ...ledger.results import StoredData
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


def record_floors(P: Mapping[str, torch.Tensor], monte_carlo_length: int, *, seed: int) -> dict[str, float]:
    """Return chain kind → Bayes floor H_min (nats), each recorded as a claim against a Monte Carlo conditional
    entropy of a simulated chain (tolerance four standard errors); glues bits, entropy rates and the estimates."""
    floors = {}
    for kind, claim_id in (("reference", "sticky.hmin_nats_reference"), ("nominal", "sticky.hmin_nats_nominal")):
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
        claims.glue(f"sticky.hmin_mc_{kind}", mc["estimate"])
        claims.glue(f"sticky.hmin_mc_se_{kind}", mc["standard_error"])
        claims.glue(f"sticky.hmin_bits_{kind}", sticky_chain.bayes_floor_bits(P[kind]))
        claims.glue(f"sticky.entropy_rate_{kind}", sticky_chain.entropy_rate_nats(P[kind]))
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
    for key in ("engine_ms_per_step", "autograd_ms_per_step", "max_abs_loss_difference"):
        claims.glue(f"sticky.benchmark_{key}", benchmark[key])
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
    for name, claim_id in (("sgd", "sticky.final_loss_sgd"), ("em_like", "sticky.final_loss_em")):
        claims.record(
            claim_id, final_loss[name]["mean"], unit="nats", lower=(LN8 + hmin) / 2, upper=LN8,
            description=f"mean final training loss of {SCHEDULES[name].label} after the paper's "
            "protocol; the paper: still near ln 8 (here: less than half of the way from ln 8 "
            "down to H_min)",
            params={**params, "schedule": name},
            explanation="this schedule has covered more than half of the way from ln 8 to H_min "
            "after 1000 steps: it has left the plateau",
        )
        claims.glue(f"{claim_id}_sd", final_loss[name]["sd"])
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
    for key in ("mean_difference", "t", "t_pvalue", "wilcoxon_pvalue"):
        claims.glue(f"sticky.paired_{key}", protocol["paired_test"][key])
    claims.glue("sticky.gap_sgd_to_hmin", final_loss["sgd"]["mean"] - hmin)
    claims.glue("sticky.gap_em_to_hmin", final_loss["em_like"]["mean"] - hmin)
    for name in SCHEDULE_PAIR:  # share of the way from ln 8 down to H_min covered after the protocol
        claims.glue(f"sticky.gap_covered_{name}", (LN8 - final_loss[name]["mean"]) / (LN8 - hmin))
    return speedup


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
    for key, block in (("5", paper), ("20", twenty)):
        for name, cond in block["conditions"].items():
            claims.glue(f"sticky.surface_{name}_{key}", cond["speedup"])
            claims.glue(f"sticky.surface_{name}_{key}_low", cond["ci"]["low"])
            claims.glue(f"sticky.surface_{name}_{key}_high", cond["ci"]["high"])
        for pair, ratio in block.get("comparisons", {}).items():
            claims.glue(f"sticky.surface_{pair}_{key}", ratio["point"])
            claims.glue(f"sticky.surface_{pair}_{key}_low", ratio["low"])
            claims.glue(f"sticky.surface_{pair}_{key}_high", ratio["high"])
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


def m_step_points(heavy: Mapping[str, Any], surface: Mapping[str, Any]) -> dict[float, tuple[float, float]]:
    """Return rho → (the closed-form M-step's first step on W_V relative to SGD's, mean over its seeds; its speed-up),
    after gluing both, its speed-up over gradient steps of that size on the values axis where computed, and the axis."""
    points = {
        v["rho"]: (float(np.mean([lr_surface.m_step_value_step_ratio(s, v["rho"]) for s in v["seeds"]])),
                   v["speedup"]["speedup"])
        for v in heavy["rho_sweep"].values()
    }
    for rho, (ratio, speed) in points.items():
        tag = f"{rho:g}".replace(".", "p")
        claims.glue(f"sticky.mstep_step_ratio_{tag}", ratio)
        claims.glue(f"sticky.mstep_speedup_{tag}", speed)
        on_axis = lr_surface.values_axis_speedup_at(surface, ratio)  # nan beyond the computed points
        if not math.isnan(on_axis):
            claims.glue(f"sticky.mstep_over_gradient_{tag}", speed / on_axis)
    axis = lr_surface.values_axis(surface)
    for ratio, speed in zip(axis["ratio"], axis["speedup"]):
        claims.glue(f"sticky.values_axis_{ratio:g}", speed)
    return points


def record_long_runs(heavy: Mapping[str, Any]):
    """Return the long runs' table (:func:`~attention_dynamics.chapters.sticky_markov_chain.paper_scale.long_run_table`), after recording each schedule's closest
    held-out gap to H_min and gluing its final and best losses and the exact filter's floor."""
    table = paper_scale.long_run_table(heavy)
    long_run, cfg = heavy["long_run"], heavy["config"]
    claims.glue("sticky.long_steps", long_run["steps"])
    params = {"seeds": long_run["seeds"], "steps": long_run["steps"], "chain": "reference",
              "heldout_sequences": cfg["heldout_sequences"], "heldout_every": cfg["long_heldout_every"],
              "scale": "paper"}
    for name, short, claim_id in (("em_like", "em", "sticky.long_run_gap_to_hmin_em"),
                                  ("sgd", "sgd", "sticky.long_run_gap_to_hmin_sgd")):
        row = table.loc[SCHEDULES[name].label]
        claims.record(
            claim_id, row["closest gap to H_min"], unit="nats",
            description=f"lowest held-out loss along the long run of {SCHEDULES[name].label} minus H_min",
            params={**params, "schedule": name})
        claims.glue(f"sticky.long_final_train_{short}", row["final training loss"])
        claims.glue(f"sticky.long_final_heldout_{short}", row["final held-out loss"])
        claims.glue(f"sticky.long_best_step_{short}", int(row["at step"]))
        claims.glue(f"sticky.long_final_gap_filter_{short}", row["final gap to filter"])
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


def glue_trajectories(runs: Mapping[tuple[str, int], Any], snapshot_every: int) -> dict[str, dict[str, Any]]:
    """Return schedule → :func:`~attention_dynamics.chapters.sticky_markov_chain.runs.trajectory_statistics` for the paper's two schedules, after gluing each
    mean and the path length per unit of value learning rate."""
    claims.glue("sticky.snapshot_every", snapshot_every)
    trajectory = {name: trajectory_statistics(runs, name) for name in SCHEDULE_PAIR}
    for name, stats in trajectory.items():
        for key, summary in stats.items():
            claims.glue(f"sticky.trajectory_{key}_{name}", summary["mean"])
        claims.glue(f"sticky.trajectory_length_per_lr_{name}", stats["length"]["mean"] / SCHEDULES[name].value_lr)
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
    for key, value in test.items():
        claims.glue(f"sticky.deep_test_{key}", value)
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
