"""conv2d and its two gradients: im2col + GEMM, in cache-sized chunks of the batch.

Each step the batch is processed a few images at a time: copy a chunk's
images into a persistent zero-padded buffer, gather their im2col columns,
multiply while they are still in cache, move on. Groups are the leading batch
axis of every matmul.

Matrices are (groups, M, K) with M = images x oh x ow and K = (kh, kw, C/groups),
stored in the orientation that makes the gather copy long contiguous runs:
channels-last (rows of K, runs of kw*C) when a window row is longer than an
output row, channel-major (rows of M, runs of ow) otherwise, as for C = 1.
The input gradient multiplies dy by each tap's (F/groups, C/groups) weights
and adds the products back where that tap read (col2im).

Stride-1 convolutions with 12-16 input channels skip im2col in the forward and
the filter gradient: each tap is one GEMM over a shifted block of the padded
input's rows (`_Shifts`).

With more than one CPU thread, the threads take the chunks one at a time,
each with buffers of its own; the filter gradient sums each group of
consecutive chunks into a slot of its own and adds the slots in order
(kernels/parallel.py).

With few output rows against the filters (late ResNet stages at small images
or batches), copying the weights each call costs more than the GEMM: the whole
batch is then one GEMM that reads w, and writes dw, where they lie (`_InPlace`).

Which of these (and of Winograd, conv_winograd.py, and DFTs, conv_dft.py)
runs a convolution, the heuristics here decide, or where the job asks, a
measurement of every one that can (kernels/algorithms.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from . import algorithms, conv_dft, conv_winograd
from .linalg import gemm
from .parallel import Pulled, even_chunks, pulled_sum
from .registry import Array, Run, register, sequence
from .shapes import expect_shape
from .window import Window
from .workspace import scratch

# One chunk's columns: small enough to stay in L2/L3 (conv2 of LeNet, 1 thread: 2 MiB ~10% faster than 4).
# Each thread runs its own chunks, so the size is per thread.
_CHUNK_BYTES = 1 << 21


@dataclass(frozen=True)
class _Chunk:
    start: int  # first image
    stop: int
    rows: int  # matrix rows: images x oh x ow


class _Conv:
    """Geometry of x (N, C, H, W) * w (F, C/groups, kh, kw) -> y (N, F, oh, ow), and its buffers."""

    def __init__(self, attrs: Mapping[str, Any], x_shape: Sequence[int], w_shape: Sequence[int], itemsize: int):
        n, c, h, w = x_shape
        f, cg, kh, kw = w_shape
        g = int(attrs.get("groups", 1))
        if g < 1 or cg * g != c or f % g:
            raise ValueError(f"conv2d: input {tuple(x_shape)} and weight {tuple(w_shape)} do not fit {g} groups")
        self.window = Window.from_attrs(attrs, (kh, kw), (h, w))
        oh, ow = self.window.out_hw
        self.groups, self.fg, self.cg, self.k = g, f // g, cg, kh * kw * cg
        self.itemsize = itemsize
        self.x_shape, self.y_shape = (n, c, h, w), (n, f, oh, ow)
        self.channels_last = kw * cg >= ow
        spans = even_chunks(n, _CHUNK_BYTES // max(1, oh * ow * kh * kw * c * itemsize))
        self.chunks = [_Chunk(s.start, s.stop, len(s) * oh * ow) for s in spans]
        self.chunk_rows = max((chunk.rows for chunk in self.chunks), default=0)

    def grouped(self, a: Array) -> Array:
        """(N, groups*X, ...) -> (N, groups, X, ...); splitting an axis is always a view."""
        return a.reshape(a.shape[0], self.groups, a.shape[1] // self.groups, *a.shape[2:])

    def per_group(self, w: Array) -> Array:
        """Weights (F, C/groups, kh, kw) -> (groups, F/groups, C/groups, kh, kw), a view."""
        return w.reshape(self.groups, self.fg, *w.shape[1:])

    def padded(self, xp: ModuleType, dtype: DTypeLike, channels_last: bool | None = None, transient: bool = False) -> Array:
        """Zeros of the padded input's shape, as an NCHW-ordered view of storage in the chosen layout
        (`channels_last`, or where that is None the columns'); `transient`: scratch that every run zeroes
        itself, not borders zeroed once and kept."""
        n, c = self.x_shape[:2]
        hp, wp = self.window.padded_hw
        make = partial(scratch, xp) if transient else xp.zeros
        if self.channels_last if channels_last is None else channels_last:
            return make((n, hp, wp, c), dtype).transpose(0, 3, 1, 2)
        return make((n, c, hp, wp), dtype)

    def matrices(self, xp: ModuleType, cols: int, dtype: DTypeLike) -> Array:
        """A (groups, chunk rows, cols) buffer in the chosen orientation."""
        if self.channels_last:
            return scratch(xp, (self.groups, self.chunk_rows, cols), dtype)
        return scratch(xp, (self.groups, cols, self.chunk_rows), dtype).swapaxes(1, 2)

    def image_rows(self, matrix: Array, chunk: _Chunk) -> Array:
        """A chunk's rows of a (groups, M, X) matrix as (groups, images, oh, ow, X), a view."""
        return matrix[:, : chunk.rows].reshape(self.groups, chunk.stop - chunk.start, *self.y_shape[2:], -1)

    def weight_matrix(self, xp: ModuleType, w: Array) -> tuple[Array, Run]:
        """A (groups, K, F/groups) buffer for w, and the step that copies w into it (every run: it is scratch)."""
        weights = scratch(xp, (self.groups, self.k, self.fg), w.dtype)
        target = weights.reshape(self.groups, *self.window.kernel, self.cg, self.fg)
        return weights, partial(xp.copyto, target, self.per_group(w).transpose(0, 3, 4, 2, 1))

    def windows(
        self, xp: ModuleType, x: Array, channels_last: bool | None = None
    ) -> tuple[Array, Callable[[_Chunk], Run]]:
        """The (groups, N, oh, ow, kh, kw, C/groups) windows of a padded copy of x (laid out as `padded` says);
        per chunk, the step that pads it.

        Each chunk's images are padded just before they are gathered, while both are in cache.
        """
        padded = self.padded(xp, x.dtype, channels_last)
        (kh, kw), (oh, ow) = self.window.kernel, self.window.out_hw
        (sh, sw), (dh, dw) = self.window.strides, self.window.dilations
        s_n, s_c, s_h, s_w = padded.strides
        windows = xp.lib.stride_tricks.as_strided(
            padded,
            (self.groups, self.x_shape[0], oh, ow, kh, kw, self.cg),
            (self.cg * s_c, s_n, sh * s_h, sw * s_w, dh * s_h, dw * s_w, s_c),
        )
        interior = self.window.interior(padded)
        return windows, lambda c: partial(xp.copyto, interior[c.start : c.stop], x[c.start : c.stop])

    def gathers(self, xp: ModuleType, windows: Array, chunks: Sequence[_Chunk]) -> tuple[Array, list[Run]]:
        """A columns buffer of its own, and per chunk the step that gathers the chunk's windows into it."""
        columns = self.matrices(xp, self.k, windows.dtype)
        steps: list[Run] = [
            partial(
                xp.copyto,
                self.image_rows(columns, c).reshape(windows[:, c.start : c.stop].shape),
                windows[:, c.start : c.stop],
            )
            for c in chunks
        ]
        return columns, steps

    def dy_rows(self, xp: ModuleType, dy: Array, chunks: Sequence[_Chunk]) -> tuple[Array, list[Run]]:
        """dy (N, F, oh, ow) as a (groups, M, F/groups) buffer of its own: per chunk the step that copies it.

        Stored channel-major, (groups, F/groups, M), whatever the columns' layout: the copy then moves
        whole (oh, ow) planes rather than transposing every image.
        """
        rows = scratch(xp, (self.groups, self.fg, self.chunk_rows), dy.dtype).swapaxes(1, 2)
        grouped = self.grouped(dy).transpose(1, 0, 3, 4, 2)  # (g, N, oh, ow, F/g)
        copies: list[Run] = [partial(xp.copyto, self.image_rows(rows, c), grouped[:, c.start : c.stop]) for c in chunks]
        return rows, copies


def _epilogue(attrs: Mapping[str, Any], conv: _Conv, bias: Sequence[Array]) -> str | None:
    """The fused epilogue asked for (None, 'bias_add' or 'bias_add_relu'), checked against the bias inputs."""
    epilogue = attrs.get("epilogue")
    if epilogue is None and not bias:
        return None
    if epilogue not in ("bias_add", "bias_add_relu") or len(bias) != 1:
        raise ValueError(
            f"conv2d: epilogue {epilogue!r} with {len(bias)} bias input(s); "
            "expected 'bias_add' or 'bias_add_relu' and one bias (F,)"
        )
    expect_shape("conv2d", "bias", bias[0].shape, (conv.groups * conv.fg,))
    return str(epilogue)


def _epilogue_steps(xp: ModuleType, epilogue: str | None, conv: _Conv, bias: Sequence[Array], rows: Array) -> list[Run]:
    """The epilogue's steps on a chunk's (groups, rows, F/groups) product: + bias, then relu if asked."""
    if epilogue is None:
        return []
    steps: list[Run] = [partial(xp.add, rows, bias[0].reshape(conv.groups, 1, conv.fg), out=rows)]
    if epilogue == "bias_add_relu":
        steps.append(partial(xp.maximum, rows, 0, out=rows))
    return steps


# Input channels for which a stride-1 convolution skips im2col (`_conv2d_by_shifts`). Forward over a batch of
# 100, 3x3, pads 1, process time best of 12 at 1 thread, im2col -> shifts: C=16 F=16 28x28 9.1-9.3 -> 7.7 ms,
# 14x14 2.3 -> 2.1; C=16 F=32 28x28 14.0-16.1 -> 13.7-14.3, 14x14 3.6-4.3 -> 3.8-3.9; C=12 F=16 28x28
# 7.4-8.4 -> 6.5-6.7. With C=8 each tap's GEMM (K = C) is too thin: 4.2-4.3 -> 5.5-5.8 ms. Since then
# Winograd (conv_winograd.chosen, asked first) takes 3x3 forwards and input gradients from 12 channels and
# 3x3 filter gradients from 32: shifted rows keep the 12-16 channel filter gradients and other kernel sizes.
_SHIFT_CHANNELS = range(12, 17)
# Wider inputs skip im2col only into at most _SHIFT_WIDE_FILTERS channels, where im2col copies 9 C values per
# output row for only F multiply-adds each. 14x14, same measure at load ~6: C=32 F=16 (ResNet-BN's stem2 input
# gradient) 4.05-4.48 -> 3.37-3.48 ms; C=32 F=32 6.99 -> 9.03 ms, slower.
_SHIFT_WIDE_CHANNELS, _SHIFT_WIDE_FILTERS = range(17, 33), 16
# Rows of the padded grid per chunk of `_conv2d_by_shifts` (4 images of 30 x 30 measured best of 2, 4, 8).
_SHIFT_ROWS = 1800
# In place (`_InPlace`) up to `_IN_PLACE_ROWS` rows per filter of a group, or with whole-batch columns of at most
# `_IN_PLACE_BYTES`. Kernel alone, float32, 1 BLAS thread, ms best of 10-20 runs, load 6.7-8.2 (so only large
# differences count), heuristics' path -> in place, forward | input | filter gradient: 3x3 pads 1, 256 -> 256
# at 4x4, 16 images (M = F) 28.8 -> 7.1 | 35.6 -> 21.6 | 20.9 -> 11.2, 32 images (M = 2F) 40.6 -> 23.3 |
# 35.4 -> 39.5 | 22.3 -> 22.6, 100 images 54 -> 88 | 58 -> 135 | 63 -> 102; 1x1 256 -> 1024 at 4x4, 32 images
# (M = F / 2) 10.6 -> 8.4 | 11.0 -> 7.9 | 8.6 -> 8.8, 64 images (M = F) 21.2 -> 28.3 | 22.7 -> 25.5 | 22.1 ->
# 22.7; 3x3 64 -> 64 at 8x8, columns of 295 KB (2 images), 590 (4), 1180 (8): 0.67 -> 0.29 | 0.69 -> 0.56 |
# 0.48 -> 0.26, 0.70 -> 0.51 | 0.92 -> 0.93 | 0.51 -> 0.51, 1.03 -> 1.09 | 1.16 -> 2.21 | 0.92 -> 1.04.
# Past these, col2im's adds and whole-batch columns out of cache cost more than the weights' copies.
_IN_PLACE_ROWS, _IN_PLACE_BYTES = 1, 1 << 19
# A measured search also tries it up to this many rows per filter: never LeNet's or the residual CNN's (batch 100).
_SEARCH_IN_PLACE = 4


def _by_transforms(conv: _Conv, direction: str, arrays: Sequence[Array]) -> bool:
    """Whether `direction` ('forward', 'input', 'filter') runs by DFTs (kernels/conv_dft.py), by its cost model."""
    n, c = conv.x_shape[:2]
    return conv_dft.chosen(conv.window, conv.groups, n, c, conv.y_shape[1], direction, arrays)


def _by_shifts(conv: _Conv) -> bool:
    """Whether the heuristics run `conv2d` as one GEMM per tap over shifted rows of the padded input (see
    `_conv2d_by_shifts`)."""
    channels = conv.cg in _SHIFT_CHANNELS or conv.cg in _SHIFT_WIDE_CHANNELS and conv.fg <= _SHIFT_WIDE_FILTERS
    return _shifts_apply(conv) and channels


def _rows(conv: _Conv) -> int:
    """M: the rows of the im2col GEMM, images x output pixels."""
    n, _, oh, ow = conv.y_shape
    return n * oh * ow


def _few_rows(conv: _Conv) -> bool:
    """Whether the heuristics run the convolution in place (`_InPlace`), before Winograd, DFTs, shifted rows
    or im2col: few rows against the filters, whose copies cost those paths more than the GEMM, or columns
    small enough for the cache. Not where the kernel is built again at other batch sizes (a dynamic job),
    whose scratch must fit in the first build's: the rows would choose differently at different sizes."""
    rows = _rows(conv)
    if algorithms.sizes_vary():
        return False
    return rows <= _IN_PLACE_ROWS * conv.fg or rows * conv.k * conv.groups * conv.itemsize <= _IN_PLACE_BYTES


def _in_place_candidate(conv: _Conv, w: Array) -> bool:
    """Whether the in-place GEMM is built for this convolution: where it applies, and as a measured search's
    candidate up to `_SEARCH_IN_PLACE` times the heuristics' rows (its whole-batch columns grow with them)."""
    return _in_place_applies(w) and (_few_rows(conv) or _rows(conv) <= _SEARCH_IN_PLACE * _IN_PLACE_ROWS * conv.fg)


def _shifts_apply(conv: _Conv) -> bool:
    """Whether shifted rows can run this convolution: stride 1, undilated, one group."""
    return conv.groups == 1 and conv.window.stride_one_undilated


# A measured search tries Winograd and shifted rows from this many input channels: with fewer, their GEMMs
# (K = C) are too thin (1 channel, 100 x 28 x 28 into 16, 1 thread: im2col 1.3 ms, Winograd 14, shifts 24).
_SEARCH_CHANNELS = 8


def _choose(
    xp: ModuleType, key: tuple[Any, ...], conv: _Conv, direction: str, w: Array, paths: dict[str, Callable[[], Run]]
) -> Run:
    """The heuristics' algorithm for `direction` ('forward' or 'filter'), or the fastest of those worth measuring."""
    if "in_place" in paths and _few_rows(conv):
        heuristic = "in_place"
    elif "dft" in paths:
        heuristic = "dft"
    elif conv_winograd.chosen(conv.window, conv.groups, conv.cg, conv.fg, w, direction):
        heuristic = "winograd"
    else:
        heuristic = "shifts" if _by_shifts(conv) else "im2col"
    if conv.cg < _SEARCH_CHANNELS:
        thin = ("winograd", "shifts")
        paths = {name: build for name, build in paths.items() if name not in thin or name == heuristic}
    return algorithms.choose(xp, key, paths, heuristic)


def _key(kind: str, conv: _Conv, arrays: Sequence[Array], epilogue: str | None) -> tuple[Any, ...]:
    """What a measured choice depends on: the kernel, its window and groups, and its operands' layouts."""
    window = conv.window
    layouts = tuple((a.shape, a.strides, np.dtype(a.dtype).str) for a in arrays)
    return (kind, window.strides, window.pads, window.dilations, conv.groups, epilogue, layouts)


class _Shifts:
    """The padded grid of a stride-1 convolution without im2col, and its chunks of whole images.

    In a chunk's padded NHWC images, flattened to rows of C, output (n, h, w) has grid row
    r = (n * Hp + h) * Wp + w, and its tap (i, j) reads input row r + i * Wp + j: each tap's
    input is one contiguous block of rows. Rows of padding positions are computed and dropped.
    """

    def __init__(self, conv: _Conv):
        self.conv = conv
        n, (hp, wp), (kh, kw) = conv.x_shape[0], conv.window.padded_hw, conv.window.kernel
        self.hp, self.wp = hp, wp
        spans = even_chunks(n, _SHIFT_ROWS // (hp * wp))
        self.images = max((len(s) for s in spans), default=1)
        self.grid_rows = self.images * hp * wp
        self.offsets = [i * wp + j for i, j in conv.window.taps()]
        reach = self.offsets[-1]  # rows past the last valid output that the last tap reads
        # (first image, images, rows computed) per chunk
        self.chunks = [(s.start, len(s), len(s) * hp * wp - reach) for s in spans]

    def padded(self, xp: ModuleType, x: Array) -> tuple[Array, Callable[[int, int], Run]]:
        """A chunk's zero-padded input as (grid rows, C), and the step that copies images [start, start+count) in."""
        padded = xp.zeros((self.images, self.hp, self.wp, self.conv.cg), x.dtype)
        interior = self.conv.window.interior(padded.transpose(0, 3, 1, 2))
        return padded.reshape(self.grid_rows, -1), lambda start, count: partial(
            xp.copyto, interior[:count], x[start : start + count]
        )

    def grid(self, rows: Array, count: int) -> Array:
        """The first `count` images' grid rows of a (grid rows, X) buffer as (count, Hp, Wp, X), a view."""
        return rows[: count * self.hp * self.wp].reshape(count, self.hp, self.wp, -1)

    def tap_blocks(self, xp: ModuleType, flat: Array, rows: int) -> Array:
        """Every tap's block of `rows` input rows as one (kh, kw, rows, C) view of `flat`, for one batched
        GEMM: tap (i, j) starts at row i * Wp + j."""
        (kh, kw), (row, item) = self.conv.window.kernel, flat.strides
        return xp.lib.stride_tricks.as_strided(flat, (kh, kw, rows, flat.shape[1]), (self.wp * row, row, row, item))


def _conv2d_by_shifts(
    xp: ModuleType, conv: _Conv, epilogue: str | None, x: Array, w: Array, bias: Sequence[Array], y: Array
) -> Run:
    """y at stride 1 without im2col: per tap, one GEMM of its shifted block of input rows by its (C, F)
    weights, summed over the chunk's grid (`_Shifts`); the valid (oh, ow) of each image go to y."""
    shifts = _Shifts(conv)
    (kh, kw), (oh, ow), f = conv.window.kernel, conv.y_shape[2:], conv.fg
    taps = scratch(xp, (kh, kw, conv.cg, f), w.dtype)
    copy_taps = partial(xp.copyto, taps, w.transpose(2, 3, 1, 0))

    def lane() -> Callable[[int], list[Run]]:
        flat, pad = shifts.padded(xp, x)  # its padding stays zero from run to run: its own
        product = scratch(xp, (shifts.grid_rows, f), y.dtype)
        term = scratch(xp, product.shape, y.dtype)

        def chunk_steps(index: int) -> list[Run]:
            start, count, rows = shifts.chunks[index]
            total, extra = product[:rows], term[:rows]
            steps = [pad(start, count)]
            for t, (offset, (i, j)) in enumerate(zip(shifts.offsets, conv.window.taps(), strict=True)):
                steps.append(partial(xp.matmul, flat[offset : offset + rows], taps[i, j], out=total if t == 0 else extra))
                if t:
                    steps.append(partial(xp.add, total, extra, out=total))
            steps += _epilogue_steps(xp, epilogue, conv, bias, total[None])
            grid = shifts.grid(product, count)
            return [*steps, partial(xp.copyto, y[start : start + count], grid[:, :oh, :ow].transpose(0, 3, 1, 2))]

        return chunk_steps

    return Pulled(xp, len(shifts.chunks), [copy_taps], lane)


def _grad_filter_by_shifts(xp: ModuleType, conv: _Conv, dy: Array, x: Array, dw: Array) -> Run:
    """dw at stride 1 without im2col: per tap, dy on the padded grid (zeros at padding positions),
    transposed, times the tap's shifted block of input rows: (F, rows) x (rows, C), summed over the chunks.

    All taps go in one batched GEMM: numpy holds the GIL through a matmul whose output is this small
    (16 x 16 for ResNet-BN's block1), so nine separate calls from two threads ran one after the other
    (5.5 ms at 1 and at 2 threads), where one call per chunk lets them overlap.
    """
    shifts = _Shifts(conv)
    (kh, kw), (oh, ow), (f, c) = conv.window.kernel, conv.y_shape[2:], (conv.fg, conv.cg)

    def lane() -> Callable[[int, Array], list[Run]]:
        flat, pad = shifts.padded(xp, x)
        dy_flat = xp.zeros((shifts.grid_rows, f), dy.dtype)  # the rows of padding positions stay zero
        dy_valid = shifts.grid(dy_flat, shifts.images)[:, :oh, :ow]

        def term(index: int, into: Array) -> list[Run]:
            start, count, rows = shifts.chunks[index]
            dy_nhwc = dy[start : start + count].transpose(0, 2, 3, 1)
            blocks = shifts.tap_blocks(xp, flat, rows)
            return [
                pad(start, count),
                partial(xp.copyto, dy_valid[:count], dy_nhwc),
                partial(xp.matmul, dy_flat[:rows].T, blocks, out=into),
            ]

        return term

    return pulled_sum(xp, len(shifts.chunks), (kh, kw, f, c), dw.dtype, lane, dw.transpose(2, 3, 0, 1))


class _InPlace:
    """The whole batch as one GEMM per group that reads w, and writes dw, where they lie.

    The im2col paths copy w into their (groups, K, F/groups) layout at every call, a transposing copy (8.8 ms
    for a 2048 x 512 weight, against 0.19 ms for a plain copy), and land dw through another: costs of the
    weight's size that only many output rows pay for. Here the columns are (groups, K, M) with K ordered
    (C/groups, kh, kw), as a row of the OIHW weight is, so that w.reshape(F, K) is a GEMM operand as it lies:
    y^T = w @ columns, dcolumns = w^T @ dy^T (then col2im), dw = dy^T @ columns^T straight into dw.
    An (N, X, oh, ow) tensor of one image or of one pixel per image is its (X, M) matrix as it lies, and so
    is a 1x1, stride-1, unpadded convolution's x: those take no copies at all.
    """

    def __init__(self, conv: _Conv):
        self.conv = conv
        window = conv.window
        self.direct = window.kernel == (1, 1) and window.stride_one_undilated and not any(window.pads)

    def weights(self, w: Array) -> Array:
        """w (F, C/groups, kh, kw) as (groups, F/groups, K), a view (w is C-contiguous: `_in_place_applies`)."""
        return w.reshape(self.conv.groups, self.conv.fg, self.conv.k)

    def buffer(self, xp: ModuleType, shape: Sequence[int], dtype: DTypeLike, by_rows: bool) -> tuple[Array, Array]:
        """A (groups, X..., N, h, w) buffer, stored with the image axes first where `by_rows`, and its
        (groups, prod(X), M) matrix view."""
        g, *inner, n, h, w = shape
        if by_rows:
            storage = scratch(xp, (g, n, h, w, *inner), dtype)
            matrix = storage.reshape(g, n * h * w, math.prod(inner)).swapaxes(1, 2)
            return storage.transpose(0, *range(4, 4 + len(inner)), 1, 2, 3), matrix
        storage = scratch(xp, shape, dtype)
        return storage, storage.reshape(g, math.prod(inner), n * h * w)

    def matrix(self, xp: ModuleType, a: Array, into: bool, by_rows: bool = False) -> tuple[Array, list[Run]]:
        """a (N, groups*X, h, w) as a (groups, X, N*h*w) matrix: a view of a where one exists, else a `buffer`
        of its own and the step that copies a `into` it (or it back into a)."""
        n, _, h, w = a.shape
        grouped = self.conv.grouped(a).transpose(1, 2, 0, 3, 4)  # (groups, X, N, h, w)
        if a.flags.c_contiguous and (n == 1 or h * w == 1):
            return grouped.reshape(*grouped.shape[:2], n * h * w), []
        shaped, matrix = self.buffer(xp, grouped.shape, a.dtype, by_rows)
        return matrix, [partial(xp.copyto, shaped, grouped) if into else partial(xp.copyto, grouped, shaped)]

    def columns_buffer(self, xp: ModuleType, dtype: DTypeLike, by_rows: bool) -> tuple[Array, Array]:
        """A `buffer` of columns as (groups, C/groups, kh, kw, N, oh, ow), and its (groups, K, M) matrix."""
        conv = self.conv
        shape = (conv.groups, conv.cg, *conv.window.kernel, conv.x_shape[0], *conv.y_shape[2:])
        return self.buffer(xp, shape, dtype, by_rows)

    def columns(self, xp: ModuleType, x: Array) -> tuple[Array, list[Run]]:
        """x's (groups, K, M) columns, and the steps that gather them: pad, then one strided copy."""
        if self.direct:
            return self.matrix(xp, x, into=True)
        # channel-major padding and columns: the gather copies runs of output columns
        windows, pad = self.conv.windows(xp, x, channels_last=False)
        shaped, columns = self.columns_buffer(xp, x.dtype, by_rows=False)
        gather = partial(xp.copyto, shaped, windows.transpose(0, 6, 4, 5, 1, 2, 3))
        return columns, [pad(_Chunk(0, len(x), 0)), gather]

    def col2im(self, xp: ModuleType, dx: Array) -> tuple[Array, list[Run]]:
        """A (groups, K, M) matrix for dcolumns, and the steps that add each tap's back where it read into dx.

        Stored by rows, (M, K): the GEMM then reads w as it lies, not transposed (a 2048 x 1024 w times
        two rows of dy: 1.0 ms, against 2.7 ms into (K, M)). numpy buffers the adds over strided views,
        a few KB of a run's memory, as im2col's col2im does."""
        if self.direct:
            return self.matrix(xp, dx, into=False)
        conv, window = self.conv, self.conv.window
        shaped, columns = self.columns_buffer(xp, dx.dtype, by_rows=True)
        sink = conv.padded(xp, dx.dtype, channels_last=False, transient=True)
        steps: list[Run] = [partial(sink.fill, 0)]
        for i, j in window.taps():
            target = conv.grouped(window.tap(sink, i, j))  # (N, groups, C/groups, oh, ow)
            steps.append(partial(xp.add, target, shaped[:, :, i, j].transpose(2, 0, 1, 3, 4), out=target))
        steps.append(partial(xp.copyto, dx, window.interior(sink)))
        return columns, steps


def _in_place_applies(w: Array) -> bool:
    """Whether the weights can be read (or dw written) in place: through a reshaped view, so C-contiguous."""
    return bool(w.flags.c_contiguous)


def _conv2d_in_place(
    xp: ModuleType, conv: _Conv, epilogue: str | None, x: Array, w: Array, bias: Sequence[Array], y: Array
) -> Run:
    """y^T = w @ columns for the whole batch, the epilogue on the product, then y."""
    in_place = _InPlace(conv)
    columns, gather = in_place.columns(xp, x)
    product, land = in_place.matrix(xp, y, into=False)  # (groups, F/groups, M)
    epilogue_steps = _epilogue_steps(xp, epilogue, conv, bias, product.swapaxes(1, 2))
    return sequence([*gather, gemm(xp, in_place.weights(w), columns, product), *epilogue_steps, *land])


def _grad_input_in_place(xp: ModuleType, conv: _Conv, dy: Array, w: Array, dx: Array) -> Run:
    """dcolumns = w^T @ dy^T for the whole batch, then col2im."""
    in_place = _InPlace(conv)
    rows, copy_dy = in_place.matrix(xp, dy, into=True)
    columns, col2im = in_place.col2im(xp, dx)
    return sequence([*copy_dy, gemm(xp, in_place.weights(w).swapaxes(1, 2), rows, columns), *col2im])


def _grad_filter_in_place(xp: ModuleType, conv: _Conv, dy: Array, x: Array, dw: Array) -> Run:
    """dw = dy^T @ columns^T for the whole batch, written straight into dw."""
    in_place = _InPlace(conv)
    rows, copy_dy = in_place.matrix(xp, dy, into=True, by_rows=True)
    columns, gather = in_place.columns(xp, x)
    return sequence([*copy_dy, *gather, gemm(xp, rows, columns.swapaxes(1, 2), in_place.weights(dw))])


@register("conv2d")
def conv2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = x * w; with a bias input, the fused `epilogue` (bias_add or bias_add_relu) runs on each chunk in cache."""
    (x, w, *bias), (y,) = ins, outs
    conv = _Conv(attrs, x.shape, w.shape, np.dtype(y.dtype).itemsize)
    expect_shape("conv2d", "output", y.shape, conv.y_shape)
    epilogue = _epilogue(attrs, conv, bias)
    paths: dict[str, Callable[[], Run]] = {}
    if _by_transforms(conv, "forward", [x, w, y]):
        paths["dft"] = partial(conv_dft.conv2d, xp, conv.window, epilogue, x, w, bias, y)
    if conv_winograd.applies(conv.window, conv.groups, w):
        paths["winograd"] = partial(conv_winograd.conv2d, xp, conv.window, epilogue, x, w, bias, y)
    if _shifts_apply(conv):
        paths["shifts"] = partial(_conv2d_by_shifts, xp, conv, epilogue, x, w, bias, y)
    paths["im2col"] = partial(_conv2d_by_im2col, xp, conv, epilogue, x, w, bias, y)
    if _in_place_candidate(conv, w):
        paths["in_place"] = partial(_conv2d_in_place, xp, conv, epilogue, x, w, bias, y)
    return _choose(xp, _key("conv2d", conv, [x, w, y, *bias], epilogue), conv, "forward", w, paths)


def _conv2d_by_im2col(
    xp: ModuleType, conv: _Conv, epilogue: str | None, x: Array, w: Array, bias: Sequence[Array], y: Array
) -> Run:
    """y per chunk: gather the im2col columns, one GEMM by the weight matrix, the epilogue, land in y."""
    windows, pad = conv.windows(xp, x)
    weights, copy_weights = conv.weight_matrix(xp, w)
    y_grouped = conv.grouped(y)  # (N, g, F/g, oh, ow)

    def lane() -> Callable[[int], list[Run]]:
        columns, gathers = conv.gathers(xp, windows, conv.chunks)
        product = conv.matrices(xp, conv.fg, y.dtype)

        def chunk_steps(index: int) -> list[Run]:
            chunk = conv.chunks[index]
            rows = product[:, : chunk.rows]
            return [
                pad(chunk),
                gathers[index],
                gemm(xp, columns[:, : chunk.rows], weights, rows),
                *_epilogue_steps(xp, epilogue, conv, bias, rows),
                partial(
                    xp.copyto,
                    y_grouped[chunk.start : chunk.stop],
                    conv.image_rows(product, chunk).transpose(1, 0, 4, 2, 3),
                ),
            ]

        return chunk_steps

    return Pulled(xp, len(conv.chunks), [copy_weights], lane)


@register("conv2d_grad_filter")
def conv2d_grad_filter(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dw^T = dy^T @ columns, summed over the chunks: (F/groups, M) x (M, K), dy^T as `dy_rows` stores it.

    Each group of consecutive chunks sums into a slot of its own; the slots are added in order.
    """
    (dy, x), (dw,) = ins, outs
    conv = _Conv(attrs, x.shape, dw.shape, np.dtype(dw.dtype).itemsize)
    expect_shape("conv2d_grad_filter", "dy", dy.shape, conv.y_shape)
    if not conv.chunks:  # no images (a device of a mirrored job given no rows): nothing to sum
        return partial(dw.fill, 0)
    paths: dict[str, Callable[[], Run]] = {}
    if _by_transforms(conv, "filter", [dy, x, dw]):
        paths["dft"] = partial(conv_dft.conv2d_grad_filter, xp, conv.window, dy, x, dw)
    if conv_winograd.applies(conv.window, conv.groups, dw):
        paths["winograd"] = partial(conv_winograd.conv2d_grad_filter, xp, conv.window, dy, x, dw)
    if _shifts_apply(conv):
        paths["shifts"] = partial(_grad_filter_by_shifts, xp, conv, dy, x, dw)
    paths["im2col"] = partial(_grad_filter_by_im2col, xp, conv, dy, x, dw)
    if _in_place_candidate(conv, dw):
        paths["in_place"] = partial(_grad_filter_in_place, xp, conv, dy, x, dw)
    return _choose(xp, _key("conv2d_grad_filter", conv, [dy, x, dw], None), conv, "filter", dw, paths)


def _grad_filter_by_im2col(xp: ModuleType, conv: _Conv, dy: Array, x: Array, dw: Array) -> Run:
    """dw^T per chunk: dy^T times the chunk's im2col columns, summed over the chunks."""
    windows, pad = conv.windows(xp, x)

    (kh, kw), groups, fg = conv.window.kernel, conv.groups, conv.fg

    def lane() -> Callable[[int, Array], list[Run]]:
        columns, gathers = conv.gathers(xp, windows, conv.chunks)
        rows, row_copies = conv.dy_rows(xp, dy, conv.chunks)

        def term(index: int, into: Array) -> list[Run]:
            m = conv.chunks[index].rows
            gradient = gemm(xp, rows[:, :m].swapaxes(1, 2), columns[:, :m], into.reshape(groups, fg, conv.k))
            return [pad(conv.chunks[index]), gathers[index], row_copies[index], gradient]

        return term

    landed = conv.per_group(dw).transpose(0, 1, 3, 4, 2)  # (groups, F/groups, kh, kw, C/groups)
    return pulled_sum(xp, len(conv.chunks), (groups, fg, kh, kw, conv.cg), dw.dtype, lane, landed)


def _as_correlation(conv: _Conv) -> dict[str, Any] | None:
    """For stride 1, dx is a plain conv2d of dy with the flipped, transposed weights: its attrs, else None.

    dx[c, h, w] = sum over f, i, j of dy[f, h + top - i*dh, w + left - j*dw] w[f, c, i, j], which is
    dy padded by dh*(kh-1) - top (etc.) correlated with w[f, c, kh-1-i, kw-1-j].
    """
    window = conv.window
    if window.strides != (1, 1):
        return None
    (kh, kw), (dh, dw), (top, bottom, left, right) = window.kernel, window.dilations, window.pads
    pads = (dh * (kh - 1) - top, dh * (kh - 1) - bottom, dw * (kw - 1) - left, dw * (kw - 1) - right)
    if min(pads) < 0:
        return None
    return {"pads": pads, "dilations": window.dilations, "groups": conv.groups}


def _grad_input_by_correlation(xp: ModuleType, conv: _Conv, attrs: Mapping[str, Any], dy: Array, w: Array, dx: Array) -> Run:
    """dx = conv2d(dy, flipped w^T): gathers of dy and one GEMM per chunk, no col2im scatter."""
    flipped = scratch(xp, (conv.x_shape[1], conv.fg, *conv.window.kernel), w.dtype)  # (C, F/groups, kh, kw)
    source = conv.per_group(w).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]  # (g, C/g, F/g, kh, kw)
    flip = partial(xp.copyto, flipped.reshape(source.shape), source)
    return sequence([flip, conv2d(xp, attrs, [dy, flipped], [dx])])


@register("conv2d_grad_input")
def conv2d_grad_input(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx: for few output rows in place (`_InPlace`); otherwise by DFTs where their cost model says so, for
    stride 1 a forward correlation, else per chunk dy times each tap's weights added back where the tap read
    (col2im). A measured search tries the in-place GEMM, where it is built, against that other path."""
    (dy, w), (dx,) = ins, outs
    conv = _Conv(attrs, dx.shape, w.shape, np.dtype(dx.dtype).itemsize)
    expect_shape("conv2d_grad_input", "dy", dy.shape, conv.y_shape)
    correlation = _as_correlation(conv)
    if _by_transforms(conv, "input", [dy, w, dx]):
        paths = {"dft": partial(conv_dft.conv2d_grad_input, xp, conv.window, dy, w, dx)}
    elif correlation is not None:
        paths = {"correlation": partial(_grad_input_by_correlation, xp, conv, correlation, dy, w, dx)}
    else:
        paths = {"im2col": partial(_grad_input_by_im2col, xp, conv, dy, w, dx)}
    heuristic = next(iter(paths))
    if _in_place_candidate(conv, w):
        paths["in_place"] = partial(_grad_input_in_place, xp, conv, dy, w, dx)
        heuristic = "in_place" if _few_rows(conv) else heuristic
    return algorithms.choose(xp, _key("conv2d_grad_input", conv, [dy, w, dx], None), paths, heuristic)


def _grad_input_by_im2col(xp: ModuleType, conv: _Conv, dy: Array, w: Array, dx: Array) -> Run:
    """dx per chunk: dy times each tap's (F/groups, C/groups) weights, added back where the tap read."""
    window = conv.window
    taps = list(window.taps())
    tap_weights = scratch(xp, (conv.groups, len(taps), conv.fg, conv.cg), w.dtype)
    weights_view = tap_weights.reshape(conv.groups, *window.kernel, conv.fg, conv.cg)
    sink = conv.padded(xp, dx.dtype, transient=True)  # the chunks are disjoint images of it, each zeroed first
    interior = window.interior(sink)

    def lane() -> Callable[[int], list[Run]]:
        rows, row_copies = conv.dy_rows(xp, dy, conv.chunks)
        per_tap = scratch(xp, (conv.groups, len(taps), conv.chunk_rows, conv.cg), dx.dtype)

        def chunk_steps(index: int) -> list[Run]:
            chunk = conv.chunks[index]
            products = per_tap[:, :, : chunk.rows]
            images = slice(chunk.start, chunk.stop)  # zeroed, accumulated and landed while in cache
            steps = [
                partial(sink[images].fill, 0),
                row_copies[index],
                partial(xp.matmul, rows[:, None, : chunk.rows], tap_weights, out=products),
            ]
            for t, (i, j) in enumerate(taps):
                target = conv.grouped(window.tap(sink, i, j)[images])  # (images, g, C/g, oh, ow)
                product = conv.image_rows(products[:, t], chunk).transpose(1, 0, 4, 2, 3)
                steps.append(partial(xp.add, target, product, out=target))
            return [*steps, partial(xp.copyto, dx[images], interior[images])]

        return chunk_steps

    copy_weights = partial(xp.copyto, weights_view, conv.per_group(w).transpose(0, 3, 4, 1, 2))
    return Pulled(xp, len(conv.chunks), [copy_weights], lane)
