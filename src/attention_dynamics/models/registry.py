"""The model families, one entry each: the one place a family of chapter 7 is declared.

An entry (:class:`ModelFamily`) holds what the rest of the book asks of a family: how to build it for a wind
tunnel at a given width and the widths its size is matched over (:mod:`~attention_dynamics.models.factory`), its
trainer's defaults (:mod:`~attention_dynamics.training.families`: the relative cost of a step, which orders the
jobs; whether the stored runs train it with AdamW's fused kernel), its human label and its colour in every figure,
what Paper I reports of it (the numbers and the primitives it realises, the bounds of chapter 7's claims) and the
id of the verdict row that decides Paper I's claim about it (:mod:`attention_dynamics.ledger.verdicts`).

The book registers five families, from content routing to none at all (:data:`FAMILIES`). A new family is one
:func:`register_family` call (or, for a while, :func:`registered_family`): the factory builds it, the trainer trains
it, chapter 7's figures colour it and its reports record its claims, with ids made from its name
(``architectures.<claim>_<family>``), and with no verdict in Paper I unless its entry gives one. Code that must take
every registered family reads :func:`family_names` when it runs; :data:`FAMILIES` is the book's five.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import torch.nn as nn

from .mamba import MambaSequenceModel
from .mlp import ContextBlindMLP, WindowMLP
from .recurrent import LSTMSequenceModel
from .transformer import CausalTransformer

if TYPE_CHECKING:
    from ..tasks.wind_tunnels import WindTunnel

__all__ = ["PaperIReport", "ModelFamily", "FAMILIES", "register_family", "unregister_family", "registered_family",
           "family", "family_names", "families", "family_label", "family_color", "FAMILY_LABELS", "io_sizes"]


@dataclass(frozen=True)
class PaperIReport:
    """What Paper I (v3) reports of a family: its bijection per-sample entropy error and HMM entropy error (bits, the
    v3 table at K = 20), its binding accuracy (a fraction), and which primitives it realises (``realises``: task →
    bool for ``bijection``, ``hmm`` and ``binding``; None: Paper I does not test the family). Numbers it does not
    give are None."""

    bijection_mae_bits: float | None = None
    hmm_mae_bits: float | None = None
    binding_accuracy: float | None = None
    realises: Mapping[str, bool] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the report as chapter 7 reads it: ``{"bijection_mae_bits", "hmm_mae_bits", "binding_accuracy",
        "realises"}``."""
        return {"bijection_mae_bits": self.bijection_mae_bits, "hmm_mae_bits": self.hmm_mae_bits,
                "binding_accuracy": self.binding_accuracy,
                "realises": None if self.realises is None else dict(self.realises)}


@dataclass(frozen=True)
class ModelFamily:
    """One model family.

    ``name``: the family's id (a lower-case word: it ends the ids of the family's claims); ``label``: how the book
    names it; ``color``: its colour in every figure (a hex string; the book's five are Okabe and Ito's colour-blind
    safe palette); ``build(task, width)``: a fresh model for a wind tunnel (anything with ``n_out``, ``vocab_size``,
    ``input_dim`` and ``sequence_length``), its size set by ``width``; ``widths``: the widths the factory matches a
    parameter budget over (counts must grow with width). Trainer defaults: ``step_cost``, the relative CPU cost of
    one training step per token (orders the jobs, longest first); ``fused_adamw``: the stored runs that honour it
    train the family with AdamW's fused kernel (the same update). ``paper_i``: what Paper I reports of it;
    ``verdict_row``: the id of the row of the verdict page that reads its claims (None: no row).
    """

    name: str
    label: str
    color: str
    build: Callable[[Any, int], nn.Module]
    widths: range
    step_cost: float = 0.5
    fused_adamw: bool = False
    paper_i: PaperIReport = field(default_factory=PaperIReport)
    verdict_row: str | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"a family's name is a lower-case identifier (it ends its claims' ids), got {self.name!r}")
        if not (isinstance(self.color, str) and self.color.startswith("#") and len(self.color) == 7):
            raise ValueError(f"{self.name}: colour must be a hex string like '#0072B2', got {self.color!r}")
        if not len(self.widths) or not self.step_cost > 0:
            raise ValueError(f"{self.name}: needs at least one width and a positive step cost")


def io_sizes(task: WindTunnel) -> dict[str, int]:
    """Return the sizes every family's model takes from a task: ``n_out``, ``vocab_size``, ``input_dim``."""
    return {"n_out": task.n_out, "vocab_size": task.vocab_size, "input_dim": task.input_dim}


def _transformer(task: WindTunnel, width: int) -> nn.Module:  # d_model (4 heads, 2 layers, d_ff = 4 d_model)
    return CausalTransformer(**io_sizes(task), d_model=width, n_layers=2, n_heads=4, max_len=task.sequence_length)


def _mamba(task: WindTunnel, width: int) -> nn.Module:  # d_model (2 layers, d_state 16, expand 2)
    return MambaSequenceModel(**io_sizes(task), d_model=width, n_layers=2)


def _lstm(task: WindTunnel, width: int) -> nn.Module:  # hidden size (1 layer, embedding = hidden size)
    return LSTMSequenceModel(**io_sizes(task), hidden_size=width)


def _mlp_window(task: WindTunnel, width: int) -> nn.Module:  # hidden units (1 hidden layer, 16-dim embedding per slot)
    return WindowMLP(**io_sizes(task), window=task.sequence_length, d_embed=16, hidden=width, n_hidden_layers=1)


def _mlp_blind(task: WindTunnel, width: int) -> nn.Module:  # hidden units (2 hidden layers, 64-dim embedding)
    return ContextBlindMLP(**io_sizes(task), d_embed=64, hidden=width, n_hidden_layers=2)


_REGISTRY: dict[str, ModelFamily] = {}


def register_family(entry: ModelFamily) -> ModelFamily:
    """Register ``entry`` (its name must be new) and return it."""
    if entry.name in _REGISTRY:
        raise ValueError(f"model family {entry.name!r} is registered already")
    _REGISTRY[entry.name] = entry
    return entry


for _entry in (
    ModelFamily("transformer", "Transformer", "#0072B2", _transformer, range(8, 1025, 4), step_cost=1.5,  # blue
                paper_i=PaperIReport(0.007, 0.049, 1.0, {"bijection": True, "hmm": True, "binding": True}),
                verdict_row="transformer_primitives"),
    ModelFamily("mamba", "Mamba", "#009E73", _mamba, range(8, 1025, 4), step_cost=8.0, fused_adamw=True,  # green
                paper_i=PaperIReport(0.010, None, 0.978, {"bijection": True, "hmm": True, "binding": True}),
                verdict_row="mamba_primitives"),
    ModelFamily("lstm", "LSTM", "#D55E00", _lstm, range(8, 2049, 4), step_cost=1.0,  # vermillion
                paper_i=PaperIReport(0.009, None, 0.005, {"bijection": True, "hmm": False, "binding": False}),
                verdict_row="lstm_primitives"),
    # not in Paper I: its claims are context of the context-blind MLP's row
    ModelFamily("mlp_window", "MLP (whole window)", "#CC79A7", _mlp_window, range(4, 16385, 4),  # reddish purple
                verdict_row="mlp_primitives"),
    # Paper I's "MLP": its 1.85 bits sit at the context-blind level
    ModelFamily("mlp_blind", "MLP (context-blind)", "#E69F00", _mlp_blind, range(4, 16385, 4),  # orange
                paper_i=PaperIReport(1.85, None, None, {"bijection": False, "hmm": False, "binding": False}),
                verdict_row="mlp_primitives"),
):
    register_family(_entry)

#: The book's five families, from content routing to none at all (registered above; they cannot be unregistered).
FAMILIES: tuple[str, ...] = tuple(_REGISTRY)


def unregister_family(name: str) -> None:
    """Remove the family ``name`` registered by :func:`register_family` (not one of the book's :data:`FAMILIES`)."""
    if name in FAMILIES:
        raise ValueError(f"{name!r} is one of the book's families; it cannot be unregistered")
    family(name)
    del _REGISTRY[name]


@contextlib.contextmanager
def registered_family(entry: ModelFamily) -> Iterator[ModelFamily]:
    """Register ``entry`` for the ``with`` block and unregister it after (a family tried out, e.g. in a test)."""
    register_family(entry)
    try:
        yield entry
    finally:
        unregister_family(entry.name)


def family(name: str) -> ModelFamily:
    """Return the registered family ``name``, or raise ``ValueError`` naming the families there are."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown model family {name!r}; choose one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def family_names() -> tuple[str, ...]:
    """Return the names of the registered families, the book's five first, in the order they were registered."""
    return tuple(_REGISTRY)


def families() -> tuple[ModelFamily, ...]:
    """Return the registered families (:func:`family_names`' order)."""
    return tuple(_REGISTRY.values())


def family_label(name: str) -> str:
    """Return how the book names family ``name`` (``"MLP (context-blind)"``)."""
    return family(name).label


def family_color(name: str) -> str:
    """Return the fixed colour of family ``name``, the same in every figure of the book."""
    return family(name).color


class _Labels(Mapping[str, str]):
    """Every registered family's label by name, read from the registry when asked (a family registered later is in
    it too)."""

    def __getitem__(self, name: str) -> str:
        if name not in _REGISTRY:
            raise KeyError(name)
        return _REGISTRY[name].label

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)


#: ``{family: label}`` of every registered family (a live view of the registry, for tables indexed by family).
FAMILY_LABELS: Mapping[str, str] = _Labels()
