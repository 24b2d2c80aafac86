"""Training schedules for the single head: SGD, the paper's "EM-like" step, a matched control, a true M-step.

Every schedule is one ``torch.optim.SGD`` with a parameter group per weight matrix plus a rule
for what goes into ``W_V.grad``; :func:`attention_dynamics.training.fit` does the rest. With ``N``
positions, ``u_i`` the error signal of the mean loss and ``ū_i = N u_i`` the per-position one
(the paper's Section 2), the schedules are:

- ``sgd`` — the paper's baseline: lr 0.01 on W_Q, W_K, W_V, W_O.
- ``em_like`` — the reference script's "EM-like" update: one backward pass, then lr 0.1 on W_V and
  0.01 on W_Q, W_K, W_O. Only the value step is larger; nothing is solved in closed form.
- ``sgd_matched`` — the control the paper lacks: lr 0.1 on every matrix. If ``em_like`` wins only
  because its steps are larger, this control wins too.
- ``m_step`` — a genuine closed-form M-step for the values. The attention weights alpha are the
  E-step's responsibilities. Each query i asks every value it reads to move against its error,
  to the target ``v_j − rho ū_i``; the M-step sets W_V to the exact minimiser of the
  responsibility-weighted least-squares objective

  ``J(W) = Σ_i Σ_j alpha_ij ‖Wᵀx_j − (v_j − rho ū_i)‖²``,

  namely ``W_V ← W_V − rho S⁻¹ ∇_{W_V}L`` with ``S = Σ_j N_j x_j x_jᵀ / N`` the
  responsibility-weighted second moment of the inputs (``N_j = Σ_i alpha_ij``, the soft counts).
  With a free vector per position it would be ``v_j ← v_j − rho Σ_i alpha_ij ū_i / N_j``: the
  Gaussian-mixture M-step written as a gradient step preconditioned by σ²/N_j (Xu & Jordan,
  1996), with ``rho`` in the role of the mixture variance σ². W_Q, W_K, W_O take an SGD step of
  0.01 from the same forward pass.

The closed form is :func:`value_m_step`; :func:`m_step_objective` is J itself, for checking. Its targets are
linearised (one gradient's worth of error per query), so it is a preconditioned gradient step; two step sizes
match it to the ×10 gradient step on the values (:func:`m_step_matched_rho`): equal norm of the first step,
or equal first-order decrease of the loss.

- ``exact_m_step`` — the genuine M-step: at the current attention (the E-step) and readout, W_V is set to the
  exact minimiser of the cross-entropy itself. The logits ``x̄_i W_V W_O`` (``x̄_i = Σ_j alpha_ij x_j``, the
  attended inputs) are linear in W_V, so the problem is convex (multinomial logistic regression of the
  targets on the attended inputs); :func:`exact_value_m_step` solves it by Newton's method with a line search.
  W_Q, W_K, W_O take an SGD step of 0.01 from the same forward pass.

Learning-rate ratio schedules (:func:`lr_ratio_schedule`) scale SGD's 0.01 by a factor per group:
``W_Q``+``W_K`` (routing), ``W_V`` (values) and ``W_O`` (readout). They are named
``lr_qk{a}_v{b}_o{c}`` and :func:`get_schedule` builds one from its name, so ``em_like`` is
``lr_qk1_v10_o1`` and ``sgd_matched`` is ``lr_qk10_v10_o10``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import torch

from ..core.settings import check_positive_int
from .head_engine import DEFAULT_QUERY_ROWS_PER_BLOCK, SingleHeadModule, closed_form_head_pass, identity_routing_pass

__all__ = [
    "DEFAULT_M_STEP_RHO",
    "Schedule",
    "SCHEDULES",
    "PAPER_SCHEDULES",
    "BASE_LR",
    "lr_ratio_schedule",
    "get_schedule",
    "make_optimizer",
    "responsibility_weighted_input_moment",
    "m_step_direction",
    "value_m_step",
    "m_step_objective",
    "make_backward",
    "warmup_cosine",
    "m_step_matched_rho",
    "attended_inputs",
    "value_cross_entropy",
    "exact_value_m_step",
]

#: The M-step's target distance rho (the mixture variance σ² of the analogy): 1, the variance of
#: the input noise. The chapter shows how the result depends on it.
DEFAULT_M_STEP_RHO = 1.0


@dataclass(frozen=True)
class Schedule:
    """A training schedule: SGD learning rates per matrix and how W_V is updated.

    ``value_update`` is ``"gradient"`` (``W_V ← W_V − value_lr ∇L``) or ``"m_step"`` (the closed-form
    M-step of the module docstring, with ``rho = value_lr``).
    """

    name: str
    label: str
    query_key_lr: float
    readout_lr: float
    value_lr: float
    value_update: str = "gradient"

    def __post_init__(self) -> None:
        if self.value_update not in ("gradient", "m_step", "exact_m_step"):
            raise ValueError(f"value_update must be 'gradient', 'm_step' or 'exact_m_step', got {self.value_update!r}")
        for name in ("query_key_lr", "readout_lr", "value_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")

    def with_rho(self, rho: float) -> "Schedule":
        """Return this M-step schedule with target distance ``rho``."""
        if self.value_update != "m_step":
            raise ValueError(f"schedule {self.name!r} has no M-step")
        return Schedule(self.name, f"M-step (ρ = {rho:g})", self.query_key_lr, self.readout_lr, rho, "m_step")


SCHEDULES: dict[str, Schedule] = {
    "sgd": Schedule("sgd", "SGD (lr 0.01)", 0.01, 0.01, 0.01),
    "em_like": Schedule("em_like", "EM-like (value lr 0.1)", 0.01, 0.01, 0.1),
    "sgd_matched": Schedule("sgd_matched", "SGD, lr 0.1 everywhere", 0.1, 0.1, 0.1),
    "m_step": Schedule("m_step", f"closed-form M-step (ρ = {DEFAULT_M_STEP_RHO:g})", 0.01, 0.01,
                       DEFAULT_M_STEP_RHO, "m_step"),
    "exact_m_step": Schedule("exact_m_step", "exact M-step over W_V", 0.01, 0.01, 1.0, "exact_m_step"),
}
#: The two schedules of the paper's experiment.
PAPER_SCHEDULES = ("sgd", "em_like")


#: SGD's learning rate in the paper's experiment; ratio schedules multiply it per group.
BASE_LR = 0.01
_RATIO_NAME = re.compile(r"^lr_qk([0-9.]+)_v([0-9.]+)_o([0-9.]+)$")


def lr_ratio_schedule(query_key: float, values: float, readout: float) -> Schedule:
    """Return the SGD schedule with learning rates ``BASE_LR`` × (``query_key``, ``values``, ``readout``).

    ``query_key`` scales W_Q and W_K, ``values`` W_V, ``readout`` W_O. The name is
    ``lr_qk{query_key:g}_v{values:g}_o{readout:g}``; (1, 1, 1) is ``sgd``, (1, 10, 1) ``em_like`` and
    (10, 10, 10) ``sgd_matched``, with the same learning rates.
    """
    ratios = (float(query_key), float(values), float(readout))
    if not all(r > 0 for r in ratios):
        raise ValueError(f"learning-rate ratios must be positive, got {ratios}")
    qk, v, o = ratios
    name = f"lr_qk{qk:g}_v{v:g}_o{o:g}"
    label = f"lr × ({qk:g}, {v:g}, {o:g}) on (W_Q+W_K, W_V, W_O)"
    return Schedule(name, label, round(BASE_LR * qk, 12), round(BASE_LR * o, 12), round(BASE_LR * v, 12))


def get_schedule(schedule: str | Schedule) -> Schedule:
    """Return the :class:`Schedule` named ``schedule`` (or ``schedule`` itself), with a clear error.

    Besides the names of :data:`SCHEDULES`, a name ``lr_qk{a}_v{b}_o{c}`` gives :func:`lr_ratio_schedule`.
    """
    if isinstance(schedule, Schedule):
        return schedule
    match = _RATIO_NAME.match(schedule) if isinstance(schedule, str) else None
    if match:
        return lr_ratio_schedule(*(float(g) for g in match.groups()))
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)} "
                         "or lr_qk{a}_v{b}_o{c}")
    return SCHEDULES[schedule]


def make_optimizer(model: SingleHeadModule, schedule: str | Schedule) -> torch.optim.SGD:
    """Return the plain SGD optimiser of ``schedule`` (one parameter group per learning rate)."""
    s = get_schedule(schedule)
    groups = [
        {"params": [model.W_Q, model.W_K], "lr": s.query_key_lr, "name": "query_key"},
        {"params": [model.W_O], "lr": s.readout_lr, "name": "readout"},
        {"params": [model.W_V], "lr": s.value_lr, "name": "values"},
    ]
    return torch.optim.SGD(groups, lr=s.query_key_lr)


def responsibility_weighted_input_moment(x: torch.Tensor, soft_counts: torch.Tensor) -> torch.Tensor:
    """Return S = Σ_j N_j x_j x_jᵀ / Σ_j N_j ``(d_in, d_in)``: the inputs' second moment under the responsibilities."""
    weighted = x * soft_counts[:, None]  # (T, d_in)
    return (x.T @ weighted) / soft_counts.sum()


def m_step_direction(x: torch.Tensor, grad_W_V: torch.Tensor, soft_counts: torch.Tensor) -> torch.Tensor:
    """Return S⁻¹ ∇_{W_V}L ``(d_in, d_v)``: the value gradient preconditioned by the responsibility-weighted moment.

    The solve is done in float64 (S is a small ``d_in × d_in`` matrix); the result has ``grad_W_V``'s dtype.
    """
    S = responsibility_weighted_input_moment(x.double(), soft_counts.double())  # (d_in, d_in)
    return torch.linalg.solve(S, grad_W_V.double()).to(grad_W_V.dtype)


def value_m_step(
    x: torch.Tensor, W_V: torch.Tensor, grad_W_V: torch.Tensor, soft_counts: torch.Tensor, rho: float
) -> torch.Tensor:
    """Return the closed-form M-step ``W_V − rho S⁻¹ ∇_{W_V}L`` ``(d_in, d_v)``, the minimiser of J (module doc).

    ``grad_W_V`` is the gradient of the *mean* loss over the T positions (so ``ū_i = T u_i``) and
    ``soft_counts`` ``(T,)`` are N_j = Σ_i alpha_ij.
    """
    return W_V - rho * m_step_direction(x, grad_W_V, soft_counts)


def m_step_objective(
    W: torch.Tensor, x: torch.Tensor, alpha: torch.Tensor, values: torch.Tensor, u_per_position: torch.Tensor, rho: float
) -> torch.Tensor:
    """Return J(W) = Σ_i Σ_j alpha_ij ‖Wᵀx_j − (v_j − rho ū_i)‖² (a scalar), computed densely.

    ``alpha`` ``(T, T)`` (query i, key j), ``values`` ``(T, d_v)`` the current v_j, ``u_per_position``
    ``(T, d_v)`` the per-position error signals ū_i. For checking :func:`value_m_step` on small T.
    """
    new_values = x @ W  # (T, d_v)
    targets = values[None, :, :] - rho * u_per_position[:, None, :]  # (T_i, T_j, d_v)
    sq = ((new_values[None, :, :] - targets) ** 2).sum(-1)  # (T_i, T_j)
    return (alpha * sq).sum()


def make_backward(
    schedule: str | Schedule, *, block_size: int = DEFAULT_QUERY_ROWS_PER_BLOCK, identity_routing: bool = False
) -> Callable[[SingleHeadModule, tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """Return the ``backward(model, (x, y))`` routine of ``schedule`` for :func:`attention_dynamics.training.fit`.

    It fills every ``.grad`` from the closed-form engine. For the M-step it puts ``S⁻¹ ∇_{W_V}L`` in
    ``W_V.grad``, so the optimiser's step of size rho on W_V *is* the closed-form M-step; for the exact M-step
    it puts ``(W_V − W_V*) / value_lr``, so the step lands on :func:`exact_value_m_step`'s minimiser.
    ``identity_routing``: the head's attention pinned to the identity
    (:func:`~attention_dynamics.training.head_engine.identity_routing_pass`; gradient schedules only).
    """
    s = get_schedule(schedule)
    if identity_routing and s.value_update != "gradient":
        raise ValueError(f"identity routing takes gradient schedules only, got {s.name!r} ({s.value_update})")

    def backward(model: SingleHeadModule, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        params = model.head_params()
        if identity_routing:
            result = identity_routing_pass(x, params, y)
        else:
            result = closed_form_head_pass(x, params, y, block_size=block_size)
        grads = dict(result.grads)
        if s.value_update == "m_step":
            grads["W_V"] = m_step_direction(x, grads["W_V"], result.soft_counts)
        elif s.value_update == "exact_m_step":
            # a step of size value_lr along (W_V − W_V*) / value_lr lands exactly on the minimiser W_V*
            target, _ = exact_value_m_step(attended_inputs(x, params), params.W_V, params.W_O, y)
            grads["W_V"] = ((params.W_V.double() - target) / s.value_lr).to(params.W_V.dtype)
        for name, grad in grads.items():
            getattr(model, name).grad = grad
        return result.loss

    return backward


def warmup_cosine(optimizer: torch.optim.Optimizer, steps: int, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Return a schedule with linear warm-up over ``warmup_steps`` and cosine decay to zero at ``steps``."""
    steps, warmup_steps = check_positive_int("steps", steps), check_positive_int("warmup_steps", warmup_steps)

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup_steps) * 0.5 * (1.0 + math.cos(math.pi * min(step, steps) / steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def m_step_matched_rho(x: torch.Tensor, grad_W_V: torch.Tensor, soft_counts: torch.Tensor, lr: float, *,
                       match: str) -> float:
    """Return the M-step's rho that matches a gradient step of size ``lr`` on W_V, at the given point.

    ``match="norm"``: ‖rho S⁻¹∇L‖ = ‖lr ∇L‖ (the same size of first step); ``match="decrease"``: the same
    first-order decrease of the loss, rho ⟨∇L, S⁻¹∇L⟩ = lr ‖∇L‖². They differ by the cosine between the two
    directions: rho_decrease = rho_norm / cos.
    """
    direction = m_step_direction(x, grad_W_V, soft_counts).double()
    g = grad_W_V.double()
    if match == "norm":
        return float(lr * torch.linalg.norm(g) / torch.linalg.norm(direction))
    if match == "decrease":
        return float(lr * (g * g).sum() / (g * direction).sum())
    raise ValueError(f"match must be 'norm' or 'decrease', got {match!r}")


def attended_inputs(x: torch.Tensor, params) -> torch.Tensor:
    """Return x̄ ``(T, d_in)``, x̄_i = Σ_{j ≤ i} alpha_ij x_j: the inputs mixed by the head's causal attention.

    The head's context is ``g_i = x̄_i W_V``, so at fixed attention the logits ``x̄_i W_V W_O`` are linear in W_V.
    Computed densely in ``x``'s dtype (float32 in training: the M-step then minimises exactly for these x̄).
    """
    dt = x.dtype
    scores = (x @ params.W_Q.to(dt)) @ (x @ params.W_K.to(dt)).T / math.sqrt(params.W_Q.shape[1])  # (T, T)
    T = x.shape[0]
    scores.masked_fill_(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ x


def value_cross_entropy(W_V: torch.Tensor, xbar: torch.Tensor, W_O: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the mean cross-entropy (nats) of the logits ``xbar W_V W_O`` against ``y``: the M-step's objective."""
    return torch.nn.functional.cross_entropy(xbar @ W_V @ W_O, y)


def exact_value_m_step(xbar: torch.Tensor, W_V: torch.Tensor, W_O: torch.Tensor, y: torch.Tensor, *,
                       max_iter: int = 50, tol: float = 1e-10) -> tuple[torch.Tensor, dict[str, float]]:
    """Return ``(W_V*, info)``: the W_V ``(d_in, d_v)`` float64 that minimises :func:`value_cross_entropy` exactly.

    The loss depends on W_V only through ``M = W_V W_O`` ``(d_in, C)``; it is convex in M (logistic regression
    of the targets on the attended inputs). Newton's method runs in M from the current ``W_V W_O``, with the
    Hessian's pseudo-inverse (a common shift of all logits changes nothing, so the Hessian is singular along
    those directions) and a backtracking line search, until the largest gradient entry is below ``tol``. Then
    ``W_V* = W_V + (M* − W_V W_O) W_O⁺``, the smallest change of W_V that realises M* (W_O must have full
    column rank). ``info``: ``iterations``, ``grad_max`` (at M*), ``loss`` (nats, at W_V*).
    """
    X, W, Wo = xbar.double(), W_V.double(), W_O.double()
    N, C = X.shape[0], Wo.shape[1]
    if torch.linalg.matrix_rank(Wo) < C:
        raise ValueError("W_O must have full column rank for every M = W_V W_O to be reachable")
    Y = torch.nn.functional.one_hot(y, C).double()
    M = W @ Wo  # (d_in, C)

    def loss_grad(M: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
        logits = X @ M
        logp = torch.log_softmax(logits, -1)
        p = logp.exp()
        return float(-(Y * logp).sum() / N), X.T @ (p - Y) / N, p

    loss, grad, p = loss_grad(M)
    iterations = 0
    while float(grad.abs().max()) > tol and iterations < max_iter:
        # Hessian of the mean cross-entropy in M: Σ_i (x̄_i x̄_iᵀ) ⊗ (diag p_i − p_i p_iᵀ) / N, (d_in·C, d_in·C)
        cov = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (N, C, C)
        H = torch.einsum("ia,ib,icd->acbd", X, X, cov).reshape(M.numel(), M.numel()) / N
        step = -(torch.linalg.pinv(H, hermitian=True, rtol=1e-12) @ grad.reshape(-1)).reshape(M.shape)
        slope = float((grad * step).sum())
        t = 1.0
        while True:  # Armijo backtracking: the full Newton step is taken near the minimum
            new_loss, new_grad, new_p = loss_grad(M + t * step)
            if new_loss <= loss + 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        M, loss, grad, p = M + t * step, new_loss, new_grad, new_p
        iterations += 1
    target = W + (M - W @ Wo) @ torch.linalg.pinv(Wo)
    return target, {"iterations": iterations, "grad_max": float(grad.abs().max()),
                    "loss": float(value_cross_entropy(target, X, Wo, y))}
