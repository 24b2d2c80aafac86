"""Chapter 8's runs: the sticky-chain head, chapter 6's bijection transformer and a plain PyTorch encoder, each
trained with its diagnostics traced, and the alarm read off the healthy and broken runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

from ...core.seeding import stream, torch_generator
from ...diagnostics import (
    DiagnosticsTrace,
    collapse_alarm,
    default_loss,
    diagnose,
    loss_falls_behind,
    traced_fit,
    verify_against_autograd,
)
from ...models import CausalTransformer
from ...models.encoder import TorchCausalEncoder
from ...models.single_head import SingleHeadModule, initial_head
from ...science import calibration
from ...tasks import bijection, sticky_chain
from ...training.schedules import Schedule, get_schedule, make_backward, make_optimizer
from ...training.wind_tunnels import BIJECTION_TUNNELS, bijection_probe_batch, train_bijection
from .settings import DiagnosticsSettings

__all__ = [
    "chapter_jobs",
    "sticky_chain_trace",
    "wind_tunnel_trace",
    "EXPERIMENTS",
    "run_experiment",
    "bijection_training_targets",
    "train_torch_encoder_on_bijection",
    "SCHEDULE_RUNS",
    "schedule_table",
    "AlarmReading",
    "read_alarm",
]


def chapter_jobs(cfg: DiagnosticsSettings, *, seed: int) -> dict[str, dict[str, Any]]:
    """Return chapter 8's runs as :func:`run_experiment` keyword sets, longest first (for :func:`training.map_parallel`).

    A healthy sticky-chain run (lr 0.1 everywhere) and a broken one (routing lr ``cfg.broken_routing_lr``),
    both tracked densely early on; chapter 6's bijection transformer; the paper's SGD and EM-like runs kept
    at the start, middle and end; and a plain ``nn.TransformerEncoder`` on bijection elimination.
    """

    broken = Schedule("broken_routing", f"broken: routing lr {cfg.broken_routing_lr:g}",
                      query_key_lr=cfg.broken_routing_lr, readout_lr=0.1, value_lr=0.1)
    tracked = sorted(set(cfg.early_track) | set(range(0, cfg.steps, cfg.track_every)))
    snapshots = [0, cfg.mid_step, cfg.steps]
    sticky = {"kind": "sticky_chain", "seed": seed, "steps": cfg.steps}
    return {
        "healthy": {**sticky, "schedule": "sgd_matched", "track_steps": tracked,
                    "keep_steps": [cfg.snapshot_step, cfg.steps], "label": "healthy: lr 0.1 everywhere"},
        "broken": {**sticky, "schedule": broken, "track_steps": tracked, "keep_steps": [cfg.snapshot_step, cfg.steps]},
        "tunnel": {"kind": "wind_tunnel", "scale": cfg.tunnel_scale, "seed": cfg.tunnel_seed,
                   "checkpoints": cfg.tunnel_checkpoints, "n_probe": cfg.tunnel_probe},
        "sgd": {**sticky, "schedule": "sgd", "keep_steps": snapshots},
        "em_like": {**sticky, "schedule": "em_like", "keep_steps": snapshots},
        "encoder": {"kind": "torch_encoder", "V": 8, "L": 8, "steps": cfg.encoder_steps, "seed": seed,
                    "track_steps": [0], "keep_steps": [0, cfg.encoder_steps]},
    }


def sticky_chain_trace(
    schedule: Any = "sgd",
    *,
    seed: int = 42,
    steps: int = 1000,
    track_steps: Sequence[int] = (),
    keep_steps: Sequence[int] = (),
    kind: str = "reference",
    label: str | None = None,
) -> DiagnosticsTrace:
    """Return the :class:`DiagnosticsTrace` of the paper's sticky-chain head trained with ``schedule``.

    The run is chapter 5's: data and initial weights
    from ``seed``, full batch, the closed-form engine, a schedule of
    :mod:`attention_dynamics.training.schedules` (a name or a ``Schedule``). The diagnostics run on the
    training sequence, with queries and keys labelled by the symbol their input carries
    (y_{t−1}), so the specialization summary says which symbol's values serve which symbol's
    queries. Importable, so that :func:`attention_dynamics.training.map_parallel` can run several.
    """

    sched = get_schedule(schedule)
    data = sticky_chain.make_sticky_chain_data(seed, kind=kind)
    model = SingleHeadModule(initial_head(seed))
    symbols = data.previous_symbols
    return traced_fit(
        model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, sched),
        backward=make_backward(sched), diagnose_inputs=data.x, diagnose_targets=data.y,
        track_steps=track_steps, keep_steps=keep_steps, label=label or sched.label,
        query_labels=symbols, key_labels=symbols, orthogonality_labels=symbols,
    )


def wind_tunnel_trace(scale: str = "book", *, seed: int = 0, checkpoints: int = 30, n_probe: int = 256,
                      keep_steps: Sequence[int] | None = None) -> DiagnosticsTrace:
    """Return the :class:`DiagnosticsTrace` of chapter 6's bijection transformer, diagnosed at its checkpoints.

    The model, settings and training are chapter 6's (:data:`~attention_dynamics.training.wind_tunnels.BIJECTION_TUNNELS`
    at ``scale``, trained with ``seed`` keeping ``checkpoints`` checkpoints); every checkpoint is diagnosed on chapter 6's
    probe batch (``n_probe`` sequences) with the
    soft-target cross-entropy at the key positions. Queries and keys are labelled by token type
    (0 key token, 1 value token) and key orthogonality is measured between the mean keys of the
    tokens. ``keep_steps`` defaults to the first, middle and last checkpoints.
    """

    settings = BIJECTION_TUNNELS[scale]
    run = train_bijection(settings, seed=seed, checkpoints=checkpoints)
    probe = bijection_probe_batch(settings, seed=seed, n=n_probe)
    token_type = (probe.tokens >= settings.V).long()  # (B, T): 0 key token, 1 value token

    def loss_fn(logits: torch.Tensor, posterior: torch.Tensor) -> torch.Tensor:
        return calibration.soft_cross_entropy_nats(logits[:, 0::2], posterior.to(logits.dtype))  # key positions

    steps = sorted(run.checkpoints)
    keep = set(keep_steps) if keep_steps is not None else {steps[0], steps[len(steps) // 2], steps[-1]}
    metrics, kept = [], {}
    for step in steps:
        diag = diagnose(run.model(step), probe.tokens, probe.posterior, loss_fn=loss_fn, query_labels=token_type,
                        key_labels=token_type, orthogonality_labels=probe.tokens)
        metrics.append([{**row, "loss": diag.loss} for row in diag.metrics()])
        if step in keep:
            kept[step] = diag
    return DiagnosticsTrace(label="chapter 6's bijection transformer", losses=run.losses,
                            steps=np.array(steps, dtype=int), metrics=metrics, kept=kept)


#: The runs :func:`run_experiment` knows by name.
EXPERIMENTS = ("sticky_chain", "wind_tunnel", "torch_encoder")


def run_experiment(kind: str, **kwargs: Any) -> Any:
    """Return the result of one of chapter 8's runs by name (so one ``map_parallel`` call can mix them).

    ``"sticky_chain"`` → :func:`sticky_chain_trace`, ``"wind_tunnel"`` → :func:`wind_tunnel_trace`,
    ``"torch_encoder"`` → :func:`train_torch_encoder_on_bijection`; ``kwargs`` go to that function.
    """
    runners = {"sticky_chain": sticky_chain_trace, "wind_tunnel": wind_tunnel_trace,
               "torch_encoder": train_torch_encoder_on_bijection}
    if kind not in runners:
        raise ValueError(f"unknown experiment {kind!r}; choose one of {', '.join(EXPERIMENTS)}")
    return runners[kind](**kwargs)


def bijection_training_targets(tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Return per-token targets ``(B, 2L−1)``: pi(key) at key positions, −100 (ignored) at value positions."""
    full = torch.full(tokens.shape, -100, dtype=torch.long)
    full[:, 0::2] = targets
    return full


def train_torch_encoder_on_bijection(
    *, V: int = 8, L: int = 8, steps: int = 300, batch_size: int = 64, seed: int = 0, lr: float = 3e-3,
    d_model: int = 64, n_heads: int = 4, n_layers: int = 2, track_steps: Sequence[int] = (),
    keep_steps: Sequence[int] = (), eval_size: int = 256,
) -> tuple[TorchCausalEncoder, DiagnosticsTrace, tuple[torch.Tensor, torch.Tensor]]:
    """Train a :class:`TorchCausalEncoder` on bijection elimination; return ``(model, trace, (tokens, targets))``.

    Fresh sequences every step (:mod:`attention_dynamics.tasks.bijection`), AdamW, mean
    cross-entropy at the key positions. The diagnostics run on a fixed evaluation batch of
    ``eval_size`` sequences (returned); queries and keys are labelled by token type (0 key token,
    1 value token) for the specialization summary, and key orthogonality is measured between the
    mean keys of the 2V tokens.
    """

    gen = torch_generator(stream(seed, "train"))  # training batches
    torch.manual_seed(stream(seed, "init"))  # the encoder's initial weights (global RNG)
    model = TorchCausalEncoder(bijection.vocab_size(V), V, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                               max_len=bijection.sequence_length(L))
    evaluation = bijection.sample_bijection_batch(eval_size, V, L, generator=torch_generator(stream(seed, "eval")))
    eval_targets = bijection_training_targets(evaluation.tokens, evaluation.targets)

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = bijection.sample_bijection_batch(batch_size, V, L, generator=gen)
        return b.tokens, bijection_training_targets(b.tokens, b.targets)

    def loss_fn(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return default_loss(m(batch[0]), batch[1])

    token_type = (evaluation.tokens >= V).long()  # 0 key token, 1 value token
    trace = traced_fit(model, batches, steps=steps, optimizer=torch.optim.AdamW(model.parameters(), lr=lr),
                       loss_fn=loss_fn, diagnose_inputs=evaluation.tokens, diagnose_targets=eval_targets,
                       track_steps=track_steps, keep_steps=keep_steps, label="nn.TransformerEncoder",
                       query_labels=token_type, key_labels=token_type, orthogonality_labels=evaluation.tokens)
    return model, trace, (evaluation.tokens, eval_targets)


#: The chapter's two sticky-chain schedules, in the order of its tables.
SCHEDULE_RUNS = ("sgd", "em_like")


def schedule_table(runs: dict[str, DiagnosticsTrace], snapshots: Sequence[int]):
    """Return a DataFrame of the sticky-chain head's metrics at ``snapshots`` under both schedules."""

    rows = []
    for name in SCHEDULE_RUNS:
        for step in snapshots:
            d = runs[name].at(step)
            m, s = d.heads[0].metrics, d.specializations[0]
            rows.append({
                "schedule": runs[name].label, "step": step, "loss (nats)": d.loss,
                "H/log n": m.normalized_attention_entropy, "‖∂L/∂S‖": m.routing_gradient_norm,
                "‖∂L/∂V‖": m.value_gradient_norm, "starved": m.starved_fraction,
                "key |cos| / random": m.key_orthogonality_ratio, "value PC1": m.value_pc1_fraction,
                "value dim": m.value_effective_dimension, "MI (nats)": s.mutual_information_nats,
                "MI chance": s.chance_mutual_information_nats,
            })
    return pd.DataFrame(rows).set_index(["schedule", "step"]).map(lambda v: f"{v:.3g}")


@dataclass
class AlarmReading:
    """When the diagnostics flag the broken run (``alarm``) and when its loss falls behind for good.

    ``behind_or_end``: the first step from which the broken run's loss stays above the healthy run's,
    or the number of steps if it is not behind at the end.
    """

    alarm: int | None
    behind_or_end: int


def read_alarm(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, steps: int) -> AlarmReading:
    """Return the :class:`AlarmReading` of a broken run against a healthy one."""
    behind = loss_falls_behind(broken.losses, healthy.losses)
    return AlarmReading(collapse_alarm(broken), behind if behind is not None else steps)


def autograd_checks(seed: int, generator) -> dict[str, Any]:
    """Return the three checks of the diagnostics against autograd (float64): an ``nn.TransformerEncoder`` and the
    package's :class:`~attention_dynamics.models.CausalTransformer` (2 layers × 4 heads) on 16 bijection sequences
    (V = L = 8, drawn from ``generator``), and the sticky-chain head at initialisation on the seed's sequence."""
    batch = bijection.sample_bijection_batch(16, 8, 8, generator=generator)  # 16 sequences, V = L = 8
    inputs = batch.tokens  # (16, 15) token ids
    targets = bijection_training_targets(batch.tokens, batch.targets)  # (16, 15)
    torch.manual_seed(seed)
    encoder = TorchCausalEncoder(16, 8, d_model=32, n_heads=4, n_layers=2, max_len=15).double()
    transformer = CausalTransformer(n_out=8, vocab_size=16, d_model=32, n_layers=2, n_heads=4, max_len=15).double()
    chain = sticky_chain.make_sticky_chain_data(seed)  # x (1999, 20), y (1999,)
    return {
        "torch_mha": verify_against_autograd(encoder, inputs, targets),
        "probes": verify_against_autograd(transformer, inputs, targets),
        "single_head": verify_against_autograd(initial_head(seed, torch.float64), chain.x.double(), chain.y),
    }
