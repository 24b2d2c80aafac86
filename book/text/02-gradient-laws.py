# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@defe77cd56804a7482e7cf326b9890286f122525"

# %% [markdown] tags=[]
# # The gradient laws
#
# The paper differentiates the loss of chapter 1's head back to its attention scores and its values, and boxes two
# results {cite}`agarwal2025gradient`. The **advantage routing law**: a query raises its score for a key in
# proportion to the key's attention weight times its *advantage*, how much better the key's value serves the query's
# error than the current mixture does. The **responsibility-weighted value law**: each value moves against the error
# of the queries that use it, weighted by how much they attend to it. Queries and keys inherit the routing law.
#
# Three findings:
#
# - **The laws hold exactly (to round-off).** Over {glue:text}`gradients.n_heads_checked` random heads, the routing,
#   value, query and key laws match automatic differentiation and PyTorch's fused attention to within
#   {glue:text}`ch2.laws_max_rel_err:.0e` of the gradient's largest entry. Finite differences, which use no
#   derivative code, agree to {glue:text}`gradients.finite_difference_max_rel_err:.0e`.
# - **Routing can freeze while the values keep learning.** As attention turns one-hot, the routing gradient falls to
#   {glue:text}`gradients.one_hot_score_grad_ratio:.0e` of its peak, while the value gradient ends at
#   {glue:text}`gradients.one_hot_value_grad_ratio:.2f` times its size in the head as drawn.
# - **The laws describe activations, not weights.** One real step on the weights of the paper's sticky-chain head
#   moves only {glue:text}`dynamics.score_sign_agreement_fraction:.0%` of attended pairs the way their advantage says,
#   and moves the values at a cosine of {glue:text}`dynamics.value_step_cosine:.2f` to the value law's step.
#
# ```{glue:figure} fig-gradient-worked-example
# :name: fig-gradient-worked-example
# :alt: Four heat maps of an eight-position causal head, query position down and key position across, blank above the diagonal: the attention weights, the compatibilities b_ij, the advantages A_ij and the routing gradient, the last three on blue-to-red scales centred at zero.
#
# The routing law on a small causal head. Top: attention $\alpha_{ij}$ and compatibility $b_{ij} = u_i \cdot v_j$.
# Bottom: advantage $A_{ij} = \E_{\alpha_i}[b] - b_{ij}$ and routing gradient
# $\partial L / \partial s_{ij} = -\alpha_{ij} A_{ij}$. The gate $\alpha_{ij}$ silences keys that are barely attended.
# ```

# %% tags=["parameters", "remove-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
n_draws = (
    None  # random heads checked against autograd and the fused kernel (None: as the scale says)
)

# %% tags=["remove-input"]
from IPython.display import display

from attention_dynamics.chapters.gradient_laws import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything

# fast / book / paper: how many heads and how long their sequences are; the heads have the paper's
# sticky-chain sizes (settings.HEAD), and the checks run in float64 (settings.DTYPE)
cfg = settings.resolve(scale, device=device, n_draws=n_draws)
generator = seed_everything(seed)
plotting.use_book_style()

# %% tags=["remove-input", "remove-output"]
# a causal head 4 -> 3/3/3 -> 3, T = 8, weights from N(0, 1)
example = runs.worked_example(generator)
report.glue_worked_example(example)
plotting.glue_figure("fig-gradient-worked-example", figures.plot_worked_example(example))

# %% [markdown] tags=[]
# ## From the loss to the attention weights
#
# Write $N$ for the number of positions the loss averages over and $\delta_i$ for the gradient of the loss with
# respect to the logits $z_i$ of position $i$. The softmax–cross-entropy identity gives
#
# ```{math}
# :label: eq-grad-logits
# \delta_i = \frac{\partial L}{\partial z_i} = \frac{1}{N}\left(p_i - e_{y_i}\right),
# ```
#
# and since $z_i = W_O^\top g_i$, the error signal of chapter 1's {eq}`eq-upstream` is $u_i = W_O \delta_i$. The loss
# depends on the attention weights only through the context vectors $g_i = \sum_j \alpha_{ij} v_j$, and $\alpha_{ij}$
# enters $g_i$ alone, so
#
# ```{math}
# :label: eq-grad-dalpha
# \frac{\partial L}{\partial \alpha_{ij}} = u_i \cdot \frac{\partial g_i}{\partial \alpha_{ij}} = u_i \cdot v_j = b_{ij} .
# ```
#
# The compatibility $b_{ij}$ is thus the rate at which the loss grows, in nats, as query $i$ puts weight on value $j$.
#
# ## The routing law
#
# The weights of row $i$ are a softmax of that row's scores, whose Jacobian is
#
# ```{math}
# :label: eq-grad-softmax-jacobian
# \frac{\partial \alpha_{ij}}{\partial s_{il}} = \alpha_{ij}\left(\mathbb{1}[j = l] - \alpha_{il}\right).
# ```
#
# A score $s_{il}$ moves only the weights of its own row, so the chain rule through {eq}`eq-grad-dalpha` sums over
# $j$ alone:
#
# ```{math}
# :label: eq-grad-routing-derivation
# \begin{aligned}
# \frac{\partial L}{\partial s_{il}}
# &= \sum_j b_{ij}\, \alpha_{ij}\left(\mathbb{1}[j = l] - \alpha_{il}\right) \\
# &= \alpha_{il}\, b_{il} - \alpha_{il} \sum_j \alpha_{ij} b_{ij} .
# \end{aligned}
# ```
#
# With $\E_{\alpha_i}[b] = \sum_j \alpha_{ij} b_{ij}$, the attention-weighted mean compatibility, this is the paper's
# first boxed result.
#
# :::{admonition} Advantage-based routing law
# :class: important
# ```{math}
# :label: eq-grad-routing-law
# \frac{\partial L}{\partial s_{ij}} = \alpha_{ij}\left(b_{ij} - \E_{\alpha_i}[b]\right)
# ```
# :::
#
# Call $A_{ij} = \E_{\alpha_i}[b] - b_{ij}$ the **advantage** of value $j$ for query $i$: how much better than the
# current mixture it serves that query's error. Then, for a gradient-descent step with learning rate $\eta$,
#
# ```{math}
# :label: eq-grad-advantage
# \begin{aligned}
# \frac{\partial L}{\partial s_{ij}} &= -\alpha_{ij} A_{ij}, \\
# \Delta s_{ij} &= -\eta\, \frac{\partial L}{\partial s_{ij}} = \eta\, \alpha_{ij} A_{ij} .
# \end{aligned}
# ```
#
# The step raises the score of every value with positive advantage and lowers the others. (It raises *scores*;
# whether the *weight* $\alpha_{ij}$ rises too depends on the whole row, because the softmax renormalises.) Four
# properties follow directly from {eq}`eq-grad-routing-law`:
#
# 1. **Routing mass is moved, not created.** Each row sums to zero, as it must: adding a constant to a row of scores
#    leaves the softmax unchanged.
# 2. **The signal is gated by attention.** A key with $\alpha_{ij} = 0$, masked by causality or pushed out of the
#    softmax, gets no gradient, however large its advantage.
# 3. **It is a covariance.** For any vector $w$ over the keys,
#
#    ```{math}
#    :label: eq-grad-covariance
#    \begin{aligned}
#    \sum_j \frac{\partial L}{\partial s_{ij}}\, w_j
#    &= \E_{\alpha_i}[b\, w] - \E_{\alpha_i}[b]\, \E_{\alpha_i}[w] \\
#    &= \Cov_{\alpha_i}(b_{i\cdot}, w),
#    \end{aligned}
#    ```
#
#    the covariance of compatibility and $w$ under the distribution $\alpha_i$.
# 4. **It vanishes as attention becomes one-hot.** A covariance under a distribution concentrated on a single key is
#    zero. The lemma below makes this quantitative.
#
# :::{admonition} Lemma (the routing gradient is bounded by the attention entropy)
# :class: note
# Let $\alpha^\star_i = \max_j \alpha_{ij}$, let $H(\alpha_i) = -\sum_j \alpha_{ij} \ln \alpha_{ij}$ be the attention
# entropy in nats and $R_i = \max_j b_{ij} - \min_j b_{ij}$ the spread of compatibilities, over the keys with
# $\alpha_{ij} > 0$. Then
#
# ```{math}
# :label: eq-grad-entropy-bound
# \begin{aligned}
# \sum_j \left| \frac{\partial L}{\partial s_{ij}} \right|
# &\le \left(1 - {\alpha^\star_i}^2\right) R_i \\
# &\le 2\, H(\alpha_i)\, R_i .
# \end{aligned}
# ```
# :::
#
# :::{admonition} Proof of the lemma
# :class: dropdown
# Let $j^\star$ be a key with $\alpha_{ij^\star} = \alpha^\star_i$. The mean $\E_{\alpha_i}[b]$ lies between the
# smallest and the largest attended $b_{ij}$, so every $|b_{ij} - \E_{\alpha_i}[b]| \le R_i$ and the keys
# $j \ne j^\star$ contribute at most $(1 - \alpha^\star_i) R_i$ in total. For $j^\star$ itself,
# $b_{ij^\star} - \E_{\alpha_i}[b] = \sum_{j \ne j^\star} \alpha_{ij} (b_{ij^\star} - b_{ij})$ is at most
# $(1 - \alpha^\star_i) R_i$ in size and carries the weight $\alpha^\star_i$. Together:
# $(1 + \alpha^\star_i)(1 - \alpha^\star_i) R_i$. Finally
# $1 - \alpha^\star_i \le -\ln \alpha^\star_i \le \sum_j \alpha_{ij} (-\ln \alpha_{ij}) = H(\alpha_i)$, because every
# $\alpha_{ij} \le \alpha^\star_i$, and $1 + \alpha^\star_i \le 2$. $\square$
# :::
#
# The routing signal of a query therefore dies out at least as fast as its attention entropy. A query whose attention
# is nearly one-hot has almost stopped re-routing, however large its error.
#
# {numref}`fig-gradient-worked-example` shows the law at work. The compatibility matrix is large and of both signs
# wherever the error is large, but the routing gradient is the advantage *gated by attention*. The first query sees
# only itself, so its routing gradient is exactly zero; every other row of the routing gradient sums to zero. The
# largest advantage in the example belongs to value {glue:text}`gradients.example_best_key` for query
# {glue:text}`gradients.example_best_query`, at {glue:text}`gradients.example_best_advantage:.3f` nats per unit of
# weight. But that query gives the key a weight of only {glue:text}`gradients.example_best_weight:.3f`. So gradient
# descent raises its score at just {glue:text}`gradients.example_best_score_step:.5f` nats per unit of score: a key
# that is barely attended learns slowly that it would be useful.
#
# ## The value law
#
# A value $v_j$ enters every context vector that attends to it, with $\partial g_i / \partial v_j = \alpha_{ij} I$.
# Summing over those queries gives the second boxed result.
#
# :::{admonition} Responsibility-weighted value update
# :class: important
# ```{math}
# :label: eq-grad-value-law
# \begin{aligned}
# \frac{\partial L}{\partial v_j} &= \sum_i \alpha_{ij}\, u_i, \\
# \Delta v_j &= -\eta \sum_i \alpha_{ij}\, u_i
# \end{aligned}
# ```
# :::
#
# Read the attention weights as soft {term}`responsibilities <responsibility>`. With the soft count
# $N_j = \sum_i \alpha_{ij}$ and the responsibility-weighted mean error $\bar u_j = \frac{1}{N_j} \sum_i \alpha_{ij} u_i$,
# the step is $\Delta v_j = -\eta N_j \bar u_j$. Each value moves against the average error of the queries that use
# it, in proportion to how much it is used. That is the shape of an M-step that re-estimates a prototype from its
# responsibilities {cite}`dempster1977maximum`. The paper calls the analogy structural rather than variational, and
# Part II of the book examines it.
#
# Unlike the routing law, {eq}`eq-grad-value-law` subtracts no mean. When attention becomes one-hot, with query $i$
# picking key $j^\star(i)$, the value gradient tends to $\sum_{i:\, j^\star(i) = j} u_i$. That is the summed error of
# the queries that pick $j$, which is not zero in general.
#
# ## Queries and keys
#
# The score $s_{ij} = q_i \cdot k_j / \sqrt{d_k}$ is bilinear, with $\partial s_{ij} / \partial q_i = k_j / \sqrt{d_k}$
# and $\partial s_{ij} / \partial k_j = q_i / \sqrt{d_k}$. Query $i$ appears only in row $i$ of the scores and key
# $j$ only in column $j$, so
#
# ```{math}
# :label: eq-grad-query-law
# \begin{aligned}
# \frac{\partial L}{\partial q_i}
# &= \frac{1}{\sqrt{d_k}} \sum_j \alpha_{ij} \left(b_{ij} - \E_{\alpha_i}[b]\right) k_j \\
# &= -\frac{1}{\sqrt{d_k}} \sum_j \alpha_{ij} A_{ij} \left(k_j - \bar k_i\right),
# \end{aligned}
# ```
#
# ```{math}
# :label: eq-grad-key-law
# \frac{\partial L}{\partial k_j}
# = \frac{1}{\sqrt{d_k}} \sum_i \alpha_{ij} \left(b_{ij} - \E_{\alpha_i}[b]\right) q_i ,
# ```
#
# where $\bar k_i = \sum_j \alpha_{ij} k_j$ is the key that query $i$ attends to on average. The second form of
# {eq}`eq-grad-query-law` uses the zero row sums; by {eq}`eq-grad-covariance` it is a covariance under $\alpha_i$. A
# descent step moves query $i$ toward the keys with positive advantage, measured from the key it attends to now. It
# moves key $j$ toward the queries for which value $j$ is advantageous, and away from the others. Queries and keys
# set the {term}`frame` within which routing happens, and they inherit the routing law's gate and its one-hot
# vanishing.
#
# ## The weight matrices
#
# Stack the inputs $x_i$ as the rows of $X$, and likewise $G = [g_i]$, $\Delta = [\delta_i]$ and the gradients with
# respect to $Q = [q_i]$, $K$ and $V$. The linear maps of {eq}`eq-qkv` and $z_i = W_O^\top g_i$ give
#
# ```{math}
# :label: eq-grad-params
# \begin{aligned}
# \frac{\partial L}{\partial W_Q} &= X^\top \frac{\partial L}{\partial Q}, &
# \frac{\partial L}{\partial W_K} &= X^\top \frac{\partial L}{\partial K}, \\
# \frac{\partial L}{\partial W_V} &= X^\top \frac{\partial L}{\partial V}, &
# \frac{\partial L}{\partial W_O} &= G^\top \Delta ,
# \end{aligned}
# ```
#
# summed over the sequences of a batch. A causal mask changes no formula: masked scores are $-\infty$, their weights
# are exactly zero, and every law above is gated by $\alpha_{ij}$.
#
# ## Verified four ways
#
# A derivation can hide a slip in a sign, a transpose or a scale. So every law is compared, in float64, with three
# computations that do not use it, and with the structural properties above. The heads have the paper's sticky-chain
# sizes. Their weights range from the paper's small initialisation, where attention is nearly uniform, to a scale
# where it is nearly one-hot.
#
# 1. **Automatic differentiation.** PyTorch's autograd differentiates chapter 1's forward pass without knowing the
#    laws.
# 2. **The fused kernel.** PyTorch's fused attention has its own hand-written backward pass, which works block by
#    block and never forms the attention matrix {cite}`dao2022flashattention`.
# 3. **Finite differences.** Each entry of each tensor is nudged up and down, and the change in the loss estimates
#    the gradient with no derivative code at all.
# 4. **Structure.** Each row of the routing gradient must sum to zero, and masked entries must get exactly zero
#    gradient.
#
# Over {glue:text}`gradients.n_heads_checked` random heads, the routing law agrees with autograd to within
# {glue:text}`gradients.score_law_max_abs_err:.1e`, or {glue:text}`gradients.score_law_max_abs_err_relative:.1e` of
# the gradient's largest entry. The value law agrees to {glue:text}`gradients.value_law_max_abs_err:.1e`, the query and
# key laws to {glue:text}`gradients.query_key_max_abs_err:.1e`, and the four weight matrices to
# {glue:text}`gradients.param_grads_max_abs_err:.1e`. The fused kernel's backward agrees to
# {glue:text}`gradients.sdpa_agreement_max_abs_err:.1e`
# ({glue:text}`gradients.sdpa_agreement_max_abs_err_relative:.1e` relative). These are the rounding errors of float64
# arithmetic, far inside the tolerance each check allows.
#
# Finite differences agree to {glue:text}`gradients.finite_difference_max_rel_err:.1e` relative, over all eight
# gradients: the accuracy of the finite differences themselves. The rows of the routing gradient sum to zero up to
# {glue:text}`gradients.row_sum_max_abs:.1e`, on terms as large as {glue:text}`gradients.row_sum_term_scale:.2f`, and
# every masked entry is exactly {glue:text}`gradients.masked_score_grad_max_abs`.
#
# :::{admonition} How the independent routes work
# :class: dropdown
# **The fused kernel.** On the CPU, `torch.nn.functional.scaled_dot_product_attention` runs a FlashAttention-style kernel
# {cite}`dao2022flashattention` whose backward pass computes $D_i = \operatorname{rowsum}(dO_i \circ O_i)$ and
# $dS = P \circ (dP - D)$ with $dP = dO\, V^\top$ {cite}`dao2024flashattention2`. With $dO = U$, $O = G$ and
# $P = \alpha$, this is $D_i = u_i \cdot g_i = \E_{\alpha_i}[b]$ (chapter 1) and $dP = B$: the kernel evaluates
# exactly the routing law {eq}`eq-grad-routing-law` and, with $dV = P^\top dO$, the value law {eq}`eq-grad-value-law`,
# by code of its own. The kernel wants $d_k = d_v$, so the narrower of queries/keys and values is zero-padded, which
# changes no score and no output.
#
# **The finite differences.** Each entry of each tensor is nudged by $\pm h$ and $\pm 2h$ with $h = 10^{-3}$, and the four losses are combined by
# the fourth-order central stencil
#
# $$
# \frac{-L(x + 2h) + 8L(x + h) - 8L(x - h) + L(x - 2h)}{12h}.
# $$
#
# Its truncation error is $O(h^4)$ and its rounding error $O(\varepsilon L / h)$, with $\varepsilon$ the float64
# resolution, so it can confirm a gradient to nine or ten significant digits, no better; the check's tolerance is
# $10^{-7}$. With four forward passes per entry the route is slow, so it runs on one shorter sequence.
# :::

# %% tags=["remove-input", "hide-output"]
# one report per random head: {check: (max abs error, scale)}
draws = runs.law_check_draws(cfg, generator)
recorded = report.record_law_claims(draws, report.verification_params(cfg, seed))
report.law_check_table(recorded)

# %% tags=["remove-input", "hide-output", "nbval-ignore-output"]
fd_relative = runs.finite_difference_errors(cfg, generator)
report.record_finite_difference(fd_relative, cfg, seed=seed)
report.finite_difference_table(fd_relative)

# %% tags=["remove-input", "hide-output"]
row_error, row_scale, masked_error = report.record_structure_claims(
    draws, report.verification_params(cfg, seed)
)
{
    "largest row sum of the routing gradient": f"{row_error:.1e}",
    "largest term of a row, |α_ij b_ij|": f"{row_scale:.2f}",
    "largest gradient of a masked score": f"{masked_error}",
}

# %% [markdown] tags=[]
# ## Why routing freezes first
#
# The lemma bounds the routing gradient by the attention entropy; nothing similar holds for the values. To see both
# at once, take one head and multiply its scores by an inverse temperature $\beta$. Small $\beta$ makes the attention
# uniform and large $\beta$ makes it one-hot, while every other part of the head stays fixed.

# %% tags=["hide-input", "remove-output"]
sweep = runs.temperature_sweep(cfg, generator)  # one head (std 0.5), scores multiplied by β
plotting.glue_figure("fig-gradient-temperature-sweep", figures.plot_temperature_sweep(sweep))
report.record_sweep_claims(sweep, cfg, seed=seed)

# %% [markdown] tags=[]
# ```{glue:figure} fig-gradient-temperature-sweep
# :name: fig-gradient-temperature-sweep
# :alt: Left, the mean attention entropy falling and the largest attention weight rising to one as the inverse temperature beta grows on a log axis. Right, on log-log axes with entropy decreasing to the right, the routing gradient norm rising then falling steeply under a dotted entropy bound, while the value gradient norm levels off.
#
# One head with its scores multiplied by an inverse temperature $\beta$. Left: mean attention entropy and largest
# weight. Right: the norms of the routing and value gradients against the entropy, with the entropy bound
# {eq}`eq-grad-entropy-bound` dotted; attention sharpens from left to right.
# ```
#
# In {numref}`fig-gradient-temperature-sweep`, as $\beta$ grows, the mean attention entropy falls from
# {glue:text}`gradients.sweep_entropy_max:.2f` nats, nearly uniform over the causal window, to
# {glue:text}`gradients.sweep_entropy_min:.1e` nats at $\beta =$ {glue:text}`gradients.sweep_beta_max:,.0f`. The
# routing gradient first grows, peaking near an entropy of {glue:text}`gradients.sweep_peak_entropy:.2f` nats. Two
# things cause the rise: the gate $\alpha_{ij}$ opens wider on the keys each query favours, and the error signal
# changes with the head's predictions. Then it collapses. At the sharpest attention it is
# {glue:text}`gradients.one_hot_score_grad_ratio:.1e` of its peak. The entropy bound holds at every $\beta$: the
# routing gradient never exceeds {glue:text}`gradients.entropy_bound_max_ratio:.2f` of it. The value gradient does not
# collapse. At the sharpest attention it is {glue:text}`gradients.one_hot_value_grad_ratio:.2f` times its size at
# $\beta = 1$: it settles to the hard-attention limit $\sum_{i:\, j^\star(i) = j} u_i$.
#
# This is a mechanism that *can* separate two timescales. Once a head's attention is sharp, *where* it attends (the
# scores, and through them the queries and keys) gets a vanishing signal. *What* it retrieves (the values) keeps an
# error signal of undiminished size. Whether routing in fact settles first is a question about training. Chapter 4
# finds that this ordering {glue:text}`ch2.frame_row_label`: the answer depends on how "settled" is measured, and for
# one measure on the optimiser. Here the temperature was changed by hand. In training the scores sharpen because the
# routing law itself raises the scores of advantageous keys, the feedback the next chapter examines.

# %% tags=["remove-input"]
report.glue_frame_order()  # chapter 4's stored result; the claims are chapter 4's

# %% [markdown] tags=[]
# :::{admonition} Chapter 4's answer under each definition
# :class: dropdown
# Chapter 4 asks whether routing settles before the values under four definitions of "settled" and two optimisers.
# Its finding, definition by definition: {glue:text}`ch2.frame_row_readings`.
# :::
#
# ## The laws in weight space
#
# The boxed laws treat the scores and the values as free activations. A gradient step moves *weights*. Since
# $v_j = W_V^\top x_j$, a step on $W_V$ moves every value through the inputs' inner products:
#
# ```{math}
# :label: eq-grad-weight-value-step
# \Delta v_j = -\eta \sum_k (x_j \cdot x_k) \sum_i \alpha_{ik}\, u_i .
# ```
#
# This is the value law's move, mixed across positions by the Gram matrix $X = x x^\top$. A step on $W_Q$ and $W_K$
# likewise moves the queries by $\Delta q = -\eta X\, \partial L/\partial q$, the keys by
# $\Delta k = -\eta X\, \partial L/\partial k$, and the scores exactly by
#
# $$
# \Delta s_{ij} = \frac{\Delta q_i \cdot k_j + q_i \cdot \Delta k_j + \Delta q_i \cdot \Delta k_j}{\sqrt{d_k}} ,
# $$
#
# where the last term is second order in $\eta$. The two pictures agree only when the inputs are orthonormal
# ($X = I$). To measure the gap, take one real autograd step on the weights. Then compare it with these formulas and
# with the free-activation laws, by two measures. The first is the share of attended pairs whose attention moves the
# way their advantage says. The second is the cosine between the value law's $\Delta v$ and the actual one.

# %% tags=["remove-input"]
sticky_check, random_checks = runs.weight_step_checks(cfg, generator)
sticky_measures = report.record_weight_step_claims(sticky_check, random_checks, cfg, seed=seed)

# %% [markdown] tags=[]
# The formulas reproduce the real step to round-off: the largest differences are
# {glue:text}`gradients.weight_step_value_max_abs_err:.1e` for the values and
# {glue:text}`gradients.weight_step_score_max_abs_err:.1e` for the scores. The free-activation picture does not. On
# the paper's sticky-chain head at initialisation, only {glue:text}`dynamics.score_sign_agreement_fraction:.0%` of the
# attended pairs move their attention the way their advantage says. That is barely more than the half an unrelated
# change would give. The actual value step has a cosine of only {glue:text}`dynamics.value_step_cosine:.2f` with the
# value law's. On random heads with $T =$ {glue:text}`gradients.ws_random_T` positions the agreement is
# {glue:text}`gradients.ws_random_sign_mean:.0%` and the cosine {glue:text}`gradients.ws_random_cosine_mean:.2f` on
# average, from {glue:text}`gradients.ws_random_cosine_min:.2f` to {glue:text}`gradients.ws_random_cosine_max:.2f`.
#
# The boxed laws are exact statements about the gradient with respect to the activations, and the weights' gradient
# is built from them ({eq}`eq-grad-params`). What a step does to the activations is their image under the Gram matrix
# of the inputs. So the chapters that follow test the paper's statements about dynamics on trained heads, where this
# mixing is part of what they measure. Where a chapter moves free activations, as chapter 3's first-order checks do,
# it checks the idealised law.
#
# ### Along training
#
# At initialisation the attention is nearly uniform and the values are small, so the picture might change once the
# head has learned something. {numref}`fig-gradient-weight-step` repeats the measurement every
# {glue:text}`ch2.ws_every` steps while the sticky-chain head trains for {glue:text}`ch2.ws_steps:,` steps, under the
# paper's SGD schedule and under its EM-like schedule. Beside each measurement, the same step is taken on a reference
# input set where the two value pictures coincide: orthonormal inputs ($X = I$), with the same head.

# %% tags=["remove-input", "hide-output", "trained-output"]
ws_traces = runs.weight_step_traces(
    cfg
)  # the sticky head trained with the SGD and EM-like schedules
report.glue_weight_step_traces(ws_traces, cfg)
report.weight_step_trace_table(ws_traces)

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-gradient-weight-step", figures.plot_weight_step_along_training(ws_traces))

# %% [markdown] tags=[]
# ```{glue:figure} fig-gradient-weight-step
# :name: fig-gradient-weight-step
# :alt: Two panels against the training step, one colour per schedule, SGD and EM-like: left, the share of attended pairs whose attention moves with its advantage, solid on the sticky chain and dashed on orthonormal inputs, above a grey line at one half; right, the cosine between the value law's step and the actual step.
#
# One weight step, taken every few training steps under the SGD and EM-like schedules. Left: the share of attended
# pairs whose attention moves with its advantage (grey: one half, what an unrelated change gives). Right: the cosine
# of the value law's step with the actual one. Solid: the sticky chain; dashed: orthonormal inputs.
# ```
#
# Training does not bring the two pictures together. Along the SGD run, the share of pairs moving with their advantage
# stays between {glue:text}`ch2.ws_sgd_sign_min:.2f` and {glue:text}`ch2.ws_sgd_sign_max:.2f`, and the value cosine
# between {glue:text}`ch2.ws_sgd_cosine_min:.2f` and {glue:text}`ch2.ws_sgd_cosine_max:.2f`. The EM-like run looks
# the same. On orthonormal inputs the value cosine is 1 at every checkpoint, to within
# {glue:text}`ch2.ws_ref_cosine_err:.0e`: there the value law *is* the step. The scores stay mixed even there, because
# the score change passes the routing gradient through $K K^\top$ and $Q Q^\top$. Only
# {glue:text}`ch2.ws_ref_sign_min:.2f` to {glue:text}`ch2.ws_ref_sign_max:.2f` of the pairs move with their advantage.
#
# Both runs cover the paper's training budget, not a converged head, so a head trained much further is not covered
# here. For the values, then, the paper's law describes a head whose inputs are orthonormal. For the scores it
# describes no head whose scores come from $W_Q$ and $W_K$, only their direction of steepest descent. What the paper
# says about trained heads is therefore measured on trained heads in the chapters that follow, not inferred from the
# laws.
#
# :::{admonition} Along training, schedule by schedule
# :class: dropdown
# - **SGD:** final loss {glue:text}`ch2.ws_sgd_loss_end:.3f` nats, {glue:text}`ch2.ws_sgd_position` (chapter 5's
#   halfway bound); share of pairs moving with their advantage {glue:text}`ch2.ws_sgd_sign_min:.2f` to
#   {glue:text}`ch2.ws_sgd_sign_max:.2f`; value cosine {glue:text}`ch2.ws_sgd_cosine_min:.2f` to
#   {glue:text}`ch2.ws_sgd_cosine_max:.2f`.
# - **EM-like:** final loss {glue:text}`ch2.ws_em_like_loss_end:.3f` nats, {glue:text}`ch2.ws_em_like_position`;
#   share {glue:text}`ch2.ws_em_like_sign_min:.2f` to {glue:text}`ch2.ws_em_like_sign_max:.2f`; value cosine
#   {glue:text}`ch2.ws_em_like_cosine_min:.2f` to {glue:text}`ch2.ws_em_like_cosine_max:.2f`.
# - **Orthonormal inputs** (both runs): share {glue:text}`ch2.ws_ref_sign_min:.2f` to
#   {glue:text}`ch2.ws_ref_sign_max:.2f`; value cosine within {glue:text}`ch2.ws_ref_cosine_err:.0e` of 1. The
#   reference takes the sequence's first labels, one per orthonormal input.
#
# The head at initialisation and its data are chapter 5's (the paper's seed-42 sequence); the weight step is taken in
# float64.
# :::
#
# :::{admonition} Where each law lives in the code
# :class: dropdown
# | Result | Equation | Function in `attention_dynamics.science.gradients` | Checked by (`tests/test_gradients.py`) |
# | --- | --- | --- | --- |
# | error signal at the logits | {eq}`eq-grad-logits` | `output_error`, `upstream_gradient` | `test_every_law_matches_autograd` |
# | compatibility, advantage | {eq}`eq-grad-dalpha`, {eq}`eq-grad-advantage` | `compatibility`, `advantage` | `test_routing_gradient_is_minus_attention_times_advantage` |
# | advantage-based routing law | {eq}`eq-grad-routing-law` | `advantage_routing_gradient` | autograd, finite differences, fused kernel, `test_routing_gradient_rows_sum_to_zero`, `test_routing_gradient_is_a_covariance_under_attention` |
# | entropy bound | {eq}`eq-grad-entropy-bound` | `score_gradient_entropy_bound` | `test_score_gradient_is_bounded_by_attention_entropy` |
# | responsibility-weighted value law | {eq}`eq-grad-value-law` | `responsibility_weighted_value_gradient` | autograd, finite differences, fused kernel, `test_one_hot_limit_freezes_routing_but_not_values` |
# | query and key laws | {eq}`eq-grad-query-law`, {eq}`eq-grad-key-law` | `query_gradient`, `key_gradient` | autograd, finite differences, fused kernel |
# | weight-matrix gradients | {eq}`eq-grad-params` | `single_head_parameter_gradients`, `closed_form_head_gradients` | autograd, finite differences |
# | one step in weight space | {eq}`eq-grad-weight-value-step` | `weight_space_step`, `weight_step_check` | an autograd step, `test_the_weight_step_formulas_equal_an_autograd_step`, `test_with_orthonormal_inputs_the_values_move_as_if_free` |
#
# The independent routes are `autograd_head_gradients` (autograd, keeping the gradients of the scores, queries, keys
# and values), `fused_attention_gradients` (the fused kernel) and `finite_difference_head_gradients`; each check's
# error is computed by `law_discrepancies`, and the sweep by `inverse_temperature_sweep` (which scales $W_Q$ by
# $\beta$). The weight-space checks are `weight_space.weight_step_check`, and along training
# `runs.weight_step_along_training`.
# :::
#
# :::{admonition} What the laws cost
# :class: dropdown
# The laws are also cheap. `benchmarks/gradient_laws.py` times one full-batch training step of the paper's
# sticky-chain head in float32 with the closed-form laws against autograd, and prints the ratio; the book prints no
# timings, because they depend on the machine. The saving comes from fusion: the routing law costs one $T \times T$
# product ($B = U V^\top$) and one in-place pass, whereas autograd's backward replays every recorded $T \times T$
# operation (the mask, the scaling, the softmax) in reverse.
# :::

# %% tags=["remove-input", "hide-output"]
display(cfg)
report.fixed_choices()

# %% [markdown] tags=[]
# :::{admonition} Run it yourself
# :class: dropdown
# This page is a notebook run by the book's runner; its parameters cell sets the seed, the scale, the device and the
# number of random heads. The order-of-settling finding comes from chapter 4's stored result, which this chapter only
# reads.
#
# ```bash
# python -m attention_dynamics reproduce --chapter 2 --force   # re-execute this chapter
# python -m attention_dynamics compute frame_definitions       # recompute chapter 4's stored result (long)
# python -m pytest tests/test_gradients.py tests/test_chapter_gradient_laws.py   # the laws on random shapes
# python benchmarks/gradient_laws.py                            # the closed-form laws against autograd
# ```
# :::
