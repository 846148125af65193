"""max_pool2d, avg_pool2d and their gradients, as loops over kernel taps of whole-batch views.

Padding follows TensorFlow/OneFlow 'SAME' semantics: it is -inf for the max
and excluded from the average's divisor. Each tap is one ufunc over the
(N, C, oh, ow) output, so a 2x2 pool costs four vectorized passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .registry import Array, Run, register, sequence
from .shapes import expect_shape
from .window import Window, padded_sink, padded_source


def _window(kernel_name: str, attrs: Mapping[str, Any], x_shape: Sequence[int], y_shape: Sequence[int]) -> Window:
    window = Window.from_attrs({**attrs, "dilations": (1, 1)}, attrs["kernel"], x_shape[-2:])
    expect_shape(kernel_name, "pooled operand", y_shape, (*x_shape[:2], *window.out_hw))
    return window


def _lowest(dtype: DTypeLike) -> float:
    dt = np.dtype(dtype)
    return float("-inf") if dt.kind == "f" else int(np.iinfo(dt).min)


def _inverse_counts(xp: ModuleType, window: Window, dtype: DTypeLike) -> Array:
    """1 / (number of unpadded inputs) of each output position, shape (oh, ow)."""
    counts = [
        np.array([sum(0 <= o * s + k - pad < size for k in range(kernel)) for o in range(out)])
        for size, kernel, s, pad, out in zip(
            window.in_hw, window.kernel, window.strides, window.pads[::2], window.out_hw, strict=True
        )
    ]
    return xp.asarray(1.0 / np.outer(counts[0], counts[1]), dtype=dtype)


def _fold(xp: ModuleType, combine: Any, y: Array, taps: Sequence[Array]) -> list[Run]:
    """Steps folding the taps into y with a binary ufunc: y = combine(tap0, tap1), then y = combine(y, tap).

    One pass per tap after the first (a 2x2 pool makes three), none to copy tap0 in first.
    """
    if len(taps) == 1:
        return [partial(xp.copyto, y, taps[0])]
    first, second, *rest = taps
    return [partial(combine, first, second, out=y), *(partial(combine, y, tap, out=y) for tap in rest)]


@register("max_pool2d")
def max_pool2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    window = _window("max_pool2d", attrs, x.shape, y.shape)
    padded, refresh = padded_source(xp, x, window, _lowest(x.dtype))
    return sequence([refresh, *_fold(xp, xp.maximum, y, [window.tap(padded, i, j) for i, j in window.taps()])])


@register("avg_pool2d")
def avg_pool2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    window = _window("avg_pool2d", attrs, x.shape, y.shape)
    padded, refresh = padded_source(xp, x, window, 0)
    total = _fold(xp, xp.add, y, [window.tap(padded, i, j) for i, j in window.taps()])
    return sequence([refresh, *total, partial(xp.multiply, y, _inverse_counts(xp, window, y.dtype), out=y)])


@register("max_pool2d_grad")
def max_pool2d_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Each window's dy goes to its first maximum in row-major order, as PyTorch's CPU kernel picks it.

    Taps run in that order; `unclaimed` marks windows whose maximum no earlier tap took.
    When windows do not overlap, each tap writes its share straight into dx, and when they
    also tile the padded input exactly, those writes cover it: nothing to zero first.
    With `epilogue = "relu_grad"` (fuse-elementwise: a relu_grad of the result by x follows),
    dy is first masked by y > 0: the first maximum of a window is y, so x > 0 there iff y > 0,
    and the mask costs a pass over dy instead of one over dx.
    """
    (dy, x, y), (dx,) = ins, outs
    window = _window("max_pool2d_grad", attrs, x.shape, y.shape)
    padded, refresh = padded_source(xp, x, window, _lowest(x.dtype))
    sink, land = padded_sink(xp, dx, window)
    taps = [(window.tap(padded, i, j), window.tap(sink, i, j)) for i, j in window.taps()]
    last = len(taps) - 1
    overlapping = any(s < k for s, k in zip(window.strides, window.kernel, strict=True))
    tiled = window.strides == window.kernel and all(
        o * k == size for o, k, size in zip(window.out_hw, window.kernel, window.padded_hw, strict=True)
    )
    hit, unclaimed = xp.empty(y.shape, bool), xp.empty(y.shape, bool)
    routed = xp.empty(y.shape, dx.dtype)
    epilogue = attrs.get("epilogue")
    if epilogue not in (None, "relu_grad"):
        raise ValueError(f"max_pool2d_grad: unknown epilogue {epilogue!r} (only 'relu_grad')")
    share = xp.empty(y.shape, dx.dtype) if epilogue else dy

    def run() -> None:
        refresh()
        if epilogue:
            xp.greater(y, 0, out=hit)
            xp.multiply(dy, hit, out=share)
        if not tiled:
            sink.fill(0)
        for index, (source, target) in enumerate(taps):
            xp.equal(source, y, out=hit)
            if index:
                xp.logical_and(hit, unclaimed, out=hit)
            if index == 0:
                xp.logical_not(hit, out=unclaimed)
            elif index < last:
                xp.logical_xor(unclaimed, hit, out=unclaimed)
            if overlapping:
                xp.multiply(share, hit, out=routed)
                xp.add(target, routed, out=target)
            else:
                xp.multiply(share, hit, out=target)
        land()

    return run


@register("avg_pool2d_grad")
def avg_pool2d_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (dy,), (dx,) = ins, outs
    window = _window("avg_pool2d_grad", attrs, dx.shape, dy.shape)
    sink, land = padded_sink(xp, dx, window)
    targets = [window.tap(sink, i, j) for i, j in window.taps()]
    inverse_counts = _inverse_counts(xp, window, dx.dtype)
    share = xp.empty(dy.shape, dx.dtype)

    def run() -> None:
        xp.multiply(dy, inverse_counts, out=share)
        sink.fill(0)
        for target in targets:
            xp.add(target, share, out=target)
        land()

    return run
