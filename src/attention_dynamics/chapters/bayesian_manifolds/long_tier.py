"""Chapter 6's long tier: Paper I's bijection size and a longer-trained HMM filter, computed once and committed.

The book-scale runs of chapter 6 fit its time budget; these do not. Two tunnels are trained once by
``python -m attention_dynamics compute long_tier`` (about half an hour each on one CPU core, one job each):

- ``bijection_v20``: bijection elimination at Paper I's size, V = 20 values and L = 19 revealed pairs;
- ``hmm_long``: HMM filtering on Paper I's random HMMs, trained longer and deeper than the book scale.

Each run saves its full state every ``save_every`` steps in its job's folder and continues from it when started
again (:func:`~attention_dynamics.training.fit_resumable`: the result is the same, bit for bit, as that of a run
that never stopped), and prints a line of progress at every save, with the held-out measurement taken there
(:func:`measure`: the training curve that says whether the run has plateaued). When a run is finished, its trained
weights (``torch.save`` of the state dict) and a small results file (settings, seed, curve, final measurements, CPU
time, code commit) are assembled into ``long_tier/``; promoted, they live in the package's ``data/long_tier/``.
Chapter 6 loads the weights with ``weights_only=True`` (:func:`load`), says so, and measures calibration and
geometry on the loaded models itself; the tests regenerate the ``fast`` scale.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from ...core.paths import DATA_DIR
from ...core.settings import check_positive_int
from ...diagnostics.wind_tunnel_geometry import bijection_geometry, geometry_summary
from ...ledger.results import Job, StoredResult, load_results, one_seed, save_results
from ...science import calibration
from ...tasks import hmm
from ...training import ResumePoint
from ...training.wind_tunnels import (
    BIJECTION_TUNNELS,
    HMM_TUNNELS,
    BijectionTraining,
    HMMTraining,
    TrainedRun,
    bijection_batch_for_eval,
    bijection_log_probs,
    bijection_probe_batch,
    hmm_batch_for_eval,
    hmm_log_probs,
    train_bijection,
    train_hmm,
    untrained_model,
)

__all__ = ["TUNNELS", "DATA_FOLDER", "CURVE_POINTS", "LongTierSpec", "SPECS", "LongRun", "measure", "train_tunnel",
           "LONG_TIER"]

#: The long tier's tunnels.
TUNNELS = ("bijection_v20", "hmm_long")
#: The committed runs' folder inside the package's data.
DATA_FOLDER = "long_tier"
#: The loss curve is stored as the mean over this many equal blocks of steps.
CURVE_POINTS = 200


@dataclass(frozen=True)
class LongTierSpec:
    """One long-tier run: its tunnel (model and training), ``n_eval`` and ``n_probe`` held-out sequences for the
    chapter's measurements, and the run's own: a save (and a held-out measurement on ``n_measure`` sequences) every
    ``save_every`` steps."""

    tunnel: BijectionTraining | HMMTraining
    n_eval: int
    n_probe: int
    save_every: int
    n_measure: int

    def __post_init__(self) -> None:
        for name in ("n_eval", "n_probe", "save_every", "n_measure"):
            check_positive_int(name, getattr(self, name))

    @property
    def task(self) -> str:
        """Return ``"bijection"`` or ``"hmm"``."""
        return "bijection" if isinstance(self.tunnel, BijectionTraining) else "hmm"

    def to_json(self) -> dict[str, Any]:
        """Return the spec as plain JSON (the tunnel's fields under ``tunnel``, its kind under ``task``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "tunnel"}
        tunnel = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.tunnel).items()}
        return {"task": self.task, "tunnel": tunnel, **out}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LongTierSpec":
        """Return the spec stored by :meth:`to_json`."""
        kind = BijectionTraining if data["task"] == "bijection" else HMMTraining
        tunnel = {k: tuple(v) if isinstance(v, list) else v for k, v in data["tunnel"].items()}
        return cls(tunnel=kind(**tunnel), **{k: data[k] for k in ("n_eval", "n_probe", "save_every", "n_measure")})


#: The runs per scale. ``paper``: the bijection at Paper I's V = 20, L = 19 with a wider model than the book scale's;
#: the HMM model twice as deep as the book scale's, trained six times as long. ``fast``: the tests' smoke run.
SPECS: dict[str, dict[str, LongTierSpec]] = {
    "paper": {
        "bijection_v20": LongTierSpec(BIJECTION_TUNNELS["book"].replace(V=20, L=19, d_model=96, n_heads=4, steps=16_000,
                                                                        warmup_steps=500),
                                      n_eval=2000, n_probe=256, save_every=1000, n_measure=500),
        "hmm_long": LongTierSpec(HMM_TUNNELS["book"].replace(n_layers=4, steps=60_000, warmup_steps=500),
                                 n_eval=2000, n_probe=256, save_every=2500, n_measure=500),
    },
    "fast": {
        "bijection_v20": LongTierSpec(BIJECTION_TUNNELS["fast"].replace(V=8, L=7, steps=60), n_eval=200, n_probe=64,
                                      save_every=20, n_measure=64),
        "hmm_long": LongTierSpec(HMM_TUNNELS["fast"].replace(steps=60), n_eval=200, n_probe=64, save_every=20,
                                 n_measure=64),
    },
}


@dataclass
class LongRun:
    """A loaded long-tier run: its ``tunnel``, :class:`LongTierSpec` ``settings``, stored ``results`` and the trained
    model as a :class:`~attention_dynamics.training.wind_tunnels.TrainedRun` (``run``), whose checkpoint 0 is the
    untrained model of the same seed, for the geometry's nulls."""

    tunnel: str
    settings: LongTierSpec
    results: dict[str, Any]
    run: TrainedRun
    weights_file: Path


def measure(spec: LongTierSpec, seed: int, n: int) -> Callable[[int, torch.nn.Module], dict[str, float]]:
    """Return ``record(step, model)``: the held-out measurement of a long run at ``step`` on ``n`` sequences.

    Bijection: entropy error and KL (bits) against the exact posterior, and the geometry numbers of
    :func:`~attention_dynamics.diagnostics.wind_tunnel_geometry.geometry_summary` on the first 64 probe sequences.
    HMM: the KL (bits) at every test length and its ratio to the context-blind level there, and the
    entropy error at the training length. The sequences are drawn once, from the held-out streams.
    """
    tunnel = spec.tunnel
    if isinstance(tunnel, BijectionTraining):
        batch = bijection_batch_for_eval(tunnel, seed=seed, n=n)
        probe = bijection_probe_batch(tunnel, seed=seed, n=spec.n_probe)
        probe = type(probe)(**{f: getattr(probe, f)[:64] if torch.is_tensor(getattr(probe, f)) else getattr(probe, f)
                               for f in probe.__dataclass_fields__})

        def record(step: int, model: torch.nn.Module) -> dict[str, float]:
            rep = calibration.calibration_report(batch.posterior, bijection_log_probs(model, batch))
            geo = geometry_summary(bijection_geometry(model, probe, table=False))
            return {"entropy_mae_bits": rep.entropy_mae_bits, "kl_bits": rep.kl_bits, **geo}

        return record
    batches = {K: hmm_batch_for_eval(tunnel, K, seed=seed, n=n) for K in tunnel.test_lengths}
    blind = {K: calibration.calibration_report(
        b.posterior, hmm.context_blind_posterior(b.transition, b.emission, b.observations).log()).kl_bits
        for K, b in batches.items()}

    def record(step: int, model: torch.nn.Module) -> dict[str, float]:
        out = {}
        for K, b in batches.items():
            rep = calibration.calibration_report(b.posterior, hmm_log_probs(model, b))
            out[f"kl_bits_K{K}"], out[f"kl_ratio_K{K}"] = rep.kl_bits, rep.kl_bits / blind[K]
            if K == tunnel.length:
                out["entropy_mae_bits"] = rep.entropy_mae_bits
        return out

    return record


def _blocks(values: np.ndarray, n: int = CURVE_POINTS) -> list[float]:
    return [float(b.mean()) for b in np.array_split(np.asarray(values, dtype=float), min(n, len(values)))]


def train_tunnel(scale: str, tunnel: str, seed: int, job_dir: str) -> dict[str, Any]:
    """Train ``tunnel`` at ``scale`` (resuming from its state in ``job_dir``), save its weights there as
    ``<tunnel>.pt``, and return its results (settings, seed, loss curve, held-out curve, final measurement)."""
    spec = LONG_TIER.spec(scale)[tunnel]
    folder = Path(job_dir)
    cache_file = folder / "resume.pt"

    def log(message: str) -> None:
        print(time.strftime("%H:%M:%S"), f"{tunnel}:", message, flush=True)

    resume = ResumePoint(path=cache_file, every=spec.save_every, record=measure(spec, seed, spec.n_measure), log=log)
    log(f"{spec.tunnel.steps} steps, saving every {spec.save_every} to {cache_file}")
    started = time.process_time()
    trainer = train_bijection if spec.task == "bijection" else train_hmm
    run = trainer(spec.tunnel, seed=seed, resume=resume)
    history = torch.load(cache_file, weights_only=True)
    torch.save(run.state_dict, folder / f"{tunnel}.pt")
    return {"about": f"Chapter 6's long tier, tunnel {tunnel}: written by "
                     f"`python -m attention_dynamics compute long_tier --scale {scale}`.",
            "tunnel": tunnel, "task": spec.task, "scale": scale, "seed": seed, "steps": spec.tunnel.steps,
            "settings": spec.to_json(), "weights": f"{tunnel}.pt",
            "loss_curve_nats": _blocks(run.losses), "curve": history["records"], "final": history["records"][-1],
            "cpu_seconds_this_process": time.process_time() - started}


def long_tier_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per tunnel (seed 0 unless ``seeds`` names one)."""
    seed = one_seed(seeds, "the long tier trains one seed per tunnel")
    return [Job(tunnel, train_tunnel, {"scale": scale, "tunnel": tunnel, "seed": seed},
                cost=float(spec.tunnel.steps * spec.tunnel.n_layers)) for tunnel, spec in LONG_TIER.spec(scale).items()]


def assemble_long_tier(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``long_tier/<tunnel>.json`` and copy ``long_tier/<tunnel>.pt`` from each job's folder."""
    target = folder / DATA_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for tunnel, results in outputs.items():
        shutil.copyfile(folder / "jobs" / tunnel / f"{tunnel}.pt", target / f"{tunnel}.pt")
        save_results(results, target / f"{tunnel}.json")


def _read_long_run(tunnel: str, *, folder: Path | None = None) -> LongRun:
    """Return the committed :class:`LongRun` of ``tunnel``: its results file and its weights, loaded with
    ``weights_only=True``. Raises ``FileNotFoundError`` naming the command that computes them if they are missing."""
    if tunnel not in TUNNELS:
        raise ValueError(f"unknown tunnel {tunnel!r}; choose from {', '.join(TUNNELS)}")
    folder = Path(folder) if folder is not None else DATA_DIR / DATA_FOLDER
    results_file, weights_file = folder / f"{tunnel}.json", folder / f"{tunnel}.pt"
    for f in (results_file, weights_file):
        if not f.exists():
            raise FileNotFoundError(f"{f} is missing; compute it with `python -m attention_dynamics compute long_tier`")
    results = load_results(results_file)
    spec = LongTierSpec.from_json(results["settings"])
    state = torch.load(weights_file, weights_only=True)
    untrained = {k: v.detach().clone() for k, v in untrained_model(spec.tunnel, results["seed"]).state_dict().items()}
    run = TrainedRun(spec.tunnel, state, np.asarray(results["loss_curve_nats"]), {0: untrained, results["steps"]: state})
    return LongRun(tunnel=tunnel, settings=spec, results=results, run=run, weights_file=weights_file)


LONG_TIER = StoredResult(
    name="long_tier", chapter="bayesian_manifolds",
    about="Paper I's V = 20 bijection and a deeper, longer-trained HMM filter: trained weights and curves",
    files=tuple(f"{DATA_FOLDER}/{t}.{ext}" for t in TUNNELS for ext in ("json", "pt")),
    specs=SPECS, committed_scale="paper",
    expected={"fast": "2 jobs, under a minute", "paper": "2 jobs of 30-40 CPU-min each (resumable within a job)"},
    jobs=long_tier_jobs, assemble=assemble_long_tier, reader=_read_long_run)
