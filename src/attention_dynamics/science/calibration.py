"""Calibration against an exact posterior, in bits (Paper I's calibration metric; chapter 6).

Two definitions of "entropy error" circulate and the book names which it reports:

- the **per-sample entropy MAE**: mean over sequences and positions of ``|H(model) − H(Bayes)|``,
  the one the book reports as its headline number;
- the **curve MAE**: the entropy curves are first averaged over sequences, then compared position
  by position. By the triangle inequality it is never larger than the per-sample one.

Entropy error alone can be gamed (a wrong distribution with the right entropy scores zero), so
the book also reports KL(posterior ‖ model) in bits, per position and averaged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import stats

__all__ = [
    "LN2",
    "kl_divergence_bits",
    "soft_cross_entropy_nats",
    "CalibrationReport",
    "calibration_report",
]

LN2 = math.log(2.0)


def _as_tensor(x) -> torch.Tensor:
    return x.detach() if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))


def kl_divergence_bits(posterior: torch.Tensor | np.ndarray, model_log_probs: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Return KL(posterior ‖ model) in bits along the last axis (one value per distribution).

    ``model_log_probs`` are natural-log probabilities (e.g. ``log_softmax`` of logits), so a model
    that puts probability 0 where the posterior does not gives +inf, as it should.
    """
    p = _as_tensor(posterior).to(torch.float64)
    log_q = _as_tensor(model_log_probs).to(torch.float64)
    if p.shape != log_q.shape:
        raise ValueError(f"posterior {tuple(p.shape)} and model {tuple(log_q.shape)} must have the same shape")
    # Σ p (ln p − ln q); xlogy makes 0 · ln 0 = 0 and keeps 0 · (−inf) out of the sum.
    kl_nats = (torch.special.xlogy(p, p) - torch.where(p > 0, p * log_q, torch.zeros_like(p))).sum(-1)
    return kl_nats.clamp_min(0.0) / LN2


def soft_cross_entropy_nats(logits: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """Return the mean soft-target cross-entropy −Σ_c p_c ln q_c in nats (a scalar, differentiable).

    Its minimum over models is the mean posterior entropy; the excess is the mean KL(p ‖ q).
    """
    if logits.shape != target_probs.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(target_probs.shape)} must match")
    log_q = torch.log_softmax(logits, dim=-1)
    return -(target_probs.to(log_q.dtype) * log_q).sum(-1).mean()


@dataclass
class CalibrationReport:
    """Calibration of a model against the exact posterior, in bits.

    Scalars average over sequences and positions; ``*_by_position`` arrays ``(T,)`` average over
    sequences only. ``model_entropy_curve`` and ``bayes_entropy_curve`` are the mean entropies.
    """

    entropy_mae_bits: float
    curve_mae_bits: float
    kl_bits: float
    entropy_mae_by_position: np.ndarray
    kl_by_position: np.ndarray
    model_entropy_curve: np.ndarray
    bayes_entropy_curve: np.ndarray

    def as_dict(self) -> dict[str, float]:
        """Return the three scalar metrics as a dict (bits)."""
        return {"entropy_mae_bits": self.entropy_mae_bits, "curve_mae_bits": self.curve_mae_bits, "kl_bits": self.kl_bits}


def calibration_report(bayes_probs, model_log_probs) -> CalibrationReport:
    """Return the :class:`CalibrationReport` of model log-probabilities ``(B, T, C)`` vs the posterior ``(B, T, C)``."""
    log_q = _as_tensor(model_log_probs).to(torch.float64)
    p = _as_tensor(bayes_probs).to(torch.float64)
    if p.ndim != 3 or p.shape != log_q.shape:
        raise ValueError(f"expected (B, T, C) posterior and model log-probs, got {tuple(p.shape)} and {tuple(log_q.shape)}")
    h_model, h_bayes = stats.entropy(log_q.exp(), unit="bits"), stats.entropy(p, unit="bits")  # (B, T) each
    kl = kl_divergence_bits(p, log_q)  # (B, T)
    return CalibrationReport(
        entropy_mae_bits=float((h_model - h_bayes).abs().mean()),
        curve_mae_bits=float((h_model.mean(0) - h_bayes.mean(0)).abs().mean()),
        kl_bits=float(kl.mean()),
        entropy_mae_by_position=(h_model - h_bayes).abs().mean(0).numpy(),
        kl_by_position=kl.mean(0).numpy(),
        model_entropy_curve=h_model.mean(0).numpy(),
        bayes_entropy_curve=h_bayes.mean(0).numpy(),
    )
