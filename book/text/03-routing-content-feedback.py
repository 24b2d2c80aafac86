# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@defe77cd56804a7482e7cf326b9890286f122525"

# %% [markdown] tags=[]
# # Routing–content feedback
#
# The paper reads its two gradient laws as a positive feedback loop {cite}`agarwal2025gradient`. A value moves toward
# what the queries attending to it need, which makes it more useful to them, so they attend to it more. To first
# order, a value-only step lowers the loss by $\eta \sum_j \norm{\sum_i \alpha_{ij} u_i}^2$ and makes each value more
# compatible with the queries that use it.
#
# On a recall task whose correct routing is known, this story {glue:text}`ch3.feedback_row_label`:
#
# - **The loss falls as predicted.** For a small value-only step, the actual loss change over the predicted one is
#   {glue:text}`dynamics.first_order_value_step_ratio:.6f`.
# - **The compatibilities change as predicted only at the start.** The predicted change of the compatibilities is
#   {glue:text}`dynamics.db_prediction_rel_err_init:.1%` off at initialisation, but
#   {glue:text}`dynamics.db_prediction_rel_err_transition:.0%` off once routing forms.
# - **After routing forms, and through the weights, the loop does not hold.** A value step then raises the other
#   sources' advantage rather than the answer's (net share of queries {glue:text}`dynamics.feedback_gain_margin_end:+.2f`),
#   and a real step on $W_V$ moves the values at cosine {glue:text}`dynamics.weight_step_value_cosine_seeds:.2f` to the
#   value law's move.
#
# ```{image} images/diagrams/feedback-loop-dark.svg
# :class: only-dark
# :align: center
# :alt: The hypothesis frame W_Q, W_K sets the scores. Attention, the E-step of soft responsibilities, settles first; the values, the M-step of responsibility-weighted prototype updates, keep refining. Arrows between them form a loop: values are pulled toward the needs of the queries that attend to them, and their advantage grows, so those queries attend to them even more.
# ```
#
# ```{figure} images/diagrams/feedback-loop-light.svg
# :class: only-light
# :align: center
# :target: "#fig-feedback-loop-diagram"
# :name: fig-feedback-loop-diagram
# :alt: The hypothesis frame W_Q, W_K sets the scores. Attention, the E-step of soft responsibilities, settles first; the values, the M-step of responsibility-weighted prototype updates, keep refining. Arrows between them form a loop: values are pulled toward the needs of the queries that attend to them, and their advantage grows, so those queries attend to them even more.
#
# The feedback loop and its two-timescale EM reading, as the paper draws them: attention (the E-step) settles first
# while the values (the M-step) keep refining. This chapter tests the loop; chapter 4 tests the timescales.
# ```
#
# Chapter 2 derived the two laws for one softmax head trained with cross-entropy:
#
# ```{math}
# :label: eq-loop-laws
# \begin{aligned}
# \frac{\partial L}{\partial s_{ij}} &= \alpha_{ij}\bigl(b_{ij} - \E_{\alpha_i}[b]\bigr), \\
# \frac{\partial L}{\partial v_j} &= \sum_i \alpha_{ij} u_i ,
# \end{aligned}
# ```
#
# with error signal $u_i = \partial L / \partial g_i$ and compatibility $b_{ij} = u_i \cdot v_j$. A query shifts
# attention toward values with a positive {term}`advantage` $\E_{\alpha_i}[b] - b_{ij}$: values that point against its
# error. A value is pulled by $-\eta \sum_i \alpha_{ij} u_i$, toward what the queries attending to it need. That pull
# lowers $b_{ij}$ for those queries and raises their advantage, so they attend to it even more
# ({numref}`fig-feedback-loop-diagram`). The loop should end in
# *specialization*: each value becomes the prototype of the queries that use it.
#
# This chapter trains one head on the recall task and watches its routing, its values and their specialization. It
# then checks the paper's first-order predictions along the run and over several seeds.

# %% tags=["parameters", "hide-input"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
steps = None  # training steps of the head (None: as the scale says)

# %% tags=["remove-input", "remove-output"]
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
from attention_dynamics.ledger import claims
from attention_dynamics.tasks import specialization as recall

cfg = settings.resolve(scale, device=device, steps=steps)  # fast / book / paper
generator = seed_everything(seed)
plotting.use_book_style()

from attention_dynamics.ledger import routing_controls

routing_controls.glue_routing_controls()  # stored: chapter 9's routing controls

# %% [markdown] tags=[]
# ## A task whose responsibilities are known
#
# The task ({py:mod}`tasks.specialization`) is content-addressed recall. Each sequence has $K$ *source* positions
# followed by $Q$ *query* positions. Source $j$ carries a *tag* $c_j$ and a *label* $y_j$. Query $i$ carries a
# *request* $r_i$, one of the tags present, and must output the label of the source with that tag. Tags and labels are
# drawn afresh for every sequence, sources come in random order, and nothing marks a position's place. A source can
# therefore be found only by its content. Exactly one source holds each query's answer, so the correct responsibility
# of a (query, position) pair is 1 for that source and 0 for every other position.
#
# Inputs are sums of one-hot blocks: source tag, request, label. Request $r$ and tag $r$ are different features, so
# the head must learn the match "request $r$ ↔ tag $r$" in its scores, through $W_Q W_K^\top$. It must also learn to
# read the label out of the value it routes to. The loss is the mean cross-entropy over the query positions, and three
# levels bound it. The answer is a deterministic function of the sequence, so the {term}`Bayes floor` is
# {glue:text}`recall.bayes_floor:.0f` nats. A head that cannot bind requests to tags can at best spread its belief over
# the $K$ labels present: $\ln K$ = {glue:text}`recall.blind_floor:.3f` nats. A uniform guess over all labels costs
# $\ln C$ = {glue:text}`recall.chance:.3f` nats.
#
# The task needs routing. The same head with uniform attention ($W_Q = W_K = 0$) ends at
# {glue:text}`routing.recall_uniform_loss_ratio:,.0f` times the trained head's probe loss, and with its routing frozen at
# initialisation at {glue:text}`routing.recall_frozen_loss_ratio:,.0f` times (geometric means over
# {glue:text}`routing.n_seeds_tunnels` seeds). So statements about what routing does can be tested here. Chapter 9, *A tunnel that
# needs routing*, gives the book's table of which tasks need routing.

# %% tags=["hide-input"]
example = recall.sample_specialization_batch(1, generator=generator)
K, n_labels = example.n_sources, example.n_labels
task_sizes = report.glue_task(example)  # the sizes, glued with the loss's three reference levels

# %% [markdown] tags=[]
# {numref}`fig-recall-task` shows one sequence ({glue:text}`recall.K` sources, {glue:text}`recall.Q` queries,
# {glue:text}`recall.n_tags` possible tags, {glue:text}`recall.n_labels` labels, input width
# {glue:text}`recall.d_in`) and its correct responsibilities: each query row has a single 1, on the source whose tag it
# requests.

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
# We train the paper's head (no residual stream, no LayerNorm) by full-batch gradient descent on a fixed set of
# {glue:text}`ch3.n_train` sequences for {glue:text}`ch3.steps:,` steps. Every {glue:text}`ch3.record_every` steps we
# measure three things on held-out probe sequences:
#
# - **E-step quality**: the mean attention a query puts on the source that holds its answer;
# - **M-step quality**: how closely each value points along the *ideal prototype* of its label, the direction in which
#   the value law pulls a value whose queries all want that label;
# - **specialization**: which values serve which queries, and the *purity*: the share of each source's soft count that
#   comes from the queries it should serve.
#
# Two more runs with the same seed freeze one side of the loop: the values ($W_V$) or the routing ($W_Q$, $W_K$).

# %% tags=["trained-output", "hide-cell"]
common = runs.run_settings(cfg, seed)
variants = runs.train_variants(common)  # full head, values frozen, routing frozen (in parallel)
report.glue_training(common)
run = variants["full"]
# A held-out float64 batch for the measurements below that take one parameter state at a time.
check = recall.sample_specialization_batch(cfg.n_check, generator=generator, dtype=torch.float64)
advantage = runs.advantage_curve(run, check)
summary = report.run_summary(run, advantage)
report.summary_table(summary)

# %% [markdown] tags=[]
# The learning curves ({numref}`fig-recall-learning-curves`) tell the story in four acts. Dotted lines mark the
# quarter, half and three-quarter points of the E-step quality's rise.
#
# 1. **Values first.** While attention is still uniform, the values already turn toward their labels' prototypes: their
#    cosine to them passes 0.9 at step {glue:text}`ch3.aligned_step`. Uniform routing is enough for this. Every query's
#    answer is one of the labels present, so each value's pull points, on average, toward its own label.
# 2. **The advantage builds.** Once values carry their labels, the answer's source serves a query's error better than
#    the mixture does. Its advantage grows and peaks at step {glue:text}`ch3.peak_advantage_step`.
# 3. **Routing snaps.** The routing law turns that advantage into attention. The attention on the answer's source
#    passes one half at step {glue:text}`ch3.routed_step`, and the loss falls from near $\ln K$ toward the floor. As
#    routing grows confident the errors shrink, and so does the advantage: routing freezes in place.
# 4. **Both refine.** At the end the probe loss is {glue:text}`ch3.final_probe_loss:.4f` nats. Queries put
#    {glue:text}`ch3.final_correct_mass:.3f` of their attention on the answer's source, up from
#    {glue:text}`ch3.initial_correct_mass:.3f` at initialisation. The values sit at cosine
#    {glue:text}`ch3.final_alignment:.3f` to their prototypes, and the purity has risen from
#    {glue:text}`ch3.initial_purity:.3f` to {glue:text}`ch3.final_purity:.3f`.
#
# Routing is not perfect even at a loss near zero. The values have grown so large that a majority share of attention on
# the right source is enough to give the answer: precise values make up for imperfect routing.

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
# :::{admonition} How the head is trained and what is measured
# :class: dropdown
#
# The head is {py:func}`attention.init_single_head` with $\Normal(0, 0.1^2)$ weights, trained with learning rate
# {glue:text}`ch3.lr` on all four matrices by {py:func}`training.recall_head.train_specialization_head`, which drives the
# book's one training loop, {py:func}`training.fit`. The measurements use {glue:text}`ch3.n_probe` held-out probe
# sequences.
#
# - **E-step quality**: {py:func}`dynamics.attention_on_correct_source`. The attention on any source is shown beside it;
#   at the end it is {glue:text}`ch3.final_source_mass:.3f`.
# - **M-step quality**: the cosine between each source's value $v_j$ and the ideal prototype of its label,
#   $W_O(e_{y} - \tfrac{1}{C}\mathbf{1})$, the direction that raises $\log p(y)$ fastest from an uninformative value
#   ({py:func}`dynamics.value_prototype_alignment`). Beside it, the value's {term}`precision`: the cross-entropy of
#   reading $v_j$ out alone against its own label, the loss the head would have with perfect routing
#   ({py:func}`dynamics.value_precision_nats`); at the end it is {glue:text}`ch3.final_precision:.4f` nats.
# - **Specialization**: the mean attention from queries requesting tag $r$ to the source with tag $c$
#   ({py:func}`dynamics.specialization_matrix`), and the purity of the soft counts $N_j = \sum_i \alpha_{ij}$
#   ({py:func}`dynamics.responsibility_purity`).
# - **The advantage** of the answer's source, $\E_{\alpha_i}[b] - b_{ij}$, is scaled by the number of queries $N$,
#   since $u$ carries the $1/N$ of the mean loss ({py:func}`dynamics.correct_source_advantage`).
# - **Milestones**: the routing transition's middle is step {glue:text}`ch3.transition_step`.
#
# The three runs are independent, so {py:func}`training.map_parallel` runs them on separate cores.
# :::

# %% [markdown] tags=[]
# ### Attention and specialization at several steps
#
# {numref}`fig-recall-snapshots` shows the attention of one probe sequence at initialisation, at the three milestones
# and at the end. Below it is the specialization matrix: the mean attention from queries requesting tag $r$ to the
# source with tag $c$, over all probe sequences. Routing goes from uniform to a sharp match, and the matrix from flat to
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
# Each label adds a fixed vector to the value of any source that carries it: its row of $W_V$ on the label block.
# {numref}`fig-recall-prototypes` follows these label prototypes through training, projected on the two principal axes
# of their final positions ({py:func}`chapters.routing_content_feedback.runs.prototype_trajectories`). The two axes
# carry {glue:text}`ch3.pca_explained:.0%` of the variance. The prototypes start in a small cloud around the origin and
# move out in separate directions: the values specialize to their labels. Most of that move happens during the plateau,
# before routing forms. Afterwards they keep moving outward more slowly. Their directions are set, but their scale, and
# with it the readout's confidence, keeps growing.

# %% tags=["hide-input", "trained-output", "remove-output"]
coords, explained = runs.prototype_trajectories(run)
report.glue_prototypes(explained)
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
# With the routing frozen at its initial, nearly uniform state, the values still align with their labels. But the loss
# cannot go below $\ln K$: it ends at {glue:text}`ch3.frozen_routing_loss:.3f` nats. With the values frozen at their
# random initialisation, only the readout $W_O$ can make them informative. The advantage that drives routing then
# builds much more slowly, and after {glue:text}`ch3.steps:,` steps the loss is still
# {glue:text}`ch3.frozen_values_loss:.3f` nats, against {glue:text}`ch3.final_probe_loss:.4f` for the full head
# ({numref}`fig-recall-frozen`). Content learning feeds routing and routing feeds content: neither side alone does what
# the full head does.

# %% tags=["hide-input", "trained-output", "remove-output"]
report.glue_frozen_runs(variants)
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
# The feedback rests on first-order predictions about a value-only step. We take such steps on the run above at three
# moments: initialisation, the middle of the routing transition (step {glue:text}`ch3.transition_step`) and the end.
# Each uses {glue:text}`ch3.n_check` held-out sequences in float64. The last section repeats the key checks over
# several seeds.
#
# ### A value-only step lowers the loss by $\eta \sum_j \norm{\sum_i \alpha_{ij} u_i}^2$
#
# Move every value by the value law, $\Delta v_j = -\eta \sum_i \alpha_{ij} u_i$, and leave $W_Q$, $W_K$ and $W_O$
# unchanged, so the attention does not move. To first order in $\eta$ the loss changes by
#
# ```{math}
# :label: eq-value-step-loss
# \Delta L \approx -\eta \sum_j \Bigl\lVert \sum_i \alpha_{ij} u_i \Bigr\rVert^2 ,
# ```
#
# so the ratio of the actual change to this prediction must tend to 1 as $\eta \to 0$
# ({py:func}`dynamics.value_step_loss_change`). Because the loss is convex in the values, how fast can be bounded in
# advance:
#
# ```{math}
# :label: eq-value-step-bound
# 0 \le 1 - \frac{\Delta L_\text{actual}}{\Delta L_\text{predicted}} \le \frac{\eta \lambda}{2} ,
# ```
#
# where $\lambda$ bounds the loss's curvature in the values (derived in the folded block below). We take steps with
# $\eta$ from {glue:text}`ch3.eta_min:.0e` to {glue:text}`ch3.eta_max:.0e`. Useful steps are large: the loss is a mean
# over the $N$ query positions, so each value's gradient carries a factor $1/N$.

# %% tags=["hide-cell", "trained-output"]
etas = settings.ETAS
ratio_curves, bounds = runs.value_step_ratios(run, check, etas)  # at the three moments
report.glue_value_step_settings(etas, cfg.n_check)
report.value_step_table(etas, ratio_curves, bounds)

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
# In {numref}`fig-recall-value-step` the ratio tends to 1 at every moment of training. Its deviation falls in
# proportion to $\eta$ (slope 1 on the right), and it stays well inside the a-priori bound {eq}`eq-value-step-bound`. At
# the smallest step, in the middle of the routing transition, the ratio is
# {glue:text}`dynamics.first_order_value_step_ratio:.8f`, within the bound $\eta\lambda/2$ =
# {glue:text}`ch3.ratio_tolerance:.1e`. The loss prediction holds.
#
# :::{admonition} The a-priori bound
# :class: dropdown
#
# The loss is convex in the values: it is the cross-entropy of logits that are linear in them. Its Hessian with respect
# to the values is at most $\lambda = \norm{W_O}_2^2 \max_b \norm{A_b}_2^2 / (2N)$, because the softmax Jacobian has
# spectral norm at most $1/2$. Here $A_b$ is the query attention of sequence $b$ and $N$ the number of query positions
# ({py:func}`dynamics.value_step_curvature_bound`). Taylor's theorem then gives {eq}`eq-value-step-bound`. The bound at
# the smallest step, $\eta\lambda/2$, is the tolerance within which the ratio must equal 1.
# :::

# %% tags=["trained-output", "hide-input"]
ratio_claim = report.record_value_step_ratio(
    run, etas, ratio_curves, bounds, common=common, scale=scale, n_check=cfg.n_check
)

# %% [markdown] tags=[]
# ### After a value step, $b_{ij}$ changes by $-\eta \sum_{i'} \alpha_{i'j}\, u_i \cdot u_{i'}$
#
# The same step changes the compatibilities. Holding the error signals fixed, $\Delta b_{ij} = u_i \cdot \Delta v_j$,
# and the value law gives the paper's prediction
#
# ```{math}
# :label: eq-db-prediction
# \Delta b_{ij} \approx -\eta \sum_{i'} \alpha_{i'j}\, u_i \cdot u_{i'} .
# ```
#
# The term $i' = i$ is $-\eta\, \alpha_{ij} \norm{u_i}^2 \le 0$. A value moves to suit the queries that attend to it,
# lowering their $b_{ij}$ and raising their advantage: the feedback in one line.
#
# But the error signals are not fixed. The step changes the predictions, so $u_i$ changes too, and
# $\Delta b_{ij} = u_i \cdot \Delta v_j + \Delta u_i \cdot v_j'$. The second term is also first order in $\eta$. The
# prediction is therefore exact only for a frozen error signal, and its error does not vanish as $\eta \to 0$: it tends
# to the relative size of the readout's response. We measure the actual change with $u$ recomputed after the step
# ({py:func}`dynamics.compatibility_change_after_value_step`).

# %% tags=["hide-cell", "trained-output"]
eta_db = float(etas[0])
db_changes, db_error_curve = runs.compatibility_changes(run, check, eta_db)
db_claim = report.record_compatibility_change(
    run, db_changes, db_error_curve, eta=eta_db, common=common, scale=scale, n_check=cfg.n_check
)
{
    f"relative error of the Δb prediction, {name}": round(c.relative_error, 4)
    for name, c in db_changes.items()
}

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
# {numref}`fig-recall-compatibility-change` compares the two. At initialisation the prediction is good, with relative
# error {glue:text}`dynamics.db_prediction_rel_err:.3f`: the readout $W_O$ is small and the error signal barely
# responds to the values. The error stays below 10% until step {glue:text}`ch3.db_err_below_10pct_until`. By the middle
# of the routing transition it is {glue:text}`ch3.db_err_transition:.2f`, and at the end of training
# {glue:text}`ch3.db_err_end:.2f`. Once the readout is strong, the error signal's response is as large as the term the
# prediction keeps, and the points on the right no longer follow the diagonal. The prediction describes how
# specialization starts. Once values and readout are trained, the feedback runs through the readout as much as through
# the values.
#
# :::{admonition} What the prediction leaves out
# :class: dropdown
#
# Subtracting the readout's response $\Delta u_i \cdot v_j'$ from the actual change leaves
# {glue:text}`ch3.frozen_residual:.0e` of the prediction: rounding only. The paper gives no number for this error; the
# value at initialisation is recorded as the book's own measurement, with the later values in its description.
# :::

# %% [markdown] tags=[]
# ### Whose advantage grows: the rich-get-richer threshold
#
# The feedback is stated on the compatibilities, but what moves attention is the advantage
# $A_{ij} = \sum_{j'} \alpha_{ij'} b_{ij'} - b_{ij}$; where it is positive, the routing law raises $s_{ij}$. Under the
# value-only step $\Delta v_j = \eta\, w_j$, with $w_j = -\sum_{i'} \alpha_{i'j} u_{i'}$, the attention does not move.
# Differentiating $A_{ij}$ at $\eta = 0$ gives three terms:
#
# ```{math}
# :label: eq-advantage-change
# \begin{aligned}
# \frac{dA_{ij}}{d\eta} ={}& \underbrace{\norm{u_i}^2 \Bigl(\alpha_{ij} - \textstyle\sum_{j'} \alpha_{ij'}^2\Bigr)}_{\text{self}} \\
# &+ \underbrace{c_{ij} - \textstyle\sum_{j'} \alpha_{ij'} c_{ij'}}_{\text{other queries}} \\
# &+ \underbrace{\Delta u_i \cdot \Bigl(\textstyle\sum_{j'} \alpha_{ij'} v_{j'} - v_j\Bigr)}_{\text{error signal's response}} .
# \end{aligned}
# ```
#
# The self term alone is the rich-get-richer rule: a value step raises key $j$'s advantage for query $i$ exactly when
# $\alpha_{ij}$ exceeds the threshold $\sum_{j'} \alpha_{ij'}^2$. The rule drops the pull of the other queries that
# share the values, and the error signal's response. {py:func}`dynamics.advantage_change_rate` computes all three terms
# in closed form. Forward-mode automatic differentiation through a real value step checks them in float64 at every
# checkpoint ({py:func}`dynamics.advantage_change_autograd`). Along training we then count which keys gain advantage,
# and how often the rule gets the sign right ({numref}`fig-recall-advantage-change`).

# %% tags=["hide-cell", "trained-output"]
adv_errors, adv_scales = runs.advantage_change_errors(run, check)
report.record_advantage_change(adv_errors, adv_scales, common=common, n_check=cfg.n_check)
adv_trace = runs.advantage_change_along_training(run, check)
report.glue_advantage_trace(adv_trace, advantage)
report.advantage_trace_table(adv_trace)  # every tenth checkpoint

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
# The closed form matches autograd to {glue:text}`dynamics.advantage_change_max_abs_err:.0e` at every checkpoint. At
# initialisation, {glue:text}`ch3.adv_gain_correct_start:.0%` of the queries would raise the advantage of the answer's
# source under a value step, against {glue:text}`ch3.adv_gain_other_source_start:.0%` for the other sources. Where the
# answer's advantage peaks, the first share is {glue:text}`ch3.adv_gain_correct_at_peak:.0%`. At the end it is
# {glue:text}`ch3.adv_gain_correct_end:.0%`, against {glue:text}`ch3.adv_gain_other_source_end:.0%` for the other
# sources.
#
# The rule predicts the sign of the whole change for {glue:text}`ch3.adv_rule_agreement_start:.0%` of the attended pairs
# at initialisation, {glue:text}`ch3.adv_rule_at_peak:.0%` at the peak and {glue:text}`ch3.adv_rule_agreement_end:.0%`
# at the end; a coin would score one half. The self term carries only {glue:text}`ch3.adv_self_share_min:.0%` to
# {glue:text}`ch3.adv_self_share_max:.0%` of the three terms' summed size along the run. Once routing has snapped, the
# answer's source is above the threshold for {glue:text}`ch3.adv_correct_rich_end:.0%` of the queries, yet a value step
# lowers its advantage. Moving its value toward the answer shrinks the error it serves, so the other two terms outweigh
# the self term. The threshold is exact about one term; only the full first-order change describes this head.
#
# :::{admonition} The three terms, and two remarks on signs
# :class: dropdown
#
# In {eq}`eq-advantage-change`, $c_{ij} = \sum_{i' \ne i} \alpha_{i'j}\, u_i \cdot u_{i'}$ is the pull of the other
# queries, zero only when a single query attends. The error signal's response is
# $\Delta u_i = W_O (\diag p_i - p_i p_i^\top) W_O^\top \sum_j \alpha_{ij} w_j / N$, zero only when the readout does not
# react: the frozen-$u$ picture of {eq}`eq-db-prediction`.
#
# Two remarks fix the signs. The quantity $\alpha_{ij}(b_{ij} - \sum_{j'} \alpha_{ij'} b_{ij'})$ is
# $\partial L / \partial s_{ij} = -\alpha_{ij} A_{ij}$, and it *falls* above the threshold. Since the attention is
# fixed during the step, $\alpha_{ij} A_{ij}$ changes with the sign of $A_{ij}$. And the step here moves free values:
# through $W_V$ it would be mixed by the inputs' Gram matrix (chapter 2).
#
# At initialisation the self term's share is {glue:text}`ch3.adv_self_share_start:.0%`; the rule's agreement ranges from
# {glue:text}`ch3.adv_rule_agreement_min:.0%` to {glue:text}`ch3.adv_rule_agreement_max:.0%` along training.
# :::

# %% [markdown] tags=[]
# ### Every prediction, over five seeds
#
# One run can mislead. A stored result repeats the checks on {glue:text}`ch3.fb_n_seeds` recall heads, each with its
# own data and initialisation and this chapter's settings. It measures them at initialisation, in the middle of the
# routing transition (mean step {glue:text}`ch3.fb_transition_step:.0f`) and at the end, each as a mean with a 95%
# interval over the seeds.

# %% tags=["hide-cell"]
feedback = (
    feedback_predictions.FEEDBACK_PREDICTIONS.load()
)  # computed once: "Run it yourself" below
feedback_claims = report.record_feedback_claims(feedback)
report.glue_feedback(feedback)
report.glue_feedback_directions(
    claims.recorded_claims()
)  # each direction chosen by its claim's status
feedback_row = report.glue_feedback_row(claims.recorded_claims())
report.feedback_table(feedback_claims)

# %% [markdown] tags=[]
# - **The loss.** The ratio of actual to predicted change is {glue:text}`ch3.fb_init_loss_ratio_mean:.6f` at
#   initialisation, {glue:text}`ch3.fb_transition_loss_ratio_mean:.6f` at the transition and
#   {glue:text}`ch3.fb_end_loss_ratio_mean:.6f` at the end, where 1 is exact.
# - **The compatibilities.** The Δb prediction {glue:text}`ch3.fb_db_init_phrase` at initialisation, with relative error
#   {glue:text}`dynamics.db_prediction_rel_err_init:.3f`. It {glue:text}`ch3.fb_db_transition_phrase` at the
#   transition, where the error is {glue:text}`dynamics.db_prediction_rel_err_transition:.2f`.
# - **The advantage.** At initialisation a value step raises the advantage of the answer's source for
#   {glue:text}`ch3.fb_init_gain_correct_mean:.0%` of the queries, and the other sources' for
#   {glue:text}`ch3.fb_init_gain_other_source_mean:.0%`. The difference is
#   {glue:text}`dynamics.feedback_gain_margin_init:+.3f`: {glue:text}`ch3.fb_margin_init_phrase`. At the end it is
#   {glue:text}`dynamics.feedback_gain_margin_end:+.2f`: {glue:text}`ch3.fb_margin_end_phrase`.
# - **The weights.** The laws describe free activations. On the paper's sticky-chain head (chapter 5) at
#   initialisation, a step on $W_V$ moves the values at cosine {glue:text}`dynamics.weight_step_value_cosine_seeds:.2f`
#   to the value law's move: it {glue:text}`ch3.fb_weight_phrase` the law's direction. A step on $W_Q$, $W_K$ moves
#   {glue:text}`dynamics.weight_step_sign_agreement_seeds:.0%` of the attended pairs with their advantage, where a coin
#   would move half.
#
# So the paper's feedback story {glue:text}`ch3.feedback_row_label`. A small value step lowers the loss exactly as
# predicted, and at initialisation it changes the compatibilities as predicted. Once routing has formed, the error
# signal's own response, the term the Δb prediction leaves out, is as large as the term it keeps. Steps on the weights
# do not follow the free-activation laws.
#
# :::{admonition} How each prediction is tested, with its intervals
# :class: dropdown
#
# Each prediction is tested against a stated bound, by the whole 95% interval over the seeds:
#
# - **the Δb prediction** holds when its relative error, with the error signal recomputed after the step, is below 10%;
#   predicting no change at all scores 100%;
# - **the feedback** holds when a value step raises the advantage of the answer's source for more queries than it raises
#   the other sources' (a step that favoured nothing would raise both alike); the bound on the difference is 0;
# - **the weight steps** follow the free-activation picture when both the cosine and the share are at least 0.9 (free
#   activations give 1; a coin gives 0.5 for the signs).
#
# | moment | mean step | Δb relative error | loss ratio | margin for the answer's source |
# |---|---|---|---|---|
# | initialisation | {glue:text}`ch3.fb_init_step:.0f` | {glue:text}`ch3.fb_init_db_rel_err_mean:.3f` ({glue:text}`ch3.fb_init_db_rel_err_low:.3f` to {glue:text}`ch3.fb_init_db_rel_err_high:.3f`) | {glue:text}`ch3.fb_init_loss_ratio_mean:.6f` | {glue:text}`ch3.fb_init_gain_margin_mean:+.3f` ({glue:text}`ch3.fb_init_gain_margin_low:+.3f` to {glue:text}`ch3.fb_init_gain_margin_high:+.3f`) |
# | routing transition | {glue:text}`ch3.fb_transition_step:.0f` | {glue:text}`ch3.fb_transition_db_rel_err_mean:.3f` ({glue:text}`ch3.fb_transition_db_rel_err_low:.3f` to {glue:text}`ch3.fb_transition_db_rel_err_high:.3f`) | {glue:text}`ch3.fb_transition_loss_ratio_mean:.6f` | {glue:text}`ch3.fb_transition_gain_margin_mean:+.2f` ({glue:text}`ch3.fb_transition_gain_margin_low:+.2f` to {glue:text}`ch3.fb_transition_gain_margin_high:+.2f`) |
# | end of training | {glue:text}`ch3.fb_end_step:,.0f` | {glue:text}`ch3.fb_end_db_rel_err_mean:.3f` ({glue:text}`ch3.fb_end_db_rel_err_low:.3f` to {glue:text}`ch3.fb_end_db_rel_err_high:.3f`) | {glue:text}`ch3.fb_end_loss_ratio_mean:.6f` | {glue:text}`ch3.fb_end_gain_margin_mean:+.2f` ({glue:text}`ch3.fb_end_gain_margin_low:+.2f` to {glue:text}`ch3.fb_end_gain_margin_high:+.2f`) |
#
# The weight steps: cosine {glue:text}`ch3.fb_weight_value_cosine_mean:.2f` ({glue:text}`ch3.fb_weight_value_cosine_low:.2f`
# to {glue:text}`ch3.fb_weight_value_cosine_high:.2f`), share with the advantage's sign
# {glue:text}`ch3.fb_weight_sign_agreement_mean:.2f` ({glue:text}`ch3.fb_weight_sign_agreement_low:.2f` to
# {glue:text}`ch3.fb_weight_sign_agreement_high:.2f`).
#
# Part by part. {glue:text}`ch3.feedback_row_parts`
# :::

# %% [markdown] tags=[]
# ## Summary
#
# - On a task with known responsibilities, one head trained by gradient descent ends specialized: queries route to the
#   source that holds their answer, and each value serves the queries that request it.
# - The changes begin in a definite order on this run: values align with their labels under uniform routing (step
#   {glue:text}`ch3.aligned_step`) before routing passes one half (step {glue:text}`ch3.routed_step`). Freezing either
#   side breaks the dynamics.
# - A value step's first-order loss change holds in the limit, inside an a-priori bound. Its predicted change of the
#   compatibilities holds at initialisation and fails once routing forms.
# - Under a value step a key's advantage changes by three first-order terms. The rich-get-richer threshold is one of
#   them and gets the sign right for {glue:text}`ch3.adv_rule_agreement_min:.0%` to
#   {glue:text}`ch3.adv_rule_agreement_max:.0%` of attended pairs along training.
#
# The next chapter reads the same dynamics as a two-timescale EM and measures when the routing frame and the values
# settle.
#
# :::{admonition} Settings
# :class: dropdown
#
# | setting | value |
# |---|---|
# | sources $K$, queries $Q$ per sequence | {glue:text}`recall.K`, {glue:text}`recall.Q` |
# | possible tags, labels $C$ | {glue:text}`recall.n_tags`, {glue:text}`recall.n_labels` |
# | input width | {glue:text}`recall.d_in` |
# | training sequences | {glue:text}`ch3.n_train` |
# | training steps (full batch) | {glue:text}`ch3.steps:,` |
# | learning rate | {glue:text}`ch3.lr` |
# | measured every | {glue:text}`ch3.record_every` steps |
# | probe sequences | {glue:text}`ch3.n_probe` |
# | sequences for the value-step checks (float64) | {glue:text}`ch3.n_check` |
# | step sizes $\eta$ | {glue:text}`ch3.eta_min:.0e` to {glue:text}`ch3.eta_max:.0e` |
# | heads in the stored result | {glue:text}`ch3.fb_n_seeds` |
# :::
#
# :::{admonition} Run it yourself
# :class: dropdown
#
# Re-execute this chapter (its run time is on the execution status page):
#
# ```bash
# python -m attention_dynamics reproduce --chapter 3 --force
# ```
#
# The five-seed check is a stored result, computed once and read from the package's data
# (`attention_dynamics/data/feedback_predictions.json`). To compute it again and copy it there:
#
# ```bash
# python -m attention_dynamics compute feedback_predictions --promote
# ```
# :::
