"""Local halves of boxing: what a device does to its own piece, with no communication.

Kernels with a `mesh_axis` depend on the device's coordinate on that axis:
the executor adds `coordinate` to their attributes when it binds them, so the
one program of every device reads its own rank at run time and kernels never
see a communicator. Chunks follow `irflow.dialects.mesh`: coordinate k owns
entries [k*c, k*c + c) of an axis cut into chunks of c, clipped to its size.
The class_split_* kernels are the local stages of a cross-entropy whose
logits are split over classes (between them, all_reduce ops).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .nn import check_labels
from .registry import Array, Run, register
from .shapes import expect_shape
from .workspace import scratch


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


# ----------------------------------------------------------------- cross-entropy with the classes split


def _owned(attrs: Mapping[str, Any], chunk: int) -> tuple[int, int]:
    """(first class, number of real classes) of this coordinate's chunk of `classes`."""
    first = attrs["coordinate"] * chunk
    return first, max(0, min(chunk, attrs["classes"] - first))


@register("class_split_max")
def class_split_max(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Each row's max over this device's real classes; -inf where it owns none (the all_reduce's identity)."""
    (x,), (m,) = ins, outs
    _, valid = _owned(attrs, x.shape[1])
    if valid == 0:
        return lambda: m.fill(-xp.inf)
    real = x[:, :valid]
    return lambda: xp.max(real, axis=1, out=m)


@register("class_split_sum_exp")
def class_split_sum_exp(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Each row's sum of exp(x - max) over this device's real classes (0 where it owns none)."""
    (x, m), (s,) = ins, outs
    _, valid = _owned(attrs, x.shape[1])
    real = x[:, :valid]
    t = scratch(xp, real.shape, s.dtype)
    shift = m[:, None]

    def run() -> None:
        xp.subtract(real, shift, out=t)
        xp.exp(t, out=t)
        xp.sum(t, axis=1, out=s)

    return run


class _LocalLabels:
    """Where each row's label lies in this device's chunk: the rows that own it and their flat indices.

    A label outside [0, classes) is a DataError naming it and its position (every device checks).
    """

    def __init__(self, xp: ModuleType, attrs: Mapping[str, Any], shape: Sequence[int]):
        self.xp = xp
        self.classes = attrs["classes"]
        self.first, self.valid = _owned(attrs, shape[1])
        self.rows = xp.arange(shape[0], dtype=np.int64)
        self.chunk = shape[1]

    def __call__(self, labels: Array) -> tuple[Array, Array]:
        check_labels(self.xp, labels, self.classes)
        local = labels - self.first
        mine = (local >= 0) & (local < self.valid)
        return mine, self.rows[mine] * self.chunk + local[mine]


@register("class_split_cross_entropy", checks_data=True)
def class_split_cross_entropy(
    xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]
) -> Run:
    """loss[n] = log(sum_exp[n]) + max[n] on coordinate 0, minus logits[n, label] where the label is this device's.

    Summed over the group (partial_sum) this is lse(logits[n]) - logits[n, labels[n]].
    """
    (x, m, s, labels), (loss,) = ins, outs
    owned = _LocalLabels(xp, attrs, x.shape)
    first = attrs["coordinate"] == 0

    def run() -> None:
        mine, index = owned(labels)
        if first:
            xp.log(s, out=loss)
            xp.add(loss, m, out=loss)
        else:
            loss.fill(0)
        loss[mine] -= xp.take(x, index)

    return run


@register("class_split_cross_entropy_grad", checks_data=True)
def class_split_cross_entropy_grad(
    xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]
) -> Run:
    """This device's chunk of (exp(x - max) / sum_exp - onehot(labels)) * dloss[:, None]; the padding stays 0."""
    (dloss, x, m, s, labels), (dx,) = ins, outs
    owned = _LocalLabels(xp, attrs, x.shape)
    real, out, pad = x[:, : owned.valid], dx[:, : owned.valid], dx[:, owned.valid :]
    shift, total, scale = m[:, None], s[:, None], dloss[:, None]
    flat = dx.reshape(-1)

    def run() -> None:
        mine, index = owned(labels)
        xp.subtract(real, shift, out=out)
        xp.exp(out, out=out)
        xp.divide(out, total, out=out)
        pad.fill(0)
        flat[index] -= 1
        xp.multiply(dx, scale, out=dx)

    return run


@register("class_split_softmax")
def class_split_softmax(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """This device's chunk of softmax: exp(x - max) / sum_exp over its real classes, 0 in the padding."""
    (x, m, s), (y,) = ins, outs
    _, valid = _owned(attrs, x.shape[1])
    real, out, pad = x[:, :valid], y[:, :valid], y[:, valid:]
    shift, total = m[:, None], s[:, None]

    def run() -> None:
        xp.subtract(real, shift, out=out)
        xp.exp(out, out=out)
        xp.divide(out, total, out=out)
        pad.fill(0)

    return run


@register("class_split_dot")
def class_split_dot(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Each row's sum of dy * y over this device's real classes."""
    (dy, y), (dot,) = ins, outs
    _, valid = _owned(attrs, y.shape[1])
    a, b = dy[:, :valid], y[:, :valid]
    t = scratch(xp, b.shape, dot.dtype)

    def run() -> None:
        xp.multiply(a, b, out=t)
        xp.sum(t, axis=1, out=dot)

    return run


@register("class_split_softmax_grad")
def class_split_softmax_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """This device's chunk of y * (dy - dot) (dot: the all-reduced sum of dy * y), 0 in the padding."""
    (dy, y, dot), (dx,) = ins, outs
    _, valid = _owned(attrs, y.shape[1])
    a, b, out, pad = dy[:, :valid], y[:, :valid], dx[:, :valid], dx[:, valid:]
    column = dot[:, None]

    def run() -> None:
        xp.subtract(a, column, out=out)
        xp.multiply(out, b, out=out)
        pad.fill(0)

    return run
