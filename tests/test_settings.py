"""Parameter validation: every bad chapter parameter gives one clear error."""

from __future__ import annotations

import pytest
import torch

from attention_dynamics.settings import chapter_settings, check_positive_int, resolve_device

TABLE = {"fast": {"steps": 5, "n_seeds": 2, "seed": 0, "lr": 0.1}, "book": {"steps": 100, "n_seeds": 5, "seed": 0, "lr": 0.1}}


def test_resolves_the_scale_and_overrides():
    cfg = chapter_settings(TABLE, "book", steps=7, lr=None)
    assert cfg.steps == 7 and cfg.lr == 0.1 and cfg.scale == "book" and cfg.device == torch.device("cpu")
    assert dict(cfg)["n_seeds"] == 5


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
        chapter_settings(TABLE, scale, **kwargs)


def test_integral_floats_are_accepted():
    assert check_positive_int("steps", 10.0) == 10


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA device"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


def test_settings_are_read_only():
    cfg = chapter_settings(TABLE, "fast")
    with pytest.raises(TypeError):
        cfg["steps"] = 3  # type: ignore[index]
