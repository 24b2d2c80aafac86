"""Chapter 5's settings: the paper's protocol (its five seeds, 1000 full-batch steps on one sequence of T = 2000) and
the Monte Carlo length of the chain's floor; and the constants every part of the chapter shares."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core.settings import ChapterSettings, resolve as _resolve
from ...tasks import sticky_chain

__all__ = ["LN8", "CHAIN_PARAMS", "SCHEDULE_PAIR", "StickySettings", "SETTINGS", "resolve"]

LN8 = math.log(sticky_chain.N_SYMBOLS)  # the loss of the uniform prediction (nats)
CHAIN_PARAMS = {"n_symbols": sticky_chain.N_SYMBOLS, "self_prob": sticky_chain.SELF_PROB}
SCHEDULE_PAIR = ("sgd", "em_like")  # the paper's two schedules


@dataclass(frozen=True)
class StickySettings(ChapterSettings):
    """The protocol's ``seeds``, ``steps`` and sequence ``length``; value prototypes recorded every
    ``snapshot_every`` steps; the chain's entropy rate checked by Monte Carlo over ``monte_carlo_length`` steps.
    (The runs too heavy for the chapter are stored results: ``compute sticky_chain_paper_scale`` and
    ``compute sticky_chain_lr_surface``.)"""

    seeds: tuple[int, ...] = tuple(sticky_chain.PAPER_SEEDS)
    steps: int = 1000
    length: int = sticky_chain.SEQUENCE_LENGTH
    snapshot_every: int = 10
    monte_carlo_length: int = 200_000

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.length < 2:
            raise ValueError(f"length must be at least 2, got {self.length}")


SETTINGS = {
    "fast": StickySettings(seeds=(42, 2024), steps=40, length=300, snapshot_every=4, monte_carlo_length=20_000),
    "book": StickySettings(),
    "paper": StickySettings(monte_carlo_length=1_000_000),
}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> StickySettings:
    """Return chapter 5's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)
