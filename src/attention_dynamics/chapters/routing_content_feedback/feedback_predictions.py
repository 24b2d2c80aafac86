"""The positive-feedback claim decided by all of its predictions, over seeds (chapter 3's stored result
``feedback_predictions``).

The paper's feedback claim rests on first-order predictions about a value-only step: the loss falls by
``η Σ_j ‖Σ_i α_ij u_i‖²`` (chapter 3 checks it: exact in the limit), the compatibilities move by
``Δb_ij = −η Σ_i' α_i'j u_i·u_i'``, and hence the values a query uses become better for it. This result measures
the other two predictions over five seeds of chapter 3's recall head, at initialisation, at the middle of the
routing transition and at the end, and the free-activation picture against real weight steps on the paper's
sticky-chain head:

- ``Δb``: the relative error of the prediction with the error signal recomputed after the step
  (:func:`~attention_dynamics.science.dynamics.compatibility_change_after_value_step`); bound: 10 % (predicting no change at
  all scores 100 %);
- the advantage (chapter 3's self / other-queries / error-signal decomposition,
  :func:`~attention_dynamics.chapters.routing_content_feedback.runs.advantage_change_along_training`): the share of
  queries whose answer's source gains advantage under a value step, minus the share for the other sources (the
  control: if every key gained alike, the step would favour nothing); bound: above 0;
- weight steps: on the sticky-chain head at initialisation (paper's five seeds), the cosine between the value law's
  Δv and a real step on W_V's, and the share of attended pairs whose attention moves with their advantage
  (:func:`~attention_dynamics.science.weight_space.weight_step_check`); bound: 0.9 (free activations: 1; a coin: 0.5).

Each claim (:func:`~attention_dynamics.chapters.routing_content_feedback.report.record_feedback_claims`) is a mean
over seeds with a t interval, which decides it. ``python -m attention_dynamics compute feedback_predictions``
computes the jobs; the chapter loads ``data/feedback_predictions.json`` (:data:`FEEDBACK_PREDICTIONS`' ``load``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.stats
import torch

from ...core.seeding import stream, torch_generator
from ...ledger.results import Job, StoredResult, save_results
from ...models.single_head import initial_head
from ...science import dynamics
from ...science.weight_space import weight_step_check
from ...tasks import specialization as recall, sticky_chain
from ...training.recall_head import train_specialization_head
from .runs import advantage_change_along_training, milestone_indices

__all__ = ["FILE", "MOMENTS", "FeedbackSettings", "SETTINGS", "feedback_job", "feedback_jobs", "assemble_feedback",
           "FEEDBACK_PREDICTIONS"]

#: The file the chapter loads.
FILE = "feedback_predictions.json"
#: Chapter 3's moments: initialisation, the middle of the routing transition, the end of training.
MOMENTS = ("init", "transition", "end")


@dataclass(frozen=True)
class FeedbackSettings:
    """Chapter 3's recall head (steps, learning rate, sizes, recording, the check batch and the smallest η of its
    value steps: the chapter's own settings at the same scale), the seeds, and the paper's sticky-chain seeds with
    chapter 2's weight-step size."""

    steps: int = 2000
    lr: float = 0.5
    n_train: int = 256
    n_probe: int = 256
    record_every: int = 20
    n_check: int = 64
    eta: float = 0.01
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    sticky_seeds: tuple[int, ...] = tuple(sticky_chain.PAPER_SEEDS)
    sticky_length: int = sticky_chain.SEQUENCE_LENGTH
    weight_eta: float = 0.01

    def __post_init__(self) -> None:
        if self.steps % self.record_every or self.steps <= 5 * self.record_every:
            raise ValueError("steps must be a multiple of record_every and longer than the settling window "
                             f"(5 × record_every), got steps={self.steps}, record_every={self.record_every}")
        if min(self.n_train, self.n_probe, self.n_check, self.sticky_length) < 1:
            raise ValueError("n_train, n_probe, n_check and sticky_length must be positive")
        if not (self.lr > 0 and self.eta > 0 and self.weight_eta > 0):
            raise ValueError("lr, eta and weight_eta must be positive")
        if len(self.seeds) < 2 or len(self.sticky_seeds) < 2:
            raise ValueError("intervals over seeds need at least two seeds of each kind")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "sticky_seeds", tuple(int(s) for s in self.sticky_seeds))


#: The sizes per scale: ``book`` (the committed file: chapter 3's book head, five seeds), ``fast`` (the tests').
SETTINGS: dict[str, FeedbackSettings] = {
    "fast": FeedbackSettings(steps=300, n_train=64, n_probe=64, n_check=16, seeds=(0, 1, 2), sticky_seeds=(42, 2024),
                             sticky_length=300),
    "book": FeedbackSettings(),
}



def feedback_job(kind: str, seed: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return one job's measures (JSON-ready): a recall head's predictions at chapter 3's three moments
    (``kind="recall"``), or one weight step on the sticky-chain head at initialisation (``kind="weight_step"``)."""
    s = FeedbackSettings(**settings)
    if kind == "weight_step":
        data = sticky_chain.make_sticky_chain_data(seed, length=s.sticky_length)
        check = weight_step_check(data.x, initial_head(seed, dtype=torch.float64), data.y, eta=s.weight_eta)
        return {"seed": int(seed), "sign_agreement": check["sign_agreement"], "value_cosine": check["value_cosine"]}
    if kind != "recall":
        raise ValueError(f"kind must be 'recall' or 'weight_step', got {kind!r}")
    run = train_specialization_head(seed, steps=s.steps, lr=s.lr, n_train=s.n_train, n_probe=s.n_probe,
                                    record_every=s.record_every, settle_window=5 * s.record_every)
    batch = recall.sample_specialization_batch(s.n_check, generator=torch_generator(stream(seed, "heldout")),
                                               dtype=torch.float64)
    # the middle of the routing transition: half the rise of the attention on the answer's source
    moments = {"init": 0, "transition": milestone_indices(run.correct_mass, (0.5,))[0], "end": len(run.steps) - 1}
    trace = advantage_change_along_training(run, batch)
    out: dict[str, Any] = {"seed": int(seed), "steps": {k: int(run.steps[i]) for k, i in moments.items()}}
    for name, i in moments.items():
        head = run.head_at(i)
        out[name] = {
            "db_rel_err": dynamics.compatibility_change_after_value_step(head, batch, s.eta).relative_error,
            "loss_ratio": float(dynamics.value_step_ratio_curve(head, batch, [s.eta])[0]),
            "gain_correct": float(trace["gain_correct"][i]),
            "gain_other_source": float(trace["gain_other_source"][i]),
            "rule_agreement": float(trace["rule_agreement"][i]),
            "correct_mass": float(run.correct_mass[i]),
        }
    return out


def feedback_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one recall head per seed (``seeds`` instead of the scale's own) and one sticky-chain weight step per
    paper seed."""
    s = FEEDBACK_PREDICTIONS.spec(scale)
    settings = dataclasses.asdict(s)
    jobs = [Job(f"recall-seed{x}", feedback_job, {"kind": "recall", "seed": int(x), "settings": settings},
                cost=float(s.steps)) for x in (s.seeds if seeds is None else seeds)]
    jobs += [Job(f"weight_step-seed{x}", feedback_job, {"kind": "weight_step", "seed": int(x), "settings": settings},
                 cost=1.0) for x in s.sticky_seeds]
    return jobs


def _mean_ci(values: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Mean with a Student-t interval over seeds, and the values."""
    v = np.asarray(values, dtype=float)
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return {"mean": float(v.mean()), "low": float(v.mean()) - half, "high": float(v.mean()) + half,
            "values": v.tolist()}


def assemble_feedback(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``feedback_predictions.json``: per moment the mean (with t interval) of the Δb error, the loss ratio, the
    gain shares and the answer's source gain margin over the other sources; the weight steps' cosine and sign
    agreement; settings and per-seed values."""
    recall_runs = [outputs[k] for k in sorted(outputs, key=_seed_order) if k.startswith("recall-")]
    order = list(FEEDBACK_PREDICTIONS.spec(scale).sticky_seeds)  # the paper's order of its seeds
    steps = sorted((outputs[k] for k in outputs if k.startswith("weight_step-")),
                   key=lambda r: order.index(r["seed"]) if r["seed"] in order else len(order) + r["seed"])
    moments = {}
    for name in MOMENTS:
        rows = [r[name] for r in recall_runs]
        moments[name] = {
            "step": [r["steps"][name] for r in recall_runs],
            **{key: _mean_ci([row[key] for row in rows]) for key in ("db_rel_err", "loss_ratio", "gain_correct",
                                                                      "gain_other_source", "rule_agreement")},
            "gain_margin": _mean_ci([row["gain_correct"] - row["gain_other_source"] for row in rows]),
        }
    save_results({"about": "Chapter 3's feedback predictions over seeds; written by "
                           "`python -m attention_dynamics compute feedback_predictions`.",
                  "scale": scale, "settings": dataclasses.asdict(FEEDBACK_PREDICTIONS.spec(scale)),
                  "seeds": [r["seed"] for r in recall_runs], "moments": moments,
                  "sticky_seeds": [r["seed"] for r in steps],
                  "weight_step": {key: _mean_ci([r[key] for r in steps]) for key in ("value_cosine", "sign_agreement")}},
                 folder / FILE)


def _seed_order(key: str) -> tuple[str, int]:
    kind, seed = key.split("-seed")
    return kind, int(seed)


FEEDBACK_PREDICTIONS = StoredResult(
    name="feedback_predictions", chapter="routing_content_feedback",
    about="chapter 3's feedback predictions (Δb, the answer source's advantage) on five recall heads at three "
          "moments, and weight steps on the sticky-chain head",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "5 jobs, under a minute", "book": "10 jobs: 5 recall heads (~10 CPU-s each) and 5 weight "
                                                       "steps, ~1 CPU-min"},
    jobs=feedback_jobs, assemble=assemble_feedback)

