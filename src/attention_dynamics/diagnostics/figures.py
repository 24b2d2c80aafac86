"""Figures of the diagnostics: one head's matrices, an overview of every head, a label-level routing matrix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..core import plotting

if TYPE_CHECKING:
    from .measures import SpecializationSummary
    from .report import AttentionDiagnostics, HeadDiagnostics


def plot_head(
    head: HeadDiagnostics,
    *,
    batch_index: int = 0,
    queries: slice | None = None,
    keys: slice | None = None,
    axes=None,
    title: str | None = None,
):
    """Draw attention alpha, compatibility B and the advantage matrix alpha ⊙ (E_alpha[b] − B) of one head; return the figure.

    ``queries``/``keys`` select a window of positions (large T is unreadable in full); masked
    entries are blank. The advantage panel uses the book's sign: red (positive) = gradient descent
    moves attention toward that key.
    """
    cap = head.capture
    q = queries or slice(None)
    k = keys or slice(None)
    vis = cap.visible[batch_index][q, k].numpy()
    alpha = cap.alpha[batch_index][q, k].numpy()
    b = head.compatibility[batch_index][q, k].numpy()
    adv = head.advantage_matrix[batch_index][q, k].numpy()
    if axes is None:
        fig, axes = plotting.new_figure(3, width=4.2, height=3.4)  # stacked two to a row, within the column
    else:
        fig = axes[0].figure
    q0 = q.start or 0
    k0 = k.start or 0
    extent_note = f" (from {q0}, {k0})" if (q0 or k0) else ""
    labels = dict(xlabel=f"key position j{'' if not k0 else f' − {k0}'}", ylabel=f"query position i{'' if not q0 else f' − {q0}'}")
    plotting.plot_matrix(axes[0], alpha, mask=vis, title=r"attention $\alpha_{ij}$", cbar_label="weight", **labels)
    plotting.plot_matrix(axes[1], b, mask=vis, diverging=True, title=r"compatibility $b_{ij}=u_i\cdot v_j$",
                         cbar_label="nats per unit value", **labels)
    plotting.plot_matrix(axes[2], adv, mask=vis, diverging=True,
                         title=r"advantage $\alpha_{ij}(\mathbb{E}_\alpha[b]-b_{ij})$",
                         cbar_label=r"$-\partial L/\partial s$ (nats per unit score)", **labels)
    fig.suptitle(title or f"{head.name} ({cap.module}){extent_note}")
    return fig


def plot_overview(diagnostics: AttentionDiagnostics | Sequence[AttentionDiagnostics], *, labels: Sequence[str] | None = None, axes=None):
    """Draw per-head bars of normalized attention entropy, starved keys, key |cos| / baseline and value PC1; return the figure.

    Pass several diagnostics (e.g. checkpoints or runs) with ``labels`` to compare them side by side.
    """
    diags = [diagnostics] if hasattr(diagnostics, "heads") else list(diagnostics)  # one AttentionDiagnostics, or several
    labels = list(labels or [f"run {i}" for i in range(len(diags))])
    panels = [
        ("normalized_attention_entropy", "attention entropy / max", r"$H(\alpha)/\log n$ (1 = uniform)"),
        ("starved_fraction", "starved keys", "fraction of keys"),
        ("key_orthogonality_ratio", r"key $|\cos|$ against random", r"mean $|\cos|$ / random baseline"),
        ("value_pc1_fraction", "value PC1", "fraction of variance"),
    ]
    if axes is None:
        fig, axes = plotting.new_figure(len(panels), width=4.2, height=2.8)  # stacked two to a row, within the column
    else:
        fig = axes[0].figure
    names = [h.name for h in diags[0].heads]
    x = np.arange(len(names))
    width = 0.8 / len(diags)
    for ax, (key, title, ylabel) in zip(axes, panels):
        for r, (d, lab) in enumerate(zip(diags, labels)):
            vals = [m[key] for m in d.metrics()]
            ax.bar(x + (r - (len(diags) - 1) / 2) * width, vals, width, label=lab, color=plotting.PALETTE[r % len(plotting.PALETTE)])
        ax.set_xticks(x, names, rotation=90 if len(names) > 8 else 0)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("head")
        if key == "key_orthogonality_ratio":
            ax.axhline(1.0, color="#555555", lw=1, ls="--")
    if len(diags) > 1:  # one legend under the panels, clear of the bars and of the baseline at 1
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(diags))
    return fig


def plot_routing_matrix(summary: SpecializationSummary, *, ax=None, query_name: str = "query label",
                        key_name: str = "key label", title: str | None = None, kind: str = "attention",
                        vmax: float | None = None, colorbar: bool = True):
    """Draw a :class:`SpecializationSummary` as a label-by-label heat map on ``ax``; return the image.

    ``kind``: ``"attention"`` the routing matrix (mean attention mass per label pair);
    ``"excess"`` the routing matrix minus its chance level (uniform attention), diverging colours;
    ``"advantage"`` :attr:`SpecializationSummary.advantage_by_label` (red = gradient descent moves
    attention toward that key label). ``vmax`` fixes the colour limit (to compare panels); with ``colorbar=False``
    the panel has no colour bar of its own (panels on one ``vmax`` can share one).
    """
    if ax is None:
        _, ax = plotting.new_figure(1, width=3.8, height=3.3)
    choices = {
        "attention": (summary.routing_matrix, "who reads whom", "attention mass", False),
        "excess": (summary.routing_matrix - summary.chance_routing_matrix, "attention in excess of chance",
                   "attention mass − chance", True),
        "advantage": (summary.advantage_by_label, "advantage by label", "−∂L/∂s summed (nats)", True),
    }
    if kind not in choices:
        raise ValueError(f"kind must be one of {', '.join(choices)}, got {kind!r}")
    matrix, default_title, cbar_label, diverging = choices[kind]
    im = plotting.plot_matrix(ax, matrix, title=title or f"{summary.head}: {default_title}", xlabel=key_name,
                              ylabel=query_name, cbar_label=cbar_label, diverging=diverging, vmax=vmax,
                              colorbar=colorbar)
    ax.set_xticks(range(len(summary.key_groups)), [str(g) for g in summary.key_groups])
    ax.set_yticks(range(len(summary.query_groups)), [str(g) for g in summary.query_groups])
    return im
