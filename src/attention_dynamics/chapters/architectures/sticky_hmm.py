"""Chapter 7's sticky-HMM tunnel: belief transport where it is worth much more than the current observation.

On Paper I's random HMMs the exact posterior given only the current observation is a few hundredths of a
bit of KL from the filter, so transport is a faint signal. Mixing every transition row with the identity,
``T = 0.3·Dirichlet(1) row + 0.7·I`` (:data:`~attention_dynamics.tasks.wind_tunnels.STICKY_SELF_TRANSITION`),
makes the chain stay put, and the past observations then say much more about the current state: the
context-blind level (:func:`attention_dynamics.tasks.hmm.context_blind_posterior`) rises several-fold.

The five model families of chapter 7 are trained on that tunnel with chapter 7's own machinery
(:func:`~attention_dynamics.training.families.train_and_evaluate`, the same matched sizes, schedule and
evaluation), with their KL to the filter over training (:func:`kl_curve_bits`, the exact KL on each step's
fresh batch) as the plateau evidence of the verdicts. Training five models, one of them Mamba, does not fit
chapter 7's time budget, so the runs are computed once by ``python -m attention_dynamics compute sticky_hmm`` (one job
per run, resumable) into ``data/sticky_hmm.json`` with their settings and code version; chapter 7 loads it, and the
tests regenerate it at the fast scale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...core.seeding import stream, torch_generator
from ...ledger.results import Job, StoredResult, one_seed, save_results
from ...models.registry import family
from ...science import calibration, stats
from ...tasks.wind_tunnels import STICKY_HMM_TASK, STICKY_SELF_TRANSITION, TASKS, WindTunnel
from ...training.families import evaluation_batch, train_and_evaluate
from .hmm_tunnel import HMMTunnelSpec
from .runs import reference_levels

__all__ = ["SPECS", "RESULTS_FILE", "CURVE_POINTS", "LONGER_FACTOR", "LONGER_FAMILIES", "sticky_task", "eval_seed",
           "evaluation_set", "kl_curve_bits", "run_family", "reference", "STICKY_HMM_RUNS"]

#: What ``data/sticky_hmm.json`` records of the settings, in its order, and the sticky mix after them.
_RECORD = ("hmm_states", "hmm_symbols", "hmm_length", "target_params", "steps", "batch_size", "lr", "eval_sequences",
           "steps_mamba")
_DESIGN = {"self_transition": STICKY_SELF_TRANSITION}

#: The sticky tunnel's runs: HMM sizes (K = 20, Paper I's length), chapter 7's model budget and optimiser, and the
#: steps of every family (more than chapter 7's grid: transport has to be learned), except Mamba's: its pure-PyTorch
#: scan costs about fifteen times as much per step on a CPU, and the book's budget allows it fewer steps.
SPECS: dict[str, HMMTunnelSpec] = {
    "fast": HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=8, target_params=6000, steps=40, batch_size=16,
                          lr=2e-3, eval_sequences=64, record=_RECORD, design=_DESIGN),
    "book": HMMTunnelSpec(hmm_states=5, hmm_symbols=5, hmm_length=20, target_params=60000, steps=4000,
                          steps_by_family={"mamba": 1500}, batch_size=64, lr=2e-3, eval_sequences=1000,
                          record=_RECORD, design=_DESIGN),
}
#: The committed results.
RESULTS_FILE = "sticky_hmm.json"
#: The families also trained :data:`LONGER_FACTOR` times as long (the evidence of their verdicts).
LONGER_FAMILIES = ("mamba", "lstm")


def eval_seed(seed: int) -> int:
    """Return the seed of the evaluation set: chapter 7's held-out stream, after its three tunnels."""
    return stream(seed, "heldout", len(TASKS))


#: A longer run, for the evidence of a verdict, trains this many times as long.
LONGER_FACTOR = 4
#: The training curves are stored as the mean over this many equal blocks of steps.
CURVE_POINTS = 100


def sticky_task(cfg: HMMTunnelSpec) -> WindTunnel:
    """Return the sticky-HMM tunnel at the sizes of ``cfg``."""
    return WindTunnel.make(STICKY_HMM_TASK, n_states=cfg.hmm_states, n_symbols=cfg.hmm_symbols, length=cfg.hmm_length)


def evaluation_set(cfg: HMMTunnelSpec, seed: int):
    """Return the sticky tunnel's evaluation set (the same for every family)."""

    return evaluation_batch(sticky_task(cfg), cfg.eval_sequences, eval_seed(seed))


def kl_curve_bits(losses: Sequence[float], task: WindTunnel, *, batch_size: int, seed: int) -> np.ndarray:
    """Return the exact KL(posterior ‖ model) in bits on each training step's batch, ``(steps,)``.

    The training loss is the cross-entropy against the exact posterior; minus that batch's mean posterior
    entropy it is the KL on the batch. The batches are drawn again from the same data stream as
    :func:`~attention_dynamics.training.families.train_and_evaluate` draws them. Every batch is
    fresh, so the curve is a held-out measurement at every step.
    """
    data = torch_generator(stream(seed, "data"))
    entropy = np.array([float(stats.entropy(task.sample(batch_size, generator=data).posterior, unit="nats").mean())
                        for _ in range(len(losses))])
    return (np.asarray(losses, dtype=float) - entropy) / calibration.LN2


def _blocks(curve: np.ndarray, n: int = CURVE_POINTS) -> list[float]:
    n = min(n, len(curve))
    return [float(block.mean()) for block in np.array_split(curve, n)]


def run_family(scale: str, family: str, seed: int = 0, *, steps: int | None = None) -> dict[str, Any]:
    """Train one family on the sticky tunnel with chapter 7's :func:`train_and_evaluate`; return its results.

    ``steps``: the training steps (default: the family's steps of the scale's spec; a longer run for the
    verdicts' evidence passes a multiple).

    ``kl_bits`` etc.: the metrics on the evaluation set; ``kl_by_position``: KL at each step t;
    ``kl_curve_bits``: the training-batch KL (:func:`kl_curve_bits`) averaged over :data:`CURVE_POINTS`
    blocks of steps; ``loss_curve_nats``: the training loss over the same blocks; ``cpu_seconds``: of the run.
    """

    cfg = STICKY_HMM_RUNS.spec(scale)
    task = sticky_task(cfg)
    run = train_and_evaluate(family=family, task=task, target_params=cfg.target_params,
                             steps=steps or cfg.family_steps(family),
                             batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                             eval_sequences=cfg.eval_sequences,
                             eval_seed=eval_seed(seed))
    curve = kl_curve_bits(run.losses, task, batch_size=cfg.batch_size, seed=seed)
    return {"family": family, "seed": seed, "steps": run.steps, "n_params": run.n_params, "width": run.width,
            "metrics": {k: float(v) for k, v in run.metrics.items() if np.isfinite(v)},
            "kl_by_position": [float(v) for v in run.kl_by_position],
            "kl_curve_bits": _blocks(curve), "loss_curve_nats": _blocks(np.asarray(run.losses)),
            "cpu_seconds": float(run.cpu_seconds)}


def reference(scale: str, seed: int = 0) -> dict[str, Any]:
    """Return the exact levels of the sticky tunnel's evaluation set: the context-blind KL and entropy error
    (bits, overall and at each step) and the Bayes floor of the loss (nats)."""

    cfg = STICKY_HMM_RUNS.spec(scale)
    batch = evaluation_set(cfg, seed)
    levels = reference_levels([sticky_task(cfg)], {STICKY_HMM_TASK: batch})
    return {"context_blind": levels.context_blind[STICKY_HMM_TASK],
            "context_blind_kl_by_position": [float(v) for v in levels.context_blind_kl_by_position[STICKY_HMM_TASK]],
            "floor_nats": float(stats.entropy(batch.posterior, unit="nats").mean())}


def sticky_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per family, and one per family of :data:`LONGER_FAMILIES` trained :data:`LONGER_FACTOR` times as
    long (seed 0 unless ``seeds`` names one)."""
    seed = one_seed(seeds, "the sticky tunnel's runs use one seed")
    cfg = STICKY_HMM_RUNS.spec(scale)
    jobs = [Job(f"run-{f}", run_family, {"scale": scale, "family": f, "seed": seed},
                cost=cfg.family_steps(f) * family(f).step_cost) for f in cfg.families]
    jobs += [Job(f"longer-{f}", run_family, {"scale": scale, "family": f, "seed": seed,
                                             "steps": LONGER_FACTOR * cfg.family_steps(f)},
                 cost=LONGER_FACTOR * cfg.family_steps(f) * family(f).step_cost) for f in LONGER_FAMILIES]
    return jobs


def assemble_sticky(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``sticky_hmm.json``: the settings, the exact reference levels, every family's run and the longer runs."""
    cfg = STICKY_HMM_RUNS.spec(scale)
    seed = outputs[f"run-{cfg.families[0]}"]["seed"]
    save_results({
        "about": "Chapter 7's sticky-HMM tunnel: five parameter-matched families trained with chapter 7's "
                 "train_and_evaluate; written by `python -m attention_dynamics compute sticky_hmm`.",
        "scale": scale, "seed": seed, "settings": cfg.to_json(), "reference": reference(scale, seed),
        "runs": {f: outputs[f"run-{f}"] for f in cfg.families},
        "longer": {f: outputs[f"longer-{f}"] for f in LONGER_FAMILIES},
    }, folder / RESULTS_FILE)


STICKY_HMM_RUNS = StoredResult(
    name="sticky_hmm", chapter="architectures",
    about="the five families on sticky HMMs (transport worth much more than on Paper I's), with Mamba and the LSTM "
          "also trained four times as long",
    files=(RESULTS_FILE,), specs=SPECS, committed_scale="book",
    expected={"fast": "7 jobs, a minute", "book": "7 jobs: ~1 CPU-min each for the transformer, LSTM and MLPs, "
                                                   "~7 for Mamba, ~25 for Mamba 4x as long"},
    jobs=sticky_jobs, assemble=assemble_sticky)
