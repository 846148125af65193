"""TensorBuffer kernels (docs/dynamic.md): a TensorBuffer is stored at its elements' bound, each element's
values dense at its own shape at the start of its slot, as OneFlow's dynamic blobs are."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, Run, register


@register("tensor_to_tensor_buffer")
def tensor_to_tensor_buffer(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Element k (row-major over x's leading axes) into slot k, dense at its start.

    x is at its actual sizes (a dynamic x is a view cut to them), the buffer at its bound:
    a static x has the buffer's very layout, a smaller one fills the first elements' slots.
    """
    (x,), (y,) = ins, outs
    k = attrs["instance_dims"]
    count, size = math.prod(x.shape[: x.ndim - k]), math.prod(x.shape[x.ndim - k :])
    slots = y.reshape(-1, math.prod(y.shape[y.ndim - k :]))[:count, :size]
    return partial(xp.copyto, slots, x.reshape(count, size), casting="unsafe")


@register("tensor_buffer_to_tensor")
def tensor_buffer_to_tensor(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = the first elements, cast to y's dtype: each has the instance shape, its slot's whole size, so
    they lie one after another (y is cut to the buffer's actual element count)."""
    (x,), (y,) = ins, outs
    return partial(xp.copyto, y, x.reshape(-1)[: y.size].reshape(y.shape), casting="unsafe")


@register("gen_tensor_buffer")
def gen_tensor_buffer(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Element k: `shapes[k]` elements of `values[k]`, the rest of its slot zeros; refilled every step."""
    (y,) = outs
    rank, flat, values = attrs["rank"], tuple(attrs["shapes"]), tuple(attrs["values"])
    shapes = [flat[i : i + rank] for i in range(0, len(flat), rank)]
    slots = y.reshape(len(shapes), -1)
    parts = [(slots[k, : math.prod(shape)], value) for k, (shape, value) in enumerate(zip(shapes, values))]

    def run() -> None:
        y.fill(0)
        for part, value in parts:
            part.fill(value)

    return run


@register("tensor_buffer_get")
def tensor_buffer_get(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = element `index` of the TensorBuffer, at y's shape (its own), cast to y's dtype."""
    x, (y,) = ins[0], outs
    rank = len(attrs["out_shape"])
    slot = x.reshape(-1, math.prod(x.shape[x.ndim - rank :]))[attrs["index"]]
    return partial(xp.copyto, y, slot[: y.size].reshape(y.shape), casting="unsafe")
