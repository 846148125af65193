"""Local halves of boxing: what a device does to its own piece, with no communication.

Three kernels depend on the device's coordinate on a mesh axis (`mesh_axis`):
the executor adds `coordinate` to their attributes when it binds them, so the
one program of every device reads its own rank at run time and kernels never
see a communicator. Chunks follow `irflow.dialects.mesh`: coordinate k owns
entries [k*c, k*c + c) of an axis cut into chunks of c, clipped to its size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from .registry import Array, Run, register
from .shapes import expect_shape


def _along(axis: int, start: int, stop: int) -> tuple[slice, ...]:
    return (slice(None),) * axis + (slice(start, stop),)


def _chunk_window(attrs: Mapping[str, Any], whole: int, chunk: int) -> tuple[tuple[slice, ...], ...]:
    """(this coordinate's valid entries in the whole, the same in the chunk, the chunk's padding)."""
    axis = attrs["axis"]
    start = attrs["coordinate"] * chunk
    valid = max(0, min(chunk, whole - start))
    return _along(axis, start, start + valid), _along(axis, 0, valid), _along(axis, valid, chunk)


@register("shard_slice")
def shard_slice(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """broadcast -> split: keep this coordinate's chunk along `axis`, zero padded to the chunk size."""
    (x,), (y,) = ins, outs
    axis = attrs["axis"]
    expect_shape("shard_slice", "output", y.shape[:axis] + y.shape[axis + 1 :], x.shape[:axis] + x.shape[axis + 1 :])
    whole, piece, pad = _chunk_window(attrs, x.shape[axis], y.shape[axis])
    source, target, padding = x[whole], y[piece], y[pad]

    def run() -> None:
        xp.copyto(target, source)
        padding.fill(0)

    return run


@register("shard_embed")
def shard_embed(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """split -> partial_sum: this coordinate's chunk in place in zeros of the whole size; the sum is the value."""
    (x,), (y,) = ins, outs
    axis = attrs["axis"]
    expect_shape("shard_embed", "output", y.shape[:axis] + y.shape[axis + 1 :], x.shape[:axis] + x.shape[axis + 1 :])
    whole, piece, _ = _chunk_window(attrs, y.shape[axis], x.shape[axis])
    source, target = x[piece], y[whole]

    def run() -> None:
        y.fill(0)
        xp.copyto(target, source)

    return run


@register("broadcast_to_partial")
def broadcast_to_partial(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """broadcast -> partial_sum: coordinate 0 keeps the value, the others hold zeros."""
    (x,), (y,) = ins, outs
    expect_shape("broadcast_to_partial", "output", y.shape, x.shape)
    if attrs["coordinate"] == 0:
        return lambda: xp.copyto(y, x)
    return lambda: y.fill(0)


@register("pad")
def pad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Zeros after the end of every axis, up to the output's size (uneven splits padded to the chunk size)."""
    (x,), (y,) = ins, outs
    if x.ndim != y.ndim or any(a > b for a, b in zip(x.shape, y.shape)):
        raise ValueError(f"pad: cannot pad {tuple(x.shape)} to {tuple(y.shape)}")
    target = y[tuple(slice(0, d) for d in x.shape)]

    def run() -> None:
        y.fill(0)
        xp.copyto(target, x)

    return run
