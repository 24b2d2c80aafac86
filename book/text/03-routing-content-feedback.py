# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@e0f39a0c9f4c94f13686cb3d210249afffce0807"

# %% [markdown] tags=[]
# # Routing–content feedback
#
# The previous chapters derived two laws for one softmax attention head trained with cross-entropy
# {cite}`agarwal2025gradient`: the **advantage-based routing law**, which moves attention scores, and the
# **responsibility-weighted value law**, which moves the values,
#
# ```{math}
# :label: eq-loop-laws
# \frac{\partial L}{\partial s_{ij}} = \alpha_{ij}\bigl(b_{ij} - \E_{\alpha_i}[b]\bigr),
# \qquad
# \frac{\partial L}{\partial v_j} = \sum_i \alpha_{ij} u_i ,
# ```
#
# with error signal $u_i = \partial L / \partial g_i$ and compatibility $b_{ij} = u_i \cdot v_j$. Section 4 of the
# paper reads them together as a **positive feedback loop**. A query shifts attention toward values with a
# positive advantage $\E_{\alpha_i}[b] - b_{ij}$ (values that point against its error). A value is pulled by
# $-\eta \sum_i \alpha_{ij} u_i$, that is, toward what the queries *attending to it* need. That pull lowers
# $b_{ij}$ for those queries, which raises their advantage for $j$, so they attend to it even more. The loop
# should end in **specialization**: each value becomes the prototype of the queries that use it, and each
# query routes to the value that serves it.
#
# This chapter tests that story on a task where the right answer to "which value should serve which query"
# is known exactly. We train one head and measure, over training, how good its routing is (the E-step of the
# next chapter's EM reading), how good its values are (the M-step) and how specialized the pair becomes. We
# then check the paper's two first-order predictions numerically and find where they hold.

# %% tags=["parameters"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
steps = None  # training steps of the head (None: as the scale says)

# %% tags=["hide-input"]
import warnings

import numpy as np
import torch

warnings.filterwarnings(
    "ignore", message="IProgress not found"
)  # tqdm's notebook bar (no bars are shown)

from attention_dynamics import claims, dynamics, plotting, training
from attention_dynamics.experiments import head_training
from attention_dynamics.attention import causal_mask
from attention_dynamics.seeding import seed_everything
from attention_dynamics.settings import chapter_settings
from attention_dynamics.tasks import specialization as recall

SETTINGS = {  # one head on the recall task; the paper has no such experiment, so "paper" = "book"
    "fast": {
        "steps": 300,
        "lr": 0.5,
        "n_train": 64,
        "n_probe": 64,
        "record_every": 20,
        "n_check": 16,
    },
    "book": {
        "steps": 2000,
        "lr": 0.5,
        "n_train": 256,
        "n_probe": 256,
        "record_every": 20,
        "n_check": 64,
    },
    "paper": {
        "steps": 2000,
        "lr": 0.5,
        "n_train": 256,
        "n_probe": 256,
        "record_every": 20,
        "n_check": 64,
    },
}
cfg = chapter_settings(SETTINGS, scale, device=device, steps=steps)
generator = seed_everything(seed)
plotting.use_book_style()
cfg

# %% [markdown] tags=[]
# ## A task whose responsibilities are known
#
# The task ({py:mod}`tasks.specialization`) is content-addressed recall. Each sequence has $K$ **source**
# positions followed by $Q$ **query** positions. Source $j$ carries a *tag* $c_j$ and a *label* $y_j$; query $i$
# carries a *request* $r_i$, one of the tags present, and must output the label of the source with that tag.
# Tags and labels are drawn afresh for every sequence (distinct within it), and nothing marks a position's
# place: no positional encoding, sources in random order. A source can therefore be found **only by its
# content**, and exactly one source holds each query's answer, so the correct responsibility of every
# (query, position) pair is 1 for that source and 0 for every other position.
#
# Inputs are sums of one-hot blocks: source tag, request, label. Request $r$ and tag $r$ are *different*
# features, so the head has to learn the match "request $r$ ↔ tag $r$" in its scores
# $q_i \cdot k_j / \sqrt{d_k}$ — the hypothesis frame $W_Q W_K^\top$ — and has to learn to read the label out of
# the value it routes to. The loss is the mean cross-entropy over the query positions; sources carry no
# target. Three reference levels bound it. Because the answer is a deterministic function of the
# sequence, the Bayes floor is {glue:text}`recall.bayes_floor:.0f` nats. A head that cannot bind requests to tags
# can at best spread its belief over the $K$ labels present: $\ln K$ = {glue:text}`recall.blind_floor:.3f` nats.
# And a uniform guess over all labels costs $\ln C$ = {glue:text}`recall.chance:.3f` nats.

# %% tags=["hide-input"]
example = recall.sample_specialization_batch(1, generator=generator)
K, Q, n_tags, n_labels = example.n_sources, example.n_queries, example.n_tags, example.n_labels
T = K + Q
claims.glue("recall.bayes_floor", recall.bayes_floor_nats())
claims.glue("recall.blind_floor", recall.routing_blind_floor_nats(K))
claims.glue("recall.chance", recall.chance_loss_nats(n_labels))
for name, value in {
    "K": K,
    "Q": Q,
    "n_tags": n_tags,
    "n_labels": n_labels,
    "T": T,
    "d_in": example.x.shape[-1],
}.items():
    claims.glue(f"recall.{name}", value)
{
    "sources K": K,
    "queries Q": Q,
    "tags": n_tags,
    "labels C": n_labels,
    "input width": example.x.shape[-1],
}

# %% [markdown] tags=[]
# The figure shows one sequence ({glue:text}`recall.K` sources, {glue:text}`recall.Q` queries,
# {glue:text}`recall.n_tags` possible tags, {glue:text}`recall.n_labels` labels, input width
# {glue:text}`recall.d_in`) and its ground-truth responsibilities: a query row has a single 1, on the source
# whose tag it requests.

# %% tags=["hide-input"]
fig, axes = plotting.new_figure(2, width=4.0, height=3.4)
plotting.plot_matrix(
    axes[0],
    example.x[0].T,
    title="inputs of one sequence",
    xlabel="position",
    ylabel="feature",
    cbar_label="value",
)
for edge in (n_tags, 2 * n_tags):
    axes[0].axhline(edge - 0.5, color="white", lw=1.5)
axes[0].set_yticks(
    [n_tags / 2 - 0.5, 1.5 * n_tags - 0.5, 2 * n_tags + n_labels / 2 - 0.5],
    ["tag", "request", "label"],
)
axes[0].set_ylabel("feature block")
truth = torch.zeros(T, T)
truth[K:] = example.responsibility[0]
plotting.plot_matrix(
    axes[1],
    truth,
    mask=causal_mask(T),
    title="correct responsibilities",
    cbar_label="responsibility",
)
axes[1].axhline(K - 0.5, color="white", lw=1.5)
fig.suptitle("Content-addressed recall: sources 0–3 hold (tag, label), queries 4–7 request a tag")
plotting.plt.show()

# %% [markdown] tags=[]
# ## Training one head
#
# We train the paper's head (no residual, no LayerNorm; {py:func}`attention.init_single_head` with
# $\Normal(0, 0.1^2)$ weights) by full-batch gradient descent on a fixed training set of
# {glue:text}`ch3.n_train` sequences, with learning rate {glue:text}`ch3.lr` on all four matrices, for
# {glue:text}`ch3.steps` steps ({py:func}`head_training.train_specialization_head`, which drives the book's one
# training loop, {py:func}`training.fit`). Every {glue:text}`ch3.record_every` steps it measures, on
# {glue:text}`ch3.n_probe` held-out probe sequences:
#
# - **E-step quality**: the mean attention weight a query puts on the source that holds its answer
#   ({py:func}`dynamics.attention_on_correct_source`);
# - **M-step quality**: the cosine between each source's value $v_j$ and the *ideal prototype* of its label,
#   $W_O(e_{y} - \tfrac{1}{C}\mathbf{1})$ — the direction that raises $\log p(y)$ fastest from an
#   uninformative value, and the direction the value law pulls a value whose queries all want label $y$
#   ({py:func}`dynamics.value_prototype_alignment`) — and the value's **precision**, the cross-entropy of
#   reading $v_j$ out alone against its own label, which is the loss the head would have with perfect routing
#   ({py:func}`dynamics.value_precision_nats`);
# - **specialization**: which values serve which queries, as the mean attention from queries requesting tag
#   $r$ to the source with tag $c$ ({py:func}`dynamics.specialization_matrix`), and the *purity*, the share of
#   each source's soft count $N_j = \sum_i \alpha_{ij}$ that comes from the queries it should serve
#   ({py:func}`dynamics.responsibility_purity`).
#
# Two more runs with the same seed freeze one side of the loop — the values ($W_V$) or the routing ($W_Q$,
# $W_K$) — to show what each side contributes. The three runs are independent, so
# {py:func}`training.map_parallel` runs them on separate cores.

# %% tags=["trained-output", "hide-input"]
common = dict(
    seed=seed,
    steps=cfg.steps,
    lr=cfg.lr,
    n_train=cfg.n_train,
    n_probe=cfg.n_probe,
    record_every=cfg.record_every,
    settle_window=5 * cfg.record_every,
)
variants = {"full": (), "values frozen": ("W_V",), "routing frozen": ("W_Q", "W_K")}
runs = dict(
    zip(
        variants,
        training.map_parallel(
            head_training.train_specialization_head,
            [dict(common, frozen=f) for f in variants.values()],
        ),
    )
)
run = runs["full"]
for name in ("steps", "lr", "n_train", "n_probe", "record_every"):
    claims.glue(f"ch3.{name}", cfg[name])
# A held-out float64 batch for the measurements below that take one parameter state at a time.
check = recall.sample_specialization_batch(cfg.n_check, generator=generator, dtype=torch.float64)
advantage = np.array(
    [dynamics.correct_source_advantage(run.head_at(i), check) for i in range(len(run.steps))]
)
milestones = head_training.milestone_indices(run.correct_mass, [0.25, 0.5, 0.75])
aligned_at = (
    int(run.steps[np.argmax(run.alignment >= 0.9)]) if (run.alignment >= 0.9).any() else None
)
routed_at = (
    int(run.steps[np.argmax(run.correct_mass >= 0.5)]) if (run.correct_mass >= 0.5).any() else None
)
summary = {
    "ch3.final_probe_loss": run.probe_loss[-1],
    "ch3.initial_correct_mass": run.correct_mass[0],
    "ch3.final_correct_mass": run.correct_mass[-1],
    "ch3.final_source_mass": run.source_mass[-1],
    "ch3.final_alignment": run.alignment[-1],
    "ch3.final_precision": run.precision_nats[-1],
    "ch3.initial_purity": run.purity[0],
    "ch3.final_purity": run.purity[-1],
    "ch3.aligned_step": aligned_at if aligned_at is not None else -1,
    "ch3.routed_step": routed_at if routed_at is not None else -1,
    "ch3.transition_step": int(run.steps[milestones[1]]),
    "ch3.peak_advantage_step": int(run.steps[np.argmax(advantage)]),
}
for name, value in summary.items():
    claims.glue(name, value)
{k.removeprefix("ch3."): round(float(v), 4) for k, v in summary.items()}

# %% [markdown] tags=[]
# The learning curves tell the story in four acts (dotted lines mark the steps at which the E-step quality
# has covered 25, 50 and 75% of its rise).
#
# 1. **Values first.** During the initial plateau, while attention is still uniform, the values already turn
#    toward their labels' ideal prototypes: the alignment passes 0.9 at step {glue:text}`ch3.aligned_step`.
#    Uniform routing is enough for this, because every query's answer is one of the labels present, so each
#    value's responsibility-weighted error signal points, on average, toward its own label.
# 2. **The advantage builds.** Once values carry their labels, the correct source's value points against the
#    query's error better than the mixture does: its advantage $\E_{\alpha_i}[b] - b_{ij}$ (scaled by the
#    number of queries, since $u$ carries the $1/N$ of the mean loss) grows and peaks at step
#    {glue:text}`ch3.peak_advantage_step` ({py:func}`dynamics.correct_source_advantage`).
# 3. **Routing snaps.** The routing law turns that advantage into attention: the mass on the correct source
#    passes one half at step {glue:text}`ch3.routed_step`, and the loss falls from near $\ln K$ toward the floor.
#    As routing becomes confident, the errors shrink, and so does the advantage signal — the gate $\alpha_{ij}$
#    and the shrinking $u_i$ freeze routing in place.
# 4. **Both refine.** At the end the probe loss is {glue:text}`ch3.final_probe_loss:.4f` nats, queries put
#    {glue:text}`ch3.final_correct_mass:.3f` of their attention on the correct source (from
#    {glue:text}`ch3.initial_correct_mass:.3f` at initialisation) and {glue:text}`ch3.final_source_mass:.3f` on
#    sources at all, values are aligned with their prototypes at cosine {glue:text}`ch3.final_alignment:.3f`,
#    and the purity has risen from {glue:text}`ch3.initial_purity:.3f` to {glue:text}`ch3.final_purity:.3f`.
#
# The E-step is not perfect even at a loss near zero: the values have grown large enough that a majority
# share of attention on the right source decides the answer. Precision of the values compensates for an
# imperfect routing — a first glimpse of the next chapter's two timescales.

# %% tags=["hide-input", "trained-output"]
fig, axes = plotting.new_figure(2, 2, width=4.2, height=2.9)
ax = axes[0, 0]
ax.semilogy(run.steps, run.probe_loss, color=plotting.PALETTE[0], label="probe loss")
ax.axhline(
    recall.chance_loss_nats(n_labels), color="grey", ls="--", lw=1, label=r"$\ln C$ (uniform guess)"
)
ax.axhline(
    recall.routing_blind_floor_nats(K), color="grey", ls=":", lw=1, label=r"$\ln K$ (no routing)"
)
ax.set(title="loss (Bayes floor: 0 nats)", xlabel="training step", ylabel="cross-entropy (nats)")
ax.legend(loc="lower left")
ax = axes[0, 1]
ax.plot(run.steps, run.correct_mass, color=plotting.PALETTE[1], label="on the correct source")
ax.plot(run.steps, run.source_mass, color=plotting.PALETTE[2], ls="--", label="on any source")
ax.plot(run.steps, run.purity, color=plotting.PALETTE[4], label="purity of soft counts")
ax.set(
    title="E-step quality and specialization",
    xlabel="training step",
    ylabel="attention weight / share",
)
ax.legend(loc="center right")
ax = axes[1, 0]
ax.plot(run.steps, run.alignment, color=plotting.PALETTE[3], label="alignment (cosine)")
ax.set(title="M-step quality", xlabel="training step", ylabel="cosine to ideal prototype")
twin = ax.twinx()
twin.plot(
    run.steps, run.precision_nats, color=plotting.PALETTE[5], ls="--", label="precision loss (nats)"
)
twin.set_ylabel("value read alone: cross-entropy (nats)")
twin.grid(False)
ax.legend(handles=ax.get_lines() + twin.get_lines(), loc="center right")
ax = axes[1, 1]
ax.plot(run.steps, advantage, color=plotting.PALETTE[6])
ax.set(
    title="advantage of the correct source",
    xlabel="training step",
    ylabel=r"$N \cdot (\mathbb{E}_{\alpha_i}[b] - b_{ij})$",
)
for a in axes.flat:
    for i in milestones:
        a.axvline(run.steps[i], color="black", ls=":", lw=0.8)
fig.suptitle("One head learning content-addressed recall")
plotting.plt.show()

# %% [markdown] tags=[]
# ### Attention and specialization at several steps
#
# The attention pattern of one probe sequence at initialisation, at the three milestones and at the end
# (white squares mark each query's correct source), and below it the specialization matrix: the mean
# attention from queries that request tag $r$ to the source with tag $c$, over all probe sequences. Routing
# goes from uniform to a sharp match, and the specialization matrix from flat to diagonal: each value serves
# exactly the queries that ask for it.

# %% tags=["hide-input", "trained-output"]
shown = [0, *milestones, len(run.steps) - 1]
truth_cols = run.shown_sequences["correct_source"][0]
fig, axes = plotting.new_figure(len(shown), 2, width=2.7, height=2.6)
for col, i in enumerate(shown):
    plotting.plot_matrix(
        axes[0, col],
        run.attention_snapshots[i, 0],
        mask=causal_mask(T),
        vmax=1.0,
        title=f"step {run.steps[i]}",
        cbar_label="attention" if col == len(shown) - 1 else "",
    )
    axes[0, col].scatter(
        truth_cols, np.arange(K, T), marker="s", s=40, facecolors="none", edgecolors="white", lw=1.2
    )
    plotting.plot_matrix(
        axes[1, col],
        run.specialization[i],
        vmax=1.0,
        title=f"step {run.steps[i]}",
        xlabel="source tag c",
        ylabel="requested tag r",
        cbar_label="mean attention" if col == len(shown) - 1 else "",
    )
fig.suptitle(
    "Attention of one probe sequence (top) and specialization over all probe sequences (bottom)"
)
plotting.plt.show()

# %% [markdown] tags=[]
# ### Value trajectories
#
# Each label contributes a fixed vector to the value of any source that carries it (its row of $W_V$ on the
# label block). The figure follows these label prototypes through training, projected on the two principal
# axes of their final positions ({py:func}`head_training.prototype_trajectories`; the axes carry
# {glue:text}`ch3.pca_explained:.0%` of the final prototypes' variance). They start in a small cloud around the
# origin and move out along separate directions — the values specialize to their labels — most of the way
# during the plateau, before routing has formed, and then keep moving outward more slowly: their scale, and
# with it the confidence of the readout, keeps growing after their directions are set.

# %% tags=["hide-input", "trained-output"]
coords, explained = head_training.prototype_trajectories(run)
claims.glue("ch3.pca_explained", float(explained.sum()))
fig, ax = plotting.new_figure(width=5.2, height=4.2)
for label in range(n_labels):
    color = plotting.PALETTE[label % len(plotting.PALETTE)]
    ax.plot(coords[:, label, 0], coords[:, label, 1], color=color, lw=1.2)
    ax.scatter(*coords[0, label], color=color, marker="o", s=14)
    ax.scatter(
        *coords[milestones[1], label], color=color, marker="D", s=18, edgecolors="black", lw=0.5
    )
    ax.scatter(*coords[-1, label], color=color, marker="*", s=90, edgecolors="black", lw=0.5)
    ax.annotate(
        f"label {label}", coords[-1, label], textcoords="offset points", xytext=(5, 4), fontsize=8
    )
ax.set(
    title="Label prototypes over training (o start, ◆ routing transition, * end)",
    xlabel=f"PC 1 ({explained[0]:.0%} of variance)",
    ylabel=f"PC 2 ({explained[1]:.0%} of variance)",
)
plotting.plt.show()

# %% [markdown] tags=[]
# ### The loop needs both sides
#
# With the routing frozen at its initial, nearly uniform state, the values still align with their labels,
# but the loss cannot go below $\ln K$: it ends at {glue:text}`ch3.frozen_routing_loss:.3f` nats. With the values
# frozen at their random initialisation, only the readout $W_O$ can make them informative; the advantage that
# drives routing builds much more slowly, and after {glue:text}`ch3.steps` steps the loss is still
# {glue:text}`ch3.frozen_values_loss:.3f` nats, against {glue:text}`ch3.final_probe_loss:.4f` for the full head.
# Content learning feeds routing and routing feeds content: neither side alone reproduces the full head's
# dynamics.

# %% tags=["hide-input", "trained-output"]
claims.glue("ch3.frozen_routing_loss", runs["routing frozen"].probe_loss[-1])
claims.glue("ch3.frozen_values_loss", runs["values frozen"].probe_loss[-1])
fig, axes = plotting.new_figure(2, width=4.2, height=3.0)
for k, (name, r) in enumerate(runs.items()):
    axes[0].semilogy(r.steps, r.probe_loss, color=plotting.PALETTE[k], label=name)
    axes[1].plot(r.steps, r.correct_mass, color=plotting.PALETTE[k], label=name)
axes[0].axhline(recall.routing_blind_floor_nats(K), color="grey", ls=":", lw=1, label=r"$\ln K$")
axes[0].set(title="probe loss", xlabel="training step", ylabel="cross-entropy (nats)")
axes[1].set(
    title="E-step quality", xlabel="training step", ylabel="attention on the correct source"
)
axes[0].legend(loc="lower left")
fig.suptitle("Freezing one side of the loop")
plotting.plt.show()

# %% [markdown] tags=[]
# ## The first-order predictions, checked
#
# ### A value-only step lowers the loss by $\eta \sum_j \norm{\sum_i \alpha_{ij} u_i}^2$
#
# Move every value vector of a batch by the value law, $\Delta v_j = -\eta \sum_i \alpha_{ij} u_i$, and leave
# $W_Q$, $W_K$, $W_O$ (hence the attention) unchanged. To first order in $\eta$ the loss changes by
#
# ```{math}
# :label: eq-value-step-loss
# \Delta L \approx -\eta \sum_j \Bigl\lVert \sum_i \alpha_{ij} u_i \Bigr\rVert^2 ,
# ```
#
# so the ratio of the actual change to this prediction must tend to 1 as $\eta \to 0$
# ({py:func}`dynamics.value_step_loss_change`). How fast can be bounded in advance. The loss is convex in the
# values (cross-entropy of logits that are linear in them), and its Hessian with respect to the values is
# at most $\lambda = \norm{W_O}_2^2 \max_b \norm{A_b}_2^2 / (2N)$, because the softmax Jacobian has spectral norm
# at most $1/2$ ($A_b$ is the query attention of sequence $b$, $N$ the number of query positions;
# {py:func}`dynamics.value_step_curvature_bound`). Taylor's theorem then gives
#
# ```{math}
# :label: eq-value-step-bound
# 0 \le 1 - \frac{\Delta L_\text{actual}}{\Delta L_\text{predicted}} \le \frac{\eta \lambda}{2} .
# ```
#
# We take the step at three moments of the training run above — initialisation, the middle of the routing
# transition (step {glue:text}`ch3.transition_step`) and the end — on a held-out batch of
# {glue:text}`ch3.n_check` sequences in float64, for step sizes $\eta$ from {glue:text}`ch3.eta_min:.0e` to
# {glue:text}`ch3.eta_max:.0e`. (The loss is a mean over the $N$ query positions, so the gradient of each value
# carries a factor $1/N$; that is why useful step sizes are large.)

# %% tags=["hide-input", "trained-output"]
etas = np.logspace(-2, 4, 25)
moments = {
    "initialisation": 0,
    "routing transition": milestones[1],
    "end of training": len(run.steps) - 1,
}
ratio_curves, bounds = {}, {}
for name, i in moments.items():
    head = run.head_at(i)
    ratio_curves[name] = dynamics.value_step_ratio_curve(head, check, etas)
    bounds[name] = dynamics.value_step_curvature_bound(head, check)
claims.glue("ch3.eta_min", etas[0])
claims.glue("ch3.eta_max", etas[-1])
claims.glue("ch3.n_check", cfg.n_check)
{
    name: {
        "ratio at smallest eta": float(r[0]),
        "bound on 1 - ratio": float(etas[0] * bounds[name] / 2),
    }
    for name, r in ratio_curves.items()
}

# %% tags=["hide-input", "trained-output"]
fig, axes = plotting.new_figure(2, width=4.2, height=3.1)
for k, name in enumerate(moments):
    color = plotting.PALETTE[k]
    axes[0].semilogx(etas, ratio_curves[name], color=color, marker="o", ms=3, label=name)
    deviation = np.clip(1 - ratio_curves[name], 1e-16, None)
    axes[1].loglog(etas, deviation, color=color, marker="o", ms=3, label=name)
    axes[1].loglog(etas, etas * bounds[name] / 2, color=color, ls="--", lw=1)
axes[0].axhline(1.0, color="grey", lw=1)
axes[0].set(
    title="actual / predicted loss change",
    xlabel=r"step size $\eta$",
    ylabel="ratio",
    ylim=(-0.1, 1.1),
)
axes[0].legend(loc="lower left")
axes[1].set(
    title=r"$1 - $ratio (dashed: bound $\eta\lambda/2$)",
    xlabel=r"step size $\eta$",
    ylabel=r"$1 - \Delta L_\mathrm{actual} / \Delta L_\mathrm{predicted}$",
)
fig.suptitle("A value-only step: the first-order prediction becomes exact as the step shrinks")
plotting.plt.show()

# %% [markdown] tags=[]
# The ratio tends to 1 at every moment of training, its deviation falls in proportion to $\eta$ (slope 1 on
# the right), and it stays inside the a-priori bound {eq}`eq-value-step-bound`, by one to three orders of
# magnitude. At the smallest step and the routing transition — the most dynamic moment — the ratio is
# {glue:text}`dynamics.first_order_value_step_ratio:.8f`, within the bound
# $\eta\lambda/2$ = {glue:text}`ch3.ratio_tolerance:.1e` that serves as the claim's tolerance.

# %% tags=["trained-output", "hide-input"]
transition = "routing transition"
ratio_tolerance = (
    etas[0] * bounds[transition] / 2 + 1e-9
)  # a-priori bound, plus float64 rounding of ΔL
claims.glue("ch3.ratio_tolerance", ratio_tolerance)
ratio_claim = claims.record(
    "dynamics.first_order_value_step_ratio",
    float(ratio_curves[transition][0]),
    unit="",
    description="actual / predicted (−η Σ_j ||Σ_i α_ij u_i||²) loss change of a value-only step, "
    "at the "
    "smallest η and the middle of the routing transition (recall task, float64)",
    expected=1.0,
    tolerance=float(ratio_tolerance),
    params={
        "seed": seed,
        "scale": scale,
        "eta": float(etas[0]),
        "step": int(run.steps[milestones[1]]),
        "n_check": cfg.n_check,
        "curvature_bound": bounds[transition],
        **common,
    },
)

# %% [markdown] tags=[]
# ### After a value step, $b_{ij}$ changes by $-\eta \sum_{i'} \alpha_{i'j}\, u_i \cdot u_{i'}$
#
# The same step changes the compatibilities. Holding the error signals fixed,
# $\Delta b_{ij} = u_i \cdot \Delta v_j$, and the value law gives the paper's prediction
#
# ```{math}
# :label: eq-db-prediction
# \Delta b_{ij} \approx -\eta \sum_{i'} \alpha_{i'j}\, u_i \cdot u_{i'} .
# ```
#
# The term $i' = i$ is $-\eta\, \alpha_{ij} \norm{u_i}^2 \le 0$: a value moves to suit the queries that attend to
# it, lowering their $b_{ij}$ and raising their advantage — the feedback in one line. But the error signals
# are not fixed. The step changes the predictions, so $u_i$ changes too, and
# $\Delta b_{ij} = u_i \cdot \Delta v_j + \Delta u_i \cdot v_j'$: the second term is *also* first order in $\eta$. So the
# prediction is exact only for a frozen error signal, and its error does not vanish as $\eta \to 0$; it tends to
# the relative size of the readout's response. We measure the actual change with $u$ recomputed after the
# step ({py:func}`dynamics.compatibility_change_after_value_step`; the remainder once the readout's response
# is subtracted is {glue:text}`ch3.frozen_residual:.0e` of the prediction, rounding only).

# %% tags=["hide-input", "trained-output"]
eta_db = float(etas[0])
db_changes = {
    name: dynamics.compatibility_change_after_value_step(run.head_at(i), check, eta_db)
    for name, i in moments.items()
}
db_error_curve = np.array(
    [
        dynamics.compatibility_change_after_value_step(run.head_at(i), check, eta_db).relative_error
        for i in range(len(run.steps))
    ]
)
claims.glue("ch3.frozen_residual", max(c.frozen_error_signal_residual for c in db_changes.values()))
claims.glue("ch3.db_err_transition", db_changes[transition].relative_error)
claims.glue("ch3.db_err_end", db_changes["end of training"].relative_error)
claims.glue(
    "ch3.db_err_below_10pct_until",
    int(run.steps[np.argmax(db_error_curve > 0.1)])
    if (db_error_curve > 0.1).any()
    else int(run.steps[-1]),
)
db_claim = claims.record(
    "dynamics.db_prediction_rel_err",
    db_changes["initialisation"].relative_error,
    unit="",
    description="||Δb_actual − Δb_predicted||_F / ||Δb_actual||_F for a value-only step at the "
    "smallest η, at "
    f"initialisation (u recomputed after the step; {db_changes[transition].relative_error:.2f} at "
    f"the "
    f"routing transition and {db_changes['end of training'].relative_error:.2f} at the end of "
    f"training)",
    params={"seed": seed, "scale": scale, "eta": eta_db, "n_check": cfg.n_check, **common},
)
{name: round(c.relative_error, 4) for name, c in db_changes.items()}

# %% tags=["hide-input", "trained-output"]
N2 = check.targets.numel() ** 2  # u carries 1/N, so u·u carries 1/N²
fig, axes = plotting.new_figure(3, width=3.6, height=3.2)
for ax, name in zip(axes[:2], ("initialisation", "end of training")):
    c = db_changes[name]
    m = c.mask.expand_as(c.actual)
    pred, act = (c.predicted[m] / eta_db * N2).numpy(), (c.actual[m] / eta_db * N2).numpy()
    lim = float(np.abs(np.concatenate([pred, act])).max()) * 1.05
    ax.scatter(pred, act, s=4, alpha=0.4, color=plotting.PALETTE[0])
    ax.plot([-lim, lim], [-lim, lim], color="grey", lw=1)
    ax.set(
        title=f"{name}: rel. error {c.relative_error:.2f}",
        xlabel=r"predicted $\Delta b_{ij}\,N^2/\eta$",
        ylabel=r"actual $\Delta b_{ij}\,N^2/\eta$",
        xlim=(-lim, lim),
        ylim=(-lim, lim),
    )
axes[2].plot(run.steps, db_error_curve, color=plotting.PALETTE[3])
for i in milestones:
    axes[2].axvline(run.steps[i], color="black", ls=":", lw=0.8)
axes[2].set(
    title="relative error over training",
    xlabel="training step",
    ylabel=r"$\|\Delta b_\mathrm{actual} - \Delta b_\mathrm{pred}\| / \|\Delta "
    r"b_\mathrm{actual}\|$",
)
fig.suptitle(
    r"The compatibility change after a value step: prediction vs actual ($\eta$ = " + f"{eta_db:g})"
)
plotting.plt.show()

# %% [markdown] tags=[]
# At initialisation the prediction is good: the relative error is
# {glue:text}`dynamics.db_prediction_rel_err:.3f`, because the readout $W_O$ is small and the error signal barely
# responds to the values. It stays below 10% until step {glue:text}`ch3.db_err_below_10pct_until`; by the middle
# of the routing transition it is {glue:text}`ch3.db_err_transition:.2f` and at the end of training
# {glue:text}`ch3.db_err_end:.2f`. Once the readout is strong, the response of the error signal — the term the
# prediction leaves out — is as large as the term it keeps: the points on the right scatter no longer follow
# the diagonal. The paper's prediction is the right description of *how specialization starts*; once values
# and readout are trained, the feedback runs through the readout as much as through the values. The paper
# gives no number for this; the ledger records the value at initialisation as a new measurement, with the
# later values in its description.

# %% [markdown] tags=[]
# ### Whose advantage grows: the rich-get-richer threshold
#
# The feedback is stated on the compatibilities; what moves attention is the advantage
# $A_{ij} = \sum_{j'} \alpha_{ij'} b_{ij'} - b_{ij}$ (positive: the routing law raises $s_{ij}$). Under the value-only
# step $\Delta v_j = \eta\, w_j$, $w_j = -\sum_{i'} \alpha_{i'j} u_{i'}$, the attention does not move, and differentiating
# $A_{ij}$ with respect to $\eta$ at $\eta = 0$ gives three terms:
#
# ```{math}
# :label: eq-advantage-change
# \frac{dA_{ij}}{d\eta} = \underbrace{\norm{u_i}^2 \Bigl(\alpha_{ij} - \sum_{j'} \alpha_{ij'}^2\Bigr)}_{\text{self}}
# + \underbrace{c_{ij} - \sum_{j'} \alpha_{ij'} c_{ij'}}_{\text{other queries}}
# + \underbrace{\Delta u_i \cdot \Bigl(\sum_{j'} \alpha_{ij'} v_{j'} - v_j\Bigr)}_{\text{error signal's response}},
# ```
#
# with $c_{ij} = \sum_{i' \ne i} \alpha_{i'j}\, u_i \cdot u_{i'}$ and
# $\Delta u_i = W_O (\operatorname{diag} p_i - p_i p_i^\top) W_O^\top \sum_j \alpha_{ij} w_j / N$. The self term alone
# is the rich-get-richer rule: a value step raises key $j$'s advantage for query $i$ exactly when $\alpha_{ij}$
# exceeds the attention-weighted mean weight $\sum_{j'} \alpha_{ij'}^2$, and lowers it below. The rule is therefore
# a statement about one of three first-order terms. It drops the pull of the other queries that share the values
# (zero only when a single query attends) and the error signal's response (zero only when the readout does not
# react, the frozen-$u$ picture of {eq}`eq-db-prediction`). Two further remarks fix the signs. The quantity written
# $\alpha_{ij}(b_{ij} - \sum_{j'} \alpha_{ij'} b_{ij'})$ is $\partial L / \partial s_{ij} = -\alpha_{ij} A_{ij}$, and it
# *falls* above the threshold. The attention is fixed during the step, so $\alpha_{ij} A_{ij}$ changes with the sign
# of $A_{ij}$. And the step here moves free values: through $W_V$ it would be mixed by the inputs' Gram matrix
# (chapter 2).
#
# {py:func}`dynamics.advantage_change_rate` computes the three terms in closed form. Forward-mode automatic
# differentiation through a real value step, with the error signal recomputed by autograd
# ({py:func}`dynamics.advantage_change_autograd`), checks them in float64 at every checkpoint of the run. Then, along
# training, we count which keys gain advantage under a value step, and how often the rule gets the sign right.

# %% tags=["hide-input", "trained-output"]
adv_errors, adv_scales = [], []
for i in range(len(run.steps)):
    head = run.head_at(i)
    closed = dynamics.advantage_change_rate(head, check).total
    exact = dynamics.advantage_change_autograd(head, check)
    adv_errors.append(float((closed - exact).abs().max()))
    adv_scales.append(float(exact.abs().max()))
claims.record(
    "dynamics.advantage_change_max_abs_err",
    max(adv_errors),
    unit="",
    description="max |closed-form dA_ij/deta − forward-mode autograd through a real value step| "
    "over every checkpoint (self + other-query + error-signal terms), float64; tolerance "
    "1e-12 × the largest rate",
    expected=0.0,
    tolerance=1e-12 * max(adv_scales),
    params={"n_check": cfg.n_check, "checkpoints": len(run.steps), "dtype": "float64", **common},
)
adv_trace = head_training.advantage_change_along_training(run, check)
head_training.plot_advantage_change(adv_trace)
plotting.plt.show()
for key in ("gain_correct", "gain_other_source", "rule_agreement", "correct_rich", "self_share"):
    claims.glue(f"ch3.adv_{key}_start", float(adv_trace[key][0]))
    claims.glue(f"ch3.adv_{key}_end", float(adv_trace[key][-1]))
    claims.glue(f"ch3.adv_{key}_min", float(np.nanmin(adv_trace[key])))
    claims.glue(f"ch3.adv_{key}_max", float(np.nanmax(adv_trace[key])))
peak = int(np.argmax(advantage))
claims.glue("ch3.adv_gain_correct_at_peak", float(adv_trace["gain_correct"][peak]))
claims.glue("ch3.adv_rule_at_peak", float(adv_trace["rule_agreement"][peak]))
{k: np.round(v[::10], 2).tolist() for k, v in adv_trace.items()}  # every tenth checkpoint

# %% [markdown] tags=[]
# The closed form matches autograd to {glue:text}`dynamics.advantage_change_max_abs_err:.0e` at every checkpoint.
# What it says about the loop depends on the stage. At initialisation, {glue:text}`ch3.adv_gain_correct_start:.0%` of
# the queries would raise the advantage of the source holding their answer under a value step, against
# {glue:text}`ch3.adv_gain_other_source_start:.0%` for the other sources. At the step where the correct source's
# advantage peaks, the first share is {glue:text}`ch3.adv_gain_correct_at_peak:.0%`, and at the end
# {glue:text}`ch3.adv_gain_correct_end:.0%` (other sources: {glue:text}`ch3.adv_gain_other_source_end:.0%`). The
# rich-get-richer rule predicts the sign of the whole change for {glue:text}`ch3.adv_rule_agreement_start:.0%` of
# the attended pairs at initialisation, {glue:text}`ch3.adv_rule_at_peak:.0%` at the peak and
# {glue:text}`ch3.adv_rule_agreement_end:.0%` at the end (0.5 would be a coin). The self term carries only {glue:text}`ch3.adv_self_share_min:.0%` to {glue:text}`ch3.adv_self_share_max:.0%` of
# the summed magnitudes of the three terms along the run ({glue:text}`ch3.adv_self_share_start:.0%` at
# initialisation). Once routing has snapped, the rule's sign is almost always wrong. The source holding the
# answer is above the threshold for {glue:text}`ch3.adv_correct_rich_end:.0%` of the queries, yet a value step
# lowers its advantage: moving its value toward the answer shrinks the error it serves, so the error signal's
# response and the other queries' pull outweigh the self term. At the start the rule is a coin toss, and at the end
# it is reversed. The rich-get-richer threshold is an exact statement about one term of {eq}`eq-advantage-change`.
# It does not describe how this head's advantages change under a value step; the full first-order change does.

# %% [markdown] tags=[]
# ## Summary
#
# - On a task with known responsibilities, one head trained by gradient descent ends specialized: queries
#   route to the source that holds their answer and each value serves exactly the queries that request it.
# - The loop runs in a definite order here: values align with their labels first (under uniform routing),
#   the advantage of the correct source builds, and then routing snaps into place; freezing either side
#   breaks the dynamics.
# - The value step's first-order loss prediction {eq}`eq-value-step-loss` holds exactly in the limit, with a
#   deviation linear in $\eta$ and inside an a-priori bound. The compatibility prediction
#   {eq}`eq-db-prediction` holds while the readout is weak and fails once it is trained, because the error
#   signal's own response is also first order.
# - Under a value step, a key's advantage changes by three first-order terms {eq}`eq-advantage-change`. Query $i$'s
#   own term is the rich-get-richer threshold ($\alpha_{ij}$ against $\sum_{j'} \alpha_{ij'}^2$). The other
#   queries' pull and the error signal's response are much larger, and the rule gets the sign right for
#   {glue:text}`ch3.adv_rule_agreement_min:.0%` to {glue:text}`ch3.adv_rule_agreement_max:.0%` of attended pairs
#   along training.
#
# The next chapter reads the same dynamics as a two-timescale EM and measures when the routing frame and the
# values settle.
