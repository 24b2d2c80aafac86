# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@defe77cd56804a7482e7cf326b9890286f122525"

# %% [markdown] tags=[]
# # Setup and notation
#
# The paper studies one softmax attention head {cite}`vaswani2017attention` trained with cross-entropy, with no
# residual stream and no LayerNorm (its Section 2 {cite}`agarwal2025gradient`). Everything it derives runs through
# two signals that the loss sends back into this head ({numref}`fig-mechanism-diagram`). One reaches the attention
# scores and sets where each query looks; the other reaches the values and sets what the query retrieves.
#
# This chapter builds the head, names its parts, and checks it against computations that share none of its code.
# Everything holds exactly (to round-off):
#
# - The forward pass: its context vectors match PyTorch's fused attention kernel to within
#   {glue:text}`setup.forward_vs_sdpa_max_abs_err:.1e`.
# - The error signal: its closed form matches automatic differentiation to within
#   {glue:text}`setup.upstream_grad_vs_autograd_max_abs_err:.1e`.
# - The identity $\E_{\alpha_i}[b] = u_i \cdot g_i$, which ties the two signals together, holds to
#   {glue:text}`setup.expected_compatibility_identity_max_abs_err:.1e`.
#
# ```{image} images/diagrams/mechanism-dark.svg
# :class: only-dark
# :align: center
# :alt: Diagram of one attention head. Solid arrows run down the forward pass: queries, keys and values, then the scores, the attention weights, the context vector, the logits and the loss. Dashed arrows run back up: the error signal u_i from the loss into the context vector, then the routing law's gradient to the scores (orange) and the value law's gradient to the values (blue).
# ```
#
# ```{figure} images/diagrams/mechanism-light.svg
# :class: only-light
# :align: center
# :target: "#fig-mechanism-diagram"
# :name: fig-mechanism-diagram
# :alt: Diagram of one attention head. Solid arrows run down the forward pass: queries, keys and values, then the scores, the attention weights, the context vector, the logits and the loss. Dashed arrows run back up: the error signal u_i from the loss into the context vector, then the routing law's gradient to the scores (orange) and the value law's gradient to the values (blue).
#
# One attention head. Solid arrows: the forward pass. Dashed arrows: the gradient, from the loss back to the scores (the routing law, orange) and to the values (the value law, blue).
# ```

# %% tags=["parameters", "remove-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
T = None  # length of the worked example (None: as the scale says)

# %% tags=["remove-input"]
from attention_dynamics.chapters.setup_and_notation import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything

cfg = settings.resolve(scale, device=device, T=T)  # the worked example is small at every scale
generator = seed_everything(seed)
plotting.use_book_style()

# %% [markdown] tags=[]
# ## The head
#
# The head maps inputs $x_1, \dots, x_T \in \R^{d_\text{in}}$ to queries, keys and values,
#
# ```{math}
# :label: eq-qkv
# \begin{aligned}
# q_i &= W_Q^\top x_i, \qquad k_j = W_K^\top x_j, \\
# v_j &= W_V^\top x_j ,
# \end{aligned}
# ```
#
# with $q_i, k_j \in \R^{d_k}$ and $v_j \in \R^{d_v}$. Query $i$ {term}`scores <score>` key $j$, and a softmax over
# the keys it may see turns the scores into {term}`attention weights <attention weight>`:
#
# ```{math}
# :label: eq-scores
# \begin{aligned}
# s_{ij} &= \frac{q_i \cdot k_j}{\sqrt{d_k}}, \\
# \alpha_{ij} &= \frac{\exp s_{ij}}{\sum_{j' \le i} \exp s_{ij'}} \quad (j \le i).
# \end{aligned}
# ```
#
# The causal mask sets $\alpha_{ij} = 0$ for $j > i$, so each row of $\alpha$ is a probability distribution over the
# past. The weights mix the values into a {term}`context vector`, which a linear read-out turns into logits and a
# prediction:
#
# ```{math}
# :label: eq-context
# \begin{aligned}
# g_i &= \sum_{j} \alpha_{ij} v_j, \\
# z_i &= W_O^\top g_i, \qquad p_i = \softmax(z_i).
# \end{aligned}
# ```
#
# The {term}`loss` is the cross-entropy of $p_i$ against the target $y_i$, averaged over the $N$ positions:
#
# ```{math}
# :label: eq-loss
# L = -\frac{1}{N} \sum_{i} \log p_{i, y_i}.
# ```
#
# The book uses the mean throughout; a sum would multiply every gradient by $N$. The worked example below draws its
# weights from $\Normal(0, 1)$, larger than the small initialisation used for training, so that the attention is far
# from uniform and the pictures have something to show.

# %% tags=["remove-input", "hide-output"]
example = runs.worked_example(cfg, generator)
fwd = example.fwd
runs.tensor_shapes(example)

# %% [markdown] tags=[]
# ## The error signal and the compatibility matrix
#
# Everything the paper derives is organised around two quantities. The {term}`error signal` at position $i$ is the
# gradient of the loss with respect to its context vector:
#
# ```{math}
# :label: eq-upstream
# u_i = \frac{\partial L}{\partial g_i} = \frac{1}{N} W_O \left(p_i - e_{y_i}\right).
# ```
#
# The {term}`compatibility` of value $j$ with query $i$'s error is their inner product, and its attention-weighted
# mean is the error signal's inner product with the context vector:
#
# ```{math}
# :label: eq-compatibility
# \begin{aligned}
# b_{ij} &= u_i \cdot v_j, \\
# \E_{\alpha_i}[b] &= \sum_j \alpha_{ij} b_{ij} = u_i \cdot g_i .
# \end{aligned}
# ```
#
# A gradient step moves $g_i$ along $-u_i$. So a value with a *smaller* $b_{ij}$, one that points against the error,
# is the one that helps query $i$. The book calls $\E_{\alpha_i}[b] - b_{ij}$ the {term}`advantage` of value $j$ for
# query $i$: positive advantage means that moving attention toward $j$ lowers the loss. Every chapter uses this sign
# convention.
#
# {numref}`fig-worked-example` shows both matrices on the worked example.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-worked-example", figures.plot_worked_example(example))

# %% [markdown] tags=[]
# ```{glue:figure} fig-worked-example
# :name: fig-worked-example
# :alt: Two heat maps of the worked example's causal head. Left: the attention weights alpha_ij, each row summing to one, blank above the diagonal. Right: the compatibilities b_ij on a scale centred at zero, blue where value j points against query i's error and red where it points with it.
#
# The worked example's attention $\alpha_{ij}$ (left) and compatibility $b_{ij} = u_i \cdot v_j$ (right); keys after
# their query are masked. A value whose $b_{ij}$ is below the row's attention-weighted mean has positive advantage.
# ```

# %% [markdown] tags=[]
# ## Checks against independent computations
#
# Two routes reach the same numbers without the head's own formulas. PyTorch's fused attention kernel
# {cite}`paszke2019pytorch` computes the context vectors without ever forming $\alpha$. Automatic differentiation
# computes $\partial L / \partial g_i$ without using {eq}`eq-upstream`.
#
# In float64 both agree with the head to round-off. The context vectors differ by at most
# {glue:text}`setup.forward_vs_sdpa_max_abs_err:.1e`, and the error signals by
# {glue:text}`setup.upstream_grad_vs_autograd_max_abs_err:.1e`. The identity in {eq}`eq-compatibility` holds to
# {glue:text}`setup.expected_compatibility_identity_max_abs_err:.1e`, and each row of $\alpha$ sums to one within
# {glue:text}`setup.attention_row_sum_max_abs_err:.1e`. The example's loss is {glue:text}`setup.loss:.3f` nats.
#
# The unit tests repeat these checks over random shapes, batch sizes and seeds. The next chapter carries the
# derivative further, to the scores, the values, the queries and the keys.

# %% tags=["remove-input", "hide-output"]
errors = runs.exactness_errors(example)
report.record_exactness(errors, example, cfg, seed=seed)

# %% [markdown] tags=[]
# :::{admonition} The head in code
# :class: dropdown
# The package stores inputs as rows, so in code the queries are `q = x @ W_Q`, with `W_Q` of shape
# $(d_\text{in}, d_k)$. {py:func}`attention.single_head_forward` returns every tensor of the forward pass at once (its
# documentation gives the shapes), and {py:func}`attention.init_single_head` draws the weights. The two independent
# routes are {py:func}`attention.sdpa_context` (the fused kernel) and {py:func}`attention.autograd_upstream_gradient`
# (automatic differentiation). {py:func}`plotting.plot_matrix` draws the matrices. The [notation page](notation.md)
# collects the symbols and terms this chapter defines.
# :::

# %% tags=["remove-input", "hide-output"]
cfg

# %% [markdown] tags=[]
# :::{admonition} Run it yourself
# :class: dropdown
# Like every chapter, this page is a notebook run by the book's runner. Its parameters cell (the seed, the scale, the
# device and the example's length) sets what the page shows; {py:func}`attention_dynamics.core.settings.resolve`
# validates it, {py:func}`seeding.seed_everything` seeds every random number generator, and {py:func}`claims.record`
# records each checked number on the [reproducibility page](reproducibility.md).
#
# ```bash
# python -m attention_dynamics reproduce --chapter 1 --force   # re-execute this chapter
# python -m pytest tests/test_attention.py                      # the checks over random shapes and seeds
# ```
# :::
