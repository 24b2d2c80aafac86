"""Chapter 2's figures: the routing law on the worked example, the inverse-temperature sweep, and the weight-space
checks along training."""

from __future__ import annotations

from typing import Any

from ...core import plotting
from ...science import gradients
from ...training.schedules import SCHEDULES
from .runs import WorkedExample

__all__ = [
    "plot_worked_example",
    "plot_temperature_sweep",
    "plot_weight_step_along_training",
]


def plot_worked_example(example: WorkedExample):
    """Return the figure: attention, compatibility, advantage and routing gradient of the worked example (2 × 2)."""
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
    return fig


def plot_temperature_sweep(sweep: gradients.InverseTemperatureSweep):
    """Return the figure: (a) attention entropy and largest weight against β; (b) routing and value gradient
    norms and the entropy bound against the attention entropy (log–log, entropy falling to the right)."""
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
    return fig


def plot_weight_step_along_training(traces: dict[str, dict[str, Any]]):
    """Return the figure of :func:`weight_step_along_training` traces (one colour per schedule): (a) the share of
    attended pairs whose attention moves with the advantage, (b) the cosine of the value law's step with the actual
    one; solid on the sticky chain, dashed on orthonormal inputs; the legend below both panels."""
    fig, axes = plotting.new_figure(2, width=4.2, height=3.1)
    for name, tr in traces.items():
        colour = plotting.schedule_color(name)
        label = SCHEDULES[name].label if name in SCHEDULES else name
        axes[0].plot(tr["steps"], tr["sign_agreement"], color=colour, marker="o", ms=3, label=f"{label}: sticky chain")
        axes[0].plot(tr["steps"], tr["ref_sign_agreement"], color=colour, ls="--", label=f"{label}: orthonormal inputs")
        axes[1].plot(tr["steps"], tr["value_cosine"], color=colour, marker="o", ms=3)
        axes[1].plot(tr["steps"], tr["ref_value_cosine"], color=colour, ls="--")
    axes[0].axhline(0.5, color="grey", lw=0.8)
    axes[0].set(title="attention moves with the advantage", xlabel="training step",
                ylabel="share of attended pairs", ylim=(0.3, 1.02))
    axes[1].set(title="value step: law against actual", xlabel="training step",
                ylabel=r"$\cos(\Delta v_\mathrm{law}, \Delta v_\mathrm{actual})$", ylim=(-0.05, 1.05))
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return fig
