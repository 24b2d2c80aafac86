# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] tags=[]
# # A tunnel that needs routing
#
# The paper's dynamic claims are about routing: cross-entropy moves attention by *advantage*, the values specialise to
# the queries that use them, and routing settles before the values' precision does {cite}`agarwal2025gradient`. A task
# tests such a claim only if the same model cannot solve it without learned routing. This chapter checks that
# condition for every trained experiment of the book, then decides the dynamic claims on a tunnel that meets it.
#
# - **Most of the book's tasks do not need routing.** With uniform attention the bijection tunnel ends at
#   {glue:text}`routing_need.bijection.uniform_kl_ratio:.2f` times the trained model's KL, and the sticky chain trains
#   better with its routing pinned to the identity than learned. Their routing results are *not tested here*.
# - **Binding needs it.** When keys come back, a key's value must be found by its content. Uniform attention gives back
#   {glue:text}`routing_need.binding.uniform_gap_lost_fraction:.0%` of the untrained gap after the same budget.
# - **On binding, routing is in place first.** Freezing it from step {glue:text}`ch9.first_free_step` on costs
#   nothing, while the KL still falls {glue:text}`binding.kl_fall_after_free_freeze:.1f`-fold after that step.
#
# <!-- draft: the top box's wording follows the final numbers -->

# %% tags=["parameters", "hide-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"

# %% tags=["remove-input"]
from attention_dynamics.chapters.binding_tunnel import binding_tunnel, figures, report, routing_controls, settings
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import claims, verdicts

cfg = settings.resolve(scale, device=device)
seed_everything(seed)
plotting.use_book_style()
controls = routing_controls.ROUTING_CONTROLS.load()  # stored: every task's routing controls
tunnel = binding_tunnel.BINDING_TUNNEL.load()  # stored: the binding tunnel's runs
levels = report.reference_levels(tunnel["settings"]["tunnel"], seed=seed)
need = report.record_routing_need_claims(controls, tunnel)
found = report.record_binding_claims(tunnel)
report.glue_chapter(controls, tunnel, levels)

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
# sets $W_Q = W_K = 0$, so every head averages the positions it sees. *Frozen* keeps $W_Q, W_K$ at their initial
# values. Where the task's Bayes routing is known, it is *pinned*: the sticky chain's posterior needs only the current
# symbol, so each query reads its own input. A task needs routing when the control ends above
# {glue:text}`ch9.free_ratio` times the trained model's error, over the whole interval across seeds.
#
# Bijection elimination does not: its posterior depends only on *which* values have appeared, a bag of the prefix's
# tokens. Uniform attention reaches {glue:text}`ch9.bijection_uniform_kl_bits:.4f` bits against the trained model's
# {glue:text}`ch9.bijection_learned_kl_bits:.4f`. The sticky chain's posterior needs only the current symbol: the
# identity routing is the Bayes routing, and pinned, it trains further than the learned one. These tasks still show
# *what a trained model does*, but not *what routing does*: a claim about routing read on them is **not tested here**.
#
# The table below gives every task's controls: the error each ends at over the trained model's, and the share of the
# untrained model's gap it gives back.

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
# {glue:text}`ch9.context_blind_kl_bits:.3f` bits from it. One that knows which keys and values were revealed but not
# which went together is {glue:text}`ch9.pairing_blind_kl_bits:.3f` bits away: that gap is what binding is worth.
#
# The model is chapter 6's bijection transformer with its training unchanged:
# {glue:text}`ch9.steps` steps of AdamW on fresh batches, {glue:text}`ch9.n_seeds` seeds. It ends at
# {glue:text}`binding.kl_bits_trained:.4f` bits. With uniform attention the same model ends at
# {glue:text}`ch9.uniform_kl_bits:.3f` bits; with its routing frozen, at {glue:text}`ch9.frozen_kl_bits:.3f`. Trained
# {glue:text}`ch9.steps_x4` steps, four times as long, the controls do learn binding from the bag of pair tokens, but
# slowly: they end {glue:text}`routing_need.binding.uniform_kl_ratio_x4:.0f` and
# {glue:text}`routing_need.binding.frozen_kl_ratio_x4:.0f` times the trained model's KL.

# %% [markdown] tags=[]
# ## Frame before precision, on a task that needs a frame
#
# The paper reads its two laws as two timescales: routing settles first, the values keep refining. Chapter 6 could
# not test this: its tunnel needs no routing. Here, the attention that the reading head puts on the answer's source
# rises from {glue:text}`ch9.attention_on_source_init:.2f` to {glue:text}`ch9.attention_on_source_end:.2f`, half of
# it by step {glue:text}`ch9.transition_step_median:.0f` ({numref}`fig-binding-frame`). The KL keeps falling long
# after.

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
# ({numref}`fig-binding-freeze`). Frozen at initialisation, the model loses most of what routing is worth. From step
# {glue:text}`ch9.first_free_step` on, freezing costs nothing: the frozen model ends within
# {glue:text}`ch9.free_ratio` times the trained model's KL on every seed's interval. At that step the trained model's
# KL is still {glue:text}`binding.kl_fall_after_free_freeze:.1f` times its final value. The routing is in place; the
# precision is not.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-binding-freeze", figures.plot_freeze_sweep(tunnel))

# %% [markdown] tags=[]
# ```{glue:figure} fig-binding-freeze
# :name: fig-binding-freeze
# :alt: Two lines against the step at which routing is frozen, on a log axis: the frozen model's KL over the trained model's falls to the dashed bound within a few hundred steps; the trained model's KL at that step over its final KL stays well above it.
#
# Freezing routing from step $t$: the frozen model's final KL over the trained model's (95 % interval over seeds) and
# the trained model's KL at step $t$ over its final KL. Below the dotted line, freezing costs nothing.
# ```
#
# :::{admonition} The other definitions of "settled"
# :class: dropdown
#
# The book's other definitions read the same runs (chapter 6 defines them). By the parameter path the frame settles
# first on {glue:text}`binding.order_path:.0%` of the seeds; by the function, on
# {glue:text}`binding.order_function:.0%`; by the attention's similarity to its final pattern, on
# {glue:text}`binding.order_similarity:.0%`.
# :::

# %% tags=["hide-cell"]
report.freeze_table(tunnel)

# %% [markdown] tags=[]
# ## The advantage law's predictions
#
# The routing law predicts the gradient's direction: a query's score on a position rises when that position's value is
# more useful for its error than the average it reads ($b_{ij} < \E_{\alpha_i}[b]$). At repeated keys we know which
# position holds the answer. At initialisation the law routes toward it on a net
# {glue:text}`binding.advantage_routing_margin_init:+.1%` of the queries (against the other revealed positions); at
# the routing transition, on {glue:text}`binding.advantage_routing_margin_transition:+.1%`. Positive feedback, the
# source's advantage growing under a value step, gives {glue:text}`binding.feedback_margin_init:+.1%` and
# {glue:text}`binding.feedback_margin_transition:+.1%`.
#
# ## The geometry
#
# Paper I's geometry on the trained binding model: layer-0 keys at mean $|\cos|$
# {glue:text}`binding.key_abs_cos_layer0_key_tokens:.2f` (Paper I: below 0.1), a value manifold whose first component
# carries {glue:text}`binding.value_pc1_ratio:.0%` of the variance, ordered by the posterior's entropy with Spearman
# $\rho$ = {glue:text}`binding.value_pc1_entropy_spearman:.2f`. Here the entropy depends on the content (a repeated key's
# posterior is a point mass), so the ordering is inference, not position.
#
# ## The EM-like step
#
# Ten times the step on the value projections, the paper's "EM-like" schedule, gives
# {glue:text}`binding.em_like_speedup:.2f`× on the paper's metric here, and
# {glue:text}`binding.em_like_speedup_frozen_routing:.2f`× with routing frozen ({numref}`fig-binding-em`). On the sticky
# chain the speed-up persists with routing removed: {glue:text}`routing_need.sticky.speedup_frozen_routing:.1f`× with
# routing frozen and {glue:text}`routing_need.sticky.speedup_identity_routing:.1f`× with the Bayes routing pinned. It is
# a step-size effect, not an E-step.

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
# sits one token after its earlier occurrence: a two-hop lookup. Trained {glue:text}`ch9.two_hop_steps` steps, our model
# ends at {glue:text}`binding.two_hop_kl_bits:.3f` bits (per-sample entropy error
# {glue:text}`ch9.two_hop_entropy_mae_bits:.3f`), and {glue:text}`binding.two_hop_uniform_kl_bits:.3f` with uniform
# attention.
#
# ## Summary
#
# <!-- draft -->
#
# :::{admonition} Run it yourself
# :class: dropdown
#
# The chapter reads two stored results, computed once: `python -m attention_dynamics compute routing_controls` and
# `python -m attention_dynamics compute binding_tunnel` (a few CPU-hours; resumable). Re-execute the chapter with
# `python -m attention_dynamics reproduce --chapter 9 --force`. The stored runs use their own fixed seeds (the
# paper's five for the sticky chain, 0–4 for the tunnels); the chapter's `seed` sets the batch on which the reference
# levels are computed.
# :::
