"""Chapter 2's checks of the gradient laws: its settings, random heads, claims with their tolerances, glue and figures.

The laws themselves are :mod:`attention_dynamics.gradients`; this module draws the heads the chapter checks
them on, records the ledger's claims and draws the chapter's figures. Every random draw comes from the
``generator`` the chapter passes in, in the chapter's order, so a chapter that calls these functions in
sequence sees the numbers it would see with the code inline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .. import attention, claims, gradients
from ..attention import HeadForward

HEAD = {"d_in": 20, "d_k": 10, "d_v": 15, "n_classes": 8}  # the paper's sticky-chain head (PAPER.md §4.1)
INIT_STDS = (0.1, 0.3, 1.0)  # 0.1 is the paper's initialisation, 1.0 gives nearly one-hot attention
DTYPE = torch.float64  # the checks are about exactness: float64 on the CPU, whatever the device
RELATIVE_TOL = 1e-12  # a law's error may be at most this fraction of the gradient's largest entry
ETA = 0.01  # the step of the weight-space checks
STICKY_SEED = 42  # chapter 5's seed-42 sequence and initialisation
SETTINGS = {  # exact checks: the scale changes how many heads and how long their sequences are
    "fast": {"n_draws": 3, "batch": 2, "T": 16, "fd_T": 4, "sweep_T": 16, "n_temperatures": 11,
             "log10_beta_max": 3, "ws_steps": 100, "ws_every": 50},
    "book": {"n_draws": 24, "batch": 4, "T": 64, "fd_T": 8, "sweep_T": 64, "n_temperatures": 41,
             "log10_beta_max": 3, "ws_steps": 1000, "ws_every": 200},
    # 2000 queries include near-ties between their top two keys: one-hot needs a larger β
    "paper": {"n_draws": 6, "batch": 1, "T": 2000, "fd_T": 8, "sweep_T": 2000, "n_temperatures": 41,
              "log10_beta_max": 5, "ws_steps": 1000, "ws_every": 100},
}
LAW_CLAIMS = [  # (claim id, checks of gradients.law_discrepancies, what is compared)
    ("gradients.score_law_max_abs_err", ["autograd/scores"], "routing law ∂L/∂s vs autograd"),
    ("gradients.value_law_max_abs_err", ["autograd/v"], "value law ∂L/∂v vs autograd"),
    ("gradients.query_key_max_abs_err", ["autograd/q", "autograd/k"], "query and key laws vs autograd"),
    ("gradients.param_grads_max_abs_err", ["autograd/W_Q", "autograd/W_K", "autograd/W_V", "autograd/W_O"],
     "W_Q, W_K, W_V, W_O from the laws alone vs autograd"),
    ("gradients.sdpa_agreement_max_abs_err", ["fused/q", "fused/k", "fused/v"],
     "query, key and value laws vs the backward of PyTorch's fused scaled_dot_product_attention kernel"),
]


def random_problem(generator: torch.Generator, std: float, shape: Sequence[int], head: Mapping[str, int] = HEAD):
    """Return ``(x, params, y)`` (the argument order of the laws' checks): a float64 head of sizes ``head`` with
    weights of std ``std``, inputs of shape ``(*shape, d_in)`` from N(0, 1) and uniform targets of shape ``shape``,
    drawn from ``generator`` in the order head, inputs, targets."""
    params = attention.init_single_head(**head, std=std, generator=generator, dtype=DTYPE)
    x = torch.randn(*shape, head["d_in"], generator=generator, dtype=DTYPE)
    y = torch.randint(0, head["n_classes"], tuple(shape), generator=generator)
    return x, params, y


# --------------------------------------------------------------------------------------------
# The worked example
# --------------------------------------------------------------------------------------------


@dataclass
class WorkedExample:
    """One small causal head (4 → 3/3/3 → 3, T = 8, weights from N(0, 1)) and its routing law, entry by entry.

    ``advantage`` and ``score_grad`` have shape ``(T, T)`` (nats per unit of weight / of score);
    ``mask`` is True where a key is causally masked.
    """

    forward: HeadForward
    advantage: torch.Tensor
    score_grad: torch.Tensor
    mask: torch.Tensor

    def best_pair(self) -> tuple[int, int]:
        """Return ``(query, key)`` of the largest advantage."""
        return divmod(int(self.advantage.argmax()), self.advantage.shape[-1])


def worked_example(generator: torch.Generator, T: int = 8) -> WorkedExample:
    """Return the chapter's worked example: a small causal head with std-1 weights on ``T`` random inputs."""
    params = attention.init_single_head(4, 3, 3, 3, std=1.0, generator=generator, dtype=DTYPE)
    x = torch.randn(T, 4, generator=generator, dtype=DTYPE)
    y = torch.randint(0, 3, (T,), generator=generator)
    fwd = attention.single_head_forward(x, params, y)
    return WorkedExample(fwd, gradients.advantage(fwd.alpha, fwd.b),
                         gradients.advantage_routing_gradient(fwd.alpha, fwd.b), attention.causal_mask(T))


def plot_worked_example(example: WorkedExample):
    """Return ``(fig, axes)``: attention, compatibility, advantage and routing gradient of the worked example (2 × 2)."""
    from .. import plotting

    fig, axes = plotting.new_figure(2, 2, width=3.7, height=3.2)
    fwd, m = example.forward, example.mask
    plotting.plot_matrix(axes[0, 0], fwd.alpha, mask=m, title=r"attention $\alpha_{ij}$", cbar_label="weight")
    plotting.plot_matrix(axes[0, 1], fwd.b, mask=m, diverging=True, title=r"compatibility $b_{ij} = u_i \cdot v_j$",
                         cbar_label="nats per unit of weight")
    plotting.plot_matrix(axes[1, 0], example.advantage, mask=m, diverging=True,
                         title=r"advantage $A_{ij} = \mathbb{E}_{\alpha_i}[b] - b_{ij}$",
                         cbar_label="nats per unit of weight")
    plotting.plot_matrix(axes[1, 1], example.score_grad, mask=m, diverging=True,
                         title=r"routing gradient $\partial L / \partial s_{ij}$", cbar_label="nats per unit of score")
    fig.suptitle(f"The routing law on a worked example (causal head, T = {m.shape[-1]})")
    return fig, axes


def glue_worked_example(example: WorkedExample) -> None:
    """Glue the worked example's largest advantage, its query, key, weight and score step for the prose."""
    query, key = example.best_pair()
    claims.glue("gradients.example_best_query", query)
    claims.glue("gradients.example_best_key", key)
    claims.glue("gradients.example_best_advantage", example.advantage.max().item())
    claims.glue("gradients.example_best_weight", example.forward.alpha[query, key].item())
    claims.glue("gradients.example_best_score_step", -example.score_grad[query, key].item())


# --------------------------------------------------------------------------------------------
# Verified four ways
# --------------------------------------------------------------------------------------------


def law_check_draws(cfg: Mapping[str, Any], generator: torch.Generator) -> list[dict[str, tuple[float, float]]]:
    """Return one :func:`gradients.law_discrepancies` report per random head (``cfg.n_draws`` heads of
    ``cfg.batch`` sequences of ``cfg.T`` positions, their weight scales cycling through :data:`INIT_STDS`)."""
    return [gradients.law_discrepancies(*random_problem(generator, INIT_STDS[draw % len(INIT_STDS)],
                                                        (cfg["batch"], cfg["T"])))
            for draw in range(cfg["n_draws"])]


def worst(draws: Sequence[Mapping[str, tuple[float, float]]], *checks: str) -> tuple[float, float]:
    """Return ``(largest error, largest scale)`` over the given checks and all heads of ``draws``."""
    return (max(d[c][0] for d in draws for c in checks), max(d[c][1] for d in draws for c in checks))


def verification_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Return the settings of the random-head checks, as the ledger's claims record them."""
    return {"seed": seed, "n_heads": cfg["n_draws"], "batch": cfg["batch"], "T": cfg["T"], **HEAD,
            "init_stds": INIT_STDS, "reduction": "mean", "causal": True, "dtype": "float64"}


def record_law_claims(draws, params: Mapping[str, Any]) -> dict[str, claims.Claim]:
    """Return the recorded claims of :data:`LAW_CLAIMS` (each law's largest error over ``draws``, with the
    tolerance 1e-12 × the largest gradient entry), gluing each error relative to that entry as ``<id>_relative``."""
    recorded = {}
    for claim_id, checks, what in LAW_CLAIMS:
        error, scale = worst(draws, *checks)
        recorded[claim_id] = claims.record(
            claim_id, error, unit="nats per unit", expected=0.0, tolerance=RELATIVE_TOL * scale,
            description=f"max abs error, {what} (float64; tolerance 1e-12 × the largest gradient entry)",
            params={**params, "gradient_scale": scale})
        claims.glue(claim_id + "_relative", error / scale)
    return recorded


def finite_difference_check(cfg: Mapping[str, Any], generator: torch.Generator, *, seed: int) -> dict[str, float]:
    """Return ``{gradient: max|law − central difference| / max|central difference|}`` on one random head of
    ``cfg.fd_T`` positions, and record the largest as ``gradients.finite_difference_max_rel_err`` (tolerance 1e-7)."""
    report = gradients.law_discrepancies(*random_problem(generator, 0.5, (cfg["fd_T"],)), finite_differences=True)
    relative = {c.split("/")[1]: err / scale for c, (err, scale) in report.items() if c.startswith("finite_difference/")}
    claims.record(
        "gradients.finite_difference_max_rel_err", max(relative.values()), unit="", expected=0.0, tolerance=1e-7,
        description="max over the 8 gradients of max|law − central difference| / max|central difference| "
                    "(fourth-order stencil, h = 1e-3, float64)",
        params={"seed": seed, "T": cfg["fd_T"], **HEAD, "init_std": 0.5, "step": 1e-3, "stencil_order": 4,
                "dtype": "float64"})
    return relative


def record_structure_claims(draws, params: Mapping[str, Any]) -> tuple[float, float, float]:
    """Return ``(largest row sum, largest term |α_ij b_ij|, largest masked entry)`` of the routing gradient over
    ``draws``, recording the first and last as claims (expected 0) and gluing the term scale."""
    row_error, row_scale = worst(draws, "row_sum")
    masked_error, _ = worst(draws, "masked_scores")
    claims.glue("gradients.row_sum_term_scale", row_scale)
    claims.record("gradients.row_sum_max_abs", row_error, unit="nats per unit of score", expected=0.0,
                  tolerance=RELATIVE_TOL * row_scale,
                  description="max over rows of |Σ_j ∂L/∂s_ij| (expected 0; tolerance 1e-12 × the largest term "
                              "|α_ij b_ij|)", params={**params, "term_scale": row_scale})
    claims.record("gradients.masked_score_grad_max_abs", masked_error, unit="nats per unit of score",
                  expected=0.0, tolerance=0.0,
                  description="max |∂L/∂s_ij| over causally masked entries (exactly 0 by the gate α_ij = 0)",
                  params=params)
    return row_error, row_scale, masked_error


# --------------------------------------------------------------------------------------------
# Why routing freezes first
# --------------------------------------------------------------------------------------------


def sweep_temperatures(cfg: Mapping[str, Any]) -> np.ndarray:
    """Return the inverse temperatures of the sweep: ``cfg.n_temperatures`` log-spaced from 1e-2 to
    10^``cfg.log10_beta_max``, with β = 1 (the head as initialised) always included."""
    return np.union1d(np.logspace(-2, cfg["log10_beta_max"], cfg["n_temperatures"]), [1.0])


def temperature_sweep(cfg: Mapping[str, Any], generator: torch.Generator) -> gradients.InverseTemperatureSweep:
    """Return :func:`gradients.inverse_temperature_sweep` of one random head (std 0.5, ``cfg.sweep_T`` positions)
    over :func:`sweep_temperatures`."""
    return gradients.inverse_temperature_sweep(*random_problem(generator, 0.5, (cfg["sweep_T"],)),
                                               sweep_temperatures(cfg))


def plot_temperature_sweep(sweep: gradients.InverseTemperatureSweep):
    """Return ``(fig, axes)``: (a) attention entropy and largest weight against β; (b) routing and value gradient
    norms and the entropy bound against the attention entropy (log–log, entropy falling to the right)."""
    from .. import plotting

    fig, axes = plotting.new_figure(2, width=4.2, height=3.4)
    ax = axes[0]
    ax.plot(sweep.inverse_temperature, sweep.attention_entropy, color=plotting.PALETTE[2],
            label="attention entropy (nats)")
    ax.plot(sweep.inverse_temperature, sweep.max_attention, color=plotting.PALETTE[4], ls="--",
            label=r"largest weight $\alpha^\star_i$")
    ax.set(xscale="log", xlabel=r"inverse temperature $\beta$ (scores $\times\, \beta$)", ylabel="mean over queries",
           title="Sharpening the attention")
    ax.legend(loc="center left")
    ax = axes[1]
    ax.plot(sweep.attention_entropy, sweep.score_grad_norm, color=plotting.PALETTE[0], marker=".",
            label=r"routing $\|\partial L/\partial s\|$")
    ax.plot(sweep.attention_entropy, sweep.value_grad_norm, color=plotting.PALETTE[1], marker=".",
            label=r"values $\|\partial L/\partial v\|$")
    ax.plot(sweep.attention_entropy, sweep.score_grad_bound, color=plotting.PALETTE[0], ls=":",
            label=r"entropy bound $\Sigma_i\, 2 H(\alpha_i) R_i$")
    ax.set(xscale="log", yscale="log", xlabel="mean attention entropy (nats, log scale)",
           ylabel="gradient norm (nats per unit)", title="Routing gradient vanishes, value gradient stays")
    ax.set_ylim(1e-10, None)
    ax.invert_xaxis()
    ax.legend(loc="lower left")
    return fig, axes



def entropy_bound_max_ratio(l1, bound) -> float:
    """Return the largest ratio of Σ|∂L/∂s| to its entropy bound over a sweep (the lemma says ≤ 1).

    Where the bound is 0 (one-hot attention: zero entropy) the lemma forces the gradient to 0 too; such a
    point counts as ratio 0 when it does and as ``inf`` (a violation) when it does not, instead of 0/0.
    """
    l1, bound = np.asarray(l1, dtype=np.float64), np.asarray(bound, dtype=np.float64)
    safe = np.where(bound > 0, bound, 1.0)
    return float(np.max(np.where(bound > 0, l1 / safe, np.where(l1 > 0, np.inf, 0.0))))

def record_sweep_claims(sweep: gradients.InverseTemperatureSweep, cfg: Mapping[str, Any], *, seed: int) -> None:
    """Record the sweep's three claims (routing gradient vanishes, value gradient does not, the entropy bound
    holds) and glue the entropies and β the prose cites."""
    betas = sweep.inverse_temperature
    at_one = int(np.flatnonzero(betas == 1.0)[0])  # β = 1: the head as initialised
    params = {"seed": seed, "T": cfg["sweep_T"], **HEAD, "init_std": 0.5, "beta_min": float(betas[0]),
              "beta_max": float(betas[-1]), "n_temperatures": cfg["n_temperatures"], "dtype": "float64"}
    claims.record("gradients.one_hot_score_grad_ratio", sweep.score_grad_norm[-1] / sweep.score_grad_norm.max(),
                  unit="", upper=1e-6, params=params,
                  description="‖∂L/∂s‖ at the sharpest attention (β = β_max) / its largest value over the sweep "
                              "(target: vanishes)")
    claims.record("gradients.one_hot_value_grad_ratio", sweep.value_grad_norm[-1] / sweep.value_grad_norm[at_one],
                  unit="", lower=0.5, params=params,
                  description="‖∂L/∂v‖ at the sharpest attention (β = β_max) / its value at β = 1 (target: does "
                              "not vanish)")
    claims.record("gradients.entropy_bound_max_ratio", entropy_bound_max_ratio(sweep.score_grad_l1, sweep.score_grad_bound),
                  unit="", upper=1.0, params=params,
                  description="max over β of Σ_ij |∂L/∂s_ij| / Σ_i 2 H(α_i) R_i (the lemma says ≤ 1)")
    claims.glue("gradients.sweep_entropy_max", sweep.attention_entropy.max())
    claims.glue("gradients.sweep_entropy_min", sweep.attention_entropy.min())
    claims.glue("gradients.sweep_peak_entropy", sweep.attention_entropy[np.argmax(sweep.score_grad_norm)])
    claims.glue("gradients.sweep_beta_max", betas[-1])


# --------------------------------------------------------------------------------------------
# The laws in weight space
# --------------------------------------------------------------------------------------------


def weight_step_checks(cfg: Mapping[str, Any], generator: torch.Generator) -> tuple[dict, list[dict]]:
    """Return ``(sticky, random)``: :func:`gradients.weight_step_check` (step :data:`ETA`) on the sticky-chain head
    at initialisation (chapter 5's seed-42 sequence), and on ``cfg.n_draws`` random heads (std 0.5, ``cfg.T``
    positions)."""
    from ..tasks import sticky_chain
    from .em_vs_sgd import initial_head

    data = sticky_chain.make_sticky_chain_data(STICKY_SEED, length=2000)
    sticky = gradients.weight_step_check(data.x, initial_head(STICKY_SEED, dtype=torch.float64), data.y, eta=ETA)
    random = [gradients.weight_step_check(*random_problem(generator, 0.5, (cfg["T"],)), eta=ETA)
              for _ in range(cfg["n_draws"])]
    return sticky, random


def record_weight_step_claims(sticky: Mapping[str, float], random: Sequence[Mapping[str, float]],
                              cfg: Mapping[str, Any], *, seed: int) -> dict[str, float]:
    """Record the weight-space claims (the formulas equal a real step; the free-activation picture's sign agreement
    and value cosine on the sticky head), glue the random heads' summaries, and return the sticky head's measures."""
    checks = [sticky, *random]
    claims.glue("gradients.ws_random_T", cfg["T"])
    params = {"eta": ETA, "sticky_seed": STICKY_SEED, "n_random_heads": cfg["n_draws"], "T_random": cfg["T"],
              "head": HEAD, "random_init_std": 0.5, "dtype": "float64", "seed": seed}
    for kind in ("value", "score"):
        claims.record(
            f"gradients.weight_step_{kind}_max_abs_err", max(c[f"{kind}_err"] for c in checks), unit="",
            description=f"max |formula − one autograd step| of the {kind} change through the weights "
                        "(Gram-mixed forms; tolerance 1e-12 × the largest change), float64",
            expected=0.0, tolerance=1e-12 * max(c[f"{kind}_scale"] for c in checks), params=params)
    claims.record("dynamics.score_sign_agreement_fraction", sticky["sign_agreement"], unit="fraction",
                  description="sticky-chain head at initialisation, one step on W_Q, W_K: share of attended "
                              "pairs whose attention moves with the sign of their advantage (free scores: 1)",
                  params=params)
    claims.record("dynamics.value_step_cosine", sticky["value_cosine"], unit="cosine",
                  description="sticky-chain head at initialisation: cosine between the value law's Δv and "
                              "the actual Δv of one step on W_V (free values: 1)", params=params)
    claims.glue("gradients.ws_random_sign_mean", float(np.mean([c["sign_agreement"] for c in random])))
    claims.glue("gradients.ws_random_cosine_mean", float(np.mean([c["value_cosine"] for c in random])))
    claims.glue("gradients.ws_random_cosine_min", min(c["value_cosine"] for c in random))
    claims.glue("gradients.ws_random_cosine_max", max(c["value_cosine"] for c in random))
    return {name: value for name, value in sticky.items() if "err" not in name and "scale" not in name}


def weight_step_traces(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Return :func:`head_training.weight_step_along_training` of the sticky head under the paper's SGD and EM-like
    schedules (``cfg.ws_steps`` steps, measured every ``cfg.ws_every``)."""
    from .head_training import weight_step_along_training

    return {name: weight_step_along_training(STICKY_SEED, schedule=name, steps=cfg["ws_steps"],
                                             every=cfg["ws_every"], eta=ETA)
            for name in ("sgd", "em_like")}


def glue_weight_step_traces(traces: Mapping[str, Mapping[str, Any]], cfg: Mapping[str, Any]) -> None:
    """Glue, per schedule, the range of the sign agreement and value cosine and the final loss along training,
    and the orthonormal reference's sign range and largest |cosine − 1|."""
    claims.glue("ch2.ws_steps", cfg["ws_steps"])
    claims.glue("ch2.ws_every", cfg["ws_every"])
    for name, tr in traces.items():
        for key, short in (("sign_agreement", "sign"), ("value_cosine", "cosine")):
            claims.glue(f"ch2.ws_{name}_{short}_min", min(tr[key]))
            claims.glue(f"ch2.ws_{name}_{short}_max", max(tr[key]))
        claims.glue(f"ch2.ws_{name}_loss_end", tr["loss"][-1])
    claims.glue("ch2.ws_ref_sign_min", min(min(t["ref_sign_agreement"]) for t in traces.values()))
    claims.glue("ch2.ws_ref_sign_max", max(max(t["ref_sign_agreement"]) for t in traces.values()))
    claims.glue("ch2.ws_ref_cosine_err", max(abs(c - 1) for t in traces.values() for c in t["ref_value_cosine"]))
