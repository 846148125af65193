"""Data movement: reshape, transpose, concat, slice, the gathers and scatters (+ gradients), broadcast_to, fill.

Views of ins and outs are taken once at build time: a view of an arena view
keeps reading and writing the arena, so each step is just `copyto`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, DataError, KernelFactory, Run, check_indices, first_position, register, sequence
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
    """y = x broadcast to y's shape; broadcast_like's `like` only gave y its (actual) shape, so the kernel is not
    handed it, and its `axes` are y's axes that x lacks (a view of x with them as size 1)."""
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


class _Gathered:
    """What a gather reads (`params`) and writes (`out`), or its gradient adds into and reads, seen as
    (batch, lead, axis, rest) blocks: `batch_dims` leading axes of params and indices, params' axes up to
    the indexed `axis`, the axis, and the axes after it; and the run-time check of the indices."""

    def __init__(self, xp: ModuleType, kernel: str, attrs: Mapping[str, Any], params: Array, indices: Array,
                 out: Array) -> None:  # fmt: skip
        (self.axis,) = normalize_axes(attrs.get("axis", 0), params.ndim)
        batch = attrs.get("batch_dims", 0)
        size = params.shape[self.axis]
        gathered = params.shape[: self.axis] + indices.shape[batch:] + params.shape[self.axis + 1 :]
        expect_shape(kernel, "the gathered value", out.shape, gathered)
        self.check = partial(check_indices, xp, indices, size, "index", f"axis {self.axis} of params has {size} entries")
        self.batched = batch > 0
        nb, lead = math.prod(params.shape[:batch]), math.prod(params.shape[batch : self.axis])
        rest = math.prod(params.shape[self.axis + 1 :])
        self.params_blocks = (nb, lead, size, rest)
        self.out_blocks = (nb, lead, math.prod(indices.shape[batch:]), rest)
        self.at = indices.reshape(nb, 1, self.out_blocks[2], 1)  # each batch entry's indices, along the blocks' axis 2


@register("gather", checks_data=True)
def gather(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """out = the slices of params along `axis` at indices (per batch entry with batch_dims); an index outside
    the axis is a DataError."""
    (params, indices), (out,) = ins, outs
    g = _Gathered(xp, "gather", attrs, params, indices, out)
    blocks = params.reshape(g.params_blocks)

    def run() -> None:
        g.check()
        if g.batched:
            xp.copyto(out, xp.take_along_axis(blocks, g.at, axis=2).reshape(out.shape))
        else:
            xp.take(params, indices, axis=g.axis, out=out)

    return run


@register("gather_grad", checks_data=True)
def gather_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dparams = zeros with each slice of dy added at its index along `axis` (in its batch entry).

    `add.at` adds unbuffered, so a repeated index gets the sum of its slices (a plain
    `dparams[index] += dy` would keep only one of them).
    """
    (dy, indices), (dparams,) = ins, outs
    g = _Gathered(xp, "gather_grad", attrs, dparams, indices, dy)
    nb, lead, _, rest = g.params_blocks
    if g.batched:  # every block's position, broadcast against the indices
        target = dparams.reshape(g.params_blocks)
        at = (xp.arange(nb).reshape(nb, 1, 1, 1), xp.arange(lead).reshape(1, lead, 1, 1), g.at,
              xp.arange(rest).reshape(1, 1, 1, rest))  # fmt: skip
        source = dy.reshape(g.out_blocks)
    else:
        target, at, source = dparams, (*(slice(None),) * g.axis, indices), dy

    def run() -> None:
        g.check()
        dparams.fill(0)
        xp.add.at(target, at, source)

    return run


def _dim_gathered(xp: ModuleType, kernel: str, attrs: Mapping[str, Any], x: Array, index: Array) -> tuple[int, Run]:
    """The dim of `x` that `index` indexes, and the run-time check of the indices."""
    (dim,) = normalize_axes(attrs["dim"], x.ndim)
    size = x.shape[dim]
    expect_shape(kernel, "index", index.shape, x.shape[:dim] + index.shape[dim : dim + 1] + x.shape[dim + 1 :])
    return dim, partial(check_indices, xp, index, size, "index", f"dim {dim} of input has {size} entries")


@register("dim_gather", checks_data=True)
def dim_gather(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """out = input's elements along `dim` at index (index's shape); an index outside the dim is a DataError."""
    (x, index), (out,) = ins, outs
    dim, check = _dim_gathered(xp, "dim_gather", attrs, x, index)
    expect_shape("dim_gather", "output", out.shape, index.shape)

    def run() -> None:
        check()
        xp.copyto(out, xp.take_along_axis(x, index, axis=dim))

    return run


@register("dim_gather_grad", checks_data=True)
def dim_gather_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dinput = zeros with each element of dy added at its index along `dim` (by `add.at`: repeats add up)."""
    (dy, index), (dx,) = ins, outs
    dim, check = _dim_gathered(xp, "dim_gather_grad", attrs, dx, index)
    expect_shape("dim_gather_grad", "gradient", dy.shape, index.shape)
    at = tuple(index if a == dim else xp.arange(n).reshape([n if b == a else 1 for b in range(dy.ndim)])
               for a, n in enumerate(dy.shape))  # fmt: skip

    def run() -> None:
        check()
        dx.fill(0)
        xp.add.at(dx, at, dy)

    return run


def _nd_picked(xp: ModuleType, kernel: str, params: Array, indices: Array, gathered: Array) -> tuple[tuple, Run]:
    """The index tuple (views of the indices' K coordinates) that picks gather_nd's slices from `params`, and
    the run-time check of every coordinate against its axis."""
    k = indices.shape[-1]
    expect_shape(kernel, "the gathered value", gathered.shape, indices.shape[:-1] + params.shape[k:])
    bounds = xp.asarray(params.shape[:k])

    def check() -> None:
        outside = xp.logical_or(xp.less(indices, 0), xp.greater_equal(indices, bounds))
        if indices.size and bool(outside.any()):
            first, position = first_position(xp, outside)
            axis = first % k
            raise DataError(f"index {int(indices.reshape(-1)[first])} at position [{position}] is outside "
                            f"[0, {params.shape[axis]}) (axis {axis} of params has {params.shape[axis]} entries)")  # fmt: skip

    return tuple(indices[..., i] for i in range(k)), check


@register("gather_nd", checks_data=True)
def gather_nd(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """out[i...] = params[indices[i...]] (the first K axes indexed); a coordinate outside its axis is a DataError."""
    (params, indices), (out,) = ins, outs
    at, check = _nd_picked(xp, "gather_nd", params, indices, out)

    def run() -> None:
        check()
        xp.copyto(out, params[at])

    return run


@register("scatter_nd", checks_data=True)
def scatter_nd(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """out = zeros with each slice of updates added at its indices (by `add.at`: repeated indices add up)."""
    (updates, indices), (out,) = ins, outs
    at, check = _nd_picked(xp, "scatter_nd", out, indices, updates)

    def run() -> None:
        check()
        out.fill(0)
        xp.add.at(out, at, updates)

    return run


def _tensor_scatter_nd(kernel: str, zero_first: bool) -> KernelFactory:
    """tensor_scatter_nd_update (`zero_first`: the indexed slices zeroed, then added to, as OneFlow's kernel,
    so a repeated index gets the sum of its updates) or tensor_scatter_nd_add: params copied, then each slice
    of updates added at its indices by `add.at`; every coordinate checked before anything is written."""

    def build(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
        (params, indices, updates), (out,) = ins, outs
        expect_shape(kernel, "the result", out.shape, params.shape)
        at, check = _nd_picked(xp, kernel, params, indices, updates)

        def run() -> None:
            check()
            xp.copyto(out, params)
            if zero_first:
                out[at] = 0
            xp.add.at(out, at, updates)

        return run

    return build


for _name, _zero_first in (("tensor_scatter_nd_update", True), ("tensor_scatter_nd_add", False)):
    register(_name, checks_data=True)(_tensor_scatter_nd(_name, _zero_first))
