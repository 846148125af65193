"""conv2d and its two gradients: im2col + GEMM, in cache-sized chunks of the batch.

Inputs are copied once per step into a zero-padded buffer stored channels-last
(NHWC), so one im2col row, a (kh, kw, C) window, is a few long contiguous runs
and the strided gather copies at memory speed. The batch is then processed a
few images at a time: gather a chunk's columns, multiply while they are still
in cache, and move on. Groups are a leading batch axis of every matmul.

Layouts, with M = images x oh x ow and K = kh*kw*C/groups in (kh, kw, c) order:
  columns (groups, M, K)    weights (groups, K, F/groups)    dy, y (groups, M, F/groups)
The input gradient multiplies dy by each tap's (F/groups, C/groups) slice of
the weights and adds the result back where that tap read (col2im).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from .registry import Array, Run, register
from .shapes import expect_shape
from .window import Window

_CHUNK_BYTES = 1 << 22  # the columns of one chunk: a few MiB stay in L2/L3 between gather and GEMM


@dataclass(frozen=True)
class _Chunk:
    start: int
    stop: int
    rows: int  # stop - start images, times oh*ow


class _Conv:
    """Geometry of x (N, C, H, W) * w (F, C/groups, kh, kw) -> y (N, F, oh, ow), and its buffers' shapes."""

    def __init__(self, attrs: Mapping[str, Any], x_shape: Sequence[int], w_shape: Sequence[int], itemsize: int):
        n, c, h, w = x_shape
        f, cg, kh, kw = w_shape
        g = int(attrs.get("groups", 1))
        if g < 1 or cg * g != c or f % g:
            raise ValueError(f"conv2d: input {tuple(x_shape)} and weight {tuple(w_shape)} do not fit {g} groups")
        self.window = Window.from_attrs(attrs, (kh, kw), (h, w))
        oh, ow = self.window.out_hw
        self.groups, self.fg, self.cg = g, f // g, cg
        self.x_shape, self.w_shape, self.y_shape = (n, c, h, w), (f, cg, kh, kw), (n, f, oh, ow)
        self.k = kh * kw * cg
        per_image = oh * ow * kh * kw * c * itemsize
        images = max(1, min(n, _CHUNK_BYTES // per_image))
        self.chunks = [_Chunk(s, min(s + images, n), (min(s + images, n) - s) * oh * ow) for s in range(0, n, images)]
        self.chunk_rows = images * oh * ow

    def grouped(self, a: Array) -> Array:
        """(N, groups*X, ...) -> (N, groups, X, ...): splitting one axis is always a view."""
        return a.reshape(a.shape[0], self.groups, a.shape[1] // self.groups, *a.shape[2:])

    def per_group(self, w: Array) -> Array:
        """Weights (F, C/groups, kh, kw) -> (groups, F/groups, C/groups, kh, kw), a view."""
        return w.reshape(self.groups, self.fg, *w.shape[1:])

    def padded_input(self, xp: ModuleType, dtype: object) -> Array:
        """Zeros of the padded input's NCHW shape, stored channels-last, as an NCHW-ordered view."""
        n, c = self.x_shape[:2]
        hp, wp = self.window.padded_hw
        return xp.zeros((n, hp, wp, c), dtype).transpose(0, 3, 1, 2)

    def windows(self, xp: ModuleType, padded: Array) -> Array:
        """The (groups, N, oh, ow, kh, kw, C/groups) im2col view of a padded input (no copy)."""
        n = self.x_shape[0]
        (kh, kw), (oh, ow) = self.window.kernel, self.window.out_hw
        (sh, sw), (dh, dw) = self.window.strides, self.window.dilations
        s_n, s_c, s_h, s_w = padded.strides
        return xp.lib.stride_tricks.as_strided(
            padded,
            (self.groups, n, oh, ow, kh, kw, self.cg),
            (self.cg * s_c, s_n, sh * s_h, sw * s_w, dh * s_h, dw * s_w, s_c),
        )

    def gather(self, xp: ModuleType, x: Array) -> tuple[Array, list[Run]]:
        """A (groups, chunk rows, K) columns buffer, and per chunk the step that fills it from x."""
        padded = self.padded_input(xp, x.dtype)
        interior = self.window.interior(padded)
        windows = self.windows(xp, padded)
        columns = xp.empty((self.groups, self.chunk_rows, self.k), x.dtype)
        steps = []
        for chunk in self.chunks:
            target = columns[:, : chunk.rows].reshape(windows[:, chunk.start : chunk.stop].shape)
            steps.append(_copier(xp, target, windows[:, chunk.start : chunk.stop]))
        return columns, [_copier(xp, interior, x), *steps]

    def rows_of(self, xp: ModuleType, dy: Array) -> tuple[Array, list[Run]]:
        """A (groups, chunk rows, F/groups) buffer, and per chunk the step that fills it from dy (N, F, oh, ow)."""
        oh, ow = self.window.out_hw
        rows = xp.empty((self.groups, self.chunk_rows, self.fg), dy.dtype)
        grouped = self.grouped(dy)  # (N, g, F/g, oh, ow)
        steps = []
        for chunk in self.chunks:
            target = rows[:, : chunk.rows].reshape(self.groups, chunk.stop - chunk.start, oh, ow, self.fg)
            steps.append(_copier(xp, target, grouped[chunk.start : chunk.stop].transpose(1, 0, 3, 4, 2)))
        return rows, steps


def _copier(xp: ModuleType, target: Array, source: Array) -> Run:
    def copy() -> None:
        xp.copyto(target, source)

    return copy


def _chunk_views(buffer: Array, chunks: Sequence[_Chunk]) -> list[Array]:
    return [buffer[:, : chunk.rows] for chunk in chunks]


@register("conv2d")
def conv2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x, w), (y,) = ins, outs
    conv = _Conv(attrs, x.shape, w.shape, np.dtype(y.dtype).itemsize)
    expect_shape("conv2d", "output", y.shape, conv.y_shape)
    columns, (refresh, *gathers) = conv.gather(xp, x)
    (kh, kw), (oh, ow) = conv.window.kernel, conv.window.out_hw
    weights = xp.empty((conv.groups, conv.k, conv.fg), w.dtype)
    weights_source = conv.per_group(w).transpose(0, 3, 4, 2, 1)  # (g, kh, kw, C/g, F/g)
    weights_target = weights.reshape(conv.groups, kh, kw, conv.cg, conv.fg)
    product = xp.empty((conv.groups, conv.chunk_rows, conv.fg), y.dtype)
    y_grouped = conv.grouped(y)
    steps = []
    for chunk, gather, cols, prod in zip(
        conv.chunks, gathers, _chunk_views(columns, conv.chunks), _chunk_views(product, conv.chunks), strict=True
    ):
        images = chunk.stop - chunk.start
        landed = prod.reshape(conv.groups, images, oh, ow, conv.fg).transpose(1, 0, 4, 2, 3)
        steps.append((gather, cols, prod, y_grouped[chunk.start : chunk.stop], landed))

    def run() -> None:
        refresh()
        xp.copyto(weights_target, weights_source)
        for gather, cols, prod, target, landed in steps:
            gather()
            xp.matmul(cols, weights, out=prod)
            xp.copyto(target, landed)

    return run


@register("conv2d_grad_filter")
def conv2d_grad_filter(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dw = sum over chunks of columns^T @ dy."""
    (dy, x), (dw,) = ins, outs
    conv = _Conv(attrs, x.shape, dw.shape, np.dtype(dw.dtype).itemsize)
    expect_shape("conv2d_grad_filter", "dy", dy.shape, conv.y_shape)
    columns, (refresh, *gathers) = conv.gather(xp, x)
    rows, row_copies = conv.rows_of(xp, dy)
    kh, kw = conv.window.kernel
    total, part = (xp.empty((conv.groups, conv.k, conv.fg), dw.dtype) for _ in range(2))
    landed = total.reshape(conv.groups, kh, kw, conv.cg, conv.fg).transpose(0, 4, 3, 1, 2)
    target = conv.per_group(dw)
    steps = list(
        zip(gathers, row_copies, _chunk_views(columns, conv.chunks), _chunk_views(rows, conv.chunks), strict=True)
    )

    def run() -> None:
        refresh()
        for index, (gather, copy_rows, cols, dy_rows) in enumerate(steps):
            gather()
            copy_rows()
            xp.matmul(cols.swapaxes(1, 2), dy_rows, out=total if index == 0 else part)
            if index:
                xp.add(total, part, out=total)
        xp.copyto(target, landed)

    return run


@register("conv2d_grad_input")
def conv2d_grad_input(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx: per chunk, dy times each tap's weights, added back where the tap read (col2im)."""
    (dy, w), (dx,) = ins, outs
    conv = _Conv(attrs, dx.shape, w.shape, np.dtype(dx.dtype).itemsize)
    expect_shape("conv2d_grad_input", "dy", dy.shape, conv.y_shape)
    window = conv.window
    (kh, kw), (oh, ow) = window.kernel, window.out_hw
    rows, row_copies = conv.rows_of(xp, dy)
    taps = list(window.taps())
    tap_weights = xp.empty((conv.groups, len(taps), conv.fg, conv.cg), w.dtype)
    weights_target = tap_weights.reshape(conv.groups, kh, kw, conv.fg, conv.cg)
    weights_source = conv.per_group(w).transpose(0, 3, 4, 1, 2)  # (g, kh, kw, F/g, C/g)
    per_tap = xp.empty((conv.groups, len(taps), conv.chunk_rows, conv.cg), dx.dtype)
    sink = conv.padded_input(xp, dx.dtype)
    steps = []
    for chunk, copy_rows, dy_rows in zip(conv.chunks, row_copies, _chunk_views(rows, conv.chunks), strict=True):
        images = chunk.stop - chunk.start
        product = per_tap[:, :, : chunk.rows]
        scatter = []
        for t, (i, j) in enumerate(taps):
            target = conv.grouped(window.tap(sink, i, j)[chunk.start : chunk.stop])  # (images, g, C/g, oh, ow)
            part = product[:, t].reshape(conv.groups, images, oh, ow, conv.cg).transpose(1, 0, 4, 2, 3)
            scatter.append((target, part))
        steps.append((copy_rows, dy_rows[:, None], product, scatter))
    interior = window.interior(sink)

    def run() -> None:
        xp.copyto(weights_target, weights_source)
        sink.fill(0)
        for copy_rows, dy_rows, product, scatter in steps:
            copy_rows()
            xp.matmul(dy_rows, tap_weights, out=product)
            for target, part in scatter:
                xp.add(target, part, out=target)
        xp.copyto(dx, interior)

    return run
