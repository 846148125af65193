"""Data movement: reshape, transpose, concat, slice and gather (+ their gradients), broadcast_to, fill.

Views of ins and outs are taken once at build time: a view of an arena view
keeps reading and writing the arena, so each step is just `copyto`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, Run, check_indices, register, sequence
from .shapes import expect_shape, normalize_axes


@register("reshape")
def reshape(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    if x.size != y.size:
        raise ValueError(f"reshape: cannot reshape {x.shape} to {y.shape}")
    return lambda: xp.copyto(y, x.reshape(y.shape))  # a view, unless x is not contiguous


@register("transpose")
def transpose(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    view = x.transpose(tuple(attrs["perm"]))
    expect_shape("transpose", "output", y.shape, view.shape)
    return partial(xp.copyto, y, view)


@register("broadcast_to", "broadcast_like")
def broadcast_to(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = x broadcast to y's shape; broadcast_like's second input only gave y its (actual) shape, and
    its `axes` are y's axes that x lacks (a view of x with them as size 1)."""
    x, (y,) = ins[0], outs
    shape = list(x.shape)
    for a in attrs.get("axes", ()):
        shape.insert(a, 1)
    return partial(xp.copyto, y, x.reshape(shape))


@register("fill")
def fill(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Refill every step: the planner may hand the buffer's memory to others in between."""
    (y,) = outs
    return partial(y.fill, attrs["value"])


@register("concat")
def concat(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (y,) = outs
    (axis,) = normalize_axes(attrs["axis"], y.ndim)
    copies = []
    start = 0
    for x in ins:
        index = [slice(None)] * y.ndim
        index[axis] = slice(start, start + x.shape[axis])
        copies.append(partial(xp.copyto, y[tuple(index)], x))
        start += x.shape[axis]
    expect_shape("concat", "output", y.shape, y.shape[:axis] + (start,) + y.shape[axis + 1 :])
    return sequence(copies)


def _slices(attrs: Mapping[str, Any]) -> tuple[slice, ...]:
    return tuple(slice(*bounds) for bounds in zip(attrs["start"], attrs["stop"], attrs["step"], strict=True))


@register("slice")
def slice_(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    view = x[_slices(attrs)]
    expect_shape("slice", "output", y.shape, view.shape)
    return partial(xp.copyto, y, view)


@register("slice_grad")
def slice_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx is dy where the slice read, zeros elsewhere."""
    (dy,), (dx,) = ins, outs
    view = dx[_slices(attrs)]
    expect_shape("slice_grad", "gradient", dy.shape, view.shape)

    def run() -> None:
        dx.fill(0)
        xp.copyto(view, dy)

    return run


def _gathered(
    xp: ModuleType, kernel: str, attrs: Mapping[str, Any], params: Array, indices: Array, out: Array
) -> tuple[int, Run]:
    """The axis of `params` that `indices` index (`out` is gathered from params), and their run-time check."""
    (axis,) = normalize_axes(attrs.get("axis", 0), params.ndim)
    size = params.shape[axis]
    gathered = params.shape[:axis] + indices.shape + params.shape[axis + 1 :]
    expect_shape(kernel, "the gathered value", out.shape, gathered)
    return axis, partial(check_indices, xp, indices, size, "index", f"axis {axis} of params has {size} entries")


@register("gather", checks_data=True)
def gather(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """out = the slices of params along `axis` at indices; an index outside the axis is a DataError."""
    (params, indices), (out,) = ins, outs
    axis, check = _gathered(xp, "gather", attrs, params, indices, out)

    def run() -> None:
        check()
        xp.take(params, indices, axis=axis, out=out)

    return run


@register("gather_grad", checks_data=True)
def gather_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dparams = zeros with each slice of dy added at its index along `axis`.

    `add.at` adds unbuffered, so a repeated index gets the sum of its slices (a plain
    `dparams[index] += dy` would keep only one of them).
    """
    (dy, indices), (dparams,) = ins, outs
    axis, check = _gathered(xp, "gather_grad", attrs, dparams, indices, dy)
    lead = (slice(None),) * axis

    def run() -> None:
        check()
        dparams.fill(0)
        xp.add.at(dparams, (*lead, indices), dy)

    return run
