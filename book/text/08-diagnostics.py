# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@bd5744d4facf1222baf8f221bb100f658bc26e1b"

# %% [markdown] tags=[]
# # Diagnostics
#
# The paper ends its analysis with a practical suggestion (its Section 3, result 8 in our summary): the two
# matrices that organise the whole gradient analysis — the **compatibility matrix** $B$ and the
# **advantage matrix** — are also *diagnostics*. Read off a model during training, they show which values
# serve which queries, whether routing has settled, and whether it is still able to move at all. This
# chapter turns that suggestion into a tool, `attention_dynamics.diagnostics`, that anyone can point at a
# model: this book's models, the bare single head of the earlier chapters, or any PyTorch model built from
# `torch.nn.MultiheadAttention` (for example `nn.TransformerEncoderLayer`). It reads what it needs through
# hooks, without changing the model, and returns one result object with a plain-text summary and figures.
#
# We first check that the tool is exact — on a model it has never seen, its numbers agree with autograd to
# rounding error. Then we point it at the paper's sticky-chain head at initialisation, halfway and at the
# end of training, under plain SGD and the paper's EM-like schedule. Finally we break a run on purpose and
# show that the matrices flag the failure long before the training loss does.

# %% tags=["parameters"]
# Parameters (papermill): the defaults are what the book shows.
seed = 42  # the first seed of the paper's protocol
scale = "book"
device = "auto"  # the runs are small CPU jobs, the diagnostics run on the CPU
steps = None  # training steps of the sticky-chain runs (None: as the scale says)

# %% tags=["hide-input"]
import warnings

warnings.filterwarnings(
    "ignore", message="IProgress not found"
)  # tqdm's notebook check (no progress bars here)

import numpy as np
import pandas as pd
import torch

from attention_dynamics import claims, diagnostics, plotting, training
from attention_dynamics.training import schedules
from attention_dynamics.experiments import traced_runs, wind_tunnel
from attention_dynamics.models import CausalTransformer
from attention_dynamics.models.encoder import TorchCausalEncoder
from attention_dynamics.seeding import seed_everything
from attention_dynamics.settings import chapter_settings
from attention_dynamics.experiments.em_vs_sgd import initial_head
from attention_dynamics.tasks import bijection, sticky_chain

EARLY = [
    1,
    2,
    3,
    4,
    5,
    10,
    15,
    20,
    25,
    30,
    35,
    40,
    45,
    50,
]  # dense tracking while a run can still collapse
# the sticky-chain runs are the paper's (1000 full-batch steps on one sequence of 2000)
SETTINGS = {
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
cfg = chapter_settings(SETTINGS, scale, device=device, steps=steps)
generator = seed_everything(seed)
plotting.use_book_style()
cfg

# %% [markdown] tags=[]
# ## What the tool measures
#
# For one head with attention weights $\alpha_{ij}$ (query $i$, key $j$), values $v_j$ and the error signal
# $u_i = \partial L / \partial g_i$ at its context vector (chapter 1), the two matrices are
#
# ```{math}
# :label: eq-diag-compatibility
# B = U V^\top, \qquad b_{ij} = u_i \cdot v_j ,
# ```
#
# ```{math}
# :label: eq-diag-advantage
# A_{ij} = \alpha_{ij}\left(\mathbb{E}_{\alpha_i}[b] - b_{ij}\right) = -\frac{\partial L}{\partial s_{ij}} .
# ```
#
# A note on signs. The paper writes the advantage matrix as $\alpha \odot (B - \mathbb{E}_\alpha[b])$, which is
# exactly the score gradient $\partial L / \partial S$ of the boxed routing law. Since chapter 1 this book calls
# $\mathbb{E}_{\alpha_i}[b] - b_{ij}$ the *advantage* (positive means gradient descent moves attention toward
# key $j$), so the tool's `advantage_matrix` is $A = -\partial L/\partial S$: the change of the scores in one
# gradient step per unit learning rate, red where attention grows. The paper's matrix is the tool's
# `routing_gradient`. Both come straight from the laws in `attention_dynamics.gradients`. Every row of $A$
# sums to zero (attention is moved, not created), and $A$ is gated by $\alpha_{ij}$: a key that receives no
# attention receives no routing signal either.
#
# From these, and from the captured keys and values, the tool computes per head:
#
# | diagnostic | definition | how to read it |
# |---|---|---|
# | attention entropy | $H(\alpha_i) / \log n_i$, mean over queries ($n_i$ visible keys) | 1 uniform, 0 one-hot |
# | routing signal | $\lVert \partial L/\partial S \rVert_F = \lVert A \rVert_F$ | 0: routing cannot move (settled *or* collapsed) |
# | value signal | $\lVert \partial L / \partial V \rVert_F$, with $\partial L/\partial v_j = \sum_i \alpha_{ij} u_i$ | the responsibility-weighted value law |
# | starved keys | share of keys with $N_j = \sum_i \alpha_{ij} < 0.01\, N_j^{\text{uniform}}$ | keys that dropped out of training |
# | key orthogonality | mean $\lvert\cos\rvert$ between keys, against isotropic random vectors | below 1× the baseline: keys spread apart |
# | value spectrum | share of variance on the first principal component, participation ratio | a low-dimensional value manifold |
# | specialization | $I(\text{query label}; \text{key label})$ under $\alpha$, against uniform attention | which values serve which queries, and how exclusively |
# | routing stability | total variation between the attention rows of two checkpoints; relative change of $V$ | routing settled while values still move |
#
# $N_j^{\text{uniform}}$ is the soft count key $j$ would get if every query spread its attention evenly over
# the keys it can see; below one hundredth of it, the key's value and score get almost no gradient. The
# labels of the specialization summary are whatever groups the reader cares about — in the sticky chain,
# the symbol each position carries.
#
# **How the tensors are read.** On this book's transformer, each attention module passes $q, k, v, \alpha$
# and the per-head context $g$ through identity "probe" layers; forward hooks read them and autograd gives
# $u = \partial L / \partial g$. On `torch.nn.MultiheadAttention` a pre-hook asks the module for per-head
# weights (`need_weights=True, average_attn_weights=False`), the per-head queries, keys and values are
# recomputed from its input projection, and $u$ is the gradient at the module's output mapped back through
# `out_proj`; a post-hook hands the caller exactly the output it asked for. Gradients are taken with
# `torch.autograd.grad`, so the parameters' `.grad` is never touched, and every hook is removed afterwards.

# %% [markdown] tags=[]
# ## The tool is exact
#
# `diagnostics.verify_against_autograd` pushes the captured tensors through the paper's laws and compares the
# result with gradients that autograd computes in the same forward pass. We run it, in float64, on three
# models: a plain PyTorch causal transformer built from `nn.TransformerEncoderLayer` (the laws, chained
# through `in_proj_weight`, against autograd's gradient of that weight), this book's `CausalTransformer`
# (the value and query laws against autograd at the probes) and the paper's sticky-chain head at
# initialisation on a full training sequence (the advantage matrix against $-\partial L/\partial S$).

# %% tags=["hide-input"]
check_batch = bijection.sample_bijection_batch(
    16, 8, 8, generator=generator
)  # 16 sequences, V = L = 8
check_inputs = check_batch.tokens  # (16, 15) token ids
check_targets = traced_runs.bijection_training_targets(
    check_batch.tokens, check_batch.targets
)  # (16, 15)
torch.manual_seed(seed)
torch_encoder = TorchCausalEncoder(16, 8, d_model=32, n_heads=4, n_layers=2, max_len=15).double()
package_transformer = CausalTransformer(
    n_out=8, vocab_size=16, d_model=32, n_layers=2, n_heads=4, max_len=15
).double()
chain = sticky_chain.make_sticky_chain_data(seed)  # x (1999, 20), y (1999,)
checks = {
    "torch_mha": diagnostics.verify_against_autograd(torch_encoder, check_inputs, check_targets),
    "probes": diagnostics.verify_against_autograd(package_transformer, check_inputs, check_targets),
    "single_head": diagnostics.verify_against_autograd(
        initial_head(seed, torch.float64), chain.x.double(), chain.y
    ),
}
descriptions = {
    "torch_mha": "nn.TransformerEncoder (2 layers × 4 heads): "
    "laws through in_proj_weight vs autograd",
    "probes": "CausalTransformer (2 layers × 4 heads): "
    "value and query laws vs autograd at the probes",
    "single_head": "sticky-chain head at init, T = 1999: advantage matrix vs −∂L/∂S by autograd",
}
for name, check in checks.items():
    claims.record(
        f"diagnostics.{name}_vs_autograd_rel_err",
        check.relative_error,
        unit="",
        expected=0.0,
        tolerance=1e-12,
        description=f"max abs error / max abs gradient, {descriptions[name]} (float64)",
        params={"seed": seed, "dtype": "float64", "compared": check.compared},
    )
pd.DataFrame(
    {
        name: {
            "compared": c.compared,
            "max abs error": f"{c.max_abs_error:.1e}",
            "relative error": f"{c.relative_error:.1e}",
        }
        for name, c in checks.items()
    }
).T

# %% [markdown] tags=[]
# Relative to the largest gradient entry, the disagreement is
# {glue:text}`diagnostics.torch_mha_vs_autograd_rel_err:.1e` on the PyTorch encoder,
# {glue:text}`diagnostics.probes_vs_autograd_rel_err:.1e` on the book's transformer and
# {glue:text}`diagnostics.single_head_vs_autograd_rel_err:.1e` on the sticky-chain head: rounding error.
# The unit tests (`tests/test_diagnostics.py`) add the known answers — one-hot attention gives a zero
# advantage matrix, a value no query attends to is reported starved, hand-built orthogonal keys have
# orthogonality 0 — and check the capture on batch-first and sequence-first, causal and bidirectional,
# pre- and post-LayerNorm `nn.TransformerEncoder` stacks.

# %% [markdown] tags=[]
# ## The sticky-chain head under SGD and the EM-like schedule
#
# The paper's named experiment (chapter 5) trains one head on a sticky Markov chain over 8 symbols: the input
# at position $t$ is the noisy mean of the previous symbol, the target is the next symbol. We train it with
# the paper's two schedules from the same initialisation (seed {glue:text}`diagnostics.seed`) — SGD with
# learning rate 0.01 on every matrix, and the "EM-like" schedule with 0.1 on the values — and diagnose it on
# the training sequence at initialisation, halfway and at the end. The same call also trains every other
# model of this chapter; the runs share the two cores.

# %% tags=["trained-output", "hide-input"]
BROKEN = schedules.Schedule(
    "broken_routing",
    f"broken: routing lr {cfg.broken_routing_lr:g}",
    query_key_lr=cfg.broken_routing_lr,
    readout_lr=0.1,
    value_lr=0.1,
)
tracked = sorted(set(cfg.early_track) | set(range(0, cfg.steps, cfg.track_every)))
snapshots = [0, cfg.mid_step, cfg.steps]
sticky = {"kind": "sticky_chain", "seed": seed, "steps": cfg.steps}
jobs = {  # the longest first, so that the two cores finish together
    "healthy": {
        **sticky,
        "schedule": "sgd_matched",
        "track_steps": tracked,
        "keep_steps": [cfg.snapshot_step, cfg.steps],
        "label": "healthy: lr 0.1 everywhere",
    },
    "broken": {
        **sticky,
        "schedule": BROKEN,
        "track_steps": tracked,
        "keep_steps": [cfg.snapshot_step, cfg.steps],
    },
    "tunnel": {"kind": "wind_tunnel", "scale": cfg.tunnel_scale, "seed": cfg.tunnel_seed},
    "sgd": {**sticky, "schedule": "sgd", "keep_steps": snapshots},
    "em_like": {**sticky, "schedule": "em_like", "keep_steps": snapshots},
    "encoder": {
        "kind": "torch_encoder",
        "V": 8,
        "L": 8,
        "steps": cfg.encoder_steps,
        "seed": seed,
        "track_steps": [0],
        "keep_steps": [0, cfg.encoder_steps],
    },
}
runs = dict(zip(jobs, training.map_parallel(traced_runs.run_experiment, list(jobs.values()))))
claims.glue("diagnostics.seed", seed)
claims.glue("diagnostics.steps", cfg.steps)
claims.glue("diagnostics.mid_step", cfg.mid_step)

# %% tags=["trained-output"]
rows = []
for name in ("sgd", "em_like"):
    for step in snapshots:
        d = runs[name].at(step)
        m, s = d.heads[0].metrics, d.specializations[0]
        rows.append(
            {
                "schedule": runs[name].label,
                "step": step,
                "loss (nats)": d.loss,
                "H/log n": m.normalized_attention_entropy,
                "‖∂L/∂S‖": m.routing_gradient_norm,
                "‖∂L/∂V‖": m.value_gradient_norm,
                "starved": m.starved_fraction,
                "key |cos| / random": m.key_orthogonality_ratio,
                "value PC1": m.value_pc1_fraction,
                "value dim": m.value_effective_dimension,
                "MI (nats)": s.mutual_information_nats,
                "MI chance": s.chance_mutual_information_nats,
            }
        )
pd.DataFrame(rows).set_index(["schedule", "step"]).map(lambda v: f"{v:.3g}")

# %% [markdown] tags=[]
# The table is `AttentionDiagnostics.metrics()` at the three checkpoints (key orthogonality is measured
# between the mean keys of the 8 symbols; the specialization labels are the symbol each position carries,
# for queries and keys alike). In {glue:text}`diagnostics.steps` steps at the paper's learning rates the head barely leaves its
# initial state: SGD ends with a normalized attention entropy of
# {glue:text}`diagnostics.sgd_final_norm_entropy:.3f` — still almost uniform attention over up to
# {glue:text}`diagnostics.positions` keys — and the EM-like schedule with
# {glue:text}`diagnostics.em_like_final_norm_entropy:.3f`. This is the diagnostic face of what chapter 5 finds in the loss: both runs are still close to the uniform level
# $\ln 8$ after {glue:text}`diagnostics.steps` steps. Yet the matrices already tell the two schedules apart. Under the EM-like
# schedule the mutual information between the symbol a query carries and the symbol of the values it reads
# rises to {glue:text}`diagnostics.em_like_final_mi_nats:.3f` nats (SGD:
# {glue:text}`diagnostics.sgd_final_mi_nats:.3f`; uniform attention would give
# {glue:text}`diagnostics.em_like_final_mi_chance_nats:.1e`), the routing signal
# $\lVert \partial L/\partial S \rVert$ grows by a factor {glue:text}`diagnostics.em_like_routing_signal_growth:.1f`
# (SGD: {glue:text}`diagnostics.sgd_routing_signal_growth:.2f`), and the values concentrate on fewer
# directions: their first principal component carries {glue:text}`diagnostics.em_like_final_value_pc1:.0%` of
# the variance at the end against {glue:text}`diagnostics.initial_value_pc1:.0%` at initialisation (SGD:
# {glue:text}`diagnostics.sgd_final_value_pc1:.0%`). The positive feedback of chapter 3 — a larger value step
# raises the advantage, which sharpens routing, which raises the advantage — is visible here before it is
# visible in the loss.
#
# The figure shows *which* values serve which queries: for every pair of symbols, the attention mass that
# queries carrying symbol $a$ put on keys carrying symbol $c$, minus what uniform attention would give.

# %% tags=["hide-input", "trained-output"]
fig, axes = plotting.new_figure(3, 2, width=3.3, height=3.0)
excess = {(n, s): runs[n].at(s).specializations[0] for n in ("sgd", "em_like") for s in snapshots}
vmax = max(np.abs(x.routing_matrix - x.chance_routing_matrix).max() for x in excess.values())
for row, name in enumerate(("sgd", "em_like")):
    for col, step in enumerate(snapshots):
        diagnostics.plot_routing_matrix(
            excess[(name, step)],
            ax=axes[row, col],
            kind="excess",
            vmax=vmax,
            title=f"{runs[name].label}\nstep {step}",
            key_name="symbol carried by key",
            query_name="symbol carried by query",
        )
fig.suptitle("Who reads whom: attention by symbol, in excess of uniform attention")
plotting.plt.show()

# %% [markdown] tags=[]
# At initialisation the pattern is faint and random. Under SGD it hardly changes in {glue:text}`diagnostics.steps` steps; under the
# EM-like schedule a few key symbols start to collect the attention of several query symbols. Routing has
# not settled. Between initialisation
# and step {glue:text}`diagnostics.mid_step` the EM-like run's attention rows move by a total-variation
# distance of only {glue:text}`diagnostics.em_like_routing_tv_first_half:.3f` on average (0 would be no
# change, 1 disjoint rows), while its value vectors change by
# {glue:text}`diagnostics.em_like_value_change_first_half:.0%` of their norm (SGD:
# {glue:text}`diagnostics.sgd_routing_tv_first_half:.3f` and
# {glue:text}`diagnostics.sgd_value_change_first_half:.0%`). The two measures are on different scales, so
# they rank nothing against each other; what they show is how each schedule spends its steps
# (`diagnostics.routing_stability`; the table below also gives the second half). This is not evidence for
# the two-timescale picture: the EM-like schedule gives the values a ten times larger learning rate, so
# fast values and slow routing are what it is built to produce, and chapter 4 finds that which of the two
# settles first is set by the learning-rate ratio.

# %% tags=["trained-output", "hide-input"]
stability = {
    name: (
        diagnostics.routing_stability(runs[name].at(0), runs[name].at(cfg.mid_step))[0],
        diagnostics.routing_stability(runs[name].at(cfg.mid_step), runs[name].at(cfg.steps))[0],
    )
    for name in ("sgd", "em_like")
}
run_params = {
    "seed": seed,
    "steps": cfg.steps,
    "chain": "reference",
    "T": int(chain.x.shape[0]),
    "full_batch": True,
}
for name in ("sgd", "em_like"):
    start, end = runs[name].at(0).heads[0].metrics, runs[name].at(cfg.steps).heads[0].metrics
    spec = runs[name].at(cfg.steps).specializations[0]
    params = {**run_params, "schedule": name}
    claims.record(
        f"diagnostics.{name}_final_norm_entropy",
        end.normalized_attention_entropy,
        unit="",
        description=f"mean H(α_i)/log n_i of the sticky-chain head after {cfg.steps} steps "
        f"({name})",
        params=params,
    )
    claims.record(
        f"diagnostics.{name}_final_mi_nats",
        spec.mutual_information_nats,
        unit="nats",
        params=params,
        description=f"I(query symbol; key symbol) under the head's attention after {cfg.steps} "
        f"steps ({name})",
    )
    claims.record(
        f"diagnostics.{name}_final_value_pc1",
        end.value_pc1_fraction,
        unit="fraction of variance",
        params=params,
        description=f"variance share of the values' first principal component after {cfg.steps} "
        f"steps ({name})",
    )
    claims.glue(
        f"diagnostics.{name}_routing_signal_growth",
        end.routing_gradient_norm / start.routing_gradient_norm,
    )
    claims.record(
        f"diagnostics.{name}_routing_tv_first_half",
        stability[name][0].attention_tv,
        unit="",
        params=params,
        description=f"mean total variation between attention rows at steps 0 and {cfg.mid_step} "
        f"({name})",
    )
    claims.record(
        f"diagnostics.{name}_value_change_first_half",
        stability[name][0].value_relative_change,
        unit="",
        params=params,
        description=f"‖V(step {cfg.mid_step}) − V(0)‖ / ‖V(0)‖ of the value vectors ({name})",
    )
claims.glue(
    "diagnostics.em_like_final_mi_chance_nats",
    runs["em_like"].at(cfg.steps).specializations[0].chance_mutual_information_nats,
)
claims.glue(
    "diagnostics.initial_value_pc1", runs["em_like"].at(0).heads[0].metrics.value_pc1_fraction
)
pd.DataFrame(
    {
        runs[n].label: {
            "TV 0→mid": a.attention_tv,
            "TV mid→end": b.attention_tv,
            "top key kept 0→mid": a.top_key_agreement,
            "top key kept mid→end": b.top_key_agreement,
            "ΔV 0→mid": a.value_relative_change,
            "ΔV mid→end": b.value_relative_change,
        }
        for n, (a, b) in stability.items()
    }
).T.map(lambda v: f"{v:.3g}")

# %% [markdown] tags=[]
# The position-level matrices are what the tool draws for one head (`AttentionDiagnostics.plot_head`);
# here the last {glue:text}`diagnostics.window` positions of the sequence for the EM-like run at the end of
# training. Attention is still spread thinly over all earlier positions (each weight is of the order of one
# over the number of positions), but the advantage matrix already has a clear red-and-blue structure: for each query a few keys would gain
# attention at the next step and the others would lose it, each row summing to zero.

# %% tags=["hide-input", "trained-output"]
T = int(chain.x.shape[0])
window = slice(T - cfg.window, T)
claims.glue("diagnostics.positions", T)
claims.glue("diagnostics.window", cfg.window)
fig = (
    runs["em_like"]
    .at(cfg.steps)
    .plot_head(
        queries=window,
        keys=window,
        title=f"EM-like schedule, step {cfg.steps}: the last {cfg.window} positions",
    )
)
plotting.plt.show()

# %% [markdown] tags=[]
# ## A healthy run and a broken one
#
# Now a run that goes wrong. Both runs below start from the same initialisation as above and use learning
# rate 0.1 on the values and the readout. The **healthy** run uses 0.1 on the queries and keys too (the
# matched-learning-rate control of chapter 5). The **broken** run uses
# {glue:text}`diagnostics.broken_routing_lr:g` on $W_Q$ and $W_K$ — a routing learning rate far too large,
# the kind of mistake a mis-configured parameter group makes. The diagnostics were recorded densely over the
# first {glue:text}`diagnostics.early_horizon` steps, then every {glue:text}`diagnostics.track_every` steps.

# %% tags=["hide-input", "trained-output"]
healthy, broken = runs["healthy"], runs["broken"]
alarm = diagnostics.collapse_alarm(broken)
behind = diagnostics.loss_falls_behind(
    broken.losses, healthy.losses
)  # None: not behind at the last step
behind_or_end = behind if behind is not None else cfg.steps
steps_axis = np.arange(cfg.steps)
fig, axes = plotting.new_figure(4, width=3.1, height=2.9)
for run, color in (
    (healthy, plotting.schedule_color("sgd_matched")),
    (broken, plotting.PALETTE[3]),
):
    axes[0].plot(steps_axis, run.losses, color=color, label=run.label)
    for ax, key in zip(
        axes[1:], ("normalized_attention_entropy", "starved_fraction", "routing_gradient_norm")
    ):
        ax.plot(run.steps, run.metric(key), color=color, marker=".", ms=3)
titles = [
    ("training loss", "nats"),
    ("attention entropy", "H(α)/log n"),
    ("starved keys", "fraction of keys"),
    ("routing signal", "‖∂L/∂S‖ (nats)"),
]
for ax, (title, ylabel) in zip(axes, titles):
    ax.set(xscale="symlog", xlabel="step (symlog)", title=title, ylabel=ylabel, xlim=(0, cfg.steps))
    if alarm is not None:
        ax.axvline(alarm, color=plotting.PALETTE[3], ls="--", lw=1)
    ax.axvline(behind_or_end, color="#555555", ls=":", lw=1)
axes[3].set_yscale("log")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2)
fig.suptitle(
    "Healthy vs broken routing: dashed = the diagnostics' alarm, dotted = the loss falls behind "
    "for good"
)
plotting.plt.show()

# %% tags=["trained-output", "hide-input"]
pair_params = {
    **run_params,
    "healthy": "lr 0.1 on W_Q, W_K, W_V, W_O",
    "broken": f"lr {cfg.broken_routing_lr:g} on W_Q, W_K and 0.1 on W_V, W_O",
    "alarm": "H/log n < 0.1 or starved > 0.5",
}
at_alarm = broken.metrics[list(broken.steps).index(alarm)][0] if alarm is not None else None
claims.glue("diagnostics.broken_routing_lr", cfg.broken_routing_lr)
claims.glue("diagnostics.track_every", cfg.track_every)
claims.glue("diagnostics.early_horizon", max(cfg.early_track))
claims.record(
    "diagnostics.broken_alarm_step",
    alarm,
    unit="steps",
    params=pair_params,
    description="first recorded step at which the broken run's attention has collapsed (entropy or "
    "starved keys)",
)
claims.record(
    "diagnostics.broken_loss_behind_step",
    behind_or_end,
    unit="steps",
    params=pair_params,
    description="first step from which the broken run's training loss stays above the healthy "
    "run's "
    "(the number of steps if it is not behind at the end)",
)
claims.record(
    "diagnostics.alarm_lead_steps",
    behind_or_end - alarm,
    unit="steps",
    lower=1,
    params=pair_params,
    description="steps by which the diagnostics flag the broken run before its loss falls behind "
    "for good "
    "(target: the matrices come first)",
)
claims.record(
    "diagnostics.broken_starved_at_alarm",
    at_alarm["starved_fraction"],
    unit="fraction of keys",
    params=pair_params,
    description="share of starved keys in the broken run at the alarm step",
)
claims.record(
    "diagnostics.broken_entropy_at_alarm",
    at_alarm["normalized_attention_entropy"],
    unit="",
    params=pair_params,
    description="normalized attention entropy of the broken run at the alarm step",
)
ahead = float(np.mean(broken.losses[:behind_or_end] < healthy.losses[:behind_or_end]))
claims.record(
    "diagnostics.broken_ahead_fraction",
    ahead,
    unit="fraction of steps",
    params=pair_params,
    description="share of the steps before the loss falls behind at which the broken run's loss is "
    "the lower one",
)
for name, run in (("healthy", healthy), ("broken", broken)):
    claims.record(
        f"diagnostics.{name}_final_loss",
        run.metric("loss")[-1],
        unit="nats",
        params=pair_params,
        description=f"training loss of the {name} run after {cfg.steps} steps",
    )
    claims.record(
        f"diagnostics.{name}_final_routing_signal",
        run.metric("routing_gradient_norm")[-1],
        unit="nats",
        params=pair_params,
        description=f"‖∂L/∂S‖ of the {name} run after {cfg.steps} steps",
    )
    claims.record(
        f"diagnostics.{name}_final_starved",
        run.metric("starved_fraction")[-1],
        unit="fraction of keys",
        params=pair_params,
        description=f"share of starved keys in the {name} run after {cfg.steps} steps",
    )
claims.glue(
    "diagnostics.healthy_final_mi_nats",
    healthy.at(cfg.steps).specializations[0].mutual_information_nats,
)
print(f"alarm at step {alarm}; the loss falls behind for good from step {behind_or_end}")

# %% [markdown] tags=[]
# The diagnostics raise the alarm at step {glue:text}`diagnostics.broken_alarm_step`: after a single update
# the broken run's attention has collapsed onto one key per query (normalized entropy
# {glue:text}`diagnostics.broken_entropy_at_alarm:.3f`) and
# {glue:text}`diagnostics.broken_starved_at_alarm:.0%` of the keys are starved. The loss tells a different
# story. Apart from a few blips, the broken run's loss is *lower* than the healthy run's for the whole
# early phase — on {glue:text}`diagnostics.broken_ahead_fraction:.0%` of the steps before it falls behind —
# because a one-hot head that copies one past input is, at first, a better predictor than
# a near-uniform average over up to
# {glue:text}`diagnostics.positions` of them. Only from step {glue:text}`diagnostics.broken_loss_behind_step`
# on does the broken run stay behind for good: the diagnostics were
# {glue:text}`diagnostics.alarm_lead_steps` steps ahead of the learning curve.
#
# The matrices also say *why* it will not recover. With one-hot rows the advantage matrix is zero (chapter 2's
# one-hot limit): the routing signal of the broken run ends at
# {glue:text}`diagnostics.broken_final_routing_signal:.1e` against
# {glue:text}`diagnostics.healthy_final_routing_signal:.1e` for the healthy run, and
# {glue:text}`diagnostics.broken_final_starved:.0%` of its keys are starved, so their values are never
# updated. The frame froze at a random pattern in one step; after {glue:text}`diagnostics.steps` steps the
# broken run's loss is {glue:text}`diagnostics.broken_final_loss:.3f` nats against
# {glue:text}`diagnostics.healthy_final_loss:.3f` for the healthy run, whose routing specialized properly
# (symbol mutual information {glue:text}`diagnostics.healthy_final_mi_nats:.2f` nats). Side by side, at step
# {glue:text}`diagnostics.snapshot_step`, for the first {glue:text}`diagnostics.window` positions of the
# sequence:

# %% tags=["hide-input", "trained-output"]
claims.glue("diagnostics.snapshot_step", cfg.snapshot_step)
first = slice(
    0, cfg.window
)  # early queries see few keys, so a collapsed row's one key is in the picture
fig, axes = plotting.new_figure(3, 2, width=3.5, height=3.1)
for row, run in enumerate((healthy, broken)):
    diagnostics.plot_head(
        run.at(cfg.snapshot_step).heads[0], queries=first, keys=first, axes=axes[row]
    )
    axes[row, 0].set_title(f"{run.label}\n" + axes[row, 0].get_title())
fig.suptitle(
    f"Step {cfg.snapshot_step}, the first {cfg.window} positions: collapsed attention has no "
    f"advantage signal"
)
plotting.plt.show()

# %% [markdown] tags=[]
# Top: the healthy run's attention is diffuse and its advantage matrix is dense — every key is still in play.
# Bottom: the broken run's attention is a single bright cell per row, and its advantage matrix is blank
# except on those cells, where a one-hot row has nothing to redistribute. The compatibility matrix $B$ is
# still informative in both (the error signal does not care about routing): it shows which values *would*
# help, but the gate $\alpha_{ij}$ in the routing law hides them from the gradient.

# %% [markdown] tags=[]
# ## The wind-tunnel transformer
#
# Chapter 6 trains this book's `CausalTransformer` ({glue:text}`diagnostics.tunnel_layers` layers ×
# {glue:text}`diagnostics.tunnel_heads` heads) on Paper I's bijection-elimination wind tunnel
# ($V = L =$ {glue:text}`diagnostics.tunnel_V`), with the exact posterior as its target.
# `traced_runs.wind_tunnel_trace` re-trains it with chapter 6's settings and seed — the same weights, step
# for step — and diagnoses every one of its checkpoints on chapter 6's probe batch. Queries and keys are
# labelled by token type (key token or value token), so the specialization measure asks whether the heads
# route by token type, and key orthogonality is measured between the mean keys of the
# {glue:text}`diagnostics.tunnel_vocab` tokens.

# %% tags=["hide-input", "trained-output"]
tunnel = runs["tunnel"]
tunnel_settings = wind_tunnel.SETTINGS[cfg.tunnel_scale]
probe = wind_tunnel.bijection_probe_batch(tunnel_settings, seed=cfg.tunnel_seed)
tunnel_floor = float(
    torch.special.entr(probe.posterior).sum(-1).mean()
)  # mean posterior entropy (nats)
n_heads = len(tunnel.metrics[0])
fig, axes = plotting.new_figure(4, width=3.1, height=2.9)
axes[0].plot(tunnel.steps, tunnel.metric("loss"), color=plotting.PALETTE[0], marker=".", ms=3)
axes[0].axhline(tunnel_floor, color="#555555", ls="--", lw=1, label="Bayes floor")
axes[0].legend()
for h in range(n_heads):
    name = tunnel.at(tunnel.steps[-1]).heads[h].name
    color = plotting.PALETTE[h % len(plotting.PALETTE)]
    for ax, key in zip(
        axes[1:],
        ("normalized_attention_entropy", "routing_gradient_norm", "specialization_mi_nats"),
    ):
        ax.plot(tunnel.steps, tunnel.metric(key, head=h), color=color, marker=".", ms=3, label=name)
axes[3].plot(
    tunnel.steps,
    tunnel.metric("specialization_chance_mi_nats"),
    color="#555555",
    ls="--",
    lw=1,
    label="chance",
)
titles = [
    ("probe loss", "nats"),
    ("attention entropy", "H(α)/log n"),
    ("routing signal", "‖∂L/∂S‖ (nats)"),
    ("routing by token type", "mutual information (nats)"),
]
for ax, (title, ylabel) in zip(axes, titles):
    ax.set(
        xscale="symlog",
        xlabel="training step (symlog)",
        title=title,
        ylabel=ylabel,
        xlim=(0, tunnel.steps[-1]),
    )
axes[2].set_yscale("log")
axes[3].legend(fontsize=8)
fig.suptitle("Chapter 6's bijection transformer, diagnosed at its checkpoints")
plotting.plt.show()

# %% tags=["trained-output", "hide-input"]
tunnel_steps = sorted(tunnel.kept)
tunnel_mid, tunnel_end = tunnel.at(tunnel_steps[1]), tunnel.at(tunnel_steps[-1])
tunnel_stability = diagnostics.routing_stability(tunnel_mid, tunnel_end)
tunnel_params = {
    "scale": cfg.tunnel_scale,
    "seed": cfg.tunnel_seed,
    "probe_sequences": int(probe.tokens.shape[0]),
    **{
        k: tunnel_settings[k]
        for k in ("V", "L", "bij_d_model", "bij_n_layers", "bij_n_heads", "bij_steps")
    },
}
claims.glue("diagnostics.tunnel_layers", tunnel_settings["bij_n_layers"])
claims.glue("diagnostics.tunnel_heads", tunnel_settings["bij_n_heads"])
claims.glue("diagnostics.tunnel_V", tunnel_settings["V"])
claims.glue("diagnostics.tunnel_vocab", 2 * tunnel_settings["V"])
claims.glue("diagnostics.tunnel_floor", tunnel_floor)
claims.glue("diagnostics.tunnel_mid_step", tunnel_steps[1])
claims.glue("diagnostics.tunnel_end_step", tunnel_steps[-1])
claims.record(
    "diagnostics.tunnel_final_loss",
    tunnel_end.loss,
    unit="nats",
    params=tunnel_params,
    description="soft-target cross-entropy of chapter 6's bijection transformer on its probe "
    "batch, end of training",
)
reading = [
    s.routing_matrix[0, 1] for s in tunnel_end.specializations
]  # key-token queries → value tokens
best, least = int(np.argmax(reading)), int(np.argmin(reading))
claims.glue("diagnostics.tunnel_best_head", tunnel_end.heads[best].name)
claims.glue("diagnostics.tunnel_least_head", tunnel_end.heads[least].name)
claims.glue("diagnostics.tunnel_least_value_reading", reading[least])
claims.record(
    "diagnostics.tunnel_value_reading",
    reading[best],
    unit="attention mass",
    params=tunnel_params,
    description="largest mean attention mass, over heads, that key-token queries put on value "
    "tokens (end of training)",
)
claims.glue(
    "diagnostics.tunnel_value_reading_chance",
    tunnel_end.specializations[best].chance_routing_matrix[0, 1],
)
claims.record(
    "diagnostics.tunnel_routing_tv_mid_to_end",
    max(x.attention_tv for x in tunnel_stability),
    unit="",
    params=tunnel_params,
    description="largest over heads of the mean total variation between attention rows "
    "at the middle and the last checkpoint",
)
claims.record(
    "diagnostics.tunnel_value_change_mid_to_end",
    min(x.value_relative_change for x in tunnel_stability),
    unit="",
    params=tunnel_params,
    description="smallest over heads of ‖V(end) − V(mid)‖ / ‖V(mid)‖",
)
print(tunnel_end.summary())

# %% [markdown] tags=[]
# At the end of training the probe loss is {glue:text}`diagnostics.tunnel_final_loss:.4f` nats against a
# Bayes floor of {glue:text}`diagnostics.tunnel_floor:.4f` (chapter 6 measures the calibration in detail).
# The diagnostics show how the network gets there, and that its heads divide the work. At the key
# positions, head {glue:text}`diagnostics.tunnel_best_head` puts
# {glue:text}`diagnostics.tunnel_value_reading:.0%` of its attention on the revealed value tokens — the
# values that must be eliminated from the posterior — where uniform attention would put
# {glue:text}`diagnostics.tunnel_value_reading_chance:.0%`, while head
# {glue:text}`diagnostics.tunnel_least_head` puts only {glue:text}`diagnostics.tunnel_least_value_reading:.0%`
# there.
# The routing signal of every head falls by orders of magnitude as the loss approaches its floor. Between
# the middle checkpoint (step {glue:text}`diagnostics.tunnel_mid_step`) and the last (step
# {glue:text}`diagnostics.tunnel_end_step`), no head's attention rows move by more than
# {glue:text}`diagnostics.tunnel_routing_tv_mid_to_end:.3f` in total variation, while every head's value vectors
# still change by at least {glue:text}`diagnostics.tunnel_value_change_mid_to_end:.0%` of their norm. The two
# numbers have no common unit, so on their own they do not say that the frame settles first; chapter 6 measures
# the frame–precision dissociation with one settling rule for both and states its cautions, and chapter 4 finds
# that the order depends on the learning rates.

# %% [markdown] tags=[]
# ## Any PyTorch transformer
#
# The tool does not need this book's models. Here it diagnoses a small causal transformer written with
# nothing but `torch.nn` — token and position embeddings, two `nn.TransformerEncoderLayer` (4 heads,
# pre-LayerNorm) under a causal mask, a linear readout — trained with AdamW on Paper I's bijection-elimination
# wind tunnel ($V = 8$ symbols, $L = 8$ keys; the cross-entropy is taken at the key positions, where the exact
# posterior is uniform over the values not yet revealed). The calls are the same as for any model:
#
# ```python
# diag = diagnostics.diagnose(model, tokens, targets)   # targets: −100 where there is nothing to predict
# print(diag.summary())
# diag.plot_head(layer=1, head=0)
# ```

# %% tags=["trained-output"]
encoder, encoder_trace, (eval_tokens, eval_targets) = runs[
    "encoder"
]  # trained above, with the other runs
encoder_end = encoder_trace.at(cfg.encoder_steps)
print(encoder_end.summary())

# %% tags=["hide-input", "trained-output"]
floor = bijection.bayes_ce_floor_nats(8, 8)
encoder_params = {
    "seed": seed,
    "V": 8,
    "L": 8,
    "steps": cfg.encoder_steps,
    "batch_size": 64,
    "lr": 3e-3,
    "optimizer": "AdamW",
    "d_model": 64,
    "n_heads": 4,
    "n_layers": 2,
    "eval_sequences": 256,
}
claims.record(
    "diagnostics.encoder_final_loss",
    encoder_end.loss,
    unit="nats",
    params=encoder_params,
    description="cross-entropy at the key positions of the nn.TransformerEncoder on held-out "
    "bijection sequences",
)
claims.glue("diagnostics.encoder_bayes_floor", floor)
claims.glue("diagnostics.encoder_blind_loss", float(np.log(8)))
claims.glue("diagnostics.encoder_steps", cfg.encoder_steps)
value_reading = [
    s.routing_matrix[0, 1] for s in encoder_end.specializations
]  # key-token queries → value tokens
value_chance = [s.chance_routing_matrix[0, 1] for s in encoder_end.specializations]
best = int(np.argmax(np.array(value_reading) - np.array(value_chance)))
claims.glue("diagnostics.encoder_best_head", encoder_end.heads[best].name)
claims.record(
    "diagnostics.encoder_best_value_reading",
    value_reading[best],
    unit="attention mass",
    params=encoder_params,
    description="largest mean attention mass, over heads, that key-token queries put on value "
    "tokens",
)
claims.glue("diagnostics.encoder_value_reading_chance", value_chance[best])
fig = diagnostics.plot_overview(
    [encoder_trace.at(0), encoder_end], labels=["step 0", f"step {cfg.encoder_steps}"]
)
fig.suptitle(
    "nn.TransformerEncoder on bijection elimination: every head, before and after training"
)
plotting.plt.show()

# %% [markdown] tags=[]
# After {glue:text}`diagnostics.encoder_steps` steps the encoder's loss on held-out sequences is
# {glue:text}`diagnostics.encoder_final_loss:.3f` nats, between the context-blind level $\ln 8 =$
# {glue:text}`diagnostics.encoder_blind_loss:.3f` and the Bayes floor
# {glue:text}`diagnostics.encoder_bayes_floor:.3f`. The summary and the bars show what training did to each
# of the eight heads. Attention has sharpened everywhere, no head has collapsed, and the specialization
# labels (token type: key or value) show the division of labour the task needs: at key positions, head
# {glue:text}`diagnostics.encoder_best_head` puts {glue:text}`diagnostics.encoder_best_value_reading:.0%` of
# its attention on the revealed *value* tokens (uniform attention would put
# {glue:text}`diagnostics.encoder_value_reading_chance:.0%`) — the values that must be eliminated from the
# posterior.

# %% [markdown] tags=[]
# ## Reading the diagnostics
#
# | what you see | what it means | what to try |
# |---|---|---|
# | entropy → 0, many starved keys, $\lVert\partial L/\partial S\rVert \to 0$ early, loss still fine | routing collapsed: the advantage matrix is gated off and the frame is frozen | lower the query/key learning rate or initial scale, warm up |
# | $\lVert\partial L/\partial S\rVert$ small, entropy moderate, loss near its floor | routing has settled: the frame is in place | nothing; values keep refining (two timescales) |
# | $\lVert\partial L/\partial V\rVert$ stays large, value spectrum unchanged | the values are not learning (learning rate too small or frozen) | check the value parameter group |
# | mutual information at its chance level | no specialization: queries read every value alike | train longer, larger value step (chapter 5) |
# | key $\lvert\cos\rvert$ far above the random baseline | keys collapsed onto a few directions | same as for a collapse |
# | attention rows stable between checkpoints while $V$ keeps moving | routing has settled while the values refine (the frame–precision picture; its order depends on the learning rates, chapter 4) | expected in healthy training |
#
# The whole tool is one call, `diagnostics.diagnose(model, inputs, targets)`, and
# `diagnostics.verify_against_autograd` checks it on a new architecture; `diagnostics.traced_fit` records
# it during training. The API page documents every function.
