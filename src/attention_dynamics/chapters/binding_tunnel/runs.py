"""Chapter 9's runs on the binding tunnel, one job each (the stored result ``binding_tunnel`` runs them).

- :func:`learned_run`: the tunnel trained as it is, with checkpoints: its calibration (KL and per-sample entropy
  error against the exact posterior, on repeated and on new keys), the three readings of frame and precision, the
  attention each head puts on the answer's source through training, the advantage-routing law's predictions at
  initialisation, at the routing transition and at the end, and Paper I's geometry of the trained and the
  untrained model.
- :func:`control_run`: the same model with its routing removed (uniform attention) or frozen at initialisation, at
  the chapter's budget or longer: calibration and geometry.
- :func:`freeze_run`: routing frozen from step t on, the rest trained to the end (the causal reading of "frame
  before precision").
- :func:`schedule_run`: the paper's EM-like step (ten times the step on the value projections) against the plain
  one, with routing learned or frozen (the paper's speed-up metric reads their loss curves).
- :func:`two_hop_run`: the authors' binding task (key and value as separate tokens, a random function), learned
  or with uniform attention, at four times the budget.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import numpy as np
import torch

from ...diagnostics.mechanism_controls import paper_key_orthogonality
from ...diagnostics.routing_need import smoothed_loss_curve, tunnel_run
from ...diagnostics.tunnel_dynamics import (
    attention_on_source,
    frame_precision_readings,
    source_advantage,
    transition_step,
)
from ...diagnostics.wind_tunnel_geometry import geometry_summary, token_tunnel_geometry
from ...science import calibration, stats
from ...tasks import binding
from ...training import wind_tunnels
from .settings import EM_LIKE_VALUE_FACTOR, BindingTunnelSettings

__all__ = ["GEOMETRY_KEYS", "geometry_of", "calibration_of", "learned_run", "control_run", "freeze_run",
           "schedule_run", "two_hop_run"]

#: The geometry numbers kept per model (names of :func:`~attention_dynamics.diagnostics.wind_tunnel_geometry.geometry_summary`).
GEOMETRY_KEYS = ("key |cos|, layer 0, key tokens", "value PC1 share", "ρ(value PC1, entropy)",
                 "attention entropy reduction, first → last layer")


def _settings(settings: Mapping[str, Any]) -> BindingTunnelSettings:
    return BindingTunnelSettings(**{k: v for k, v in settings.items() if k not in ("device",)})


def geometry_of(model: torch.nn.Module, probe: binding.BindingBatch) -> dict[str, float]:
    """Return Paper I's geometry of a binding model on the probe batch: the book's key measure, the value manifold
    ordered by the exact posterior's entropy (content-dependent here), the attention-entropy fall, and Paper I's own
    key metric over the pair tokens' embeddings (signed mean off-diagonal cosine of W_K·e)."""
    entropy = stats.entropy(probe.posterior, unit="bits").reshape(-1).numpy()
    has_keys = any(bool(a.qkv.weight[a.qkv.weight.shape[1]: 2 * a.qkv.weight.shape[1]].abs().sum() > 0)
                   for a in model.attention_modules())  # uniform attention: W_K = 0, no key directions
    summary = geometry_summary(token_tunnel_geometry(model, probe.tokens, entropy, table=False, keys=has_keys))
    out = {k: float(summary[k]) for k in GEOMETRY_KEYS}
    V = probe.V
    ids = range(V, V + V * V) if probe.layout == "pair" else range(V, 2 * V)
    out["paper key signed cos"] = (float(paper_key_orthogonality(model, V, token_ids=ids)["signed"]) if has_keys
                                   else math.nan)
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def calibration_of(model: torch.nn.Module, batch: binding.BindingBatch) -> dict[str, float]:
    """Return the KL and per-sample entropy error (bits) of a binding model, overall and on repeated and new keys."""
    log_probs = wind_tunnels.binding_log_probs(model, batch)
    report = calibration.calibration_report(batch.posterior, log_probs)
    kl = calibration.kl_divergence_bits(batch.posterior, log_probs)
    return {"kl_bits": report.kl_bits, "entropy_mae_bits": report.entropy_mae_bits,
            "kl_bits_repeated": float(kl[batch.repeated].mean()), "kl_bits_new": float(kl[~batch.repeated].mean())}


def learned_run(seed: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return the measures of the binding tunnel trained as it is with ``seed`` (see the module docstring)."""
    s = _settings(settings)
    run = wind_tunnels.train_binding(s.tunnel, seed=int(seed), checkpoints=s.n_checkpoints)
    evaluation = wind_tunnels.binding_batch_for_eval(s.tunnel, seed=int(seed), n=s.n_eval)
    probe = wind_tunnels.binding_probe_batch(s.tunnel, seed=int(seed), n=s.n_probe)
    sources = binding.answer_source_positions(probe.keys)
    steps = sorted(run.checkpoints)
    readings = frame_precision_readings(run.model, steps, probe.tokens, probe.posterior)
    on_source = np.stack([attention_on_source(run.model(t), probe.tokens, sources) for t in steps])  # (n, layers, H)
    layer, head = np.unravel_index(int(np.argmax(on_source[-1])), on_source.shape[1:])
    transition = transition_step(steps, on_source[:, layer, head])
    moments = {"init": 0, "transition": transition, "end": steps[-1]}
    advantage = {name: source_advantage(run.model(t), probe.tokens, probe.posterior, sources, layer=int(layer),
                                        head=int(head)) for name, t in moments.items()}
    return {"seed": int(seed), "routing": "learned", "steps": s.tunnel.steps,
            **calibration_of(run.model(), evaluation),
            "untrained": calibration_of(run.model(0), evaluation),
            "readings": readings, "lookup_head": [int(layer), int(head)], "transition_step": int(transition),
            "attention_on_source": {"steps": steps, "lookup": on_source[:, layer, head].tolist(),
                                    "by_layer_max": on_source.max(-1).tolist()},
            "advantage": advantage, "moments": moments,
            "geometry": {"trained": geometry_of(run.model(), probe), "untrained": geometry_of(run.model(0), probe)},
            "final_train_loss": float(np.mean(run.losses[-100:])), "loss_curve": smoothed_loss_curve(run.losses)}


def control_run(seed: int, settings: Mapping[str, Any], routing: str, factor: int = 1) -> dict[str, Any]:
    """Return the calibration and geometry of the binding tunnel trained with ``routing`` (learned, frozen or uniform)
    for ``factor`` times the chapter's steps."""
    s = _settings(settings)
    tunnel = s.tunnel.replace(steps=s.tunnel.steps * int(factor))
    run = wind_tunnels.train_binding(tunnel, seed=int(seed), routing=routing)
    evaluation = wind_tunnels.binding_batch_for_eval(tunnel, seed=int(seed), n=s.n_eval)
    probe = wind_tunnels.binding_probe_batch(tunnel, seed=int(seed), n=s.n_probe)
    untrained = wind_tunnels.untrained_model(tunnel, int(seed))
    return {"seed": int(seed), "routing": routing, "factor": int(factor), "steps": tunnel.steps,
            **calibration_of(run.model(), evaluation), "untrained": calibration_of(untrained, evaluation),
            "geometry": geometry_of(run.model(), probe), "final_train_loss": float(np.mean(run.losses[-100:])),
            "loss_curve": smoothed_loss_curve(run.losses)}


def freeze_run(seed: int, settings: Mapping[str, Any], freeze_at: int) -> dict[str, Any]:
    """Return the calibration of the binding tunnel with its routing frozen from step ``freeze_at`` on."""
    s = _settings(settings)
    run = wind_tunnels.train_binding(s.tunnel, seed=int(seed), freeze_routing_at=int(freeze_at))
    evaluation = wind_tunnels.binding_batch_for_eval(s.tunnel, seed=int(seed), n=s.n_eval)
    return {"seed": int(seed), "freeze_at": int(freeze_at), **calibration_of(run.model(), evaluation)}


def schedule_run(seed: int, settings: Mapping[str, Any], routing: str) -> dict[str, Any]:
    """Return the loss curve and calibration of the binding tunnel with the EM-like step (value projections' step ×
    :data:`~attention_dynamics.chapters.binding_tunnel.settings.EM_LIKE_VALUE_FACTOR`), routing learned or frozen at
    initialisation (the plain step's curves are :func:`learned_run`'s and :func:`control_run`'s)."""
    s = _settings(settings)
    return tunnel_run("binding", dataclasses.asdict(s.tunnel), int(seed), routing,
                      value_lr_factor=EM_LIKE_VALUE_FACTOR, n_eval=s.n_eval)


def two_hop_run(seed: int, settings: Mapping[str, Any], routing: str) -> dict[str, Any]:
    """Return the calibration of the authors' two-hop binding task (``settings.two_hop``) trained with ``routing``."""
    s = _settings(settings)
    return tunnel_run("binding", dataclasses.asdict(s.two_hop), int(seed), routing, n_eval=s.n_eval)
