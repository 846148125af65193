"""Reductions over a set of axes (sum, mean, max, min, prod), argmax, top_k, arg_sort, and the gradients of max, min and prod."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, DataError, KernelFactory, Run, highest, lowest, register
from .shapes import expect_shape, kept_shape, normalize_axes
from .workspace import scratch


_IDENTITIES = {"max": lowest, "min": highest}
"""What a max or min over no entries is (a dynamic axis with no rows), as TensorFlow's."""


def _reduction(name: str, fn: str) -> KernelFactory:
    def build(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
        (x,), (y,) = ins, outs
        axes = normalize_axes(attrs["axes"], x.ndim)
        keepdims = bool(attrs.get("keepdims", False))
        kept = kept_shape(x.shape, axes)
        expect_shape(name, "output", y.shape, kept if keepdims else [d for i, d in enumerate(x.shape) if i not in axes])
        if fn in _IDENTITIES and any(x.shape[a] == 0 for a in axes):
            return partial(y.fill, _IDENTITIES[fn](y.dtype))
        return partial(getattr(xp, fn), x, axis=axes, keepdims=keepdims, out=y)

    return build


for _fn in ("sum", "mean", "max", "min", "prod"):
    register(f"reduce_{_fn}")(_reduction(f"reduce_{_fn}", _fn))


@register("argmax", checks_data=True)
def argmax(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Index of the first maximum along `axis` (default -1), into an int64 out; none of an empty axis (a
    dynamic one with no rows) is a DataError, as TensorFlow's."""
    (x,), (y,) = ins, outs
    (axis,) = normalize_axes(attrs.get("axis", -1), x.ndim)
    keepdims = bool(attrs.get("keepdims", False))
    if x.shape[axis] == 0 and y.size:

        def empty() -> None:
            raise DataError(f"axis {axis} of a value of shape {tuple(x.shape)} has no entries to take the index of")

        return empty
    return partial(xp.argmax, x, axis=axis, out=y, keepdims=keepdims)


@register("top_k")
def top_k(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """The indices of the k largest entries along `axis`, largest first, ties in index order, NaN largest.

    A stable ascending sort of the reversed axis, read from its end: ties come out in index order
    and NaN (which sorts last) first, with no negation (which would wrap an integer minimum).
    """
    (x,), (y,) = ins, outs
    (axis,) = normalize_axes(attrs.get("axis", -1), x.ndim)
    last, k = x.shape[axis] - 1, y.shape[axis]
    expect_shape("top_k", "output", y.shape, [k if i == axis else d for i, d in enumerate(x.shape)])
    largest = tuple(slice(None, -k - 1, -1) if i == axis else slice(None) for i in range(x.ndim))

    def run() -> None:
        order = xp.argsort(xp.flip(x, axis), axis=axis, kind="stable")
        xp.subtract(last, order[largest], out=y, casting="unsafe")

    return run


@register("arg_sort")
def arg_sort(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """The indices that sort `axis`, ties in index order and NaN largest both ways: ascending by one
    stable sort, descending as top_k of the whole axis."""
    (x,), (y,) = ins, outs
    if attrs.get("descending", False):
        return top_k(xp, attrs, ins, outs)
    (axis,) = normalize_axes(attrs.get("axis", -1), x.ndim)
    expect_shape("arg_sort", "output", y.shape, list(x.shape))
    return lambda: xp.copyto(y, xp.argsort(x, axis=axis, kind="stable"), casting="unsafe")


@register("reduce_max_grad", "reduce_min_grad")
def reduce_extremum_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx = dy / count where x equals y (its max or min), else 0: ties share the gradient, as torch.amax's and
    torch.amin's backward."""
    (dy, x, y), (dx,) = ins, outs
    axes = normalize_axes(attrs["axes"], x.ndim)
    kept = kept_shape(x.shape, axes)
    is_y = scratch(xp, x.shape, bool)
    share = scratch(xp, kept, dx.dtype)

    def run() -> None:
        xp.equal(x, y.reshape(kept), out=is_y)
        xp.sum(is_y, axis=axes, keepdims=True, out=share)
        xp.divide(dy.reshape(kept), share, out=share)
        xp.multiply(is_y, share, out=dx)

    return run


@register("reduce_prod_grad")
def reduce_prod_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx = dy * the product of the other entries of each entry's group, without dividing by a zero.

    The product of a group's nonzero entries p (zeros counted as 1) and its number of zeros z give
    it: p / x for every entry when z = 0; p for the zero and 0 for the rest when z = 1; 0 when z > 1.
    """
    (dy, x), (dx,) = ins, outs
    axes = normalize_axes(attrs["axes"], x.ndim)
    kept = kept_shape(x.shape, axes)
    zero, silent = scratch(xp, x.shape, bool), scratch(xp, x.shape, bool)
    nonzero = scratch(xp, x.shape, dx.dtype)
    count, product = scratch(xp, kept, dx.dtype), scratch(xp, kept, dx.dtype)
    some, many = scratch(xp, kept, bool), scratch(xp, kept, bool)

    def run() -> None:
        xp.equal(x, 0, out=zero)
        xp.sum(zero, axis=axes, keepdims=True, out=count)
        xp.copyto(nonzero, x)
        xp.copyto(nonzero, 1, where=zero)
        xp.prod(nonzero, axis=axes, keepdims=True, out=product)
        xp.greater(count, 0, out=some)
        xp.greater(count, 1, out=many)
        # silent: in a group with a zero, every entry but a lone zero
        xp.logical_not(zero, out=silent)
        xp.logical_or(silent, many, out=silent)
        xp.logical_and(silent, some, out=silent)
        xp.divide(product, nonzero, out=dx)
        xp.multiply(dx, dy.reshape(kept), out=dx)
        xp.copyto(dx, 0, where=silent)

    return run
