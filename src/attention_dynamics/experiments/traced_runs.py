"""Chapter 8's runs: the sticky-chain head, chapter 6's bijection transformer and a plain PyTorch
encoder, each trained with its diagnostics traced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn

from ..diagnostics import DiagnosticsTrace, collapse_alarm, default_loss, diagnose, loss_falls_behind, traced_fit
from ..models.encoder import TorchCausalEncoder
from ..seeding import stream, torch_generator


#: Steps tracked densely while a run can still collapse.
EARLY = [1, 2, 3, 4, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50]
#: Chapter 8's settings per scale; the sticky-chain runs are the paper's (1000 full-batch steps on one
#: sequence of 2000).
SETTINGS: dict[str, dict[str, Any]] = {
    "fast": {
        "steps": 40,
        "mid_step": 20,
        "early_track": EARLY[:5],
        "track_every": 10,
        "snapshot_step": 5,
        "broken_routing_lr": 1000.0,
        "encoder_steps": 20,
        "window": 32,
        "tunnel_scale": "fast",
        "tunnel_seed": 0,
    },
    "book": {
        "steps": 1000,
        "mid_step": 500,
        "early_track": EARLY,
        "track_every": 50,
        "snapshot_step": 5,
        "broken_routing_lr": 1000.0,
        "encoder_steps": 200,
        "window": 40,
        "tunnel_scale": "book",
        "tunnel_seed": 0,
    },
    "paper": {
        "steps": 1000,
        "mid_step": 500,
        "early_track": EARLY,
        "track_every": 50,
        "snapshot_step": 5,
        "broken_routing_lr": 1000.0,
        "encoder_steps": 1000,
        "window": 40,
        "tunnel_scale": "paper",
        "tunnel_seed": 0,
    },
}


def chapter_jobs(cfg: Any, *, seed: int) -> dict[str, dict[str, Any]]:
    """Return chapter 8's runs as :func:`run_experiment` keyword sets, longest first (for :func:`training.map_parallel`).

    A healthy sticky-chain run (lr 0.1 everywhere) and a broken one (routing lr ``cfg.broken_routing_lr``),
    both tracked densely early on; chapter 6's bijection transformer; the paper's SGD and EM-like runs kept
    at the start, middle and end; and a plain ``nn.TransformerEncoder`` on bijection elimination.
    """
    from ..training.schedules import Schedule

    broken = Schedule("broken_routing", f"broken: routing lr {cfg.broken_routing_lr:g}",
                      query_key_lr=cfg.broken_routing_lr, readout_lr=0.1, value_lr=0.1)
    tracked = sorted(set(cfg.early_track) | set(range(0, cfg.steps, cfg.track_every)))
    snapshots = [0, cfg.mid_step, cfg.steps]
    sticky = {"kind": "sticky_chain", "seed": seed, "steps": cfg.steps}
    return {
        "healthy": {**sticky, "schedule": "sgd_matched", "track_steps": tracked,
                    "keep_steps": [cfg.snapshot_step, cfg.steps], "label": "healthy: lr 0.1 everywhere"},
        "broken": {**sticky, "schedule": broken, "track_steps": tracked, "keep_steps": [cfg.snapshot_step, cfg.steps]},
        "tunnel": {"kind": "wind_tunnel", "scale": cfg.tunnel_scale, "seed": cfg.tunnel_seed},
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


# --------------------------------------------------------------------------------------------
# Chapter 8's tables, figures and claims, from its runs
# --------------------------------------------------------------------------------------------

#: The chapter's two sticky-chain schedules, in the order of its tables.
SCHEDULE_RUNS = ("sgd", "em_like")


def schedule_table(runs: dict[str, DiagnosticsTrace], snapshots: Sequence[int]):
    """Return a DataFrame of the sticky-chain head's metrics at ``snapshots`` under both schedules."""
    import pandas as pd

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


def plot_routing_by_symbol(runs: dict[str, DiagnosticsTrace], snapshots: Sequence[int]):
    """Draw who reads whom (attention by symbol, in excess of uniform) for both schedules at ``snapshots``."""
    from .. import plotting
    from ..diagnostics import plot_routing_matrix

    fig, axes = plotting.new_figure(len(snapshots), len(SCHEDULE_RUNS), width=3.3, height=3.0)
    excess = {(n, s): runs[n].at(s).specializations[0] for n in SCHEDULE_RUNS for s in snapshots}
    vmax = max(np.abs(x.routing_matrix - x.chance_routing_matrix).max() for x in excess.values())
    for row, name in enumerate(SCHEDULE_RUNS):
        for col, step in enumerate(snapshots):
            plot_routing_matrix(excess[(name, step)], ax=axes[row, col], kind="excess", vmax=vmax,
                                title=f"{runs[name].label}\nstep {step}", key_name="symbol carried by key",
                                query_name="symbol carried by query")
    fig.suptitle("Who reads whom: attention by symbol, in excess of uniform attention")
    return fig


def record_schedule_claims(runs: dict[str, DiagnosticsTrace], *, steps: int, mid_step: int,
                           run_params: dict[str, Any]):
    """Record the ledger claims of the SGD and EM-like runs; return a DataFrame of their routing stability."""
    import pandas as pd

    from .. import claims
    from ..diagnostics import routing_stability

    stability = {name: (routing_stability(runs[name].at(0), runs[name].at(mid_step))[0],
                        routing_stability(runs[name].at(mid_step), runs[name].at(steps))[0])
                 for name in SCHEDULE_RUNS}
    for name in SCHEDULE_RUNS:
        start, end = runs[name].at(0).heads[0].metrics, runs[name].at(steps).heads[0].metrics
        spec = runs[name].at(steps).specializations[0]
        params = {**run_params, "schedule": name}
        claims.record(f"diagnostics.{name}_final_norm_entropy", end.normalized_attention_entropy, unit="",
                      description=f"mean H(α_i)/log n_i of the sticky-chain head after {steps} steps ({name})",
                      params=params)
        claims.record(f"diagnostics.{name}_final_mi_nats", spec.mutual_information_nats, unit="nats",
                      params=params,
                      description=f"I(query symbol; key symbol) under the head's attention after {steps} steps "
                                  f"({name})")
        claims.record(f"diagnostics.{name}_final_value_pc1", end.value_pc1_fraction, unit="fraction of variance",
                      params=params,
                      description=f"variance share of the values' first principal component after {steps} steps "
                                  f"({name})")
        claims.glue(f"diagnostics.{name}_routing_signal_growth", end.routing_gradient_norm / start.routing_gradient_norm)
        claims.record(f"diagnostics.{name}_routing_tv_first_half", stability[name][0].attention_tv, unit="",
                      params=params,
                      description=f"mean total variation between attention rows at steps 0 and {mid_step} ({name})")
        claims.record(f"diagnostics.{name}_value_change_first_half", stability[name][0].value_relative_change,
                      unit="", params=params,
                      description=f"‖V(step {mid_step}) − V(0)‖ / ‖V(0)‖ of the value vectors ({name})")
    claims.glue("diagnostics.em_like_final_mi_chance_nats",
                runs["em_like"].at(steps).specializations[0].chance_mutual_information_nats)
    claims.glue("diagnostics.initial_value_pc1", runs["em_like"].at(0).heads[0].metrics.value_pc1_fraction)
    return pd.DataFrame({
        runs[n].label: {"TV 0→mid": a.attention_tv, "TV mid→end": b.attention_tv,
                        "top key kept 0→mid": a.top_key_agreement, "top key kept mid→end": b.top_key_agreement,
                        "ΔV 0→mid": a.value_relative_change, "ΔV mid→end": b.value_relative_change}
        for n, (a, b) in stability.items()
    }).T.map(lambda v: f"{v:.3g}")


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


def _symlog_panels(axes, titles, xmax: int, xlabel: str) -> None:
    for ax, (title, ylabel) in zip(axes, titles):
        ax.set(xscale="symlog", xlabel=xlabel, title=title, ylabel=ylabel, xlim=(0, xmax))


def plot_healthy_vs_broken(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, reading: AlarmReading, steps: int):
    """Draw loss, attention entropy, starved keys and routing signal of both runs, with the alarm and the fall-behind step."""
    from .. import plotting

    fig, axes = plotting.new_figure(4, width=3.1, height=2.9)
    for run, color in ((healthy, plotting.schedule_color("sgd_matched")), (broken, plotting.PALETTE[3])):
        axes[0].plot(np.arange(steps), run.losses, color=color, label=run.label)
        for ax, key in zip(axes[1:], ("normalized_attention_entropy", "starved_fraction", "routing_gradient_norm")):
            ax.plot(run.steps, run.metric(key), color=color, marker=".", ms=3)
    _symlog_panels(axes, [("training loss", "nats"), ("attention entropy", "H(α)/log n"),
                          ("starved keys", "fraction of keys"), ("routing signal", "‖∂L/∂S‖ (nats)")],
                   steps, "step (symlog)")
    for ax in axes:
        if reading.alarm is not None:
            ax.axvline(reading.alarm, color=plotting.PALETTE[3], ls="--", lw=1)
        ax.axvline(reading.behind_or_end, color="#555555", ls=":", lw=1)
    axes[3].set_yscale("log")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2)
    fig.suptitle("Healthy vs broken routing: dashed = the diagnostics' alarm, dotted = the loss falls behind for good")
    return fig


def record_alarm_claims(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, reading: AlarmReading, *, steps: int,
                        params: dict[str, Any]) -> None:
    """Record the ledger claims of the healthy and broken runs: the alarm, its lead over the loss, final states."""
    from .. import claims

    alarm, behind_or_end = reading.alarm, reading.behind_or_end
    at_alarm = broken.metrics[list(broken.steps).index(alarm)][0] if alarm is not None else None
    claims.record("diagnostics.broken_alarm_step", alarm, unit="steps", params=params,
                  description="first recorded step at which the broken run's attention has collapsed (entropy or "
                              "starved keys)")
    claims.record("diagnostics.broken_loss_behind_step", behind_or_end, unit="steps", params=params,
                  description="first step from which the broken run's training loss stays above the healthy run's "
                              "(the number of steps if it is not behind at the end)")
    claims.record("diagnostics.alarm_lead_steps", behind_or_end - alarm, unit="steps", lower=1, params=params,
                  description="steps by which the diagnostics flag the broken run before its loss falls behind "
                              "for good (target: the matrices come first)")
    claims.record("diagnostics.broken_starved_at_alarm", at_alarm["starved_fraction"], unit="fraction of keys",
                  params=params, description="share of starved keys in the broken run at the alarm step")
    claims.record("diagnostics.broken_entropy_at_alarm", at_alarm["normalized_attention_entropy"], unit="",
                  params=params, description="normalized attention entropy of the broken run at the alarm step")
    ahead = float(np.mean(broken.losses[:behind_or_end] < healthy.losses[:behind_or_end]))
    claims.record("diagnostics.broken_ahead_fraction", ahead, unit="fraction of steps", params=params,
                  description="share of the steps before the loss falls behind at which the broken run's loss is "
                              "the lower one")
    for name, run in (("healthy", healthy), ("broken", broken)):
        claims.record(f"diagnostics.{name}_final_loss", run.metric("loss")[-1], unit="nats", params=params,
                      description=f"training loss of the {name} run after {steps} steps")
        claims.record(f"diagnostics.{name}_final_routing_signal", run.metric("routing_gradient_norm")[-1],
                      unit="nats", params=params, description=f"‖∂L/∂S‖ of the {name} run after {steps} steps")
        claims.record(f"diagnostics.{name}_final_starved", run.metric("starved_fraction")[-1],
                      unit="fraction of keys", params=params,
                      description=f"share of starved keys in the {name} run after {steps} steps")
    claims.glue("diagnostics.healthy_final_mi_nats", healthy.at(steps).specializations[0].mutual_information_nats)


def plot_collapsed_heads(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, step: int, window: int):
    """Draw both runs' attention, compatibility and advantage matrices at ``step`` over the first ``window`` positions."""
    from .. import plotting
    from ..diagnostics import plot_head

    first = slice(0, window)  # early queries see few keys, so a collapsed row's one key is in the picture
    fig, axes = plotting.new_figure(3, 2, width=3.5, height=3.1)
    for row, run in enumerate((healthy, broken)):
        plot_head(run.at(step).heads[0], queries=first, keys=first, axes=axes[row])
        axes[row, 0].set_title(f"{run.label}\n" + axes[row, 0].get_title())
    fig.suptitle(f"Step {step}, the first {window} positions: collapsed attention has no advantage signal")
    return fig


def plot_tunnel_trace(tunnel: DiagnosticsTrace, floor_nats: float):
    """Draw chapter 6's bijection transformer diagnosed at its checkpoints: loss, entropy, routing signal, MI by head."""
    from .. import plotting

    fig, axes = plotting.new_figure(4, width=3.1, height=2.9)
    axes[0].plot(tunnel.steps, tunnel.metric("loss"), color=plotting.PALETTE[0], marker=".", ms=3)
    axes[0].axhline(floor_nats, color="#555555", ls="--", lw=1, label="Bayes floor")
    axes[0].legend()
    for h in range(len(tunnel.metrics[0])):
        name = tunnel.at(tunnel.steps[-1]).heads[h].name
        color = plotting.PALETTE[h % len(plotting.PALETTE)]
        for ax, key in zip(axes[1:], ("normalized_attention_entropy", "routing_gradient_norm", "specialization_mi_nats")):
            ax.plot(tunnel.steps, tunnel.metric(key, head=h), color=color, marker=".", ms=3, label=name)
    axes[3].plot(tunnel.steps, tunnel.metric("specialization_chance_mi_nats"), color="#555555", ls="--", lw=1,
                 label="chance")
    _symlog_panels(axes, [("probe loss", "nats"), ("attention entropy", "H(α)/log n"),
                          ("routing signal", "‖∂L/∂S‖ (nats)"), ("routing by token type", "mutual information (nats)")],
                   tunnel.steps[-1], "training step (symlog)")
    axes[2].set_yscale("log")
    axes[3].legend(fontsize=8)
    fig.suptitle("Chapter 6's bijection transformer, diagnosed at its checkpoints")
    return fig


def record_tunnel_claims(tunnel: DiagnosticsTrace, *, floor_nats: float, params: dict[str, Any]):
    """Record the ledger claims of the diagnosed wind-tunnel transformer; return its final diagnostics."""
    from .. import claims
    from ..diagnostics import routing_stability

    kept = sorted(tunnel.kept)
    mid, end = tunnel.at(kept[1]), tunnel.at(kept[-1])
    stability = routing_stability(mid, end)
    claims.glue("diagnostics.tunnel_floor", floor_nats)
    claims.glue("diagnostics.tunnel_mid_step", kept[1])
    claims.glue("diagnostics.tunnel_end_step", kept[-1])
    claims.record("diagnostics.tunnel_final_loss", end.loss, unit="nats", params=params,
                  description="soft-target cross-entropy of chapter 6's bijection transformer on its probe batch, "
                              "end of training")
    reading = [s.routing_matrix[0, 1] for s in end.specializations]  # key-token queries → value tokens
    best, least = int(np.argmax(reading)), int(np.argmin(reading))
    claims.glue("diagnostics.tunnel_best_head", end.heads[best].name)
    claims.glue("diagnostics.tunnel_least_head", end.heads[least].name)
    claims.glue("diagnostics.tunnel_least_value_reading", reading[least])
    claims.record("diagnostics.tunnel_value_reading", reading[best], unit="attention mass", params=params,
                  description="largest mean attention mass, over heads, that key-token queries put on value tokens "
                              "(end of training)")
    claims.glue("diagnostics.tunnel_value_reading_chance", end.specializations[best].chance_routing_matrix[0, 1])
    claims.record("diagnostics.tunnel_routing_tv_mid_to_end", max(x.attention_tv for x in stability), unit="",
                  params=params,
                  description="largest over heads of the mean total variation between attention rows at the middle "
                              "and the last checkpoint")
    claims.record("diagnostics.tunnel_value_change_mid_to_end", min(x.value_relative_change for x in stability),
                  unit="", params=params, description="smallest over heads of ‖V(end) − V(mid)‖ / ‖V(mid)‖")
    return end


def record_encoder_claims(trace: DiagnosticsTrace, *, steps: int, params: dict[str, Any]) -> None:
    """Record the ledger claims of the plain ``nn.TransformerEncoder`` after ``steps`` steps."""
    from .. import claims

    end = trace.at(steps)
    claims.record("diagnostics.encoder_final_loss", end.loss, unit="nats", params=params,
                  description="cross-entropy at the key positions of the nn.TransformerEncoder on held-out "
                              "bijection sequences")
    value_reading = [s.routing_matrix[0, 1] for s in end.specializations]  # key-token queries → value tokens
    value_chance = [s.chance_routing_matrix[0, 1] for s in end.specializations]
    best = int(np.argmax(np.array(value_reading) - np.array(value_chance)))
    claims.glue("diagnostics.encoder_best_head", end.heads[best].name)
    claims.record("diagnostics.encoder_best_value_reading", value_reading[best], unit="attention mass",
                  params=params,
                  description="largest mean attention mass, over heads, that key-token queries put on value tokens")
    claims.glue("diagnostics.encoder_value_reading_chance", value_chance[best])
