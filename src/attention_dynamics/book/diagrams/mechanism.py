"""The front page's picture of the paper's mechanism, and Part II's routing–content feedback loop."""

from __future__ import annotations

from .kit import Canvas, Theme, wrap

__all__ = ["mechanism", "feedback_loop"]


def mechanism(theme: Theme) -> Canvas:
    """One attention head, forward (solid, top to bottom) and its two gradient signals (dashed, upwards).

    The loss sends the error signal :math:`u_i = \\partial L / \\partial g_i` back into the context vector; from there
    the routing law reaches the scores (orange) and the value law the values (blue), each spelled out in a panel
    below the head.
    """
    t = theme
    c = Canvas(400, 614, theme, name="mechanism",
               title="The mechanism: one attention head and its two gradient laws",
               desc="One attention head, forward pass from top to bottom: queries q_i = W_Q^T x_i, keys "
                    "k_j = W_K^T x_j and values v_j = W_V^T x_j; scores s_ij = q_i·k_j/√d_k; attention "
                    "α_ij = softmax_j s_ij; context g_i = Σ_j α_ij v_j; logits z_i = W_O^T g_i; the cross-entropy "
                    "loss L. Dashed arrows carry the gradient back: the loss sends the error signal u_i = ∂L/∂g_i "
                    "into the context; the routing law (orange) takes it to the scores, ∂L/∂s_ij = α_ij (b_ij − "
                    "E_α[b]) with b_ij = u_i·v_j, so a descent step moves attention toward values whose b_ij is "
                    "below the query's average (a positive advantage); the value law (blue) takes it to the values, "
                    "∂L/∂v_j = Σ_i α_ij u_i, so each value moves toward what the queries that use it need, "
                    "weighted by their attention α_ij (responsibility).")
    h = 38
    # forward pass: queries, keys, values; scores; attention; context; logits and loss
    c.box(10, 14, 120, h, "$q_i = W_Q^⊤x_i$")
    c.box(140, 14, 120, h, "$k_j = W_K^⊤x_j$")
    c.box(270, 14, 120, h, "$v_j = W_V^⊤x_j$", fill=t.value_tint, stroke=t.value)
    c.box(42, 96, 190, h, "$s_{ij} = q_i·k_j / √d_k$", fill=t.routing_tint, stroke=t.routing)
    c.box(42, 172, 190, h, "$α_{ij}$ = softmax$_j$ $s_{ij}$", fill=t.routing_tint, stroke=t.routing)
    c.box(150, 254, 170, h, "$g_i = Σ_j α_{ij} v_j$")
    c.box(96, 332, 150, h, "logits $z_i = W_O^⊤g_i$", size=14)
    c.box(282, 332, 108, h, "loss $L$", size=15)
    fwd = dict(stroke=t.line, width=1.6, arrow=True)
    c.line([(70, 52), (105, 96)], **fwd)
    c.line([(200, 52), (170, 96)], **fwd)
    c.line([(137, 134), (137, 172)], **fwd)
    c.line([(137, 210), (190, 254)], **fwd)
    c.line([(300, 52), (300, 254)], **fwd)
    c.line([(210, 292), (185, 332)], **fwd)
    c.line([(246, 351), (282, 351)], **fwd)
    # backward: the error signal, then the two laws
    back = dict(width=2.2, dash="6 4", head=10)
    c.line([(325, 332), (300, 292)], stroke=t.text, arrow=True, **back)
    c.text(338, 318, "$u_i$", size=15, anchor="start")
    c.curve((150, 273), (20, 280), (12, 120), (42, 115), stroke=t.routing, **back)
    c.text(14, 246, "$∂L/∂s_{ij}$", size=14, anchor="start", colour=t.routing_text)
    c.line([(320, 273), (365, 273), (365, 52)], stroke=t.value, arrow=True, **back)
    c.text(333, 160, "$∂L/∂v_j$", size=14, colour=t.value_text)
    # the legend
    c.line([(10, 398), (44, 398)], stroke=t.line, width=1.6, arrow=True)
    c.text(52, 403, "forward pass", size=13.5, anchor="start", colour=t.muted)
    c.line([(170, 398), (204, 398)], stroke=t.text, width=2.2, dash="6 4", arrow=True, head=10)
    c.text(212, 403, "gradient of the loss", size=13.5, anchor="start", colour=t.muted)
    # the two laws, spelled out
    y = 416
    c.rect(6, y, 388, 94, fill=t.routing_tint, stroke=t.routing, width=1.5)
    c.text(16, y + 22, "Routing law", size=14, weight="bold", anchor="start", colour=t.routing_text)
    c.text(120, y + 22, "$∂L/∂s_{ij} = α_{ij} (b_{ij} − 𝔼_{α_i}[b])$", size=14.5, anchor="start")
    c.lines(16, y + 45, wrap("Descent raises $s_{ij}$ where $b_{ij} = u_i·v_j$ is below the query's average: "
                             "attention moves to values with a positive advantage.", 13.5, 368),
            size=13.5, anchor="start")
    y = 518
    c.rect(6, y, 388, 90, fill=t.value_tint, stroke=t.value, width=1.5)
    c.text(16, y + 22, "Value law", size=14, weight="bold", anchor="start", colour=t.value_text)
    c.text(120, y + 22, "$∂L/∂v_j = Σ_i α_{ij} u_i$", size=14.5, anchor="start")
    c.lines(16, y + 45, wrap("Each value moves toward what the queries that use it need, each query "
                             "weighted by its attention $α_{ij}$ (responsibility).", 13.5, 368),
            size=13.5, anchor="start")
    return c


def feedback_loop(theme: Theme) -> Canvas:
    """The routing–content loop read as two-timescale EM: attention (E-step, fast) and values (M-step, slow).

    The frame :math:`W_Q, W_K` sets the scores; attention and values feed each other (the paper's positive
    feedback); a schematic of the two timescales closes the picture.
    """
    t = theme
    c = Canvas(400, 600, theme, name="feedback-loop",
               title="The routing–content feedback loop as two-timescale EM",
               desc="The hypothesis frame W_Q, W_K sets the scores s_ij: which positions a query can consider. "
                    "Below it, two boxes joined in a loop. The E-step: attention α_ij, soft responsibilities; queries "
                    "attend to the values that serve them; fast, it settles first. An arrow down: the values are "
                    "pulled toward the needs of the queries that attend to them. The M-step: values v_j, moved by "
                    "Δv_j = −η Σ_i α_ij u_i, a responsibility-weighted prototype update with soft count "
                    "N_j = Σ_i α_ij; slow, they keep refining. An arrow up: their advantage E_α[b] − b_ij grows, so "
                    "those queries attend to them even more. A schematic below plots both against training steps: "
                    "attention settles early, the values keep improving long after.")
    # the frame
    c.box(40, 10, 320, 58, ["Hypothesis frame $W_Q, W_K$", "which positions a query can consider"], size=14,
          fill=t.frame_tint, stroke=t.frame, colour=t.text)
    c.line([(200, 68), (200, 96)], stroke=t.frame, width=2, arrow=True)
    c.text(208, 88, "scores $s_{ij}$", size=13.5, anchor="start", colour=t.frame_text)
    # E-step
    c.rect(10, 96, 380, 96, fill=t.routing_tint, stroke=t.routing, width=2)
    c.text(200, 120, "E-step: attention $α_{ij}$", size=15, weight="bold", colour=t.routing_text)
    c.text(200, 143, "soft responsibilities: queries attend", size=14)
    c.text(200, 161, "to the values that serve them", size=14)
    c.text(200, 182, "fast: settles first", size=14, weight="bold", colour=t.routing_text)
    # M-step
    c.rect(10, 312, 380, 118, fill=t.value_tint, stroke=t.value, width=2)
    c.text(200, 336, "M-step: values $v_j$", size=15, weight="bold", colour=t.value_text)
    c.text(200, 361, "$Δv_j = −η Σ_i α_{ij} u_i$", size=15)
    c.text(200, 383, "responsibility-weighted prototype update,", size=14)
    c.text(200, 401, "soft count $N_j = Σ_i α_{ij}$", size=14)
    c.text(200, 421, "slow: keeps refining", size=14, weight="bold", colour=t.value_text)
    # the positive feedback
    c.line([(230, 192), (230, 312)], stroke=t.value, width=2.5, arrow=True, head=11)
    c.lines(242, 222, ["values pulled", "toward the needs", "of the queries that", "attend to them"], size=13.5,
            anchor="start")
    c.line([(170, 312), (170, 192)], stroke=t.routing, width=2.5, arrow=True, head=11)
    c.lines(158, 222, ["their advantage", "$𝔼_{α_i}[b] − b_{ij}$ grows:", "they attend to", "them even more"],
            size=13.5, anchor="end")
    # the two timescales, schematic
    x0, x1, yb, yt = 74, 386, 560, 470
    c.line([(x0, yt - 6), (x0, yb), (x1, yb)], stroke=t.muted, width=1.2)
    c.text(x1, yb + 22, "training steps →", size=13, anchor="end", colour=t.muted)
    c.text(x0 - 6, yb + 22, "schematic", size=13, anchor="start", colour=t.muted, italic=True)
    c.text(x0 - 6, yt + 5, "settled", size=13, anchor="end", colour=t.muted)
    c.text(x0 - 6, yb, "start", size=13, anchor="end", colour=t.muted)
    c.curve((x0 + 4, yb - 4), (x0 + 22, yt + 10), (x0 + 40, yt), (x0 + 90, yt), stroke=t.routing, width=2.5,
            arrow=False)
    c.line([(x0 + 90, yt), (x1, yt)], stroke=t.routing, width=2.5)
    c.curve((x0 + 4, yb - 4), (x0 + 120, yb - 30), (x0 + 230, yt + 30), (x1, yt + 12), stroke=t.value, width=2.5,
            arrow=False)
    c.text(x0 + 100, yt - 10, "attention settles", size=13.5, anchor="start", colour=t.routing_text)
    c.text(x1, yb - 14, "values keep refining", size=13.5, anchor="end", colour=t.value_text)
    return c
