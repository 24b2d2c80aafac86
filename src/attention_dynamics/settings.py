"""Chapter parameters: the scales (fast / book / paper), devices, and validation with clear errors.

A chapter's ``parameters`` cell (papermill) sets ``scale``, ``device``, ``seed`` and optional
overrides such as ``steps``; the chapter then calls :func:`chapter_settings` with its table of
settings per scale, which validates everything before any computation starts.
"""

from __future__ import annotations

import numbers
from types import MappingProxyType
from typing import Any, Mapping

import torch

__all__ = [
    "SCALES",
    "DEVICES",
    "Settings",
    "chapter_settings",
    "check_positive_int",
    "check_positive_ints",
    "check_scale",
    "resolve_device",
]

#: ``fast``: a smoke run in seconds (``reproduce --fast``); ``book``: what the committed chapters
#: show, sized for 2 CPU cores; ``paper``: the paper's own sizes (GPU-sized where the paper's are).
SCALES = ("fast", "book", "paper")
DEVICES = ("auto", "cpu", "cuda")


class Settings(Mapping[str, Any]):
    """Read-only mapping of a chapter's resolved settings, also readable as attributes."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = MappingProxyType(dict(values))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Settings({inner})"


def check_scale(scale: str) -> str:
    """Return ``scale`` if it is one of :data:`SCALES`, else raise ``ValueError`` naming the choices."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    return scale


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Return the torch device for ``"auto"`` (CUDA when available, else CPU), ``"cpu"`` or ``"cuda"``."""
    if isinstance(device, torch.device):
        device = device.type
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but PyTorch sees no CUDA device here; use 'auto' or 'cpu'")
    return torch.device(device)


def check_positive_int(name: str, value: Any, *, allow_zero: bool = False) -> int:
    """Return ``value`` as ``int`` if it is a positive (or, if allowed, zero) integer, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {bound} integer, got {value}")
    return value


def check_positive_ints(**values: Any) -> None:
    """Raise ``ValueError`` unless every keyword argument passes :func:`check_positive_int` (e.g. a model's sizes)."""
    for name, value in values.items():
        check_positive_int(name, value)


def chapter_settings(
    table: Mapping[str, Mapping[str, Any]],
    scale: str = "book",
    *,
    device: str = "auto",
    **overrides: Any,
) -> Settings:
    """Return the validated settings for ``scale`` from a chapter's ``table`` (scale → settings).

    ``overrides`` whose value is ``None`` are ignored (a parameters cell uses ``None`` for "as the
    scale says"); any other override must name a known setting. Settings whose name is ``steps``,
    ends in ``_steps`` or starts with ``n_`` must be positive integers; ``seed``/``seeds`` are
    non-negative integers. The resolved torch device is added as ``device``.
    """
    check_scale(scale)
    if scale not in table:
        raise ValueError(f"this chapter has no settings for scale {scale!r} (it has {', '.join(table)})")
    values = dict(table[scale])
    for key, val in overrides.items():
        if val is None:
            continue
        if key not in values:
            raise ValueError(f"unknown parameter {key!r}; this chapter's parameters are {', '.join(sorted(values))}")
        values[key] = val
    for key, val in list(values.items()):
        if key == "steps" or key.endswith("_steps") or key.startswith("n_"):
            values[key] = check_positive_int(key, val)
        elif key == "seed":
            values[key] = check_positive_int(key, val, allow_zero=True)
        elif key == "seeds":
            if isinstance(val, (str, bytes)) or not hasattr(val, "__iter__"):
                raise ValueError(f"seeds must be a list of integers, got {val!r}")
            values[key] = tuple(check_positive_int("seed", s, allow_zero=True) for s in val)
            if not values[key]:
                raise ValueError("seeds must not be empty")
    values["scale"] = scale
    values["device"] = resolve_device(device)
    return Settings(values)
