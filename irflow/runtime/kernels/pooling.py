"""max_pool2d, avg_pool2d and their gradients, as loops over kernel taps of whole-batch views.

Padding follows TensorFlow/OneFlow 'SAME' semantics: it is -inf for the max
and excluded from the average's divisor. Each tap is one ufunc over a chunk
of the (N, C, oh, ow) output, so a 2x2 pool costs four vectorized passes
(max_pool2d folds the kernel's rows first, then its columns); the chunks are
cache-sized, and taken one at a time by the CPU threads (kernels/parallel.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .parallel import Pulled, even_chunks
from .registry import Array, Run, lowest, register
from .shapes import expect_shape
from .window import Window, padded_sink, padded_source
from .workspace import scratch as transient

# One chunk of a pool's input: its taps, masks and gradient stay in L2 (LeNet's first pool, 2x2 over
# (100, 32, 28, 28): 3.2 ms over the whole batch, 1.7 ms in chunks of ~490 KiB).
_CHUNK_BYTES = 1 << 19


def _window(kernel_name: str, attrs: Mapping[str, Any], x_shape: Sequence[int], y_shape: Sequence[int]) -> Window:
    window = Window.from_attrs({**attrs, "dilations": (1, 1)}, attrs["kernel"], x_shape[-2:])
    expect_shape(kernel_name, "pooled operand", y_shape, (*x_shape[:2], *window.out_hw))
    return window


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


def _chunks(x: Array) -> list[slice]:
    """The batch in slices of about _CHUNK_BYTES of input each at most (at least one image), an even number of them
    (`even_chunks`); an empty batch is one empty slice, so that a device of a mirrored job given no rows runs the
    same steps on nothing."""
    image = max(1, int(np.prod(x.shape[1:])) * np.dtype(x.dtype).itemsize)
    return [slice(c.start, c.stop) for c in even_chunks(x.shape[0], _CHUNK_BYTES // image)] or [slice(0, 0)]


def _largest(chunks: list[slice]) -> int:
    return max(c.stop - c.start for c in chunks)


def _split(xp: ModuleType, chunks: list[slice], steps: Callable[[slice, int], list[Run]]) -> Pulled:
    """The chunks, taken by the threads; `steps(chunk, lane)` are one chunk's steps, using scratch of its lane's."""
    lanes = itertools.count()

    def lane() -> Callable[[int], list[Run]]:
        own = next(lanes)
        return lambda index: steps(chunks[index], own)

    return Pulled(xp, len(chunks), [], lane)


@register("max_pool2d")
def max_pool2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """The maximum is separable: first over the kernel's rows, into `rows` (full padded width), then over its columns.

    A kh x kw pool makes kh - 1 + kw - 1 passes instead of kh kw - 1, and the row passes' inner loops run over
    whole contiguous rows (docs/kernels.md: LeNet's pools take 21% and 29% less CPU time than one pass per tap).
    """
    (x,), (y,) = ins, outs
    window = _window("max_pool2d", attrs, x.shape, y.shape)
    padded, refresh = padded_source(xp, x, window, lowest(x.dtype))
    row_taps = [window.row_tap(padded, i) for i in range(window.kernel[0])]
    chunks = _chunks(x)
    shape = (_largest(chunks), *row_taps[0].shape[1:])
    scratch: dict[int, Array] = {}  # per lane: the chunk's row maxima

    def steps(c: slice, lane: int) -> list[Run]:
        out: list[Run] = refresh(c)
        if len(row_taps) == 1:
            rows = row_taps[0][c]
        else:
            if lane not in scratch:
                scratch[lane] = transient(xp, shape, x.dtype)
            rows = scratch[lane][: c.stop - c.start]
            out += _fold(xp, xp.maximum, rows, [tap[c] for tap in row_taps])
        columns = [window.column_tap(rows, j) for j in range(window.kernel[1])]
        return out + _fold(xp, xp.maximum, y[c], columns)

    return _split(xp, chunks, steps)


@register("avg_pool2d")
def avg_pool2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs
    window = _window("avg_pool2d", attrs, x.shape, y.shape)
    padded, refresh = padded_source(xp, x, window, 0)
    taps = [window.tap(padded, i, j) for i, j in window.taps()]
    inverse_counts = _inverse_counts(xp, window, y.dtype)

    def steps(c: slice, _: int) -> list[Run]:
        total = _fold(xp, xp.add, y[c], [tap[c] for tap in taps])
        return [*refresh(c), *total, partial(xp.multiply, y[c], inverse_counts, out=y[c])]

    return _split(xp, _chunks(x), steps)


@register("max_pool2d_grad")
def max_pool2d_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Each window's dy goes to its first maximum in row-major order, as PyTorch's CPU kernel picks it.

    Taps run in that order; `unclaimed` marks windows whose maximum no earlier tap took.
    When windows do not overlap, each tap writes its share straight into dx, and when they
    also tile the padded input exactly, those writes cover it: nothing to zero first.
    With `epilogue = "relu_grad"` (fuse-elementwise: a relu_grad of the result by x follows),
    only windows with y > 0 start unclaimed: the first maximum of a window is y, so x > 0 there
    iff y > 0. That costs one boolean pass over y-sized masks, where masking dy by y > 0 took a
    floating-point pass too (LeNet's pool gradients: docs/kernels.md).
    All of it runs a chunk of images at a time, while the chunk's x, dx and masks are in cache.
    """
    (dy, x, y), (dx,) = ins, outs
    window = _window("max_pool2d_grad", attrs, x.shape, y.shape)
    epilogue = attrs.get("epilogue")
    if epilogue not in (None, "relu_grad"):
        raise ValueError(f"max_pool2d_grad: unknown epilogue {epilogue!r} (only 'relu_grad')")
    padded, refresh = padded_source(xp, x, window, lowest(x.dtype))
    sink, land = padded_sink(xp, dx, window)
    taps = [(window.tap(padded, i, j), window.tap(sink, i, j)) for i, j in window.taps()]
    last = len(taps) - 1
    overlapping = any(s < k for s, k in zip(window.strides, window.kernel, strict=True))
    tiled = window.strides == window.kernel and all(
        o * k == size for o, k, size in zip(window.out_hw, window.kernel, window.padded_hw, strict=True)
    )
    chunks = _chunks(x)
    shape = (_largest(chunks), *y.shape[1:])
    scratch: dict[int, tuple[Array, ...]] = {}  # per lane: hit, unclaimed, routed

    def steps(c: slice, lane: int) -> list[Run]:
        if lane not in scratch:
            scratch[lane] = (transient(xp, shape, bool), transient(xp, shape, bool), transient(xp, shape, dx.dtype))
        hit, unclaimed, routed = (a[: c.stop - c.start] for a in scratch[lane])
        out: list[Run] = refresh(c)
        if epilogue:
            out.append(partial(xp.greater, y[c], 0, out=unclaimed))
        if not tiled:
            out.append(partial(sink[c].fill, 0))
        for index, (source, target) in enumerate(taps):
            out.append(partial(xp.equal, source[c], y[c], out=hit))
            if index or epilogue:
                out.append(partial(xp.logical_and, hit, unclaimed, out=hit))
            if index == 0 and not epilogue:
                out.append(partial(xp.logical_not, hit, out=unclaimed))
            elif index < last:
                out.append(partial(xp.logical_xor, unclaimed, hit, out=unclaimed))
            if overlapping:
                out += [partial(xp.multiply, dy[c], hit, out=routed), partial(xp.add, target[c], routed, out=target[c])]
            else:
                out.append(partial(xp.multiply, dy[c], hit, out=target[c]))
        return out + land(c)

    return _split(xp, chunks, steps)


@register("avg_pool2d_grad")
def avg_pool2d_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (dy,), (dx,) = ins, outs
    window = _window("avg_pool2d_grad", attrs, dx.shape, dy.shape)
    sink, land = padded_sink(xp, dx, window)
    targets = [window.tap(sink, i, j) for i, j in window.taps()]
    inverse_counts = _inverse_counts(xp, window, dx.dtype)
    chunks = _chunks(dx)
    shares = {}  # per lane: dy / counts of a chunk

    def steps(c: slice, lane: int) -> list[Run]:
        if lane not in shares:
            shares[lane] = transient(xp, (_largest(chunks), *dy.shape[1:]), dx.dtype)
        share = shares[lane][: c.stop - c.start]
        adds = [partial(xp.add, target[c], share, out=target[c]) for target in targets]
        return [partial(xp.multiply, dy[c], inverse_counts, out=share), partial(sink[c].fill, 0), *adds, *land(c)]

    return _split(xp, chunks, steps)
