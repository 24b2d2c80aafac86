# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@fe3cd7415fc9c20fd6c4f3ca094d8d58bd89346e"

# %% [markdown] tags=[]
# # A tunnel that needs routing
#
# The paper's picture of training is about routing: cross-entropy moves attention by *advantage*, the values specialise to
# the queries that use them, and routing settles before the values' precision does {cite}`agarwal2025gradient`. A task
# can test that picture only if the same model cannot solve it without learned routing. This chapter checks that
# condition for the book's trained experiments, then tests the picture on a tunnel that meets it.
#
# - **The bijection tunnel and the sticky chain do not need learned routing.** With uniform attention the bijection
#   transformer ends at {glue:text}`routing_need.bijection.uniform_kl_ratio:.2f` times its trained KL. The sticky chain
#   trains better with its routing pinned to the identity than learned. What routing does is *not tested* on
#   them; chapter 4's recall head does test it.
# - **Binding needs routing, and there routing is in place first.** When keys come back, a key's value must be found by
#   its content: uniform attention gives back {glue:text}`routing_need.binding.uniform_gap_lost_fraction:.0%` of the
#   untrained gap. Freezing the routing from step {glue:text}`ch9.first_free_step` on costs nothing, while the KL still
#   falls {glue:text}`binding.kl_fall_after_free_freeze:.0f`-fold after that step.
# - **The EM-like speed-up does not come from routing.** On the sticky chain it grows from
#   {glue:text}`ch9.sticky_speedup_learned:.1f`× to {glue:text}`routing_need.sticky.speedup_identity_routing:.1f`× when
#   the routing is pinned rather than learned: a step-size effect.

# %% tags=["parameters", "hide-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"

# %% tags=["remove-input"]
from attention_dynamics.chapters.binding_tunnel import (
    binding_tunnel,
    figures,
    report,
    routing_controls,
    settings,
)
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import routing_controls as routing_numbers

cfg = settings.resolve(scale, device=device)  # fast / book / paper
seed_everything(seed)
plotting.use_book_style()
controls = routing_controls.ROUTING_CONTROLS.load()  # stored: every task's routing controls
tunnel = binding_tunnel.BINDING_TUNNEL.load()  # stored: the binding tunnel's runs
levels = report.reference_levels(tunnel["settings"]["tunnel"], seed=seed)
need = report.record_routing_need_claims(controls, tunnel)
found = report.record_binding_claims(tunnel)
report.glue_chapter(controls, tunnel, levels)
routing_numbers.glue_routing_controls(controls)

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-routing-need", figures.plot_routing_need(controls, tunnel))

# %% [markdown] tags=[]
# ```{glue:figure} fig-routing-need
# :name: fig-routing-need
# :alt: Dot plot, one row per task: the error of the same model with uniform attention and with routing frozen at initialisation, divided by the trained model's error, on a log scale, with a dashed line at the bound above which a task needs routing.
#
# Which tasks need routing: the same model with its routing removed (uniform attention) or frozen at initialisation,
# its error over the trained model's (geometric mean over seeds, 95 % interval). Right of the dashed line, a task
# cannot be solved as well without learned routing.
# ```
#
# ## Which tasks need routing
#
# Three controls remove or fix a model's routing, its query and key weights, and keep everything else. *Uniform*
# sets $W_Q = W_K = 0$, so every head averages the positions it sees. *Frozen* keeps $W_Q$ and $W_K$ at their initial
# values. Where the task's Bayes routing is known, it is *pinned*: the sticky chain's posterior needs only the current
# symbol, so each query reads its own input. A task needs routing when the control ends above
# {glue:text}`ch9.free_ratio` times the trained model's error over the whole 95 % interval across seeds
# ({numref}`fig-routing-need`).
#
# Chapter 4's recall head needs it. With uniform attention it ends at
# {glue:text}`routing_need.recall_head.uniform_loss_ratio:.0f` times the trained head's probe loss, giving back
# {glue:text}`routing_need.recall_head.uniform_gap_lost_fraction:.0%` of what training gains.
#
# Bijection elimination does not. Its posterior depends only on *which* values have appeared, a bag of the prefix's
# tokens, and an average over the visible tokens carries that bag. Uniform attention reaches
# {glue:text}`ch9.bijection_uniform_kl_bits:.5f` bits against the trained model's
# {glue:text}`ch9.bijection_learned_kl_bits:.5f`.
#
# The sticky chain does not either. Its Bayes routing is the identity, and pinned, it trains further in 1,000 steps than
# the learned routing: SGD ends at {glue:text}`routing_need.sticky.sgd_loss_identity:.3f` nats against
# {glue:text}`routing_need.sticky.sgd_loss_learned:.3f` ($H_{\min}$ = {glue:text}`ch9.sticky_hmin_nats:.3f`).
#
# These two tasks still show what a trained model *does*, but not what routing *does*. On them the paper's statements
# about routing are not tested, and the verdict page says so.
#
# :::{admonition} Controls not run
# :class: dropdown
#
# Chapter 6's HMM transformer (about six CPU-minutes a run), chapter 7's grid of five families and chapter 8's models
# have no controls in this version of the book: the runs did not fit its compute budget. For Mamba the analogous control
# would freeze its input-dependent selection (the $\Delta$, $B$ and $C$ projections). The LSTM routes nothing across
# positions by content and the MLPs have no routing, so they have none. The binding tunnel's frozen control was run at
# the chapter's budget only, and the authors' two-hop task without a control.
# :::

# %% tags=["hide-cell"]
report.routing_need_table(controls, tunnel)

# %% [markdown] tags=[]
# ## The binding tunnel
#
# Binding keeps bijection's layout and changes one thing: the keys are drawn *with replacement*. Each sequence draws a
# fresh random map from {glue:text}`ch9.V` keys to {glue:text}`ch9.V` values and {glue:text}`ch9.L` keys. After each
# key the model sees the pair it revealed, as one token. At a key it has seen before, the answer is the value stored
# with that key, wherever it sits: the model must find it by content. At a new key, the answer is uniform over the
# values not revealed yet. About {glue:text}`ch9.repeat_share:.0%` of the keys are repeats.
#
# The exact posterior sets two reference levels. A model that sees only the current key is
# {glue:text}`ch9.context_blind_kl_bits:.3f` bits from it. One that knows which keys and values were revealed, but not
# which went together, is {glue:text}`ch9.pairing_blind_kl_bits:.3f` bits away: that gap is what binding is worth.
#
# The model is chapter 6's bijection transformer with its training unchanged: {glue:text}`ch9.steps` steps of AdamW on
# fresh batches, {glue:text}`ch9.n_seeds` seeds. It ends at {glue:text}`binding.kl_bits_trained:.4f` bits. With uniform
# attention the same model ends at {glue:text}`ch9.uniform_kl_bits:.3f` bits, and with its routing frozen at
# {glue:text}`ch9.frozen_kl_bits:.3f`. Trained {glue:text}`ch9.steps_x4` steps, four times as long, uniform attention
# does learn binding from the bag of pair tokens, but slowly: it ends at
# {glue:text}`routing_need.binding.uniform_kl_ratio_x4:.0f` times the KL of the trained model run as long.

# %% [markdown] tags=[]
# ## Frame before precision, on a task that needs a frame
#
# The paper reads its two laws as two timescales: routing settles first, the values keep refining. Chapter 6 could
# not test this, because its tunnel needs no routing. Here the attention that the reading head puts on the answer's
# source rises from {glue:text}`ch9.attention_on_source_init:.2f` to {glue:text}`ch9.attention_on_source_end:.2f`, half
# of the way by step {glue:text}`ch9.transition_step_median:.0f` ({numref}`fig-binding-frame`). The KL keeps falling
# long after.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-binding-frame", figures.plot_frame_before_precision(tunnel))

# %% [markdown] tags=[]
# ```{glue:figure} fig-binding-frame
# :name: fig-binding-frame
# :alt: Line plot over training steps: the attention of the reading head on the answer's source rises steeply in the first few hundred steps and then stays flat, while the KL from the exact posterior, on a log axis, keeps falling to the end; one line per seed.
#
# Routing against calibration through training, every seed: the attention the reading head puts on the answer's
# source (left axis) and the KL from the exact posterior (right axis, log scale).
# ```
#
# The causal test freezes the routing from step $t$ on and trains everything else to the end
# ({numref}`fig-binding-freeze`). Frozen from step {glue:text}`ch9.first_freeze_step`, the model ends at
# {glue:text}`ch9.first_freeze_ratio:.0f` times the trained model's KL. From step {glue:text}`ch9.first_free_step` on,
# freezing costs nothing: the frozen model ends within {glue:text}`ch9.free_ratio` times the trained model's KL over the
# whole interval across seeds. At that step the trained model's KL is still
# {glue:text}`binding.kl_fall_after_free_freeze:.0f` times its final value. The routing is in place; the precision is
# not.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-binding-freeze", figures.plot_freeze_sweep(tunnel))

# %% [markdown] tags=[]
# ```{glue:figure} fig-binding-freeze
# :name: fig-binding-freeze
# :alt: Two lines against the step at which routing is frozen, on a log axis: the frozen model's KL over the trained model's falls to the dashed bound within a few hundred steps; the trained model's KL at that step over its final KL stays well above it.
#
# Freezing routing from step $t$: the frozen model's final KL over the trained model's (95 % interval over seeds) and
# the trained model's KL at step $t$ over its final KL. Below the dashed line, freezing costs nothing.
# ```
#
# :::{admonition} The other definitions of "settled"
# :class: dropdown
#
# The book's other definitions (chapter 4 sets them out) read the same runs. By the parameter path the frame settles
# first on {glue:text}`binding.order_path:.0%` of the seeds; by the function, on {glue:text}`binding.order_function:.0%`;
# by the attention's similarity to its final pattern, on {glue:text}`binding.order_similarity:.0%`. With
# {glue:text}`ch9.n_seeds` seeds, a share is decided only when all of them agree.
# :::

# %% tags=["hide-cell"]
report.freeze_table_for_reading(tunnel)

# %% [markdown] tags=[]
# ## The advantage law's predictions
#
# The routing law predicts the gradient's direction: a query's score on a position rises when that position's value is
# more useful for its error than the average it reads ($b_{ij} < \E_{\alpha_i}[b]$). At repeated keys we know which
# position holds the answer. At initialisation the law pulls attention toward it on a net
# {glue:text}`binding.advantage_routing_margin_init:+.0%` of the queries, against the other revealed positions; at the
# routing transition, on {glue:text}`binding.advantage_routing_margin_transition:+.0%`. Positive feedback, the
# source's advantage growing under a value step, shows a net {glue:text}`binding.feedback_margin_init:+.0%` and
# {glue:text}`binding.feedback_margin_transition:+.0%`.
#
# ## The geometry
#
# Paper I's geometry, read on the trained binding model beside two nulls: the untrained model and the model trained
# with uniform attention. The layer-0 keys of the key tokens have a mean $|\cos|$ of
# {glue:text}`binding.key_abs_cos_layer0_key_tokens:.2f` (untrained: {glue:text}`ch9.key_abs_cos_untrained:.2f`; Paper
# I: below 0.1). The value manifold's first component carries {glue:text}`binding.value_pc1_ratio:.0%` of the variance
# (untrained {glue:text}`ch9.value_pc1_ratio_untrained:.0%`, uniform attention
# {glue:text}`ch9.value_pc1_ratio_uniform:.0%`). It is ordered by the posterior's entropy with Spearman $\rho$ =
# {glue:text}`binding.value_pc1_entropy_spearman:.2f` (untrained {glue:text}`ch9.value_pc1_entropy_spearman_untrained:.2f`,
# uniform attention {glue:text}`ch9.value_pc1_entropy_spearman_uniform:.2f`). Here the entropy depends on the content,
# since a repeated key's posterior is a point mass, so the ordering is inference rather than position. The attention
# entropy falls by {glue:text}`binding.attention_entropy_reduction:.0%` from the first layer to the last (Paper I:
# 85–90 %).
#
# ## The EM-like step
#
# Ten times the step on the value projections, the paper's "EM-like" schedule, gives
# {glue:text}`binding.em_like_speedup:.2f`× on the paper's metric here, and
# {glue:text}`binding.em_like_speedup_frozen_routing:.2f`× with the routing frozen ({numref}`fig-binding-em`). On the
# sticky chain the speed-up grows when the routing cannot be learned:
# {glue:text}`routing_need.sticky.speedup_frozen_routing:.1f`× with it frozen and
# {glue:text}`routing_need.sticky.speedup_identity_routing:.1f`× with the Bayes routing pinned, against
# {glue:text}`ch9.sticky_speedup_learned:.1f`× with it learned. The schedule is fast because its step is larger, not
# because it learns the routing.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-binding-em", figures.plot_em_like(tunnel))

# %% [markdown] tags=[]
# ```{glue:figure} fig-binding-em
# :name: fig-binding-em
# :alt: Two panels of training-loss curves, routing learned and routing frozen, each with the plain step and the EM-like step (ten times the step on the value projections).
#
# The EM-like step on the binding tunnel: the training loss (50-step moving average, mean over seeds) of the plain and
# the EM-like step, with routing learned and frozen.
# ```
#
# ## The authors' two-hop task
#
# The authors' binding task keeps key and value as separate tokens and draws a random map, so a repeated key's value
# sits one token after its earlier occurrence: a two-hop lookup. Trained {glue:text}`ch9.two_hop_steps` steps, four times
# the chapter's budget, our model ends at {glue:text}`binding.two_hop_kl_bits:.3f` bits, with a per-sample entropy error
# of {glue:text}`ch9.two_hop_entropy_mae_bits:.3f` bits. In the authors' own pilot, at Paper I's sizes (V = 20,
# L = 19, 20,000 steps), the same task reaches 0.05 bits of entropy error in about 3,000 steps and about 1e-4 bits at the
# end. With bijection's trained routing transplanted and frozen it needs 8,000 to 11,000 steps to reach 0.05
# {cite}`dalal2026workspace`.
#
# ## Summary
#
# - **"Routing settles before the values' precision"** holds where it can be tested. On binding, freezing the routing
#   from step {glue:text}`ch9.first_free_step` on costs nothing while the KL still falls
#   {glue:text}`binding.kl_fall_after_free_freeze:.0f`-fold. Chapter 6's bijection tunnel cannot test it.
# - **"The EM-like schedule is fast because of its E-step"** does not hold: the speed-up is larger with the routing
#   frozen or pinned than learned.
# - **Paper I's geometry** on binding: see the section above, each number beside its untrained and uniform nulls.
#
# :::{admonition} Run it yourself
# :class: dropdown
#
# The chapter reads two stored results, computed once: `python -m attention_dynamics compute routing_controls`
# (about 40 CPU-minutes) and `python -m attention_dynamics compute binding_tunnel` (about 1.6 CPU-hours); both resume
# where a stopped run left off. Re-execute the chapter with `python -m attention_dynamics reproduce --chapter 9 --force`.
# The stored runs use their own fixed seeds (the paper's five for the sticky chain, 0–2 for the tunnels and the recall
# head); the chapter's `seed` sets the batch on which the reference levels are computed.
# :::
