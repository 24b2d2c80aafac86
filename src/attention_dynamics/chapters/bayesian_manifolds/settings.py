"""Chapter 6's settings: the book's two wind tunnels at each scale (the library's
:data:`~attention_dynamics.training.wind_tunnels.BIJECTION_TUNNELS` and
:data:`~attention_dynamics.training.wind_tunnels.HMM_TUNNELS`, so that chapters 4 and 8 study exactly these models),
the held-out sets, and the bounds each claim is judged by, fixed before the runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...core.settings import ChapterSettings, resolve as _resolve
from ...training.wind_tunnels import BIJECTION_TUNNELS, HMM_TUNNELS, BijectionTraining, HMMTraining

__all__ = ["TRANSPORT_FRACTION", "HMM_PLATEAU_RATIO", "BIJECTION_TARGET_BITS", "HMM_ENTROPY_BOUND_BITS", "KEYS_ALL",
           "KEYS_KEY", "REDUCTION", "GEOMETRY_PLATEAU", "ManifoldsSettings", "SETTINGS", "SETTING_LABELS", "resolve", "scales_table"]

#: Belief transport shows when the HMM model's KL is at most this multiple of the context-blind level.
TRANSPORT_FRACTION = 0.6
#: The HMM KL ratio has plateaued when it moves by less than this over the last 20 % of training.
HMM_PLATEAU_RATIO = 0.05
#: The bijection's per-sample entropy-error target (bits); Paper I reports 0.007 at V = 20.
BIJECTION_TARGET_BITS = 0.01
#: The HMM's per-sample entropy-error bound (bits), below the context-blind predictor's; Paper I's v3 table: 0.049.
HMM_ENTROPY_BOUND_BITS = 0.05
KEYS_ALL = "key |cos|, layer 0, all positions"
KEYS_KEY = "key |cos|, layer 0, key tokens"
REDUCTION = "attention entropy reduction, first → last layer"
#: The largest move over the last 20 % of training at which a geometry measure counts as plateaued.
GEOMETRY_PLATEAU = {KEYS_ALL: 0.02, KEYS_KEY: 0.02, REDUCTION: 0.05}


@dataclass(frozen=True)
class ManifoldsSettings(ChapterSettings):
    """The bijection and HMM tunnels (model and training), ``n_checkpoints`` kept through training, ``n_eval``
    held-out sequences for calibration and ``n_probe`` for the geometry. A notebook overrides the tunnels' steps with
    ``bij_steps`` and ``hmm_steps``."""

    bijection: BijectionTraining = BIJECTION_TUNNELS["book"]
    hmm: HMMTraining = HMM_TUNNELS["book"]
    n_checkpoints: int = 30
    n_eval: int = 2000
    n_probe: int = 256

    def replace(self, **overrides: Any) -> "ManifoldsSettings":
        """Return a copy with ``overrides``: its own fields, or ``bij_steps`` / ``hmm_steps`` for the tunnels' steps."""
        bij_steps, hmm_steps = overrides.pop("bij_steps", None), overrides.pop("hmm_steps", None)
        out = super().replace(**overrides)
        if bij_steps is not None:
            out = dataclasses.replace(out, bijection=out.bijection.replace(steps=bij_steps))
        if hmm_steps is not None:
            out = dataclasses.replace(out, hmm=out.hmm.replace(steps=hmm_steps))
        return out


SETTINGS = {
    "fast": ManifoldsSettings(bijection=BIJECTION_TUNNELS["fast"], hmm=HMM_TUNNELS["fast"], n_checkpoints=8,
                              n_eval=200, n_probe=64),
    "book": ManifoldsSettings(),
    "paper": ManifoldsSettings(bijection=BIJECTION_TUNNELS["paper"], hmm=HMM_TUNNELS["paper"], n_checkpoints=40,
                               n_eval=5000),
}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> ManifoldsSettings:
    """Return chapter 6's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)


#: How the settings table names each setting (the fields of :class:`ManifoldsSettings` and of its two tunnels).
SETTING_LABELS = {
    "bijection.V": "bijection: values V",
    "bijection.L": "bijection: revealed pairs L",
    "bijection.d_model": "bijection: model width d",
    "bijection.n_layers": "bijection: layers",
    "bijection.n_heads": "bijection: heads",
    "bijection.steps": "bijection: training steps",
    "bijection.batch": "bijection: batch size",
    "bijection.lr": "bijection: learning rate (AdamW)",
    "bijection.warmup_steps": "bijection: warm-up steps",
    "bijection.target": "bijection: training target",
    "hmm.n_states": "HMM: hidden states",
    "hmm.n_symbols": "HMM: symbols",
    "hmm.length": "HMM: training length K",
    "hmm.test_lengths": "HMM: test lengths",
    "hmm.d_model": "HMM: model width d",
    "hmm.n_layers": "HMM: layers",
    "hmm.n_heads": "HMM: heads",
    "hmm.steps": "HMM: training steps",
    "hmm.batch": "HMM: batch size",
    "hmm.lr": "HMM: learning rate (AdamW)",
    "hmm.warmup_steps": "HMM: warm-up steps",
    "hmm.grid": "HMM: grid the matrices are rounded to",
    "hmm.fused_adamw": "HMM: fused AdamW kernel",
    "n_checkpoints": "checkpoints kept through training",
    "n_eval": "held-out sequences (calibration)",
    "n_probe": "probe sequences (geometry)",
}


def scales_table() -> pd.DataFrame:
    """Return every setting (rows, labelled by :data:`SETTING_LABELS`) at every scale (columns)."""
    columns = {scale: dict(s.rows()) for scale, s in SETTINGS.items()}
    table = pd.DataFrame(columns).drop(index=["scale", "device"])
    return table.rename(index=lambda name: SETTING_LABELS.get(name, name)).rename_axis("setting")
