"""Chapter 2's computations: the worked example, the random heads the laws are checked on, the inverse-temperature
sweep and the weight-space checks along training of the sticky head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ...core.seeding import stream, torch_generator
from ...models.single_head import SingleHeadModule, initial_head
from ...science import attention, gradients, weight_space
from ...science.attention import HeadForward
from ...tasks import sticky_chain
from ...training import fit
from ...training.schedules import get_schedule, make_backward, make_optimizer
from .settings import DTYPE, ETA, HEAD, INIT_STDS, STICKY_SEED, GradientLawsSettings

__all__ = [
    "random_problem",
    "WorkedExample",
    "worked_example",
    "law_check_draws",
    "worst",
    "finite_difference_errors",
    "sweep_temperatures",
    "temperature_sweep",
    "entropy_bound_max_ratio",
    "weight_step_checks",
    "weight_step_traces",
    "weight_step_along_training",
]


def random_problem(generator: torch.Generator, std: float, shape: Sequence[int], head: Mapping[str, int] = HEAD):
    """Return ``(x, params, y)`` (the argument order of the laws' checks): a float64 head of sizes ``head`` with
    weights of std ``std``, inputs of shape ``(*shape, d_in)`` from N(0, 1) and uniform targets of shape ``shape``,
    drawn from ``generator`` in the order head, inputs, targets."""
    params = attention.init_single_head(**head, std=std, generator=generator, dtype=DTYPE)
    x = torch.randn(*shape, head["d_in"], generator=generator, dtype=DTYPE)
    y = torch.randint(0, head["n_classes"], tuple(shape), generator=generator)
    return x, params, y


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


def law_check_draws(cfg: GradientLawsSettings, generator: torch.Generator) -> list[dict[str, tuple[float, float]]]:
    """Return one :func:`gradients.law_discrepancies` report per random head (``cfg.n_draws`` heads of
    ``cfg.batch`` sequences of ``cfg.T`` positions, their weight scales cycling through :data:`INIT_STDS`)."""
    return [gradients.law_discrepancies(*random_problem(generator, INIT_STDS[draw % len(INIT_STDS)],
                                                        (cfg.batch, cfg.T)))
            for draw in range(cfg.n_draws)]


def worst(draws: Sequence[Mapping[str, tuple[float, float]]], *checks: str) -> tuple[float, float]:
    """Return ``(largest error, largest scale)`` over the given checks and all heads of ``draws``."""
    return (max(d[c][0] for d in draws for c in checks), max(d[c][1] for d in draws for c in checks))


def finite_difference_errors(cfg: GradientLawsSettings, generator: torch.Generator) -> dict[str, float]:
    """Return ``{gradient: max|law − central difference| / max|central difference|}`` on one random head of
    ``cfg.fd_T`` positions (std 0.5; fourth-order stencil, h = 1e-3, float64)."""
    report = gradients.law_discrepancies(*random_problem(generator, 0.5, (cfg.fd_T,)), finite_differences=True)
    return {c.split("/")[1]: err / scale for c, (err, scale) in report.items() if c.startswith("finite_difference/")}


def sweep_temperatures(cfg: GradientLawsSettings) -> np.ndarray:
    """Return the inverse temperatures of the sweep: ``cfg.n_temperatures`` log-spaced from 1e-2 to
    10^``cfg.log10_beta_max``, with β = 1 (the head as initialised) always included."""
    return np.union1d(np.logspace(-2, cfg.log10_beta_max, cfg.n_temperatures), [1.0])


def temperature_sweep(cfg: GradientLawsSettings, generator: torch.Generator) -> gradients.InverseTemperatureSweep:
    """Return :func:`gradients.inverse_temperature_sweep` of one random head (std 0.5, ``cfg.sweep_T`` positions)
    over :func:`sweep_temperatures`."""
    return gradients.inverse_temperature_sweep(*random_problem(generator, 0.5, (cfg.sweep_T,)),
                                               sweep_temperatures(cfg))


def entropy_bound_max_ratio(l1, bound) -> float:
    """Return the largest ratio of Σ|∂L/∂s| to its entropy bound over a sweep (the lemma says ≤ 1).

    Where the bound is 0 (one-hot attention: zero entropy) the lemma forces the gradient to 0 too; such a
    point counts as ratio 0 when it does and as ``inf`` (a violation) when it does not, instead of 0/0.
    """
    l1, bound = np.asarray(l1, dtype=np.float64), np.asarray(bound, dtype=np.float64)
    safe = np.where(bound > 0, bound, 1.0)
    return float(np.max(np.where(bound > 0, l1 / safe, np.where(l1 > 0, np.inf, 0.0))))


def weight_step_checks(cfg: GradientLawsSettings, generator: torch.Generator) -> tuple[dict, list[dict]]:
    """Return ``(sticky, random)``: :func:`weight_space.weight_step_check` (step :data:`ETA`) on the sticky-chain head
    at initialisation (chapter 5's seed-42 sequence), and on ``cfg.n_draws`` random heads (std 0.5, ``cfg.T``
    positions)."""
    data = sticky_chain.make_sticky_chain_data(STICKY_SEED, length=2000)
    sticky = weight_space.weight_step_check(data.x, initial_head(STICKY_SEED, dtype=torch.float64), data.y, eta=ETA)
    random = [weight_space.weight_step_check(*random_problem(generator, 0.5, (cfg.T,)), eta=ETA)
              for _ in range(cfg.n_draws)]
    return sticky, random


def weight_step_traces(cfg: GradientLawsSettings) -> dict[str, dict[str, Any]]:
    """Return :func:`weight_step_along_training` of the sticky head under the paper's SGD and EM-like
    schedules (``cfg.ws_steps`` steps, measured every ``cfg.ws_every``)."""
    return {name: weight_step_along_training(STICKY_SEED, schedule=name, steps=cfg.ws_steps,
                                             every=cfg.ws_every, eta=ETA)
            for name in ("sgd", "em_like")}


def weight_step_along_training(
    seed: int = 42, *, schedule: str = "sgd", steps: int = 1000, every: int = 100, eta: float = 0.01,
    length: int = 2000,
) -> dict[str, Any]:
    """Return how far the free-activation laws are from a real weight step, along training of the sticky head.

    The paper's sticky-chain head (chapter 5; the sticky-chain head's
    data, initialisation and ``schedule``) is trained for ``steps`` steps; every ``every`` steps and at
    the end, :func:`attention_dynamics.science.weight_space.weight_step_check` takes one step of size ``eta`` on
    its weights (float64) and returns the share of attended pairs whose attention moves with the sign of
    their advantage (``sign_agreement``) and the cosine of the law's Δv with the actual one
    (``value_cosine``). The same is measured on a reference input set where the two value pictures
    coincide: ``d_in`` orthonormal inputs (``ref_*``; labels: the sequence's first ``d_in`` targets).
    Returns lists keyed ``steps``, ``loss``, ``sign_agreement``, ``value_cosine``,
    ``ref_sign_agreement``, ``ref_value_cosine``, and ``settings``.
    """
    sched = get_schedule(schedule)
    data = sticky_chain.make_sticky_chain_data(seed, length=length)
    model = SingleHeadModule(initial_head(seed))
    d_in = data.x.shape[-1]
    basis = torch.linalg.qr(torch.randn(d_in, d_in, generator=torch_generator(stream(seed, "inputs")), dtype=torch.float64))[0]
    ref_y = data.y[:d_in]

    def measure(step: int, m: SingleHeadModule, loss: float) -> dict[str, Any]:
        params = m.head_params()
        real = weight_space.weight_step_check(data.x, params, data.y, eta=eta)
        ref = weight_space.weight_step_check(basis, params, ref_y, eta=eta)
        return {"sign_agreement": real["sign_agreement"], "value_cosine": real["value_cosine"],
                "ref_sign_agreement": ref["sign_agreement"], "ref_value_cosine": ref["value_cosine"]}

    history = fit(model, lambda step: (data.x, data.y), steps=steps, optimizer=make_optimizer(model, sched),
                  backward=make_backward(sched), callback=measure, callback_steps=range(0, steps, every))
    recs = history.records
    losses = list(history.losses)
    out: dict[str, Any] = {"steps": [r["step"] for r in recs],
                           "loss": [losses[min(r["step"], steps - 1)] for r in recs]}
    for key in ("sign_agreement", "value_cosine", "ref_sign_agreement", "ref_value_cosine"):
        out[key] = [r[key] for r in recs]
    out["settings"] = dict(seed=seed, schedule=sched.name, steps=steps, every=every, eta=eta, length=length)
    return out
