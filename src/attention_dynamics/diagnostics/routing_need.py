"""Does a task need routing? The same model trained with its routing removed, beside the trained model.

A claim about what routing does (it builds the posterior, it settles first, it makes a schedule fast) is tested only
by a task that the same model cannot solve without it. Three controls remove or fix the routing (the query and key
weights of every attention layer) and keep everything else, data and initialisation included:

- **uniform**: W_Q = W_K = 0, kept there: every head attends uniformly to the positions it may see;
- **frozen**: W_Q, W_K kept at their initial values (near-uniform attention at the book's initialisation);
- **Bayes routing pinned**, where it is known: the sticky chain's identity (each query reads its own input).

Each control is stated against the trained model, seed by seed (:func:`control_cost`): the ratio of its KL (or its
excess loss) to the trained model's, and the share of the untrained model's gap it gives back,
``(KL_control − KL_trained) / (KL_untrained − KL_trained)``. A task **needs routing** when the control's ratio lies
above :data:`NEEDS_ROUTING_RATIO` (its whole interval over seeds), and **does not** when the whole interval lies at
or below it: a control within that factor of the trained model is "free". The job functions below train one run
each (the stored result ``routing_controls`` runs them; :mod:`~attention_dynamics.ledger.routing_controls`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..science import calibration
from .frame_order import FREE_FREEZE_RATIO
from ..science.speedup import bootstrap_paired_speedups_ratio_ci, bootstrap_speedup_ci, paper_speedup
from ..science.stats import moving_average, t_interval
from ..tasks import specialization as recall
from ..tasks import sticky_chain
from ..training import wind_tunnels
from ..tasks.wind_tunnels import WindTunnel
from ..training import families
from ..training.recall_head import RECALL_TASK_SIZES, train_specialization_head
from ..training.sticky_head import train_sticky_head

__all__ = [
    "NEEDS_ROUTING_RATIO",
    "ROUTING_VERDICTS",
    "control_cost",
    "routing_verdict",
    "tunnel_settings",
    "tunnel_run",
    "recall_head_run",
    "sticky_run",
    "sticky_speedups",
    "LOSS_CURVE_STRIDE",
    "smoothed_loss_curve",
    "architecture_run",
]

#: A control within this factor of the trained model's KL costs nothing; above it (its whole interval over seeds),
#: the task needs routing: the same bound as a free freeze (:data:`~attention_dynamics.diagnostics.frame_order.FREE_FREEZE_RATIO`).
NEEDS_ROUTING_RATIO = FREE_FREEZE_RATIO
#: What :func:`routing_verdict` says of a task.
ROUTING_VERDICTS = ("needs routing", "does not need routing", "undecided")
#: Every how many steps a run's smoothed training loss is kept.
LOSS_CURVE_STRIDE = 10


def control_cost(trained: Sequence[float], control: Sequence[float], untrained: Sequence[float], *,
                 confidence: float = 0.95) -> dict[str, Any]:
    """Return what a control costs against the trained model, over paired seeds.

    ``trained``, ``control``, ``untrained``: the KL (or excess loss) of each seed's three models. ``ratio``: the
    geometric mean of control / trained with its Student-t interval on the log scale (ratios of errors that span
    orders of magnitude); ``gap_lost``: the mean share of the untrained gap the control gives back, with its t
    interval; ``ratios`` and ``gaps``: per seed.
    """
    t, c, u = (np.asarray(x, dtype=float) for x in (trained, control, untrained))
    if not (t.shape == c.shape == u.shape) or t.ndim != 1 or t.size < 2:
        raise ValueError("trained, control and untrained need the same number (at least two) of paired seeds")
    if np.any(t <= 0) or np.any(c <= 0):
        raise ValueError("KLs (or excess losses) must be positive to form ratios")
    ratios = c / t
    logs = t_interval(np.log(ratios), confidence)
    gaps = (c - t) / (u - t)
    gap = t_interval(gaps, confidence)
    return {"ratio": {"point": float(math.exp(logs["mean"])), "low": float(math.exp(logs["low"])),
                      "high": float(math.exp(logs["high"]))},
            "gap_lost": {"point": gap["mean"], "low": gap["low"], "high": gap["high"]},
            "ratios": ratios.tolist(), "gaps": gaps.tolist(), "n": int(t.size)}


def routing_verdict(ratio: Mapping[str, float], bound: float = NEEDS_ROUTING_RATIO) -> str:
    """Return whether a task needs routing from a control's ratio interval (see :func:`control_cost`)."""
    if ratio["low"] > bound:
        return "needs routing"
    if ratio["high"] <= bound:
        return "does not need routing"
    return "undecided"


def tunnel_settings(task: str, fields: Mapping[str, Any]):
    """Return the training settings of a wind tunnel from their fields (``task``: bijection, binding or hmm)."""
    kinds = {"bijection": wind_tunnels.BijectionTraining, "binding": wind_tunnels.BindingTraining,
             "hmm": wind_tunnels.HMMTraining}
    if task not in kinds:
        raise ValueError(f"task must be one of {tuple(kinds)}, got {task!r}")
    fields = dict(fields)
    if task == "hmm" and "test_lengths" in fields:
        fields["test_lengths"] = tuple(fields["test_lengths"])
    return kinds[task](**fields)


def _evaluation(task: str, s, seed: int, n_eval: int):
    if task == "bijection":
        batch = wind_tunnels.bijection_batch_for_eval(s, seed=seed, n=n_eval)
        return batch, lambda m: wind_tunnels.bijection_log_probs(m, batch)
    if task == "binding":
        batch = wind_tunnels.binding_batch_for_eval(s, seed=seed, n=n_eval)
        return batch, lambda m: wind_tunnels.binding_log_probs(m, batch)
    batch = wind_tunnels.hmm_batch_for_eval(s, s.length, seed=seed, n=n_eval)
    return batch, lambda m: wind_tunnels.hmm_log_probs(m, batch)


def tunnel_run(task: str, settings: Mapping[str, Any], seed: int, routing: str = "learned", *,
               freeze_at: int | None = None, value_lr_factor: float = 1.0, n_eval: int = 1000) -> dict[str, Any]:
    """Train one wind-tunnel transformer (``routing`` control, frozen from ``freeze_at``, value steps × factor) and
    return its calibration on the seed's held-out batch: KL and per-sample entropy error (bits), the untrained
    model's KL, the last 100 steps' training loss (nats), and the training loss's 50-step moving average every
    :data:`LOSS_CURVE_STRIDE` steps. For binding, also the KL on repeated and on new keys."""
    s = tunnel_settings(task, settings)
    trainer = {"bijection": wind_tunnels.train_bijection, "binding": wind_tunnels.train_binding,
               "hmm": wind_tunnels.train_hmm}[task]
    run = trainer(s, seed=int(seed), routing=routing, freeze_routing_at=freeze_at, value_lr_factor=value_lr_factor)
    batch, log_probs = _evaluation(task, s, int(seed), n_eval)
    report = calibration.calibration_report(batch.posterior, log_probs(run.model()))
    untrained = calibration.calibration_report(batch.posterior, log_probs(wind_tunnels.untrained_model(s, int(seed))))
    out = {"task": task, "seed": int(seed), "routing": routing, "freeze_at": freeze_at,
           "value_lr_factor": float(value_lr_factor), "steps": s.steps, "kl_bits": report.kl_bits,
           "entropy_mae_bits": report.entropy_mae_bits, "untrained_kl_bits": untrained.kl_bits,
           "final_train_loss": float(np.mean(run.losses[-100:])),
           "loss_curve": smoothed_loss_curve(run.losses)}
    if task == "binding":
        kl = calibration.kl_divergence_bits(batch.posterior, log_probs(run.model()))  # (B, L)
        out["kl_bits_repeated"] = float(kl[batch.repeated].mean())
        out["kl_bits_new"] = float(kl[~batch.repeated].mean())
    return out


def smoothed_loss_curve(losses: Sequence[float], window: int = 50) -> dict[str, list]:
    """Return a run's training loss (nats) as its ``window``-step moving average every :data:`LOSS_CURVE_STRIDE`
    steps: ``{"steps": [...], "loss": [...]}``, ``steps`` counting the updates the average ends after."""
    steps, smooth = moving_average(losses, min(window, len(losses)))
    keep = steps % LOSS_CURVE_STRIDE == LOSS_CURVE_STRIDE - 1
    return {"steps": (steps[keep] + 1).tolist(), "loss": np.round(smooth[keep], 6).tolist()}


def architecture_run(task: Mapping[str, Any], task_index: int, training: Mapping[str, Any], seed: int,
                     routing: str = "learned") -> dict[str, Any]:
    """Train chapter 7's transformer on one of its wind tunnels (``task``: the name and sizes of
    :meth:`~attention_dynamics.tasks.wind_tunnels.WindTunnel.make`; ``training``: ``target_params``, ``steps``,
    ``batch_size``, ``lr``, ``eval_sequences``) with ``routing``, and return its calibration and accuracy beside the
    untrained model's, on the seed's evaluation set of that task."""
    tunnel = WindTunnel.make(**task)
    eval_seed = families.evaluation_seed(int(seed), int(task_index))
    run = families.train_and_evaluate(family="transformer", task=tunnel, target_params=training["target_params"],
                                      steps=training["steps"], batch_size=training["batch_size"], lr=training["lr"],
                                      seed=int(seed), eval_sequences=training["eval_sequences"], eval_seed=eval_seed,
                                      routing=routing)
    batch = families.evaluation_batch(tunnel, training["eval_sequences"], eval_seed)
    untrained, _ = families.evaluation_report(
        families.initial_model("transformer", tunnel, training["target_params"], int(seed)), batch)
    return {"task": task["name"], "seed": int(seed), "routing": routing, "kl_bits": run.metrics["kl_bits"],
            "entropy_mae_bits": run.metrics["entropy_mae_bits"], "accuracy": run.metrics.get("accuracy"),
            "untrained_kl_bits": untrained["kl_bits"], "steps": run.steps}


def recall_head_run(seed: int, routing: str, settings: Mapping[str, Any]) -> dict[str, float]:
    """Train chapter 4's recall head with ``routing`` (learned, frozen or uniform) and return its initial and final
    probe loss (nats), with the task's Bayes floor and the best routing-blind level."""
    if routing not in wind_tunnels.ROUTING_CONTROLS:
        raise ValueError(f"routing must be one of {wind_tunnels.ROUTING_CONTROLS}, got {routing!r}")
    steps = int(settings["steps"])
    frozen = ("W_Q", "W_K") if routing != "learned" else ()
    run = train_specialization_head(int(seed), steps=steps, lr=settings["lr"], n_train=settings["n_train"],
                                    n_probe=settings["n_probe"], record_every=steps // 2, settle_window=steps // 2,
                                    frozen=frozen, zero_routing=routing == "uniform")
    return {"seed": int(seed), "routing": routing, "initial": float(run.probe_loss[0]),
            "final": float(run.probe_loss[-1]), "bayes_floor": recall.bayes_floor_nats(),
            "routing_blind_floor": recall.routing_blind_floor_nats(RECALL_TASK_SIZES["n_sources"])}


def sticky_run(seed: int, schedule: str, routing: str, steps: int = 1000) -> dict[str, Any]:
    """Train the paper's sticky-chain head with ``schedule`` and ``routing`` (learned, frozen, uniform, identity) and
    return its losses before every update (nats, 6 decimals), its final loss and the chain's Bayes floor H_min."""
    run = train_sticky_head(int(seed), schedule, routing=routing, steps=int(steps))
    return {"seed": int(seed), "schedule": schedule, "routing": routing, "final_loss": float(run.final["loss"]),
            "losses": np.round(run.losses, 6).tolist(),
            "hmin_nats": sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix("reference"))}


def sticky_speedups(runs: Sequence[Mapping[str, Any]], seeds: Sequence[int], *, n_resamples: int = 10_000,
                    confidence: float = 0.95) -> dict[str, dict[str, Any]]:
    """Return, per routing, the paper's speed-up of EM-like over SGD on ``seeds`` (threshold: SGD's mean final loss
    under the same routing) with its bootstrap interval over seeds, and SGD's and EM-like's mean final losses."""
    out: dict[str, dict[str, Any]] = {}
    by = {(r["routing"], r["schedule"], r["seed"]): r for r in runs}
    for routing in sorted({r["routing"] for r in runs}):
        sgd = [by[(routing, "sgd", s)] for s in seeds]
        em = [by[(routing, "em_like", s)] for s in seeds]
        finals = [r["final_loss"] for r in sgd]
        curves = [r["losses"] for r in em]
        metric = paper_speedup(finals, curves)
        ci = bootstrap_speedup_ci(finals, curves, n_resamples=n_resamples, confidence=confidence)
        out[routing] = {"speedup": metric["speedup"], "first_steps": metric["first_steps"],
                        "threshold": metric["threshold"], "low": ci["low"], "high": ci["high"],
                        "sgd_final_loss": float(np.mean(finals)), "em_like_final_loss":
                        float(np.mean([r["final_loss"] for r in em])), "n_seeds": len(seeds)}
    if "learned" in out:  # each routing's speed-up over learned routing's, paired over seeds
        base = ([by[("learned", "sgd", s)]["final_loss"] for s in seeds], [by[("learned", "em_like", s)]["losses"]
                                                                            for s in seeds])
        for routing in out:
            if routing == "learned":
                continue
            out[routing]["over_learned"] = bootstrap_paired_speedups_ratio_ci(
                [by[(routing, "sgd", s)]["final_loss"] for s in seeds], [by[(routing, "em_like", s)]["losses"]
                                                                         for s in seeds],
                *base, n_resamples=n_resamples, confidence=confidence)
    return out
