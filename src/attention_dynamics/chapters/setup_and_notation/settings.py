"""Chapter 1's settings: the sizes of the worked example (a picture, not an experiment: small at every scale)."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.settings import ChapterSettings, check_positive_ints, resolve as _resolve

__all__ = ["SetupSettings", "SETTINGS", "resolve"]


@dataclass(frozen=True)
class SetupSettings(ChapterSettings):
    """The worked example's head: ``T`` positions, inputs of ``d_in``, queries/keys of ``d_k``, values of ``d_v``,
    ``n_classes`` outputs."""

    T: int = 6
    d_in: int = 4
    d_k: int = 3
    d_v: int = 3
    n_classes: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_ints(T=self.T, d_in=self.d_in, d_k=self.d_k, d_v=self.d_v, n_classes=self.n_classes)


SETTINGS = {"fast": SetupSettings(T=4), "book": SetupSettings(), "paper": SetupSettings()}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> SetupSettings:
    """Return chapter 1's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)
