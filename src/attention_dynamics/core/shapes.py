"""Shapes on the public API: jaxtyping annotations (``Float[Tensor, "*batch Tq Tk"]``), checked at run time in the
tests.

The head (:mod:`attention_dynamics.science.attention`), the laws (:mod:`attention_dynamics.science.gradients`,
:mod:`attention_dynamics.science.weight_space`) and the models' ``forward`` carry their tensors' shapes in their signatures,
as TransformerLens does. :func:`shape_checked` marks those functions: when the environment variable
``ATTENTION_DYNAMICS_CHECK_SHAPES`` is ``1`` at import (the test suite sets it), every call checks its arguments and
result against the annotations with ``beartype``, dimension names consistent across them within the call; otherwise
the function is returned unchanged, so the chapters' training loops pay nothing.
"""

from __future__ import annotations

import functools
import os
from typing import Callable, TypeVar

__all__ = ["CHECK_SHAPES", "shape_checked"]

#: Whether :func:`shape_checked` functions check their shapes (set ``ATTENTION_DYNAMICS_CHECK_SHAPES=1``).
CHECK_SHAPES = os.environ.get("ATTENTION_DYNAMICS_CHECK_SHAPES") == "1"

F = TypeVar("F", bound=Callable)


def shape_checked(fn: F) -> F:
    """Return ``fn`` checked against its jaxtyping annotations at every call when :data:`CHECK_SHAPES`, else ``fn``."""
    if not CHECK_SHAPES:
        return fn
    import torch
    from beartype import BeartypeConf, beartype
    from jaxtyping import jaxtyped

    checked = jaxtyped(typechecker=beartype(conf=BeartypeConf(is_pep484_tower=True)))(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if torch.compiler.is_compiling():  # torch.compile traces the function itself, not the checker
            return fn(*args, **kwargs)
        return checked(*args, **kwargs)

    return call  # type: ignore[return-value]
