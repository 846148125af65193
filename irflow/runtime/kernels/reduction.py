"""Reductions over a set of axes (sum, mean, max), argmax, and reduce_max's gradient."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, KernelFactory, Run, register
from .shapes import expect_shape, kept_shape, normalize_axes


def _reduction(name: str, fn: str) -> KernelFactory:
    def build(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
        (x,), (y,) = ins, outs
        axes = normalize_axes(attrs["axes"], x.ndim)
        keepdims = bool(attrs.get("keepdims", False))
        kept = kept_shape(x.shape, axes)
        expect_shape(name, "output", y.shape, kept if keepdims else [d for i, d in enumerate(x.shape) if i not in axes])
        return partial(getattr(xp, fn), x, axis=axes, keepdims=keepdims, out=y)

    return build


for _name, _fn in {"reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max"}.items():
    register(_name)(_reduction(_name, _fn))


@register("argmax")
def argmax(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Index of the first maximum along `axis` (default -1), into an int64 out."""
    (x,), (y,) = ins, outs
    (axis,) = normalize_axes(attrs.get("axis", -1), x.ndim)
    keepdims = bool(attrs.get("keepdims", False))
    return partial(xp.argmax, x, axis=axis, out=y, keepdims=keepdims)


@register("reduce_max_grad")
def reduce_max_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx = dy / count where x equals the max, else 0: ties share the gradient, as torch.amax's backward."""
    (dy, x, y), (dx,) = ins, outs
    axes = normalize_axes(attrs["axes"], x.ndim)
    kept = kept_shape(x.shape, axes)
    is_max = xp.empty(x.shape, bool)
    share = xp.empty(kept, dx.dtype)

    def run() -> None:
        xp.equal(x, y.reshape(kept), out=is_max)
        xp.sum(is_max, axis=axes, keepdims=True, out=share)
        xp.divide(dy.reshape(kept), share, out=share)
        xp.multiply(is_max, share, out=dx)

    return run
