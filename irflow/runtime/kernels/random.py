"""dropout_mask: a seeded stream of keep-masks, one new mask per step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .registry import Array, Run, register


@register("dropout_mask")
def dropout_mask(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """mask = (u >= rate) / (1 - rate), u uniform in [0, 1).

    The generator is created from `seed` at build time and advances every call,
    so the k-th call of a kernel built with one seed gives the same mask in any
    process (numpy's PCG64; cupy's own generator gives its own fixed stream).
    """
    (mask,) = outs
    rate = float(attrs["rate"])
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_mask: rate must be in [0, 1), got {rate}")
    rng = xp.random.default_rng(int(attrs["seed"]))
    scale = 1.0 / (1.0 - rate)
    # Generators draw float32/float64 only; other float masks draw into a float32 buffer.
    uniform = mask if mask.dtype in (np.float32, np.float64) else xp.empty(mask.shape, np.float32)

    def run() -> None:
        rng.random(dtype=uniform.dtype, out=uniform)
        xp.greater_equal(uniform, rate, out=mask)
        xp.multiply(mask, scale, out=mask)

    return run
