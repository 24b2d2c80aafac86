"""Frame versus precision on chapter 6's bijection transformer, over six seeds and three definitions (chapter 6's
stored result ``bijection_frame_definitions``).

Paper I reads the frame–precision dissociation as "attention patterns in place early while calibration keeps
improving". Chapter 6 reads it with its own rules on one seed; this result trains the chapter's bijection
transformer (its book settings: AdamW with warm-up and cosine decay) on six seeds, keeps ``n_checkpoints``
checkpoints (log-spaced early, linear late) and decides the order under three definitions, each giving per run a
frame step ``t_F`` and a precision step ``t_P``:

- ``path``: the first checkpoint from which at most 10 % of the whole path is still to go, every layer's attention
  rows at the key positions (mean total-variation distance between checkpoints) against every layer's value vectors
  (RMS distance): chapter 4's criterion;
- ``function``: the mean attention entropy at the key positions (bits, linear scale) against the KL divergence from
  the exact posterior (bits, log scale), each within 10 % of its total change from its end;
- ``similarity``: chapter 6's own rules: every layer's attention at least 95 % similar to its final one, for good,
  against the per-sample entropy error within 10 % of its total change on a log scale.

The share of seeds whose frame settles first decides each definition with its Clopper–Pearson interval
(:func:`~attention_dynamics.diagnostics.frame_order.order_share`). The freeze intervention is re-read from the stored
freeze runs (:func:`~attention_dynamics.ledger.frame_results.load_frame_freeze`) in
:mod:`~attention_dynamics.chapters.bayesian_manifolds.frame_definitions_report`. One job per seed
(``python -m attention_dynamics compute bijection_frame_definitions``); the chapter loads
``data/bijection_frame_definitions.json`` (:data:`BIJECTION_FRAME_DEFINITIONS`' ``load``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ...diagnostics.frame_order import attention_entropy_nats, order_share, paired_gap
from ...ledger.results import Job, StoredResult, save_results
from ...models.transformer import probe_activations
from ...science import calibration, geometry
from ...science.dynamics import attention_distance
from ...science.settling import path_settling_step, settle_step, stays_above_step
from ...training.wind_tunnels import BIJECTION_TUNNELS, BijectionTraining, bijection_probe_batch, train_bijection

__all__ = ["FILE", "TUNNEL_DEFINITIONS", "TunnelFrameSettings", "SETTINGS", "tunnel_run",
           "bijection_frame_definitions_job", "bijection_frame_definitions_jobs", "assemble_bijection_frame_definitions",
           "BIJECTION_FRAME_DEFINITIONS"]

#: The file the chapter loads.
FILE = "bijection_frame_definitions.json"
TUNNEL_DEFINITIONS = ("path", "function", "similarity")


@dataclass(frozen=True)
class TunnelFrameSettings:
    """Chapter 6's bijection transformer (``tunnel``: its model and training at the scale), the seeds, how many
    checkpoints are kept (log-spaced early, linear late), the probe batch and the settling fraction."""

    tunnel: BijectionTraining = BIJECTION_TUNNELS["book"]
    seeds: tuple[int, ...] = tuple(range(6))
    n_checkpoints: int = 200
    n_probe: int = 256
    fraction: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.tunnel, Mapping):  # from JSON
            object.__setattr__(self, "tunnel", BijectionTraining(**self.tunnel))
        if not isinstance(self.tunnel, BijectionTraining):
            raise ValueError(f"tunnel must be a BijectionTraining, got {type(self.tunnel).__name__}")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if self.n_checkpoints < 4 or self.n_probe < 1 or not self.seeds or not 0 < self.fraction < 1:
            raise ValueError("need n_checkpoints >= 4, n_probe >= 1, a seed, and fraction in (0, 1), got "
                             f"{self.n_checkpoints}, {self.n_probe}, {self.seeds}, {self.fraction}")


#: The sizes per scale: ``book`` (the committed file: chapter 6's book tunnel, six seeds), ``fast`` (the tests').
SETTINGS: dict[str, TunnelFrameSettings] = {
    "fast": TunnelFrameSettings(tunnel=BIJECTION_TUNNELS["fast"].replace(steps=60), seeds=(0, 1), n_checkpoints=12,
                                n_probe=32),
    "book": TunnelFrameSettings(),
}



def tunnel_run(seed: int, s: TunnelFrameSettings) -> dict[str, Any]:
    """Return one run's frame and precision measures at its checkpoints, and each definition's steps (JSON-ready).

    The run is chapter 6's bijection transformer (:func:`~attention_dynamics.training.wind_tunnels.train_bijection`)
    with ``n_checkpoints`` checkpoints, measured on its probe batch: the path increments of the attention rows and of
    the value vectors, the mean attention entropy (bits), the KL from the exact posterior and the per-sample entropy
    error (bits), and the smallest layer's similarity to its final attention.
    """
    run = train_bijection(s.tunnel, seed=seed, checkpoints=s.n_checkpoints)
    probe = bijection_probe_batch(s.tunnel, seed=seed, n=s.n_probe)
    steps = np.array(sorted(run.checkpoints))
    rows: list[tuple[list[torch.Tensor], torch.Tensor, float, float, float]] = []
    for step in steps:
        logits, layers = probe_activations(run.model(int(step)), probe.tokens)
        alpha = [lay["attn_weights"][:, :, 0::2].double() for lay in layers]  # (B, H, L, T) per layer
        values = torch.cat([lay["values"].double().flatten(1) for lay in layers], 1)  # (B, layers·H·T·d_head)
        entropy_bits = float(np.mean([attention_entropy_nats(a) for a in alpha])) / math.log(2.0)
        rep = calibration.calibration_report(probe.posterior, torch.log_softmax(logits[:, 0::2].double(), -1))
        rows.append((alpha, values, entropy_bits, rep.kl_bits, rep.entropy_mae_bits))
    frame_inc = [float(np.mean([attention_distance(a, b) for a, b in zip(r0[0], r1[0])])) for r0, r1 in zip(rows, rows[1:])]
    value_inc = [float(((r1[1] - r0[1]) ** 2).sum(-1).mean().sqrt()) for r0, r1 in zip(rows, rows[1:])]
    similarity = [min(geometry.attention_pattern_similarity(a, ref) for a, ref in zip(r[0], rows[-1][0])) for r in rows]
    entropy, kl, mae = (np.array([r[k] for r in rows]) for k in (2, 3, 4))
    f = s.fraction
    settle = {
        "path": {"frame": path_settling_step(steps, np.array(frame_inc), f),
                 "precision": path_settling_step(steps, np.array(value_inc), f)},
        "function": {"frame": settle_step(steps, entropy, fraction=f),
                     "precision": settle_step(steps, kl, fraction=f, log=True)},
        "similarity": {"frame": _step_or_end(stays_above_step(steps, np.array(similarity), 0.95), steps),
                       "precision": settle_step(steps, mae, fraction=f, log=True)},
    }
    return {"seed": int(seed), "optimiser": "adamw", "steps": steps.tolist(), "frame_path": frame_inc,
            "value_path": value_inc, "attention_entropy_bits": entropy.tolist(), "kl_bits": kl.tolist(),
            "entropy_mae_bits": mae.tolist(), "min_similarity": [float(x) for x in similarity],
            "final_train_loss": float(np.mean(run.losses[-20:])), "settle": settle}


def _step_or_end(step: int | None, steps: np.ndarray) -> int:
    return int(steps[-1]) if step is None else int(step)


def bijection_frame_definitions_job(seed: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return one job's output: :func:`tunnel_run` of ``seed`` with ``settings`` (a :class:`TunnelFrameSettings` as a
    dict)."""
    return tunnel_run(int(seed), TunnelFrameSettings(**settings))


def bijection_frame_definitions_jobs(scale: str, seeds: Sequence[int] | None = None) -> list[Job]:
    """Return one job per seed (``seeds`` instead of the scale's own)."""
    s = BIJECTION_FRAME_DEFINITIONS.spec(scale)
    settings = dataclasses.asdict(s)
    return [Job(f"seed{seed}", bijection_frame_definitions_job, {"seed": int(seed), "settings": settings},
                cost=float(s.tunnel.steps)) for seed in (s.seeds if seeds is None else seeds)]


def assemble_bijection_frame_definitions(scale: str, outputs: Mapping[str, Any], folder: Path) -> None:
    """Write ``bijection_frame_definitions.json``: settings, per definition the per-seed steps, the share of seeds whose
    frame settles first and the paired gap, and every run's curves."""
    runs = sorted(outputs.values(), key=lambda r: r["seed"])
    definitions = {}
    for d in TUNNEL_DEFINITIONS:
        frame = [r["settle"][d]["frame"] for r in runs]
        precision = [r["settle"][d]["precision"] for r in runs]
        definitions[d] = {"frame": frame, "precision": precision, **order_share(frame, precision),
                          "gap": paired_gap(frame, precision)}
    keep = ("seed", "steps", "attention_entropy_bits", "kl_bits", "entropy_mae_bits", "min_similarity",
            "final_train_loss")
    save_results({"about": "Frame versus precision on chapter 6's bijection transformer, three definitions; written "
                           "by `python -m attention_dynamics compute bijection_frame_definitions`.",
                  "scale": scale, "settings": dataclasses.asdict(BIJECTION_FRAME_DEFINITIONS.spec(scale)),
                  "seeds": [r["seed"] for r in runs],
                  "definitions": definitions, "runs": [{k: r[k] for k in keep} for r in runs]}, folder / FILE)


BIJECTION_FRAME_DEFINITIONS = StoredResult(
    name="bijection_frame_definitions", chapter="bayesian_manifolds",
    about="frame versus precision on chapter 6's bijection transformer: six seeds, 200 checkpoints, three definitions",
    files=(FILE,), specs=SETTINGS, committed_scale="book",
    expected={"fast": "2 jobs, under a minute", "book": "6 jobs (chapter 6's book tunnel, 2000 steps and 200 "
                                                       "checkpoints each, ~2 CPU-min each), ~12 CPU-min"},
    jobs=bijection_frame_definitions_jobs, assemble=assemble_bijection_frame_definitions)

