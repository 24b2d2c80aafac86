# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@b2a415a4ed431c659988d2b3a6f1dfdda8f82e2b"

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

from attention_dynamics import diagnostics, training
from attention_dynamics.chapters.diagnostics import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import claims, frame_results
from attention_dynamics.science import stats
from attention_dynamics.tasks import bijection, sticky_chain
from attention_dynamics.training import wind_tunnels

cfg = settings.resolve(scale, device=device, steps=steps)
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
# `routing_gradient`. Both come straight from the laws in `attention_dynamics.science.gradients`. Every row of $A$
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
checks = runs.autograd_checks(seed, generator)  # float64, against autograd
chain = sticky_chain.make_sticky_chain_data(seed)  # x (1999, 20), y (1999,)
report.record_autograd_checks(checks, seed=seed)

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
snapshots = [0, cfg.mid_step, cfg.steps]
jobs = runs.chapter_jobs(cfg, seed=seed)  # the longest first: the two cores finish together
traces = dict(zip(jobs, training.map_parallel(runs.run_experiment, list(jobs.values()))))
claims.glue("diagnostics.seed", seed)
claims.glue("diagnostics.steps", cfg.steps)
claims.glue("diagnostics.mid_step", cfg.mid_step)

# %% tags=["hide-input", "trained-output"]
hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix("reference"))
for name in ("sgd", "em_like"):  # where each schedule's loss lies, by chapter 5's halfway bound
    share = sticky_chain.share_of_way(traces[name].losses[-1], hmin)
    claims.glue(f"diagnostics.{name}_position", sticky_chain.position_phrase(share))
    claims.glue(f"diagnostics.{name}_share_of_way", share)
# chapter 4 decides the order of frame and precision; its stored readings give the verdict here
frame_row = frame_results.frame_row_verdict(frame_results.load_frame_definitions())
claims.glue("diagnostics.frame_row_verdict", frame_row.verdict)
claims.glue("diagnostics.frame_row_readings", frame_row.readings_text())

# %% tags=["trained-output"]
runs.schedule_table(traces, snapshots)

# %% [markdown] tags=[]
# The table is `AttentionDiagnostics.metrics()` at the three checkpoints (key orthogonality is measured
# between the mean keys of the 8 symbols; the specialization labels are the symbol each position carries,
# for queries and keys alike). In {glue:text}`diagnostics.steps` steps at the paper's learning rates the head barely leaves its
# initial state: SGD ends with a normalized attention entropy of
# {glue:text}`diagnostics.sgd_final_norm_entropy:.3f` — still almost uniform attention over up to
# {glue:text}`diagnostics.positions` keys — and the EM-like schedule with
# {glue:text}`diagnostics.em_like_final_norm_entropy:.3f`. In the loss, SGD is
# {glue:text}`diagnostics.sgd_position` after {glue:text}`diagnostics.steps` steps
# ({glue:text}`diagnostics.sgd_share_of_way:.0%` of the way) and the EM-like schedule
# {glue:text}`diagnostics.em_like_position` ({glue:text}`diagnostics.em_like_share_of_way:.0%`). Yet the matrices already tell the two schedules apart. Under the EM-like
# schedule the mutual information between the symbol a query carries and the symbol of the values it reads
# rises to {glue:text}`diagnostics.em_like_final_mi_nats:.3f` nats (SGD:
# {glue:text}`diagnostics.sgd_final_mi_nats:.3f`; uniform attention would give
# {glue:text}`diagnostics.em_like_final_mi_chance_nats:.1e`), the routing signal
# $\lVert \partial L/\partial S \rVert$ grows by a factor {glue:text}`diagnostics.em_like_routing_signal_growth:.1f`
# (SGD: {glue:text}`diagnostics.sgd_routing_signal_growth:.2f`), and the values concentrate on fewer
# directions: their first principal component carries {glue:text}`diagnostics.em_like_final_value_pc1:.0%` of
# the variance at the end against {glue:text}`diagnostics.initial_value_pc1:.0%` at initialisation (SGD:
# {glue:text}`diagnostics.sgd_final_value_pc1:.0%`). These are what a ten times larger value step produces;
# this run has no control that would attribute them to chapter 3's feedback loop.
#
# {numref}`fig-diagnostics-routing-by-symbol` shows *which* values serve which queries: for every pair of symbols,
# the attention mass that queries carrying symbol $a$ put on keys carrying symbol $c$, minus what uniform attention
# would give.

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure(
    "fig-diagnostics-routing-by-symbol", figures.plot_routing_by_symbol(traces, snapshots)
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-routing-by-symbol
# :name: fig-diagnostics-routing-by-symbol
# :alt: Two rows of three eight-by-eight heat maps, SGD on top and the EM-like schedule below, one column per training step, on one blue-to-red scale centred at zero: the attention mass each query symbol puts on each key symbol, minus what uniform attention would give.
#
# Who reads whom, under each of the paper's two schedules (rows) at initialisation, half way and at the end
# (columns): the attention mass that queries carrying a symbol (down) put on keys carrying a symbol (across), minus
# its value under uniform attention. Red: more than uniform; blue: less; one colour scale for all panels.
# ```

# %% [markdown] tags=[]
# At initialisation the pattern is faint and random. Under SGD it hardly changes in {glue:text}`diagnostics.steps` steps; under the
# EM-like schedule a few key symbols start to collect the attention of several query symbols. Between initialisation
# and step {glue:text}`diagnostics.mid_step` the EM-like run's attention rows move by a total-variation
# distance of only {glue:text}`diagnostics.em_like_routing_tv_first_half:.3f` on average (0 would be no
# change, 1 disjoint rows), while its value vectors change by
# {glue:text}`diagnostics.em_like_value_change_first_half:.0%` of their norm (SGD:
# {glue:text}`diagnostics.sgd_routing_tv_first_half:.3f` and
# {glue:text}`diagnostics.sgd_value_change_first_half:.0%`). The two measures are on different scales, so
# they rank nothing against each other; what they show is how each schedule spends its steps
# (`diagnostics.routing_stability`; the table below also gives the second half). This is not evidence for
# the two-timescale picture: the EM-like schedule gives the values a ten times larger learning rate, so
# fast values and slow routing are what it is built to produce. Which of the two settles first is chapter 4's
# question, and its verdict is {glue:text}`diagnostics.frame_row_verdict`
# ({glue:text}`diagnostics.frame_row_readings`).

# %% tags=["trained-output", "hide-input"]
run_params = {"seed": seed, "steps": cfg.steps, "chain": "reference", "T": int(chain.x.shape[0])}
run_params["full_batch"] = True
report.record_schedule_claims(traces, steps=cfg.steps, mid_step=cfg.mid_step, run_params=run_params)

# %% [markdown] tags=[]
# The position-level matrices are what the tool draws for one head (`AttentionDiagnostics.plot_head`);
# {numref}`fig-diagnostics-em-like-head` shows the last {glue:text}`diagnostics.window` positions of the sequence
# for the EM-like run at the end of training. Attention is still spread thinly over all earlier positions (each weight is of the order of one
# over the number of positions), but the advantage matrix already has a clear red-and-blue structure: for each query a few keys would gain
# attention at the next step and the others would lose it, each row summing to zero.

# %% tags=["hide-input", "trained-output", "remove-output"]
T = int(chain.x.shape[0])
window = slice(T - cfg.window, T)
claims.glue("diagnostics.positions", T)
claims.glue("diagnostics.window", cfg.window)
title = f"EM-like schedule, step {cfg.steps}: the last {cfg.window} positions"
fig = traces["em_like"].at(cfg.steps).plot_head(queries=window, keys=window, title=title)
plotting.glue_figure("fig-diagnostics-em-like-head", fig)

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-em-like-head
# :name: fig-diagnostics-em-like-head
# :alt: Three heat maps over the last positions of the sequence, query position down and key position across, blank above the diagonal: the attention weights on a sequential scale, and the compatibility and the advantage matrices on blue-to-red scales centred at zero.
#
# The head of the EM-like run at the end of training, over the last positions of its sequence (positions counted
# from the window's start): attention $\alpha_{ij}$, compatibility $b_{ij} = u_i \cdot v_j$ and advantage
# $\alpha_{ij}(\mathbb{E}_\alpha[b] - b_{ij}) = -\partial L/\partial s_{ij}$; red in the advantage: gradient descent
# moves attention toward that key.
# ```

# %% [markdown] tags=[]
# ## A healthy run and a broken one
#
# Now a run that goes wrong. Both runs below start from the same initialisation as above and use learning
# rate 0.1 on the values and the readout. The **healthy** run uses 0.1 on the queries and keys too (the
# matched-learning-rate control of chapter 5). The **broken** run uses
# {glue:text}`diagnostics.broken_routing_lr:g` on $W_Q$ and $W_K$ — a routing learning rate far too large,
# the kind of mistake a mis-configured parameter group makes. The diagnostics were recorded densely over the
# first {glue:text}`diagnostics.early_horizon` steps, then every {glue:text}`diagnostics.track_every` steps;
# {numref}`fig-diagnostics-healthy-broken` shows both runs.

# %% tags=["hide-input", "trained-output", "remove-output"]
healthy, broken = traces["healthy"], traces["broken"]
reading = runs.read_alarm(healthy, broken, cfg.steps)
fig = figures.plot_healthy_vs_broken(healthy, broken, reading, cfg.steps)
plotting.glue_figure("fig-diagnostics-healthy-broken", fig)

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-healthy-broken
# :name: fig-diagnostics-healthy-broken
# :alt: Four panels against the training step on a symmetric-log axis, the healthy run in green and the broken run in vermillion: training loss, normalized attention entropy, fraction of starved keys and routing-signal norm on a log axis, each crossed by a dashed vertical line at the alarm and a dotted one where the broken run's loss falls behind for good.
#
# The healthy run (learning rate 0.1 on every matrix) and the broken run (a much larger learning rate on $W_Q$ and
# $W_K$): training loss, normalized attention entropy $H(\alpha)/\log n$, share of starved keys and the norm of
# the routing signal $\partial L/\partial S$. Dashed: the step at which the diagnostics raise the alarm; dotted:
# the step from which the broken run's loss stays behind the healthy run's.
# ```

# %% tags=["trained-output", "hide-input"]
claims.glue("diagnostics.broken_routing_lr", cfg.broken_routing_lr)
claims.glue("diagnostics.track_every", cfg.track_every)
claims.glue("diagnostics.early_horizon", max(cfg.early_track))
pair_params = {
    **run_params,
    "healthy": "lr 0.1 on W_Q, W_K, W_V, W_O",
    "broken": f"lr {cfg.broken_routing_lr:g} on W_Q, W_K and 0.1 on W_V, W_O",
    "alarm": "H/log n < 0.1 or starved > 0.5",
}
report.record_alarm_claims(healthy, broken, reading, steps=cfg.steps, params=pair_params)
print(
    f"alarm at step {reading.alarm}; the loss falls behind for good from step "
    f"{reading.behind_or_end}"
)

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
# (symbol mutual information {glue:text}`diagnostics.healthy_final_mi_nats:.2f` nats).
# {numref}`fig-diagnostics-collapsed-heads` sets them side by side, at step {glue:text}`diagnostics.snapshot_step`,
# for the first {glue:text}`diagnostics.window` positions of the sequence.

# %% tags=["hide-input", "trained-output", "remove-output"]
claims.glue("diagnostics.snapshot_step", cfg.snapshot_step)
fig = figures.plot_collapsed_heads(healthy, broken, cfg.snapshot_step, cfg.window)
plotting.glue_figure("fig-diagnostics-collapsed-heads", fig)

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-collapsed-heads
# :name: fig-diagnostics-collapsed-heads
# :alt: Six heat maps in two columns, the healthy run on the left and the broken run on the right, over the first positions of the sequence with query position down and key position across: attention on top, compatibility in the middle and advantage at the bottom, each with its own colour bar.
#
# The head of each run early in training, over the first positions of the sequence: attention $\alpha_{ij}$ (top),
# compatibility $b_{ij}$ (middle) and advantage $\alpha_{ij}(\mathbb{E}_\alpha[b] - b_{ij})$ (bottom), the
# healthy run on the left and the broken run on the right. Each panel has its own colour scale: compare the
# advantage scales of the two runs.
# ```

# %% [markdown] tags=[]
# Left: the healthy run's attention is diffuse and its advantage matrix is dense — every key is still in play.
# Right: the broken run's attention is a single bright cell per row, and its advantage matrix is blank
# except on those cells, where a one-hot row has nothing to redistribute. The compatibility matrix $B$ is
# still informative in both (the error signal does not care about routing): it shows which values *would*
# help, but the gate $\alpha_{ij}$ in the routing law hides them from the gradient.

# %% [markdown] tags=[]
# ## The wind-tunnel transformer
#
# Chapter 6 trains this book's `CausalTransformer` ({glue:text}`diagnostics.tunnel_layers` layers ×
# {glue:text}`diagnostics.tunnel_heads` heads) on Paper I's bijection-elimination wind tunnel
# ($V = L =$ {glue:text}`diagnostics.tunnel_V`), with the exact posterior as its target.
# `runs.wind_tunnel_trace` re-trains it with chapter 6's settings and seed — the same weights, step
# for step — and diagnoses every one of its checkpoints on chapter 6's probe batch. Queries and keys are
# labelled by token type (key token or value token), so the specialization measure asks whether the heads
# route by token type, and key orthogonality is measured between the mean keys of the
# {glue:text}`diagnostics.tunnel_vocab` tokens. {numref}`fig-diagnostics-tunnel` follows the diagnostics along its
# training.

# %% tags=["hide-input", "trained-output", "remove-output"]
tunnel = traces["tunnel"]
tunnel_settings = wind_tunnels.BIJECTION_TUNNELS[cfg.tunnel_scale]  # chapter 6's model
probe = wind_tunnels.bijection_probe_batch(
    tunnel_settings, seed=cfg.tunnel_seed, n=cfg.tunnel_probe
)
tunnel_floor = float(stats.entropy(probe.posterior).mean())  # mean posterior entropy (nats)
plotting.glue_figure("fig-diagnostics-tunnel", figures.plot_tunnel_trace(tunnel, tunnel_floor))

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-tunnel
# :name: fig-diagnostics-tunnel
# :alt: Four panels against the training step on a symmetric-log axis for chapter 6's transformer: the probe loss falling toward a dashed Bayes floor, and one coloured curve per head for the normalized attention entropy, the routing-signal norm on a log axis and the mutual information between token types, with a dotted chance level.
#
# Chapter 6's bijection transformer, diagnosed at each checkpoint on its probe batch: the probe loss with the
# Bayes floor (dashed), and per head the normalized attention entropy, the norm of the routing signal
# $\partial L/\partial S$ and the mutual information between the token types of queries and of the keys they read,
# with its value under uniform attention (dotted).
# ```

# %% tags=["trained-output", "hide-input"]
tunnel_params = report.tunnel_params(cfg, int(probe.tokens.shape[0]))
tunnel_end = report.record_tunnel_claims(tunnel, floor_nats=tunnel_floor, params=tunnel_params)
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
# the frame–precision dissociation with one settling rule for both and states its cautions, and chapter 4's
# verdict on the order is {glue:text}`diagnostics.frame_row_verdict`.

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
encoder, encoder_trace, (eval_tokens, eval_targets) = traces[
    "encoder"
]  # trained above, with the other runs
encoder_end = encoder_trace.at(cfg.encoder_steps)
print(encoder_end.summary())

# %% tags=["hide-input", "trained-output", "remove-output"]
encoder_params = {"seed": seed, "V": 8, "L": 8, "steps": cfg.encoder_steps, "batch_size": 64}
encoder_params.update(
    lr=3e-3, optimizer="AdamW", d_model=64, n_heads=4, n_layers=2, eval_sequences=256
)
report.record_encoder_claims(encoder_trace, steps=cfg.encoder_steps, params=encoder_params)
claims.glue("diagnostics.encoder_bayes_floor", bijection.bayes_ce_floor_nats(8, 8))
claims.glue("diagnostics.encoder_blind_loss", float(np.log(8)))
claims.glue("diagnostics.encoder_steps", cfg.encoder_steps)
fig = diagnostics.plot_overview(
    [encoder_trace.at(0), encoder_end], labels=["step 0", f"step {cfg.encoder_steps}"]
)
fig.suptitle(
    "nn.TransformerEncoder on bijection elimination: every head, before and after training"
)
plotting.glue_figure("fig-diagnostics-encoder-overview", fig)

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-encoder-overview
# :name: fig-diagnostics-encoder-overview
# :alt: Four bar charts with one pair of bars per head of the nn.TransformerEncoder, before and after training: normalized attention entropy, fraction of starved keys, mean key cosine over its random baseline with a dashed line at 1, and the variance share of the values' first principal component.
#
# The overview `diagnostics.plot_overview` draws for every head of the `torch.nn` encoder, at initialisation and
# after training: normalized attention entropy (1: uniform), share of starved keys, the mean $|\cos|$ between keys
# over that of random vectors (dashed: equal), and the share of the values' variance on their first principal
# component.
# ```

# %% [markdown] tags=[]
# After {glue:text}`diagnostics.encoder_steps` steps the encoder's loss on held-out sequences is
# {glue:text}`diagnostics.encoder_final_loss:.3f` nats, between the context-blind level $\ln 8 =$
# {glue:text}`diagnostics.encoder_blind_loss:.3f` and the Bayes floor
# {glue:text}`diagnostics.encoder_bayes_floor:.3f`. The summary and the bars of {numref}`fig-diagnostics-encoder-overview` show what training did to each
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
# | $\lVert\partial L/\partial S\rVert$ small, entropy moderate, loss near its floor | routing has settled: the frame is in place | nothing |
# | $\lVert\partial L/\partial V\rVert$ stays large, value spectrum unchanged | the values are not learning (learning rate too small or frozen) | check the value parameter group |
# | mutual information at its chance level | no specialization: queries read every value alike | train longer, larger value step (chapter 5) |
# | key $\lvert\cos\rvert$ far above the random baseline | keys collapsed onto a few directions | same as for a collapse |
# | attention rows stable between checkpoints while $V$ keeps moving | routing has settled while the values refine (the frame–precision picture; whether the frame settles first: {glue:text}`diagnostics.frame_row_verdict`, chapter 4) | expected in healthy training |
#
# The whole tool is one call, `diagnostics.diagnose(model, inputs, targets)`, and
# `diagnostics.verify_against_autograd` checks it on a new architecture; `diagnostics.traced_fit` records
# it during training. The API page documents every function.
