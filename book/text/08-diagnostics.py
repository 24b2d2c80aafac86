# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@defe77cd56804a7482e7cf326b9890286f122525"

# %% [markdown] tags=[]
# # Diagnostics
#
# The paper closes with a practical suggestion (its Section 3, result 8 in our summary). The two matrices behind its
# gradient laws, the {term}`compatibility` matrix $B = U V^\top$ and the {term}`advantage` matrix, can be read off a
# model during training. They show which queries each value serves and whether routing has settled.
#
# This chapter turns the suggestion into a tool for any PyTorch attention model, and finds:
#
# - **The tool is exact.** On three models its matrices agree with automatic differentiation to
#   {glue:text}`diagnostics.max_autograd_rel_err:.0e` of the largest gradient, which is round-off.
# - **It catches a broken run early.** With a routing learning rate far too large, it raises the alarm at step
#   {glue:text}`diagnostics.broken_alarm_step`; the training loss falls behind for good only
#   {glue:text}`diagnostics.alarm_lead_steps` steps later.
# - **It shows routing settling while the values still learn.** In chapter 6's transformer, from step
#   {glue:text}`diagnostics.tunnel_mid_step` to the end no head's attention moves by more than
#   {glue:text}`diagnostics.tunnel_routing_tv_mid_to_end:.2f` in total variation, while every head's values still
#   change by at least {glue:text}`diagnostics.tunnel_value_change_mid_to_end:.0%`.
#
# ```{glue:figure} fig-diagnostics-healthy-broken
# :name: fig-diagnostics-healthy-broken
# :alt: Four panels against the training step on a symmetric-log axis, the healthy run in green and the broken run in vermillion: training loss, normalized attention entropy, fraction of starved keys and routing-signal norm on a log axis, each crossed by a dashed vertical line at the alarm and a dotted one where the broken run's loss falls behind for good.
#
# A healthy run (learning rate {glue:text}`diagnostics.healthy_lr:g` on every matrix) and a broken one (learning rate
# {glue:text}`diagnostics.broken_routing_lr:g` on $W_Q$ and $W_K$): training loss, normalized attention entropy, share
# of starved keys and the norm of the routing signal $\partial L/\partial S$. Dashed: the alarm; dotted: the step from
# which the broken run's loss stays behind.
# ```
#
# One caution frames everything below: neither task in this chapter needs learned routing. With uniform attention
# the bijection tunnel ends at {glue:text}`routing.bijection_uniform_kl_ratio:.2f` times the trained model's KL. With
# each query's attention pinned to its own position, the sticky chain's SGD run ends at
# {glue:text}`routing.sticky_sgd_loss_identity:.3f` nats, below the learned routing's
# {glue:text}`routing.sticky_sgd_loss_learned:.3f`. So the diagnostics here show routing settling, not routing that the task
# requires.
#
# We first define the two matrices and check the tool against autograd. Then we watch the paper's sticky-chain head
# under its two schedules, break a run on purpose, and end on two transformers.

# %% tags=["parameters", "remove-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 42  # the first seed of the paper's protocol
scale = "book"
device = "auto"  # the runs are small CPU jobs, the diagnostics run on the CPU
steps = None  # training steps of the sticky-chain runs (None: as the scale says)

# %% tags=["hide-input", "remove-output"]
import warnings

warnings.filterwarnings(
    "ignore", message="IProgress not found"
)  # tqdm's notebook check (no progress bars here)

from attention_dynamics import diagnostics, training
from attention_dynamics.chapters.diagnostics import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import frame_results
from attention_dynamics.science import stats
from attention_dynamics.tasks import sticky_chain
from attention_dynamics.training import wind_tunnels

cfg = settings.resolve(scale, device=device, steps=steps)
generator = seed_everything(seed)
plotting.use_book_style()

from attention_dynamics.ledger import routing_controls

routing_controls.glue_routing_controls()  # stored: chapter 9's routing controls

# %% [markdown] tags=[]
# ## What the tool measures
#
# For one head with attention weights $\alpha_{ij}$ (query $i$, key $j$), values $v_j$ and the {term}`error signal`
# $u_i = \partial L / \partial g_i$ at its context vector (chapter 1), the two matrices are
#
# ```{math}
# :label: eq-diag-compatibility
# B = U V^\top, \qquad b_{ij} = u_i \cdot v_j ,
# ```
#
# ```{math}
# :label: eq-diag-advantage
# A_{ij} = \alpha_{ij}\left(\E_{\alpha_i}[b] - b_{ij}\right) = -\frac{\partial L}{\partial s_{ij}} .
# ```
#
# Every row of $A$ sums to zero: attention is moved, not created. And $A$ is gated by $\alpha_{ij}$, so a key that
# receives no attention receives no routing signal either. Red in $A$ marks the keys toward which one gradient step
# moves attention.
#
# :::{dropdown} A note on signs
# The paper writes the advantage matrix as $\alpha \odot (B - \E_\alpha[b])$, which is exactly the score gradient
# $\partial L / \partial S$ of its boxed routing law. Since chapter 1 this book calls $\E_{\alpha_i}[b] - b_{ij}$ the
# advantage: positive means that gradient descent moves attention toward key $j$. The tool's `advantage_matrix` is
# therefore $A = -\partial L/\partial S$, the change of the scores in one gradient step per unit learning rate. The
# paper's matrix is the tool's `routing_gradient`. Both come straight from the laws of chapter 2
# (`attention_dynamics.science.gradients`).
# :::
#
# From these matrices, and from the captured keys and values, the tool computes for each head:
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
# $N_j^{\text{uniform}}$ is the soft count key $j$ would get if every query spread its attention evenly over the keys
# it can see. Below one hundredth of it, the key's value and score get almost no gradient. The labels of the
# specialization measure are whatever groups the reader cares about: in the sticky chain, the symbol each position
# carries.
#
# :::{dropdown} How the tool reads a model
# On this book's transformer, each attention module passes $q, k, v, \alpha$ and the per-head context $g$ through
# identity "probe" layers; forward hooks read them and autograd gives $u = \partial L / \partial g$.
#
# On `torch.nn.MultiheadAttention`, a pre-hook asks the module for per-head weights (`need_weights=True,
# average_attn_weights=False`). The per-head queries, keys and values are recomputed from its input projection, and
# $u$ is the gradient at the module's output mapped back through `out_proj`. A post-hook hands the caller exactly the
# output it asked for.
#
# Gradients are taken with `torch.autograd.grad`, so the parameters' `.grad` is never touched, and every hook is
# removed afterwards.
# :::

# %% [markdown] tags=[]
# ## The tool is exact
#
# Before trusting the matrices, we check them. The tool pushes the tensors it captured through the paper's laws and
# compares the result with the gradients that automatic differentiation computes in the same forward pass, in double
# precision. It does so on three models: a plain PyTorch transformer built from PyTorch's own encoder layers, this
# book's transformer, and the paper's sticky-chain head at initialisation on a full training sequence.

# %% tags=["hide-cell"]
checks = runs.autograd_checks(seed, generator)  # float64, against autograd
chain = sticky_chain.make_sticky_chain_data(seed)  # x (1999, 20), y (1999,)
report.record_autograd_checks(checks, seed=seed)

# %% [markdown] tags=[]
# Relative to the largest gradient entry, the disagreement is
# {glue:text}`diagnostics.torch_mha_vs_autograd_rel_err:.1e` on the PyTorch encoder,
# {glue:text}`diagnostics.probes_vs_autograd_rel_err:.1e` on the book's transformer and
# {glue:text}`diagnostics.single_head_vs_autograd_rel_err:.1e` on the sticky-chain head. That is round-off: the
# matrices are the gradients, not an approximation of them.
#
# :::{dropdown} What the unit tests add
# The unit tests check the tool against known answers. One-hot attention gives a zero advantage matrix, a value no
# query attends to is reported starved, and hand-built orthogonal keys have zero orthogonality. They also check the
# capture on batch-first and sequence-first, causal and bidirectional, pre- and post-LayerNorm stacks of PyTorch's
# encoder layers.
# :::

# %% [markdown] tags=[]
# ## The sticky-chain head under SGD and the EM-like schedule
#
# The paper's named experiment (chapter 5) trains one head on a sticky Markov chain over
# {glue:text}`diagnostics.n_symbols` symbols. The input at position $t$ is the previous symbol's mean vector plus
# noise; the target is the next symbol. We train the head from one initialisation (seed
# {glue:text}`diagnostics.seed`) under the paper's two schedules. SGD uses learning rate
# {glue:text}`diagnostics.sgd_lr:g` on every matrix; the EM-like schedule raises the values' rate to
# {glue:text}`diagnostics.em_like_value_lr:g`. We diagnose the head on its training sequence at initialisation,
# halfway and at the end.

# %% tags=["trained-output", "hide-input"]
snapshots = [0, cfg.mid_step, cfg.steps]
jobs = runs.chapter_jobs(cfg, seed=seed)  # the longest first: the two cores finish together
traces = dict(zip(jobs, training.map_parallel(runs.run_experiment, list(jobs.values()))))
report.glue_settings(cfg, seed=seed, positions=int(chain.x.shape[0]))

# %% tags=["trained-output", "remove-input"]
hmin = sticky_chain.bayes_floor_nats(sticky_chain.transition_matrix("reference"))
report.glue_schedule_positions(traces, floor_nats=hmin)  # chapter 5's share of the way to the floor
# chapter 4 measures the order of frame and precision; its stored result gives the finding here
report.glue_frame_row(frame_results.frame_row_verdict(frame_results.load_frame_definitions()))

# %% tags=["trained-output", "hide-cell"]
runs.schedule_table(traces, snapshots)

# %% [markdown] tags=[]
# In {glue:text}`diagnostics.steps:,` steps at the paper's learning rates the head barely leaves its initial state. Its
# attention stays almost uniform over up to {glue:text}`diagnostics.positions:,` keys: the normalized entropy ends at
# {glue:text}`diagnostics.sgd_final_norm_entropy:.3f` under SGD and
# {glue:text}`diagnostics.em_like_final_norm_entropy:.3f` under the EM-like schedule. In the loss, SGD covers
# {glue:text}`diagnostics.sgd_share_of_way:.0%` of the way from the context-blind level to the Bayes floor, and the
# EM-like schedule {glue:text}`diagnostics.em_like_share_of_way:.0%`.
#
# Yet the matrices already tell the two schedules apart:
#
# - **Specialization.** Under the EM-like schedule, the mutual information between the symbol a query carries and the
#   symbol of the values it reads rises to {glue:text}`diagnostics.em_like_final_mi_nats:.3f` nats. Under SGD it
#   reaches {glue:text}`diagnostics.sgd_final_mi_nats:.3f`; uniform attention would give
#   {glue:text}`diagnostics.em_like_final_mi_chance_nats:.1e`.
# - **Routing signal.** Its norm $\lVert \partial L/\partial S \rVert$ grows by a factor
#   {glue:text}`diagnostics.em_like_routing_signal_growth:.1f` under the EM-like schedule and
#   {glue:text}`diagnostics.sgd_routing_signal_growth:.2f` under SGD.
# - **Value spectrum.** The values concentrate on fewer directions. Their first principal component carries
#   {glue:text}`diagnostics.em_like_final_value_pc1:.0%` of the variance at the end, against
#   {glue:text}`diagnostics.initial_value_pc1:.0%` at initialisation (SGD:
#   {glue:text}`diagnostics.sgd_final_value_pc1:.0%`).
#
# These are what a {glue:text}`diagnostics.value_lr_ratio:g` times larger value step produces; this run has no control
# that would attribute them to chapter 3's feedback loop. The folded table above lists every metric at the three
# checkpoints; its key orthogonality is measured between the symbols' mean keys.
#
# {numref}`fig-diagnostics-routing-by-symbol` shows *which* values serve which queries. For every pair of symbols it
# plots the attention mass that queries carrying symbol $a$ put on keys carrying symbol $c$, minus what uniform
# attention would give.

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
# At initialisation the pattern is faint and random. Under SGD it hardly changes; under the EM-like schedule a few key
# symbols start to collect the attention of several query symbols.
#
# The tool also measures how far routing and values move between checkpoints. From initialisation to step
# {glue:text}`diagnostics.mid_step`, the EM-like run's attention rows move by a total variation of
# {glue:text}`diagnostics.em_like_routing_tv_first_half:.3f` on average (zero is no change, one is disjoint rows).
# Its value vectors change by {glue:text}`diagnostics.em_like_value_change_first_half:.0%` of their norm. Under SGD
# the two are {glue:text}`diagnostics.sgd_routing_tv_first_half:.3f` and
# {glue:text}`diagnostics.sgd_value_change_first_half:.0%`; the folded table below adds the second half.
#
# The two measures have no common scale, so they rank nothing against each other. Nor is this evidence for the
# two-timescale picture: the EM-like schedule gives the values a {glue:text}`diagnostics.value_lr_ratio:g` times
# larger step, so fast values and slow routing are what it is built to produce. Whether the frame settles before the
# values is chapter 4's question. Its answer: the picture {glue:text}`diagnostics.frame_row_label`.
# {glue:text}`diagnostics.frame_row_reason`
#
# :::{dropdown} Chapter 4's answer, measure by measure
# Chapter 4 times the settling of the frame and of the values by several measures, each under SGD and Adam:
# {glue:text}`diagnostics.frame_row_by_measure`.
# :::

# %% tags=["trained-output", "hide-cell"]
run_params = {"seed": seed, "steps": cfg.steps, "chain": "reference", "T": int(chain.x.shape[0])}
run_params["full_batch"] = True
report.record_schedule_claims(traces, steps=cfg.steps, mid_step=cfg.mid_step, run_params=run_params)

# %% [markdown] tags=[]
# The tool also draws the position-level matrices of one head. {numref}`fig-diagnostics-em-like-head` shows the last
# {glue:text}`diagnostics.window` positions of the sequence for the EM-like run at the end of training. Attention is
# still spread thinly over all earlier positions, each weight of the order of one over the number of positions. But
# the advantage matrix already has a clear red-and-blue structure. For each query a few keys would gain attention at
# the next step and the others would lose it, and each row sums to zero.

# %% tags=["hide-input", "trained-output", "remove-output"]
T = int(chain.x.shape[0])
window = slice(T - cfg.window, T)
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
# Now a run that goes wrong on purpose. Both runs start from the same initialisation and use learning rate
# {glue:text}`diagnostics.healthy_lr:g` on the values and the readout. The healthy run uses
# {glue:text}`diagnostics.healthy_lr:g` on the queries and keys too (chapter 5's matched-learning-rate control). The
# broken run uses {glue:text}`diagnostics.broken_routing_lr:g` on $W_Q$ and $W_K$: a routing learning rate far too
# large, the kind of mistake a misconfigured parameter group makes. {numref}`fig-diagnostics-healthy-broken`, at the
# top of the chapter, follows both runs.

# %% tags=["hide-input", "trained-output", "remove-output"]
healthy, broken = traces["healthy"], traces["broken"]
reading = runs.read_alarm(healthy, broken, cfg.steps)
fig = figures.plot_healthy_vs_broken(healthy, broken, reading, cfg.steps)
plotting.glue_figure("fig-diagnostics-healthy-broken", fig)

# %% tags=["trained-output", "hide-cell"]
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
# The diagnostics raise the alarm at step {glue:text}`diagnostics.broken_alarm_step`. By then the broken run's
# attention has collapsed onto one key per query (normalized entropy
# {glue:text}`diagnostics.broken_entropy_at_alarm:.3f`), and {glue:text}`diagnostics.broken_starved_at_alarm:.0%` of
# the keys are starved.
#
# The loss tells a different story. Apart from a few blips, the broken run's loss is *lower* than the healthy run's
# through the early phase: on {glue:text}`diagnostics.broken_ahead_fraction:.0%` of the steps before it falls behind.
# A one-hot head that copies one past input is, at first, a better predictor than a near-uniform average over up to
# {glue:text}`diagnostics.positions:,` of them. Only from step {glue:text}`diagnostics.broken_loss_behind_step` does
# the broken run stay behind for good. The diagnostics were {glue:text}`diagnostics.alarm_lead_steps` steps ahead of
# the learning curve.
#
# The matrices also say *why* the run will not recover. With one-hot rows the advantage matrix is zero (chapter 2's
# one-hot limit). The broken run's routing signal ends at {glue:text}`diagnostics.broken_final_routing_signal:.1e`,
# against {glue:text}`diagnostics.healthy_final_routing_signal:.1e` for the healthy run. And
# {glue:text}`diagnostics.broken_final_starved:.0%` of its keys are starved, so their values are never updated: the
# frame froze at a random pattern by step {glue:text}`diagnostics.broken_alarm_step`. After
# {glue:text}`diagnostics.steps:,` steps the broken run's loss is {glue:text}`diagnostics.broken_final_loss:.3f` nats,
# against {glue:text}`diagnostics.healthy_final_loss:.3f` for the healthy run, whose routing specialized (symbol
# mutual information {glue:text}`diagnostics.healthy_final_mi_nats:.2f` nats).
#
# {numref}`fig-diagnostics-collapsed-heads` sets the two heads side by side at step
# {glue:text}`diagnostics.snapshot_step`, over the first {glue:text}`diagnostics.window` positions of the sequence.

# %% tags=["hide-input", "trained-output", "remove-output"]
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
# On the left, the healthy run's attention is diffuse and its advantage matrix is dense: every key is still in play.
# On the right, the broken run's attention is a single bright cell per row. Its advantage matrix is blank except on
# those cells, where a one-hot row has nothing to redistribute. The compatibility matrix $B$ stays informative in
# both, since the error signal does not depend on routing. It shows which values *would* help, but the gate
# $\alpha_{ij}$ in the routing law hides them from the gradient.

# %% [markdown] tags=[]
# ## The wind-tunnel transformer
#
# Chapter 6 trains this book's transformer ({glue:text}`diagnostics.tunnel_layers` layers ×
# {glue:text}`diagnostics.tunnel_heads` heads) on Paper I's bijection-elimination wind tunnel
# ($V = L =$ {glue:text}`diagnostics.tunnel_V`), with the exact posterior as its target. Here it is re-trained with
# chapter 6's settings and seed, which gives the same weights step for step. Every checkpoint is diagnosed on chapter
# 6's probe batch. Queries and keys are labelled by token type (key token or value token), so the specialization
# measure asks whether the heads route by token type. {numref}`fig-diagnostics-tunnel` follows the diagnostics along
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

# %% tags=["trained-output", "hide-cell"]
tunnel_params = report.tunnel_params(cfg, int(probe.tokens.shape[0]))
tunnel_end = report.record_tunnel_claims(tunnel, floor_nats=tunnel_floor, params=tunnel_params)
print(tunnel_end.summary())

# %% [markdown] tags=[]
# At the end of training the probe loss is {glue:text}`diagnostics.tunnel_final_loss:.4f` nats against a Bayes floor
# of {glue:text}`diagnostics.tunnel_floor:.4f`; chapter 6 measures the calibration in detail. The diagnostics show how
# the network gets there, and that its heads divide the work. At the key positions, head
# {glue:text}`diagnostics.tunnel_best_head` puts {glue:text}`diagnostics.tunnel_value_reading:.0%` of its attention on
# the revealed value tokens: the values that must be eliminated from the posterior. Uniform attention would put
# {glue:text}`diagnostics.tunnel_value_reading_chance:.0%` there, and head {glue:text}`diagnostics.tunnel_least_head`
# puts only {glue:text}`diagnostics.tunnel_least_value_reading:.0%`.
#
# The routing signal of every head falls by orders of magnitude as the loss approaches its floor. Between step
# {glue:text}`diagnostics.tunnel_mid_step` and step {glue:text}`diagnostics.tunnel_end_step:,`, no head's attention rows
# move by more than {glue:text}`diagnostics.tunnel_routing_tv_mid_to_end:.3f` in total variation. Every head's value
# vectors still change by at least {glue:text}`diagnostics.tunnel_value_change_mid_to_end:.0%` of their norm. The two
# numbers have no common unit, so on their own they do not show that the frame settles first. Chapter 6 measures
# that order with one settling rule for both, and states its cautions.

# %% [markdown] tags=[]
# ## Any PyTorch transformer
#
# The tool does not need this book's models. Here it diagnoses a small causal transformer written with nothing but
# `torch.nn`: token and position embeddings, two pre-LayerNorm encoder layers of four heads under a causal mask, and a
# linear readout. It is trained with AdamW on Paper I's bijection-elimination wind tunnel, with
# {glue:text}`diagnostics.encoder_V` symbols and {glue:text}`diagnostics.encoder_L` keys. The loss is the
# cross-entropy at the key positions, where the exact posterior is uniform over the values not yet revealed. The
# calls are the same as for any model:
#
# ```python
# # targets: −100 where there is nothing to predict
# diag = diagnostics.diagnose(model, tokens, targets)
# print(diag.summary())
# diag.plot_head(layer=1, head=0)
# ```

# %% tags=["trained-output", "hide-cell"]
encoder, encoder_trace, (eval_tokens, eval_targets) = traces["encoder"]
encoder_end = encoder_trace.at(cfg.encoder_steps)
print(encoder_end.summary())

# %% tags=["hide-input", "trained-output", "remove-output"]
encoder_params = {"seed": seed, "V": 8, "L": 8, "steps": cfg.encoder_steps, "batch_size": 64}
encoder_params.update(
    lr=3e-3, optimizer="AdamW", d_model=64, n_heads=4, n_layers=2, eval_sequences=256
)
report.record_encoder_claims(encoder_trace, steps=cfg.encoder_steps, params=encoder_params)
fig = figures.plot_encoder_overview(encoder_trace, cfg.encoder_steps)
plotting.glue_figure("fig-diagnostics-encoder-overview", fig)

# %% [markdown] tags=[]
# ```{glue:figure} fig-diagnostics-encoder-overview
# :name: fig-diagnostics-encoder-overview
# :alt: Four bar charts with one pair of bars per head of the nn.TransformerEncoder, before and after training: normalized attention entropy, fraction of starved keys, mean key cosine over its random baseline with a dashed line at 1, and the variance share of the values' first principal component.
#
# The tool's overview of every head of the PyTorch encoder, at initialisation and after training: normalized attention entropy (1: uniform), share of starved keys, the mean $|\cos|$ between keys
# over that of random vectors (dashed: equal), and the share of the values' variance on their first principal
# component.
# ```

# %% [markdown] tags=[]
# After {glue:text}`diagnostics.encoder_steps` steps the encoder's loss on held-out sequences is
# {glue:text}`diagnostics.encoder_final_loss:.3f` nats. That lies between the context-blind level
# {glue:text}`diagnostics.encoder_blind_loss:.3f` and the Bayes floor {glue:text}`diagnostics.encoder_bayes_floor:.3f`.
# The printed summary (folded above) and the bars of {numref}`fig-diagnostics-encoder-overview` show what training did
# to each of the eight heads. Attention has sharpened everywhere, and no head has collapsed. The token-type labels
# show the division of labour the task needs. At key positions, head {glue:text}`diagnostics.encoder_best_head` puts
# {glue:text}`diagnostics.encoder_best_value_reading:.0%` of its attention on the revealed value tokens, where uniform
# attention would put {glue:text}`diagnostics.encoder_value_reading_chance:.0%`. Those are the values that must be
# eliminated from the posterior.

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
# | attention rows stable between checkpoints while $V$ keeps moving | routing has settled while the values refine (the frame–precision picture, which {glue:text}`diagnostics.frame_row_label` in chapter 4) | expected in healthy training |
#
# All of it is one call on a model, its inputs and its targets; a second call checks the tool on a new architecture,
# and a third records the diagnostics during training. The folded block below lists them, with the chapter's settings.

# %% [markdown] tags=[]
# ::::{dropdown} Settings
# | run | settings |
# |---|---|
# | sticky-chain runs | seed {glue:text}`diagnostics.seed`; {glue:text}`diagnostics.steps:,` full-batch steps on one training sequence of {glue:text}`diagnostics.positions:,` positions; checkpoints at initialisation, step {glue:text}`diagnostics.mid_step` and step {glue:text}`diagnostics.steps:,`; key orthogonality between the mean keys of the {glue:text}`diagnostics.n_symbols` symbols |
# | learning rates | SGD: {glue:text}`diagnostics.sgd_lr:g` on every matrix; EM-like: {glue:text}`diagnostics.em_like_value_lr:g` on the values, {glue:text}`diagnostics.sgd_lr:g` on the rest; healthy run: {glue:text}`diagnostics.healthy_lr:g` on every matrix; broken run: {glue:text}`diagnostics.broken_routing_lr:g` on $W_Q$ and $W_K$, {glue:text}`diagnostics.healthy_lr:g` on the rest |
# | healthy and broken runs | diagnosed densely over the first {glue:text}`diagnostics.early_horizon` steps, then every {glue:text}`diagnostics.track_every` steps; heads drawn at step {glue:text}`diagnostics.snapshot_step`; alarm when some head's normalized entropy falls below {glue:text}`diagnostics.alarm_entropy:g` or more than {glue:text}`diagnostics.alarm_starved:.0%` of its keys are starved |
# | chapter 6's transformer | {glue:text}`diagnostics.tunnel_layers` layers × {glue:text}`diagnostics.tunnel_heads` heads, $V = L =$ {glue:text}`diagnostics.tunnel_V`, seed {glue:text}`diagnostics.tunnel_seed`; diagnosed at {glue:text}`diagnostics.tunnel_checkpoints` checkpoints on {glue:text}`diagnostics.tunnel_probe` probe sequences; key orthogonality between the mean keys of its {glue:text}`diagnostics.tunnel_vocab` tokens |
# | PyTorch encoder | {glue:text}`diagnostics.encoder_V` symbols and {glue:text}`diagnostics.encoder_L` keys; width {glue:text}`diagnostics.encoder_d_model`; AdamW at learning rate {glue:text}`diagnostics.encoder_lr:g`, batches of {glue:text}`diagnostics.encoder_batch_size`, {glue:text}`diagnostics.encoder_steps` steps; diagnosed on {glue:text}`diagnostics.encoder_eval_sequences` held-out sequences |
# | figures | windows of {glue:text}`diagnostics.window` positions |
# ::::
#
# ::::{dropdown} Run it yourself
# The tool on any model (`attention_dynamics.diagnostics`; the API page documents every function):
#
# ```python
# from attention_dynamics import diagnostics
#
# diag = diagnostics.diagnose(model, inputs, targets)  # one batch: every head's matrices and metrics
# diagnostics.verify_against_autograd(model, inputs, targets)  # check the tool on a new architecture
# trace = diagnostics.traced_fit(model, batches, steps=..., optimizer=..., diagnose_inputs=inputs,
#                                diagnose_targets=targets)  # record the diagnostics during training
# ```
#
# Re-execute this chapter (it writes the notebook and the claims it records into `book/claims.json`):
#
# ```bash
# .venv/bin/python -m attention_dynamics reproduce --chapter 8 --force --no-build
# ```
#
# The chapter reads chapter 4's stored result on the order of frame and precision; to compute it again and make it
# the one the chapters read:
#
# ```bash
# .venv/bin/python -m attention_dynamics compute frame_definitions --promote
# ```
#
# The tool's unit tests and the chapter's own:
#
# ```bash
# .venv/bin/python -m pytest tests/test_diagnostics.py tests/test_chapter_diagnostics.py
# ```
# ::::
