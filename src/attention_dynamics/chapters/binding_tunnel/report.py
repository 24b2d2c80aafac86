"""Chapter 9's claims and glued numbers: which tasks need routing (``routing_need.*``, from the stored results
``routing_controls`` and ``binding_tunnel``) and the paper's dynamic claims on the binding tunnel (``binding.*``).

Every claim id is written out below, so a search for an id finds where it is recorded. A task **needs routing** when
the same model with uniform attention ends more than
:data:`~attention_dynamics.chapters.binding_tunnel.settings.FREE_FREEZE_RATIO` times the trained model's KL (its
whole interval over seeds); the same factor decides when freezing the routing "costs nothing".
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ...diagnostics.frame_order import order_explanation, order_share
from ...diagnostics.routing_need import control_cost, routing_verdict
from ...ledger import claims
from ...ledger.routing_controls import FILE as CONTROLS_FILE
from ...ledger.verdicts import reader_label, verdict_of
from ...science.speedup import paper_speedup
from ...science.stats import t_interval
from ...tasks import binding
from .binding_tunnel import FILE as TUNNEL_FILE
from .settings import FREE_FREEZE_RATIO, LONGER_FACTOR
from .sticky_claims import record_sticky_routing_claims

__all__ = ["ROUTING_NEED_CLAIM_IDS", "BINDING_CLAIM_IDS", "TASK_LABELS", "CHAPTER_GLUE", "record_routing_need_claims",
           "record_binding_claims", "routing_need_table", "sticky_costs", "freeze_table_for_reading", "freeze_table", "mean_interval", "binding_costs",
           "reference_levels", "glue_chapter", "ROW_GLUES", "glue_rows"]

#: Every routing-need claim the chapter records (task, control, measure).
ROUTING_NEED_CLAIM_IDS = (
    "routing_need.bijection.uniform_kl_ratio", "routing_need.bijection.frozen_kl_ratio",
    "routing_need.bijection.uniform_gap_lost_fraction", "routing_need.bijection.frozen_gap_lost_fraction",
    "routing_need.hmm.uniform_kl_ratio", "routing_need.hmm.frozen_kl_ratio",
    "routing_need.hmm.uniform_gap_lost_fraction", "routing_need.hmm.frozen_gap_lost_fraction",
    "routing_need.recall_head.uniform_loss_ratio", "routing_need.recall_head.frozen_loss_ratio",
    "routing_need.recall_head.uniform_gap_lost_fraction", "routing_need.recall_head.frozen_gap_lost_fraction",
    "routing_need.binding.uniform_kl_ratio", "routing_need.binding.frozen_kl_ratio",
    "routing_need.binding.uniform_gap_lost_fraction", "routing_need.binding.frozen_gap_lost_fraction",
    "routing_need.binding.uniform_kl_ratio_x4", "routing_need.binding.frozen_kl_ratio_x4",
    "routing_need.sticky.uniform_excess_loss_ratio", "routing_need.sticky.identity_excess_loss_ratio",
    "routing_need.sticky.speedup_identity_routing", "routing_need.sticky.speedup_frozen_routing",
    "routing_need.sticky.speedup_uniform_routing",
    "routing_need.sticky.speedup_identity_routing_twenty_seeds", "routing_need.sticky.speedup_frozen_routing_twenty_seeds",
    "routing_need.sticky.identity_over_learned_speedup", "routing_need.sticky.frozen_over_learned_speedup",
    "routing_need.sticky.sgd_loss_learned", "routing_need.sticky.sgd_loss_frozen",
    "routing_need.sticky.sgd_loss_uniform", "routing_need.sticky.sgd_loss_identity",
    "routing_need.sticky.sgd_loss_frozen_twenty_seeds", "routing_need.sticky.sgd_loss_identity_twenty_seeds",
    "routing_need.architectures_bijection.uniform_kl_ratio", "routing_need.architectures_bijection.frozen_kl_ratio",
    "routing_need.architectures_hmm.uniform_kl_ratio", "routing_need.architectures_hmm.frozen_kl_ratio",
    "routing_need.architectures_binding.uniform_kl_ratio", "routing_need.architectures_binding.frozen_kl_ratio",
)

#: Every binding-tunnel claim the chapter records.
BINDING_CLAIM_IDS = (
    "binding.kl_bits_trained", "binding.entropy_mae_bits_trained", "binding.kl_bits_repeated_trained",
    "binding.kl_bits_trained_x4",
    "binding.freeze_cost_gap_fraction_t50", "binding.freeze_kl_ratio_t50",  # the fast scale's first freeze step
    "binding.freeze_cost_gap_fraction_t100", "binding.freeze_cost_gap_fraction_t250",
    "binding.freeze_cost_gap_fraction_t375", "binding.freeze_cost_gap_fraction_t500",
    "binding.freeze_cost_gap_fraction_t750", "binding.freeze_cost_gap_fraction_t1000",
    "binding.freeze_cost_gap_fraction_t1500",
    "binding.freeze_kl_ratio_t100", "binding.freeze_kl_ratio_t250", "binding.freeze_kl_ratio_t375",
    "binding.freeze_kl_ratio_t500", "binding.freeze_kl_ratio_t750", "binding.freeze_kl_ratio_t1000",
    "binding.freeze_kl_ratio_t1500",
    "binding.kl_fall_after_free_freeze", "binding.order_path", "binding.order_function", "binding.order_similarity",
    "binding.key_abs_cos_layer0_key_tokens", "binding.paper_key_signed_cos", "binding.value_pc1_ratio",
    "binding.value_pc1_entropy_spearman", "binding.attention_entropy_reduction",
    "binding.advantage_routing_margin_init", "binding.advantage_routing_margin_transition",
    "binding.feedback_margin_init", "binding.feedback_margin_transition",
    "binding.em_like_speedup", "binding.em_like_speedup_frozen_routing",
    "binding.two_hop_kl_bits", "binding.two_hop_uniform_kl_bits",
)

#: The tasks of the routing table, in the book's order, with the chapter that trains each.
TASK_LABELS = {"recall_head": ("chapter 4's recall head", "3, 4"), "sticky": ("the sticky Markov chain", "5"),
               "bijection": ("bijection elimination", "6"), "hmm": ("HMM filtering", "6"),
               "architectures_bijection": ("bijection, chapter 7's transformer", "7"),
               "architectures_hmm": ("HMM filtering, chapter 7's transformer", "7"),
               "architectures_binding": ("associative recall, chapter 7's transformer", "7"),
               "binding": ("binding (this chapter)", "9")}


def mean_interval(values: Sequence[float]) -> dict[str, float]:
    """Return the mean of per-seed ``values`` with its Student-t 95 % interval (``point``, ``low``, ``high``)."""
    t = t_interval(values)
    return {"point": t["mean"], "low": t["low"], "high": t["high"]}


def _need(claim_id: str, cost: Mapping[str, Any], *, task: str, control: str, unit_words: str, data: str,
          params: Mapping[str, Any]) -> claims.Claim:
    ratio = cost["ratio"]
    verdict = routing_verdict(ratio)
    return claims.record(
        claim_id, ratio["point"], unit="ratio", lower=FREE_FREEZE_RATIO, interval=(ratio["low"], ratio["high"]),
        description=f"{TASK_LABELS[task][0]}: the same model with {control} routing over the trained model, "
                    f"{unit_words} (geometric mean over {cost['n']} seeds, 95% t interval on the log scale); above "
                    f"{FREE_FREEZE_RATIO} the task needs routing",
        explanation=(f"the model with {control} routing ends within {FREE_FREEZE_RATIO}× of the trained model: the "
                     "task does not need learned routing" if verdict == "does not need routing" else
                     f"the interval reaches both sides of {FREE_FREEZE_RATIO}: the seeds do not decide"),
        params={**params, "data": data, "per_seed": cost["ratios"]})


def _gap(claim_id: str, cost: Mapping[str, Any], *, task: str, control: str, data: str,
         params: Mapping[str, Any]) -> claims.Claim:
    gap = cost["gap_lost"]
    return claims.record(
        claim_id, gap["point"], unit="fraction of the untrained gap", interval=None,
        description=f"{TASK_LABELS[task][0]}: share of the untrained model's gap that {control} routing gives back, "
                    f"(control − trained) / (untrained − trained), mean over {cost['n']} seeds "
                    f"(95% t interval {gap['low']:.3g} to {gap['high']:.3g})",
        params={**params, "data": data, "per_seed": cost["gaps"], "interval": [gap["low"], gap["high"]]})


def record_routing_need_claims(controls: Mapping[str, Any], tunnel: Mapping[str, Any],
                               twenty: Mapping[str, Any] | None = None) -> dict[str, claims.Claim]:
    """Record whether each task needs routing, from ``routing_controls`` and ``binding_tunnel`` (and the sticky
    chain's twenty seeds, ``sticky_routing_seeds``, where given); return the claims."""
    out: dict[str, claims.Claim] = {}
    for task, block in controls["tunnels"].items():  # the tunnels whose controls were run at this scale
        for control in ("uniform", "frozen"):
            cost = block["costs"][control]
            params = {"seeds": block["seeds"], "settings": controls["settings"][task]}
            cid = f"routing_need.{task}.{control}_kl_ratio"
            out[cid] = _need(cid, cost, task=task, control=control, unit_words="KL from the exact posterior",
                             data=CONTROLS_FILE, params=params)
            gid = f"routing_need.{task}.{control}_gap_lost_fraction"
            out[gid] = _gap(gid, cost, task=task, control=control, data=CONTROLS_FILE, params=params)
    recall = controls["recall_head"]
    for control in ("uniform", "frozen"):
        cost = recall["costs"][control]
        params = {"seeds": recall["seeds"], "settings": controls["settings"]["recall"]}
        cid = f"routing_need.recall_head.{control}_loss_ratio"
        out[cid] = _need(cid, cost, task="recall_head", control=control,
                         unit_words="probe cross-entropy (its Bayes floor is 0)", data=CONTROLS_FILE, params=params)
        gid = f"routing_need.recall_head.{control}_gap_lost_fraction"
        out[gid] = _gap(gid, cost, task="recall_head", control=control, data=CONTROLS_FILE, params=params)
    costs = binding_costs(tunnel)
    for key, cost in costs.items():
        control, factor = key.split("-x")
        params = {"seeds": tunnel["seeds"], "steps": tunnel["settings"]["tunnel"]["steps"] * int(factor)}
        suffix = "" if factor == "1" else f"_x{factor}"
        cid = f"routing_need.binding.{control}_kl_ratio{suffix}"
        out[cid] = _need(cid, cost, task="binding", control=control, data=TUNNEL_FILE, params=params,
                         unit_words="KL from the exact posterior" + ("" if factor == "1" else
                                                                    f", both trained {factor} times as long"))
        if factor == "1":
            gid = f"routing_need.binding.{control}_gap_lost_fraction"
            out[gid] = _gap(gid, cost, task="binding", control=control, data=TUNNEL_FILE, params=params)
    for task, block in controls["architectures"].items():
        for control in ("uniform", "frozen"):
            cid = f"routing_need.architectures_{task}.{control}_kl_ratio"
            out[cid] = _need(cid, block["costs"][control], task=f"architectures_{task}", control=control,
                             unit_words="KL from the exact posterior", data=CONTROLS_FILE,
                             params={"seeds": block["seeds"], "sizes": block["sizes"],
                                     "training": controls["settings"]["architecture_training"]})
    out.update(record_sticky_routing_claims(controls["sticky"], controls["settings"], twenty))
    return out


def binding_costs(tunnel: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the cost of uniform and frozen routing on the binding tunnel at the budget (``"uniform-x1"``) and four
    times as long (``"uniform-x4"``), against the trained model of the same length."""
    learned = {1: {r["seed"]: r for r in tunnel["learned"]},
               LONGER_FACTOR: {r["seed"]: r for r in tunnel["controls"][f"learned-x{LONGER_FACTOR}"]}}
    out = {}
    for factor in (1, LONGER_FACTOR):
        for control in ("uniform", "frozen"):
            if f"{control}-x{factor}" not in tunnel["controls"]:  # not run at this length
                continue
            runs = tunnel["controls"][f"{control}-x{factor}"]
            seeds = [r["seed"] for r in runs]
            trained = [learned[factor][s]["kl_bits"] for s in seeds]
            untrained = [learned[factor][s]["untrained"]["kl_bits"] for s in seeds]
            cost = control_cost(trained, [r["kl_bits"] for r in runs], untrained)
            out[f"{control}-x{factor}"] = {**cost, "verdict": routing_verdict(cost["ratio"])}
    return out


def routing_need_table(controls: Mapping[str, Any], tunnel: Mapping[str, Any]) -> pd.DataFrame:
    """Return the table "Which tasks need routing": per task, the trained model's error and what each control costs
    (its ratio to the trained model and the share of the untrained gap it gives back), and the answer."""
    rows = []

    def add(task: str, measure: str, trained: float, costs: Mapping[str, Mapping[str, Any]], pinned: str = "—"):
        label, chapter = TASK_LABELS[task]
        uni, fro = costs["uniform"], costs["frozen"]
        rows.append({"Task": label, "Chapter": chapter, "Error measured": measure,
                     "Trained": f"{trained:.3g}",
                     "Uniform attention": f"{uni['ratio']['point']:.2f}× ({uni['gap_lost']['point']:.0%} of gap)",
                     "Frozen at init": f"{fro['ratio']['point']:.2f}× ({fro['gap_lost']['point']:.0%} of gap)",
                     "Bayes routing pinned": pinned, "Needs routing?": _answer(uni["verdict"])})

    recall = controls["recall_head"]
    add("recall_head", "probe loss (nats)", float(np.mean([r["final"] for r in recall["runs"]["learned"]])),
        recall["costs"])
    costs, learned_excess = sticky_costs(controls["sticky"])
    add("sticky", f"excess loss over H_min after {controls['sticky']['steps']:,} steps (nats)", learned_excess, costs,
        pinned=f"{costs['identity']['ratio']['point']:.2f}×")
    for task, block in controls["tunnels"].items():
        add(task, "KL (bits)", float(np.mean([r["kl_bits"] for r in block["runs"]["learned"]])), block["costs"])
    for task, block in controls["architectures"].items():
        add(f"architectures_{task}", "KL (bits)", float(np.mean([r["kl_bits"] for r in block["runs"]["learned"]])),
            block["costs"])
    add("binding", "KL (bits)", float(np.mean([r["kl_bits"] for r in tunnel["learned"]])),
        {k.split("-x")[0]: v for k, v in binding_costs(tunnel).items() if k.endswith("-x1")})
    return pd.DataFrame(rows).set_index("Task")


def sticky_costs(sticky: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], float]:
    """Return the sticky chain's control costs under SGD after its budget (uniform, frozen and identity routing: the
    excess loss over H_min over the learned routing's, on the paper's five seeds; the gap is the uniform predictor's
    log 8 − H_min) and the learned routing's mean excess loss."""
    five = [str(s) for s in sticky["paper_seeds"]]
    hmin = sticky["hmin_nats"]
    ex = {r: [sticky["final_loss"][f"{r}-sgd"][s] - hmin for s in five] for r in ("learned", "uniform", "frozen",
                                                                                    "identity")}
    blind = [math.log(8) - hmin] * len(five)
    costs = {c: {**control_cost(ex["learned"], ex[c], blind)} for c in ("uniform", "frozen", "identity")}
    for c in costs.values():
        c["verdict"] = routing_verdict(c["ratio"])
    return costs, float(np.mean(ex["learned"]))


def _answer(verdict: str) -> str:
    return {"needs routing": "yes", "does not need routing": "no", "undecided": "undecided"}[verdict]


def freeze_table(tunnel: Mapping[str, Any]) -> pd.DataFrame:
    """Return, per freeze step, the frozen model's KL over the trained model's (geometric mean) and the share of the
    untrained gap freezing gives back, with the trained model's KL at that step and at the end."""
    learned = {r["seed"]: r for r in tunnel["learned"]}
    rows = []
    for t, runs in sorted(tunnel["freeze"].items(), key=lambda kv: int(kv[0])):
        seeds = [r["seed"] for r in runs]
        cost = control_cost([learned[s]["kl_bits"] for s in seeds], [r["kl_bits"] for r in runs],
                            [learned[s]["untrained"]["kl_bits"] for s in seeds])
        at_t = [_kl_fall(learned[s], int(t)) for s in seeds]
        rows.append({"frozen from step": int(t), "KL ratio": cost["ratio"]["point"],
                     "ratio low": cost["ratio"]["low"], "ratio high": cost["ratio"]["high"],
                     "gap given back": cost["gap_lost"]["point"], "gap low": cost["gap_lost"]["low"],
                     "gap high": cost["gap_lost"]["high"],
                     "trained KL at t over final": float(np.exp(np.mean(np.log(at_t)))),
                     "free": cost["ratio"]["high"] <= FREE_FREEZE_RATIO})
    return pd.DataFrame(rows).set_index("frozen from step")


def freeze_table_for_reading(tunnel: Mapping[str, Any]) -> pd.DataFrame:
    """Return :func:`freeze_table` as the page shows it: per freeze step, the frozen model's KL over the trained
    model's with its 95 % interval, the share of the untrained gap given back, how far the trained model's KL still
    falls after that step, and whether freezing there costs nothing."""
    table = freeze_table(tunnel)
    rows = [{"Frozen from step": f"{t:,}",
             "Final KL ÷ trained": f"{r['KL ratio']:.3g}× ({r['ratio low']:.3g}–{r['ratio high']:.3g})",
             "Share of the untrained gap given back": f"{r['gap given back']:.2%}",
             "Trained KL at that step ÷ final": f"{r['trained KL at t over final']:.3g}×",
             "Costs nothing?": "yes" if r["free"] else "no"}
            for t, r in table.iterrows()]
    return pd.DataFrame(rows).set_index("Frozen from step")


def record_binding_claims(tunnel: Mapping[str, Any]) -> dict[str, claims.Claim]:
    """Record the paper's dynamic claims on the binding tunnel; return them by id."""
    out: dict[str, claims.Claim] = {}
    learned = tunnel["learned"]
    seeds = [r["seed"] for r in learned]
    steps = tunnel["settings"]["tunnel"]["steps"]
    params = {"seeds": seeds, "settings": tunnel["settings"]["tunnel"], "data": TUNNEL_FILE}

    def mean_claim(cid: str, values, *, unit: str, description: str, explanation: str | None = None,
                   **bounds) -> None:
        m = mean_interval(values)
        kwargs = {"interval": (m["low"], m["high"])} if bounds else {}
        if bounds:
            kwargs["explanation"] = explanation or ("the mean over seeds misses the bound, or its interval reaches "
                                                    "across it: at the book's size the trained binding model does "
                                                    "not show this as Paper I reports it")
        out[cid] = claims.record(cid, m["point"], unit=unit, description=description + (
            "" if bounds else f" (95% t interval {m['low']:.3g} to {m['high']:.3g})"), params=params, **kwargs,
            **bounds)

    mean_claim("binding.kl_bits_trained", [r["kl_bits"] for r in learned], unit="bits",
               description=f"the binding tunnel after {steps} steps: KL from the exact posterior, mean over seeds")
    mean_claim("binding.entropy_mae_bits_trained", [r["entropy_mae_bits"] for r in learned], unit="bits",
               description="its per-sample entropy error against the exact posterior (the authors' metric)")
    mean_claim("binding.kl_bits_repeated_trained", [r["kl_bits_repeated"] for r in learned], unit="bits",
               description="its KL on repeated keys only (where the answer must be found by content)")
    mean_claim("binding.kl_bits_trained_x4", [r["kl_bits"] for r in tunnel["controls"][f"learned-x{LONGER_FACTOR}"]],
               unit="bits", description=f"the same model trained {LONGER_FACTOR} times as long: KL, mean over seeds")
    table = freeze_table(tunnel)
    for t, row in table.iterrows():
        out[f"binding.freeze_kl_ratio_t{t}"] = claims.record(
            f"binding.freeze_kl_ratio_t{t}", row["KL ratio"], unit="ratio", upper=FREE_FREEZE_RATIO,
            interval=(row["ratio low"], row["ratio high"]),
            description=f"routing (every layer's W_Q, W_K) frozen from step {t}, the rest trained to step {steps}: "
                        f"its KL over the trained model's (geometric mean, 95% t interval); at most {FREE_FREEZE_RATIO}: "
                        "freezing costs nothing",
            explanation=f"freezing from step {t} costs more than {FREE_FREEZE_RATIO}× the trained model's KL: the "
                        "routing is not yet in place", params={**params, "freeze_at": int(t)})
        out[f"binding.freeze_cost_gap_fraction_t{t}"] = claims.record(
            f"binding.freeze_cost_gap_fraction_t{t}", row["gap given back"], unit="fraction of the untrained gap",
            description=f"routing frozen from step {t}: share of the untrained gap it gives back, (frozen − trained) / "
                        f"(untrained − trained), mean over seeds (95% t interval {row['gap low']:.3g} to "
                        f"{row['gap high']:.3g})", params={**params, "freeze_at": int(t)})
    free = table[table["free"]]
    first_free = int(free.index.min()) if len(free) else None
    fall = [r for r in (_kl_fall(run, first_free) for run in learned) if r is not None] if first_free else []
    if first_free is not None and len(fall) >= 2:
        m = mean_interval(np.log(fall))
        out["binding.kl_fall_after_free_freeze"] = claims.record(
            "binding.kl_fall_after_free_freeze", math.exp(m["point"]), unit="×", lower=2.0,
            interval=(math.exp(m["low"]), math.exp(m["high"])),
            description=f"frame before precision, causally: routing is free to freeze from step {first_free} (the "
                        "first freeze step within the bound), and the trained model's KL still falls by this factor "
                        "from that step to the end (geometric mean, 95% t interval); at least 2: the precision keeps "
                        "improving after the frame is in place",
            explanation="the KL hardly falls after the routing is in place", params={**params, "free_from": first_free})
    else:
        out["binding.kl_fall_after_free_freeze"] = _no_free_freeze(params)
    for definition in ("path", "function", "similarity"):
        frame = [r["readings"]["settle"][definition]["frame"] for r in learned]
        precision = [r["readings"]["settle"][definition]["precision"] for r in learned]
        row = order_share(frame, precision)
        cid = f"binding.order_{definition}"
        out[cid] = claims.record(
            cid, row["share"], unit="fraction of seeds", lower=0.5, interval=(row["low"], row["high"]),
            description=f"the binding tunnel: share of seeds whose frame settles strictly first by the {definition} "
                        "reading (95% Clopper–Pearson interval)", explanation=order_explanation(row),
            params={**params, "frame_steps": frame, "precision_steps": precision})
    geometry = {k: [r["geometry"]["trained"][k] for r in learned] for k in learned[0]["geometry"]["trained"]}
    mean_claim("binding.key_abs_cos_layer0_key_tokens", geometry["key |cos|, layer 0, key tokens"], unit="|cos|",
               description="the book's key measure on the trained binding tunnel: mean |cos| between layer-0 keys of "
                           "the key tokens in a sequence (Paper I: < 0.1)", upper=0.1)
    mean_claim("binding.paper_key_signed_cos", geometry["paper key signed cos"], unit="cos",
               description="Paper I's key metric: signed mean off-diagonal cosine of W_K applied to the pair tokens' "
                           "embeddings, layer 0 (Paper I: < 0.1 in magnitude)", lower=-0.1, upper=0.1)
    mean_claim("binding.value_pc1_ratio", geometry["value PC1 share"], unit="fraction of variance",
               description="the value manifold: share of the last layer's attention output's variance on its first "
                           "principal component (Paper I: > 0.8)", lower=0.8)
    mean_claim("binding.value_pc1_entropy_spearman", geometry["ρ(value PC1, entropy)"], unit="Spearman ρ",
               description="the value manifold ordered by the exact posterior's entropy (content-dependent here: a "
                           "repeated key's posterior is a point mass): Spearman ρ of PC1 with it", lower=0.5)
    mean_claim("binding.attention_entropy_reduction", geometry["attention entropy reduction, first → last layer"],
               unit="fraction", description="relative fall of the attention entropy from the first to the last "
                                            "layer (Paper I: 0.85–0.90)", lower=0.85, upper=0.90)
    for moment in ("init", "transition"):
        mean_claim(f"binding.advantage_routing_margin_{moment}",
                   [r["advantage"][moment]["routing_margin"] for r in learned], unit="fraction of queries",
                   description=f"the advantage-routing law at {'initialisation' if moment == 'init' else 'the routing transition'}, "
                               "in the head that ends up reading the answer: share of repeated-key queries whose score "
                               "gradient pulls attention toward the answer's source, minus the same share for the "
                               "other revealed positions (mean over seeds); above 0: the law routes toward the answer",
                   lower=0.0, explanation="on net the law's gradient does not pull attention toward the answer's "
                                          "source more often than toward the other revealed positions, or the "
                                          "seeds disagree")
        mean_claim(f"binding.feedback_margin_{moment}", [r["advantage"][moment]["feedback_margin"] for r in learned],
                   unit="fraction of queries",
                   description=f"positive feedback at {'initialisation' if moment == 'init' else 'the routing transition'}: "
                               "share of repeated-key queries whose answer's source gains advantage under a free value "
                               "step, minus the share for the other revealed positions (mean over seeds); above 0: the "
                               "values a query reads become better for it", lower=0.0,
                   explanation="on net a value step does not favour the answer's source over the other revealed "
                               "positions, or the seeds disagree")
    for routing, cid in (("learned", "binding.em_like_speedup"), ("frozen", "binding.em_like_speedup_frozen_routing")):
        base = tunnel["learned"] if routing == "learned" else tunnel["controls"]["frozen-x1"]
        em = tunnel["em_like"][routing]
        metric = paper_speedup([r["loss_curve"]["loss"][-1] for r in base], [r["loss_curve"]["loss"] for r in em])
        stride = em[0]["loss_curve"]["steps"][1] - em[0]["loss_curve"]["steps"][0]
        speedup = len(em[0]["loss_curve"]["loss"]) / (np.mean(metric["first_steps"]) or 1.0)
        out[cid] = claims.record(
            cid, float(speedup), unit="×", paper_value=2.3,
            description=f"the paper's speed-up metric on the binding tunnel with {routing} routing: the plain step's "
                        f"mean final loss (50-step moving average) as the threshold, {steps} steps over the EM-like "
                        "step's (ten times the step on every layer's value projection) mean first step below it "
                        "(the paper: 2.3× on the sticky chain)",
            params={**params, "first_steps": [int(s) * stride for s in metric["first_steps"]],
                    "threshold": metric["threshold"]})
    for routing, cid in (("learned", "binding.two_hop_kl_bits"), ("uniform", "binding.two_hop_uniform_kl_bits")):
        if routing not in tunnel["two_hop"]:  # not run
            continue
        runs = tunnel["two_hop"][routing]
        values = [r["kl_bits"] for r in runs]
        out[cid] = claims.record(
            cid, float(np.mean(values)), unit="bits",
            description=f"the authors' binding task (key and value as separate tokens, a random map: a two-hop lookup), "
                        f"{routing} routing, {tunnel['settings']['two_hop']['steps']} steps: KL from the exact posterior "
                        f"(mean over {len(values)} seeds)",
            params={"seeds": [r["seed"] for r in runs], "settings": tunnel["settings"]["two_hop"], "data": TUNNEL_FILE,
                    "entropy_mae_bits": [r["entropy_mae_bits"] for r in runs]})
    return out


def _no_free_freeze(params: Mapping[str, Any]) -> claims.Claim:
    return claims.record("binding.kl_fall_after_free_freeze", 0.0, unit="×", lower=2.0,
                         description="frame before precision, causally: no freeze step of the sweep is free within "
                                     "the bound, so the routing is never in place before the end",
                         undecided_because="no freeze step of the sweep ends within the bound", params=params)


def _kl_fall(run: Mapping[str, Any], step: int | None) -> float | None:
    """Return the trained run's KL at ``step`` (log-interpolated between checkpoints) over its final KL."""
    if step is None:
        return None
    readings = run["readings"]
    at = math.exp(float(np.interp(step, readings["steps"], np.log(readings["kl_bits"]))))
    return at / readings["kl_bits"][-1]


def reference_levels(tunnel_settings: Mapping[str, Any], *, seed: int, n: int = 4000) -> dict[str, float]:
    """Return the binding tunnel's exact reference levels (bits): the context-blind predictor's KL (closed form), the
    pairing-blind predictor's KL and the share of repeated keys (on ``n`` sequences drawn from the seed's own stream)."""
    import torch

    from ...core.seeding import stream, torch_generator
    from ...science import calibration as cal

    V, L = int(tunnel_settings["V"]), int(tunnel_settings["L"])
    kind = tunnel_settings.get("value_map", "bijection")
    batch = binding.sample_binding_batch(n, V, L, layout=tunnel_settings.get("layout", "pair"), value_map=kind,
                                         generator=torch_generator(stream(seed, "analysis", 9)))
    blind = binding.pairing_blind_posterior(batch.keys, batch.targets, V, kind)
    pairing_blind = float(cal.kl_divergence_bits(batch.posterior, torch.log(blind.clamp_min(1e-300))).mean())
    return {"context_blind_kl_bits": binding.context_blind_kl_bits(V, L, kind),
            "pairing_blind_kl_bits": pairing_blind,
            "repeat_share": float(batch.repeated.double().mean()), "n_sequences": n}


#: The glue names of the trained model's KL at each book-scale freeze step over its final KL.
KL_FALL_GLUE = {100: "ch9.kl_fall_after_t100", 250: "ch9.kl_fall_after_t250", 500: "ch9.kl_fall_after_t500",
                1000: "ch9.kl_fall_after_t1000"}

#: The numbers the chapter's prose states beside its claims (every name written out, so a search finds it).
CHAPTER_GLUE = ("ch9.n_seeds", "ch9.steps", "ch9.steps_x4", "ch9.free_ratio", "ch9.V", "ch9.L", "ch9.first_free_step",
                "ch9.transition_step_median", "ch9.attention_on_source_end", "ch9.attention_on_source_init",
                "ch9.lookup_layer", "ch9.context_blind_kl_bits", "ch9.pairing_blind_kl_bits", "ch9.repeat_share",
                "ch9.uniform_kl_bits", "ch9.frozen_kl_bits", "ch9.uniform_kl_bits_x4", "ch9.frozen_kl_bits_x4",
                "ch9.untrained_kl_bits", "ch9.two_hop_steps", "ch9.two_hop_entropy_mae_bits",
                "ch9.sticky_hmin_nats", "ch9.sticky_seeds", "ch9.em_like_factor", "ch9.last_freeze_ratio",
                "ch9.first_freeze_step", "ch9.first_freeze_ratio", "ch9.bijection_uniform_kl_bits", "ch9.bijection_learned_kl_bits",
                "ch9.key_abs_cos_untrained", "ch9.value_pc1_ratio_untrained", "ch9.value_pc1_ratio_uniform",
                "ch9.value_pc1_entropy_spearman_untrained", "ch9.value_pc1_entropy_spearman_uniform",
                "ch9.attention_entropy_reduction_untrained", "ch9.sticky_speedup_learned",
                "ch9.uniform_x4_binding_seeds", "ch9.frozen_x4_binding_seeds", "ch9.two_hop_uniform_entropy_mae_bits",
                "ch9.uniform_x4_best_ratio", "ch9.frozen_x4_best_ratio", "ch9.uniform_x4_verdict",
                "ch9.frozen_x4_verdict")

#: How the page words what a control run four times as long says (the verdict of its ratio interval).
LONGER_VERDICT_WORDS = {"needs routing": "the task still needs routing",
                        "does not need routing": "the task no longer needs learned routing",
                        "undecided": "the seeds do not decide whether the task still needs routing"}


def glue_chapter(controls: Mapping[str, Any], tunnel: Mapping[str, Any], levels: Mapping[str, float]) -> None:
    """Glue the numbers of :data:`CHAPTER_GLUE` for the prose."""
    from .settings import EM_LIKE_VALUE_FACTOR

    learned = tunnel["learned"]
    s = tunnel["settings"]
    table = freeze_table(tunnel)
    free = table[table["free"]]
    claims.glue("ch9.n_seeds", len(learned))
    claims.glue("ch9.steps", s["tunnel"]["steps"])
    claims.glue("ch9.steps_x4", s["tunnel"]["steps"] * LONGER_FACTOR)
    claims.glue("ch9.free_ratio", FREE_FREEZE_RATIO)
    claims.glue("ch9.V", s["tunnel"]["V"])
    claims.glue("ch9.L", s["tunnel"]["L"])
    claims.glue("ch9.first_free_step", int(free.index.min()) if len(free) else s["tunnel"]["steps"])
    claims.glue("ch9.last_freeze_ratio", float(table["KL ratio"].iloc[-1]))
    for t, name in KL_FALL_GLUE.items():  # how far the trained model's KL still falls after each freeze step
        if t in table.index:
            claims.glue(name, float(table.loc[t, "trained KL at t over final"]))
    claims.glue("ch9.first_freeze_step", int(table.index.min()))
    claims.glue("ch9.first_freeze_ratio", float(table["KL ratio"].iloc[0]))
    claims.glue("ch9.transition_step_median", float(np.median([r["transition_step"] for r in learned])))
    claims.glue("ch9.attention_on_source_end", float(np.mean([r["attention_on_source"]["lookup"][-1] for r in learned])))
    claims.glue("ch9.attention_on_source_init", float(np.mean([r["attention_on_source"]["lookup"][0] for r in learned])))
    claims.glue("ch9.lookup_layer", int(np.median([r["lookup_head"][0] for r in learned])))
    claims.glue("ch9.context_blind_kl_bits", levels["context_blind_kl_bits"])
    claims.glue("ch9.pairing_blind_kl_bits", levels["pairing_blind_kl_bits"])
    claims.glue("ch9.repeat_share", levels["repeat_share"])
    for control in ("uniform", "frozen"):
        claims.glue(f"ch9.{control}_kl_bits", float(np.mean([r["kl_bits"] for r in tunnel["controls"][f"{control}-x1"]])))
        if f"{control}-x{LONGER_FACTOR}" in tunnel["controls"]:
            claims.glue(f"ch9.{control}_kl_bits_x4",
                        float(np.mean([r["kl_bits"] for r in tunnel["controls"][f"{control}-x{LONGER_FACTOR}"]])))
    for control in ("uniform", "frozen"):  # seeds on which the longer control learns some binding: below the level
        # of a model that knows which keys and values were revealed but not which went together
        longer = tunnel["controls"].get(f"{control}-x{LONGER_FACTOR}", [])
        claims.glue(f"ch9.{control}_x4_binding_seeds",
                    sum(r["kl_bits"] < levels["pairing_blind_kl_bits"] for r in longer))
    for key, cost in binding_costs(tunnel).items():  # the longer controls against the trained model run as long
        control, factor = key.split("-x")
        if factor == str(LONGER_FACTOR):
            claims.glue(f"ch9.{control}_x4_best_ratio", float(min(cost["ratios"])))
            claims.glue(f"ch9.{control}_x4_verdict", LONGER_VERDICT_WORDS[routing_verdict(cost["ratio"])])
    claims.glue("ch9.untrained_kl_bits", float(np.mean([r["untrained"]["kl_bits"] for r in learned])))
    claims.glue("ch9.two_hop_steps", s["two_hop"]["steps"])
    claims.glue("ch9.two_hop_entropy_mae_bits",
                float(np.mean([r["entropy_mae_bits"] for r in tunnel["two_hop"]["learned"]])))
    if "uniform" in tunnel["two_hop"]:
        claims.glue("ch9.two_hop_uniform_entropy_mae_bits",
                    float(np.mean([r["entropy_mae_bits"] for r in tunnel["two_hop"]["uniform"]])))
    claims.glue("ch9.sticky_hmin_nats", controls["sticky"]["hmin_nats"])
    claims.glue("ch9.sticky_seeds", len(controls["sticky"]["seeds"]))
    claims.glue("ch9.em_like_factor", EM_LIKE_VALUE_FACTOR)
    # the geometry's nulls: the untrained model (each seed's initialisation) and the model trained with uniform attention
    def geometry_mean(runs, key):
        values = [v for v in (g[key] for g in runs) if v is not None]
        return float(np.mean(values)) if values else float("nan")

    untrained = [r["geometry"]["untrained"] for r in learned]
    uniform = [r["geometry"] for r in tunnel["controls"]["uniform-x1"]]
    claims.glue("ch9.key_abs_cos_untrained", geometry_mean(untrained, "key |cos|, layer 0, key tokens"))
    claims.glue("ch9.value_pc1_ratio_untrained", geometry_mean(untrained, "value PC1 share"))
    claims.glue("ch9.value_pc1_ratio_uniform", geometry_mean(uniform, "value PC1 share"))
    claims.glue("ch9.value_pc1_entropy_spearman_untrained", geometry_mean(untrained, "ρ(value PC1, entropy)"))
    claims.glue("ch9.value_pc1_entropy_spearman_uniform", geometry_mean(uniform, "ρ(value PC1, entropy)"))
    claims.glue("ch9.attention_entropy_reduction_untrained",
                geometry_mean(untrained, "attention entropy reduction, first → last layer"))
    claims.glue("ch9.sticky_speedup_learned", controls["sticky"]["speedup"]["paper_seeds"]["learned"]["speedup"])
    bij = controls["tunnels"]["bijection"]["runs"]
    claims.glue("ch9.bijection_uniform_kl_bits", float(np.mean([r["kl_bits"] for r in bij["uniform"]])))
    claims.glue("ch9.bijection_learned_kl_bits", float(np.mean([r["kl_bits"] for r in bij["learned"]])))


#: The paper's claims whose readings on this chapter's tasks the summary states, and the glue name of what the
#: chapter's own claims make of each (the verdict page adds the other chapters' readings).
ROW_GLUES = {"frame_precision_wind_tunnel": "ch9.frame_row_label", "sticky_m_step_on_values": "ch9.mstep_row_label",
             "feedback_first_order": "ch9.feedback_row_label"}


def glue_rows(recorded: Sequence[claims.Claim]) -> dict[str, str]:
    """Glue, for each paper claim of :data:`ROW_GLUES`, the reader's label (holds, does not hold, open at this scale,
    ...) that the claims at hand (e.g. ``claims.recorded_claims()``) give it; return row → label."""
    out = {}
    for row_id, name in ROW_GLUES.items():
        out[row_id] = reader_label(verdict_of(row_id, recorded).verdict)
        claims.glue(name, out[row_id])
    return out
