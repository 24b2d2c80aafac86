"""Chapter 6's long tier: Paper I's bijection size and a longer-trained HMM filter, computed once and committed.

The book-scale runs of chapter 6 fit its time budget; these do not. Two tunnels are trained once by
``python -m attention_dynamics.experiments.long_tier --scale long`` (about an hour each on one CPU core):

- ``bijection_v20``: bijection elimination at Paper I's size, V = 20 values and L = 19 revealed pairs;
- ``hmm_long``: HMM filtering on Paper I's random HMMs, trained longer and deeper than the book scale.

Each run saves its full state every ``save_every`` steps in ``build/long_tier/`` and continues from it
when started again (:func:`~attention_dynamics.training.fit_resumable`: the result is the same, bit for
bit, as that of a run that never stopped), and prints a line of progress at every save, with the
held-out measurement taken there (:func:`measure`: the training curve that says whether the run has
plateaued). When a run is finished, its trained weights (``torch.save`` of the state dict) and a small
results file (settings, seed, curve, final measurements, CPU time, code commit) go to the package's
``data/long_tier/``. Chapter 6 loads the weights with ``weights_only=True`` (:func:`load`), says so, and
measures calibration and geometry on the loaded models itself; the tests regenerate the ``fast`` scale.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from .. import calibration
from ..paths import BUILD_DIR, data_path
from ..seeding import stream
from ..tasks import hmm
from ..training import ResumePoint
from . import wind_tunnel
from ..results import load_results, save_results

__all__ = ["TUNNELS", "SCALES", "SETTINGS", "DATA_FOLDER", "CACHE_DIR", "CURVE_POINTS", "tunnel_settings", "LongRun",
           "untrained_state", "measure", "train", "load", "main"]

#: The long tier's tunnels: which of chapter 6's tasks each trains.
TUNNELS = {"bijection_v20": "bijection", "hmm_long": "hmm"}
#: ``long``: the committed runs; ``fast``: a smoke run of the same code (the tests).
SCALES = ("fast", "long")
#: Overrides of chapter 6's settings (:data:`~attention_dynamics.experiments.wind_tunnel.SETTINGS`) per scale and
#: tunnel, plus ``save_every`` (steps between saves and measurements) and ``n_measure`` (held-out sequences of each
#: measurement). ``long``: the bijection at Paper I's V = 20, L = 19 with a wider model than the book scale's;
#: the HMM model twice as deep as the book scale's, trained six times as long.
SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "fast": {
        "bijection_v20": {"base": "fast", "V": 8, "L": 7, "bij_steps": 60, "save_every": 20, "n_measure": 64},
        "hmm_long": {"base": "fast", "hmm_steps": 60, "save_every": 20, "n_measure": 64},
    },
    "long": {
        "bijection_v20": {"base": "book", "V": 20, "L": 19, "bij_d_model": 96, "bij_n_heads": 4, "bij_steps": 16_000,
                          "warmup_steps": 500, "n_probe": 256, "save_every": 1000, "n_measure": 500},
        "hmm_long": {"base": "book", "hmm_n_layers": 4, "hmm_steps": 60_000, "warmup_steps": 500,
                     "save_every": 2500, "n_measure": 500},
    },
}
#: The committed runs' folder inside the package's data (:func:`~attention_dynamics.paths.data_path`).
DATA_FOLDER = "long_tier"
#: Where unfinished runs keep their state (not committed).
CACHE_DIR = BUILD_DIR / "long_tier"
#: The loss curve is stored as the mean over this many equal blocks of steps.
CURVE_POINTS = 200


def _check(scale: str, tunnel: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"the long tier has scales {', '.join(SCALES)}, got {scale!r}")
    if tunnel not in TUNNELS:
        raise ValueError(f"unknown tunnel {tunnel!r}; choose from {', '.join(TUNNELS)}")


def tunnel_settings(scale: str, tunnel: str) -> dict[str, Any]:
    """Return the full chapter 6 settings of ``tunnel`` at ``scale`` (its base scale's, with the overrides)."""
    _check(scale, tunnel)
    over = dict(SETTINGS[scale][tunnel])
    return {**wind_tunnel.SETTINGS[over.pop("base")], **over}


def _plain(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``settings`` as JSON stores them (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}


@dataclass
class LongRun:
    """A loaded long-tier run: its ``tunnel``, chapter 6 ``settings``, stored ``results`` and the trained model
    as a :class:`~attention_dynamics.experiments.wind_tunnel.TrainedRun` (``run``), whose checkpoint 0 is the
    untrained model of the same seed (:func:`untrained_state`), for the geometry's nulls."""

    tunnel: str
    settings: dict[str, Any]
    results: dict[str, Any]
    run: wind_tunnel.TrainedRun
    weights_file: Path


def untrained_state(task: str, settings: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """Return the initial weights of a chapter 6 run (the same draw as the trainers make, from the seed's init stream)."""
    torch.manual_seed(stream(seed, "init"))
    s = settings
    if task == "bijection":
        model = wind_tunnel.make_bijection_transformer(s["V"], s["L"], d_model=s["bij_d_model"],
                                                       n_layers=s["bij_n_layers"], n_heads=s["bij_n_heads"])
    else:
        model = wind_tunnel.make_hmm_transformer(s["hmm_states"], s["hmm_symbols"], d_model=s["hmm_d_model"],
                                                 n_layers=s["hmm_n_layers"], n_heads=s["hmm_n_heads"])
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def measure(task: str, settings: Mapping[str, Any], seed: int, n: int) -> Callable[[int, torch.nn.Module], dict[str, float]]:
    """Return ``record(step, model)``: the held-out measurement of a long run at ``step`` on ``n`` sequences.

    Bijection: entropy error and KL (bits) against the exact posterior, and the geometry numbers of
    :func:`~attention_dynamics.experiments.wind_tunnel.geometry_summary` on the first 64 probe sequences.
    HMM: the KL (bits) at every test length and its ratio to the context-blind level there, and the
    entropy error at the training length. The sequences are drawn once, from the held-out streams.
    """
    if task == "bijection":
        batch = wind_tunnel.bijection_batch_for_eval(settings, seed=seed, n=n)
        probe = wind_tunnel.bijection_probe_batch(settings, seed=seed)
        probe = type(probe)(**{f: getattr(probe, f)[:64] if torch.is_tensor(getattr(probe, f)) else getattr(probe, f)
                               for f in probe.__dataclass_fields__})

        def record(step: int, model: torch.nn.Module) -> dict[str, float]:
            rep = calibration.calibration_report(batch.posterior, wind_tunnel.bijection_log_probs(model, batch))
            geo = wind_tunnel.geometry_summary(wind_tunnel.bijection_geometry(model, probe, table=False))
            return {"entropy_mae_bits": rep.entropy_mae_bits, "kl_bits": rep.kl_bits, **geo}

        return record
    batches = {K: wind_tunnel.hmm_batch_for_eval(settings, K, seed=seed, n=n) for K in settings["hmm_test_lengths"]}
    blind = {K: calibration.calibration_report(
        b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log()).kl_bits
        for K, b in batches.items()}

    def record(step: int, model: torch.nn.Module) -> dict[str, float]:
        out = {}
        for K, b in batches.items():
            rep = calibration.calibration_report(b.posterior, wind_tunnel.hmm_log_probs(model, b))
            out[f"kl_bits_K{K}"], out[f"kl_ratio_K{K}"] = rep.kl_bits, rep.kl_bits / blind[K]
            if K == settings["hmm_length"]:
                out["entropy_mae_bits"] = rep.entropy_mae_bits
        return out

    return record


def _blocks(values: np.ndarray, n: int = CURVE_POINTS) -> list[float]:
    return [float(b.mean()) for b in np.array_split(np.asarray(values, dtype=float), min(n, len(values)))]


def _folder(out: Path | None) -> Path:
    return Path(out) if out is not None else data_path(DATA_FOLDER)


def train(scale: str, tunnel: str, *, seed: int = 0, out: Path | None = None, cache: Path | None = None,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train ``tunnel`` at ``scale`` (resuming from ``cache``) and write its weights and results to ``out``; return the results.

    ``out``: the folder of ``<tunnel>.pt`` and ``<tunnel>.json`` (default: the package's ``data/long_tier``);
    ``cache``: the folder of the unfinished run's state (default :data:`CACHE_DIR`). The run uses one CPU thread.
    """
    settings = tunnel_settings(scale, tunnel)
    task = TUNNELS[tunnel]
    cache_file = Path(cache if cache is not None else CACHE_DIR) / f"{scale}-{tunnel}-seed{seed}.pt"
    resume = ResumePoint(path=cache_file, every=settings["save_every"],
                         record=measure(task, settings, seed, settings["n_measure"]), log=log)
    steps = settings["bij_steps" if task == "bijection" else "hmm_steps"]
    log(f"{tunnel} ({scale}): {steps} steps, saving every {settings['save_every']} to {cache_file}")
    started = time.process_time()
    trainer = wind_tunnel.train_bijection if task == "bijection" else wind_tunnel.train_hmm
    run = trainer(settings, seed=seed, checkpoints=False, resume=resume)
    history = torch.load(cache_file, weights_only=True)
    folder = _folder(out)
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"{tunnel}.pt"
    torch.save(run.state_dict, weights)
    results = {"about": f"Chapter 6's long tier, tunnel {tunnel}: written by "
                        f"`python -m attention_dynamics.experiments.long_tier --scale {scale}`.",
               "tunnel": tunnel, "task": task, "scale": scale, "seed": seed, "steps": steps,
               "settings": _plain(settings), "weights": weights.name,
               "loss_curve_nats": _blocks(run.losses), "curve": history["records"],
               "final": history["records"][-1],
               "cpu_seconds_this_process": time.process_time() - started}
    save_results(results, folder / f"{tunnel}.json")
    log(f"wrote {weights} and {folder / f'{tunnel}.json'}")
    return results


def load(tunnel: str, *, folder: Path | None = None) -> LongRun:
    """Return the committed :class:`LongRun` of ``tunnel``: its results file and its weights, loaded with ``weights_only=True``.

    Raises ``FileNotFoundError`` naming the command that computes them if they are missing.
    """
    if tunnel not in TUNNELS:
        raise ValueError(f"unknown tunnel {tunnel!r}; choose from {', '.join(TUNNELS)}")
    folder = _folder(folder)
    results_file, weights_file = folder / f"{tunnel}.json", folder / f"{tunnel}.pt"
    for f in (results_file, weights_file):
        if not f.exists():
            raise FileNotFoundError(f"{f} is missing; compute it with "
                                    f"`python -m attention_dynamics.experiments.long_tier --tunnels {tunnel}`")
    results = load_results(results_file)
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in results["settings"].items()}
    task = results["task"]
    state = torch.load(weights_file, weights_only=True)
    run = wind_tunnel.TrainedRun(task, settings, state, np.asarray(results["loss_curve_nats"]),
                                 {0: untrained_state(task, settings, results["seed"]), results["steps"]: state})
    return LongRun(tunnel=tunnel, settings=settings, results=results, run=run, weights_file=weights_file)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train the long tier's tunnels one after the other (resumable) and write their files."""
    parser = argparse.ArgumentParser(prog="python -m attention_dynamics.experiments.long_tier",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="long", choices=SCALES)
    parser.add_argument("--tunnels", nargs="+", default=list(TUNNELS), choices=tuple(TUNNELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help=f"output folder (default: the package's data/{DATA_FOLDER})")
    parser.add_argument("--cache", type=Path, default=None, help=f"folder of unfinished runs (default: {CACHE_DIR})")
    args = parser.parse_args(argv)
    for tunnel in args.tunnels:
        train(args.scale, tunnel, seed=args.seed, out=args.out, cache=args.cache,
              log=lambda m: print(time.strftime("%H:%M:%S"), m, flush=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
