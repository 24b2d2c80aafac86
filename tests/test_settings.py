"""Parameter validation: every bad chapter parameter gives one clear error."""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass

import pytest
import torch

from attention_dynamics.core.settings import (
    ChapterSettings,
    check_positive_int,
    resolve,
    resolve_device,
    scales_table,
    setting_label,
)


@dataclass(frozen=True)
class _Toy(ChapterSettings):
    steps: int = 100
    n_seeds: int = 5
    seed: int = 0
    lr: float = 0.1


TABLE = {"fast": _Toy(steps=5, n_seeds=2), "book": _Toy()}


def test_resolves_the_scale_and_overrides():
    cfg = resolve(TABLE, "book", steps=7, lr=None)
    assert cfg.steps == 7 and cfg.lr == 0.1 and cfg.scale == "book" and cfg.device == torch.device("cpu")
    assert cfg.as_dict()["n_seeds"] == 5


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scale="huge"), "unknown scale 'huge'"),
        (dict(scale="paper"), "no settings for scale 'paper'"),
        (dict(steps=-3), "steps must be a positive integer, got -3"),
        (dict(steps=0), "steps must be a positive integer, got 0"),
        (dict(steps=2.5), "steps must be an integer, got 2.5"),
        (dict(steps="10"), "steps must be an integer"),
        (dict(n_seeds=True), "n_seeds must be an integer"),
        (dict(seed=-1), "seed must be a non-negative integer"),
        (dict(device="tpu"), "unknown device 'tpu'"),
        (dict(learning_rate=0.1), "unknown parameter 'learning_rate'"),
    ],
)
def test_bad_parameters_raise_clear_errors(kwargs, match):
    scale = kwargs.pop("scale", "book")
    with pytest.raises(ValueError, match=match):
        resolve(TABLE, scale, **kwargs)


def test_integral_floats_are_accepted():
    assert check_positive_int("steps", 10.0) == 10


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA device"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


def test_settings_are_read_only():
    cfg = resolve(TABLE, "fast")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 3  # type: ignore[misc]


def test_settings_show_as_a_table():
    """A chapter's settings display as a small table (a row per setting), in text and in HTML, not a one-line repr."""
    cfg = resolve(TABLE, "book")
    text = repr(cfg)
    assert text.splitlines()[0] == "_Toy" and len(text.splitlines()) == 1 + 5 + 1  # scale, 4 fields, device
    assert "steps" in text and max(len(line) for line in text.splitlines()) < 40
    html = cfg._repr_html_()
    assert html.count("<tr>") == 1 + 5 and "<td>learning rate</td><td>0.1</td>" in html  # device, 4 fields; no scale
    assert "<code>" not in html and "_" not in re.sub(r"<[^>]+>", "", html), "labels, not identifiers"


def test_settings_labels_come_from_the_field_the_class_or_the_common_names():
    @dataclasses.dataclass(frozen=True)
    class Labelled(ChapterSettings):
        LABELS: typing.ClassVar[dict[str, str]] = {"n_train": "training sequences"}
        n_train: int = 8
        warmup_steps: int = 3
        odd_thing: float = 0.5
        tagged: int = dataclasses.field(default=1, metadata={"label": "a tagged setting"})

    cfg = Labelled()
    labels = [label for label, _ in cfg.table().rows]
    assert labels == ["training sequences", "warm-up steps", "odd thing", "a tagged setting", "device"]
    assert setting_label(Labelled, "lr") == "learning rate"
    both = scales_table({"fast": Labelled(n_train=2), "book": Labelled()})
    assert both.columns == ("setting", "fast", "book") and both.rows[0] == ("training sequences", "2", "8")
    assert "<th>book</th>" in both._repr_html_() and "training sequences  2     8" in repr(both)


# --------------------------------------------------------------------------------------------
# Typed chapter settings: a frozen dataclass per scale, validated once (ChapterSettings, resolve)
# --------------------------------------------------------------------------------------------

import importlib  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

from attention_dynamics.core.settings import SCALES, ChapterSettings, resolve  # noqa: E402

CHAPTERS = sorted(p.name for p in (Path(__file__).resolve().parents[1] / "src" / "attention_dynamics" / "chapters").iterdir()
                  if (p / "settings.py").exists())


@dataclasses.dataclass(frozen=True)
class ToySettings(ChapterSettings):
    """A chapter's settings as the chapters write them."""

    steps: int = 100
    n_train: int = 8
    seed: int = 0
    seeds: tuple[int, ...] = (0, 1)
    lr: float = 0.1
    warmup_steps: int | None = None


TOY = {"fast": ToySettings(steps=5), "book": ToySettings()}


def test_every_chapter_has_typed_settings_at_every_scale():
    assert CHAPTERS == ["architectures", "bayesian_manifolds", "binding_tunnel", "diagnostics", "gradient_laws",
                        "routing_content_feedback",
                        "setup_and_notation", "sticky_markov_chain", "two_timescale_em"]
    for chapter in CHAPTERS:
        module = importlib.import_module(f"attention_dynamics.chapters.{chapter}.settings")
        assert tuple(module.SETTINGS) == SCALES, chapter
        kinds = {type(s) for s in module.SETTINGS.values()}
        assert len(kinds) == 1 and issubclass(kinds.pop(), ChapterSettings), chapter
        for scale in SCALES:
            cfg = module.resolve(scale, device="cpu")
            assert cfg.scale == scale and cfg.device == torch.device("cpu")
            assert cfg == dataclasses.replace(module.SETTINGS[scale], scale=scale)  # nothing else changed
            json.dumps(cfg.as_dict())  # plain JSON, nested settings included
            assert repr(cfg).startswith(type(cfg).__name__) and "<table" in cfg._repr_html_()
        with pytest.raises(dataclasses.FrozenInstanceError):
            module.SETTINGS["book"].scale = "fast"


def test_resolve_fills_in_the_scale_and_device_and_applies_overrides():
    cfg = resolve(TOY, "fast", device="cpu", n_train=16, lr=None)  # None: as the scale says
    assert (cfg.steps, cfg.n_train, cfg.lr, cfg.scale, cfg.device) == (5, 16, 0.1, "fast", torch.device("cpu"))
    assert TOY["fast"].n_train == 8  # the table is not changed
    assert resolve(TOY, "book", device="cpu", seeds=[3, 4]).seeds == (3, 4)  # a list becomes a tuple
    assert resolve(TOY, "book", device="cpu", steps=10.0).steps == 10


@pytest.mark.parametrize("kwargs, match", [
    (dict(scale="huge"), "unknown scale 'huge'; choose one of fast, book, paper"),
    (dict(scale="paper"), r"this chapter has no settings for scale 'paper' \(it has fast, book\)"),
    (dict(learning_rate=0.1), "unknown parameter 'learning_rate'; this chapter's parameters are lr, n_train, seed, "
                              "seeds, steps, warmup_steps"),
    (dict(steps=-3), "steps must be a positive integer, got -3"),
    (dict(steps=2.5), "steps must be an integer, got 2.5"),
    (dict(n_train=0), "n_train must be a positive integer, got 0"),
    (dict(warmup_steps=0), "warmup_steps must be a positive integer, got 0"),
    (dict(seed=-1), "seed must be a non-negative integer, got -1"),
    (dict(seeds=[]), "seeds must not be empty"),
    (dict(seeds="01"), "seeds must be a list of integers"),
    (dict(seeds=[0, -2]), "seed must be a non-negative integer, got -2"),
    (dict(device="tpu"), "unknown device 'tpu'"),
])
def test_typed_settings_reject_bad_parameters_with_clear_errors(kwargs, match):
    scale = kwargs.pop("scale", "book")
    with pytest.raises(ValueError, match=match):
        resolve(TOY, scale, **kwargs)


@pytest.mark.parametrize("chapter, overrides, match", [
    ("architectures", dict(lr=0.0), "lr must be positive"),
    ("two_timescale_em", dict(ratios=(0.5, -1.0)), "ratios must be positive"),
    ("two_timescale_em", dict(sweep_seeds=(0, -1)), "seed must be a non-negative integer"),
    ("sticky_markov_chain", dict(length=1), "length must be at least 2"),
    ("diagnostics", dict(mid_step=5000), "mid_step must lie before the last step"),
    ("bayesian_manifolds", dict(n_eval=0), "n_eval must be a positive integer"),
    ("gradient_laws", dict(n_draws=-1), "n_draws must be a positive integer"),
    ("gradient_laws", dict(T=0), "T must be a positive integer"),
    ("routing_content_feedback", dict(steps="long"), "steps must be an integer"),
    ("routing_content_feedback", dict(lr=-0.5), "lr must be positive"),
    ("setup_and_notation", dict(d_k=0), "d_k must be a positive integer"),
])
def test_each_chapter_checks_its_own_values(chapter, overrides, match):
    module = importlib.import_module(f"attention_dynamics.chapters.{chapter}.settings")
    with pytest.raises(ValueError, match=match):
        module.resolve("book", device="cpu", **overrides)


def test_chapter_6s_nested_overrides_set_the_tunnels_steps():
    from attention_dynamics.chapters.bayesian_manifolds import settings as manifolds
    from attention_dynamics.training.wind_tunnels import BIJECTION_TUNNELS, HMM_TUNNELS

    cfg = manifolds.resolve("fast", device="cpu", bij_steps=40, hmm_steps=30, n_eval=64)
    assert cfg.bijection == BIJECTION_TUNNELS["fast"].replace(steps=40)  # only the steps change
    assert cfg.hmm == HMM_TUNNELS["fast"].replace(steps=30)
    assert (cfg.n_eval, cfg.scale) == (64, "fast")
    assert manifolds.SETTINGS["fast"].bijection.steps == BIJECTION_TUNNELS["fast"].steps  # the table is not changed
    same = manifolds.resolve("book", device="cpu", bij_steps=None, hmm_steps=None)
    assert same.bijection == BIJECTION_TUNNELS["book"] and same.hmm == HMM_TUNNELS["book"]
    only_hmm = manifolds.resolve("book", device="cpu", hmm_steps=500)
    assert only_hmm.bijection == BIJECTION_TUNNELS["book"] and only_hmm.hmm.steps == 500
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        manifolds.resolve("fast", bij_steps=0)
    with pytest.raises(ValueError, match="steps must be an integer, got 2.5"):
        manifolds.resolve("fast", hmm_steps=2.5)
    with pytest.raises(ValueError, match="unknown parameter 'bij_lr'"):
        manifolds.resolve("fast", bij_lr=1e-3)
    rows = dict(cfg.rows())
    assert rows["bijection.steps"] == "40" and rows["hmm.steps"] == "30" and rows["device"] == "cpu"
