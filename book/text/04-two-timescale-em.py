# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@b2a415a4ed431c659988d2b3a6f1dfdda8f82e2b"

# %% [markdown] tags=[]
# # Two-timescale EM
#
# Section 5 of the paper {cite}`agarwal2025gradient` reads the head's gradient dynamics as an
# expectation–maximisation procedure {cite}`dempster1977maximum` running on two timescales:
#
# - the **attention weights act as the E-step**: $\alpha_{ij}$ is a soft responsibility of a latent variable
#   "which position serves query $i$";
# - the **values act as the M-step**: $\Delta v_j = -\eta \sum_i \alpha_{ij} u_i$ moves each value toward the
#   responsibility-weighted need of the queries that use it, like a prototype update;
# - $W_Q$ and $W_K$ set the **hypothesis frame**: which positions a query can consider at all.
#
# The paper's claim about time is that routing settles fast while values keep refining — the
# **frame–precision dissociation**, which Paper I {cite}`agarwal2025geometry` observed in trained transformers:
# attention patterns stabilise early while the value manifold keeps unfurling. And it is explicit about the
# limits of the analogy: it is **structural, not variational** (training maximises no latent-variable
# likelihood, and nothing guarantees EM's monotone improvement), and it lives at the **EM/SGD level** —
# training produces point estimates of the weights, which then *compute* Bayesian posteriors in context.
#
# This chapter first makes the analogy precise where it is exact — a Gaussian mixture, where an EM step *is*
# a preconditioned gradient step {cite}`xu1996convergence` — and then measures, over many seeds, when the
# frame and the values of the previous chapter's head settle, and how that depends on the ratio of their
# learning rates.

# %% tags=["parameters"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
steps = None  # training steps of each head (None: as the scale says)

# %% tags=["hide-input"]
import warnings

warnings.filterwarnings(
    "ignore", message="IProgress not found"
)  # tqdm's notebook bar (no bars are shown)

from attention_dynamics.chapters.two_timescale_em import (
    figures,
    frame_definitions,
    frame_definitions_report,
    freeze,
    report,
    runs,
    settings,
)
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.diagnostics import frame_order
from attention_dynamics.ledger import claims, verdicts

# the recall heads of chapter 3; the paper has no such experiment, so "paper" = "book"
cfg = settings.resolve(scale, device=device, steps=steps)
generator = seed_everything(seed)
plotting.use_book_style()
cfg

# %% [markdown] tags=[]
# ## Where the analogy is exact: EM on a Gaussian mixture
#
# Take $N$ points $x_n \in \R^d$ and a mixture of $K$ Gaussians with means $\mu_k$, a shared known variance
# $\sigma^2$ and known weights $\pi_k$ ({py:mod}`em`). The log-likelihood is
# $\ell = \sum_n \log \sum_k \pi_k \Normal(x_n; \mu_k, \sigma^2 I)$. The E-step computes responsibilities, and
# the M-step moves each mean to the responsibility-weighted average of the data:
#
# ```{math}
# :label: eq-gmm-em
# r_{nk} = \softmax_k\Bigl(\log \pi_k - \frac{\norm{x_n - \mu_k}^2}{2\sigma^2}\Bigr), \qquad
# N_k = \sum_n r_{nk}, \qquad
# \mu_k \leftarrow \frac{1}{N_k} \sum_n r_{nk}\, x_n .
# ```
#
# The gradient of the log-likelihood with respect to a mean is
# $\partial \ell / \partial \mu_k = \sum_n r_{nk} (x_n - \mu_k) / \sigma^2$, so
#
# ```{math}
# :label: eq-xu-jordan
# \mu_k + \frac{\sigma^2}{N_k} \frac{\partial \ell}{\partial \mu_k}
# = \mu_k + \frac{1}{N_k} \sum_n r_{nk} (x_n - \mu_k)
# = \frac{1}{N_k} \sum_n r_{nk}\, x_n :
# ```
#
# **an EM step on a mean is a gradient-ascent step preconditioned by $\sigma^2 / N_k$** {cite}`xu1996convergence`.
# Each component gets its own learning rate, inversely proportional to how much data it is responsible for.
# We check the identity numerically, with the gradient from automatic differentiation (independent of both
# the closed form and the EM code; {py:func}`em.xu_jordan_max_abs_error`), at every iterate of an EM run on
# {glue:text}`ch4.n_points` points from a {glue:text}`ch4.gmm_K`-component mixture in {glue:text}`ch4.gmm_d`
# dimensions.

# %% tags=["hide-input"]
bridge = runs.gmm_bridge(cfg.n_points, cfg.n_em_iterations, generator)
bridge_claim = report.record_gmm_bridge(bridge, seed=seed)
print(
    f"largest bridge error over {cfg.n_em_iterations} EM iterates: {max(bridge.bridge_errors):.1e}"
)

# %% [markdown] tags=[]
# The largest difference between the EM step and the preconditioned gradient step, over all coordinates of
# all {glue:text}`ch4.n_em_iterations` iterates, is {glue:text}`em.xu_jordan_max_err:.1e` — rounding error,
# as the algebra says. The left panel of {numref}`fig-em-gmm` shows the data and the means moving under EM from
# three data points.
# On the right, the mean log-likelihood per point along EM, along gradient ascent preconditioned by
# $\sigma^2/N_k$ with step 1 (the same curve: it *is* EM), and along plain gradient ascent with one step size
# $c\,\sigma^2/N$ for every component. Plain ascent must be tuned: too small and it crawls, too large and it
# diverges ({glue:text}`ch4.diverging_c` × $\sigma^2/N$ leaves the plot). EM needs no step size, and never
# decreases the likelihood.

# %% tags=["hide-input", "remove-output"]
curves = report.likelihood_curves(bridge)  # EM, preconditioned and plain gradient ascent
plotting.glue_figure("fig-em-gmm", figures.plot_gmm_em(bridge, curves))

# %% [markdown] tags=[]
# ```{glue:figure} fig-em-gmm
# :name: fig-em-gmm
# :alt: Left, a scatter of two-dimensional points coloured by the mixture component that drew them, with the black paths of the three means under EM from open circles to stars. Right, the mean log-likelihood against the iteration for EM, for the preconditioned gradient ascent on top of it, and for plain gradient ascent at three step sizes.
#
# EM on a Gaussian mixture. Left: the data, coloured by the component that drew each point, and the path of each
# mean under EM (circle: start; star: end). Right: the mean log-likelihood per point along EM, along gradient
# ascent preconditioned by $\sigma^2/N_k$ with step 1 (dashed), and along plain gradient ascent with the step
# sizes $c\,\sigma^2/N$ of the legend.
# ```

# %% [markdown] tags=[]
# ### The correspondence to attention
#
# Written as a softmax, the E-step {eq}`eq-gmm-em` *is* an attention computation: expanding the square,
# $r_{nk} = \softmax_k\bigl(x_n \cdot \mu_k / \sigma^2 + \log \pi_k - \norm{\mu_k}^2 / 2\sigma^2\bigr)$, a query
# $x_n$ scoring keys $\mu_k$ with scale $1/\sigma^2$ and a per-key bias ({py:func}`em.responsibilities_as_attention`
# agrees with the E-step to {glue:text}`ch4.attention_err:.0e`). The dictionary between the two:
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
# The last row is the bridge to chapter 5: the paper's "EM-like" schedule raises the learning rate of the
# values, and a closed-form M-step for the values would give each value its own rate $\propto 1/N_j$.
#
# The dictionary is **structural**. In the mixture, the responsibilities are the exact posterior of a
# latent variable under a generative model, and EM maximises a likelihood, improving it monotonically (the
# right panel above). In the head, the scores are learned rather than derived from a model, the "M-step"
# targets the cross-entropy of the next token rather than a likelihood of the inputs, and the routing and the
# values are updated *simultaneously* by gradient descent — no step is a maximisation, and a large enough
# value step increases the loss (the previous chapter's value-step ratio turns negative at large $\eta$).
# And the analogy concerns *training*: the EM-like dynamics produce point estimates of $W_Q, W_K, W_V, W_O$;
# the Bayesian computation happens later, in context, when those fixed weights route and combine evidence.
#
# ## Frame and precision, measured
#
# We now return to the previous chapter's head and ask when each side of the loop stops moving. On a fixed
# probe set of {glue:text}`ch4.n_probe` sequences, every {glue:text}`ch4.record_every` steps, we take:
#
# - **the frame**: the attention pattern of the queries. It has *settled* at the first step $t_F$ from which
#   on it changes, over every window of {glue:text}`ch4.settle_window` steps, by less than a fraction $\tau$
#   of the attention mass (mean total-variation distance between rows);
# - **the precision**: the value vectors of the sources. They have *settled* at the first step $t_P$ from
#   which on they change, over every window of {glue:text}`ch4.settle_window` steps, by less than a fraction
#   $\tau$ of their norm (RMS change over RMS norm).
#
# Both are rate criteria with the same unit-free threshold ({py:func}`settling.quiescence_step`); they do not
# depend on how long training lasts. We fix $\tau$ = {glue:text}`ch4.tau:.0%` per {glue:text}`ch4.settle_window`
# steps before looking at the results, and report other thresholds, and a second criterion (distance to the
# final state within 10% of the initial distance; {py:func}`settling.settle_step`), as a sensitivity check.
# The paper's dissociation predicts $t_F < t_P$. We train {glue:text}`ch4.n_seeds` heads (seeds
# {glue:text}`ch4.first_seed` to {glue:text}`ch4.last_seed`, each drawing its own data and initialisation) with
# learning rate {glue:text}`ch4.lr` on every matrix for {glue:text}`ch4.steps` steps, on both cores.
# {numref}`fig-em-settling-rates` shows both rates of change for every seed and the settling steps they give.

# %% tags=["trained-output", "hide-input"]
tau = settings.TAU  # fixed before looking at the results
equal_runs, sweep_runs = runs.train_heads(cfg)  # equal rates; and per value/routing lr ratio
summary = runs.rate_settling_summary(equal_runs, threshold=tau)
report.glue_equal_rates(summary, cfg)

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure(
    "fig-em-settling-rates",
    figures.plot_settling_rates(equal_runs, summary, tau=tau, settle_window=cfg.settle_window),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-em-settling-rates
# :name: fig-em-settling-rates
# :alt: Left, on a log axis against the training step, one thin curve per seed for the attention mass the frame moves per window and for the relative change of the values, with a dashed threshold line. Right, one dot per seed at its frame settling step across and its value settling step up, with the grey diagonal of equal times.
#
# The rate criterion at equal learning rates. Left: for every seed, the fraction of attention mass the frame moves
# and the relative change of the values, per window of steps; the dashed line is the threshold $\tau$. Right: each
# seed's settling steps, $t_F$ across and $t_P$ up; above the grey diagonal the frame settles first.
# ```

# %% tags=["trained-output", "hide-input"]
sensitivity = runs.sensitivity_rows(equal_runs, cfg.settle_window)
print(report.sensitivity_table(sensitivity))

# %% [markdown] tags=[]
# ### A unit-free criterion, read finely enough
#
# Two things make the rate criterion above unfit to decide an order: the two quantities are measured in different
# units (attention mass moved and relative value change), so one $\tau$ for both is arbitrary, and the settling steps
# it finds differ by one or two recording intervals of {glue:text}`ch4.record_every` steps. We therefore also record
# the attention pattern and the values every {glue:text}`ch4.path_every` steps and use a criterion without units:
# a quantity has settled at the first step from which the path it still travels is at most a fraction $f$ of its
# whole path over the run ({py:func}`settling.path_settling_step`). For each seed the difference
# $t_P - t_F$ is then paired (same head, same data), and {py:func}`chapters.two_timescale_em.runs.settling_comparison` gives its
# mean with a 95% $t$ interval over the seeds. We call an order only where that interval excludes zero, and show
# the verdict across thresholds from $f$ = 30% down to 1% ({numref}`fig-em-settling-paths` and the table under
# it). The claims use $f$ = 10%, chosen before the runs.

# %% tags=["trained-output", "hide-input", "remove-output"]
comparison, order, path_table = report.path_comparison(equal_runs, cfg, seed=seed)
plotting.glue_figure("fig-em-settling-paths", figures.plot_settling_comparison(comparison))

# %% [markdown] tags=[]
# ```{glue:figure} fig-em-settling-paths
# :name: fig-em-settling-paths
# :alt: The paired difference between the values' and the frame's settling steps against the remaining-path threshold on a log axis: the mean over seeds with its confidence interval as error bars, every seed's difference as a dot, and a grey band around zero one recording interval wide.
#
# The unit-free path criterion at equal learning rates: the values' settling step minus the frame's, $t_P - t_F$,
# against the threshold $f$ (the share of its whole path a quantity may still travel). Error bars: the mean over
# seeds and its $t$ interval; dots: single seeds; grey band: zero, plus or minus one recording interval. Above
# zero the frame settles first.
# ```

# %% tags=["trained-output", "hide-input"]
print(path_table)

# %% tags=["trained-output", "hide-input"]
share, ratio = report.record_order_claims(order, cfg)
# the order is worded by the claim's status, so the sentence cannot drift from the ledger
claims.glue("ch4.path_order_phrase", frame_order.order_phrase(share.status))
both = share.status if share.status == ratio.status else "split"  # the two claims' common status
claims.glue(
    "ch4.path_claims_phrase",
    {
        "pass": "reproduce",
        "fail": "do not reproduce",
        "undecided": "do not decide",
        "split": "disagree on",
    }[both],
)
print(order)

# %% [markdown] tags=[]
# **By this criterion, under plain SGD at equal learning rates, {glue:text}`ch4.path_order_phrase`.** By the
# unit-free path criterion, recorded every {glue:text}`ch4.path_every` steps, the paired difference
# $t_P - t_F$ at $f$ = 10% is a mean of {glue:text}`ch4.path_diff_01:.0f` steps (95% interval
# {glue:text}`ch4.path_low_01:.0f` to {glue:text}`ch4.path_high_01:.0f`; negative: the values settle first). The median frame
# settles at step {glue:text}`ch4.path_median_frame_step:.0f` and the values at
# {glue:text}`ch4.path_median_value_step:.0f`. That gap is many recording intervals wide. The verdict is the same at
# {glue:text}`ch4.path_n_decided` of the {glue:text}`ch4.path_n_thresholds` thresholds: at $f$ = 30% the difference
# is {glue:text}`ch4.path_diff_03:.0f` steps ({glue:text}`ch4.path_verdict_03`), at $f$ = 1%
# {glue:text}`ch4.path_diff_001:.0f` ({glue:text}`ch4.path_verdict_001`). The ledger's two claims therefore
# {glue:text}`ch4.path_claims_phrase` the paper's frame-first order here. The frame settles first in
# {glue:text}`dynamics.frame_settles_first_fraction:.0%` of the seeds (95% interval
# {glue:text}`ch4.path_fraction_low:.0%` to {glue:text}`ch4.path_fraction_high:.0%`), and the median ratio
# $t_P/t_F$ is {glue:text}`dynamics.precision_to_frame_time_ratio:.2f` (interval
# {glue:text}`ch4.path_ratio_low:.2f` to {glue:text}`ch4.path_ratio_high:.2f`),
# {glue:text}`ch4.path_intervals_phrase`. The rate criterion above could not see this. Its two quantities have no common unit, and its
# steps differ by one or two recording intervals, which is why its verdict moved with $\tau$ (frame first in
# {glue:text}`ch4.loose_fraction:.0%` of seeds at $\tau$ = 3%, in {glue:text}`ch4.strict_fraction:.0%` at 0.3%, and in
# {glue:text}`ch4.distance_fraction:.0%` by distance to the final state).
#
# One caution bounds the reading. "Final" means the end of these {glue:text}`ch4.steps` steps, by which the median probe loss
# has fallen to {glue:text}`ch4.final_loss_fraction:.1e` of its untrained value; a much longer run could still add
# path to either quantity. This
# is not the order of the previous chapter. There the values *begin* to align before routing forms; here the
# question is when each quantity *stops* moving, and a frame can stop mattering well before it stops drifting (the
# freeze experiment below). Nothing in this task keeps the values busy afterwards. Its
# answer is deterministic, so there is no soft posterior for the values to calibrate, which is what "precision"
# refers to in Paper I's wind tunnels.
#
# ## How the learning-rate ratio moves both times
#
# What the two timescales *do* depend on is the ratio of the value learning rate to the routing (and
# readout) learning rate. We repeat the measurement with the values' rate scaled by
# {glue:text}`ch4.ratio_list` ({glue:text}`ch4.n_sweep_seeds` seeds each; the equal-rate runs above give ratio 1).

# %% tags=["trained-output", "hide-input"]
sweep, sweep_table = report.ratio_sweep(sweep_runs, summary, tau=tau)
print(sweep_table)

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure("fig-em-ratio-sweep", figures.plot_ratio_sweep(sweep, tau=tau))

# %% [markdown] tags=[]
# ```{glue:figure} fig-em-ratio-sweep
# :name: fig-em-ratio-sweep
# :alt: Two panels against the value-to-routing learning-rate ratio on a log axis. Left, the median settling steps of the frame and of the values with every seed's steps as small dots. Right, the median ratio of the two settling steps and the fraction of seeds whose frame settles first, with a grey line at 1.
#
# The rate criterion as the values' learning rate is scaled against the routing's. Left: the settling steps
# $t_F$ and $t_P$, medians joined and single seeds as dots. Right: the median ratio $t_P/t_F$ and the fraction of
# seeds whose frame settles first; the grey line marks a ratio of one.
# ```

# %% tags=["trained-output", "hide-input"]
sweep_paths, sweep_path_table = report.sweep_path_comparison(sweep_runs)
print(sweep_path_table)

# %% [markdown] tags=[]
# Both times move with the values' learning rate ({numref}`fig-em-ratio-sweep`). Faster values (ratio
# {glue:text}`ch4.highest_ratio:g`) bring *both* settling times forward — the values settle at a median step of
# {glue:text}`ch4.value_step_high:.0f` and the frame at {glue:text}`ch4.frame_step_high:.0f` (chapter 3's loop,
# in which informative values create the advantage that routing follows, would predict this; the sweep itself does
# not test it); {glue:text}`ch4.highest_ratio_order_phrase` (frame first in {glue:text}`ch4.highest_ratio_fraction:.0%` of seeds, median ratio
# {glue:text}`ch4.highest_ratio_time_ratio:.2f`). Slower values (ratio {glue:text}`ch4.lowest_ratio:g`) delay
# both — values at {glue:text}`ch4.value_step_low:.0f`, frame at {glue:text}`ch4.frame_step_low:.0f` — and
# {glue:text}`ch4.lowest_ratio_order_phrase`: the frame settles first in {glue:text}`ch4.lowest_ratio_fraction:.0%` of
# seeds, with a median ratio of {glue:text}`ch4.lowest_ratio_time_ratio:.2f`. The two ends of the sweep are
# what the rate criterion says about the learning rates' ratio. Whether that is a property of the schedule or of
# the definition is what the last section asks: under Adam the parameter path itself gives
# {glue:text}`ch4.fd_path_adam_h2000_verdict` at equal learning rates.
#
# These orders come from the rate criterion, with the weaknesses shown above and {glue:text}`ch4.n_sweep_seeds` seeds
# per ratio. The unit-free path criterion ($f$ = 10%) on the same runs gives a mean $t_P - t_F$ of
# {glue:text}`ch4.sweep_path_low_diff:.0f` steps (95% interval {glue:text}`ch4.sweep_path_low_low:.0f` to
# {glue:text}`ch4.sweep_path_low_high:.0f`: {glue:text}`ch4.sweep_path_low_verdict`) at ratio
# {glue:text}`ch4.lowest_ratio:g`, and {glue:text}`ch4.sweep_path_high_diff:.0f` steps
# ({glue:text}`ch4.sweep_path_high_low:.0f` to {glue:text}`ch4.sweep_path_high_high:.0f`:
# {glue:text}`ch4.sweep_path_high_verdict`) at ratio {glue:text}`ch4.highest_ratio:g`. An order is stated only where
# the interval excludes zero.

# %% [markdown] tags=[]
# ## Freezing the frame
#
# A settling criterion says when a quantity stops moving, not when it stops mattering. The intervention asks the
# second question directly: train normally up to step $t$, then freeze $W_Q$ and $W_K$ and train everything else to
# the end. If the frame is in place at $t$, the frozen run ends where the unfrozen one does. We do this on this
# chapter's recall head (book settings, {glue:text}`ch4.freeze_head_seeds` seeds) and on chapter 6's bijection wind
# tunnel, a 4-layer transformer, with the query and key rows of every layer's projection frozen
# ({py:func}`training.wind_tunnels.freeze_query_key`; {glue:text}`ch4.freeze_tunnel_seeds` seeds, {glue:text}`ch4.freeze_tunnel_steps`
# steps, a quarter of chapter 6's book budget, warm-up shortened to match). The runs are too heavy to repeat in every build. They were computed once by
# `python -m attention_dynamics compute frame_freeze` and are loaded here from
# `attention_dynamics/data/frame_freeze.json`; a test regenerates a reduced version through the same code. The
# score is the final probe cross-entropy for the head and the final KL divergence from the exact posterior for the
# tunnel, both in bits, minus the unfrozen run's value for the same seed. A frozen run counts as matching when
# its cost is at most {glue:text}`ch4.freeze_margin_fraction:.0%` of that seed's untrained gap (the untrained
# model's value minus the unfrozen run's final value). The frame is *in place* from the first freeze step from
# which every seed matches, at every later freeze step as well ({py:func}`chapters.two_timescale_em.freeze.freeze_frame_step`).

# %% tags=["hide-input"]
frozen = freeze.FRAME_FREEZE.load()  # computed once; see the text above
MARGIN = settings.FREEZE_MARGIN
report.record_freeze_claims(frozen, MARGIN)  # freeze step → mean cost (bits), per model

# %% tags=["hide-input", "remove-output"]
freeze_settings = {
    "recall head (this chapter)": frozen["head"],
    "bijection wind tunnel (chapter 6)": frozen["tunnel"],
}
plotting.glue_figure("fig-em-freeze-frame", figures.plot_freeze_frame(freeze_settings, MARGIN))

# %% [markdown] tags=[]
# ```{glue:figure} fig-em-freeze-frame
# :name: fig-em-freeze-frame
# :alt: Two panels, the recall head and the bijection wind tunnel, each showing on log axes the final cost in bits of freezing the query and key weights against the step at which they are frozen, thin lines per seed and a marked mean, with a dashed margin line and a green vertical line where the frame is in place.
#
# The cost of freezing the frame: the final probe cross-entropy (recall head, left) or KL divergence from the exact
# posterior (bijection wind tunnel, right) of a run whose $W_Q$, $W_K$ are frozen at step $t$, minus the unfrozen
# run's, in bits, per seed and averaged. Dashed: the margin; green: the first freeze step from which every seed
# stays within it. The step axis is linear below 1 and logarithmic above.
# ```

# %% [markdown] tags=[]
# {numref}`fig-em-freeze-frame` shows the costs. On the recall head the frame matters: freezing $W_Q$, $W_K$ at initialisation costs
# {glue:text}`frame_precision.freeze_frame_cost_bits:.2f` bits of final probe loss, most of the untrained gap of
# {glue:text}`ch4.freeze_head_gap_bits:.2f` bits. Freezing at step 400 still costs
# {glue:text}`ch4.freeze_head_cost_at_400:.2f` bits. From step {glue:text}`frame_precision.freeze_frame_step` on,
# every seed ends within the margin of {glue:text}`ch4.freeze_head_margin_bits:.3f` bits (at step 600 the mean cost is
# {glue:text}`ch4.freeze_head_cost_at_600:.4f` bits; the unfrozen runs' seed-to-seed spread is
# {glue:text}`ch4.freeze_head_unfrozen_sd_bits:.0e` bits). So the frame is in place between step 400 and step
# {glue:text}`frame_precision.freeze_frame_step` of {glue:text}`ch4.freeze_head_steps`, the same stretch in which the
# values pass their last 10% of path (median step {glue:text}`ch4.path_median_value_step:.0f`). This grid is too
# coarse to order the two; the next section refines it where it matters. What it does show is that the attention keeps moving after it has stopped
# mattering (its own last 10% of path begins at a median step of {glue:text}`ch4.path_median_frame_step:.0f`). The
# path criterion's "values first" is therefore partly a statement about a frame that drifts harmlessly.
#
# In the bijection wind tunnel, freezing every layer's query and key weights at initialisation costs
# {glue:text}`frame_precision.tunnel_freeze_frame_cost_bits:.4f` bits of final KL. The untrained gap is
# {glue:text}`ch4.freeze_tunnel_gap_bits:.2f` bits, and the unfrozen runs end at
# {glue:text}`ch4.freeze_tunnel_unfrozen_final_bits:.4f` bits (seed-to-seed spread
# {glue:text}`ch4.freeze_tunnel_unfrozen_sd_bits:.4f`). The earliest freeze step from which every seed is within the
# margin ({glue:text}`ch4.freeze_tunnel_margin_bits:.4f` bits) is {glue:text}`frame_precision.tunnel_freeze_frame_step`
# of {glue:text}`ch4.freeze_tunnel_steps`. A frame that is never trained already does almost as well as a learned one
# at this budget, so the intervention cannot time the frame here: nearly all of the tunnel's progress is made by the
# weights that stay free (values, outputs, MLPs, embeddings). What a random frame costs is small but not nothing: it is
# to be read against the unfrozen run's own final KL, not against the gap. Whether a longer run (chapter 6 trains four
# times as long) makes the learned frame matter more is not decided at this budget.

# %% [markdown] tags=[]
# ## Frame and precision under four definitions
#
# The order of frame and precision has so far been decided with one operationalisation, the parameter path, under
# one optimiser and at one run length. A reviewer would try others; this section decides the order under four
# definitions fixed before the runs, with {glue:text}`ch4.fd_n_seeds` seeds each, under plain SGD (this chapter's
# learning rate 0.5) and under Adam (learning rate {glue:text}`ch4.fd_adam_lr`, chosen on a seed outside these for a
# final probe loss of the same order as SGD's), at three run lengths: 1000, 2000 and 4000 steps. With a constant
# learning rate a run of 1000 steps is the first 1000 steps of a longer one, so each seed and optimiser is trained
# once, to 4000 steps, and read at every length.
#
# - **Parameter path** (this chapter's): the first step from which the path still to go is at most 10% of the whole,
#   for the query rows' attention pattern and for the sources' values.
# - **Function**: the frame is the attention on the source holding the answer (the E-step's quality), on a linear
#   scale; the precision is the probe loss, on a log scale because it falls by orders of magnitude. Each has settled
#   at the first step from which it stays within 10% of its total change from its final value
#   ({py:func}`settling.settle_step`). This is how Paper I and chapter 6 read the dissociation: attention patterns
#   stable while calibration keeps improving.
# - **Function, log errors**: the same rule with both errors on a log scale, the attention *off* the answer's source
#   against the probe loss, a reading symmetric in form.
# - **Intervention**: the frame is in place at the earliest step $t$ from which freezing $W_Q$, $W_K$ and training the
#   rest to the end costs at most 1% of the untrained gap in final probe loss, at $t$ and at every later freeze step
#   tried; the precision has plateaued at the first step from which the probe loss stays within the same 1% of the gap
#   of its final value. Both are in one currency. Freeze steps are searched from the latest down, and the boundary
#   cell is bisected to 10 steps wherever the precision step falls inside it, so the order is read at a resolution
#   finer than the difference it decides.
#
# On each run the frame settles first when its step comes strictly before the precision's. The share of seeds with
# the frame first is decided by its 95% Clopper–Pearson interval: above 1/2 the frame first, below 1/2 the precision
# first, straddling 1/2 undecided (five agreeing seeds cannot decide an order; ten can). The runs are too heavy for this
# page; they were computed once with `python -m attention_dynamics compute frame_definitions` and are loaded from
# `attention_dynamics/data/frame_definitions.json` (a test regenerates a reduced version through the same code). The
# SGD runs are this chapter's own runs, so the parameter path under SGD at 2000 steps is the measurement above.
# The table gives, per optimiser and definition, the share of seeds with the frame first, its interval and its
# verdict at each run length; {numref}`fig-em-frame-definitions` draws the same shares.

# %% tags=["hide-input"]
definitions = frame_definitions.FRAME_DEFINITIONS.load()  # computed once; see the text above
order_claims = frame_definitions_report.record_frame_definition_claims(definitions)
frame_definitions_report.glue_frame_definitions(definitions)
# the row's verdict is read from the claims just recorded: the prose states what the ledger decides
frame_row = verdicts.verdict_of("frame_precision_toy", claims.recorded_claims())
claims.glue("ch4.frame_row_verdict", frame_row.verdict)
claims.glue("ch4.frame_row_readings", frame_row.readings_text())

# %% tags=[]
# per optimiser and definition: share of seeds with the frame first [95% interval] and verdict
frame_definitions_report.order_table(definitions)

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-em-frame-definitions", figures.plot_frame_definitions(definitions))

# %% [markdown] tags=[]
# ```{glue:figure} fig-em-frame-definitions
# :name: fig-em-frame-definitions
# :alt: Two panels, plain SGD and Adam, each plotting against the run length on a log axis the share of seeds whose frame settles first, one line of points with interval bars per definition, around a dotted line at one half.
#
# Which settles first, under four definitions: per optimiser, the share of the seeds on which the frame settles
# strictly before the precision, at each run length, with its 95% Clopper–Pearson interval (the definitions are
# drawn side by side so their intervals stay apart). Dotted: one half; an interval above it puts the frame first,
# one below it the precision.
# ```

# %% [markdown] tags=[]
# At this chapter's 2000 steps the verdict is **{glue:text}`ch4.frame_row_verdict`**:
# {glue:text}`ch4.frame_row_readings`. Under plain SGD the parameter path puts the frame first on
# {glue:text}`frame_precision.order_path_sgd:.0%` of the seeds (95% interval
# {glue:text}`ch4.fd_path_sgd_h2000_low:.0%`–{glue:text}`ch4.fd_path_sgd_h2000_high:.0%`): the frame's last 10% of path
# begins at a median step of {glue:text}`ch4.fd_path_sgd_h2000_frame_median:.0f`, the values' at
# {glue:text}`ch4.fd_path_sgd_h2000_precision_median:.0f`. By the function the share is
# {glue:text}`frame_precision.order_function_sgd:.0%`: the attention on the answer's source has settled by a median
# step of {glue:text}`ch4.fd_function_sgd_h2000_frame_median:.0f`, the probe loss only by
# {glue:text}`ch4.fd_function_sgd_h2000_precision_median:.0f`. With both errors on a log scale it is
# {glue:text}`frame_precision.order_function_log_sgd:.0%`. By the intervention it is
# {glue:text}`frame_precision.order_intervention_sgd:.0%`: freezing $W_Q$, $W_K$ costs less than the margin from a
# median step of {glue:text}`ch4.fd_intervention_sgd_h2000_frame_median:.0f`, while the probe loss comes within the
# same margin of its end at {glue:text}`ch4.fd_intervention_sgd_h2000_precision_median:.0f`. Under Adam the shares are
# {glue:text}`frame_precision.order_path_adam:.0%` (parameter path),
# {glue:text}`frame_precision.order_function_adam:.0%` (function),
# {glue:text}`frame_precision.order_function_log_adam:.0%` (log errors) and
# {glue:text}`frame_precision.order_intervention_adam:.0%` (intervention); {numref}`fig-em-frame-definitions` shows
# every share at every run length.
#
# The readings measure different things. The parameter path times when a quantity stops *moving*, the function and
# the intervention when it stops *mattering*. Under plain SGD the attention pattern keeps drifting after freezing it
# has stopped costing anything: freezing $W_Q$, $W_K$ is within the margin from a median step of
# {glue:text}`ch4.fd_intervention_sgd_h2000_frame_median:.0f`, while the pattern's last 10% of path begins at
# {glue:text}`ch4.fd_path_sgd_h2000_frame_median:.0f`. Under Adam, whose step does not shrink with the gradient, the
# path criterion gives {glue:text}`ch4.fd_path_adam_h2000_verdict`: the values' last 10% of path begins at
# {glue:text}`ch4.fd_path_adam_h2000_precision_median:.0f`, the frame's at
# {glue:text}`ch4.fd_path_adam_h2000_frame_median:.0f`.
#
# The run length moves the readings differently. The parameter path's mean gap $t_P - t_F$ changes
# {glue:text}`frame_precision.path_gap_horizon_ratio_sgd:.1f`-fold under SGD and
# {glue:text}`frame_precision.path_gap_horizon_ratio_adam:.1f`-fold under Adam when the run is four times as long:
# "the last 10% of the whole path" is a fraction of a path that keeps growing. The function definitions' gaps change
# {glue:text}`ch4.fd_function_sgd_gap_ratio:.1f`-fold under SGD, because the probe loss keeps falling on a log scale
# however long the run (which is what "precision keeps refining" means). The intervention's changes
# {glue:text}`ch4.fd_intervention_sgd_gap_ratio:.2f`-fold ({glue:text}`ch4.fd_intervention_adam_gap_ratio:.2f` under
# Adam): freezing the frame at a step costs what it costs, whatever the run's length. Across the three lengths,
# {glue:text}`ch4.fd_horizon_stability`.
#
# A later frame study by Dalal, Misra and Parekh {cite}`dalal2026workspace` reads the frame at the function level in Paper I's
# $V = 20$ bijection transformer: its frame subspace crosses three times its null level at about step 400 and
# plateaus by about step 2,500, while calibration improves about 40-fold more; freezing the embeddings with $W_Q$,
# $W_K$ at step 2,500 costs almost nothing (final entropy error 0.0029 against 0.0022 bits, three seeds). Those are
# a function-level reading and an intervention; on this chapter's head the same two kinds of reading give
# {glue:text}`ch4.fd_function_sgd_h2000_verdict` and {glue:text}`ch4.fd_intervention_sgd_h2000_verdict` under SGD.

# %% [markdown] tags=[]
# ## Summary
#
# - For a Gaussian mixture the EM step on a mean equals a gradient step preconditioned by $\sigma^2/N_k$,
#   to {glue:text}`em.xu_jordan_max_err:.0e` in float64; the E-step is a softmax attention. This is the exact
#   core of the paper's EM reading, and the reason a larger, count-normalised value step behaves like an
#   M-step.
# - In the attention head the correspondence is structural: responsibilities ↔ attention, prototypes ↔ values,
#   soft counts ↔ $\sum_i \alpha_{ij}$; there is no likelihood being maximised and no monotone guarantee, and
#   the analogy describes training, not the in-context inference the trained weights perform.
# - Whether the frame settles first depends on what "settled" means. Decided under four definitions, two
#   optimisers and three run lengths ({glue:text}`ch4.fd_n_seeds` seeds each), the verdict is
#   **{glue:text}`ch4.frame_row_verdict`**: {glue:text}`ch4.frame_row_readings`. When the run is four times as
#   long the parameter path's gap changes {glue:text}`frame_precision.path_gap_horizon_ratio_sgd:.1f`-fold (SGD)
#   and the intervention's {glue:text}`ch4.fd_intervention_sgd_gap_ratio:.2f`-fold.
# - Freezing $W_Q$, $W_K$ at step $t$ shows when the frame matters. On the recall head it is in place by step
#   {glue:text}`frame_precision.freeze_frame_step`, about when the values settle by the path criterion;
#   the attention drifts on afterwards without effect. In the bijection wind tunnel (a quarter of chapter 6's
#   budget) a frame frozen at initialisation
#   costs only {glue:text}`frame_precision.tunnel_freeze_frame_cost_bits:.4f` bits, so there the intervention cannot
#   time the frame.
