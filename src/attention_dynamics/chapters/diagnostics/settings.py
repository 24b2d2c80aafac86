"""Chapter 8's settings: the sticky-chain runs are the paper's (1000 full-batch steps on one sequence of 2000), tracked
densely while a run can still collapse; chapter 6's bijection transformer at the same scale; a plain encoder."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.settings import ChapterSettings, check_positive_int, check_scale, resolve as _resolve

__all__ = ["EARLY", "DiagnosticsSettings", "SETTINGS", "resolve"]

#: Steps tracked densely while a run can still collapse.
EARLY = (1, 2, 3, 4, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50)


@dataclass(frozen=True)
class DiagnosticsSettings(ChapterSettings):
    """The sticky-chain runs' ``steps`` (kept at ``mid_step`` and the end), tracked at ``early_track`` and every
    ``track_every`` steps, their heads drawn at ``snapshot_step``; the broken run's routing learning rate; the plain
    encoder's ``encoder_steps``; the moving-average ``window`` of the figures; chapter 6's bijection transformer at
    ``tunnel_scale`` with ``tunnel_seed``, diagnosed at its ``tunnel_checkpoints`` checkpoints on ``tunnel_probe``
    held-out sequences (chapter 6's own)."""

    steps: int = 1000
    mid_step: int = 500
    early_track: tuple[int, ...] = EARLY
    track_every: int = 50
    snapshot_step: int = 5
    broken_routing_lr: float = 1000.0
    encoder_steps: int = 200
    window: int = 40
    tunnel_scale: str = "book"
    tunnel_seed: int = 0
    tunnel_checkpoints: int = 30
    tunnel_probe: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scale(self.tunnel_scale)
        object.__setattr__(self, "early_track", tuple(check_positive_int("early step", s) for s in self.early_track))
        for name in ("mid_step", "track_every", "snapshot_step", "window", "tunnel_checkpoints", "tunnel_probe"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("tunnel_seed", self.tunnel_seed, allow_zero=True)
        if not self.mid_step < self.steps:
            raise ValueError(f"mid_step must lie before the last step ({self.steps}), got {self.mid_step}")


SETTINGS = {
    "fast": DiagnosticsSettings(steps=40, mid_step=20, early_track=EARLY[:5], track_every=10, encoder_steps=20,
                                window=32, tunnel_scale="fast", tunnel_checkpoints=8, tunnel_probe=64),
    "book": DiagnosticsSettings(),
    "paper": DiagnosticsSettings(encoder_steps=1000, tunnel_scale="paper", tunnel_checkpoints=40),
}


def resolve(scale: str = "book", *, device: str = "auto", **overrides) -> DiagnosticsSettings:
    """Return chapter 8's validated settings at ``scale`` with a notebook's ``overrides`` (``None``: as the scale says)."""
    return _resolve(SETTINGS, scale, device=device, **overrides)
