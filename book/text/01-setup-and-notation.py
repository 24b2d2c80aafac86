# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@b2a415a4ed431c659988d2b3a6f1dfdda8f82e2b"

# %% [markdown] tags=[]
# # Setup and notation
#
# This chapter fixes the objects the whole book talks about: one softmax attention head
# {cite}`vaswani2017attention`, trained with cross-entropy, with no residual stream and no LayerNorm, exactly as in Section 2 of the
# paper {cite}`agarwal2025gradient`. We build the head from the package, run it on a small worked
# example, and check every intermediate against an independent computation: the forward pass
# against PyTorch's fused attention kernel and the error signal against automatic
# differentiation.
#
# Like every chapter, it starts with a parameters cell (the defaults are what the book shows),
# validates it with {py:func}`attention_dynamics.core.settings.resolve`, seeds every random number generator with
# {py:func}`seeding.seed_everything`, and records each number the text states with
# {py:func}`claims.record` (the [claims ledger](reproducibility.md) collects them). The
# [notation page](notation.md) collects the symbols and terms this chapter defines.

# %% tags=["parameters"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
T = None  # length of the worked example (None: as the scale says)

# %% tags=[]
from attention_dynamics.chapters.setup_and_notation import figures, report, runs, settings
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything

cfg = settings.resolve(scale, device=device, T=T)  # the worked example is small at every scale
generator = seed_everything(seed)
plotting.use_book_style()
cfg

# %% [markdown] tags=[]
# ## The head
#
# Inputs $x_1, \dots, x_T \in \R^{d_\text{in}}$ are mapped to queries, keys and values,
#
# ```{math}
# :label: eq-qkv
# q_i = W_Q^\top x_i, \qquad k_j = W_K^\top x_j, \qquad v_j = W_V^\top x_j ,
# ```
#
# with $q_i, k_j \in \R^{d_k}$ and $v_j \in \R^{d_v}$. (The package stores inputs as rows,
# so in code these are `q = x @ W_Q` with `W_Q` of shape $(d_\text{in}, d_k)$.) Query $i$ {term}`scores <score>` key $j$ by
#
# ```{math}
# :label: eq-scores
# s_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}}, \qquad
# \alpha_{ij} = \frac{\exp s_{ij}}{\sum_{j' \le i} \exp s_{ij'}} \quad (j \le i),
# ```
#
# where the causal mask gives $\alpha_{ij} = 0$ for $j > i$. The {term}`attention weights <attention weight>` form a {term}`context vector`
# and the logits,
#
# ```{math}
# :label: eq-context
# g_i = \sum_{j} \alpha_{ij} v_j, \qquad z_i = W_O^\top g_i, \qquad p_i = \softmax(z_i),
# ```
#
# and the {term}`loss` is the cross-entropy of $p_i$ against the target $y_i$, **averaged** over the $N$ positions
# (the book uses the mean throughout; a sum would multiply every gradient by $N$):
#
# ```{math}
# :label: eq-loss
# L = -\frac{1}{N} \sum_{i} \log p_{i, y_i}.
# ```
#
# {py:func}`attention.single_head_forward` returns every one of these tensors at once (its
# documentation gives the shapes).

# %% tags=[]
example = runs.worked_example(cfg, generator)
fwd = example.fwd
{
    name: tuple(getattr(fwd, name).shape)
    for name in ("q", "k", "v", "scores", "alpha", "g", "logits", "p", "u", "b")
}

# %% [markdown] tags=[]
# The worked example draws its weights ({py:func}`attention.init_single_head`) from $\Normal(0, 1)$ rather than the small initialisation
# used for training, so that the attention pattern is far from uniform and the pictures have something to
# show. Each row of the attention matrix is a probability distribution over the keys a query may see:

# %% tags=[]
fwd.alpha.sum(-1)  # every row sums to one

# %% [markdown] tags=[]
# ## The error signal and the compatibility matrix
#
# Everything the paper derives is organised around two quantities. The **upstream gradient** at
# position $i$ — the {term}`error signal` that the loss sends back into the context vector — is
#
# ```{math}
# :label: eq-upstream
# u_i = \frac{\partial L}{\partial g_i} = \frac{1}{N} W_O \left(p_i - e_{y_i}\right),
# ```
#
# and the **{term}`compatibility`** of value $j$ with the error of query $i$ is
#
# ```{math}
# :label: eq-compatibility
# b_{ij} = u_i \cdot v_j, \qquad
# \E_{\alpha_i}[b] = \sum_j \alpha_{ij} b_{ij} = u_i \cdot g_i .
# ```
#
# A gradient step moves $g_i$ along $-u_i$, so a value with a *smaller* $b_{ij}$ — one that points
# against the error — is the one that helps query $i$. The book calls
# $\E_{\alpha_i}[b] - b_{ij}$ the **{term}`advantage`** of value $j$ for query $i$: positive advantage means
# that moving attention toward $j$ lowers the loss. This is the sign convention of every chapter.
#
# {numref}`fig-worked-example` shows the attention matrix and the compatibility matrix of the worked
# example, drawn with {py:func}`plotting.plot_matrix`; blank cells are masked (key after query).

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-worked-example", figures.plot_worked_example(example))

# %% [markdown] tags=[]
# ```{glue:figure} fig-worked-example
# :name: fig-worked-example
# :alt: Two heat maps of the worked example's causal head. Left: the attention weights alpha_ij, each row summing to one, blank above the diagonal. Right: the compatibilities b_ij on a scale centred at zero, blue where value j points against query i's error and red where it points with it.
#
# The worked example's attention $\alpha_{ij}$ (left) and compatibility $b_{ij} = u_i \cdot v_j$ (right);
# cells above the diagonal (key after query) are masked. A value with smaller $b_{ij}$ than the
# attention-weighted mean has positive advantage for query $i$.
# ```

# %% [markdown] tags=[]
# ## Checks against independent computations
#
# Two independent routes lead to the same numbers. PyTorch's fused
# `torch.nn.functional.scaled_dot_product_attention` {cite}`paszke2019pytorch` computes the context
# vectors $g_i$ without materialising $\alpha$ ({py:func}`attention.sdpa_context`); automatic
# differentiation computes $\partial L / \partial g_i$ without using {eq}`eq-upstream`
# ({py:func}`attention.autograd_upstream_gradient`). In float64 both agree with the package to rounding error:

# %% tags=["hide-input"]
errors = runs.exactness_errors(example)
print(report.record_exactness(errors, example, cfg, seed=seed))

# %% [markdown] tags=[]
# The largest difference between our context vectors and the fused kernel's is
# {glue:text}`setup.forward_vs_sdpa_max_abs_err:.1e`; between the closed-form error signal
# {eq}`eq-upstream` and autograd's it is {glue:text}`setup.upstream_grad_vs_autograd_max_abs_err:.1e`;
# and the identity $\E_{\alpha_i}[b] = u_i \cdot g_i$ of {eq}`eq-compatibility` holds to
# {glue:text}`setup.expected_compatibility_identity_max_abs_err:.1e`. (The example's loss is
# {glue:text}`setup.loss:.3f` nats.) The unit tests repeat these checks over random shapes, batch sizes
# and seeds; the next chapter differentiates further, down to the scores, values, queries and keys.
