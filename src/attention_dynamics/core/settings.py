"""Chapter parameters: the scales (fast / book / paper), devices, and validation with clear errors.

Every chapter's sizes are one frozen dataclass, a subclass of :class:`ChapterSettings`, with one
instance per scale (``chapters/<chapter>/settings.py``: the only place that knows them). A chapter's
``parameters`` cell (papermill) sets ``scale``, ``device``, ``seed`` and optional overrides such as
``steps``; the chapter then calls :func:`resolve` with its table, which validates everything once,
before any computation starts, and returns the settings with the scale and the torch device filled in.
"""

from __future__ import annotations

import dataclasses
import html
import numbers
from typing import Any, Mapping, TypeVar

import torch

__all__ = [
    "SCALES",
    "DEVICES",
    "ChapterSettings",
    "resolve",
    "check_positive_int",
    "check_positive_ints",
    "check_scale",
    "resolve_device",
]

#: ``fast``: a smoke run in seconds (``reproduce --scale fast``); ``book``: what the committed chapters
#: show, sized for 2 CPU cores; ``paper``: the paper's own sizes (GPU-sized where the paper's are).
SCALES = ("fast", "book", "paper")
DEVICES = ("auto", "cpu", "cuda")


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


S = TypeVar("S", bound="ChapterSettings")


@dataclasses.dataclass(frozen=True)
class ChapterSettings:
    """A chapter's resolved settings: a frozen dataclass, validated once when it is made.

    Subclasses add the chapter's sizes as fields. Validation by name, for every field: ``steps``,
    ``*_steps`` and ``n_*`` are positive integers, ``seed`` a non-negative integer, ``seeds`` a non-empty
    tuple of non-negative integers; a subclass checks anything else in its own ``__post_init__`` (calling
    this one). ``scale`` and ``device`` are filled in by :func:`resolve`.
    """

    scale: str = "book"
    device: torch.device = dataclasses.field(default=torch.device("cpu"), compare=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # keep the table-like repr: @dataclass does not replace a __repr__ the class itself defines
        cls.__repr__ = ChapterSettings.__repr__  # type: ignore[method-assign]

    def __post_init__(self) -> None:
        check_scale(self.scale)
        for f in dataclasses.fields(self):
            name, value = f.name, getattr(self, f.name)
            if name == "steps" or name.endswith("_steps") or name.startswith("n_"):
                if value is not None:
                    object.__setattr__(self, name, check_positive_int(name, value))
            elif name == "seed":
                object.__setattr__(self, name, check_positive_int(name, value, allow_zero=True))
            elif name == "seeds":
                if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                    raise ValueError(f"seeds must be a list of integers, got {value!r}")
                seeds = tuple(check_positive_int("seed", v, allow_zero=True) for v in value)
                if not seeds:
                    raise ValueError("seeds must not be empty")
                object.__setattr__(self, name, seeds)

    def replace(self: S, **overrides: Any) -> S:
        """Return a copy with ``overrides`` applied (``None`` means "as the scale says"), validated again."""
        names = {f.name for f in dataclasses.fields(self)}
        changes = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(changes) - names)
        if unknown:
            own = sorted(names - {"scale", "device"})
            raise ValueError(f"unknown parameter {unknown[0]!r}; this chapter's parameters are {', '.join(own)}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Return the settings as plain JSON-ready values (tuples as lists, nested settings as dicts, no device)."""
        def plain(v: Any) -> Any:
            if dataclasses.is_dataclass(v):
                return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v) if f.name != "device"}
            if isinstance(v, (tuple, list)):
                return [plain(x) for x in v]
            return v
        return plain(self)

    def rows(self) -> list[tuple[str, str]]:
        """Return ``(setting, value)`` rows for display, nested settings flattened as ``group.name``."""
        out = []
        for name, value in self.as_dict().items():
            if isinstance(value, dict):
                out += [(f"{name}.{k}", _show(v)) for k, v in value.items()]
            else:
                out.append((name, _show(value)))
        out.append(("device", str(self.device)))
        return out

    def __repr__(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        return f"{type(self).__name__}\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)

    def _repr_html_(self) -> str:
        cells = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(v)}</td></tr>" for k, v in self.rows())
        return (f'<table class="settings-table"><thead><tr><th>{html.escape(type(self).__name__)}</th><th>value</th>'
                f"</tr></thead><tbody>{cells}</tbody></table>")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value)
    return str(value)


def resolve(table: Mapping[str, S], scale: str = "book", *, device: str = "auto", **overrides: Any) -> S:
    """Return the settings of ``scale`` from a chapter's ``table`` (scale → settings), validated, with overrides.

    ``overrides`` whose value is ``None`` are ignored (a parameters cell uses ``None`` for "as the
    scale says"); any other override must name a known setting. The resolved torch device is filled in.
    """
    check_scale(scale)
    if scale not in table:
        raise ValueError(f"this chapter has no settings for scale {scale!r} (it has {', '.join(table)})")
    return table[scale].replace(**overrides, scale=scale, device=resolve_device(device))
