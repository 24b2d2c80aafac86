"""Chapter 7's sticky-HMM tunnel: belief transport where it is worth much more than the current observation.

On Paper I's random HMMs the exact posterior given only the current observation is a few hundredths of a
bit of KL from the filter, so transport is a faint signal. Mixing every transition row with the identity,
``T = 0.3·Dirichlet(1) row + 0.7·I`` (:data:`~attention_dynamics.tasks.wind_tunnels.STICKY_SELF_TRANSITION`),
makes the chain stay put, and the past observations then say much more about the current state: the
context-blind level (:func:`attention_dynamics.tasks.hmm.context_blind_posterior`) rises several-fold.

The five model families of chapter 7 are trained on that tunnel with chapter 7's own machinery
(:func:`~attention_dynamics.experiments.architectures.train_and_evaluate`, the same matched sizes, schedule and
evaluation), with their KL to the filter over training (:func:`kl_curve_bits`, the exact KL on each step's
fresh batch) as the plateau evidence of the verdicts. Training five models, one of them Mamba, does not fit
chapter 7's time budget, so the runs are computed once by ``python -m attention_dynamics.experiments.sticky_hmm``
(resumable: each finished family is saved at once, progress in the log) into ``data/sticky_hmm.json`` with their
settings and code version; chapter 7 loads it, and the tests regenerate it at the fast scale.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .. import calibration, stats
from ..models.factory import FAMILIES
from ..paths import data_path
from ..seeding import stream, torch_generator
from ..settings import check_scale
from ..tasks.wind_tunnels import STICKY_HMM, STICKY_SELF_TRANSITION, TASKS, WindTunnel
from ..results import load_results, save_results

__all__ = ["SETTINGS", "RESULTS_FILE", "CURVE_POINTS", "LONGER_FACTOR", "sticky_task", "eval_seed", "evaluation_set", "kl_curve_bits",
           "family_steps", "run_family", "reference", "compute", "load", "main"]

#: The sticky tunnel's settings per scale: HMM sizes (K = 20, Paper I's length), chapter 7's model budget and
#: optimiser, and the steps of every family (more than chapter 7's grid: transport has to be learned), except
#: where ``steps_<family>`` says otherwise: Mamba's pure-PyTorch scan costs about fifteen times as much per step
#: on a CPU, and the book's budget allows it fewer steps.
SETTINGS: dict[str, dict[str, Any]] = {
    "fast": {"hmm_states": 5, "hmm_symbols": 5, "hmm_length": 8, "target_params": 6000, "steps": 40,
             "batch_size": 16, "lr": 2e-3, "eval_sequences": 64},
    "book": {"hmm_states": 5, "hmm_symbols": 5, "hmm_length": 20, "target_params": 60000, "steps": 4000,
             "steps_mamba": 1500, "batch_size": 64, "lr": 2e-3, "eval_sequences": 1000},
}
#: The committed results (``python -m attention_dynamics.experiments.sticky_hmm`` writes it).
RESULTS_FILE = "sticky_hmm.json"
def eval_seed(seed: int) -> int:
    """Return the seed of the evaluation set: chapter 7's held-out stream, after its three tunnels."""
    return stream(seed, "heldout", len(TASKS))


#: A longer run, for the evidence of a verdict, trains this many times as long.
LONGER_FACTOR = 4
#: The training curves are stored as the mean over this many equal blocks of steps.
CURVE_POINTS = 100


def sticky_task(cfg: Mapping[str, Any]) -> WindTunnel:
    """Return the sticky-HMM tunnel at the sizes of settings ``cfg``."""
    return WindTunnel.make(STICKY_HMM, n_states=cfg["hmm_states"], n_symbols=cfg["hmm_symbols"],
                           length=cfg["hmm_length"])


def evaluation_set(cfg: Mapping[str, Any], seed: int):
    """Return the sticky tunnel's evaluation set (the same for every family)."""
    from .architectures import evaluation_batch

    return evaluation_batch(sticky_task(cfg), cfg["eval_sequences"], eval_seed(seed))


def kl_curve_bits(losses: Sequence[float], task: WindTunnel, *, batch_size: int, seed: int) -> np.ndarray:
    """Return the exact KL(posterior ‖ model) in bits on each training step's batch, ``(steps,)``.

    The training loss is the cross-entropy against the exact posterior; minus that batch's mean posterior
    entropy it is the KL on the batch. The batches are drawn again from the same data stream as
    :func:`~attention_dynamics.experiments.architectures.train_and_evaluate` draws them. Every batch is
    fresh, so the curve is a held-out measurement at every step.
    """
    data = torch_generator(stream(seed, "data"))
    entropy = np.array([float(stats.entropy(task.sample(batch_size, generator=data).posterior, unit="nats").mean())
                        for _ in range(len(losses))])
    return (np.asarray(losses, dtype=float) - entropy) / calibration.LN2


def _settings(scale: str) -> dict[str, Any]:
    if check_scale(scale) not in SETTINGS:
        raise ValueError(f"the sticky tunnel has scales {', '.join(SETTINGS)}, got {scale!r}")
    return SETTINGS[scale]


def family_steps(cfg: Mapping[str, Any], family: str) -> int:
    """Return the training steps of ``family`` under settings ``cfg`` (``steps_<family>`` or ``steps``)."""
    return int(cfg.get(f"steps_{family}", cfg["steps"]))


def _blocks(curve: np.ndarray, n: int = CURVE_POINTS) -> list[float]:
    n = min(n, len(curve))
    return [float(block.mean()) for block in np.array_split(curve, n)]


def run_family(scale: str, family: str, seed: int = 0, *, steps: int | None = None) -> dict[str, Any]:
    """Train one family on the sticky tunnel with chapter 7's :func:`train_and_evaluate`; return its results.

    ``steps``: the training steps (default: :func:`family_steps` of the scale's settings; a longer run for the
    verdicts' evidence passes a multiple).

    ``kl_bits`` etc.: the metrics on the evaluation set; ``kl_by_position``: KL at each step t;
    ``kl_curve_bits``: the training-batch KL (:func:`kl_curve_bits`) averaged over :data:`CURVE_POINTS`
    blocks of steps; ``loss_curve_nats``: the training loss over the same blocks; ``cpu_seconds``: of the run.
    """
    from .architectures import train_and_evaluate

    cfg = _settings(scale)
    task = sticky_task(cfg)
    run = train_and_evaluate(family=family, task=task, target_params=cfg["target_params"],
                             steps=steps or family_steps(cfg, family),
                             batch_size=cfg["batch_size"], lr=cfg["lr"], seed=seed,
                             eval_sequences=cfg["eval_sequences"],
                             eval_seed=eval_seed(seed))
    curve = kl_curve_bits(run.losses, task, batch_size=cfg["batch_size"], seed=seed)
    return {"family": family, "seed": seed, "steps": run.steps, "n_params": run.n_params, "width": run.width,
            "metrics": {k: float(v) for k, v in run.metrics.items() if np.isfinite(v)},
            "kl_by_position": [float(v) for v in run.kl_by_position],
            "kl_curve_bits": _blocks(curve), "loss_curve_nats": _blocks(np.asarray(run.losses)),
            "cpu_seconds": float(run.cpu_seconds)}


def reference(scale: str, seed: int = 0) -> dict[str, Any]:
    """Return the exact levels of the sticky tunnel's evaluation set: the context-blind KL and entropy error
    (bits, overall and at each step) and the Bayes floor of the loss (nats)."""
    from .architectures import reference_levels

    cfg = _settings(scale)
    batch = evaluation_set(cfg, seed)
    levels = reference_levels([sticky_task(cfg)], {STICKY_HMM: batch})
    return {"context_blind": levels.context_blind[STICKY_HMM],
            "context_blind_kl_by_position": [float(v) for v in levels.context_blind_kl_by_position[STICKY_HMM]],
            "floor_nats": float(stats.entropy(batch.posterior, unit="nats").mean())}


def compute(scale: str = "book", families: Sequence[str] = FAMILIES, *, seed: int = 0, out: Path | None = None,
            longer: Sequence[str] = (), log=print) -> dict[str, Any]:
    """Return the sticky tunnel's results for ``families``, saving after each run to ``out`` (and resuming from it).

    A family already in ``out`` with the same scale, seed and settings is not trained again. Each family in
    ``longer`` is also trained :data:`LONGER_FACTOR` times as long (under ``"longer"``): the evidence that decides
    whether more training would change its verdict.
    """
    families = list(families)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown model families {unknown}; choose from {', '.join(FAMILIES)}")
    settings = {**_settings(scale), "self_transition": STICKY_SELF_TRANSITION}
    result = {"about": "Chapter 7's sticky-HMM tunnel: five parameter-matched families trained with chapter 7's "
                       "train_and_evaluate; written by `python -m attention_dynamics.experiments.sticky_hmm`.",
              "scale": scale, "seed": seed, "settings": settings, "reference": None, "runs": {}, "longer": {}}
    if out is not None and Path(out).exists():
        stored = load_results(out)
        if (stored.get("scale"), stored.get("seed"), stored.get("settings")) == (scale, seed, settings):
            result["runs"], result["longer"] = stored["runs"], stored.get("longer", {})
            log(f"resuming: {', '.join(stored['runs']) or 'nothing'} already done")
    result["reference"] = reference(scale, seed)
    log(f"context-blind KL {result['reference']['context_blind']['kl_bits']:.4f} bits")
    for family in families:
        if family in result["runs"]:
            continue
        started = time.time()
        log(f"training {family} ({family_steps(settings, family)} steps) ...")
        result["runs"][family] = run_family(scale, family, seed)
        run = result["runs"][family]
        log(f"{family}: KL {run['metrics']['kl_bits']:.4f} bits, {run['cpu_seconds']:.0f} CPU-s "
            f"({time.time() - started:.0f} s wall)")
        if out is not None:
            save_results(result, out)
    for family in longer:
        if family in result["longer"]:
            continue
        steps = LONGER_FACTOR * family_steps(settings, family)
        log(f"training {family} {LONGER_FACTOR}× longer ({steps} steps) ...")
        result["longer"][family] = run_family(scale, family, seed, steps=steps)
        log(f"{family}, {steps} steps: KL {result['longer'][family]['metrics']['kl_bits']:.4f} bits, "
            f"{result['longer'][family]['cpu_seconds']:.0f} CPU-s")
        if out is not None:
            save_results(result, out)
    result["runs"] = {f: result["runs"][f] for f in FAMILIES if f in result["runs"]}
    if out is not None:
        save_results(result, out)
    return result


def load() -> dict[str, Any]:
    """Return the committed results (``data/sticky_hmm.json``)."""
    return load_results(data_path(RESULTS_FILE))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train the families on the sticky tunnel and write the results (default: the committed file)."""
    parser = argparse.ArgumentParser(prog="python -m attention_dynamics.experiments.sticky_hmm",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="book", choices=tuple(SETTINGS))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--longer", nargs="*", default=[], choices=FAMILIES,
                        help=f"families also trained {LONGER_FACTOR}× as long (the evidence for their verdicts)")
    parser.add_argument("--out", type=Path, default=None, help=f"output file (default: the package's data/{RESULTS_FILE})")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # one core: the runs go one after another
    out = args.out or data_path(RESULTS_FILE)
    compute(args.scale, args.families, seed=args.seed, out=out, longer=args.longer,
            log=lambda m: print(m, flush=True))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
