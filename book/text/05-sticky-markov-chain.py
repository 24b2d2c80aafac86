# %% tags=["colab-install", "remove-cell"]
# On Google Colab, install the book's package first (anywhere else this cell does nothing).
import sys

if "google.colab" in sys.modules:
    # %pip install --quiet "attention-dynamics @ git+https://github.com/attention-dynamics/gradient-dynamics-book@e0f39a0c9f4c94f13686cb3d210249afffce0807"

# %% [markdown] tags=[]
# # The sticky Markov chain: EM-style updates vs SGD
#
# The paper's one named experiment {cite}`agarwal2025gradient` trains a single attention head on a
# "sticky" Markov chain twice from the same starting point: once with plain SGD, once with an "EM-like"
# schedule that takes a ten times larger step on the values. The EM-like run reaches SGD's final loss
# after about 430 of SGD's 1000 steps — a speed-up of 2.3×. The paper reads this as support for its
# two-timescale picture: attention weights act as responsibilities (an E-step), values as prototypes
# updated by responsibility-weighted errors (an M-step), and a faster M-step should converge faster.
#
# This chapter first reproduces the experiment exactly, seed for seed. Then it does what the paper does
# not: it checks whether the speed-up is about *EM* or only about a *larger step*, replaces the
# larger step by a genuine closed-form M-step, puts confidence intervals on the speed-up with twenty
# seeds, raises each group of weights' learning rate alone to see which one makes the schedule fast,
# trains long enough to see how close each schedule gets to the Bayes floor, repeats the protocol on the
# chain the paper's words describe, and looks at the value trajectories and at the deeper model of the
# authors' script. All training runs use a closed-form engine built from the gradient laws of
# the earlier chapters, several times faster than automatic differentiation.

# %% tags=["parameters"]
# Parameters (papermill): the defaults are what the book shows.
seed = 0
scale = "book"
device = "auto"
steps = None  # training steps of the paper's protocol (None: as the scale says)

# %% tags=["hide-input"]
import math
import warnings

warnings.filterwarnings(
    "ignore", message="IProgress not found"
)  # tqdm's notice when ipywidgets is absent

import numpy as np
import torch

from attention_dynamics import claims, plotting
from attention_dynamics.experiments import lr_surface
from attention_dynamics.experiments import em_vs_sgd as sticky
from attention_dynamics.experiments.results import load_results, save_results
from attention_dynamics.training.head_engine import (
    SingleHeadModule,
    autograd_head_loss,
    closed_form_head_pass,
)
from attention_dynamics.paths import data_path
from attention_dynamics.training.schedules import SCHEDULES
from attention_dynamics.seeding import seed_everything
from attention_dynamics.settings import chapter_settings
from attention_dynamics.tasks import sticky_chain

# "heavy": the 20-seed, long-run and deep results are computed ("compute") or read ("load")
SETTINGS = {
    "fast": {
        "seeds": (42, 2024),
        "steps": 40,
        "length": 300,
        "snapshot_every": 4,
        "monte_carlo_length": 20_000,
        "heavy": "load",
    },
    "book": {
        "seeds": sticky_chain.PAPER_SEEDS,
        "steps": 1000,
        "length": 2000,
        "snapshot_every": 10,
        "monte_carlo_length": 200_000,
        "heavy": "load",
    },
    "paper": {
        "seeds": sticky_chain.PAPER_SEEDS,
        "steps": 1000,
        "length": 2000,
        "snapshot_every": 10,
        "monte_carlo_length": 1_000_000,
        "heavy": "compute",
    },
}
cfg = chapter_settings(SETTINGS, scale, device=device, steps=steps)
generator = seed_everything(seed)
plotting.use_book_style()
cfg

# %% [markdown] tags=[]
# All training in this chapter runs on the CPU whatever `device` says: the head has 745 weights, and a
# step is a few dozen small matrix products that a GPU would not speed up.
#
# ## The task
#
# Eight symbols sit on a circle. From symbol $i$ the chain stays put with a self-transition probability
# and otherwise jumps to $j$ with a weight proportional to the inverse circular distance
# $d(i, j) = \min(|i - j|, 8 - |i - j|)$. The paper describes the chain with a self-transition
# probability of 0.3 and the remaining 0.7 spread in proportion to $1/d$:
#
# ```{math}
# :label: eq-sticky-nominal
# P^{\text{nominal}}_{ii} = 0.3, \qquad
# P^{\text{nominal}}_{ij} = 0.7 \, \frac{1/d(i, j)}{\sum_{k \ne i} 1/d(i, k)} \quad (j \ne i).
# ```
#
# The authors' script builds a different matrix. It writes 0.3 on the diagonal and $1/d$ off it,
# divides the *whole* row by its sum, multiplies by 0.7 and then adds 0.3 to the diagonal. The diagonal
# therefore also receives a share of the 0.7:
#
# ```{math}
# :label: eq-sticky-reference
# P^{\text{reference}}_{ii} = 0.3 + 0.7 \, \frac{0.3}{0.3 + \sum_{k \ne i} 1/d(i, k)}, \qquad
# P^{\text{reference}}_{ij} = 0.7 \, \frac{1/d(i, j)}{0.3 + \sum_{k \ne i} 1/d(i, k)} .
# ```
#
# The book uses the reference chain to reproduce the paper's numbers and runs the nominal one as a
# control. Both matrices are circulant (row $i$ is row 0 shifted by $i$), so every column also sums to one
# and the stationary distribution is uniform.

# %% tags=["hide-input"]
P = {kind: sticky_chain.transition_matrix(kind) for kind in sticky_chain.CHAIN_KINDS}
inverse_distance_sum = float(
    (1.0 / sticky_chain.circular_distance()[0, 1:]).sum()
)  # Σ_{k≠i} 1/d(i, k)
chain_params = {"n_symbols": sticky_chain.N_SYMBOLS, "self_prob": sticky_chain.SELF_PROB}
claims.record(
    "sticky.effective_self_prob_reference",
    sticky_chain.effective_self_prob(P["reference"]),
    unit="probability",
    params=chain_params,
    description="effective self-transition probability of the reference script's chain (nominal "
    "0.3)",
    expected=0.3 + 0.7 * 0.3 / (0.3 + inverse_distance_sum),
    tolerance=1e-12,
)
claims.glue("sticky.self_prob_nominal", sticky_chain.effective_self_prob(P["nominal"]))
claims.glue(
    "sticky.stationary_max_deviation",
    float(max(np.abs(sticky_chain.stationary_distribution(p) - 1 / 8).max() for p in P.values())),
)

fig, ax = plotting.new_figure(width=6.0, height=3.0)
width = 0.4
for offset, kind in ((-width / 2, "nominal"), (width / 2, "reference")):
    ax.bar(np.arange(8) + offset, P[kind][0].numpy(), width=width, label=f"{kind} chain")
ax.set_xticks(range(8))
ax.set_xlabel("next symbol j (from symbol i = 0)")
ax.set_ylabel("transition probability $P_{0j}$")
ax.set_title("Row 0 of the two transition matrices")
ax.legend()
plotting.plt.show()

# %% [markdown] tags=[]
# The reference chain stays put with probability
# {glue:text}`sticky.effective_self_prob_reference:.4f`, not 0.3 (the nominal chain's diagonal is
# {glue:text}`sticky.self_prob_nominal:.4f`). Both stationary distributions are uniform (largest
# deviation from 1/8: {glue:text}`sticky.stationary_max_deviation:.1e`).
#
# **Bayes floor.** The paper's floor is the mean row entropy of $P$,
# $H_{\min} = \frac{1}{8} \sum_i H(P_{i\cdot})$, the loss of a predictor that knows the previous symbol
# exactly. The script prints it with the label "bits", but it is computed with the natural logarithm: it
# is in **nats**, the unit of the cross-entropy it is compared with. The paper's mean is unweighted;
# the true entropy rate weights row $i$ by the stationary probability $\pi_i$,
# $H(Y_t \mid Y_{t-1}) = \sum_i \pi_i H(P_{i\cdot})$. For these two chains the stationary law is uniform
# and all rows have the same entropy, so the two definitions agree. As an independent check, the
# closed form is compared with the conditional entropy of a long simulated chain, estimated from its
# transition counts alone.

# %% tags=["hide-input"]
floors = {}
for kind in sticky_chain.CHAIN_KINDS:
    mc = sticky_chain.monte_carlo_entropy_rate(P[kind], cfg.monte_carlo_length, seed=seed)
    floors[kind] = claims.record(
        f"sticky.hmin_nats_{kind}",
        sticky_chain.bayes_floor_nats(P[kind]),
        unit="nats",
        description=f"H_min, mean row entropy of the {kind} chain, vs a Monte Carlo conditional "
        f"entropy",
        expected=mc["estimate"],
        tolerance=4 * mc["standard_error"],
        params={
            **chain_params,
            "chain": kind,
            "monte_carlo_length": cfg.monte_carlo_length,
            "seed": seed,
        },
    ).value
    claims.glue(f"sticky.hmin_mc_{kind}", mc["estimate"])
    claims.glue(f"sticky.hmin_mc_se_{kind}", mc["standard_error"])
    claims.glue(f"sticky.hmin_bits_{kind}", sticky_chain.bayes_floor_bits(P[kind]))
    claims.glue(f"sticky.entropy_rate_{kind}", sticky_chain.entropy_rate_nats(P[kind]))
hmin = floors["reference"]
claims.glue("sticky.ln8", math.log(8))
claims.glue("sticky.mc_length", cfg.monte_carlo_length)

# %% [markdown] tags=[]
# | | reference chain | nominal chain |
# |---|---|---|
# | $H_{\min}$, mean row entropy (nats) | {glue:text}`sticky.hmin_nats_reference:.4f` | {glue:text}`sticky.hmin_nats_nominal:.4f` |
# | the same in bits | {glue:text}`sticky.hmin_bits_reference:.4f` | {glue:text}`sticky.hmin_bits_nominal:.4f` |
# | entropy rate $\sum_i \pi_i H(P_{i\cdot})$ (nats) | {glue:text}`sticky.entropy_rate_reference:.4f` | {glue:text}`sticky.entropy_rate_nominal:.4f` |
# | Monte Carlo, {glue:text}`sticky.mc_length` steps (nats) | {glue:text}`sticky.hmin_mc_reference:.4f` ± {glue:text}`sticky.hmin_mc_se_reference:.4f` | {glue:text}`sticky.hmin_mc_nominal:.4f` ± {glue:text}`sticky.hmin_mc_se_nominal:.4f` |
#
# For comparison, a model that ignores its input and predicts the uniform distribution has loss
# $\ln 8 =$ {glue:text}`sticky.ln8:.4f` nats.
#
# **The data.** Fixed symbol means $\mu_s \in \mathbb{R}^{20}$ are drawn once from $\mathcal{N}(0, I)$
# with seed 0. Each seed draws one chain $y_0, \dots, y_{1999}$ (uniform start); the input at position
# $t$ is $x_t = \mu_{y_{t-1}} + \varepsilon_t$ with $\varepsilon_t \sim \mathcal{N}(0, I_{20})$ and the
# target is $y_t$: 1999 positions, trained full-batch. The random draws follow the script's order, so
# seed 42 here is seed 42 there (the unit tests compare the two bit for bit). Because $y_{t-1}$ is seen
# only through noise, the loss a model of these inputs can reach is slightly above $H_{\min}$; the exact
# Bayes predictor given $x_{\le t}$ is an HMM forward filter, and its cross-entropy on the five training
# sequences is computed below as a second floor.

# %% tags=["hide-input"]
datasets = {s: sticky_chain.make_sticky_chain_data(s, length=cfg.length) for s in cfg.seeds}
filtered_floor = float(
    np.mean([sticky_chain.filtered_cross_entropy_nats(d) for d in datasets.values()])
)
claims.glue("sticky.filtered_floor_train", filtered_floor)
claims.glue("sticky.filtered_floor_gap", filtered_floor - hmin)
claims.glue("sticky.n_positions", int(datasets[cfg.seeds[0]].x.shape[0]))

# %% [markdown] tags=[]
# The exact filter's cross-entropy on the training sequences is
# {glue:text}`sticky.filtered_floor_train:.4f` nats, {glue:text}`sticky.filtered_floor_gap:.4f` above
# $H_{\min}$ (on a single sequence of {glue:text}`sticky.n_positions` positions, sampling noise moves
# either number by about 0.02 nats).
#
# ## A fast closed-form engine
#
# The head is the one of chapter 1 with the paper's sizes: $W_Q, W_K \in \mathbb{R}^{20 \times 10}$,
# $W_V \in \mathbb{R}^{20 \times 15}$, $W_O \in \mathbb{R}^{15 \times 8}$, weights drawn from
# $\mathcal{N}(0, 0.1^2)$, scores scaled by $1/\sqrt{10}$, mean cross-entropy. Training never calls
# autograd. `attention_dynamics.training.head_engine.closed_form_head_pass` evaluates the paper's laws directly —
# the error signal $u_i = W_O (p_i - e_{y_i}) / N$, the advantage routing law
# $\partial L / \partial s_{ij} = \alpha_{ij} (b_{ij} - \mathbb{E}_{\alpha_i}[b])$, the responsibility-weighted
# value law $\partial L / \partial v_j = \sum_i \alpha_{ij} u_i$ and the query and key laws — and then the
# chain rule through the four linear maps. One observation makes it fast: with a single head and
# nothing above it, $u_i$ depends on query row $i$ alone, so the forward and the backward pass of a
# block of 128 query rows can be done together while that block of the attention matrix is still in
# the processor's cache, and each block visits only the keys it may see. The masked upper triangle is
# never computed and no $T \times T$ matrix is ever stored.
#
# On the seed-42 sequence in double precision, the engine's gradients agree with autograd's:

# %% tags=["hide-input"]
check_data = datasets[cfg.seeds[0]]
check_model = SingleHeadModule(sticky.initial_head(cfg.seeds[0], dtype=torch.float64))
x64 = check_data.x.double()
autograd_loss = autograd_head_loss(check_model, (x64, check_data.y))
autograd_loss.backward()
engine = closed_form_head_pass(x64, check_model.head_params(), check_data.y)
gradient_error = max(
    float((engine.grads[n] - getattr(check_model, n).grad).abs().max()) for n in engine.grads
)
claims.glue("sticky.engine_gradient_max_abs_err", gradient_error)
claims.glue("sticky.engine_loss_abs_err", float((engine.loss - autograd_loss.detach()).abs()))
print(f"largest gradient difference: {gradient_error:.1e}")

# %% tags=["hide-input"]
benchmark = load_results(data_path("sticky_chain_benchmark.json"))
# A timing, not a claim: it depends on the machine and its load, so it is shown with both and
# decides nothing.
claims.glue("sticky.engine_speedup_vs_autograd", benchmark["speedup"])
for key in ("engine_ms_per_step", "autograd_ms_per_step", "max_abs_loss_difference"):
    claims.glue(f"sticky.benchmark_{key}", benchmark[key])
claims.glue("sticky.benchmark_threads", benchmark["settings"]["threads"])
claims.glue("sticky.engine_speedup_vs_protocol", benchmark["speedup_vs_protocol"])
claims.glue("sticky.benchmark_load", benchmark["machine"]["load_average_1min"])
claims.glue("sticky.benchmark_machine", sticky.describe_machine(benchmark["machine"]))

# %% [markdown] tags=[]
# The largest difference is {glue:text}`sticky.engine_gradient_max_abs_err:.1e` (the loss differs by
# {glue:text}`sticky.engine_loss_abs_err:.1e`), and the unit tests repeat the comparison for many shapes
# and block sizes. Timings are not computed here (a notebook's outputs must not depend on how busy the
# machine is): `benchmarks/sticky_chain.py` times both in alternating rounds, in the same process, with
# {glue:text}`sticky.benchmark_threads` thread(s) and $T = 2000$ in float32, and saves what it measured,
# which this page reads. The engine took {glue:text}`sticky.benchmark_engine_ms_per_step:.1f` ms per
# training step and autograd of the same head {glue:text}`sticky.benchmark_autograd_ms_per_step:.1f` ms:
# a speed-up of **{glue:text}`sticky.engine_speedup_vs_autograd:.1f`×** (and
# {glue:text}`sticky.engine_speedup_vs_protocol:.1f`× a re-implementation, for timing, of the authors' script's
# protocol — dense mask and logging every step, as PAPER.md describes it; not their code), measured on
# {glue:text}`sticky.benchmark_machine` with a load average of {glue:text}`sticky.benchmark_load:.1f`
# (load slows both alike). A timing belongs to the machine it was taken on, so it is shown here and
# is not a ledger claim: run the benchmark to see the ratio on yours. Over 100 training steps the two loss curves differ by at most
# {glue:text}`sticky.benchmark_max_abs_loss_difference:.1e` nats.
#
# ## The paper's protocol, exactly
#
# Seeds 42, 2024, 1337, 7777 and 9999; for each, one sequence and one initialisation shared by both
# schedules; 1000 full-batch steps of
#
# - **SGD**: learning rate 0.01 on $W_Q, W_K, W_V, W_O$;
# - **EM-like**: one backward pass, then learning rate 0.1 on $W_V$ and 0.01 on $W_Q, W_K, W_O$.
#
# The paper's metric: the threshold is SGD's final loss averaged over the seeds; for each seed, find the
# first step at which the EM-like loss (recorded before each update, as in the script) is below it;
# the speed-up is 1000 divided by the mean of those steps. The runs go through the book's one training
# loop (`training.fit`) with the closed-form engine, two at a time on the two cores.

# %% tags=["trained-output"]
runs = sticky.run_grid(
    cfg.seeds,
    ["sgd", "em_like"],
    steps=cfg.steps,
    length=cfg.length,
    snapshot_every=cfg.snapshot_every,
)
protocol = sticky.paper_protocol_summary(runs)
protocol["per_seed"]

# %% tags=["trained-output"]
protocol["summary"]

# %% tags=["trained-output", "hide-input"]
run_params = {
    "seeds": cfg.seeds,
    "steps": cfg.steps,
    "length": cfg.length,
    "chain": "reference",
    "head": sticky.HEAD_SHAPE,
    "init_std": sticky.INIT_STD,
}
final_loss = {name: sticky.summarise_runs(runs, name, "loss") for name in ("sgd", "em_like")}
for name, claim_id in (("sgd", "sticky.final_loss_sgd"), ("em_like", "sticky.final_loss_em")):
    claims.record(
        claim_id,
        final_loss[name]["mean"],
        unit="nats",
        lower=(math.log(8) + hmin) / 2,
        upper=math.log(8),
        description=f"mean final training loss of {SCHEDULES[name].label} after the paper's "
        "protocol; the paper: still near ln 8 (here: less than half of the way from ln 8 "
        "down to H_min)",
        params={**run_params, "schedule": name},
        explanation="this schedule has covered more than half of the way from ln 8 to H_min "
        "after 1000 steps: it has left the plateau",
    )
    claims.glue(f"{claim_id}_sd", final_loss[name]["sd"])
speedup = protocol["speedup"]
speedup_claim = claims.record(
    "sticky.speedup_paper_protocol",
    speedup["speedup"],
    unit="×",
    paper_value=2.3,
    tolerance=0.23,
    description="steps / mean first step at which EM-like's loss is below SGD's mean final loss "
    "(the paper's metric)",
    explanation=(
        "the paper's metric on the paper's seeds and settings, with the reference script's data "
        "and "
        "initialisation reproduced draw for draw, gives a different mean first step; see the text"
    ),
    params=run_params,
)
claims.glue("sticky.threshold", speedup["threshold"])
claims.glue("sticky.mean_first_step", speedup["mean_first_step"])
claims.glue("sticky.first_step_min", min(speedup["first_steps"]))
claims.glue("sticky.first_step_max", max(speedup["first_steps"]))
test = protocol["paired_test"]
for key in ("mean_difference", "t", "t_pvalue", "wilcoxon_pvalue"):
    claims.glue(f"sticky.paired_{key}", test[key])
claims.glue("sticky.gap_sgd_to_hmin", final_loss["sgd"]["mean"] - hmin)
claims.glue("sticky.gap_em_to_hmin", final_loss["em_like"]["mean"] - hmin)
for name in ("sgd", "em_like"):  # share of the way from ln 8 down to H_min covered after 1000 steps
    covered = (math.log(8) - final_loss[name]["mean"]) / (math.log(8) - hmin)
    claims.glue(f"sticky.gap_covered_{name}", covered)

# %% tags=["hide-input", "trained-output"]
fig, ax = plotting.new_figure(width=6.4, height=3.6)
step_axis = np.arange(cfg.steps)
for name in ("sgd", "em_like"):
    curves = np.array([runs[(name, s)].losses for s in cfg.seeds])  # (seeds, steps)
    ax.plot(
        step_axis, curves.mean(0), color=plotting.schedule_color(name), label=SCHEDULES[name].label
    )
    ax.fill_between(
        step_axis, curves.min(0), curves.max(0), color=plotting.schedule_color(name), alpha=0.2
    )
ax.axhline(
    speedup["threshold"], color="0.3", ls="--", lw=1, label="SGD's mean final loss (threshold)"
)
ax.axhline(math.log(8), color="0.6", ls=":", lw=1, label="uniform prediction, ln 8")
ax.axvline(
    speedup["mean_first_step"],
    color=plotting.schedule_color("em_like"),
    ls="--",
    lw=1,
    label="EM-like: mean first step below threshold",
)
ax.set_xlabel("training step")
ax.set_ylabel("training loss (nats)")
ax.set_title(f"The paper's protocol: mean and range over {len(cfg.seeds)} seeds")
ax.legend(fontsize=8)
plotting.plt.show()

# %% [markdown] tags=[]
# SGD ends at a mean loss of {glue:text}`sticky.final_loss_sgd:.4f` ± {glue:text}`sticky.final_loss_sgd_sd:.4f`
# nats and EM-like at {glue:text}`sticky.final_loss_em:.4f` ± {glue:text}`sticky.final_loss_em_sd:.4f`
# (mean ± sd over seeds), between the uniform level $\ln 8 =$ {glue:text}`sticky.ln8:.4f` and
# $H_{\min} =$ {glue:text}`sticky.hmin_nats_reference:.4f` (gaps to $H_{\min}$ of {glue:text}`sticky.gap_sgd_to_hmin:.3f`
# and {glue:text}`sticky.gap_em_to_hmin:.3f` nats). The paper's "both still near $\ln 8$" holds for SGD, which has
# covered {glue:text}`sticky.gap_covered_sgd:.0%` of the way from $\ln 8$ down to $H_{\min}$, but not for EM-like,
# which has covered {glue:text}`sticky.gap_covered_em_like:.0%`: after 1000 steps SGD is still on the initial
# plateau and EM-like is well on its way down. EM-like's final loss is lower on every
# seed; the mean difference is {glue:text}`sticky.paired_mean_difference:.4f` nats (paired $t$ =
# {glue:text}`sticky.paired_t:.2f`, $p$ = {glue:text}`sticky.paired_t_pvalue:.2g`; Wilcoxon signed-rank
# $p$ = {glue:text}`sticky.paired_wilcoxon_pvalue:.3g`, the smallest value five pairs allow).
#
# **The speed-up.** EM-like first drops below SGD's mean final loss
# ({glue:text}`sticky.threshold:.4f` nats) after {glue:text}`sticky.mean_first_step:.1f` steps on average
# (between {glue:text}`sticky.first_step_min` and {glue:text}`sticky.first_step_max` across seeds), a
# speed-up of **{glue:text}`sticky.speedup_paper_protocol:.2f`×** against the paper's 2.3× (about 430
# steps).
# The number measures one thing only: how soon a run with ten times larger value steps leaves the
# plateau at $\ln 8$. The controls below ask whether it measures anything more.
#
# ## Controls the paper lacks
#
# The following results are too heavy for this page's time budget (twenty seeds, runs of 20 000 steps,
# a four-layer transformer). They are computed by the same package functions with
# `python -m attention_dynamics reproduce --chapter 5 --scale paper` (or
# `python -m attention_dynamics.experiments.em_vs_sgd`) and stored, with their settings and the package
# version, in `src/attention_dynamics/data/sticky_chain_paper_scale.json`; at the default scale this page
# reads that file. The tests regenerate it at a reduced size through the same code.

# %% tags=["trained-output"]
heavy_path = data_path(sticky.PAPER_SCALE_FILE)
if cfg.heavy == "compute":
    save_results(sticky.compute_paper_scale_results(sticky.PAPER_SCALE_CONFIG), heavy_path)
heavy = load_results(heavy_path)
heavy_cfg = heavy["config"]
claims.glue("sticky.heavy_version", heavy["provenance"]["package_version"])
reference_block = heavy["ci"]["reference"]
sticky.controls_table(heavy, "reference")

# %% [markdown] tags=[]
# **(a) Is it EM, or a larger step?** The matched control runs SGD with learning rate 0.1 on *every*
# matrix. If the EM-like schedule owed its speed to treating the values as an M-step, raising every
# learning rate should not help as much. The table compares all schedules on the reference chain (the
# paper's threshold on the same seeds; "EM-like speed-up over it" is the control's mean first step
# divided by EM-like's, so a value below 1 means the control is faster).

# %% tags=["hide-input", "trained-output"]
matched = reference_block["em_like_speedup_over"]["sgd_matched"]
claims.record(
    "sticky.speedup_vs_matched_lr",
    matched["ratio"],
    unit="×",
    description="EM-like's speed-up over SGD with lr 0.1 on every matrix: the control's mean first "
    "step "
    "below SGD's mean final loss / EM-like's (below 1: the control is faster)",
    params={
        "seeds": reference_block["seeds"]["sgd_matched"],
        "steps": heavy_cfg["steps"],
        "chain": "reference",
        "scale": "paper",
    },
)
claims.glue("sticky.matched_speedup_over_sgd", reference_block["speedup"]["sgd_matched"]["speedup"])
claims.glue("sticky.matched_mean_first_step", float(np.mean(matched["control_first_steps"])))
claims.glue("sticky.em_mean_first_step_paper_seeds", float(np.mean(matched["em_like_first_steps"])))
mstep = reference_block["em_like_speedup_over"]["m_step"]
claims.glue("sticky.mstep_speedup_over_sgd", reference_block["speedup"]["m_step"]["speedup"])
claims.glue("sticky.em_speedup_over_mstep", mstep["ratio"])
claims.glue("sticky.mstep_rho", SCHEDULES["m_step"].value_lr)

# %% [markdown] tags=[]
# With learning rate 0.1 everywhere, SGD crosses the threshold after
# {glue:text}`sticky.matched_mean_first_step:.1f` steps on average, against
# {glue:text}`sticky.em_mean_first_step_paper_seeds:.1f` for EM-like: EM-like's speed-up over the matched
# control is {glue:text}`sticky.speedup_vs_matched_lr:.2f`×, i.e. the matched control reaches the
# threshold sooner, with a speed-up of {glue:text}`sticky.matched_speedup_over_sgd:.1f`× over SGD by the
# paper's own metric. Raising only the value step captures part of what raising every step gives; the
# paper's 2.3× is what one gets from a larger learning rate on some of the weights, and it says nothing
# specific about EM; (d) asks which weights.
#
# **(b) A genuine closed-form M-step.** The EM-like schedule solves nothing in closed form. Here is an
# M-step that does. Take the attention weights $\alpha_{ij}$ of the current forward pass as the E-step's
# responsibilities and let $\bar u_i = W_O (p_i - e_{y_i})$ be the error signal of position $i$ (the
# $u_i$ of the mean loss times $N$). Each query asks every value it reads to move against its error,
# to the target $v_j - \rho \, \bar u_i$. The M-step sets $W_V$ to the exact minimiser of the
# responsibility-weighted least-squares objective
#
# ```{math}
# :label: eq-sticky-mstep-objective
# J(W) = \sum_i \sum_{j \le i} \alpha_{ij} \, \big\lVert W^\top x_j - (v_j - \rho\, \bar u_i) \big\rVert^2 ,
# ```
#
# which is
#
# ```{math}
# :label: eq-sticky-mstep
# W_V \leftarrow W_V - \rho \, S^{-1} \nabla_{W_V} L, \qquad
# S = \frac{1}{N} \sum_j N_j \, x_j x_j^\top, \qquad N_j = \sum_i \alpha_{ij} ,
# ```
#
# with $S$ the inputs' second moment weighted by the soft counts $N_j$. If every position had a free value
# vector, {eq}`eq-sticky-mstep-objective` would give
# $v_j \leftarrow v_j - \rho \sum_i \alpha_{ij} \bar u_i / N_j$ — exactly the Gaussian-mixture M-step
# written as a gradient step preconditioned by $\sigma^2 / N_j$ (Xu and Jordan's bridge between EM and
# gradient descent, chapter 4), with $\rho$ in the role of the mixture variance $\sigma^2$. Values are
# tied through $W_V$, so the M-step projects those moves onto what $W_V$ can express, weighting each
# position by how much attention it receives. $W_Q$, $W_K$ and $W_O$ take an SGD step of 0.01 from the
# same forward pass. The book uses $\rho$ = {glue:text}`sticky.mstep_rho:.1f` (the variance of the input
# noise); `schedules.value_m_step` implements {eq}`eq-sticky-mstep` and a unit test checks it against a
# numerical minimiser of $J$.
#
# By the paper's metric the M-step schedule is {glue:text}`sticky.mstep_speedup_over_sgd:.1f`× faster
# than SGD, and EM-like's speed-up over it is {glue:text}`sticky.em_speedup_over_mstep:.2f`×. Its speed
# depends on $\rho$ as a step size would:

# %% tags=["trained-output"]
sticky.rho_sweep_table(heavy)

# %% [markdown] tags=[]
# A closed-form M-step does not pick its own step size here: $\rho$ sets how far the targets lie, exactly
# as $\sigma^2$ does for a mixture, and the speed-up grows with it. The responsibility weighting and the
# preconditioning by $S^{-1}$ change the *direction* of the value update; how fast a run leaves the
# plateau is still governed by how large the update is.
#
# **(c) Twenty seeds and a confidence interval.** The paper reports the speed-up from five seeds with no
# interval. Over the twenty seeds of the paper-scale file, with a percentile bootstrap that resamples
# seeds (each seed's SGD final loss and EM-like curve together, the threshold recomputed in every
# resample):

# %% tags=["hide-input", "trained-output"]
ci = reference_block["speedup_ci"]["em_like"]
ci_params = {
    "seeds": reference_block["seeds"]["em_like"],
    "steps": heavy_cfg["steps"],
    "chain": "reference",
    "bootstrap_resamples": heavy_cfg["bootstrap_resamples"],
    "method": "percentile",
    "scale": "paper",
}
claims.record(
    "sticky.speedup_ci95_low",
    ci["low"],
    unit="×",
    upper=2.3,
    description="lower end of the 95% bootstrap interval of the paper's speed-up over 20 seeds "
    "(passes if the interval reaches down to the paper's 2.3)",
    explanation="the whole 95% interval lies above the paper's 2.3",
    params=ci_params,
)
claims.record(
    "sticky.speedup_ci95_high",
    ci["high"],
    unit="×",
    lower=2.3,
    description="upper end of the 95% bootstrap interval of the paper's speed-up over 20 seeds "
    "(passes if the interval reaches up to the paper's 2.3)",
    explanation="the whole 95% interval lies below the paper's 2.3",
    params=ci_params,
)
claims.glue("sticky.ci_point", ci["point"])
claims.glue("sticky.ci_n_seeds", len(reference_block["seeds"]["em_like"]))
claims.glue("sticky.ci_paired_p", reference_block["paired_test_vs_sgd"]["em_like"]["t_pvalue"])

# %% [markdown] tags=[]
# Over {glue:text}`sticky.ci_n_seeds` seeds the speed-up is {glue:text}`sticky.ci_point:.2f`× with a 95%
# interval from {glue:text}`sticky.speedup_ci95_low:.2f` to {glue:text}`sticky.speedup_ci95_high:.2f`
# (paired $t$-test of the final losses, EM-like vs SGD: $p$ = {glue:text}`sticky.ci_paired_p:.1e`). The
# effect is real and stable across seeds, and close to the paper's number, but the paper's 2.3× lies just
# above the interval (the ledger marks the upper end as not reproducing). Adding seeds is not what moves
# it: the paper's own five seeds already give {glue:text}`sticky.speedup_paper_protocol:.2f`× here, inside the
# interval; the gap to 2.3 is in the five-seed number itself (CUDA's random draws, which the reference script
# uses by default, are one candidate explanation; this book runs on CPU). What it means is the question of (a).
#
# **(d) Which learning rate makes it fast?** The EM-like schedule raises one group's learning rate, and (a)
# showed that raising all three does more. If the speed-up were about an M-step on the values, raising the
# values' rate should matter more than raising any other. So each group is raised ×10 alone — the
# routing weights $W_Q, W_K$ (which set the attention weights, the E-step's responsibilities), the values
# $W_V$ (the paper's schedule), the readout $W_O$ — then in pairs, with the paper's metric and threshold
# (SGD's mean final loss on the same seeds). A speed-up of 1 means the schedule reaches that threshold, on
# average, only at SGD's last step; SGD itself scores slightly above 1 by this metric (the seeds that end
# below the mean cross it shortly before the end), so SGD's own score, measured, is the level a condition must
# beat to be faster than SGD. These runs are stored in a second file,
# `src/attention_dynamics/data/sticky_chain_lr_surface.json` (computed with
# `python -m attention_dynamics.experiments.lr_surface`, which runs them as jobs of the same resumable paper-scale runner,
# most important first); this page reads it. On the fifteen extra seeds the SGD baseline is the paper-scale
# file's, the same computation: where both files ran SGD, the final losses differ by
# {glue:text}`sticky.surface_baseline_difference:.1e` nats.

# %% tags=["trained-output"]
surface = load_results(data_path(lr_surface.SURFACE_FILE))
surface_paper = surface["paper_seeds"]
surface_twenty = lr_surface.with_values_only_from(surface["twenty_seeds"], reference_block)
lr_surface.surface_table({**surface, "twenty_seeds": surface_twenty})

# %% tags=["hide-input", "trained-output"]
claims.glue(
    "sticky.surface_baseline_difference",
    surface["baseline_source"]["max_abs_difference_where_both"],
)
sgd_self = surface_paper["conditions"]["sgd"]["speedup"]  # SGD against its own mean final loss
claims.glue("sticky.surface_sgd_self", sgd_self)
surface_claims = {}
for name in lr_surface.CLAIM_CONDITIONS:
    block = surface_twenty if name in surface_twenty["conditions"] else surface_paper
    cond = block["conditions"][name]
    surface_claims[name] = claims.record(
        f"sticky.speedup_{name}",
        cond["speedup"],
        unit="×",
        lower=sgd_self,
        interval=(cond["ci"]["low"], cond["ci"]["high"]),
        description="the paper's speed-up over SGD with the learning rate ×10 on "
        + "(W_Q+W_K, W_V, W_O) × ({:g}, {:g}, {:g}); passes if its 95% bootstrap interval lies "
        "above SGD's own score by the metric (no faster than SGD)".format(*cond["ratios"]),
        explanation="the 95% interval reaches down to SGD's own score by the paper's metric: this "
        "condition is not shown to be faster than SGD",
        params={
            "seeds": cond.get("seeds", block["seeds"]),
            "ratios": cond["ratios"],
            "steps": surface["config"]["steps"],
            "chain": "reference",
            "bootstrap_resamples": surface["config"]["bootstrap_resamples"],
            "reference": "SGD's own speed-up on the paper's seeds",
            "scale": "paper",
        },
    )
    claims.glue(f"sticky.surface_n_seeds_{name}", len(cond.get("seeds", block["seeds"])))
for key, block in (("5", surface_paper), ("20", surface_twenty)):
    for name, cond in block["conditions"].items():
        claims.glue(f"sticky.surface_{name}_{key}", cond["speedup"])
        claims.glue(f"sticky.surface_{name}_{key}_low", cond["ci"]["low"])
        claims.glue(f"sticky.surface_{name}_{key}_high", cond["ci"]["high"])
    for pair, ratio in block.get("comparisons", {}).items():
        claims.glue(f"sticky.surface_{pair}_{key}", ratio["point"])
        claims.glue(f"sticky.surface_{pair}_{key}_low", ratio["low"])
        claims.glue(f"sticky.surface_{pair}_{key}_high", ratio["high"])
single = ("values_only", "readout_only", "routing_only")
decisive = surface_twenty if set(single) <= set(surface_twenty["conditions"]) else surface_paper
values_special = all(
    lr_surface.intervals_separate(
        decisive["conditions"]["values_only"]["ci"], decisive["conditions"][other]["ci"]
    )
    and decisive["conditions"]["values_only"]["speedup"] > decisive["conditions"][other]["speedup"]
    for other in ("readout_only", "routing_only")
)
claims.glue(
    "sticky.surface_values_verdict",
    "the values-only interval lies above both the readout-only and the routing-only intervals"
    if values_special
    else "the values-only interval does not lie above both the readout-only and the routing-only "
    "intervals",
)
claims.glue(
    "sticky.surface_decisive_n_seeds", len(decisive["conditions"]["readout_only"]["first_steps"])
)

# %% tags=["hide-input", "trained-output"]
m_step_points = {
    v["rho"]: (
        float(np.mean([lr_surface.m_step_value_step_ratio(s, v["rho"]) for s in v["seeds"]])),
        v["speedup"]["speedup"],
    )
    for v in heavy["rho_sweep"].values()
}
for rho, (ratio, speed) in m_step_points.items():
    tag = f"{rho:g}".replace(".", "p")
    claims.glue(f"sticky.mstep_step_ratio_{tag}", ratio)
    claims.glue(f"sticky.mstep_speedup_{tag}", speed)
    on_axis = lr_surface.values_axis_speedup_at(surface, ratio)  # nan beyond the computed points
    if not math.isnan(on_axis):
        claims.glue(f"sticky.mstep_over_gradient_{tag}", speed / on_axis)
axis = lr_surface.values_axis(surface)
for ratio, speed in zip(axis["ratio"], axis["speedup"]):
    claims.glue(f"sticky.values_axis_{ratio:g}", speed)
lr_surface.plot_condition_speedups({**surface, "twenty_seeds": surface_twenty})
plotting.plt.show()

# %% tags=["hide-input", "trained-output"]
lr_surface.plot_lr_surface(surface)
plotting.plt.show()

# %% [markdown] tags=[]
# A speed-up is read against SGD's own score by the same metric, {glue:text}`sticky.surface_sgd_self:.2f` on
# the paper's seeds (1 would mean reaching the threshold only at SGD's last step). On the paper's five seeds
# (intervals: percentile bootstrap over seeds, the threshold recomputed in every resample):
#
# | ×10 on | speed-up, 5 seeds | 95% interval | speed-up, 20 seeds | 95% interval |
# |---|---|---|---|---|
# | $W_V$ alone (the paper's schedule) | {glue:text}`sticky.surface_values_only_5:.2f` | {glue:text}`sticky.surface_values_only_5_low:.2f`–{glue:text}`sticky.surface_values_only_5_high:.2f` | {glue:text}`sticky.surface_values_only_20:.2f` | {glue:text}`sticky.surface_values_only_20_low:.2f`–{glue:text}`sticky.surface_values_only_20_high:.2f` |
# | $W_O$ alone | {glue:text}`sticky.surface_readout_only_5:.2f` | {glue:text}`sticky.surface_readout_only_5_low:.2f`–{glue:text}`sticky.surface_readout_only_5_high:.2f` | {glue:text}`sticky.surface_readout_only_20:.2f` | {glue:text}`sticky.surface_readout_only_20_low:.2f`–{glue:text}`sticky.surface_readout_only_20_high:.2f` |
# | $W_Q, W_K$ alone | {glue:text}`sticky.surface_routing_only_5:.2f` | {glue:text}`sticky.surface_routing_only_5_low:.2f`–{glue:text}`sticky.surface_routing_only_5_high:.2f` | {glue:text}`sticky.surface_routing_only_20:.2f` | {glue:text}`sticky.surface_routing_only_20_low:.2f`–{glue:text}`sticky.surface_routing_only_20_high:.2f` |
# | $W_V$ and $W_O$ | {glue:text}`sticky.surface_values_readout_5:.2f` | {glue:text}`sticky.surface_values_readout_5_low:.2f`–{glue:text}`sticky.surface_values_readout_5_high:.2f` | {glue:text}`sticky.surface_values_readout_20:.2f` | {glue:text}`sticky.surface_values_readout_20_low:.2f`–{glue:text}`sticky.surface_values_readout_20_high:.2f` |
# | $W_Q, W_K$ and $W_V$ | {glue:text}`sticky.surface_routing_values_5:.2f` | {glue:text}`sticky.surface_routing_values_5_low:.2f`–{glue:text}`sticky.surface_routing_values_5_high:.2f` | not run | |
# | $W_Q, W_K$ and $W_O$ | {glue:text}`sticky.surface_routing_readout_5:.2f` | {glue:text}`sticky.surface_routing_readout_5_low:.2f`–{glue:text}`sticky.surface_routing_readout_5_high:.2f` | not run | |
# | all three (the matched control of (a)) | {glue:text}`sticky.surface_all_three_5:.2f` | {glue:text}`sticky.surface_all_three_5_low:.2f`–{glue:text}`sticky.surface_all_three_5_high:.2f` | not run | |
#
# The twenty-seed values-only row is the paper-scale file's EM-like runs of (c), the same runs; the readout-only,
# routing-only and values-and-readout conditions were run on the fifteen extra seeds too. The three remaining
# conditions' twenty-seed runs did not fit this edition's computing budget (the file lists them as missing, and
# `python -m attention_dynamics.experiments.lr_surface` resumes them), so their intervals are the five seeds'. Every
# condition is faster than SGD. Raising the readout's rate alone does as much as raising the values' rate:
# on the same five seeds the values-only speed-up is {glue:text}`sticky.surface_values_only_over_readout_only_5:.2f`
# times the readout-only one (paired bootstrap interval
# {glue:text}`sticky.surface_values_only_over_readout_only_5_low:.2f`–{glue:text}`sticky.surface_values_only_over_readout_only_5_high:.2f`).
# Raising the routing weights' rate alone does more: values only is
# {glue:text}`sticky.surface_values_only_over_routing_only_5:.2f` times as fast as routing only
# ({glue:text}`sticky.surface_values_only_over_routing_only_5_low:.2f`–{glue:text}`sticky.surface_values_only_over_routing_only_5_high:.2f`).
# Over twenty seeds the two ratios are {glue:text}`sticky.surface_values_only_over_readout_only_20:.2f`
# ({glue:text}`sticky.surface_values_only_over_readout_only_20_low:.2f`–{glue:text}`sticky.surface_values_only_over_readout_only_20_high:.2f`)
# and {glue:text}`sticky.surface_values_only_over_routing_only_20:.2f`
# ({glue:text}`sticky.surface_values_only_over_routing_only_20_low:.2f`–{glue:text}`sticky.surface_values_only_over_routing_only_20_high:.2f`).
# Over {glue:text}`sticky.surface_decisive_n_seeds` seeds, {glue:text}`sticky.surface_values_verdict`. The
# speed-up is therefore **not specific to an M-step on the values**: whichever weights take the larger step,
# the run leaves the plateau sooner, and the routing weights — the E-step's side of the analogy — give the
# most. That values and readout give the same is what one expects of two factors of one product: the head's
# output is linear in $W_V W_O$, and at initialisation both factors have the same scale, so a tenfold rate on
# either moves the product about equally. Raising two groups or all three adds up further, to
# {glue:text}`sticky.surface_all_three_5:.1f`× with all three.
#
# **Where the closed-form M-step sits.** The M-step of (b) changes only the values' update, so it lies on the
# surface's values axis. Its position there is the size of its first step on $W_V$ relative to SGD's,
# $\lVert \rho\, S^{-1} \nabla_{W_V} L \rVert / \lVert 0.01\, \nabla_{W_V} L \rVert$ at initialisation
# (mean over the paper's seeds). Gradient steps on the values alone give SGD's own
# {glue:text}`sticky.surface_sgd_self:.2f` at ×1 and {glue:text}`sticky.values_axis_10:.2f`× at ×10.

# %% tags=["hide-input", "trained-output"]
lr_surface.plot_values_axis(surface, m_step_points)
plotting.plt.show()

# %% [markdown] tags=[]
# With $\rho = 0.3$ the M-step's first step is {glue:text}`sticky.mstep_step_ratio_0p3:.1f` times SGD's —
# a little larger than the ×10 gradient step — and it is no faster: {glue:text}`sticky.mstep_speedup_0p3:.2f`×
# against {glue:text}`sticky.values_axis_10:.2f`×. With $\rho = 0.1$ (first step
# {glue:text}`sticky.mstep_step_ratio_0p1:.1f` times SGD's) it reaches
# {glue:text}`sticky.mstep_over_gradient_0p1:.2f` times the speed-up that gradient steps of that size give
# (interpolated between ×1 and ×10 in log–log). The book's $\rho = 1$ takes a first step
# {glue:text}`sticky.mstep_step_ratio_1:.0f` times SGD's and gives {glue:text}`sticky.mstep_speedup_1:.2f`×;
# gradient steps on the values alone at ×30 give {glue:text}`sticky.values_axis_30:.2f`×, about the same. On this surface the closed-form M-step is one more point on the values axis,
# where the size of the step, not its responsibility-weighted form, sets the speed.
#
# **The chapter's conclusion about "EM".** The sticky-chain experiment does not single out the values. A
# larger step on the routing weights alone beats the paper's schedule, a larger step on the readout alone
# equals it, and an exact M-step is no faster than a gradient step on the values of about the same size.
# What the experiment measures is how quickly larger steps — on any of the head's weights — carry it off the
# initial plateau.
#
# **(e) Long runs: how close to the floor?** After 1000 steps neither schedule has learned the task.
# The long runs continue each schedule for {glue:text}`sticky.long_steps` steps from the seed-42 start and
# evaluate the trained head on ten fresh sequences (seeds 10 042 to 10 051), where the loss can be compared
# with $H_{\min}$ and with the exact filter on the same sequences without the noise of fitting one
# training sequence.

# %% tags=["hide-input", "trained-output"]
long_table = sticky.long_run_table(heavy)
long_runs = heavy["long_run"]["runs"]
claims.glue("sticky.long_steps", heavy["long_run"]["steps"])
long_params = {
    "seeds": heavy["long_run"]["seeds"],
    "steps": heavy["long_run"]["steps"],
    "chain": "reference",
    "heldout_sequences": heavy_cfg["heldout_sequences"],
    "heldout_every": heavy_cfg["long_heldout_every"],
    "scale": "paper",
}
for name, short in (("em_like", "em"), ("sgd", "sgd")):
    row = long_table.loc[SCHEDULES[name].label]
    claims.record(
        f"sticky.long_run_gap_to_hmin_{short}",
        row["closest gap to H_min"],
        unit="nats",
        description=f"lowest held-out loss along the long run of {SCHEDULES[name].label} minus "
        f"H_min",
        params={**long_params, "schedule": name},
    )
    claims.glue(f"sticky.long_final_train_{short}", row["final training loss"])
    claims.glue(f"sticky.long_final_heldout_{short}", row["final held-out loss"])
    claims.glue(f"sticky.long_best_step_{short}", int(row["at step"]))
    claims.glue(f"sticky.long_final_gap_filter_{short}", row["final gap to filter"])
claims.glue(
    "sticky.long_filter_floor",
    float(np.mean([r[0]["heldout"]["filtered_floor"] for r in long_runs.values()])),
)
claims.glue("sticky.long_heldout_every", heavy_cfg["long_heldout_every"])
long_table

# %% tags=["hide-input", "trained-output"]
fig, axes = plotting.new_figure(2, width=3.6, height=3.4, sharey=True)
for name, rs in long_runs.items():
    run = rs[0]
    axes[0].plot(
        np.array(run["loss_steps"]) + 1,
        run["losses"],
        color=plotting.schedule_color(name),
        label=SCHEDULES[name].label,
    )
    curve = run["heldout_curve"]
    axes[1].plot(np.array(curve["steps"]) + 1, curve["loss"], color=plotting.schedule_color(name))
for ax, title in zip(axes, ("training sequence", "ten held-out sequences")):
    ax.axhline(hmin, color="0.2", ls="--", lw=1, label="$H_{\\min}$")
    ax.axhline(math.log(8), color="0.6", ls=":", lw=1, label="ln 8")
    ax.axvline(cfg.steps, color="0.6", ls="-", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("training step (log scale)")
    ax.set_title(title)
axes[1].axhline(
    long_runs["sgd"][0]["heldout"]["filtered_floor"],
    color="0.2",
    ls="-.",
    lw=1,
    label="exact filter",
)
axes[0].set_ylabel("loss (nats)")
axes[0].legend(fontsize=7)
axes[1].legend(fontsize=7, loc="lower left")
fig.suptitle(
    f"Long runs, seed {heavy['long_run']['seeds'][0]} (grey line: end of the paper's protocol)"
)
plotting.plt.show()

# %% [markdown] tags=[]
# Trained long enough, every schedule goes *below* the floor on its training sequence — final training
# loss {glue:text}`sticky.long_final_train_sgd:.3f` nats for SGD and {glue:text}`sticky.long_final_train_em:.3f`
# for EM-like, against $H_{\min}$ = {glue:text}`sticky.hmin_nats_reference:.3f`: with 745 weights and a single
# sequence of {glue:text}`sticky.n_positions` positions, the head starts to fit that sequence's noise. The
# held-out sequences tell the real story. Their loss is lowest after {glue:text}`sticky.long_best_step_sgd`
# steps for SGD, {glue:text}`sticky.long_run_gap_to_hmin_sgd:.3f` nats above $H_{\min}$, and after
# {glue:text}`sticky.long_best_step_em` steps for EM-like, {glue:text}`sticky.long_run_gap_to_hmin_em:.3f` nats
# above it; then it rises as the head overfits, and after {glue:text}`sticky.long_steps` steps it is
# {glue:text}`sticky.long_final_gap_filter_sgd:.3f` (SGD) and {glue:text}`sticky.long_final_gap_filter_em:.3f`
# (EM-like) nats above the exact filter ({glue:text}`sticky.long_filter_floor:.4f` nats on these sequences).
# The table shows the same path for every schedule, travelled at different speeds: the faster a
# schedule, the sooner it reaches its best held-out loss and the sooner it overfits, and no schedule
# gets closer to $H_{\min}$ than about 0.1 nats. The schedules differ in *when*, not in *where*.
#
# **(f) The nominal chain.** The same protocol on the chain the paper's words describe (diagonal exactly
# 0.3), on the paper's seeds:

# %% tags=["hide-input", "trained-output"]
nominal_block = heavy["ci"]["nominal"]
claims.glue("sticky.nominal_speedup", nominal_block["speedup"]["em_like"]["speedup"])
claims.glue(
    "sticky.nominal_em_over_matched", nominal_block["em_like_speedup_over"]["sgd_matched"]["ratio"]
)
sticky.controls_table(heavy, "nominal")

# %% [markdown] tags=[]
# On the nominal chain the paper's metric gives {glue:text}`sticky.nominal_speedup:.2f`× for EM-like over
# SGD, and EM-like's speed-up over the matched control is {glue:text}`sticky.nominal_em_over_matched:.2f`×.
# The normalisation slip in the script moves the floor ($H_{\min}$ is
# {glue:text}`sticky.hmin_nats_nominal:.4f` instead of {glue:text}`sticky.hmin_nats_reference:.4f` nats) but
# not the conclusions.
#
# ## Value trajectories
#
# The paper's visual claim: PCA projections of the value vectors' trajectories are longer and more
# coherent under the EM-style schedule, with sharper specialisation. The values of a run are the
# 1999 vectors $v_j = W_V^\top x_j$; to follow them through training we track each symbol's
# *prototype* $c_s = W_V^\top \mu_s$ (the value of a noiseless input carrying symbol $s$), every
# {glue:text}`sticky.snapshot_every` steps of the protocol runs above. Three numbers summarise the
# trajectories, each averaged over the eight prototypes and then over the seeds: the **length** of the
# path in the 15-dimensional value space, its **coherence** (net displacement divided by path length:
# 1 for a straight line), and the **specialisation** of the values at the end, the share of the
# variance of all 1999 values explained by the symbol they carry (0: values say nothing about the
# symbol; 1: all values of a symbol coincide).

# %% tags=["trained-output", "hide-input"]
claims.glue("sticky.snapshot_every", cfg.snapshot_every)
trajectory = {name: sticky.trajectory_statistics(runs, name) for name in ("sgd", "em_like")}
for name, stats in trajectory.items():
    for key, summary in stats.items():
        claims.glue(f"sticky.trajectory_{key}_{name}", summary["mean"])
    claims.glue(
        f"sticky.trajectory_length_per_lr_{name}",
        stats["length"]["mean"] / SCHEDULES[name].value_lr,
    )
first_seed = cfg.seeds[0]
projected, explained = sticky.trajectory_pca(
    {name: runs[(name, first_seed)].value_prototypes for name in ("sgd", "em_like")}
)
fig, axes = plotting.new_figure(2, width=3.6, height=3.4, sharex=True, sharey=True)
for ax, name in zip(axes, ("sgd", "em_like")):
    for s in range(sticky_chain.N_SYMBOLS):
        path = projected[name][:, s]  # (snapshots, 2)
        ax.plot(path[:, 0], path[:, 1], color=plotting.PALETTE[s % len(plotting.PALETTE)], lw=1.2)
        ax.plot(*path[-1], "s", color=plotting.PALETTE[s % len(plotting.PALETTE)], ms=4)
    ax.set_title(SCHEDULES[name].label)
    ax.plot(0, 0, "o", color="0.2", ms=4)
    ax.set_xlabel(f"PC 1 of the displacements ({100 * explained[0]:.0f}%)")
axes[0].set_ylabel(f"PC 2 ({100 * explained[1]:.0f}%)")
fig.suptitle(
    f"Displacement of the 8 value prototypes over {cfg.steps} steps, seed {first_seed} (square: "
    f"end)"
)
plotting.plt.show()

# %% [markdown] tags=[]
# | | SGD | EM-like |
# |---|---|---|
# | path length of a prototype | {glue:text}`sticky.trajectory_length_sgd:.3f` | {glue:text}`sticky.trajectory_length_em_like:.3f` |
# | path length per unit of value learning rate | {glue:text}`sticky.trajectory_length_per_lr_sgd:.2f` | {glue:text}`sticky.trajectory_length_per_lr_em_like:.2f` |
# | coherence (net displacement / length) | {glue:text}`sticky.trajectory_coherence_sgd:.3f` | {glue:text}`sticky.trajectory_coherence_em_like:.3f` |
# | specialisation at the start | {glue:text}`sticky.trajectory_initial_specialization_sgd:.3f` | {glue:text}`sticky.trajectory_initial_specialization_em_like:.3f` |
# | specialisation at the end | {glue:text}`sticky.trajectory_specialization_sgd:.3f` | {glue:text}`sticky.trajectory_specialization_em_like:.3f` |
#
# The EM-like trajectories are longer, and the values specialise more, as the paper says. Both facts
# follow from the schedule's definition: a value learning rate ten times larger moves the values ten times
# further per step while the gradient is small and nearly constant, which is the case on the plateau.
# Per unit of value learning rate the EM-like paths are not longer — shorter, in fact. And the paper's
# "more coherent" does not reproduce: both schedules move the prototypes along nearly straight lines, but the
# EM-like paths are the *less* coherent ones ({glue:text}`sticky.trajectory_coherence_em_like:.3f` against
# {glue:text}`sticky.trajectory_coherence_sgd:.3f` for SGD). The picture is what a larger step looks like; it is not evidence of
# EM-specific dynamics.
#
# ## The deeper variant
#
# The authors' script also trains a four-layer transformer (four heads per layer, width 64, AdamW with
# learning rate $3 \cdot 10^{-4}$ and weight decay 0.01, a cosine schedule over 2000 full-batch steps,
# gradient clipping at 1) and evaluates it on a separate test sequence (seed + 10 000); the paper gives
# no number for it. The book's version uses `models.CausalTransformer` (pre-LayerNorm blocks, an input
# projection from $\mathbb{R}^{20}$, no positional encoding, like the script). That model has no dropout,
# so the package adds the script's dropout of 0.1 with forward hooks: in the feed-forward layers exactly
# where the script has it, and on each attention layer's output where the script drops attention weights.
# Its attention projections have no bias (the script's have one).

# %% tags=["hide-input", "trained-output"]
deep = heavy["deep"]
deep_test = {
    key: float(np.mean([r["test"][key] for r in deep["runs"]]))
    for key in ("loss", "entropy", "accuracy")
}
claims.record(
    "sticky.deep_test_gap_to_hmin",
    deep_test["loss"] - deep["hmin_nats"],
    unit="nats",
    description="held-out test loss of the 4-layer, 4-head, d = 64 transformer minus H_min",
    params={
        "seeds": [r["seed"] for r in deep["runs"]],
        "steps": deep["steps"],
        **deep["settings"],
        "chain": "reference",
        "scale": "paper",
    },
)
for key, value in deep_test.items():
    claims.glue(f"sticky.deep_test_{key}", value)
claims.glue("sticky.deep_entropy_gap", deep_test["entropy"] - deep["hmin_nats"])
claims.glue("sticky.deep_n_parameters", deep["runs"][0]["n_parameters"])
claims.glue("sticky.deep_n_seeds", len(deep["runs"]))
claims.glue("sticky.deep_train_loss", float(np.mean([r["train"]["loss"] for r in deep["runs"]])))
claims.glue(
    "sticky.deep_train_accuracy", float(np.mean([r["train"]["accuracy"] for r in deep["runs"]]))
)
deep_curve = deep["runs"][0]["test_curve"]
best = int(np.argmin(deep_curve["loss"]))
claims.glue("sticky.deep_best_test_loss", deep_curve["loss"][best])
claims.glue("sticky.deep_best_test_step", deep_curve["steps"][best])
claims.glue("sticky.deep_best_gap", deep_curve["loss"][best] - deep["hmin_nats"])

fig, ax = plotting.new_figure(width=6.4, height=3.4)
train_curve = deep["runs"][0]["losses"]
ax.plot(
    np.arange(len(train_curve)) * 10,
    train_curve,
    color=plotting.PALETTE[0],
    label="training loss (dropout on)",
)
ax.plot(
    deep_curve["steps"],
    deep_curve["loss"],
    color=plotting.PALETTE[1],
    label="test loss (held-out sequence)",
)
ax.axhline(deep["hmin_nats"], color="0.2", ls="--", lw=1, label="$H_{\\min}$")
ax.set_yscale("log")
ax.set_xlabel("training step")
ax.set_ylabel("loss (nats, log scale)")
ax.set_title(f"Deep variant, seed {deep['runs'][0]['seed']}")
ax.legend(fontsize=8)
plotting.plt.show()

# %% [markdown] tags=[]
# With {glue:text}`sticky.deep_n_parameters` parameters and one training sequence of
# {glue:text}`sticky.n_positions` positions ({glue:text}`sticky.deep_n_seeds` seed), the deep model
# memorises its training sequence: training loss {glue:text}`sticky.deep_train_loss:.4f` nats, accuracy
# {glue:text}`sticky.deep_train_accuracy:.3f`. On the held-out sequence its loss is
# {glue:text}`sticky.deep_test_loss:.3f` nats — **{glue:text}`sticky.deep_test_gap_to_hmin:.2f` nats above
# $H_{\min}$**, far worse than the uniform guess $\ln 8$ — with a confident mean predictive entropy of
# {glue:text}`sticky.deep_test_entropy:.3f` nats and test accuracy {glue:text}`sticky.deep_test_accuracy:.3f`.
# The test loss is lowest after {glue:text}`sticky.deep_best_test_step` steps
# ({glue:text}`sticky.deep_best_test_loss:.3f` nats, {glue:text}`sticky.deep_best_gap:.3f` above $H_{\min}$)
# and rises from there on. As specified — full-batch training on a single sequence — the deep variant
# measures memorisation, not Bayesian prediction; a deep experiment about the Bayes floor would draw a
# fresh sequence at every step.
#
# ## What reproduces
#
# - **The experiment, exactly.** With the script's data and initialisation reproduced draw for draw, the
#   paper's metric gives {glue:text}`sticky.speedup_paper_protocol:.2f`× on the paper's five seeds (paper:
#   2.3×), and {glue:text}`sticky.ci_point:.2f`× (95% interval {glue:text}`sticky.speedup_ci95_low:.2f`–{glue:text}`sticky.speedup_ci95_high:.2f`)
#   over twenty — close, though the twenty-seed interval stops just short of 2.3. After 1000 steps both schedules are still near $\ln 8$, far from $H_{\min}$.
# - **The interpretation does not survive the controls.** On the learning-rate surface the values are not
#   special: ×10 on the readout alone gives {glue:text}`sticky.speedup_readout_only:.2f`× and ×10 on the
#   routing weights alone {glue:text}`sticky.speedup_routing_only:.2f`×, against
#   {glue:text}`sticky.speedup_values_only:.2f`× for the paper's ×10 on the values; a larger learning rate
#   on every matrix is faster still; a genuine closed-form M-step is no faster than a gradient step on the
#   values of the same size; the longer value trajectories are the larger step, not a different dynamics.
#   The experiment shows that larger steps, on any of the head's weights, speed up the escape from the
#   initial plateau — it is not evidence for an M-step on the values, nor for the two-timescale EM reading
#   of chapter 4.
# - **Details worth knowing.** The script's chain has self-transition probability
#   {glue:text}`sticky.effective_self_prob_reference:.4f`, not 0.3; its "bits" are nats; the Bayes floor
#   of these noisy inputs is the forward filter's, slightly above $H_{\min}$. Trained longer, every
#   schedule reaches a held-out loss about 0.1 nats above $H_{\min}$ and then overfits its single training
#   sequence.
