# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@defe77cd56804a7482e7cf326b9890286f122525"

# %% [markdown] tags=[]
# # A tunnel that needs routing
#
# The paper's picture of training is about routing: cross-entropy moves attention by *advantage*, the values specialise
# to the queries that use them, and routing settles before the values' precision does {cite}`agarwal2025gradient`. A
# task can test that picture only if the same model cannot solve it without learned routing. This chapter checks that
# condition for the book's trained experiments, then tests the picture on a tunnel that meets it.
#
# - **The bijection tunnel and the sticky chain do not need learned routing.** With uniform attention the bijection
#   transformer ends at {glue:text}`routing_need.bijection.uniform_kl_ratio:.2f` times its trained KL, and the sticky
#   chain trains better with its routing pinned to the identity than learned. HMM filtering
#   {glue:text}`routing.hmm_uniform_answer`: its transformer ends at {glue:text}`routing_need.hmm.uniform_kl_ratio:.2f`
#   times, against the bound of {glue:text}`ch9.free_ratio`. What routing does is *not tested* on these tasks; chapter
#   4's recall head does test it.
# - **Binding needs routing, and there routing is nearly in place half-way.** With uniform attention the binding model
#   ends at {glue:text}`routing_need.binding.uniform_kl_ratio:.0f` times its trained KL. With the routing frozen from
#   step 500 it ends at {glue:text}`binding.freeze_kl_ratio_t500:.1f` times, though the trained KL still falls
#   {glue:text}`ch9.kl_fall_after_t500:.0f`-fold after step 500. Frozen at step 1,000 it ends at
#   {glue:text}`binding.freeze_kl_ratio_t1000:.2f` times, just outside the book's bound for a free freeze.
# - **The EM-like speed-up of the paper's experiment does not come from learning routing.** On the sticky chain it grows
#   from {glue:text}`ch9.sticky_speedup_learned:.1f`× to {glue:text}`routing_need.sticky.speedup_identity_routing:.1f`×
#   when the routing is pinned rather than learned.

# %% tags=["parameters", "hide-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"

# %% tags=["remove-input", "remove-output"]
from attention_dynamics.chapters.binding_tunnel import (
    binding_tunnel,
    figures,
    hmm_grid_controls,
    report,
    routing_controls,
    settings,
    sticky_routing_seeds,
)
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import claims
from attention_dynamics.ledger.hmm_grid_controls import (
    glue_hmm_grid_controls,
    with_hmm_grid_controls,
)
from attention_dynamics.ledger import routing_controls as routing_numbers
from attention_dynamics.ledger import sticky_routing_seeds as twenty_numbers

cfg = settings.resolve(scale, device=device)  # fast / book / paper
seed_everything(seed)
plotting.use_book_style()
controls = with_hmm_grid_controls(
    routing_controls.ROUTING_CONTROLS.load(),  # stored: every task's routing controls
    hmm_grid_controls.HMM_GRID_CONTROLS.load(),  # stored: chapter 6's HMM and chapter 7's grid
)
tunnel = binding_tunnel.BINDING_TUNNEL.load()  # stored: the binding tunnel's runs
twenty = (
    sticky_routing_seeds.STICKY_ROUTING_SEEDS.load()
)  # stored: the sticky chain on twenty seeds
levels = report.reference_levels(tunnel["settings"]["tunnel"], seed=seed)
need = report.record_routing_need_claims(controls, tunnel, twenty)
found = report.record_binding_claims(tunnel)
rows = report.glue_rows(claims.recorded_claims())  # what these claims make of the paper's
report.glue_chapter(controls, tunnel, levels)
routing_numbers.glue_routing_controls(controls)
twenty_numbers.glue_routing_seeds(twenty)
glue_hmm_grid_controls()

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
# {glue:text}`routing_need.recall_head.uniform_loss_ratio:,.0f` times the trained head's probe loss, giving back
# {glue:text}`routing_need.recall_head.uniform_gap_lost_fraction:.0%` of what training gains.
#
# Bijection elimination does not. Its posterior depends only on *which* values have appeared, a bag of the prefix's
# tokens, and an average over the visible tokens carries that bag. Uniform attention reaches
# {glue:text}`ch9.bijection_uniform_kl_bits:.5f` bits against the trained model's
# {glue:text}`ch9.bijection_learned_kl_bits:.5f`.
#
# The sticky chain does not either. Its Bayes routing is the identity, and pinned, it trains further in 1,000 steps than
# the learned routing: SGD ends at {glue:text}`routing_need.sticky.sgd_loss_identity:.3f` nats against
# {glue:text}`routing.sticky_sgd_loss_learned:.3f` ($H_{\min}$ = {glue:text}`ch9.sticky_hmin_nats:.3f`), and on
# {glue:text}`routing.twenty_n_seeds` seeds at {glue:text}`routing.twenty_sgd_loss_identity:.3f` against
# {glue:text}`routing.twenty_sgd_loss_learned:.3f`.
#
# HMM filtering {glue:text}`routing.hmm_uniform_answer` either. With uniform attention chapter 6's
# HMM transformer ends at {glue:text}`routing_need.hmm.uniform_kl_ratio:.2f` times its trained KL
# ({glue:text}`routing.hmm_uniform_kl_bits:.4f` bits against {glue:text}`routing.hmm_learned_kl_bits:.4f`, on
# {glue:text}`routing.hmm_n_seeds` seeds), giving back {glue:text}`routing_need.hmm.uniform_gap_lost_fraction:.1%` of what
# training gains.
#
# Chapter 7's smaller transformer draws the same line on its three tunnels ({glue:text}`routing.grid_n_seeds` seeds).
# Accumulation {glue:text}`routing.grid_bijection_uniform_answer`: uniform attention ends at
# {glue:text}`routing_need.architectures_bijection.uniform_kl_ratio:.2f` times the trained KL. Transport, HMM filtering
# at a shorter length, {glue:text}`routing.grid_hmm_uniform_answer`
# ({glue:text}`routing_need.architectures_hmm.uniform_kl_ratio:.2f` times). Binding
# {glue:text}`routing.grid_binding_uniform_answer`: without it the model ends at
# {glue:text}`routing_need.architectures_binding.uniform_kl_ratio:,.0f` times the trained KL.
#
# The tasks that do not need routing still show what a trained model *does*, but not what routing *does*. On them the
# paper's statements about routing are not tested, and the verdict page says so.
#
# :::{admonition} Models without attention
# :class: dropdown
#
# Chapter 8 diagnoses chapter 6's two transformers, so their controls above are chapter 8's too. Chapter 7's other
# families have a different control, or none. For Mamba the analogous control would freeze its input-dependent
# selection (the $\Delta$, $B$ and $C$ projections); it is not run in this version of the book. The LSTM routes nothing
# across positions by content and the MLPs have no routing, so they have none.
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
# The model is chapter 6's bijection transformer with its training unchanged: {glue:text}`ch9.steps:,` steps of AdamW on
# fresh batches, {glue:text}`ch9.n_seeds` seeds. It ends at {glue:text}`binding.kl_bits_trained:.4f` bits. With uniform
# attention the same model ends at {glue:text}`ch9.uniform_kl_bits:.3f` bits, and with its routing frozen at
# {glue:text}`ch9.frozen_kl_bits:.3f`. 
#
# Given {glue:text}`ch9.steps_x4:,` steps, four times as long, both controls learn some binding. They end below the
# level of a model that cannot pair keys with values on {glue:text}`ch9.uniform_x4_binding_seeds` (uniform) and
# {glue:text}`ch9.frozen_x4_binding_seeds` (frozen) of the {glue:text}`ch9.n_seeds` seeds. Uniform attention does it
# from the bag of pair tokens. Frozen $W_Q$ and $W_K$ do not freeze what they read: the embeddings and the layers
# below keep learning, so the frozen model can still learn to route, slowly.
#
# The trained model run as long stays ahead. Uniform attention ends at
# {glue:text}`routing_need.binding.uniform_kl_ratio_x4:.0f` times its KL, and {glue:text}`ch9.uniform_x4_verdict`.
# The frozen model ends at {glue:text}`routing_need.binding.frozen_kl_ratio_x4:.0f` times (geometric means over seeds),
# but on its best seed within {glue:text}`ch9.frozen_x4_best_ratio:.1f` times, and {glue:text}`ch9.frozen_x4_verdict`.
# So binding needs learned routing at the book's budget; with a longer one, part of the routing can be learned around
# frozen query and key weights.

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
# ({numref}`fig-binding-freeze`). Frozen at step {glue:text}`ch9.first_freeze_step`, the model ends at
# {glue:text}`ch9.first_freeze_ratio:.0f` times the trained model's KL. Frozen at step 500, it ends at
# {glue:text}`binding.freeze_kl_ratio_t500:.2f` times, while the trained model's KL falls
# {glue:text}`ch9.kl_fall_after_t500:.0f`-fold from step 500 to the end: the routing in place at step 500 carries
# almost all of that fall. Frozen at step 1,000, half-way, the model ends at
# {glue:text}`binding.freeze_kl_ratio_t1000:.2f` times the trained KL, with a
# {glue:text}`ch9.kl_fall_after_t1000:.1f`-fold fall still ahead.
#
# The book counts a freeze as free only when the whole 95 % interval over seeds lies below {glue:text}`ch9.free_ratio`
# times the trained KL. With {glue:text}`ch9.n_seeds` seeds the interval at step 1,000 reaches just past it. So the
# routing is nearly in place half-way, with most of the precision still to come, but by the book's own bound this
# sweep does not show it in place.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-binding-freeze", figures.plot_freeze_sweep(tunnel))

# %% [markdown] tags=[]
# ```{glue:figure} fig-binding-freeze
# :name: fig-binding-freeze
# :alt: Two lines against the step at which routing is frozen, on a log axis: the frozen model's KL over the trained model's falls from hundreds to about one by step 1,000; the trained model's KL at that step over its final KL falls from hundreds to about five.
#
# Freezing routing from step $t$: the frozen model's final KL over the trained model's (95 % interval over seeds) and
# the trained model's KL at step $t$ over its final KL. Below the dashed line, freezing costs nothing.
# ```
#
# :::{admonition} The other definitions of "settled"
# :class: dropdown
#
# The book's other definitions (chapter 4 sets them out) read the same runs. By the function, the frame settles first
# on {glue:text}`binding.order_function:.0%` of the seeds; by the parameter path, on
# {glue:text}`binding.order_path:.0%`; by the attention's similarity to its final pattern, on
# {glue:text}`binding.order_similarity:.0%`. With {glue:text}`ch9.n_seeds` seeds none of these shares is decided.
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
# routing transition, on {glue:text}`binding.advantage_routing_margin_transition:+.0%`. Over
# {glue:text}`ch9.n_seeds` seeds neither is clearly positive.
#
# Positive feedback goes the other way here. Under a value step, the answer's source gains advantage *less* often than
# the other revealed positions: by a net {glue:text}`binding.feedback_margin_init:+.0%` of the queries at
# initialisation. At the transition the difference, {glue:text}`binding.feedback_margin_transition:+.0%`, is within the
# spread over seeds. Chapter 3's recall head shows the feedback
# at initialisation; this tunnel, with its deeper model, does not.
#
# ## The geometry
#
# Paper I's geometry, read on the trained binding model beside two nulls: the untrained model and the model trained
# with uniform attention. The layer-0 keys of the key tokens have a mean $|\cos|$ of
# {glue:text}`binding.key_abs_cos_layer0_key_tokens:.2f` (untrained: {glue:text}`ch9.key_abs_cos_untrained:.2f`; Paper
# I: below 0.1), while Paper I's own key metric gives {glue:text}`binding.paper_key_signed_cos:.3f`, within its bound.
# The value manifold's first component carries {glue:text}`binding.value_pc1_ratio:.0%` of the variance (untrained
# {glue:text}`ch9.value_pc1_ratio_untrained:.0%`, uniform attention {glue:text}`ch9.value_pc1_ratio_uniform:.0%`;
# Paper I: above 80 %). It is ordered by the posterior's entropy with Spearman $\rho$ =
# {glue:text}`binding.value_pc1_entropy_spearman:.2f` (untrained
# {glue:text}`ch9.value_pc1_entropy_spearman_untrained:.2f`, uniform attention
# {glue:text}`ch9.value_pc1_entropy_spearman_uniform:.2f`). Here the entropy depends on the content, since a repeated
# key's posterior is a point mass, so an ordering would be inference rather than position. The attention entropy does
# not fall with depth: it changes by {glue:text}`binding.attention_entropy_reduction:+.0%` from the first layer to the
# last (Paper I: a fall of 85–90 %).
#
# ## The EM-like step
#
# Ten times the step on the value projections, the paper's "EM-like" schedule, gives
# {glue:text}`binding.em_like_speedup:.2f`× on the paper's metric here ({numref}`fig-binding-em`). With the routing
# frozen, neither schedule gets past the level of a model that cannot pair keys with values, and the metric gives
# {glue:text}`binding.em_like_speedup_frozen_routing:.2f`×. On binding, then, the speed-up needs the routing to be
# learned. The paper's own experiment, the sticky chain, says otherwise: there the speed-up grows when the routing
# cannot be learned, to {glue:text}`routing_need.sticky.speedup_frozen_routing:.1f`× with it frozen and
# {glue:text}`routing_need.sticky.speedup_identity_routing:.1f`× with the Bayes routing pinned, against
# {glue:text}`ch9.sticky_speedup_learned:.1f`× learned on the paper's five seeds, and
# {glue:text}`routing.twenty_speedup_frozen:.1f`×, {glue:text}`routing.twenty_speedup_identity:.1f`× and
# {glue:text}`routing.twenty_speedup_learned:.1f`× on {glue:text}`routing.twenty_n_seeds`. The speed-up the paper
# reports is a larger step, not a faster E-step.

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
# sits one token after its earlier occurrence: a two-hop lookup. Trained {glue:text}`ch9.two_hop_steps:,` steps, four times
# the chapter's budget, on one seed, our model ends at {glue:text}`binding.two_hop_kl_bits:.3f` bits, with a per-sample
# entropy error of {glue:text}`ch9.two_hop_entropy_mae_bits:.3f` bits. With uniform attention it ends at
# {glue:text}`binding.two_hop_uniform_kl_bits:.3f` bits (entropy error
# {glue:text}`ch9.two_hop_uniform_entropy_mae_bits:.3f`): on this seed the two-hop task needs routing too. In the authors' own pilot, at Paper I's sizes
# (V = 20, L = 19, 20,000 steps), the same task reaches 0.05 bits of entropy error in about 3,000 steps and about 1e-4
# bits at the end. With bijection's trained routing transplanted and frozen it needs 8,000 to 11,000 steps to reach 0.05
# {cite}`dalal2026workspace`.
#
# ## Summary
#
# - **"Routing settles before the values' precision"**: {glue:text}`ch9.frame_row_label`. On binding the routing is nearly in
#   place half-way, frozen there within {glue:text}`binding.freeze_kl_ratio_t1000:.2f` times the trained KL while the KL
#   still falls {glue:text}`ch9.kl_fall_after_t1000:.1f`-fold, but not within the book's bound on every seed. Chapter 6's
#   bijection tunnel cannot test it.
# - **"The EM-like schedule is fast because of its E-step"**: {glue:text}`ch9.mstep_row_label` on the paper's own
#   experiment. The sticky chain's speed-up is larger with the routing frozen or pinned than learned.
# - **Positive feedback**: {glue:text}`ch9.feedback_row_label` on binding. A value step favours the other revealed
#   positions over the answer's source.
# - **Paper I's geometry** does not form on the binding model at this size: its keys are far from orthogonal and its
#   values carry no dominant direction.
#
# :::{admonition} Run it yourself
# :class: dropdown
#
# The chapter reads four stored results, computed once: `python -m attention_dynamics compute routing_controls`
# (about 40 CPU-minutes), `python -m attention_dynamics compute hmm_grid_controls` (about 1.7 CPU-hours),
# `python -m attention_dynamics compute sticky_routing_seeds` (about 1 CPU-hour) and
# `python -m attention_dynamics compute binding_tunnel` (about 3.2 CPU-hours); each resumes where a stopped run left
# off. Re-execute the chapter with `python -m attention_dynamics reproduce --chapter 9 --force`.
# The stored runs use their own fixed seeds (the paper's five for the sticky chain's controls and fifteen more for its
# twenty-seed block, 0–2 for the bijection tunnel and the recall head, 0–3 for the HMM transformer, 0–4 for chapter 7's
# transformer and the binding tunnel, 0 for the two-hop task); the chapter's `seed` sets the batch on which the reference levels are computed.
# :::
