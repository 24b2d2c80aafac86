"""Chapter parameters: the scales (fast / book / paper), devices, and validation with clear errors.

Every chapter's sizes are one frozen dataclass, a subclass of :class:`ChapterSettings`, with one
instance per scale (``chapters/<chapter>/settings.py``: the only place that knows them). A chapter's
``parameters`` cell (papermill) sets ``scale``, ``device``, ``seed`` and optional overrides such as
``steps``; the chapter then calls :func:`resolve` with its table, which validates everything once,
before any computation starts, and returns the settings with the scale and the torch device filled in.

On a page the settings show as a two-column table with a reader's label per setting
(:meth:`ChapterSettings.table`, also the settings' HTML display): a field's ``metadata={"label": ...}``, else its
class's ``LABELS`` mapping, else :data:`COMMON_LABELS`, else the field's name with its underscores as spaces.
:func:`scales_table` shows a chapter's settings at every scale the same way.
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
    "COMMON_LABELS",
    "setting_label",
    "SettingsTable",
    "scales_table",
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


#: A reader's label for the settings many chapters share (a field's own label, or its class's ``LABELS``, comes first).
COMMON_LABELS = {
    "scale": "scale", "device": "device", "seed": "seed", "seeds": "seeds", "steps": "training steps",
    "lr": "learning rate", "batch": "batch size", "batch_size": "batch size", "warmup_steps": "warm-up steps",
    "weight_decay": "weight decay", "d_model": "model width", "d_in": "input width", "d_k": "key width",
    "d_v": "value width", "n_layers": "layers", "n_heads": "attention heads", "n_seeds": "seeds",
    "n_eval": "held-out sequences", "n_probe": "probe sequences", "n_checkpoints": "checkpoints kept",
    "n_draws": "random draws", "n_classes": "classes", "n_states": "hidden states", "n_symbols": "symbols",
    "T": "sequence length T", "L": "sequence length L", "V": "vocabulary V", "K": "sequence length K",
    "target": "training target", "bijection": "bijection", "hmm": "HMM", "fused_adamw": "fused AdamW",
}


def setting_label(settings: Any, name: str) -> str:
    """Return the reader's label of setting ``name`` of a settings dataclass (class or instance): the field's
    ``metadata["label"]``, else the class's ``LABELS[name]``, else :data:`COMMON_LABELS`, else the name with its
    underscores as spaces."""
    cls = settings if isinstance(settings, type) else type(settings)
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name and "label" in f.metadata:
                return str(f.metadata["label"])
    labels = getattr(cls, "LABELS", None) or {}
    if name in labels:
        return str(labels[name])
    if name in COMMON_LABELS:
        return COMMON_LABELS[name]
    return name.replace("_", " ").strip()


def _labelled_rows(settings: Any) -> list[tuple[str, str]]:
    """Return ``(label, value)`` rows of a settings dataclass, nested settings as ``group: label``."""
    out = []
    for f in dataclasses.fields(settings):
        if f.name in ("scale", "device"):
            continue
        value = getattr(settings, f.name)
        label = setting_label(settings, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out += [(f"{label}: {inner}", shown) for inner, shown in _labelled_rows(value)]
        else:
            plain = value.as_dict() if isinstance(value, ChapterSettings) else value
            out.append((label, _show(list(plain) if isinstance(plain, tuple) else plain)))
    return out


class SettingsTable:
    """Settings as a reader's table (what :meth:`ChapterSettings.table` returns): one row per setting, a label and a
    value, shown in HTML by Jupyter and the book, and as aligned text elsewhere."""

    def __init__(self, rows: list[tuple[str, str]], columns: tuple[str, ...] = ("setting", "value")):
        self.rows = rows
        self.columns = columns

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in self.rows)
        return f'<table class="dataframe settings-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        table = [self.columns, *self.rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(self.columns))]
        return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table)


def scales_table(table: Mapping[str, "ChapterSettings"]) -> SettingsTable:
    """Return a chapter's settings at every scale (columns) as a reader's table, one row per setting (label)."""
    columns = {scale: dict(_labelled_rows(s)) for scale, s in table.items()}
    labels = list(dict.fromkeys(label for rows in columns.values() for label in rows))
    rows = [(label, *(columns[scale].get(label, "—") for scale in table)) for label in labels]
    return SettingsTable(rows, ("setting", *table))


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

    def table(self) -> SettingsTable:
        """Return the settings as a reader's table: a label per setting (:func:`setting_label`; nested settings as
        ``group: label``), then the device."""
        return SettingsTable([*_labelled_rows(self), ("device", str(self.device))])

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def _show(value: Any) -> str:
    if value is None:
        return "—"
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
