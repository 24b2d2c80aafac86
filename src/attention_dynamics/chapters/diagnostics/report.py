"""Chapter 8's ledger claims and glued numbers: the two schedules' routing and values, the alarm's lead over the
loss, chapter 6's transformer and the plain encoder."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...diagnostics import COLLAPSE_ENTROPY, COLLAPSE_STARVED, DiagnosticsTrace, routing_stability
from ...ledger import claims
from ...ledger.verdicts import VERDICTS, Verdict, reader_label
from ...tasks import bijection, sticky_chain
from ...training.schedules import get_schedule
from ...training.wind_tunnels import BIJECTION_TUNNELS
from .runs import SCHEDULE_RUNS, AlarmReading
from .settings import DiagnosticsSettings

__all__ = [
    "NORM_ENTROPY_CLAIMS",
    "MI_CLAIMS",
    "VALUE_PC1_CLAIMS",
    "ROUTING_TV_CLAIMS",
    "VALUE_CHANGE_CLAIMS",
    "FINAL_LOSS_CLAIMS",
    "ROUTING_SIGNAL_CLAIMS",
    "STARVED_CLAIMS",
    "ROUTING_GROWTH_GLUES",
    "SHARE_OF_WAY_GLUES",
    "POSITION_GLUES",
    "glue_settings",
    "glue_schedule_positions",
    "glue_frame_row",
    "record_schedule_claims",
    "record_alarm_claims",
    "record_tunnel_claims",
    "record_encoder_claims",
]


#: The claims of the paper's two schedules, by schedule (written out so that a search for an id finds them).
NORM_ENTROPY_CLAIMS = {"sgd": "diagnostics.sgd_final_norm_entropy", "em_like": "diagnostics.em_like_final_norm_entropy"}
MI_CLAIMS = {"sgd": "diagnostics.sgd_final_mi_nats", "em_like": "diagnostics.em_like_final_mi_nats"}
VALUE_PC1_CLAIMS = {"sgd": "diagnostics.sgd_final_value_pc1", "em_like": "diagnostics.em_like_final_value_pc1"}
ROUTING_TV_CLAIMS = {"sgd": "diagnostics.sgd_routing_tv_first_half", "em_like": "diagnostics.em_like_routing_tv_first_half"}
VALUE_CHANGE_CLAIMS = {"sgd": "diagnostics.sgd_value_change_first_half",
                       "em_like": "diagnostics.em_like_value_change_first_half"}
#: The claims of the healthy and the broken run, by run.
FINAL_LOSS_CLAIMS = {"healthy": "diagnostics.healthy_final_loss", "broken": "diagnostics.broken_final_loss"}
ROUTING_SIGNAL_CLAIMS = {"healthy": "diagnostics.healthy_final_routing_signal",
                         "broken": "diagnostics.broken_final_routing_signal"}
STARVED_CLAIMS = {"healthy": "diagnostics.healthy_final_starved", "broken": "diagnostics.broken_final_starved"}
#: Glued numbers of the two schedules (not ledger claims), by schedule.
ROUTING_GROWTH_GLUES = {"sgd": "diagnostics.sgd_routing_signal_growth",
                        "em_like": "diagnostics.em_like_routing_signal_growth"}
SHARE_OF_WAY_GLUES = {"sgd": "diagnostics.sgd_share_of_way", "em_like": "diagnostics.em_like_share_of_way"}
POSITION_GLUES = {"sgd": "diagnostics.sgd_position", "em_like": "diagnostics.em_like_position"}


def glue_settings(cfg: DiagnosticsSettings, *, seed: int, positions: int) -> None:
    """Glue the settings the prose and its settings table state: the sticky-chain runs (``positions`` keys of the
    training sequence, the learning rates of the paper's two schedules and of the healthy and broken runs), the
    tracking and the alarm's thresholds, the figures' windows, and chapter 6's transformer's checkpoints and probe
    batch."""
    sgd, em_like, healthy = get_schedule("sgd"), get_schedule("em_like"), get_schedule("sgd_matched")
    claims.glue("diagnostics.seed", seed)
    claims.glue("diagnostics.steps", cfg.steps)
    claims.glue("diagnostics.mid_step", cfg.mid_step)
    claims.glue("diagnostics.positions", positions)
    claims.glue("diagnostics.n_symbols", sticky_chain.N_SYMBOLS)
    claims.glue("diagnostics.sgd_lr", sgd.value_lr)
    claims.glue("diagnostics.em_like_value_lr", em_like.value_lr)
    claims.glue("diagnostics.value_lr_ratio", em_like.value_lr / sgd.value_lr)
    claims.glue("diagnostics.healthy_lr", healthy.query_key_lr)
    claims.glue("diagnostics.broken_routing_lr", cfg.broken_routing_lr)
    claims.glue("diagnostics.alarm_entropy", COLLAPSE_ENTROPY)
    claims.glue("diagnostics.alarm_starved", COLLAPSE_STARVED)
    claims.glue("diagnostics.early_horizon", max(cfg.early_track))
    claims.glue("diagnostics.track_every", cfg.track_every)
    claims.glue("diagnostics.snapshot_step", cfg.snapshot_step)
    claims.glue("diagnostics.window", cfg.window)
    claims.glue("diagnostics.encoder_steps", cfg.encoder_steps)
    claims.glue("diagnostics.tunnel_seed", cfg.tunnel_seed)
    claims.glue("diagnostics.tunnel_checkpoints", cfg.tunnel_checkpoints)
    claims.glue("diagnostics.tunnel_probe", cfg.tunnel_probe)


def glue_schedule_positions(runs: dict[str, DiagnosticsTrace], *, floor_nats: float) -> None:
    """Glue where each schedule's final loss lies by chapter 5's measure: its share of the way from the context-blind
    loss down to the Bayes floor ``floor_nats``, as a fraction and as a phrase."""
    for name in SCHEDULE_RUNS:
        share = sticky_chain.share_of_way(runs[name].losses[-1], floor_nats)
        claims.glue(SHARE_OF_WAY_GLUES[name], share)
        claims.glue(POSITION_GLUES[name], sticky_chain.position_phrase(share))


def glue_frame_row(verdict: Verdict) -> None:
    """Glue chapter 4's finding on whether the frame settles before the precision, in the reader's words: its label
    (holds, holds in part, ...), its reason in one sentence, and each measure of settling with its own label."""
    grouped: dict[str, list[str]] = {}
    for name, v in sorted(verdict.by_group.items(), key=lambda kv: -VERDICTS.index(kv[1])):  # worst first
        grouped.setdefault(reader_label(v), []).append(name)
    by_measure = ", ".join(f"{label} ({'; '.join(names)})" for label, names in grouped.items())
    claims.glue("diagnostics.frame_row_label", verdict.label)
    claims.glue("diagnostics.frame_row_reason", verdict.reason or f"By measure: {by_measure}.")
    claims.glue("diagnostics.frame_row_by_measure", by_measure)


def record_schedule_claims(runs: dict[str, DiagnosticsTrace], *, steps: int, mid_step: int,
                           run_params: dict[str, Any]):
    """Record the ledger claims of the SGD and EM-like runs; return a DataFrame of their routing stability."""


    stability = {name: (routing_stability(runs[name].at(0), runs[name].at(mid_step))[0],
                        routing_stability(runs[name].at(mid_step), runs[name].at(steps))[0])
                 for name in SCHEDULE_RUNS}
    for name in SCHEDULE_RUNS:
        start, end = runs[name].at(0).heads[0].metrics, runs[name].at(steps).heads[0].metrics
        spec = runs[name].at(steps).specializations[0]
        params = {**run_params, "schedule": name}
        claims.record(NORM_ENTROPY_CLAIMS[name], end.normalized_attention_entropy, unit="",
                      description=f"mean H(α_i)/log n_i of the sticky-chain head after {steps} steps ({name})",
                      params=params)
        claims.record(MI_CLAIMS[name], spec.mutual_information_nats, unit="nats",
                      params=params,
                      description=f"I(query symbol; key symbol) under the head's attention after {steps} steps "
                                  f"({name})")
        claims.record(VALUE_PC1_CLAIMS[name], end.value_pc1_fraction, unit="fraction of variance",
                      params=params,
                      description=f"variance share of the values' first principal component after {steps} steps "
                                  f"({name})")
        claims.glue(ROUTING_GROWTH_GLUES[name], end.routing_gradient_norm / start.routing_gradient_norm)
        claims.record(ROUTING_TV_CLAIMS[name], stability[name][0].attention_tv, unit="",
                      params=params,
                      description=f"mean total variation between attention rows at steps 0 and {mid_step} ({name})")
        claims.record(VALUE_CHANGE_CLAIMS[name], stability[name][0].value_relative_change,
                      unit="", params=params,
                      description=f"‖V(step {mid_step}) − V(0)‖ / ‖V(0)‖ of the value vectors ({name})")
    claims.glue("diagnostics.em_like_final_mi_chance_nats",
                runs["em_like"].at(steps).specializations[0].chance_mutual_information_nats)
    claims.glue("diagnostics.initial_value_pc1", runs["em_like"].at(0).heads[0].metrics.value_pc1_fraction)
    frame = pd.DataFrame({
        runs[n].label: {"attention TV, first half": a.attention_tv, "attention TV, second half": b.attention_tv,
                        "top key kept, first half": a.top_key_agreement,
                        "top key kept, second half": b.top_key_agreement,
                        "values moved, first half": a.value_relative_change,
                        "values moved, second half": b.value_relative_change}
        for n, (a, b) in stability.items()
    }).T.map(lambda v: f"{v:.3g}")
    frame.index.name = "schedule"
    return frame


def record_alarm_claims(healthy: DiagnosticsTrace, broken: DiagnosticsTrace, reading: AlarmReading, *, steps: int,
                        params: dict[str, Any]) -> None:
    """Record the ledger claims of the healthy and broken runs: the alarm, its lead over the loss, final states."""

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
        claims.record(FINAL_LOSS_CLAIMS[name], run.metric("loss")[-1], unit="nats", params=params,
                      description=f"training loss of the {name} run after {steps} steps")
        claims.record(ROUTING_SIGNAL_CLAIMS[name], run.metric("routing_gradient_norm")[-1],
                      unit="nats", params=params, description=f"‖∂L/∂S‖ of the {name} run after {steps} steps")
        claims.record(STARVED_CLAIMS[name], run.metric("starved_fraction")[-1],
                      unit="fraction of keys", params=params,
                      description=f"share of starved keys in the {name} run after {steps} steps")
    claims.glue("diagnostics.healthy_final_mi_nats", healthy.at(steps).specializations[0].mutual_information_nats)


def record_tunnel_claims(tunnel: DiagnosticsTrace, *, floor_nats: float, params: dict[str, Any]):
    """Record the ledger claims of the diagnosed wind-tunnel transformer; return its final diagnostics."""

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
    """Record the ledger claims of the plain ``nn.TransformerEncoder`` after ``steps`` steps; glue its settings
    (``params``: V, L, lr, batch_size, d_model, eval_sequences) and its task's two reference losses."""

    claims.glue("diagnostics.encoder_V", params["V"])
    claims.glue("diagnostics.encoder_L", params["L"])
    claims.glue("diagnostics.encoder_lr", params["lr"])
    claims.glue("diagnostics.encoder_batch_size", params["batch_size"])
    claims.glue("diagnostics.encoder_d_model", params["d_model"])
    claims.glue("diagnostics.encoder_eval_sequences", params["eval_sequences"])
    claims.glue("diagnostics.encoder_bayes_floor", bijection.bayes_ce_floor_nats(params["V"], params["L"]))
    claims.glue("diagnostics.encoder_blind_loss", float(np.log(params["V"])))
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


#: The checks of the diagnostics against autograd: claim id, what is compared, and the model as the page names it.
AUTOGRAD_CHECKS = {
    "torch_mha": ("diagnostics.torch_mha_vs_autograd_rel_err",
                  "nn.TransformerEncoder (2 layers × 4 heads): laws through in_proj_weight vs autograd",
                  "PyTorch encoder (2 layers × 4 heads)"),
    "probes": ("diagnostics.probes_vs_autograd_rel_err",
               "CausalTransformer (2 layers × 4 heads): value and query laws vs autograd at the probes",
               "the book's transformer (2 layers × 4 heads)"),
    "single_head": ("diagnostics.single_head_vs_autograd_rel_err",
                    "sticky-chain head at init, T = 1999: advantage matrix vs −∂L/∂S by autograd",
                    "sticky-chain head at initialisation"),
}


def record_autograd_checks(checks: dict[str, Any], *, seed: int) -> pd.DataFrame:
    """Record each check's relative error (tolerance 1e-12), glue the largest, and return them as a table."""
    for name, check in checks.items():
        claim_id, described, _ = AUTOGRAD_CHECKS[name]
        claims.record(claim_id, check.relative_error, unit="", expected=0.0, tolerance=1e-12,
                      description=f"max abs error / max abs gradient, {described} (float64)",
                      params={"seed": seed, "dtype": "float64", "compared": check.compared})
    claims.glue("diagnostics.max_autograd_rel_err", max(c.relative_error for c in checks.values()))
    frame = pd.DataFrame({AUTOGRAD_CHECKS[name][2]: {"what is compared": c.compared,
                                                     "largest error": f"{c.max_abs_error:.1e}",
                                                     "relative to the largest gradient": f"{c.relative_error:.1e}"}
                          for name, c in checks.items()}).T
    frame.index.name = "model (float64)"
    return frame


def tunnel_params(cfg: DiagnosticsSettings, probe_sequences: int) -> dict[str, Any]:
    """Return chapter 6's transformer's parameters as its claims record them, after gluing its sizes."""
    t = BIJECTION_TUNNELS[cfg.tunnel_scale]
    claims.glue("diagnostics.tunnel_layers", t.n_layers)
    claims.glue("diagnostics.tunnel_heads", t.n_heads)
    claims.glue("diagnostics.tunnel_V", t.V)
    claims.glue("diagnostics.tunnel_vocab", 2 * t.V)
    return {"scale": cfg.tunnel_scale, "seed": cfg.tunnel_seed, "probe_sequences": probe_sequences, "V": t.V, "L": t.L,
            "bij_d_model": t.d_model, "bij_n_layers": t.n_layers, "bij_n_heads": t.n_heads, "bij_steps": t.steps}
