"""What each wind tunnel shows the model and its exact posterior, drawn from the tasks' own posterior functions.

The three examples are fixed sequences; their posteriors come from
:func:`attention_dynamics.tasks.bijection.exact_posterior`, :func:`attention_dynamics.tasks.binding.exact_posterior`
and :func:`attention_dynamics.tasks.hmm.forward_filter`, so the picture shows what the code computes.
"""

from __future__ import annotations

import torch

from ...tasks import bijection, binding, hmm
from .kit import Canvas, Theme

__all__ = ["wind_tunnels", "EXAMPLE_V", "BIJECTION_KEYS", "BINDING_KEYS", "HMM_TRANSITION", "HMM_EMISSION",
           "HMM_OBSERVATIONS"]

#: Keys and values of the two token tunnels: keys shown as 1…V, values as a…e.
EXAMPLE_V = 5
#: The example map: key k (1-based) → value (0-based index into a…e).
_PI = {1: 0, 2: 1, 3: 2, 4: 4, 5: 3}
#: Bijection elimination: keys without replacement, the last one's value predicted.
BIJECTION_KEYS = (3, 1, 4)
#: Binding: keys with replacement (3 comes back), one token per revealed pair.
BINDING_KEYS = (3, 1, 3, 4)
HMM_TRANSITION = ((0.8, 0.1, 0.1), (0.1, 0.8, 0.1), (0.1, 0.1, 0.8))
HMM_EMISSION = ((0.7, 0.2, 0.1), (0.1, 0.7, 0.2), (0.2, 0.1, 0.7))
HMM_OBSERVATIONS = (0, 0, 1, 1)
_VALUES = "abcde"
_SYMBOLS = "xyz"

#: Bar height (px) of probability 1, the same in the three tunnels.
_BAR_H = 52
_TOKEN_W, _TOKEN_H, _GAP = 46, 30, 6


def _bijection_posterior() -> list[float]:
    V = EXAMPLE_V
    tokens = []
    for k in BIJECTION_KEYS[:-1]:
        tokens += [k - 1, V + _PI[k]]
    tokens.append(BIJECTION_KEYS[-1] - 1)
    return bijection.exact_posterior(torch.tensor([tokens]), V)[0, -1].tolist()


def _binding_posteriors() -> list[list[float]]:
    keys = torch.tensor([[k - 1 for k in BINDING_KEYS]])
    targets = torch.tensor([[_PI[k] for k in BINDING_KEYS]])
    return binding.exact_posterior(keys, targets, EXAMPLE_V)[0].tolist()


def _hmm_filter() -> list[list[float]]:
    T = torch.tensor([HMM_TRANSITION], dtype=torch.float64)
    E = torch.tensor([HMM_EMISSION], dtype=torch.float64)
    return hmm.forward_filter(T, E, torch.tensor([HMM_OBSERVATIONS]))[0].tolist()


def _token(c: Canvas, x: float, y: float, label: str, *, kind: str = "key") -> None:
    t = c.theme
    fill, edge, width = {"key": (t.box, t.box_edge, 1.5), "value": (t.value_tint, t.value, 1.5),
                         "query": (t.routing_tint, t.routing, 2.5)}[kind]
    c.box(x, y, _TOKEN_W, _TOKEN_H, label, size=15, fill=fill, stroke=edge, width=width, radius=5)


def _bars(c: Canvas, cx: float, base: float, probs: list[float], labels: str, *, bar: float = 14,
          gap: float = 5) -> None:
    """A little bar chart of ``probs`` centred at ``cx`` on the baseline ``base``, labels under the bars."""
    t = c.theme
    n = len(probs)
    x0 = cx - (n * bar + (n - 1) * gap) / 2
    c.line([(x0 - 4, base), (x0 + n * bar + (n - 1) * gap + 4, base)], stroke=t.muted, width=1.2)
    for k, (p, lab) in enumerate(zip(probs, labels)):
        x = x0 + k * (bar + gap)
        if p > 0:
            c.rect(x, base - p * _BAR_H, bar, p * _BAR_H, fill=t.value, radius=0)
        c.text(x + bar / 2, base + 16, lab, size=13, colour=t.text if p > 0 else t.muted)


def _header(c: Canvas, y: float, title: str, rule: str) -> None:
    t = c.theme
    c.text(10, y, title, size=15, weight="bold", anchor="start")
    c.text(10, y + 20, rule, size=13.5, anchor="start", colour=t.muted)


def _sequence(c: Canvas, x: float, y: float, tokens: list[tuple[str, str]]) -> list[float]:
    """Draw a row of tokens (label, kind) from ``x``; return their centres."""
    centres = []
    for k, (label, kind) in enumerate(tokens):
        left = x + k * (_TOKEN_W + _GAP)
        _token(c, left, y, label, kind=kind)
        centres.append(left + _TOKEN_W / 2)
    return centres


def wind_tunnels(theme: Theme) -> Canvas:
    """The three wind tunnels, stacked: the tokens the model sees and the exact posterior it must output."""
    t = theme
    c = Canvas(400, 722, theme, name="wind-tunnels",
               title="Three wind tunnels and their exact posteriors",
               desc="Three small examples, one per wind tunnel, each with the exact posterior as a bar chart under "
                    "the position the model predicts. Bijection elimination: keys 3, 1, 4 drawn without replacement, "
                    "each followed by its value (3 then c, 1 then a); at key 4 the posterior is uniform, one third "
                    "each, over the values not yet revealed, b, d and e. Binding: keys drawn with replacement, one "
                    "token per revealed pair: 3, the pair (3, c), 1, the pair (1, a), 3 again, the pair (3, c), 4. "
                    "At the repeated key 3 the posterior is a point mass on c, the value stored with it, which the "
                    "model must find by content; at the new key 4 it is uniform over b, d and e. HMM filtering: a "
                    "fresh hidden Markov model with three states whose transition and emission matrices are given "
                    "to the model, and the observations x, x, y, y; under each observation the forward filter "
                    "p(s_t | o_1..t) over the three states: state 1 at first, then mixed, then state 2.")
    # bijection elimination
    y = 22
    _header(c, y, "Bijection elimination", "keys without replacement, each followed by its value")
    keys, values = BIJECTION_KEYS, [_VALUES[_PI[k]] for k in BIJECTION_KEYS[:-1]]
    row = [x for k, v in zip(keys, values) for x in ((str(k), "key"), (v, "value"))] + [(str(keys[-1]), "query")]
    centres = _sequence(c, 10, y + 34, row)
    base = y + 34 + _TOKEN_H + 22 + _BAR_H
    c.line([(centres[-1], y + 34 + _TOKEN_H + 2), (centres[-1], y + 34 + _TOKEN_H + 16)], stroke=t.routing,
           width=2, arrow=True, head=7)
    _bars(c, centres[-1], base, _bijection_posterior(), _VALUES)
    c.lines(10, y + 98, ["posterior at key 4:", "uniform over the", "values not yet", "revealed: b, d, e"],
            size=13.5, anchor="start")
    c.line([(10, 212), (390, 212)], stroke=t.box_edge, width=1)
    # binding
    y = 238
    _header(c, y, "Binding", "keys with replacement, one token per revealed pair")
    row = []
    for n, k in enumerate(BINDING_KEYS):  # the last two keys are the positions shown predicted
        row.append((str(k), "query" if n >= len(BINDING_KEYS) - 2 else "key"))
        if n < len(BINDING_KEYS) - 1:
            row.append((f"({k},{_VALUES[_PI[k]]})", "value"))
    top = y + 66
    centres = _sequence(c, 10, top, row)
    posts = _binding_posteriors()
    c.curve((centres[4], top - 2), (centres[4] - 20, top - 24), (centres[1] + 20, top - 24), (centres[1], top - 2),
            stroke=t.routing, width=2, dash="5 3", head=8)
    c.text((centres[1] + centres[4]) / 2, top - 26, "found by content", size=13, colour=t.routing_text)
    base = top + _TOKEN_H + 22 + _BAR_H
    for pos, post, note in ((4, posts[2], ["3 seen before:", "point mass"]), (6, posts[3], ["4 is new:", "uniform"])):
        c.line([(centres[pos], top + _TOKEN_H + 2), (centres[pos], top + _TOKEN_H + 16)], stroke=t.routing,
               width=2, arrow=True, head=7)
        _bars(c, centres[pos], base, post, _VALUES)
        c.lines(centres[pos], base + 36, note, size=13.5)
    c.lines(10, top + _TOKEN_H + 44, ["posterior: a key seen", "before has the value", "stored with it; a new",
                                      "key is uniform over the", "values not revealed"], size=13.5, anchor="start")
    c.line([(10, 478), (390, 478)], stroke=t.box_edge, width=1)
    # HMM filtering
    y = 504
    _header(c, y, "HMM filtering", "a fresh HMM per sequence, its matrices given")
    gy = y + 52
    for x0, name, law, matrix, cols in ((46, "transition $T$", "$p(s_{t+1} | s_t)$", HMM_TRANSITION, "123"),
                                        (250, "emission $E$", "$p(o_t | s_t)$", HMM_EMISSION, _SYMBOLS)):
        c.text(x0 + 45, gy - 6, name, size=13.5)
        c.text(x0 + 45, gy + 96, law, size=13.5)
        for r, rowv in enumerate(matrix):
            c.text(x0 - 6, gy + 16 + 20 * r, str(r + 1), size=12, anchor="end", colour=t.muted)
            for q, p in enumerate(rowv):
                c.rect(x0 + 30 * q, gy + 20 * r, 30, 20, fill=t.value_tint if p >= 0.5 else t.box,
                       stroke=t.box_edge, width=0.8, radius=0)
                c.text(x0 + 30 * q + 15, gy + 20 * r + 15, f"{p:.1f}", size=12)
        for q, lab in enumerate(cols):
            c.text(x0 + 30 * q + 15, gy + 76, lab, size=12, colour=t.muted)
    oy = gy + 112
    c.text(10, oy + 20, "$o_t$", size=15, anchor="start")
    filt = _hmm_filter()
    base = oy + _TOKEN_H + 22 + _BAR_H
    for k, (o, post) in enumerate(zip(HMM_OBSERVATIONS, filt)):
        cx = 80 + 90 * k
        _token(c, cx - _TOKEN_W / 2, oy, _SYMBOLS[o], kind="key")
        c.line([(cx, oy + _TOKEN_H + 2), (cx, oy + _TOKEN_H + 16)], stroke=t.routing, width=2, arrow=True, head=7)
        _bars(c, cx, base, post, "123")
    c.text(10, base + 40, "the forward filter $p(s_t | o_{1..t})$ over the 3 states", size=13.5, anchor="start")
    c.height = base + 52
    return c
