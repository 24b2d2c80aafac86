"""Chapter 9's claims on the sticky chain's routing controls: the paper's speed-up with the routing learned, frozen,
removed or pinned to the identity, on the paper's five seeds (``routing_controls``) and on twenty
(``sticky_routing_seeds``), and SGD's loss after the budget under each."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ...diagnostics.routing_need import control_cost
from ...ledger import claims
from ...ledger.routing_controls import FILE as CONTROLS_FILE
from ...ledger.sticky_routing_seeds import FILE as TWENTY_FILE
from .settings import FREE_FREEZE_RATIO

__all__ = ["record_sticky_routing_claims"]


def record_sticky_routing_claims(sticky: Mapping[str, Any], settings: Mapping[str, Any],
                                 twenty: Mapping[str, Any] | None = None) -> dict[str, claims.Claim]:
    """Record the sticky chain's speed-up under each routing and SGD's loss after the budget under each, on the
    paper's five seeds (``sticky``: the routing controls) and on twenty (``twenty``: ``sticky_routing_seeds``)."""
    out: dict[str, claims.Claim] = {}
    hmin = sticky["hmin_nats"]
    five = [str(s) for s in sticky["paper_seeds"]]
    learned = [sticky["final_loss"]["learned-sgd"][s] - hmin for s in five]
    params = {"seeds": sticky["paper_seeds"], "steps": sticky["steps"], "data": CONTROLS_FILE}
    for control in ("uniform", "identity"):
        excess = [sticky["final_loss"][f"{control}-sgd"][s] - hmin for s in five]
        ratio = control_cost(learned, excess, [math.log(8) - hmin] * len(five))["ratio"]
        cid = f"routing_need.sticky.{control}_excess_loss_ratio"
        if control == "uniform":
            out[cid] = claims.record(
                cid, ratio["point"], unit="ratio", lower=FREE_FREEZE_RATIO, interval=(ratio["low"], ratio["high"]),
                description=f"the sticky chain, SGD after {sticky['steps']} steps: excess loss over H_min with uniform "
                            "attention (routing removed) over the excess with learned routing (geometric mean over the "
                            f"paper's five seeds, 95% t interval on the log scale); above {FREE_FREEZE_RATIO} the task "
                            "needs routing",
                explanation="at the paper's budget uniform attention ends close to learned routing: the learned routing "
                            "has hardly formed, so the budget does not test what routing does",
                params=params)
        else:
            out[cid] = claims.record(
                cid, ratio["point"], unit="ratio",
                description=f"the sticky chain, SGD after {sticky['steps']} steps: excess loss over H_min with the "
                            "attention pinned to the identity (the chain's Bayes routing) over the excess with learned "
                            f"routing (geometric mean over the paper's five seeds, 95% t interval {ratio['low']:.3g} to "
                            f"{ratio['high']:.3g})", params={**params, "interval": [ratio["low"], ratio["high"]]})
    for routing in ("identity", "frozen", "uniform"):
        row = sticky["speedup"]["paper_seeds"][routing]
        cid = f"routing_need.sticky.speedup_{routing}_routing"
        out[cid] = claims.record(
            cid, row["speedup"], unit="×", lower=1.0, interval=(row["low"], row["high"]),
            description=f"the paper's speed-up metric (EM-like over SGD, threshold SGD's mean final loss under the "
                        f"same routing) with {routing} routing, the paper's five seeds (95% bootstrap interval); "
                        "above 1: EM-like is faster without learned routing",
            explanation="EM-like is not faster than SGD with this routing",
            params={**params, "first_steps": row["first_steps"], "threshold": row["threshold"]})
    # the twenty-seed block: the stored twenty-seed runs where given, else the controls' own seeds
    if twenty is not None:
        block, all_seeds, data = twenty["speedup"], list(twenty["seeds"]), TWENTY_FILE
    else:
        block, all_seeds, data = sticky["speedup"]["all_seeds"], list(sticky["seeds"]), CONTROLS_FILE
    # learned routing's twenty-seed speed-up is chapter 5's sticky.speedup_values_only (the same schedule on the same
    # seeds, one number, one claim)
    for routing in ("identity", "frozen") if len(all_seeds) > len(sticky["paper_seeds"]) else ():
        row = block[routing]
        cid = f"routing_need.sticky.speedup_{routing}_routing_twenty_seeds"
        out[cid] = claims.record(
            cid, row["speedup"], unit="×", lower=1.0, interval=(row["low"], row["high"]),
            description=f"the same speed-up with {routing} routing on {row['n_seeds']} seeds (the paper's five and "
                        f"{row['n_seeds'] - len(sticky['paper_seeds'])} more; 95% bootstrap interval)",
            explanation="EM-like is not faster than SGD with this routing",
            params={**params, "seeds": all_seeds, "threshold": row["threshold"], "data": data})
    for routing in ("identity", "frozen"):
        ratio = block[routing]["over_learned"]
        cid = f"routing_need.sticky.{routing}_over_learned_speedup"
        out[cid] = claims.record(
            cid, ratio["point"], unit="ratio", upper=1.0, interval=(ratio["low"], ratio["high"]),
            description=f"the sticky chain: the paper's speed-up with {routing} routing over the speed-up with learned "
                        f"routing, on {block[routing]['n_seeds']} seeds (paired 95% bootstrap "
                        "interval); the EM reading (the schedule is fast because it learns the routing, its E-step, "
                        "together with the values) needs it at most 1",
            explanation=f"the speed-up is larger with the routing {'given' if routing == 'identity' else 'frozen'} than "
                        "learned: it does not come from learning the routing; ten times the step on the values (and "
                        "read-out) is a step-size effect that any routing shows",
            params={**params, "seeds": all_seeds, "data": data})
    for routing in ("frozen", "identity") if twenty is not None else ():
        cid = f"routing_need.sticky.sgd_loss_{routing}_twenty_seeds"
        out[cid] = claims.record(cid, float(block[routing]["sgd_final_loss"]), unit="nats",
                                 description=f"the sticky chain: SGD's loss after {twenty['settings']['steps']} steps "
                                             f"with {routing} routing (mean over {len(all_seeds)} seeds)",
                                 params={"seeds": all_seeds, "steps": twenty["settings"]["steps"], "data": data})
    for routing in ("frozen", "uniform", "identity"):  # learned routing's is chapter 5's sticky.final_loss_sgd
        cid = f"routing_need.sticky.sgd_loss_{routing}"
        values = [sticky["final_loss"][f"{routing}-sgd"][s] for s in five]
        out[cid] = claims.record(cid, float(np.mean(values)), unit="nats",
                                 description=f"the sticky chain: SGD's loss after {sticky['steps']} steps with "
                                             f"{routing} routing (mean over the paper's five seeds)", params=params)
    return out
