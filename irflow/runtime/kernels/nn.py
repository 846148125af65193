"""Softmax, log-softmax, the softmax cross-entropies, and their gradients.

All go through one stable log-sum-exp (max-shifted), so no exp overflows:
softmax = exp(x - lse), log_softmax = x - lse, cross-entropy = lse - <label, x>.
Cross-entropy kernels take logits (N, C) and reduce over the class axis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .registry import Array, Run, check_indices, register
from .shapes import kept_shape, normalize_axes
from .workspace import scratch


class _LogSumExp:
    """log(sum(exp(x), axis, keepdims=True)) for arrays of one shape, its scratch from `workspace.scratch`."""

    def __init__(self, xp: ModuleType, shape: Sequence[int], dtype: DTypeLike, axis: int):
        self._xp, self._axis = xp, axis
        self._empty = shape[axis] == 0  # a dynamic axis with no rows: log(0), and no max to shift by
        self._shifted = scratch(xp, shape, dtype)
        self._max = scratch(xp, kept_shape(shape, (axis,)), dtype)
        self._lse = scratch(xp, kept_shape(shape, (axis,)), dtype)

    def __call__(self, x: Array) -> Array:
        """The keepdims log-sum-exp; valid until the next call."""
        xp, shifted, lse = self._xp, self._shifted, self._lse
        if self._empty:
            lse.fill(-np.inf)
            return lse
        xp.max(x, axis=self._axis, keepdims=True, out=self._max)
        xp.subtract(x, self._max, out=shifted)
        xp.exp(shifted, out=shifted)
        xp.sum(shifted, axis=self._axis, keepdims=True, out=lse)
        xp.log(lse, out=lse)
        xp.add(lse, self._max, out=lse)
        return lse


def _axis(attrs: Mapping[str, Any], ndim: int) -> int:
    (axis,) = normalize_axes(attrs.get("axis", -1), ndim)
    return axis


@register("softmax")
def softmax(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    lse = _LogSumExp(xp, x.shape, y.dtype, _axis(attrs, x.ndim))

    def run() -> None:
        xp.subtract(x, lse(x), out=y)
        xp.exp(y, out=y)

    return run


@register("log_softmax")
def log_softmax(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    lse = _LogSumExp(xp, x.shape, y.dtype, _axis(attrs, x.ndim))

    def run() -> None:
        xp.subtract(x, lse(x), out=y)

    return run


@register("softmax_grad")
def softmax_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx = y * (dy - sum(dy * y))."""
    (dy, y), (dx,) = ins, outs
    axis = _axis(attrs, y.ndim)
    t = scratch(xp, dx.shape, dx.dtype)
    dot = scratch(xp, kept_shape(dx.shape, (axis,)), dx.dtype)

    def run() -> None:
        xp.multiply(dy, y, out=t)
        xp.sum(t, axis=axis, keepdims=True, out=dot)
        xp.subtract(dy, dot, out=t)
        xp.multiply(t, y, out=dx)

    return run


@register("log_softmax_grad")
def log_softmax_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx = dy - exp(y) * sum(dy)."""
    (dy, y), (dx,) = ins, outs
    axis = _axis(attrs, y.ndim)
    t = scratch(xp, dx.shape, dx.dtype)
    total = scratch(xp, kept_shape(dx.shape, (axis,)), dx.dtype)

    def run() -> None:
        xp.sum(dy, axis=axis, keepdims=True, out=total)
        xp.exp(y, out=t)
        xp.multiply(t, total, out=t)
        xp.subtract(dy, t, out=dx)

    return run


class _LabelPicker:
    """Flat indices n*C + labels[n] of each row's labelled class, rebuilt from the current labels.

    A label outside [0, C) would pick another row's logit: it is a DataError
    naming the first bad label and its position, raised before anything is written.
    """

    def __init__(self, xp: ModuleType, logits_shape: Sequence[int]):
        n, c = logits_shape
        self._xp = xp
        self._classes = c
        self._rows = xp.arange(0, n * c, c, dtype=np.int64)
        self.index = scratch(xp, n, np.int64)

    def __call__(self, labels: Array) -> Array:
        check_labels(self._xp, labels, self._classes)
        return self._xp.add(self._rows, labels, out=self.index)


def check_labels(xp: ModuleType, labels: Array, classes: int) -> None:
    """A DataError naming the first label outside [0, classes) and its position."""
    check_indices(xp, labels, classes, "label", f"the logits have {classes} classes")


@register("sparse_softmax_cross_entropy", checks_data=True)
def sparse_softmax_cross_entropy(
    xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]
) -> Run:
    """loss[n] = lse(logits[n]) - logits[n, labels[n]]."""
    (logits, labels), (loss,) = ins, outs
    lse = _LogSumExp(xp, logits.shape, loss.dtype, 1)
    pick = _LabelPicker(xp, logits.shape)
    picked = scratch(xp, loss.shape, loss.dtype)

    def run() -> None:
        xp.take(logits, pick(labels), out=picked)
        xp.subtract(lse(logits)[:, 0], picked, out=loss)

    return run


@register("softmax_cross_entropy")
def softmax_cross_entropy(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """loss[n] = -sum_c labels[n, c] * log_softmax(logits)[n, c]."""
    (logits, labels), (loss,) = ins, outs
    lse = _LogSumExp(xp, logits.shape, loss.dtype, 1)
    t = scratch(xp, logits.shape, loss.dtype)

    def run() -> None:
        xp.subtract(logits, lse(logits), out=t)
        xp.multiply(t, labels, out=t)
        xp.sum(t, axis=1, out=loss)
        xp.negative(loss, out=loss)

    return run


@register("sparse_softmax_cross_entropy_grad", checks_data=True)
def sparse_softmax_cross_entropy_grad(
    xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]
) -> Run:
    """dlogits = (softmax(logits) - onehot(labels)) * dloss[:, None]."""
    (dloss, logits, labels), (dlogits,) = ins, outs
    lse = _LogSumExp(xp, logits.shape, dlogits.dtype, 1)
    pick = _LabelPicker(xp, logits.shape)
    picked = scratch(xp, dloss.shape, dlogits.dtype)
    scale = dloss[:, None]

    def run() -> None:
        xp.subtract(logits, lse(logits), out=dlogits)
        xp.exp(dlogits, out=dlogits)
        index = pick(labels)
        xp.take(dlogits, index, out=picked)
        xp.subtract(picked, 1, out=picked)
        xp.put(dlogits, index, picked)
        xp.multiply(dlogits, scale, out=dlogits)

    return run


@register("softmax_cross_entropy_grad")
def softmax_cross_entropy_grad(
    xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]
) -> Run:
    """dlogits = (softmax(logits) * sum(labels) - labels) * dloss[:, None]; labels need not sum to 1."""
    (dloss, logits, labels), (dlogits,) = ins, outs
    lse = _LogSumExp(xp, logits.shape, dlogits.dtype, 1)
    t = scratch(xp, logits.shape, dlogits.dtype)
    mass = scratch(xp, (logits.shape[0], 1), dlogits.dtype)
    scale = dloss[:, None]

    def run() -> None:
        xp.subtract(logits, lse(logits), out=t)
        xp.exp(t, out=t)
        xp.sum(labels, axis=1, keepdims=True, out=mass)
        xp.multiply(t, mass, out=t)
        xp.subtract(t, labels, out=t)
        xp.multiply(t, scale, out=dlogits)

    return run
