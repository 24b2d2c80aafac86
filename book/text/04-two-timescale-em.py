# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@defe77cd56804a7482e7cf326b9890286f122525"

# %% [markdown] tags=[]
# # Two-timescale EM
#
# Section 5 of the paper {cite}`agarwal2025gradient` reads a head's training as expectation–maximisation
# {cite}`dempster1977maximum` running on two timescales. Attention acts as the E-step: $\alpha_{ij}$ is a soft
# responsibility for "which position serves query $i$". The values act as the M-step: each moves toward what the queries
# that use it need. $W_Q$ and $W_K$ set the *hypothesis frame*, the positions a query can consider at all. The paper's
# statement about time is the **frame–precision dissociation**: routing settles early, while the values keep refining.
#
# On chapter 3's recall head this {glue:text}`ch4.frame_row_label`:
#
# - **Where the analogy is exact, EM steps are gradient steps.** On a Gaussian mixture an EM step on a mean equals a gradient step
#   preconditioned by $\sigma^2/N_k$, to {glue:text}`em.xu_jordan_max_err:.0e`. In the head the match is structural.
# - **The frame settles first when "settled" means "stops mattering".** Timed by what the head computes, or by freezing
#   $W_Q$, $W_K$, the frame comes first on {glue:text}`frame_precision.order_function_sgd:.0%` and
#   {glue:text}`frame_precision.order_intervention_sgd:.0%` of {glue:text}`ch4.fd_n_seeds` seeds under plain SGD.
# - **Under plain SGD it does not when "settled" means "stops moving".** By how far the weights still travel, the frame
#   comes first on {glue:text}`frame_precision.order_path_sgd:.0%` of the seeds (under Adam on
#   {glue:text}`frame_precision.order_path_adam:.0%`).
#
# ```{glue:figure} fig-em-frame-definitions
# :name: fig-em-frame-definitions
# :alt: Two panels, plain SGD and Adam, each plotting against the run length the share of seeds whose frame settles first, one line of points with interval bars per definition, around a dotted line at one half. Under SGD the parameter path stays at zero and the freeze rises from near zero at the shortest run to one; every other line sits at one.
#
# Which settles first, by four definitions: the share of {glue:text}`ch4.fd_n_seeds` seeds whose frame settles strictly
# before the precision, per optimiser and run length, with its 95% Clopper–Pearson interval. Above the dotted line the
# frame comes first.
# ```
#
# The chapter first makes the analogy exact where it can be, on a mixture of Gaussians. It then times the frame and the
# values of chapter 3's head: by how far they still move, by what the head computes, and by freezing the frame.

# %% tags=["parameters", "remove-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
steps = None  # training steps of each head (None: as the scale says)

# %% tags=["remove-input", "remove-output"]
import warnings

warnings.filterwarnings(
    "ignore", message="IProgress not found"
)  # tqdm's notebook bar (no bars are shown)

from attention_dynamics.chapters.two_timescale_em import (
    figures,
    frame_definitions,
    frame_definitions_report,
    freeze,
    reparametrisation,
    report,
    runs,
    settings,
)
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import claims

# the recall heads of chapter 3; the paper has no such experiment, so "paper" = "book"
cfg = settings.resolve(scale, device=device, steps=steps)
generator = seed_everything(seed)
plotting.use_book_style()

from attention_dynamics.ledger import routing_controls

routing_controls.glue_routing_controls()  # stored: chapter 9's routing controls

# %% [markdown] tags=[]
# ## Where the analogy is exact: EM on a Gaussian mixture
#
# Take $N$ points $x_n \in \R^d$ and a mixture of $K$ Gaussians with means $\mu_k$, a shared known variance $\sigma^2$ and
# known weights $\pi_k$. The E-step computes responsibilities; the M-step moves each mean to the responsibility-weighted
# average of the data:
#
# ```{math}
# :label: eq-gmm-em
# \begin{aligned}
# r_{nk} &= \softmax_k\Bigl(\log \pi_k - \frac{\norm{x_n - \mu_k}^2}{2\sigma^2}\Bigr), \\
# N_k &= \sum_n r_{nk}, \qquad \mu_k \leftarrow \frac{1}{N_k} \sum_n r_{nk}\, x_n .
# \end{aligned}
# ```
#
# The log-likelihood is $\ell = \sum_n \log \sum_k \pi_k \Normal(x_n; \mu_k, \sigma^2 I)$, and its gradient with respect to
# a mean is $\partial \ell / \partial \mu_k = \sum_n r_{nk} (x_n - \mu_k) / \sigma^2$. Therefore
#
# ```{math}
# :label: eq-xu-jordan
# \begin{aligned}
# &\mu_k + \frac{\sigma^2}{N_k} \frac{\partial \ell}{\partial \mu_k} \\
# &\quad = \mu_k + \frac{1}{N_k} \sum_n r_{nk} (x_n - \mu_k) \\
# &\quad = \frac{1}{N_k} \sum_n r_{nk}\, x_n .
# \end{aligned}
# ```
#
# **An EM step on a mean is a gradient-ascent step preconditioned by $\sigma^2 / N_k$** {cite}`xu1996convergence`. Each
# component gets its own learning rate, inversely proportional to how much data it is responsible for.
#
# We check the identity at every iterate of an EM run on {glue:text}`ch4.n_points` points from a
# {glue:text}`ch4.gmm_K`-component mixture in {glue:text}`ch4.gmm_d` dimensions, with the gradient from automatic
# differentiation. The largest difference between the two steps, over all coordinates of all
# {glue:text}`ch4.n_em_iterations` iterates, is {glue:text}`em.xu_jordan_max_err:.1e`: rounding error, as the algebra
# says.
#
# {numref}`fig-em-gmm` shows the means moving under EM. On the right, the log-likelihood along EM, along the
# preconditioned ascent (the same curve: it *is* EM) and along plain ascent with one step size $c\,\sigma^2/N$ for every
# component. Plain ascent must be tuned: too small a step and it crawls, too large ($c$ = {glue:text}`ch4.diverging_c:g`)
# and it diverges. EM needs no step size, and it never lowers the likelihood.
#
# ```{glue:figure} fig-em-gmm
# :name: fig-em-gmm
# :alt: Left, a scatter of two-dimensional points coloured by the mixture component that drew them, with the black paths of the three means under EM from open circles to stars. Right, the mean log-likelihood against the iteration for EM, for the preconditioned gradient ascent on top of it, and for plain gradient ascent at three step sizes.
#
# EM on a Gaussian mixture. Left: the data by component, and each mean's path under EM (circle: start; star: end).
# Right: the mean log-likelihood along EM, the preconditioned ascent (dashed) and plain ascent at the step sizes of the
# legend.
# ```

# %% tags=["hide-input"]
bridge = runs.gmm_bridge(cfg.n_points, cfg.n_em_iterations, generator)
bridge_claim = report.record_gmm_bridge(bridge, seed=seed)

# %% tags=["remove-input", "remove-output"]
curves = report.likelihood_curves(bridge)  # EM, preconditioned and plain gradient ascent
plotting.glue_figure("fig-em-gmm", figures.plot_gmm_em(bridge, curves))

# %% [markdown] tags=[]
# ### The correspondence to attention
#
# Written as a softmax, the E-step {eq}`eq-gmm-em` *is* an attention computation. Expanding the square gives
#
# ```{math}
# :label: eq-e-step-attention
# \begin{aligned}
# r_{nk} &= \softmax_k\bigl(s_{nk}\bigr), \\
# s_{nk} &= \frac{x_n \cdot \mu_k}{\sigma^2} + \log \pi_k - \frac{\norm{\mu_k}^2}{2\sigma^2} :
# \end{aligned}
# ```
#
# a query $x_n$ scores keys $\mu_k$ with scale $1/\sigma^2$ and a bias per key. In code the two forms agree to
# {glue:text}`ch4.attention_err:.0e`. The dictionary between the two:
#
# | Gaussian mixture | attention head |
# |---|---|
# | data point $x_n$ | query position $i$ |
# | component $k$ | key/value position $j$ |
# | responsibility $r_{nk}$ (E-step) | attention weight $\alpha_{ij}$ |
# | log-joint $\log \pi_k + \log \Normal(x_n; \mu_k, \sigma^2)$ | score $s_{ij} = q_i \cdot k_j / \sqrt{d_k}$ |
# | mean $\mu_k$ | value $v_j$ |
# | soft count $N_k = \sum_n r_{nk}$ | soft count $N_j = \sum_i \alpha_{ij}$ |
# | gradient $\sum_n r_{nk}(x_n - \mu_k)/\sigma^2$ | value gradient $-\sum_i \alpha_{ij} u_i$ |
# | M-step = gradient step $\times\,\sigma^2/N_k$ | value step with learning rate $\propto 1/N_j$ |
#
# The last row leads to chapter 5. A closed-form M-step for the values would give each value its own rate
# $\propto 1/N_j$, and the paper's "EM-like" schedule raises the values' learning rate.
#
# The dictionary is structural, as the paper says. In the mixture the responsibilities are the exact posterior of a
# latent variable, and EM improves a likelihood at every iteration. In the head the scores are learned, not derived from a
# model, and the "M-step" lowers the next token's cross-entropy, not a likelihood of the inputs. Routing and values move
# together by gradient descent. No step is a maximisation, and a large enough value step raises the loss (chapter 3).
# The analogy also concerns training only: training produces point estimates of $W_Q, W_K, W_V, W_O$, and the Bayesian
# computation happens later, in context, when those fixed weights route and combine evidence.

# %% [markdown] tags=[]
# ## Frame and precision, measured
#
# We return to chapter 3's head and ask when each side of the loop stops moving. On a fixed set of
# {glue:text}`ch4.n_probe` probe sequences we record two things through training:
#
# - **the frame**: the attention pattern of the queries;
# - **the precision**: the value vectors of the sources.
#
# The paper's dissociation predicts that the frame settles first: $t_F < t_P$. We train {glue:text}`ch4.n_seeds` heads,
# each with its own data and initialisation, with learning rate {glue:text}`ch4.lr` on every matrix for
# {glue:text}`ch4.steps:,` steps.
#
# A quantity has *settled* at the first step from which the path it still travels is at most a fraction $f$ of its
# whole path over the run. This criterion has no units, so it treats attention and values alike. We record both every
# {glue:text}`ch4.path_every` steps and fixed $f$ = 10% before the runs. For each seed the difference $t_P - t_F$ is
# paired: same head, same data. An order is stated only where the 95% interval of the mean difference excludes zero.
#
# **By this criterion, under plain SGD, {glue:text}`ch4.path_order_phrase`.** At $f$ = 10% the mean $t_P - t_F$ is
# {glue:text}`ch4.path_diff_01:.0f` steps (95% interval {glue:text}`ch4.path_low_01:.0f` to
# {glue:text}`ch4.path_high_01:.0f`). The frame's last 10% of path begins at a median step of
# {glue:text}`ch4.path_median_frame_step:.0f`, the values' at {glue:text}`ch4.path_median_value_step:.0f`. The order is
# the same at {glue:text}`ch4.path_n_decided` of the {glue:text}`ch4.path_n_thresholds` thresholds from 30% down to 1%
# ({numref}`fig-em-settling-paths`). The frame settles first in
# {glue:text}`dynamics.frame_settles_first_fraction:.0%` of the seeds (95% interval
# {glue:text}`ch4.path_fraction_low:.0%` to {glue:text}`ch4.path_fraction_high:.0%`). The median ratio $t_P/t_F$ is
# {glue:text}`dynamics.precision_to_frame_time_ratio:.2f` (interval {glue:text}`ch4.path_ratio_low:.2f` to
# {glue:text}`ch4.path_ratio_high:.2f`): {glue:text}`ch4.path_intervals_phrase`.
#
# ```{glue:figure} fig-em-settling-paths
# :name: fig-em-settling-paths
# :alt: The paired difference between the values' and the frame's settling steps against the remaining-path threshold on a log axis: the mean over seeds with its confidence interval as error bars, every seed's difference as a dot, and a grey band around zero one recording interval wide.
#
# The values' settling step minus the frame's, $t_P - t_F$, against the threshold $f$. Error bars: the mean over seeds
# and its $t$ interval; dots: single seeds; grey band: one recording interval either side of zero. Above zero the frame
# settles first.
# ```
#
# Two cautions bound this result. "Final" means the end of these {glue:text}`ch4.steps:,` steps, by which the median probe
# loss has fallen to {glue:text}`ch4.final_loss_fraction:.1e` of its untrained value; a longer run could still add path
# to either quantity. And this is not chapter 3's order. There the values *begin* to align before routing forms; here
# the question is when each *stops* moving. Nothing in this task keeps the values busy at the end either. Its answer is
# deterministic, so the values have no soft posterior to calibrate, which is what "precision" refers to in Paper I's
# wind tunnels.
#
# :::{admonition} A first criterion, by rate of change, and why it cannot order the two
# :class: dropdown
#
# The first criterion tried is a rate. The frame has settled at the first step from which it changes, over every window
# of {glue:text}`ch4.settle_window` steps, by less than a fraction $\tau$ of the attention mass (mean total-variation
# distance between rows). The values have settled when they change by less than $\tau$ of their norm (RMS change over RMS
# norm) over every window ({py:func}`settling.quiescence_step`). We fixed $\tau$ = {glue:text}`ch4.tau:.0%` per
# {glue:text}`ch4.settle_window` steps before looking, and measured every {glue:text}`ch4.record_every` steps.
#
# ```{glue:figure} fig-em-settling-rates
# :name: fig-em-settling-rates
# :alt: Left, on a log axis against the training step, one thin curve per seed for the attention mass the frame moves per window and for the relative change of the values, with a dashed threshold line. Right, one dot per seed at its frame settling step across and its value settling step up, with the grey diagonal of equal times.
#
# The rate criterion at equal learning rates. Left: per seed, the attention mass the frame moves and the values'
# relative change per window; dashed: $\tau$. Right: each seed's settling steps; above the diagonal the frame settles
# first.
# ```
#
# Two things make it unfit to order the two ({numref}`fig-em-settling-rates`). Its quantities have different units (attention mass moved, relative value
# change), so one $\tau$ for both is arbitrary. And the steps it finds differ by one or two recording intervals. Its
# answer moves with $\tau$: the frame comes first in {glue:text}`ch4.loose_fraction:.0%` of the seeds at $\tau$ = 3%,
# in {glue:text}`ch4.strict_fraction:.0%` at 0.3%, and in {glue:text}`ch4.distance_fraction:.0%` by a second criterion,
# distance to the final state within 10% of the initial distance ({py:func}`settling.settle_step`). The path criterion
# ({py:func}`settling.path_settling_step`, compared over seeds by
# {py:func}`chapters.two_timescale_em.runs.settling_comparison`) replaces it. The tables below give both, per threshold.
# :::

# %% tags=["trained-output", "hide-input", "hide-output"]
tau = settings.TAU  # fixed before looking at the results
equal_runs, sweep_runs = runs.train_heads(cfg)  # equal rates; and per value/routing lr ratio
summary = runs.rate_settling_summary(equal_runs, threshold=tau)
report.glue_equal_rates(summary, cfg)

# %% tags=["remove-input", "trained-output", "remove-output"]
plotting.glue_figure(
    "fig-em-settling-rates",
    figures.plot_settling_rates(equal_runs, summary, tau=tau, settle_window=cfg.settle_window),
)

# %% tags=["trained-output", "remove-input", "remove-output"]
comparison, order, path_table = report.path_comparison(equal_runs, cfg, seed=seed)
plotting.glue_figure("fig-em-settling-paths", figures.plot_settling_comparison(comparison))

# %% tags=["trained-output", "remove-input"]
share, ratio = report.record_order_claims(order, cfg)
order_phrase = report.glue_order_phrase(share)  # the order in words, by its status

# %% tags=["trained-output", "remove-input", "hide-output"]
sensitivity = runs.sensitivity_rows(equal_runs, cfg.settle_window)
print(report.sensitivity_table(sensitivity))

# %% tags=["trained-output", "remove-input", "hide-output"]
print(path_table)

# %% [markdown] tags=[]
# ## How the learning-rate ratio moves both times
#
# Under plain SGD the two timescales depend on the ratio of the values' learning rate to that of the routing and the
# read-out. We repeat the runs with the values' rate scaled by {glue:text}`ch4.ratio_list`
# ({glue:text}`ch4.n_sweep_seeds` seeds each; the runs above are ratio 1).
#
# The ratio sets the order. By the path criterion at $f$ = 10%, slower values (ratio {glue:text}`ch4.lowest_ratio:g`)
# put the frame first: $t_P - t_F$ is {glue:text}`ch4.sweep_path_low_diff:.0f` steps (95% interval
# {glue:text}`ch4.sweep_path_low_low:.0f` to {glue:text}`ch4.sweep_path_low_high:.0f`,
# {glue:text}`ch4.sweep_path_low_verdict`). Faster values (ratio {glue:text}`ch4.highest_ratio:g`) put it last:
# {glue:text}`ch4.sweep_path_high_diff:.0f` steps ({glue:text}`ch4.sweep_path_high_low:.0f` to
# {glue:text}`ch4.sweep_path_high_high:.0f`, {glue:text}`ch4.sweep_path_high_verdict`).
#
# Faster values also bring *both* settling times forward ({numref}`fig-em-ratio-sweep`). At ratio
# {glue:text}`ch4.highest_ratio:g` the values settle at a median step of {glue:text}`ch4.value_step_high:.0f` and the
# frame at {glue:text}`ch4.frame_step_high:.0f`. At ratio {glue:text}`ch4.lowest_ratio:g` they settle at
# {glue:text}`ch4.value_step_low:,.0f` and {glue:text}`ch4.frame_step_low:,.0f`. Chapter 3's loop, in which informative
# values create the advantage that routing follows, would predict this; the sweep itself does not test it.
#
# ```{glue:figure} fig-em-ratio-sweep
# :name: fig-em-ratio-sweep
# :alt: Two panels against the value-to-routing learning-rate ratio on a log axis. Left, the median settling steps of the frame and of the values with every seed's steps as small dots. Right, the median ratio of the two settling steps and the fraction of seeds whose frame settles first, with a grey line at 1.
#
# The rate criterion as the values' learning rate is scaled against the routing's. Left: the settling steps $t_F$ and
# $t_P$, medians joined, seeds as dots. Right: the median $t_P/t_F$ and the share of seeds with the frame first.
# ```
#
# :::{admonition} The sweep by the rate criterion
# :class: dropdown
#
# The figure uses the rate criterion, with its weaknesses and {glue:text}`ch4.n_sweep_seeds` seeds per ratio. At ratio
# {glue:text}`ch4.highest_ratio:g`, {glue:text}`ch4.highest_ratio_order_phrase`: the frame comes first in
# {glue:text}`ch4.highest_ratio_fraction:.0%` of the seeds, with a median $t_P/t_F$ of
# {glue:text}`ch4.highest_ratio_time_ratio:.2f`. Slower values, at ratio {glue:text}`ch4.lowest_ratio:g`,
# {glue:text}`ch4.lowest_ratio_order_phrase`: the frame comes first in {glue:text}`ch4.lowest_ratio_fraction:.0%` of the
# seeds, median ratio {glue:text}`ch4.lowest_ratio_time_ratio:.2f`. The tables below give every ratio, by the rate
# criterion and by the path criterion.
# :::

# %% tags=["trained-output", "remove-input", "hide-output"]
sweep, sweep_table = report.ratio_sweep(sweep_runs, summary, tau=tau)
print(sweep_table)

# %% tags=["remove-input", "trained-output", "remove-output"]
plotting.glue_figure("fig-em-ratio-sweep", figures.plot_ratio_sweep(sweep, tau=tau))

# %% tags=["trained-output", "remove-input", "hide-output"]
sweep_paths, sweep_path_table = report.sweep_path_comparison(sweep_runs)
print(sweep_path_table)

# %% [markdown] tags=[]
# ## Freezing the frame
#
# A settling criterion says when a quantity stops moving, not when it stops mattering. An intervention asks the second
# question directly. Train normally up to step $t$, then freeze $W_Q$ and $W_K$ and train everything else to the end. If
# the frame is in place at $t$, the frozen run ends where the trained one does.
#
# "Ends where the trained one does" needs a bound, and the bound is set against the trained model. Freezing from step $t$
# costs nothing when the frozen runs end within {glue:text}`ch4.freeze_free_ratio`× the trained run's final loss: the
# whole 95% interval of their geometric mean over seeds must lie below that factor. The frame is *in place* from the
# first freeze step from which freezing costs nothing, at that step and at every later one. A bound set against the
# untrained model would be far too loose. On the recall head, freezing at step 600 costs only
# {glue:text}`ch4.freeze_head_gap_share_at_600:.2%` of the untrained model's excess loss, yet the final loss is
# {glue:text}`ch4.freeze_head_ratio_at_600:.1f` times the trained run's. Earlier versions of this chapter bounded the cost
# by a small share of that untrained gap, which counted such a freeze as free.
#
# We freeze the recall head ({glue:text}`ch4.freeze_head_seeds` seeds, {glue:text}`ch4.freeze_head_steps:,` steps) and
# chapter 6's bijection wind tunnel, a four-layer transformer with every layer's query and key weights frozen
# ({glue:text}`ch4.freeze_tunnel_seeds` seeds, {glue:text}`ch4.freeze_tunnel_steps` steps, a quarter of chapter 6's
# budget). The head is scored by its final probe loss, the tunnel by its final KL divergence from the exact posterior.
# These runs are stored results, computed once and loaded here.
#
# ```{glue:figure} fig-em-freeze-frame
# :name: fig-em-freeze-frame
# :alt: Two panels, the recall head and the bijection wind tunnel, each showing on log axes the frozen run's final error over the trained run's against the step at which the query and key weights are frozen, thin lines per seed and a marked geometric mean with interval bars, a dashed line at 1.25 and, for the tunnel, a green vertical line where the frame is in place.
#
# What freezing the frame costs: the final probe loss (recall head, left) or KL divergence from the exact posterior
# (bijection tunnel, right) of runs whose $W_Q$, $W_K$ are frozen at step $t$, over the trained run's. Dashed: the
# bound below which freezing costs nothing; green: the frame in place. The step axis is linear below 1.
# ```
#
# **On the recall head the frame matters until late** ({numref}`fig-em-freeze-frame`, left). Freezing $W_Q$, $W_K$ at
# initialisation leaves the final loss {glue:text}`ch4.freeze_head_ratio_at_init:,.0f` times the trained run's: most of
# what training gains is lost. Frozen at step 400, the loss still ends {glue:text}`ch4.freeze_head_ratio_at_400:.0f` times higher;
# at step 600, {glue:text}`ch4.freeze_head_ratio_at_600:.1f` times. Even at step 1000, half-way, it ends
# {glue:text}`ch4.freeze_head_ratio_at_1000:.2f` times higher (interval up to
# {glue:text}`ch4.freeze_head_ratio_high_at_1000:.2f`). No freeze on this grid, which ends at step 1000, is free. The attention pattern, meanwhile, enters its last 10% of path at a median step of
# {glue:text}`ch4.path_median_frame_step:.0f`. Its late moves are small, but they still lower the loss. The next section
# times the freeze more finely.
#
# **In the bijection wind tunnel a frame that was never trained does almost as well.** Frozen at initialisation, the
# tunnel ends at {glue:text}`ch4.freeze_tunnel_ratio_at_init:.2f` times the trained run's final KL. With
# {glue:text}`ch4.freeze_tunnel_seeds` seeds the interval is wide ({glue:text}`ch4.freeze_tunnel_ratio_low_at_0:.1f` to
# {glue:text}`ch4.freeze_tunnel_ratio_high_at_0:.1f`), so freezing counts as free only from step
# {glue:text}`frame_precision.tunnel_freeze_frame_step` of {glue:text}`ch4.freeze_tunnel_steps`. Nearly all of the
# tunnel's progress is made by the weights that stay free: values, outputs, MLPs and embeddings.
#
# That difference is about the tasks. The recall head needs routing: with uniform attention it ends at
# {glue:text}`routing.recall_uniform_loss_ratio:,.0f` times the trained head's loss, with its routing frozen at
# initialisation at {glue:text}`routing.recall_frozen_loss_ratio:,.0f` times. So the recall head can test when routing
# settles. Chapter 6's bijection tunnel cannot: with uniform attention it ends at
# {glue:text}`routing.bijection_uniform_kl_ratio:.2f` times the trained model's KL. Chapter 9, *A tunnel that needs routing*, times frame against precision on a binding tunnel that
# needs routing.
#
# :::{admonition} The freeze costs in bits
# :class: dropdown
#
# Freezing $W_Q$, $W_K$ at initialisation costs the recall head {glue:text}`frame_precision.freeze_frame_cost_bits:.2f`
# bits of final probe loss over the trained run, against an untrained gap of {glue:text}`ch4.freeze_head_gap_bits:.2f`
# bits. Frozen at step 400 it costs {glue:text}`ch4.freeze_head_cost_at_400:.2f` bits, at step 600
# {glue:text}`ch4.freeze_head_cost_at_600:.4f` and at step 1000 {glue:text}`ch4.freeze_head_cost_at_1000:.4f`. The
# trained runs end at {glue:text}`ch4.freeze_head_unfrozen_final_bits:.4f` bits, with a seed-to-seed spread of
# {glue:text}`ch4.freeze_head_unfrozen_sd_bits:.0e` bits. With no free freeze step, the stored step of the frame is the
# run's length, {glue:text}`frame_precision.freeze_frame_step:,`.
#
# In the tunnel, freezing at initialisation costs {glue:text}`frame_precision.tunnel_freeze_frame_cost_bits:.4f` bits of
# final KL. The untrained gap is {glue:text}`ch4.freeze_tunnel_gap_bits:.2f` bits, and the trained runs end at
# {glue:text}`ch4.freeze_tunnel_unfrozen_final_bits:.4f` bits (seed-to-seed spread
# {glue:text}`ch4.freeze_tunnel_unfrozen_sd_bits:.4f`). Whether a longer run, like chapter 6's, makes the learned frame
# matter more is open at this budget. The step from which the frame is in place is
# {py:func}`chapters.two_timescale_em.freeze.freeze_frame_step`; the tunnel's layers are frozen by
# {py:func}`training.wind_tunnels.freeze_query_key`.
# :::

# %% tags=["hide-input"]
frozen = freeze.FRAME_FREEZE.load()  # stored result, computed once
freeze_costs = report.record_freeze_claims(frozen)  # kind → freeze step → mean cost (bits)

# %% tags=["remove-input", "remove-output"]
freeze_settings = {
    "recall head (this chapter)": frozen["head"],
    "bijection wind tunnel (chapter 6)": frozen["tunnel"],
}
plotting.glue_figure("fig-em-freeze-frame", figures.plot_freeze_frame(freeze_settings))

# %% [markdown] tags=[]
# ## Frame and precision under four definitions
#
# So far the order has come from one measure, under one optimiser, at one run length. Here four definitions, fixed
# before the runs, are applied to {glue:text}`ch4.fd_n_seeds` seeds. The runs use plain SGD (learning rate
# {glue:text}`ch4.fd_sgd_lr:g`) and Adam (learning rate {glue:text}`ch4.fd_adam_lr:g`), at run lengths of
# {glue:text}`ch4.fd_short_horizon:,`, {glue:text}`ch4.fd_main_horizon:,` and {glue:text}`ch4.fd_long_horizon:,` steps. With
# a constant learning rate a shorter run is the start of a longer one, so each seed is trained once and timed at every
# length.
#
# - **Parameter path**, as above: the first step from which the path still to go is at most 10% of the whole, for the
#   attention pattern and for the values.
# - **Function**: the frame is the attention on the answer's source, the quality of the E-step, on a linear scale. The
#   precision is the probe loss, on a log scale because it falls by orders of magnitude. Each has settled at the first
#   step from which it stays within 10% of its total change from its final value. This is how Paper I and chapter 6 look
#   at the dissociation: attention stable while calibration keeps improving.
# - **Function, log errors**: the same rule with both on a log scale, the attention *off* the answer's source against
#   the probe loss.
# - **Freeze**: the frame is in place from the earliest step from which freezing $W_Q$, $W_K$ costs nothing (the
#   {glue:text}`ch4.freeze_free_ratio`× bound above), at that step and every later one tried. The precision has settled
#   from the first step from which the probe loss stays within the same factor of its final value. Both are then in one
#   currency.
#
# On each run the frame comes first when its step is strictly earlier. Over the seeds, the share with the frame first is
# judged by its 95% Clopper–Pearson interval: above one half, the frame first; below, the precision first; straddling
# it, no order. Five agreeing seeds cannot establish an order; ten can.
#
# **At {glue:text}`ch4.fd_main_horizon:,` steps under plain SGD, only the parameter path puts the values first**
# ({numref}`fig-em-frame-definitions`):
#
# - by the parameter path the frame comes first on {glue:text}`frame_precision.order_path_sgd:.0%` of the seeds
#   (interval {glue:text}`ch4.fd_path_sgd_h2000_low:.0%` to {glue:text}`ch4.fd_path_sgd_h2000_high:.0%`). The frame's
#   last 10% of path begins at a median step of {glue:text}`ch4.fd_path_sgd_h2000_frame_median:.0f`, the values' at
#   {glue:text}`ch4.fd_path_sgd_h2000_precision_median:.0f`;
# - by the function, on {glue:text}`frame_precision.order_function_sgd:.0%`. The attention on the answer's source has
#   settled by a median step of {glue:text}`ch4.fd_function_sgd_h2000_frame_median:.0f`, the probe loss only by
#   {glue:text}`ch4.fd_function_sgd_h2000_precision_median:,.0f`;
# - with both errors on a log scale, on {glue:text}`frame_precision.order_function_log_sgd:.0%`;
# - by the freeze, on {glue:text}`frame_precision.order_intervention_sgd:.0%`. Freezing costs nothing from a median step
#   of {glue:text}`ch4.fd_intervention_sgd_h2000_frame_median:,.0f`, and the loss comes within the same factor of its end
#   at {glue:text}`ch4.fd_intervention_sgd_h2000_precision_median:,.0f`.
#
# Under Adam the shares are {glue:text}`frame_precision.order_path_adam:.0%` (parameter path),
# {glue:text}`frame_precision.order_function_adam:.0%` (function),
# {glue:text}`frame_precision.order_function_log_adam:.0%` (log errors) and
# {glue:text}`frame_precision.order_intervention_adam:.0%` (freeze).
#
# The definitions measure different things. The parameter path times when a quantity stops *moving*; the function and
# the freeze time when it stops *mattering* to the loss. Under plain SGD the values' path settles early, yet the probe
# loss keeps falling on a log scale long after. Moves too small to count as path still matter to the loss. Under Adam,
# whose step does not shrink with the gradient, the values keep moving. There the parameter path's answer is
# "{glue:text}`ch4.fd_path_adam_h2000_verdict`": the values' last 10% of path begins at
# {glue:text}`ch4.fd_path_adam_h2000_precision_median:.0f`, the frame's at
# {glue:text}`ch4.fd_path_adam_h2000_frame_median:.0f`.
#
# **The run's length moves every gap, because each definition is anchored to the run's end.** From
# {glue:text}`ch4.fd_short_horizon:,` to {glue:text}`ch4.fd_long_horizon:,` steps, the parameter path's mean gap
# $t_P - t_F$ grows {glue:text}`frame_precision.path_gap_horizon_ratio_sgd:.1f`-fold under SGD and
# {glue:text}`frame_precision.path_gap_horizon_ratio_adam:.1f`-fold under Adam: the last 10% of a path that keeps growing
# comes later. The function's gap grows {glue:text}`ch4.fd_function_sgd_gap_ratio:.1f`-fold under SGD, because the probe
# loss keeps falling on a log scale however long the run; that is what "precision keeps refining" means. The freeze is
# anchored to the trained run's final loss, which keeps falling too. At {glue:text}`ch4.fd_short_horizon:,` steps under SGD
# the frame is not in place before the run ends, so the precision comes first: the frame leads on only
# {glue:text}`ch4.fd_intervention_sgd_h1000_share:.0%` of the seeds. Under Adam the freeze's gap grows
# {glue:text}`ch4.fd_intervention_adam_gap_ratio:.1f`-fold. Across the three lengths,
# {glue:text}`ch4.fd_horizon_stability`.
#
# :::{admonition} How the freeze is timed, and the shares at every run length
# :class: dropdown
#
# The freeze steps are searched from the latest down, and the boundary cell is bisected to 10 steps wherever the
# precision step falls inside it. The order is therefore read at a resolution finer than the difference it separates.
# The definitions are computed by {py:mod}`chapters.two_timescale_em.frame_definitions`. The freeze definition uses
# {py:func}`chapters.two_timescale_em.frame_definitions.intervention_steps`, with the same bound as the freeze runs
# above. The SGD runs are this chapter's own runs, so the parameter path under SGD at {glue:text}`ch4.fd_main_horizon:,`
# steps is the measurement of the section *Frame and precision, measured*.
#
# The table below gives, per optimiser and definition, the share of seeds with the frame first, its 95% interval and the
# order it gives, at every run length. The verdict page lists the same result definition by definition.
# :::

# %% tags=["hide-input"]
definitions = frame_definitions.FRAME_DEFINITIONS.load()  # stored result, computed once
order_claims = frame_definitions_report.record_frame_definition_claims(definitions)
frame_definitions_report.glue_frame_definitions(definitions)
# the finding in the reader's words, read from the claims just recorded
frame_row = frame_definitions_report.glue_frame_row(claims.recorded_claims())

# %% tags=["remove-input", "hide-output"]
# per optimiser and definition: share of seeds with the frame first, its interval and order
frame_definitions_report.order_table(definitions)

# %% tags=["remove-input", "remove-output"]
plotting.glue_figure("fig-em-frame-definitions", figures.plot_frame_definitions(definitions))

# %% [markdown] tags=[]
# :::{admonition} A later study on Paper I's transformer
# :class: dropdown
#
# A later frame study by Dalal, Misra and Parekh {cite}`dalal2026workspace` times the frame at the function level in
# Paper I's $V = 20$ bijection transformer. Its frame subspace crosses three times its null level at about step 400 and
# plateaus by about step 2,500, while calibration improves about 40-fold more. Freezing the embeddings with $W_Q$, $W_K$
# at step 2,500 costs almost nothing: a final entropy error of 0.0029 against 0.0022 bits, over three seeds. Those are a
# function-level measure and an intervention. On this chapter's head the same two kinds of measure give
# {glue:text}`ch4.fd_function_sgd_h2000_verdict` and {glue:text}`ch4.fd_intervention_sgd_h2000_verdict` under SGD.
# :::

# %% [markdown] tags=[]
# ## The parameter path under a change of coordinates
#
# A parameter path is measured in the weights' coordinates, and those are not unique. Scale the values by $c$ and the
# read-out by $1/c$:
#
# ```{math}
# :label: eq-value-rescaling
# W_V \leftarrow c\, W_V, \qquad W_O \leftarrow W_O / c .
# ```
#
# At the start the head computes exactly the same function, but gradient descent now takes its steps in other
# coordinates. Under plain SGD the values' steps, seen in the old coordinates, shrink by $c^2$ and the read-out's grow
# by $c^2$. The stored result *frame reparametrisation* retrains the head at $c$ = {glue:text}`ch4.reparam_scales`,
# under SGD and Adam, on the same {glue:text}`ch4.reparam_seeds` seeds, and times it by the parameter path and the two
# function definitions. The function definitions look only at what the head computes. If the parameter path's order
# moves with $c$ while the function's does not, the path measures the coordinates rather than the dynamics. It would then
# say nothing about the paper's statement either way.
#
# At {glue:text}`ch4.reparam_horizon:,` steps the path's order {glue:text}`ch4.reparam_path_moves`: under SGD the
# frame settles first on {glue:text}`frame_precision.order_path_sgd_values_halved:.0%` of the seeds with the values
# halved and {glue:text}`frame_precision.order_path_sgd_values_doubled:.0%` with them doubled, as at $c = 1$; the
# function reading puts it first on {glue:text}`ch4.reparam_function_sgd_halved:.0%` and
# {glue:text}`ch4.reparam_function_sgd_doubled:.0%`. The parameter path keeps its place among the definitions: its
# disagreement with the function is not an artefact of the coordinates.

# %% tags=["remove-input"]
# the stored result frame_reparametrisation: the path and function readings at value scales c
report.glue_reparametrisation_settings()
reparam = report.record_reparametrisation_claims(
    reparametrisation.FRAME_REPARAMETRISATION.load(),
    frame_definitions.FRAME_DEFINITIONS.load(),
    horizon=2000,
)

# %% [markdown] tags=[]
# :::{admonition} Settings
# :class: dropdown
#
# | setting | value |
# |---|---|
# | mixture: points, components, dimensions, EM iterations | {glue:text}`ch4.n_points`, {glue:text}`ch4.gmm_K`, {glue:text}`ch4.gmm_d`, {glue:text}`ch4.n_em_iterations` |
# | recall heads at equal learning rates: seeds | {glue:text}`ch4.n_seeds` ({glue:text}`ch4.first_seed` to {glue:text}`ch4.last_seed`) |
# | training steps, learning rate (every matrix) | {glue:text}`ch4.steps:,`, {glue:text}`ch4.lr` |
# | training, probe sequences | {glue:text}`ch4.n_train`, {glue:text}`ch4.n_probe` |
# | path recorded every | {glue:text}`ch4.path_every` steps |
# | rate criterion: measured every, window, $\tau$ | {glue:text}`ch4.record_every` steps, {glue:text}`ch4.settle_window` steps, {glue:text}`ch4.tau:.0%` |
# | value/routing learning-rate ratios; seeds each | {glue:text}`ch4.ratio_list`; {glue:text}`ch4.n_sweep_seeds` |
# | freeze runs: recall head seeds, steps | {glue:text}`ch4.freeze_head_seeds`, {glue:text}`ch4.freeze_head_steps:,` |
# | freeze runs: bijection tunnel seeds, steps | {glue:text}`ch4.freeze_tunnel_seeds`, {glue:text}`ch4.freeze_tunnel_steps` |
# | a freeze costs nothing within | {glue:text}`ch4.freeze_free_ratio`× the trained run's final error |
# | four definitions: seeds, run lengths | {glue:text}`ch4.fd_n_seeds`; {glue:text}`ch4.fd_short_horizon:,`, {glue:text}`ch4.fd_main_horizon:,`, {glue:text}`ch4.fd_long_horizon:,` steps |
# | four definitions: SGD, Adam learning rates | {glue:text}`ch4.fd_sgd_lr:g`, {glue:text}`ch4.fd_adam_lr:g` |
# :::
#
# :::{admonition} Run it yourself
# :class: dropdown
#
# Re-execute this chapter (its run time is on the execution status page):
#
# ```bash
# python -m attention_dynamics reproduce --chapter 4 --force
# ```
#
# The freeze runs, the four definitions and the change of coordinates are stored results, computed once and read from
# the package's data (`attention_dynamics/data/`). To compute one again and copy it there:
#
# ```bash
# python -m attention_dynamics compute frame_freeze --promote
# python -m attention_dynamics compute frame_definitions --promote
# python -m attention_dynamics compute frame_reparametrisation --promote
# ```
#
# Add `--scale fast` for a reduced version that runs in minutes; `--list` names every stored result.
# :::
