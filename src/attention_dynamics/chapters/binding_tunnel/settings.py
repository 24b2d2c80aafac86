"""Chapter 9's settings: the binding tunnel at each scale (the library's
:data:`~attention_dynamics.training.wind_tunnels.BINDING_TUNNELS`: chapter 6's bijection transformer and training on
keys drawn with replacement), its seeds, checkpoints, freeze steps and the bounds its claims are judged by, fixed
before the runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...core.settings import ChapterSettings, resolve as _resolve
# freezing routing "costs nothing" within this factor of the trained model's KL (the interval over seeds); the same
# bound decides whether a task needs routing (the library's rule)
from ...diagnostics.frame_order import FREE_FREEZE_RATIO
from ...training.wind_tunnels import BINDING_TUNNELS, BindingTraining

__all__ = ["FREE_FREEZE_RATIO", "LONGER_FACTOR", "EM_LIKE_VALUE_FACTOR", "BindingTunnelSettings", "SETTINGS",
           "resolve"]

#: The longer runs are this many times the chapter's budget (a failure is a finding only on a plateau or a run
#: four times as long).
LONGER_FACTOR = 4
#: The paper's EM-like schedule: ten times the step on the value projections.
EM_LIKE_VALUE_FACTOR = 10.0


@dataclass(frozen=True)
class BindingTunnelSettings(ChapterSettings):
    """The binding tunnel (``tunnel``: model and training), the ``seeds``, ``n_checkpoints`` kept through training,
    ``n_eval`` held-out sequences for calibration, ``n_probe`` for the readings, geometry and advantage, the steps at
    which routing is frozen (``freeze_points``), and the authors' two-hop task (``two_hop``: key and value as separate
    tokens, a random function as the map) with its seeds and steps."""

    tunnel: BindingTraining = BINDING_TUNNELS["book"]
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_checkpoints: int = 120
    n_eval: int = 2000
    n_probe: int = 256
    freeze_points: tuple[int, ...] = (100, 250, 500, 1000)
    two_hop: BindingTraining = BINDING_TUNNELS["book"].replace(layout="separate", value_map="function",
                                                               steps=8000)
    two_hop_seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        for name in ("tunnel", "two_hop"):
            value = getattr(self, name)
            if isinstance(value, dict):  # from JSON
                object.__setattr__(self, name, BindingTraining(**value))
        for name in ("seeds", "two_hop_seeds", "freeze_points"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        super().__post_init__()
        if len(self.seeds) < 2:
            raise ValueError(f"an interval over seeds needs at least two seeds, got {self.seeds}")
        if any(not 0 < t < self.tunnel.steps for t in self.freeze_points):
            raise ValueError(f"freeze points must lie inside the run (1..{self.tunnel.steps - 1}), got {self.freeze_points}")

    def replace(self, **overrides: Any) -> "BindingTunnelSettings":
        """Return a copy with ``overrides`` (its own fields, or ``steps`` for the tunnel's steps)."""
        steps = overrides.pop("steps", None)
        out = dataclasses.replace(self, **overrides)
        if steps is not None:
            out = dataclasses.replace(out, tunnel=out.tunnel.replace(steps=steps))
        return out

    def to_json(self) -> dict[str, Any]:
        """Return the settings as plain JSON values."""
        out = dataclasses.asdict(self)
        out.pop("device", None)
        return out


#: The sizes per scale: ``book`` (the committed stored result), ``fast`` (the tests'), ``paper`` (Paper I's sizes).
SETTINGS: dict[str, BindingTunnelSettings] = {
    "fast": BindingTunnelSettings(scale="fast", tunnel=BINDING_TUNNELS["fast"], seeds=(0, 1), n_checkpoints=8,
                                  n_eval=64, n_probe=32, freeze_points=(50, 100),
                                  two_hop=BINDING_TUNNELS["fast"].replace(layout="separate", value_map="function"),
                                  two_hop_seeds=(0,)),
    "book": BindingTunnelSettings(),
    "paper": BindingTunnelSettings(scale="paper", tunnel=BINDING_TUNNELS["paper"],
                                   freeze_points=(1000, 2500, 5000, 10000, 25000, 50000),
                                   two_hop=BINDING_TUNNELS["paper"].replace(layout="separate", value_map="function",
                                                                            steps=20_000)),
}


def resolve(scale: str, *, device: str = "auto", steps: int | None = None) -> BindingTunnelSettings:
    """Return the settings at ``scale`` for ``device`` (``steps`` overrides the tunnel's training steps)."""
    return _resolve(SETTINGS, scale, device=device, steps=steps)
