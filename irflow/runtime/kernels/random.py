"""Seeded random kernels: dropout masks, uniform draws, Bernoulli samples, permutations.

Each random kernel creates its generator from `seed` at build time and advances it every
call, so the k-th call of a kernel built with one seed gives the same values in any process
(numpy's PCG64; cupy's own generator gives its own fixed stream). They draw with
`Generator.random` alone, which numpy's and cupy's generators share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .registry import Array, DataError, Run, first_position, register
from .shapes import expect_shape
from .workspace import scratch


def _uniform(xp: ModuleType, seed: int, like: Array) -> tuple[Array, Run]:
    """A buffer of `like`'s shape and a run filling it with the next draws uniform in [0, 1).

    Generators draw float32/float64 only: `like` itself when it is one of those, else a float32 buffer.
    A negative seed (OneFlow's seeds are any int64) stands for its two's complement.
    """
    rng = xp.random.default_rng(seed % 2**64)
    draws = like if like.dtype in (np.float32, np.float64) else scratch(xp, like.shape, np.float32)
    return draws, lambda: rng.random(dtype=draws.dtype, out=draws)


@register("dropout_mask")
def dropout_mask(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """mask = (u >= rate) / (1 - rate), u uniform in [0, 1)."""
    (mask,) = outs
    rate = float(attrs["rate"])
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_mask: rate must be in [0, 1), got {rate}")
    uniform, draw = _uniform(xp, int(attrs["seed"]), mask)
    scale = 1.0 / (1.0 - rate)

    def run() -> None:
        draw()
        xp.greater_equal(uniform, rate, out=mask)
        xp.multiply(mask, scale, out=mask)

    return run


@register("random_uniform")
def random_uniform(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """u uniform in [0, 1), float32 or float64 (the verifier's), new draws each call."""
    (u,) = outs
    if u.dtype not in (np.float32, np.float64):
        raise ValueError(f"random_uniform: draws are float32 or float64, got {u.dtype}")
    return _uniform(xp, int(attrs["seed"]), u)[1]


@register("bernoulli", checks_data=True)
def bernoulli(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """samples = (u < p) as 0/1 of the output's dtype: P(1) = p for u uniform in [0, 1) (p = 1 always gives 1).

    A p outside [0, 1] (or NaN) is a DataError naming the first one, as OneFlow's kernel checks it.
    """
    (u, p), (samples,) = ins, outs
    expect_shape("bernoulli", "samples", samples.shape, p.shape)
    expect_shape("bernoulli", "draws", u.shape, p.shape)

    def run() -> None:
        if p.size and not (float(p.min()) >= 0.0 and float(p.max()) <= 1.0):  # NaN fails both
            first, position = first_position(xp, xp.logical_not(xp.logical_and(p >= 0, p <= 1)))
            raise DataError(f"probability {float(p.reshape(-1)[first])} at position [{position}] is outside [0, 1]")
        xp.less(u, p, out=samples)

    return run


@register("random_permutation")
def random_permutation(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """A permutation of 0..n-1: the order that sorts n float64 uniform draws, each order equally likely
    (the draws tie with probability below n**2 / 2**53)."""
    (perm,) = outs
    keys, draw = _uniform(xp, int(attrs["seed"]), scratch(xp, perm.shape, np.float64))

    def run() -> None:
        draw()
        xp.copyto(perm, xp.argsort(keys))

    return run
