"""Chapter 8's runs: the sticky-chain head, chapter 6's bijection transformer and a plain PyTorch
encoder, each trained with its diagnostics traced.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn

from ..diagnostics import DiagnosticsTrace, default_loss, diagnose, traced_fit
from ..models.encoder import TorchCausalEncoder
from ..seeding import stream, torch_generator


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

    The run is chapter 5's (:mod:`attention_dynamics.experiments.em_vs_sgd`): data and initial weights
    from ``seed``, full batch, the closed-form engine, a schedule of
    :mod:`attention_dynamics.training.schedules` (a name or a ``Schedule``). The diagnostics run on the
    training sequence, with queries and keys labelled by the symbol their input carries
    (y_{t−1}), so the specialization summary says which symbol's values serve which symbol's
    queries. Importable, so that :func:`attention_dynamics.training.map_parallel` can run several.
    """
    from ..tasks import sticky_chain
    from ..training.head_engine import SingleHeadModule
    from ..training.schedules import get_schedule, make_backward, make_optimizer
    from .em_vs_sgd import initial_head

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


def wind_tunnel_trace(scale: str = "book", *, seed: int = 0, keep_steps: Sequence[int] | None = None) -> DiagnosticsTrace:
    """Return the :class:`DiagnosticsTrace` of chapter 6's bijection transformer, diagnosed at its checkpoints.

    The model, settings and training are chapter 6's (:func:`attention_dynamics.experiments.wind_tunnel.train_bijection`
    at ``scale`` with ``seed``); every checkpoint is diagnosed on chapter 6's probe batch with the
    soft-target cross-entropy at the key positions. Queries and keys are labelled by token type
    (0 key token, 1 value token) and key orthogonality is measured between the mean keys of the
    tokens. ``keep_steps`` defaults to the first, middle and last checkpoints.
    """
    from .. import calibration
    from . import wind_tunnel

    settings = wind_tunnel.SETTINGS[scale]
    run = wind_tunnel.train_bijection(settings, seed=seed, checkpoints=True)
    probe = wind_tunnel.bijection_probe_batch(settings, seed=seed)
    token_type = (probe.tokens >= settings["V"]).long()  # (B, T): 0 key token, 1 value token

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
    from ..tasks import bijection

    gen = torch_generator(stream(seed, "init"))  # training batches
    torch.manual_seed(stream(seed, "init"))  # the encoder's initial weights (global RNG)
    model = TorchCausalEncoder(bijection.vocab_size(V), V, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                               max_len=bijection.sequence_length(L))
    evaluation = bijection.sample_bijection_batch(eval_size, V, L, generator=torch_generator(stream(seed, "data")))
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
