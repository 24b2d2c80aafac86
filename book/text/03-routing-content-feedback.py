# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@b2a415a4ed431c659988d2b3a6f1dfdda8f82e2b"

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

from attention_dynamics.chapters.routing_content_feedback import (
    feedback_predictions,
    figures,
    report,
    runs,
    settings,
)
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.ledger import claims, verdicts
from attention_dynamics.tasks import specialization as recall

cfg = settings.resolve(scale, device=device, steps=steps)  # fast / book / paper
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
# sequence, the {term}`Bayes floor` is {glue:text}`recall.bayes_floor:.0f` nats. A head that cannot bind requests to tags
# can at best spread its belief over the $K$ labels present: $\ln K$ = {glue:text}`recall.blind_floor:.3f` nats.
# And a uniform guess over all labels costs $\ln C$ = {glue:text}`recall.chance:.3f` nats.

# %% tags=["hide-input"]
example = recall.sample_specialization_batch(1, generator=generator)
K, n_labels = example.n_sources, example.n_labels
report.glue_task(example)  # the sizes, glued with the loss's three reference levels

# %% [markdown] tags=[]
# {numref}`fig-recall-task` shows one sequence ({glue:text}`recall.K` sources, {glue:text}`recall.Q` queries,
# {glue:text}`recall.n_tags` possible tags, {glue:text}`recall.n_labels` labels, input width
# {glue:text}`recall.d_in`) and its ground-truth responsibilities: a query row has a single 1, on the source
# whose tag it requests.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-recall-task", figures.plot_recall_example(example))

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-task
# :name: fig-recall-task
# :alt: Two heat maps. Left, the one-hot inputs of one sequence, position across and feature down, split by white lines into the tag, request and label blocks. Right, the correct responsibilities, query position down and key position across, a single bright cell in each query row on the source it needs.
#
# One sequence of the recall task. Left: its inputs by feature block (source tag, request, label), position
# across. Right: the correct responsibility of every (query, key) pair, blank after the query; the white line
# separates the source rows from the query rows.
# ```

# %% [markdown] tags=[]
# ## Training one head
#
# We train the paper's head (no residual, no LayerNorm; {py:func}`attention.init_single_head` with
# $\Normal(0, 0.1^2)$ weights) by full-batch gradient descent on a fixed training set of
# {glue:text}`ch3.n_train` sequences, with learning rate {glue:text}`ch3.lr` on all four matrices, for
# {glue:text}`ch3.steps` steps ({py:func}`training.recall_head.train_specialization_head`, which drives the book's one
# training loop, {py:func}`training.fit`). Every {glue:text}`ch3.record_every` steps it measures, on
# {glue:text}`ch3.n_probe` held-out probe sequences:
#
# - **E-step quality**: the mean attention weight a query puts on the source that holds its answer
#   ({py:func}`dynamics.attention_on_correct_source`);
# - **M-step quality**: the cosine between each source's value $v_j$ and the *ideal prototype* of its label,
#   $W_O(e_{y} - \tfrac{1}{C}\mathbf{1})$ — the direction that raises $\log p(y)$ fastest from an
#   uninformative value, and the direction the value law pulls a value whose queries all want label $y$
#   ({py:func}`dynamics.value_prototype_alignment`) — and the value's **{term}`precision`**, the cross-entropy of
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
common = runs.run_settings(cfg, seed)
variants = runs.train_variants(common)  # full head, values frozen, routing frozen (in parallel)
report.glue_training(common)
run = variants["full"]
# A held-out float64 batch for the measurements below that take one parameter state at a time.
check = recall.sample_specialization_batch(cfg.n_check, generator=generator, dtype=torch.float64)
advantage = runs.advantage_curve(run, check)
summary = report.run_summary(run, advantage)
{k.removeprefix("ch3."): round(float(v), 4) for k, v in summary.items()}

# %% [markdown] tags=[]
# The learning curves ({numref}`fig-recall-learning-curves`) tell the story in four acts (dotted lines mark
# the steps at which the E-step quality has covered 25, 50 and 75% of its rise).
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
# imperfect routing.

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure(
    "fig-recall-learning-curves",
    figures.plot_learning_curves(run, advantage, n_sources=K, n_labels=n_labels),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-learning-curves
# :name: fig-recall-learning-curves
# :alt: Four panels against the training step, each crossed by three dotted vertical milestone lines: the probe loss on a log axis with grey lines at ln C and ln K; the attention on the correct source and on any source with the purity; the value alignment with the precision loss on a second axis; and the correct source's advantage.
#
# The head's training run. Top left: the probe loss, with the uniform guess $\ln C$ (dashed) and the
# routing-blind level $\ln K$ (dotted). Top right: the E-step quality (attention on the correct source), the
# attention on any source and the purity of the soft counts. Bottom left: the values' alignment with their ideal
# prototypes and their precision loss (right axis). Bottom right: the correct source's advantage, scaled by the
# number of queries $N$. Dotted verticals: the three milestones of the E-step quality's rise, as in the text.
# ```

# %% [markdown] tags=[]
# ### Attention and specialization at several steps
#
# {numref}`fig-recall-snapshots` shows the attention pattern of one probe sequence at initialisation, at the
# three milestones and at the end (white squares mark each query's correct source), and below it the
# specialization matrix: the mean attention from queries that request tag $r$ to the source with tag $c$, over
# all probe sequences. Routing goes from uniform to a sharp match, and the specialization matrix from flat to
# diagonal: each value serves exactly the queries that ask for it.

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure("fig-recall-snapshots", figures.plot_attention_snapshots(run))

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-snapshots
# :name: fig-recall-snapshots
# :alt: Two rows of five heat maps on one colour scale from 0 to 1, one column per training step from initialisation to the end. Top row, the causal attention of one probe sequence with white squares on each query's correct source; bottom row, the mean attention from each requested tag to each source tag.
#
# Top: the attention of the first probe sequence at initialisation, at the three milestones of
# {numref}`fig-recall-learning-curves` and at the end of training; white squares mark each query's correct
# source. Bottom: the specialization matrix at the same steps, the mean attention from queries requesting tag
# $r$ to the source with tag $c$ over all probe sequences. One colour scale for all panels.
# ```

# %% [markdown] tags=[]
# ### Value trajectories
#
# Each label contributes a fixed vector to the value of any source that carries it (its row of $W_V$ on the
# label block). {numref}`fig-recall-prototypes` follows these label prototypes through training, projected on the
# two principal axes of their final positions ({py:func}`chapters.routing_content_feedback.runs.prototype_trajectories`; the axes carry
# {glue:text}`ch3.pca_explained:.0%` of the final prototypes' variance). They start in a small cloud around the
# origin and move out along separate directions — the values specialize to their labels — most of the way
# during the plateau, before routing has formed, and then keep moving outward more slowly: their scale, and
# with it the confidence of the readout, keeps growing after their directions are set.

# %% tags=["hide-input", "trained-output", "remove-output"]
coords, explained = runs.prototype_trajectories(run)
claims.glue("ch3.pca_explained", float(explained.sum()))
plotting.glue_figure(
    "fig-recall-prototypes", figures.plot_prototype_trajectories(run, coords, explained)
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-prototypes
# :name: fig-recall-prototypes
# :alt: Eight coloured paths in the plane of two principal components, one per label, each starting near the origin with a dot, marked by a diamond at the routing transition and ending in a star numbered with its label, spreading outward in different directions.
#
# The label prototypes (each label's row of $W_V$ on the label block) over training, projected on the first two
# principal components of their final positions; the axes give the share of variance each carries. Dot: start;
# diamond: the middle of the routing transition; star: end of training, numbered by label.
# ```

# %% [markdown] tags=[]
# ### The loop needs both sides
#
# With the routing frozen at its initial, nearly uniform state, the values still align with their labels,
# but the loss cannot go below $\ln K$: it ends at {glue:text}`ch3.frozen_routing_loss:.3f` nats. With the values
# frozen at their random initialisation, only the readout $W_O$ can make them informative; the advantage that
# drives routing builds much more slowly, and after {glue:text}`ch3.steps` steps the loss is still
# {glue:text}`ch3.frozen_values_loss:.3f` nats, against {glue:text}`ch3.final_probe_loss:.4f` for the full head.
# Content learning feeds routing and routing feeds content: neither side alone reproduces the full head's
# dynamics ({numref}`fig-recall-frozen`).

# %% tags=["hide-input", "trained-output", "remove-output"]
claims.glue("ch3.frozen_routing_loss", variants["routing frozen"].probe_loss[-1])
claims.glue("ch3.frozen_values_loss", variants["values frozen"].probe_loss[-1])
plotting.glue_figure("fig-recall-frozen", figures.plot_frozen_runs(variants, n_sources=K))

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-frozen
# :name: fig-recall-frozen
# :alt: Two panels against the training step for three runs, the full head, values frozen and routing frozen: left, the probe loss on a log axis with a grey dotted line at ln K; right, the attention on the correct source.
#
# The full head and the two runs with one side of the loop frozen (same seed). Left: the probe loss, with the
# routing-blind level $\ln K$ dotted. Right: the E-step quality, the mean attention on the correct source.
# ```

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
etas = settings.ETAS
ratio_curves, bounds = runs.value_step_ratios(run, check, etas)  # at the three moments
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

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure(
    "fig-recall-value-step", figures.plot_value_step_ratios(etas, ratio_curves, bounds)
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-value-step
# :name: fig-recall-value-step
# :alt: Two panels against the step size eta on a log axis, one colour per moment of training: left, the ratio of the actual to the predicted loss change under a grey line at 1; right, one minus that ratio on log-log axes with its dashed a-priori bound in the same colour.
#
# A value-only step at three moments of training (initialisation, the middle of the routing transition, the
# end). Left: the actual loss change divided by the first-order prediction {eq}`eq-value-step-loss`, with the
# exact ratio, one, in grey. Right: $1 -$ that ratio, with the bound $\eta\lambda/2$ of {eq}`eq-value-step-bound` dashed in the
# moment's colour.
# ```

# %% [markdown] tags=[]
# In {numref}`fig-recall-value-step` the ratio tends to 1 at every moment of training, its deviation falls in proportion to $\eta$ (slope 1 on
# the right), and it stays inside the a-priori bound {eq}`eq-value-step-bound`, by one to three orders of
# magnitude. At the smallest step and the routing transition — the most dynamic moment — the ratio is
# {glue:text}`dynamics.first_order_value_step_ratio:.8f`, within the bound
# $\eta\lambda/2$ = {glue:text}`ch3.ratio_tolerance:.1e` that serves as the claim's tolerance.

# %% tags=["trained-output", "hide-input"]
ratio_claim = report.record_value_step_ratio(
    run, etas, ratio_curves, bounds, common=common, scale=scale, n_check=cfg.n_check
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
db_changes, db_error_curve = runs.compatibility_changes(run, check, eta_db)
db_claim = report.record_compatibility_change(
    run, db_changes, db_error_curve, eta=eta_db, common=common, scale=scale, n_check=cfg.n_check
)
{name: round(c.relative_error, 4) for name, c in db_changes.items()}

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure(
    "fig-recall-compatibility-change",
    figures.plot_compatibility_changes(
        run, db_changes, db_error_curve, eta=eta_db, n_positions=check.targets.numel()
    ),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-compatibility-change
# :name: fig-recall-compatibility-change
# :alt: Top, two scatter plots of the actual against the predicted change of the compatibilities after a value step, at initialisation and at the end of training, with the diagonal in grey; bottom, the relative error of the prediction against the training step, with three dotted milestone lines.
#
# The compatibility change after a small value step, scaled by $N^2/\eta$: the actual change ($u$ recomputed
# after the step) against the prediction {eq}`eq-db-prediction`, at initialisation (top left) and at the end of
# training (top right), with the diagonal in grey; bottom, the relative error of the prediction at every
# checkpoint, the milestones dotted.
# ```

# %% [markdown] tags=[]
# {numref}`fig-recall-compatibility-change` compares the two. At initialisation the prediction is good: the relative error is
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
# training, we count which keys gain advantage under a value step, and how often the rule gets the sign right
# ({numref}`fig-recall-advantage-change`).

# %% tags=["hide-input", "trained-output"]
adv_errors, adv_scales = runs.advantage_change_errors(run, check)
report.record_advantage_change(adv_errors, adv_scales, common=common, n_check=cfg.n_check)
adv_trace = runs.advantage_change_along_training(run, check)
report.glue_advantage_trace(adv_trace, advantage)
{k: np.round(v[::10], 2).tolist() for k, v in adv_trace.items()}  # every tenth checkpoint

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure("fig-recall-advantage-change", figures.plot_advantage_change(adv_trace))

# %% [markdown] tags=[]
# ```{glue:figure} fig-recall-advantage-change
# :name: fig-recall-advantage-change
# :alt: Two panels against the training step. Top, the share of attended pairs whose advantage rises under a value step, for the source holding the answer, the other sources and earlier queries. Bottom, how often the rich-get-richer rule has the right sign, how often the answer's source is above the threshold, and the self term's share, with a grey line at one half.
#
# The first-order change of the advantage under a value step {eq}`eq-advantage-change`, at every checkpoint.
# Top: the share of attended pairs with $dA_{ij}/d\eta > 0$, by kind of key. Bottom: the share of attended pairs
# for which the rich-get-richer rule has the sign of the whole change, the share of queries whose answer's source
# is above the threshold $\sum_{j'} \alpha_{ij'}^2$, and the self term's share of the summed magnitudes of the
# three terms; the grey line at one half is a coin toss.
# ```

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
# ### Every prediction, over five seeds
#
# The paper's feedback claim rests on three first-order predictions about a value-only step: the loss decrease
# {eq}`eq-value-step-loss`, the compatibility change {eq}`eq-db-prediction`, and, through it, a larger advantage for
# the values a query already uses. The checks above are one run's. Here each is measured on
# {glue:text}`ch3.fb_n_seeds` recall heads (seeds 0 to 4, each with its own data and initialisation, this chapter's
# settings), at initialisation, at the middle of the routing transition (mean step
# {glue:text}`ch3.fb_transition_step:.0f`) and at the end, and each is decided by a stated bound with a 95% interval
# over the seeds:
#
# - **the Δb prediction** holds when its relative error (with the error signal recomputed after the step) is below
#   10%; predicting no change at all scores 100%;
# - **the feedback** holds when a value step raises the advantage of the answer's source for more of the queries than
#   it raises the other sources' (the control: a step that favoured nothing would raise both alike); the claim is the
#   difference of the two shares, bound 0;
# - **the weight step**: the laws describe free activations; on the paper's sticky-chain head at initialisation
#   (five seeds) a real step on $W_V$ moves the values at some cosine to the value law's move, and a real step on
#   $W_Q$, $W_K$ moves some share of attended pairs with their advantage (chapter 2, the laws in weight space); the
#   free-activation picture holds when both are at least 0.9 (free activations: 1; a coin: 0.5 for the signs).
#
# The runs are computed once (`python -m attention_dynamics compute feedback_predictions`, stored in
# `attention_dynamics/data/feedback_predictions.json`; a test regenerates them at reduced size).

# %% tags=["hide-input"]
feedback = feedback_predictions.FEEDBACK_PREDICTIONS.load()  # computed once; see the text above
feedback_claims = report.record_feedback_claims(feedback)
report.glue_feedback(feedback)
# each direction chosen by its claim's status
report.glue_feedback_directions(claims.recorded_claims())
feedback_row = verdicts.verdict_of("feedback_first_order", claims.recorded_claims())
claims.glue("ch3.feedback_row_verdict", feedback_row.verdict)
claims.glue("ch3.feedback_row_readings", feedback_row.readings_text())
{k: (round(c.value, 3), c.status) for k, c in feedback_claims.items()}

# %% [markdown] tags=[]
# The loss prediction's ratio is {glue:text}`ch3.fb_init_loss_ratio_mean:.6f` at initialisation,
# {glue:text}`ch3.fb_transition_loss_ratio_mean:.6f` at the transition and
# {glue:text}`ch3.fb_end_loss_ratio_mean:.6f` at the end (means over seeds; 1 is exact). The Δb prediction
# {glue:text}`ch3.fb_db_init_phrase` at initialisation, relative error
# {glue:text}`dynamics.db_prediction_rel_err_init:.3f` (95% interval {glue:text}`ch3.fb_init_db_rel_err_low:.3f` to
# {glue:text}`ch3.fb_init_db_rel_err_high:.3f`), and {glue:text}`ch3.fb_db_transition_phrase` at the routing
# transition: {glue:text}`dynamics.db_prediction_rel_err_transition:.2f`. At initialisation a value step raises the
# advantage of the answer's source for {glue:text}`ch3.fb_init_gain_correct_mean:.0%` of the queries and the other
# sources' for {glue:text}`ch3.fb_init_gain_other_source_mean:.0%`, a difference of
# {glue:text}`dynamics.feedback_gain_margin_init:+.2f` (interval {glue:text}`ch3.fb_init_gain_margin_low:+.2f` to
# {glue:text}`ch3.fb_init_gain_margin_high:+.2f`): {glue:text}`ch3.fb_margin_init_phrase`. By the transition the
# difference is {glue:text}`ch3.fb_transition_gain_margin_mean:+.2f`, and at the end
# {glue:text}`dynamics.feedback_gain_margin_end:+.2f`: once routing has formed, {glue:text}`ch3.fb_margin_end_phrase`.
# Through the weights, at initialisation, a step on $W_V$ moves the values at cosine
# {glue:text}`dynamics.weight_step_value_cosine_seeds:.2f` to the value law's move (the step
# {glue:text}`ch3.fb_weight_phrase` the law's direction), and a step on $W_Q$, $W_K$ moves
# {glue:text}`dynamics.weight_step_sign_agreement_seeds:.0%` of the attended pairs with their advantage.
#
# The verdict on the paper's feedback claim is therefore **{glue:text}`ch3.feedback_row_verdict`**:
# {glue:text}`ch3.feedback_row_readings`. The parts separate free activations early in training from steps on the
# weights and from the loop after routing has formed, where the error signal's own response (the term the Δb
# prediction leaves out) is the size of the Δb error above.

# %% [markdown] tags=[]
# ## Summary
#
# - On a task with known responsibilities, one head trained by gradient descent ends specialized: queries
#   route to the source that holds their answer and each value serves exactly the queries that request it.
# - On this run the changes *begin* in a definite order: values align with their labels (step
#   {glue:text}`ch3.aligned_step`, under uniform routing) before routing passes one half (step
#   {glue:text}`ch3.routed_step`); freezing either side breaks the dynamics.
# - The value step's first-order loss prediction {eq}`eq-value-step-loss` holds exactly in the limit, with a
#   deviation linear in $\eta$ and inside an a-priori bound.
# - Over {glue:text}`ch3.fb_n_seeds` heads the paper's feedback claim is {glue:text}`ch3.feedback_row_verdict`:
#   {glue:text}`ch3.feedback_row_readings`.
# - Under a value step, a key's advantage changes by three first-order terms {eq}`eq-advantage-change`. Query $i$'s
#   own term is the rich-get-richer threshold ($\alpha_{ij}$ against $\sum_{j'} \alpha_{ij'}^2$). The other
#   queries' pull and the error signal's response are much larger, and the rule gets the sign right for
#   {glue:text}`ch3.adv_rule_agreement_min:.0%` to {glue:text}`ch3.adv_rule_agreement_max:.0%` of attended pairs
#   along training.
#
# The next chapter reads the same dynamics as a two-timescale EM and measures when the routing frame and the
# values settle.
