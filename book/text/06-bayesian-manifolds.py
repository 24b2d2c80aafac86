# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@b2a415a4ed431c659988d2b3a6f1dfdda8f82e2b"

# %% [markdown] tags=[]
# # Bayesian manifolds in wind tunnels
#
# Paper II explains *how* gradient descent builds the geometry that lets a transformer compute a Bayesian
# posterior. The geometry itself, and the evidence that small transformers compute exact posteriors at all,
# come from Paper I {cite}`agarwal2025geometry`, which trains them in "wind tunnels": tasks whose posterior
# is known in closed form and which cannot be solved by memorisation, because every sequence brings its own
# hidden structure. This chapter rebuilds two of those wind tunnels with their exact posteriors, trains a
# small causal transformer in each on the CPU, measures its calibration in bits against the exact answer,
# and then looks for the geometry Paper I reports — near-orthogonal keys, attention that focuses with depth,
# a low-dimensional value manifold ordered by posterior entropy — and for the *frame–precision
# dissociation* that Paper II's two-timescale picture predicts: routing settles early, precision keeps
# improving.

# %% tags=["parameters"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
bij_steps = None  # bijection training steps (None: as the scale says)
hmm_steps = None  # HMM training steps (None: as the scale says)

# %% tags=["remove-stderr"]
import pandas as pd

from attention_dynamics.chapters.bayesian_manifolds import (
    figures,
    frame_definitions,
    frame_definitions_report,
    long_tier_report,
    mechanism_report,
    memory_report,
    report,
    runs,
    settings,
)
from attention_dynamics.core import plotting
from attention_dynamics.core.seeding import seed_everything
from attention_dynamics.diagnostics import frame_order, mechanism_controls, memory_ladder
from attention_dynamics.ledger import claims, memory_claims, verdicts
from attention_dynamics.ledger.frame_results import load_frame_freeze, load_frame_freeze_full
from attention_dynamics.training import wind_tunnels

# The two tunnels live in the library (training.wind_tunnels) so that other chapters study
# exactly these models; the chapter's settings at the three scales fast / book / paper:
cfg = settings.resolve(scale, device=device, bij_steps=bij_steps, hmm_steps=hmm_steps)
generator = seed_everything(seed)
plotting.use_book_style()
settings.scales_table()

# %% [markdown] tags=[]
# The table shows the three scales. The book's default (`book`) trains two small models on the CPU; `paper`
# holds Paper I's bijection sizes ($V = 20$, $L = 19$, 6 layers, 6 heads, $d = 192$, AdamW at $3\times10^{-4}$,
# trained on the sampled next value) for readers with a GPU
# (`python -m attention_dynamics reproduce --chapter 6 --scale paper`); this book has not run them.
#
# ## Two wind tunnels with exact posteriors
#
# **Bijection elimination.** Each sequence draws a fresh random bijection $\pi$ of $V$ symbols and $L \le V$
# distinct keys $k_1, \dots, k_L$. The model reads
# $k_1,\ \pi(k_1),\ k_2,\ \pi(k_2),\ \dots,\ k_L$ (keys and values are different tokens) and, at the $t$-th key
# position, predicts $\pi(k_{t+1})$ after $t$ pairs have been revealed. Since $\pi$ is new for every
# sequence, nothing about it can be memorised; all the model can know is which values are already taken.
# The posterior is uniform over the rest:
#
# ```{math}
# :label: eq-bijection-posterior
# p\big(\pi(k_{t+1}) = v \mid \text{context}\big) = \frac{\mathbb{1}[v \text{ not yet revealed}]}{V - t},
# \qquad H_t = \log_2 (V - t) \ \text{bits}.
# ```
#
# `tasks.bijection.exact_posterior` computes it from the tokens alone; the tests compare it with a
# brute-force enumeration of all $V!$ bijections consistent with the revealed pairs. One sequence:

# %% tags=[]
print(runs.bijection_example_text(cfg, generator))

# %% [markdown] tags=[]
# Three reference levels follow in closed form from {eq}`eq-bijection-posterior`, averaging over the $L$ key
# positions. The **Bayes cross-entropy floor** is the lowest loss any model can reach,
# $\frac1L\sum_{t<L}\ln(V-t)$ nats per position. The **Bayes top-1 accuracy** is
# $\frac1L\sum_t \frac1{V-t}$: even the exact posterior can only guess among the remaining values. And the
# **{term}`context-blind level`**: a predictor that sees the current key but not the revealed pairs — an MLP applied to
# each position on its own — minimises its expected cross-entropy with the marginal of $\pi(k)$, which is
# uniform over all $V$ values. Its entropy error is therefore $\frac1L\sum_t[\log_2 V - \log_2(V-t)]$ bits, and
# the same number is the smallest mean $\mathrm{KL}(\text{posterior}\,\|\,q)$ any context-blind $q$ can reach.
#
# The chapter measures each level on held-out sequences (the exact posterior's loss and expected accuracy,
# and the calibration of the uniform predictor) and checks it against the closed form:

# %% tags=["hide-input"]
eval_bij = wind_tunnels.bijection_batch_for_eval(
    cfg.bijection, seed=seed, n=cfg.n_eval
)  # its own stream
# Each level is measured on eval_bij and recorded against its closed form.
levels = report.record_reference_levels(cfg, eval_bij, seed=seed)

# %% [markdown] tags=[]
# At $V = L =$ {glue:text}`manifolds.V` the floor is {glue:text}`bijection.bayes_ce_floor_nats:.4f` nats per
# position, the Bayes accuracy {glue:text}`bijection.bayes_top1_accuracy:.3f`, and the context-blind
# entropy error {glue:text}`bijection.context_blind_entropy_mae_bits:.3f` bits (its KL is the same,
# {glue:text}`manifolds.blind_kl_bits:.3f` bits). At Paper I's sizes ($V = 20$, $L = 19$) the closed form gives
# {glue:text}`manifolds.blind_paper_sizes_bits:.2f` bits. The 1.85 bits Paper I reports for its MLP is larger than
# that: either the MLP did not even find the marginal, or the number is measured differently; the closed form is the
# level a context-blind model can reach.
# Entropy error alone can be gamed — a model could output the right *amount* of uncertainty about the wrong
# values — which is why every calibration below is also reported as a KL divergence.
#
# **HMM filtering.** Each sequence has its own hidden Markov model with $S = 5$ states and 5 symbols: rows of
# the transition matrix $A$ and emission matrix $E$ are drawn from Dirichlet(1), floored at 0.05 and
# renormalised (Paper I also rounds them to a 0.01 grid: `grid=0.01`, used at `--scale paper`); the initial
# state is uniform. The model is given $A$ and $E$ in its input — every position carries its observation
# $o_t$ (one-hot) next to both matrices — and must output the filtering posterior, computed exactly by the
# normalised forward algorithm {cite}`rabiner1989tutorial`:
#
# ```{math}
# :label: eq-forward-filter
# b_t(s) = p(s_t = s \mid o_0, \dots, o_t) \;\propto\; E_{s, o_t} \sum_{s'} b_{t-1}(s')\, A_{s' s},
# \qquad b_0(s) \propto \tfrac1S E_{s, o_0}.
# ```
#
# `tasks.hmm.forward_filter` implements {eq}`eq-forward-filter`; the tests check it against a sum over every
# hidden path and against `hmmlearn`'s `CategoricalHMM.predict_proba` on every prefix, to $10^{-10}$.
# {numref}`fig-manifold-hmm-posterior` shows the posterior of one sequence.

# %% tags=["hide-input", "remove-output"]
plotting.glue_figure(
    "fig-manifold-hmm-posterior", figures.plot_hmm_posterior(runs.hmm_example_batch(cfg, generator))
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-hmm-posterior
# :name: fig-manifold-hmm-posterior
# :alt: Stacked areas of the exact filtering posterior over the five hidden states of one random HMM sequence, step t on the horizontal axis and probability from 0 to 1 on the vertical axis, with a coloured square above each step marking the observed symbol.
#
# The exact filtering posterior $p(s_t \mid o_0, \dots, o_t)$ of one sequence, computed by the forward algorithm
# {eq}`eq-forward-filter`: at each step the coloured bands stack the probabilities of the hidden states, and the
# square above the step is the symbol observed there.
# ```

# %% [markdown] tags=[]
# ## Training at CPU scale
#
# One causal transformer per task (`models.transformer.CausalTransformer`, pre-LayerNorm), trained by the
# book's one loop (`training.fit`) on fresh sequences at every step, with AdamW {cite}`loshchilov2019decoupled`,
# a short warm-up and cosine decay. The bijection model reads tokens with learned positions and predicts at
# the key positions; the HMM model reads the feature vectors and uses ALiBi positions
# ([Press et al., 2022](https://arxiv.org/abs/2108.12409)) — a per-head recency bias on the scores instead of
# a position embedding — so the same model runs at any length, which the length-generalisation test needs.
#
# Both are trained by cross-entropy against the **exact posterior** (a soft target). For the HMM this is what
# Paper I does. For the bijection Paper I trains on the sampled next value; the two objectives have the same
# expected gradient in every context — cross-entropy is linear in its target and the posterior is the
# conditional mean of the one-hot target (a unit test checks this by enumeration) — so they share their
# minimiser, but the posterior target removes the sampling noise, which is what lets a CPU-sized run get close
# to the floor in minutes. `--scale paper` uses the sampled target, as Paper I. The two runs are independent
# and train side by side, one per core:

# %% tags=["trained-output", "hide-input", "remove-output"]
bij_run, hmm_run = runs.train_tunnels(cfg, seed=seed, device=device)
bij_model, hmm_model = bij_run.model(), hmm_run.model()
model_sizes = report.glue_training(cfg, bij_model, hmm_model)  # steps and parameter counts
eval_hmm = runs.hmm_eval_batches(cfg, seed=seed)  # held out, at every test length
plotting.glue_figure(
    "fig-manifold-training-losses",
    figures.plot_training_losses(cfg, bij_run, hmm_run, eval_hmm[cfg.hmm.length]),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-training-losses
# :name: fig-manifold-training-losses
# :alt: Two line plots of training cross-entropy in nats per position against the training step, left for the bijection transformer and right for the HMM transformer, each a falling moving-average curve with a dashed horizontal line at the task's Bayes floor.
#
# Training loss of the two wind-tunnel transformers (moving average), bijection elimination on the left and HMM
# filtering on the right. The dashed line is the exact Bayes floor: the closed form for the bijection, the mean
# posterior entropy on held-out sequences for the HMM.
# ```

# %% [markdown] tags=[]
# The bijection model ({glue:text}`manifolds.bij_parameters` parameters) trains for
# {glue:text}`manifolds.bij_steps` steps, the HMM model ({glue:text}`manifolds.hmm_parameters` parameters) for
# {glue:text}`manifolds.hmm_steps` (learning rate {glue:text}`manifolds.hmm_lr`, AdamW with warm-up and cosine decay);
# both losses approach their floors ({numref}`fig-manifold-training-losses`; for the HMM the floor is the mean
# posterior entropy, estimated on held-out sequences). Like the bijection model, the HMM model is trained on the exact answer as a soft target — the
# cross-entropy against the forward filter's posterior at every step, not against a sampled state — which takes the
# sampling noise out of its gradients.
#
# ## Calibration in bits
#
# Two definitions of "entropy error" circulate in Paper I and its code. The book reports the **per-sample** one,
# the mean over sequences and positions of $|H(\text{model}) - H(\text{Bayes})|$; the **curve** version first
# averages the entropies over sequences and then compares the two curves, and can only be smaller (errors of
# opposite sign cancel). Both are in `calibration`, with $\mathrm{KL}(\text{posterior}\,\|\,\text{model})$ in
# bits, per position and averaged.

# %% tags=["trained-output", "hide-input", "remove-output"]
bij_cal = report.record_bijection_calibration(cfg, bij_model, eval_bij, seed=seed)
plotting.glue_figure(
    "fig-manifold-bijection-calibration",
    figures.plot_bijection_calibration(cfg, bij_cal.report, bij_cal.log_probs),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-bijection-calibration
# :name: fig-manifold-bijection-calibration
# :alt: Two panels against the number of revealed pairs t. Left: the model's mean predictive entropy in bits as dots with a shaded band over sequences, on a dashed curve of the exact entropy log2(V - t). Right: the entropy error and the KL divergence by position on a log scale, with a dotted horizontal target line.
#
# The bijection transformer against the exact posterior on held-out sequences. Left: its predictive entropy (mean,
# and its spread over sequences, shaded) beside the exact $\log_2(V - t)$ (dashed). Right: the per-sample entropy
# error and $\mathrm{KL}(\text{posterior}\,\|\,\text{model})$ at each position, with the target (dotted).
# ```

# %% [markdown] tags=[]
# The trained transformer's per-sample entropy error is {glue:text}`bijection.entropy_mae_bits:.4f` bits
# (target 0.01; Paper I reports 0.007 bits at $V = 20$), its curve error
# {glue:text}`manifolds.bij_curve_mae_bits:.4f` bits, and its KL to the exact posterior
# {glue:text}`bijection.kl_bits:.5f` bits per position — against {glue:text}`bijection.context_blind_entropy_mae_bits:.3f`
# bits for the best model that ignores the context. Its cross-entropy on held-out sequences is
# {glue:text}`manifolds.bij_model_ce_nats:.4f` nats against the floor of
# {glue:text}`bijection.bayes_ce_floor_nats:.4f`, and its top-1 accuracy {glue:text}`manifolds.bij_model_top1:.3f`
# against the sampled truth, where the Bayes accuracy is {glue:text}`bijection.bayes_top1_accuracy:.3f`
# (the exact posterior's probability of the model's own guesses averages
# {glue:text}`manifolds.bij_sampled_top1_bayes:.3f`: every guess is an allowed value). The entropy follows
# $\log_2(V - t)$ all the way down to the last position, where exactly one value is left
# ({numref}`fig-manifold-bijection-calibration`).

# %% tags=["trained-output", "hide-input", "remove-output"]
# Every HMM bound is stated against the context-blind level (tasks.hmm.context_blind_posterior).
hmm_cal = report.record_hmm_calibration(cfg, hmm_run, eval_hmm, seed=seed)
plotting.glue_figure(
    "fig-manifold-hmm-calibration",
    figures.plot_hmm_calibration(hmm_cal.reports, hmm_cal.blind_reports),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-hmm-calibration
# :name: fig-manifold-hmm-calibration
# :alt: Two panels against the step t of the HMM sequence, one colour per test length. Left: the model's KL divergence to the exact filter in bits as solid lines and the context-blind predictor's as dashed lines. Right: the model's mean predictive entropy in bits beside the exact entropy as a black dashed line. A dotted vertical line marks the training length.
#
# HMM filtering at the training length and at longer test lengths. Left: the model's
# $\mathrm{KL}(\text{filter}\,\|\,\text{model})$ at each step (solid) and that of the context-blind posterior
# (dashed, same colour), which sees only the current observation and the matrices. Right: the mean predictive entropy against the exact one.
# The dotted vertical line marks the length the model was trained at.
# ```

# %% tags=["trained-output", "hide-input", "remove-output"]
plotting.glue_figure(
    "fig-manifold-hmm-kl-training",
    figures.figure_hmm_kl_through_training(hmm_cal.curve, target=report.TRANSPORT_FRACTION),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-hmm-kl-training
# :name: fig-manifold-hmm-kl-training
# :alt: Line plot of the HMM transformer's KL divergence as a multiple of the context-blind level against the training step on a log axis, one line per test length, with a dashed horizontal line at 1 for the context-blind level and a dotted one at the transport bound.
#
# The HMM transformer's KL to the exact filter at every checkpoint, divided by the context-blind predictor's KL at
# the same length, at the training length and the longest test length. The dashed line is the level of a predictor
# with no memory; the dotted line is the chapter's transport bound.
# ```

# %% [markdown] tags=[]
# At the training length $K =$ {glue:text}`manifolds.hmm_K_train` the HMM transformer's KL to the exact filter is
# {glue:text}`hmm.kl_bits:.4f` bits per step (Paper I v3: 0.049). That number means little on its own. The
# exact posterior given **only the current observation** and the two matrices,
# $q_t(s) \propto (\pi_0 A^t)(s)\, E_{s, o_t}$ (`tasks.hmm.context_blind_posterior`), already scores
# {glue:text}`hmm.context_blind_kl_bits:.4f` bits (entropy error {glue:text}`manifolds.blind_mae_train:.4f`): on Paper I's
# random HMMs the past carries little information beyond the present observation, and a model with no memory at
# all reaches that level. The transformer sits at {glue:text}`manifolds.hmm_kl_ratio_train:.2f` times it. Belief
# *transport* — combining the carried belief with the new observation — shows only below the context-blind level;
# the book asks for at most 0.6 times it ({glue:text}`manifolds.transport_target:.4f` bits), and this run gets there.
# No predictor that reads only the current observation, the matrices and the step can go below the context-blind level,
# so the model uses earlier observations. How many of them it needs is another question, which the memory ladder
# below answers. Its per-sample entropy error is {glue:text}`hmm.entropy_mae_bits:.4f` bits (the context-blind predictor's is
# {glue:text}`manifolds.blind_mae_train:.4f`): averaged over sequences its entropy curve is within
# {glue:text}`manifolds.hmm_curve_train:.4f` bits of the exact one (the curve error), but its entropy scatters around the
# exact one from sequence to sequence. Against the 0.05-bit bound the per-sample error is **not decided at this scale**:
# it is close to the bound, the learning rate decays to zero so the flat end of training is no plateau evidence, and no
# longer run of this model was made. The long tier at the end of the chapter, a deeper model trained six times as long,
# goes well below the bound. Paper I's numbers for HMM filtering disagree with each other by
# almost three orders of magnitude (0.049 bits in the v3 table, $7.5\times10^{-5}$ in the authors' README) and do
# not say which definition they use; a curve error, which lets errors of both signs cancel, is the likelier
# reading of the smaller one.
#
# At $t = 0$, where the posterior is just the normalised column $E_{\cdot, o_0}$ and nothing needs to be remembered,
# the KL is {glue:text}`manifolds.hmm_kl_first_step:.4f` bits; averaged over the later steps it is
# {glue:text}`manifolds.hmm_kl_later_steps:.4f` bits, level along the sequence and below the context-blind curve
# (dashed in {numref}`fig-manifold-hmm-calibration`). Tested longer than it was trained, the model keeps most of its advantage: at
# {glue:text}`manifolds.hmm_K_mid` steps the KL is {glue:text}`manifolds.hmm_kl_mid:.4f` bits
# ({glue:text}`manifolds.hmm_kl_ratio_mid:.2f` times the context-blind {glue:text}`manifolds.blind_kl_mid:.4f`) and at
# {glue:text}`manifolds.hmm_K_long` steps, 2.5 times the training length, {glue:text}`hmm.length_gen_kl_bits:.4f` bits
# ({glue:text}`manifolds.hmm_kl_ratio_long:.2f` times {glue:text}`hmm.context_blind_kl_bits_long:.4f`). Paper I reports
# entropy errors of 0.012 and 0.029 bits at 30 and 50. The model's use of the past carries over to lengths never
# trained on, a little weaker than at the training length; the memory ladder below says how far back it reaches.
#
# **Through training.** {numref}`fig-manifold-hmm-kl-training` follows the KL at every checkpoint as a multiple of the
# context-blind level,
# at $K =$ {glue:text}`manifolds.hmm_K_train` and {glue:text}`manifolds.hmm_K_long`. The ratio falls steeply over the first thousand steps, crosses 1 (the
# context-blind level) after about a third of training, and the gain from transport builds over the rest: shorter
# runs of the same model stop near the context-blind level. Over the last 20 % of
# training the ratio moves by {glue:text}`manifolds.hmm_late_change_train:.3f` at the training length and
# {glue:text}`manifolds.hmm_late_change_long:.3f` at 2.5 times it (the book calls a metric *plateaued* when it moves by
# less than {glue:text}`manifolds.plateau_ratio` there). Both verdicts are passes, so no longer run is needed to decide
# them; with the learning rate decaying to zero, the flat end says only that this schedule is spent, and a longer run
# might lower the ratio further. The long tier at the end of the chapter is such a run.

# %% tags=["trained-output", "hide-input"]
# The exact posterior given the last k observations and the matrices (tasks.hmm.window_posterior)
ladders = memory_report.chapter6_ladders(eval_hmm)  # test length -> MemoryLadder, windows up to 12
hmm_kl = {K: r.kl_bits for K, r in hmm_cal.reports.items()}
memory6 = memory_report.record_chapter6_memory(
    ladders, hmm_kl, model="chapter6", params=report.hmm_params(cfg, seed=seed), eval_hmm=eval_hmm
)  # hmm.window_kl_bits_k2..4 (checked by path enumeration), hmm.memory_steps_transformer*
for K, role in memory_report.length_roles(ladders).items():
    memory_claims.glue_ladder(f"manifolds.ladder_{role}", ladders[K])
    memory_claims.glue_memory(f"manifolds.hmm_{role}", ladders[K], hmm_kl[K])
memory_ladder.ladder_frame(
    {f"K = {K}": ladder for K, ladder in ladders.items()},
    models={"this transformer": {f"K = {K}": kl for K, kl in hmm_kl.items()}},
)

# %% [markdown] tags=[]
# ### Against short memories
#
# The context-blind posterior is one predictor without transport; there is a whole ladder of them. The exact
# posterior given only the **last $k$ observations** and the matrices, $p(s_t \mid o_{t-k+1}, \dots, o_t, A, E)$ — the
# window's first state takes the chain's own marginal $\pi_0 A^a$ at its step $a$, then the forward recursion runs over
# the window ({func}`~attention_dynamics.tasks.hmm.window_posterior`; the tests check it against a sum over every
# hidden path and against the forward filter once the window covers the prefix) — is the best any predictor can do
# that looks back $k$ steps. $k = 1$ is the context-blind posterior; $k \ge t + 1$ is the filter. On Paper I's random
# HMMs the ladder falls fast (table above): at the training length a 2-step window is
# {glue:text}`hmm.window_kl_bits_k2:.4f` bits from the filter ({glue:text}`manifolds.ladder_train_k2_ratio:.3f` × the
# context-blind level), a 3-step window {glue:text}`hmm.window_kl_bits_k3:.5f`
# ({glue:text}`manifolds.ladder_train_k3_ratio:.4f` ×) and a 4-step window {glue:text}`hmm.window_kl_bits_k4:.5f`
# (each level also equals, to $10^{-9}$ bits, the level computed by enumerating the window's hidden paths). The
# transformer's KL, {glue:text}`hmm.kl_bits:.4f` bits, is {glue:text}`manifolds.hmm_train_memory`: a look-back of
# {glue:text}`hmm.memory_steps_transformer` steps does as well. It uses the previous observations, which is what
# "below the context-blind level" showed, but not more than a short look-back would. Carrying the belief further
# than that would need a KL at or below the level of the tunnel's **rule window** — the longest window up to 8 steps
# whose level is still at least 1 % of the context-blind level, {glue:text}`manifolds.ladder_train_rule_window` steps
# here ({glue:text}`manifolds.ladder_train_rule_level:.5f` bits) — and that is **not decided** for this model, which
# was not trained longer (the long tier below is its longer run).
#
# Tested at lengths it never saw, the model stays at the same rung: at the longest test length its KL,
# {glue:text}`hmm.length_gen_kl_bits:.4f` bits, is {glue:text}`manifolds.hmm_long_memory` (a memory of
# {glue:text}`hmm.memory_steps_transformer_len50` steps). A short look-back has no length to generalise over — it reads
# the same few observations at step 49 as at step 19 — and ALiBi's recency bias is built for it. So the length test
# shows that the model's short memory does not break at longer lengths; it does not show a belief carried across them.

# %% [markdown] tags=[]
# ## The geometry
#
# Paper I reads the computation off the trained network's geometry. The measurements below are general
# functions of `geometry`, applied to the bijection transformer on held-out probe sequences
# (`diagnostics.wind_tunnel_geometry.bijection_geometry`):
#
# - **key orthogonality**: the mean $|\cos|$ between the key vectors of one sequence (every position), averaged
#   over sequences and heads, against $\mathbb{E}|\cos\theta| = \Gamma(\tfrac d2) / (\sqrt\pi\,\Gamma(\tfrac{d+1}2))$
#   for two independent isotropic vectors in the head dimension $d$;
# - **attention entropy by layer** (bits, over the key-position queries that see more than one token), and
#   **query–key alignment**: the attention-weighted mean of $\cos(q_i, k_j)$ against its uniform mean over
#   the visible keys;
# - **the value manifold**: PCA of the value mixtures that the last layer delivers to the prediction positions,
#   $g_i = \sum_j \alpha_{ij} v_j$ (heads concatenated): the variance share of PC1 and its Spearman correlation
#   with the Bayes entropy $\log_2(V - t)$;
# - **two nulls beside every number** (`diagnostics.wind_tunnel_geometry.bijection_geometry_nulls`): the same model **untrained** (its
#   initialisation, step 0 of the run: same size, same seed), which says what size, initialisation and the inputs'
#   statistics give without learning; and the trained model reading **scrambled values**
#   (`diagnostics.wind_tunnel_geometry.bijection_scrambled_probe`: every revealed value replaced by an independent uniform draw, so
#   positions and token types are kept but there is no bijection left to eliminate), which says what position and
#   token type alone give to the trained weights. A number that is the same on scrambled values is no evidence of
#   elimination.

# %% tags=["trained-output", "hide-input"]
probe = wind_tunnels.bijection_probe_batch(cfg.bijection, seed=seed, n=cfg.n_probe)
# The geometry beside its nulls (untrained, scrambled values), through training, and over seeds.
bij_geometry = report.record_bijection_geometry(cfg, bij_run, probe, seed=seed, generator=generator)
geo, nulls = bij_geometry.report, bij_geometry.nulls
report.manifold_frame(geo.manifold_table)

# %% tags=["trained-output", "hide-input"]
pd.DataFrame(nulls).rename_axis(f"seed {seed}").round(3)

# %% tags=["trained-output", "hide-input"]
# Paper I's own key metric (W_K on the value tokens' embeddings, signed cosine) beside the
# untrained model, and the model with one layer's attention mean-ablated at a time
paper_keys = mechanism_report.record_paper_key_metric(
    "geometry",
    bij_model,
    bij_run.model(0),
    cfg.bijection.V,
    params=report.geometry_params(cfg, seed=seed),
    model_text="chapter 6's bijection transformer",
)
ablation = mechanism_report.record_layer_ablation(
    "geometry",
    bij_model,
    eval_bij,
    params=report.bijection_params(cfg, seed=seed),
    model_text="chapter 6's bijection transformer",
)
claims.glue("manifolds.key_abs_cos_embedding_keys", paper_keys["trained"]["abs"])
claims.glue("manifolds.key_abs_cos_embedding_keys_untrained", paper_keys["untrained"]["abs"])
freeze = frame_order.freeze_frame_summary(load_frame_freeze()["tunnel"])  # chapter 4's runs
claims.glue(
    "manifolds.tunnel_freeze_frame_cost_bits", freeze["cost_mean_bits"][0]
)  # frozen at step 0
# the causal definition: the frame frozen at initialisation, chapter 6's full budget
freeze_full = mechanism_report.record_freeze_frame_cost(
    load_frame_freeze_full()["tunnel"],
    margin_fraction=freeze["margin_fraction"],
    stored_steps=freeze["total_steps"],
    source="data/frame_freeze_full.json",
)
claims.glue("manifolds.ablation_intact_kl_bits", ablation["result"]["intact"]["kl_bits"])
claims.glue("manifolds.ablation_blind_kl_bits", ablation["result"]["blind"]["kl_bits"])
claims.glue("manifolds.ablation_lost_layer0", ablation["lost_fraction"][0])
claims.glue("manifolds.ablation_lost_later_max", max(ablation["lost_fraction"][1:]))
pd.DataFrame(
    {f"layer {layer} ablated": r for layer, r in enumerate(ablation["result"]["ablated"])}
    | {"intact": ablation["result"]["intact"], "context-blind": ablation["result"]["blind"]}
).T

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure("fig-manifold-geometry", figures.plot_geometry(geo))

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-geometry
# :name: fig-manifold-geometry
# :alt: Four panels on the bijection transformer's geometry. Top left: a heat map of the absolute cosine between the layer-0 keys of one sequence. Top right: bars of the mean absolute key cosine by layer for all positions, value tokens and key tokens, with a dashed isotropic baseline and a dotted line at Paper I's bound. Bottom left: bars of attention entropy by layer with a dashed line at uniform attention. Bottom right: query-key cosine by layer, attention-weighted and uniform.
#
# The geometry of the bijection transformer on held-out probe sequences. Top: $|\cos|$ between the layer-0 keys of
# one sequence, and the mean key $|\cos|$ by layer and token type against the isotropic baseline (dashed) and
# Paper I's bound (dotted). Bottom: attention entropy by layer against uniform attention (dashed), and the
# query–key cosine weighted by attention against its uniform mean over the visible keys.
# ```

# %% tags=["trained-output", "hide-input", "remove-output"]
plotting.glue_figure(
    "fig-manifold-geometry-training",
    figures.figure_geometry_through_training(bij_geometry.curve, nulls),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-geometry-training
# :name: fig-manifold-geometry-training
# :alt: Four line plots against the training step on a log axis, one per geometry measure of the bijection transformer: key absolute cosine over all positions, key absolute cosine over key tokens, the attention entropy reduction from first to last layer and the value PC1 share, each with a dashed scrambled-values level, a dotted line at Paper I's bound and the end of training shaded.
#
# Four geometry measures of the bijection transformer at every checkpoint (the first is the untrained model,
# drawn at step 1 on the log axis). Dashed: the trained model on scrambled values; dotted: Paper I's bound; shaded: the end of training,
# where a plateau is judged.
# ```

# %% [markdown] tags=[]
# **Keys.** The layer-0 keys of a sequence ({numref}`fig-manifold-geometry`, top) have a mean $|\cos|$ of {glue:text}`geometry.key_abs_cos_layer0:.3f` over all
# positions and {glue:text}`geometry.key_abs_cos_layer0_key_tokens:.3f` over the key-token positions only, which is Paper
# I's measure. Random vectors of the same dimension give {glue:text}`geometry.key_abs_cos_random_baseline:.3f`, so Paper
# I's "below 0.1" asks for keys *more* orthogonal than random ones. The untrained model says what training did: the
# same network at its initialisation gives {glue:text}`geometry.key_abs_cos_layer0_untrained:.3f` and
# {glue:text}`geometry.key_abs_cos_layer0_key_tokens_untrained:.3f`, so training moved the keys *away* from orthogonality.
# (The scrambled control, {glue:text}`geometry.key_abs_cos_layer0_scrambled:.3f` and
# {glue:text}`geometry.key_abs_cos_layer0_key_tokens_scrambled:.3f`, cannot differ much here: a layer-0 key is computed
# from its own token and position alone, so the key tokens' keys are the same by construction.) The key tokens' keys
# are almost parallel — the model never needs to tell them apart, because a query looking for taken values ignores
# them all together — while the keys at the value-token positions are less aligned
# ({glue:text}`manifolds.key_cos_value_tokens:.3f`). This small model routes by token *type*; it has no basis of
# near-orthogonal keys, one per hypothesis.
#
# Paper I's authors measure key orthogonality differently (their `qkv_analysis.py`, `cmd_orthogonality`): layer 0's
# $W_K$ applied to the *token embeddings* of the hypothesis tokens — the value tokens — with no positions and no
# LayerNorm, and the *signed* mean of the off-diagonal cosines
# ({func}`~attention_dynamics.diagnostics.mechanism_controls.paper_key_orthogonality`). On this model it is
# {glue:text}`geometry.key_signed_cos_value_tokens:.3f` and on the same model untrained
# {glue:text}`geometry.key_signed_cos_value_tokens_untrained:.3f`: {glue:text}`manifolds.geometry_paper_key_reading`.
# On one seed of this small model the number is stated, not decided: re-executions with other seeds move it by more
# than its distance to the bound (its cross-machine tolerance in `book/claim_tolerances.json`); Paper I's size below
# decides it. Signed cosines of random directions cancel, so at initialisation the metric is near 0 for any set of
# keys: meeting the bound cannot show that training built a frame. (The mean $|\cos|$
# of the same embedding keys is {glue:text}`manifolds.key_abs_cos_embedding_keys:.2f` trained against
# {glue:text}`manifolds.key_abs_cos_embedding_keys_untrained:.2f` untrained.) Paper I's authors reach the same
# conclusion from the other side in their later study of the frame: key orthogonality picks the wrong frame head, and
# ablation is the criterion that tracks function. Chapter 4 already has the causal test in this tunnel: freezing $W_Q$
# and $W_K$ at their initialisation and training everything else costs
# {glue:text}`manifolds.tunnel_freeze_frame_cost_bits:.4f` bits in its stored runs (`data/frame_freeze.json`, a quarter
# of this chapter's budget). Trained for this chapter's full {glue:text}`manifolds.freeze_full_steps` steps on three
# seeds (`python -m attention_dynamics compute frame_freeze_full`, `data/frame_freeze_full.json`), the frozen model's
# final KL differs from the unfrozen one's by {glue:text}`geometry.freeze_frame_cost_fraction:+.3%` of the gap
# training closes (95 % interval {glue:text}`manifolds.freeze_full_low:+.3%` to
# {glue:text}`manifolds.freeze_full_high:+.3%`): {glue:text}`manifolds.freeze_full_reading`. Measured against the
# trained model's own small KL instead of the gap, the frozen model's final KL is
# {glue:text}`manifolds.freeze_full_over_trained_min:+.0%` to {glue:text}`manifolds.freeze_full_over_trained_max:+.0%`
# off the unfrozen one's. The verdict page states this causal definition beside the two metrics, with chapter 4's
# margin as its bound.
#
# **Attention by layer.** The mean attention entropy of the prediction positions is
# {glue:text}`manifolds.attn_entropy_first:.2f` bits in the first layer and {glue:text}`manifolds.attn_entropy_last:.2f`
# bits in the last (uniform attention: {glue:text}`manifolds.attn_entropy_uniform:.2f` bits), a relative change of
# {glue:text}`geometry.attention_entropy_reduction:.2f` (Paper I: a *fall* of 85–90 %). Which layer does the
# elimination? Replacing one layer's attention output by its mean over the evaluation sequences at each position (the
# content gone, the position kept; {func}`~attention_dynamics.diagnostics.mechanism_controls.layer_ablation`) measures
# it: with layer 0's attention ablated the KL to the exact posterior rises from
# {glue:text}`manifolds.ablation_intact_kl_bits:.2g` to {glue:text}`geometry.layer_ablation_kl_bits_layer0:.3f` bits
# (context-blind: {glue:text}`manifolds.ablation_blind_kl_bits:.3f`), losing
# {glue:text}`manifolds.ablation_lost_layer0:.0%` of the model's gain over a context-blind predictor; ablating a later
# layer loses at most {glue:text}`manifolds.ablation_lost_later_max:.1%` (table above). In the first layer the queries
# point at the keys they attend to (attention-weighted cosine
# {glue:text}`manifolds.qk_attended_first:.2f`, against {glue:text}`manifolds.qk_visible_first:.2f` averaged over the
# visible keys), which are the revealed values. The later layers attend broadly, close to uniform, with a smaller
# query–key gap ({glue:text}`manifolds.qk_attended_last:.2f` against {glue:text}`manifolds.qk_visible_last:.2f` in the
# last layer). In this {glue:text}`manifolds.bij_n_layers`-layer model, attention does not sharpen with depth; it
# does its work at the bottom. Untrained, every layer attends almost uniformly (a change of
# {glue:text}`geometry.attention_entropy_reduction_untrained:.2f` from first to last layer); on scrambled values the
# trained model gives {glue:text}`geometry.attention_entropy_reduction_scrambled:.2f`, about what it gives on real
# sequences: how broadly each layer attends is set by position and token type, not by what there is to eliminate.
#
# **Through training.** {numref}`fig-manifold-geometry-training` follows four of these numbers at every checkpoint of
# the run (step 0 is the untrained model; dashed: the scrambled-values control; shaded: the last 20 % of training). The
# book calls a metric *plateaued* when it moves by less than {glue:text}`manifolds.plateau_keys_all` ($|\cos|$) or
# {glue:text}`manifolds.plateau_reduction` (the entropy reduction) over that band. The layer-0 key $|\cos|$ moves by
# {glue:text}`manifolds.late_change_keys_all:.3f` there (key tokens: {glue:text}`manifolds.late_change_keys_key:.3f`) and
# the entropy reduction by {glue:text}`manifolds.late_change_reduction:.3f`. The learning rate decays to zero along a
# cosine, so a plateau on its own says only that this schedule is spent; what makes the two fails findings at this
# model size rather than under-training is that both numbers ended *further* from Paper I's values than they started —
# the keys left their near-isotropic initial level, and the later layers' attention entropy rose above the first's.
# Whether a deeper model trained for Paper I's 100,000 steps builds the geometry is what `--scale paper` is for.
#
# **The value manifold.** In this run PC1 of the last layer's value mixtures carries
# {glue:text}`manifolds.value_pc1_ratio_this_seed:.2f` of the variance (PC2 {glue:text}`manifolds.value_pc2_ratio:.2f`) and
# its Spearman correlation with the Bayes entropy is {glue:text}`manifolds.value_pc1_spearman_this_seed:.3f`. One seed
# does not settle Paper I's "> 80 %": the same model trained with {glue:text}`manifolds.spread_n_seeds` seeds
# (`compute bijection_seed_spread`, results stored with their settings) puts PC1's share anywhere from
# {glue:text}`manifolds.value_pc1_ratio_seed_min:.2f` to {glue:text}`manifolds.value_pc1_ratio_seed_max:.2f`. The mean
# is {glue:text}`geometry.value_pc1_ratio:.3f` with a 95 % interval from {glue:text}`manifolds.value_pc1_ratio_low:.3f` to
# {glue:text}`manifolds.value_pc1_ratio_high:.3f`, which reaches both sides of 80 %: **not decided at this scale**. The rank
# correlation is steadier: {glue:text}`geometry.value_pc1_entropy_spearman:.3f` on average, with an interval from
# {glue:text}`manifolds.value_pc1_spearman_low:.3f` to {glue:text}`manifolds.value_pc1_spearman_high:.3f`, just clear of the
# book's bound of 0.9. The table
# gives the same two numbers for every candidate representation, so the choice can be judged. One caution applies
# to every one of them: in bijection elimination the posterior entropy $\log_2(V - t)$ is a function of the
# *position* alone, so any representation that carries position — a positional embedding, or an average over
# the $2t + 1$ tokens a query sees — is "ordered by entropy" without computing anything. The nulls measure how much
# of the ordering is that. For this seed (trained: PC1 share {glue:text}`manifolds.value_pc1_ratio_this_seed:.2f`,
# $\rho =$ {glue:text}`manifolds.value_pc1_spearman_this_seed:.2f`) the untrained model gives
# {glue:text}`geometry.value_pc1_ratio_this_seed_untrained:.2f` and $\rho =$
# {glue:text}`geometry.value_pc1_entropy_spearman_this_seed_untrained:.2f`, and the trained model on scrambled values,
# where there is no bijection to eliminate, {glue:text}`geometry.value_pc1_ratio_this_seed_scrambled:.2f` and
# $\rho =$ {glue:text}`geometry.value_pc1_entropy_spearman_this_seed_scrambled:.2f`. Untrained, the attention output is already partly ordered by entropy — an average over the $2t + 1$ tokens a query sees carries position — though PC1 holds little of the variance; and on scrambled values the trained model keeps almost all of its ordering and most of its PC1 share. What training adds is the concentration on one direction, and that direction is ordered by position whether or not there is a bijection to eliminate: the ordering is no evidence that the model computes the posterior. The HMM, whose
# posterior entropy varies from sequence to sequence at a fixed step, separates the two
# ({numref}`fig-manifold-value-manifolds`):

# %% tags=["trained-output", "hide-input", "remove-output"]
hmm_geo = report.glue_hmm_manifold(cfg, hmm_model, seed=seed)
plotting.glue_figure("fig-manifold-value-manifolds", figures.plot_value_manifolds(geo, hmm_geo))

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-value-manifolds
# :name: fig-manifold-value-manifolds
# :alt: Two scatter plots of the last layer's attention output projected on its first two principal components, PC1 across and PC2 up, left for the bijection transformer and right for the HMM transformer, every point coloured by its exact posterior entropy in bits on a viridis scale.
#
# The value manifold: the last layer's attention output at the prediction positions of held-out sequences,
# projected on its first two principal components, for the bijection transformer (left) and the HMM transformer
# (right). The colour of each point is the exact posterior's entropy there.
# ```

# %% tags=["trained-output", "hide-input"]
report.manifold_frame(hmm_geo.manifold_table)

# %% tags=["trained-output", "hide-input"]
# What the leading directions encode: cross-validated regressions of the first two PCs
hmm_probe = wind_tunnels.hmm_batch_for_eval(cfg.hmm, cfg.hmm.length, seed=seed, n=cfg.n_probe)
manifold_reg = mechanism_report.record_manifold_regression(
    "hmm",
    hmm_model,
    hmm_probe,
    params=report.hmm_params(cfg, seed=seed),
    model_text="chapter 6's HMM transformer",
)
manifold_reg_untrained = mechanism_controls.manifold_regression(hmm_run.model(0), hmm_probe)
claims.glue("manifolds.hmm_pc_r2_matrices_untrained", manifold_reg_untrained["matrices"])
pd.DataFrame({"trained": manifold_reg["result"], "untrained": manifold_reg_untrained}).round(3)

# %% [markdown] tags=[]
# In the HMM transformer nothing of the kind appears: PC1 of the last layer's value mixtures carries
# {glue:text}`manifolds.hmm_pc1_ratio:.2f` of the variance and its rank correlation with the exact posterior entropy is
# {glue:text}`manifolds.hmm_pc1_spearman:.3f` over all steps and {glue:text}`manifolds.hmm_pc1_within_spearman:.3f` within
# a step; across every representation in the table the largest $|\rho|$ is
# {glue:text}`manifolds.hmm_max_abs_spearman:.3f`. What do the dominant directions encode instead? Regressing the first
# two principal components on candidate explanations (linear, 5-fold cross-validated by sequence;
# {func}`~attention_dynamics.diagnostics.mechanism_controls.manifold_regression`): the sequence's own matrices predict
# {glue:text}`hmm.manifold_pc_r2_matrices:.2f` of their variance, the exact posterior
# {glue:text}`hmm.manifold_pc_r2_posterior:.2f`, the current observation and the step
# {glue:text}`hmm.manifold_pc_r2_observation_step:.2f`, and another sequence's matrices, the null,
# {glue:text}`hmm.manifold_pc_r2_matrices_shuffled:.2f` (table above). Untrained, the same model's leading directions
# are its inputs passed through: the matrices explain {glue:text}`manifolds.hmm_pc_r2_matrices_untrained:.2f` of them.
# So at CPU scale the "entropy-ordered
# manifold" is a property of the bijection task, where entropy and position coincide, rather than a general
# signature of the computed posterior. That does not contradict Paper I, whose models are larger and whose
# manifold figures are for the bijection, but it says what the bijection picture can and cannot show.

# %% [markdown] tags=[]
# ## Frame and precision through training
#
# Paper II's two-timescale picture (chapter 4) predicts that routing — the *frame* set by queries and keys —
# settles early, while values, and with them the precision of the posterior, keep refining; Paper I describes
# the same thing in training ("the manifold unfurls while attention patterns remain stable"). The bijection run
# kept {glue:text}`manifolds.n_checkpoints` checkpoints, log-spaced early and evenly spaced late. At each,
# on the probe sequences, `diagnostics.wind_tunnel_geometry.frame_and_calibration` measures how similar every layer's attention rows at the
# prediction positions are to the final model's (one minus the mean total-variation distance: 0.95 means that 5 % of
# the attention mass is routed differently) and the calibration error against the exact posterior.
#
# When has a trajectory *settled*? The book uses two rules and reports both. The **frame** is in place from the first
# checkpoint after which every layer's similarity to the final attention stays at or above 0.95. The **precision**
# has settled from the first checkpoint after which the entropy error stays within 10 % of its total change from its
# final value, measured on a log scale because it falls by orders of magnitude (`settling.settle_step`). Applying that
# relative rule to the attention as well is misleading here: the later layers start out *almost uniform* and end
# almost uniform (their similarity to the final pattern is already {glue:text}`manifolds.min_similarity_at_init:.2f` or
# more at initialisation), so a 10 % band of a
# small total change is a tolerance of well under 1 % of the attention mass, which the slow drift of the last
# thousand steps exceeds.

# %% tags=["trained-output", "hide-input", "remove-output"]
fp = report.record_frame_and_calibration(cfg, bij_run, probe, seed=seed)
# the one-seed order is worded by the calibration claim's status, so the sentence follows the ledger
claims.glue(
    "ch6.one_seed_order_phrase",
    verdicts.render_caveat(
        "{frame_precision.calibration_settle_step"
        "?the routing is in place before the calibration settles"
        "|the calibration settles no later than the routing|the order is not decided}",
        {c.id: c.to_json() for c in claims.recorded_claims()},
    ),
)
plotting.glue_figure("fig-manifold-frame-precision", figures.plot_frame_and_calibration(fp))

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-frame-precision
# :name: fig-manifold-frame-precision
# :alt: Line plot against the training step on a log axis: each layer's attention similarity to the final model on the left axis with a dashed threshold line, the per-sample entropy error in black squares on a log right axis, a dotted vertical line where the frame settles and a dash-dotted one where the calibration settles.
#
# Frame and precision through the bijection run. Left axis: every layer's attention similarity to the final model
# (one minus the total-variation distance), with the frame threshold (dashed) and the step from which the frame
# stays above it (dotted). Right axis: the per-sample entropy error, with the step from which it stays within its
# settling band (dash-dotted).
# ```

# %% [markdown] tags=[]
# Every layer's attention is within 5 % of its final routing from step {glue:text}`frame_precision.frame_settle_step`
# on (dotted line in {numref}`fig-manifold-frame-precision`). The entropy error is then still {glue:text}`manifolds.mae_at_frame_settle:.4f` bits and falls another
# {glue:text}`manifolds.mae_improvement_after_frame:.1f`-fold, to {glue:text}`manifolds.mae_final:.4f` bits, settling only at
# step {glue:text}`frame_precision.calibration_settle_step` (dash-dotted line). By these rules, on this
# seed, {glue:text}`ch6.one_seed_order_phrase`. Three cautions. With the relative
# rule for the attention too, the frame would settle only at step {glue:text}`manifolds.frame_settle_relative`, for the
# reason given above. On a *linear* scale the calibration error has done 90 % of its fall by step
# {glue:text}`manifolds.calibration_settle_linear`, before the frame is in place, so the dissociation concerns the last
# orders of magnitude of precision — which is what "calibration keeps improving" means. And the learning rate decays to
# zero along a cosine, which by itself makes late changes small. Paper I's timescales (a few hundred steps against tens
# of thousands) come from runs some fifty times longer than this one.
#
# The value manifold itself, projected at four checkpoints on the final model's two principal directions
# ({numref}`fig-manifold-through-training`), shows that
# the early phase builds it and the precision phase refines it while the routing holds still (the rank correlation of
# PC1 with the entropy is {glue:text}`manifolds.rho_at_frame_settle:.2f` when the frame settles and
# {glue:text}`manifolds.rho_final:.2f` at the end).

# %% tags=["hide-input", "trained-output", "remove-output"]
plotting.glue_figure("fig-manifold-through-training", figures.plot_manifold_through_training(fp))

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-through-training
# :name: fig-manifold-through-training
# :alt: Four scatter plots in a two-by-two grid, one per checkpoint of the bijection run from the untrained model to the end of training, each showing the last layer's attention output on the final model's first two principal directions, points coloured by posterior entropy, with the step and the rank correlation of PC1 with entropy in each title.
#
# The value manifold of the bijection transformer at four checkpoints: the untrained model, half the frame's settling
# step, that step and the end of training. Every panel projects on the final model's two principal directions; the colour is
# the posterior entropy, and each title gives the rank correlation $\rho$ of PC1 with it.
# ```

# %% [markdown] tags=[]
# ### Six seeds, three definitions
#
# The rules above are one reading, on one seed. The same model was trained on {glue:text}`ch6.fd_n_seeds` seeds (its
# book settings: AdamW with warm-up and cosine decay, 2000 steps), with 200 checkpoints, and the order is decided
# under three definitions, each by the share of seeds whose frame settles first with its 95% Clopper–Pearson
# interval (six agreeing seeds decide it; five could not):
#
# - **this chapter's rules** (above): every layer within 5% of its final attention for good, against the entropy
#   error within 10% of its total change on a log scale;
# - **parameter path**: the first step from which at most 10% of the whole path is still to go, every layer's
#   attention rows at the key positions against every layer's value vectors (chapter 4's criterion);
# - **function**: the mean attention entropy at the key positions (linear scale) against the KL divergence from the
#   exact posterior (log scale), each within 10% of its total change from its final value.
#
# The freeze intervention of chapter 4 (stored runs at a quarter of this budget) is re-read as a fourth: freezing
# every layer's $W_Q$, $W_K$ at initialisation costs {glue:text}`ch6.fd_freeze_cost_bits:.4f` bits against a margin
# of {glue:text}`ch6.fd_freeze_margin_bits:.4f`, and the intervention {glue:text}`ch6.fd_intervention_phrase`. The
# runs are computed once (`python -m attention_dynamics compute bijection_frame_definitions`), stored in
# `attention_dynamics/data/bijection_frame_definitions.json` and loaded here; a test regenerates a reduced version
# through the same code.

# %% tags=["hide-input"]
tunnel = frame_definitions.BIJECTION_FRAME_DEFINITIONS.load()  # computed once; see the text above
tunnel_claims = frame_definitions_report.record_tunnel_order_claims(tunnel, load_frame_freeze())
# with the claims at hand it also glues the intervention's phrase, chosen by that claim's status
frame_definitions_report.glue_tunnel_frame_definitions(tunnel, claims.recorded_claims())
tunnel_row = verdicts.verdict_of("frame_precision_wind_tunnel", claims.recorded_claims())
claims.glue("ch6.frame_row_verdict", tunnel_row.verdict)
claims.glue("ch6.frame_row_readings", tunnel_row.readings_text())
{k: (round(c.value, 2), c.status) for k, c in tunnel_claims.items()}

# %% [markdown] tags=[]
# By this chapter's rules the frame settles first on
# {glue:text}`frame_precision.tunnel_order_similarity_adam:.0%` of the seeds (95% interval
# {glue:text}`ch6.fd_similarity_low:.0%`–{glue:text}`ch6.fd_similarity_high:.0%`; median steps
# {glue:text}`ch6.fd_similarity_frame_median:.0f` and {glue:text}`ch6.fd_similarity_precision_median:.0f`), by the
# parameter path on {glue:text}`frame_precision.tunnel_order_path_adam:.0%`
# ({glue:text}`ch6.fd_path_frame_median:.0f` against {glue:text}`ch6.fd_path_precision_median:.0f`), by the function
# on {glue:text}`frame_precision.tunnel_order_function_adam:.0%` ({glue:text}`ch6.fd_function_frame_median:.0f`
# against {glue:text}`ch6.fd_function_precision_median:.0f`). The verdict on Paper I's "attention patterns in place
# early while calibration keeps improving" is **{glue:text}`ch6.frame_row_verdict`**:
# {glue:text}`ch6.frame_row_readings`. The learning rate decays to zero along a cosine, which by itself makes late
# changes small for every quantity; a statement about what settles first is a statement about this schedule.
#
# A later frame study by Dalal, Misra and Parekh {cite}`dalal2026workspace`, on Paper I's $V = 20$ model trained for tens of
# thousands of steps, reads the frame as a subspace of the embedding and first block: it crosses three times its
# null level at about step 400 and plateaus by about 2,500 while the entropy error improves another 40-fold, and
# freezing the embeddings with $W_Q$, $W_K$ at 2,500 costs almost nothing (0.0029 against 0.0022 bits). Their
# intervention is read at a point where the frame has formed; chapter 4's, at a quarter of this chapter's CPU budget,
# is read against a frame frozen at initialisation (above).

# %% [markdown] tags=[]
# ## The long tier
#
# The runs above fit the chapter's eight minutes on two cores. Two more do not, so they were trained once, on one CPU
# core each, by `python -m attention_dynamics compute long_tier`, and their weights are stored in the
# package (`data/long_tier/`, state dicts loaded with `torch.load(..., weights_only=True)`):
#
# - **`bijection_v20`**: bijection elimination at Paper I's size, $V =$ 20 values and $L =$ 19 revealed pairs, with the
#   book's bijection model widened to $d =$ 96 and 4 heads, trained for {glue:text}`long_tier.bijection_v20_steps` steps
#   ({glue:text}`long_tier.bijection_v20_cpu_minutes:.0f` CPU-minutes);
# - **`hmm_long`**: HMM filtering on Paper I's random HMMs, as above, with the book's HMM model made twice as deep
#   (4 layers) and trained for {glue:text}`long_tier.hmm_long_steps` steps, six times the book scale
#   ({glue:text}`long_tier.hmm_long_cpu_minutes:.0f` CPU-minutes).
#
# Nothing is retrained here. The cell below loads the two models; everything after it is measured in this chapter on
# the loaded weights, on held-out sequences drawn here. A run saves its whole state every few thousand steps and
# continues from it when started again (a test checks that a run that stopped and resumed ends with the same weights,
# bit for bit, as one that did not), and at every save it measured itself on held-out sequences: those stored curves
# are the evidence, below, of whether a run had stopped moving. A test regenerates both runs at a reduced size through
# the same code and checks that the committed weights give the measurements stored with them.

# %% tags=[]
long_runs = long_tier_report.load_runs()  # stored weights, loaded with weights_only=True
long_tier_report.runs_table(long_runs)

# %% [markdown] tags=[]
# {numref}`fig-manifold-long-tier` follows both runs along training, from the measurements they stored; the text's
# numbers are measured on the loaded models on fresh held-out sequences (2,000 per length).
#
# **The bijection at Paper I's size.** The loaded model's per-sample entropy error is
# {glue:text}`bijection_v20.entropy_mae_bits:.5f` bits, against the target of 0.01 bits and Paper I's 0.007; the
# context-blind predictor (uniform over the values) is {glue:text}`bijection_v20.context_blind_entropy_mae_bits:.3f`
# bits off, the closed form at $V = 20$, $L = 19$, so the model removes all but
# {glue:text}`long_tier.bij_mae_fraction_of_blind:.5f` of that error. Its KL to the exact posterior is
# {glue:text}`bijection_v20.kl_bits:.6f` bits. Over the last 20 % of the run the entropy error moved by
# {glue:text}`long_tier.bij_late_change:.5f` bits (the plateau amount is {glue:text}`long_tier.bij_mae_plateau`), and
# it was already {glue:text}`long_tier.bij_mae_at_3000:.4f` bits at step 3,000. It goes below Paper I's number with
# a far smaller model and budget. One difference in setup is that it is trained on the exact posterior as a soft
# target, where Paper I trains on the sampled value (same minimiser, no sampling noise; see the start of the chapter);
# no run here trains on sampled values at this size, so that is a likely reason, not a measured one.
#
# **HMM filtering, longer and deeper.** At the training length the loaded HMM model's KL to the exact filter is
# {glue:text}`hmm_long.kl_bits:.5f` bits, {glue:text}`long_tier.hmm_ratio_20:.3f` times the context-blind level
# ({glue:text}`long_tier.hmm_blind_kl_20:.4f` bits; the long tier's bound is
# {glue:text}`long_tier.hmm_transport_fraction` times it). Tested at lengths it never saw, it stays as far below that
# level: {glue:text}`long_tier.hmm_ratio_30:.3f` times it at $K = 30$ ({glue:text}`hmm_long.length_gen_kl_bits_30:.5f`
# bits) and {glue:text}`long_tier.hmm_ratio_50:.3f` times at $K = 50$ ({glue:text}`hmm_long.length_gen_kl_bits_50:.5f`
# bits), against a bound of {glue:text}`long_tier.hmm_length_gen_fraction` times. Its per-sample entropy error is
# {glue:text}`hmm_long.entropy_mae_bits:.4f` bits, below Paper I's 0.049 and below the 0.05-bit bound that the
# book-scale run above missed ({glue:text}`hmm.entropy_mae_bits:.4f`, *not decided* there): a transformer can meet
# it on this task, so that miss is a matter of the book scale's size and training, not a finding. This model carries the belief forward far better than the book-scale one
# ({glue:text}`manifolds.hmm_kl_ratio_train:.2f` times the level); it is both deeper and trained six times as long,
# and these two runs do not separate which of the two matters. Over the last 20 % of training its KL ratio moved by
# {glue:text}`long_tier.hmm_late_change_20:.4f` at $K = 20$ (the plateau amount is
# {glue:text}`long_tier.ratio_plateau`).

# %% tags=["trained-output", "hide-input", "remove-output"]
bij_v20 = long_tier_report.record_bijection_v20(long_runs["bijection_v20"])
hmm_long = long_tier_report.record_hmm_long(long_runs["hmm_long"])
plotting.glue_figure(
    "fig-manifold-long-tier",
    figures.plot_long_curves(long_runs["bijection_v20"], long_runs["hmm_long"]),
)

# %% [markdown] tags=[]
# ```{glue:figure} fig-manifold-long-tier
# :name: fig-manifold-long-tier
# :alt: Two line plots against the training step of the long tier. Top: the V = 20 bijection model's entropy error in bits on a log scale, with a dotted target line and a dashed line at Paper I's value. Bottom: the long HMM model's KL over the context-blind level on a log scale, one line per test length, with lines at the context-blind level, the chapter's transport bound and the long tier's bound. The end of training is shaded in both.
#
# The two long-tier runs along training, from the held-out measurements they stored. Top: the bijection model's
# entropy error at Paper I's size, with the book's target (dotted) and Paper I's value (dashed). Bottom: the HMM
# model's KL as a multiple of the context-blind level at each test length, with the level (dashed), the chapter's
# transport bound (dash-dotted) and the long tier's bound (dotted); shaded: the end of training, where a plateau is
# judged.
# ```

# %% [markdown] tags=[]
# **The geometry at $V = 20$.** The same measurements as in the geometry section, on the loaded $V = 20$ model, with
# the untrained model of the same seed and size (rebuilt from the seed: the run's step 0) and the scrambled-values
# control beside every number (first table); the second table does the same for the long HMM model's value manifold.

# %% tags=["trained-output", "hide-input"]
long_geo = long_tier_report.record_long_geometry(long_runs["bijection_v20"], long_runs["hmm_long"])
long_geo.bijection_table()

# %% tags=["trained-output", "hide-input"]
long_geo.hmm_table()

# %% [markdown] tags=[]
# What the larger task changes, and what it does not:
#
# - **The value manifold is one-dimensional at $V = 20$.** PC1 carries {glue:text}`geometry_v20.value_pc1_ratio:.2f`
#   of the variance (Paper I: more than 80 %; untrained {glue:text}`long_tier.geo_value_pc1_share_untrained:.2f`), and
#   it is ordered by the posterior entropy ($\rho =$ {glue:text}`geometry_v20.value_pc1_entropy_spearman:.3f`). This is
#   Paper I's picture, which the smaller book-scale model does not decide. But the nulls say what it is made of: on
#   scrambled sequences, where there is no bijection left to eliminate, the same trained model gives a PC1 share of
#   {glue:text}`long_tier.geo_value_pc1_share_scrambled:.2f` and $\rho =$
#   {glue:text}`long_tier.geo_rho_value_pc1_entropy_scrambled:.3f`. In this task the entropy is a function of the
#   position, so a manifold ordered by entropy is also one ordered by position: this measure cannot tell an entropy
#   computation from a layout by step, and the control shows that most of the ordering is there with no bijection to
#   eliminate.
# - **The keys are not orthogonal.** The layer-0 keys of the key tokens have a mean $|\cos|$ of
#   {glue:text}`geometry_v20.key_abs_cos_layer0_key_tokens:.3f` (Paper I: below 0.1; untrained
#   {glue:text}`long_tier.geo_key_cos_layer_0_key_tokens_untrained:.3f`): as at the book scale, training makes them
#   nearly coincide, so layer 0 routes by token type, not by hypothesis. Over the last 20 % of the run this number
#   moved by {glue:text}`long_tier.geo_key_cos_layer_0_key_tokens_late:.4f` (the plateau amount is 0.02): it has
#   plateaued, further from Paper I's value than the untrained model, so at this size it is a finding.
# - **Attention entropy barely falls with depth**: by {glue:text}`geometry_v20.attention_entropy_reduction:.3f` of its
#   first-layer value (Paper I: 85–90 %; scrambled {glue:text}`long_tier.geo_attention_entropy_reduction_first_last_layer_scrambled:.3f`),
#   having moved by {glue:text}`long_tier.geo_attention_entropy_reduction_first_last_layer_late:.3f` over the last
#   20 % of the run (plateau amount 0.05). The sharpest attention is in the second layer
#   ({glue:text}`long_tier.geo_attention_entropy_layer_1_bits:.2f` bits, against
#   {glue:text}`long_tier.geo_attention_entropy_layer_0_bits:.2f` in the first and
#   {glue:text}`long_tier.geo_attention_entropy_layer_3_bits:.2f` in the last; untrained
#   {glue:text}`long_tier.geo_attention_entropy_layer_0_bits_untrained:.2f` everywhere).
# - **The HMM model shows no entropy-ordered manifold**, long as it trained: PC1 of its last layer's attention output
#   carries {glue:text}`long_tier.hmm_pc1_ratio_trained:.2f` of the variance and correlates with the posterior entropy
#   at $\rho =$ {glue:text}`long_tier.hmm_pc1_spearman_trained:.2f` ({glue:text}`long_tier.hmm_pc1_within_trained:.2f`
#   within a step; untrained {glue:text}`long_tier.hmm_pc1_spearman_untrained:.2f`), although its beliefs are the
#   exact filter's to within a twentieth of the context-blind error: here a well-calibrated filter comes without an
#   entropy-ordered manifold in this representation.

# %% tags=["trained-output", "hide-input"]
# The long tier: memory ladder, Paper I's key metric, layer ablation, manifold regression
long_ladders = memory_report.long_tier_ladders(
    long_runs["hmm_long"], chapter_batches=eval_hmm, chapter_ladders=ladders
)  # the chapter's own ladders where the long tier is measured on the same sequences
memory_long = memory_report.record_chapter6_memory(
    long_ladders,
    {K: r.kl_bits for K, r in hmm_long.reports.items()},
    model="long_tier",
    params={"source": "data/long_tier/hmm_long.pt"},
    ratio_late_change=hmm_long.late_change,
)
bij20, h_long = long_runs["bijection_v20"], long_runs["hmm_long"]
v20_params = {"stored_in": "data/long_tier/bijection_v20.pt"}
v20_text = "the long tier's V = 20 bijection model"
v20_keys = mechanism_report.record_paper_key_metric(
    "geometry_v20",
    bij20.run.model(),
    bij20.run.model(0),
    bij20.settings.tunnel.V,
    params=v20_params,
    model_text=v20_text,
)
v20_eval = wind_tunnels.bijection_batch_for_eval(
    bij20.settings.tunnel, seed=0, n=bij20.settings.n_eval
)
v20_ablation = mechanism_report.record_layer_ablation(
    "geometry_v20", bij20.run.model(), v20_eval, params=v20_params, model_text=v20_text
)
claims.glue("manifolds.v20_ablation_lost_later_max", max(v20_ablation["lost_fraction"][1:]))
long_reg = mechanism_report.record_manifold_regression(
    "hmm_long",
    h_long.run.model(),
    wind_tunnels.hmm_batch_for_eval(
        h_long.settings.tunnel, h_long.settings.tunnel.length, seed=0, n=h_long.settings.n_probe
    ),
    params={"stored_in": "data/long_tier/hmm_long.pt"},
    model_text="the long tier's HMM model",
)
{k: (c.value, c.status) for k, c in memory_long.items()}

# %% [markdown] tags=[]
# **The long tier against short memories.** On the ladder of its held-out sequences, the long HMM model's KL is a
# memory of {glue:text}`hmm_long.memory_steps` steps at the training length, {glue:text}`hmm_long.memory_steps_len30`
# at $K = 30$ and {glue:text}`hmm_long.memory_steps_len50` at $K = 50$, where the rule asks for more than
# {glue:text}`manifolds.ladder_train_rule_window`. Its KL ratio had stopped moving (above), so this is a plateau: six
# times the training and twice the depth buy at most a step more of memory, not transport beyond a short look-back.
# On Paper I's random HMMs, where a 3-step window is within 2 % of the filter, that is all the transport the tunnel can
# show; chapter 7's long-memory tunnel is where a longer memory is worth something.
#
# **Paper I's key metric and the layer ablation at $V = 20$.** Paper I's signed cosine of the value tokens' embedding
# keys is {glue:text}`geometry_v20.key_signed_cos_value_tokens:.3f` trained and
# {glue:text}`geometry_v20.key_signed_cos_value_tokens_untrained:.3f` untrained:
# {glue:text}`manifolds.geometry_v20_paper_key_reading`. Ablating layer 0's attention raises the KL to
# {glue:text}`geometry_v20.layer_ablation_kl_bits_layer0:.2f` bits (the context-blind level is
# {glue:text}`bijection_v20.context_blind_entropy_mae_bits:.2f` bits of entropy error); ablating a later layer loses at
# most {glue:text}`manifolds.v20_ablation_lost_later_max:.2%` of the gain over a context-blind predictor.
#
# **What the long HMM model's leading directions encode.** Its own matrices predict
# {glue:text}`hmm_long.manifold_pc_r2_matrices:.2f` of the variance of its first two principal components, the exact
# posterior {glue:text}`hmm_long.manifold_pc_r2_posterior:.2f`, the observation and step
# {glue:text}`hmm_long.manifold_pc_r2_observation_step:.2f`, another sequence's matrices
# {glue:text}`hmm_long.manifold_pc_r2_matrices_shuffled:.2f`.

# %% [markdown] tags=[]
# ## What reproduces
#
# - **The wind tunnels.** The exact posteriors agree with brute-force enumeration and with `hmmlearn` (unit tests);
#   the closed-form reference levels are recorded above.
# - **Calibration at CPU scale.** The bijection transformer's per-sample entropy error is
#   {glue:text}`bijection.entropy_mae_bits:.4f` bits (target 0.01); the HMM transformer's KL is
#   {glue:text}`hmm.kl_bits:.4f` bits at the training length and {glue:text}`hmm.length_gen_kl_bits:.4f` bits at 2.5
#   times that length — {glue:text}`manifolds.hmm_kl_ratio_train:.2f` and {glue:text}`manifolds.hmm_kl_ratio_long:.2f`
#   times the level of a predictor with no memory ({glue:text}`hmm.context_blind_kl_bits:.4f` and
#   {glue:text}`hmm.context_blind_kl_bits_long:.4f` bits). The model **uses the past**, also at lengths never
#   trained on (more weakly at 2.5 times the training length); against the memory ladder it matches a
#   {glue:text}`hmm.memory_steps_transformer`-step look-back, so transport beyond a short memory is not shown. The HMM's *per-sample* entropy error, {glue:text}`hmm.entropy_mae_bits:.4f` bits,
#   is above Paper I's 0.049; its curve error is below it.
# - **The long tier** (trained once, loaded and measured here). At Paper I's bijection size, $V = 20$, the entropy
#   error is {glue:text}`bijection_v20.entropy_mae_bits:.5f` bits, below Paper I's 0.007. A deeper HMM model trained six
#   times as long reaches {glue:text}`long_tier.hmm_ratio_20:.3f` times the context-blind level, stays there at 30 and 50
#   steps, and has a per-sample entropy error of {glue:text}`hmm_long.entropy_mae_bits:.4f` bits, below Paper I's 0.049:
#   calibration and its length generalisation reproduce at a larger budget, with a memory of
#   {glue:text}`hmm_long.memory_steps` steps on the memory ladder.
# - **Frame and precision**: by this chapter's rules on one seed the routing is in place by step
#   {glue:text}`frame_precision.frame_settle_step` and the calibration settles at
#   {glue:text}`frame_precision.calibration_settle_step`; over {glue:text}`ch6.fd_n_seeds` seeds and three
#   definitions the verdict is {glue:text}`ch6.frame_row_verdict` ({glue:text}`ch6.frame_row_readings`).
# - **Paper I's geometry mostly does not, and the nulls explain what there is.** The layer-0 keys are not
#   near-orthogonal ({glue:text}`geometry.key_abs_cos_layer0:.2f` over all positions,
#   {glue:text}`geometry.key_abs_cos_layer0_key_tokens:.2f` over the key tokens, against < 0.1; untrained
#   {glue:text}`geometry.key_abs_cos_layer0_untrained:.2f`): training makes them less orthogonal, grouped by token type.
#   Attention entropy rises with depth instead of falling ({glue:text}`geometry.attention_entropy_reduction:.2f`;
#   untrained {glue:text}`geometry.attention_entropy_reduction_untrained:.2f`). Both have plateaued and ended further
#   from Paper I's values than they started, so at this model size they are findings rather than a budget limit. Whether PC1 of the value manifold carries more than 80 % of the variance is not decided at this scale (mean
#   {glue:text}`geometry.value_pc1_ratio:.2f` over {glue:text}`manifolds.spread_n_seeds` seeds, 95 % interval
#   {glue:text}`manifolds.value_pc1_ratio_low:.2f`–{glue:text}`manifolds.value_pc1_ratio_high:.2f`). It is
#   ordered by entropy ({glue:text}`geometry.value_pc1_entropy_spearman:.2f`), but the trained model orders scrambled
#   sequences, where there is nothing to eliminate, almost as well ({glue:text}`geometry.value_pc1_entropy_spearman_this_seed_scrambled:.2f`
#   for seed 0), and the HMM model, where entropy and position do not coincide, shows no such ordering. At $V = 20$ (the long tier) PC1 does carry
#   {glue:text}`geometry_v20.value_pc1_ratio:.2f` of the variance, ordered by entropy, but scrambled sequences give
#   nearly the same, and the keys and attention entropy still miss Paper I's values. These are small models trained for minutes;
#   whether the geometry emerges at Paper I's depth and training length is what `--scale paper` is for.
#
# Other chapters (chapter 8's diagnostics among them) can load this chapter's bijection model with
# `training.wind_tunnels.trained_bijection_transformer(BIJECTION_TUNNELS["book"], seed=0)`, which retrains it deterministically.
