"""conv2d and its two gradients by discrete Fourier transforms, for wide kernels over many channels.

A stride-1 correlation is a pointwise product of spectra: on a circular S_h x S_w grid large enough
that nothing wraps into the output window, y_f = IDFT(sum_c DFT(x_c) conj(DFT(w_fc))). Per frequency
bin the channel sum is a small GEMM, so the C F kh kw multiply-adds per output pixel of im2col become
4 C F per bin, plus transforms whose cost grows with C + F, not C F.

numpy's FFT is slow on images this small, so every transform is a GEMM with a precomputed real
matrix, one image axis at a time: rows by the real DFT (V = S_w / 2 + 1 bins), then columns by the
complex one, each GEMM writing the layout the next one reads. Spectra are kept per row bin v as
((u, re/im), images x channels), so that a bin's real and imaginary parts stacked are one
(2N, channels) matrix. The per-bin products (`_through_weights`) either take that matrix as it is,
one GEMM per part of the weights' spectrum, and the inverse adds the four products with the signs of
a complex product; or first interleave re/im with the channels, so that each output part is one GEMM
over 2 C. Which is cheaper depends on which side has more channels (`_stacked`).

The filter gradient sums over the batch per bin: dw_fc = IDFT(sum_n X_nc conj(DY_nf)), with x's
spectrum also transformed as (Im, -Re), so that a bin's real and imaginary results are each one GEMM,
and inverted at the kh x kw taps only.

`chosen` is the cost model conv.py asks: estimated multiply-adds of the transforms against im2col's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType

import numpy as np

from .activation import relu_into
from .parallel import Split, summed
from .registry import Array, Run
from .window import Window
from .workspace import scratch

# The transforms' GEMMs are thin (K = 14-64) and run at about half the per-bin GEMMs' rate: the
# transform path is chosen when its multiply-adds are below im2col's divided by this.
_ADVANTAGE = 2.0
# Columns of (M = images x channels) per step of the transposing copy into the analysis: a block of the
# source stays in cache (LeNet's dy, M = 6400: 1.9 ms in one copy, 0.9-1.3 ms in blocks of 256 or 512).
_COPY_SPAN = 256


@dataclass(frozen=True)
class _Grid:
    """The circular grid of a stride-1 correlation: S_h x S_w, U = S_h column bins, V = S_w // 2 + 1 row bins.

    S covers the input and the wider pad, so that a window reaching past the input reads zeros rather
    than the other edge; the output window, so that its positions are distinct; and the kernel.
    """

    window: Window

    @property
    def size(self) -> tuple[int, int]:
        (h, w), (top, bottom, left, right) = self.window.in_hw, self.window.pads
        (oh, ow), (kh, kw) = self.window.out_hw, self.window.kernel
        return max(h + max(top, bottom), oh, kh), max(w + max(left, right), ow, kw)

    @property
    def bins(self) -> tuple[int, int]:
        sh, sw = self.size
        return sh, sw // 2 + 1

    def macs(self, n: int, c: int, f: int, direction: str) -> int:
        """Multiply-adds of one run of `direction` ('forward', 'input' or 'filter') by transforms."""
        (h, w), (oh, ow), (kh, kw) = self.window.in_hw, self.window.out_hw, self.window.kernel
        u, v = self.bins
        products = 4 * u * v * n * c * f
        weights = 4 * u * v * kh * kw * f * c  # at most: the stacked products' weights take half

        def analysis(rows: int, a: int, b: int, channels: int) -> int:
            return n * channels * a * b * 2 * v + v * rows * u * 2 * a * n * channels

        def synthesis(a: int, b: int, channels: int, parts: int) -> int:
            return v * 2 * a * parts * u * n * channels + a * n * channels * 2 * v * b

        if direction == "forward":
            return analysis(2, h, w, c) + products + synthesis(oh, ow, f, 4 if _stacked(c, f) else 2) + weights
        if direction == "input":
            return analysis(2, oh, ow, f) + products + synthesis(h, w, c, 4 if _stacked(f, c) else 2) + weights
        return analysis(4, h, w, c) + analysis(2, oh, ow, f) + products + weights


def chosen(window: Window, groups: int, n: int, c: int, f: int, direction: str, arrays: Sequence[Array]) -> bool:
    """Whether `direction` of this convolution runs by transforms: stride 1, undilated, one group,
    contiguous operands (the transforms read them through reshaped views), and far fewer multiply-adds."""
    if groups != 1 or not window.stride_one_undilated or n == 0:
        return False
    if not all(a.flags.c_contiguous for a in arrays):
        return False
    (oh, ow), (kh, kw) = window.out_hw, window.kernel
    return _Grid(window).macs(n, c, f, direction) * _ADVANTAGE < n * c * f * oh * ow * kh * kw


def _phase(bins: int, positions: np.ndarray, size: int) -> np.ndarray:
    """2 pi k p / size for bins k and positions p, as a (bins, positions) float64 matrix."""
    return 2 * np.pi * np.outer(np.arange(bins), positions) / size


def _row_analysis(grid: _Grid, length: int, offset: int) -> np.ndarray:
    """(V * 2, length): the real DFT along rows of pixels at offset + 0..length-1, rows (v, re/im)."""
    (_, sw), (_, v) = grid.size, grid.bins
    angle = _phase(v, np.arange(length) + offset, sw)
    return np.stack([np.cos(angle), -np.sin(angle)], axis=1).reshape(2 * v, length)


def _column_analysis(grid: _Grid, length: int, offset: int, rotated: bool) -> np.ndarray:
    """(U * parts * 2, 2 * length): the complex DFT along columns, rows (u, [part,] re/im), columns (re/im, a).

    With `rotated` each u has a second part, (Im, -Re): the filter gradient's imaginary part is then one GEMM too.
    """
    (sh, _), (u, _) = grid.size, grid.bins
    angle = _phase(u, np.arange(length) + offset, sh)
    cos, sin = np.cos(angle), -np.sin(angle)  # e^{-i angle} = cos + i sin
    real = np.concatenate([cos, -sin], axis=-1)  # Re(E A) = cos Ar - sin Ai
    imag = np.concatenate([sin, cos], axis=-1)
    parts = [real, imag, imag, -real] if rotated else [real, imag]
    return np.stack(parts, axis=1).reshape(u * len(parts), 2 * length)


@dataclass(frozen=True)
class _Analysis:
    """The spectrum of an (N, channels, A, B) array: per row bin v a ((u, re/im), N * channels) matrix."""

    steps: list[Run]
    spectrum: Array  # (V, U * parts * 2, N * channels)


def _analysis(xp: ModuleType, grid: _Grid, src: Array, offsets: tuple[int, int], rotated: bool = False) -> _Analysis:
    """Pixels copied to (A, B, M) first, so that each row's GEMM reads a contiguous (B, M) operand (through
    a strided view of src, LeNet's conv2 rows took 1.0-1.4 ms against 0.2-0.4 + 0.25 ms with the copy); then
    per row a one (2V, B) x (B, M) GEMM writes (V, re/im, a, M), and per v one GEMM over (re/im, a)."""
    n, channels, a, b = src.shape
    (u, v), m = grid.bins, n * channels
    rows = xp.asarray(_row_analysis(grid, b, offsets[1]).astype(src.dtype))
    columns = xp.asarray(_column_analysis(grid, a, offsets[0], rotated).astype(src.dtype))
    pixels = scratch(xp, (a, b, m), src.dtype)
    half = scratch(xp, (v, 2, a, m), src.dtype)
    spectrum = scratch(xp, (v, columns.shape[0], m), src.dtype)
    source = src.reshape(m, a, b).transpose(1, 2, 0)
    steps: list[Run] = [
        *(partial(xp.copyto, pixels[..., s : s + _COPY_SPAN], source[..., s : s + _COPY_SPAN]) for s in range(0, m, _COPY_SPAN)),
        partial(xp.matmul, rows, pixels, out=half.reshape(2 * v, a, m).transpose(1, 0, 2)),
        partial(xp.matmul, columns, half.reshape(v, 2 * a, m), out=spectrum),
    ]
    return _Analysis(steps, spectrum)


def _row_weights(grid: _Grid) -> np.ndarray:
    """(V,): 1 / S_w for the bins that stand for themselves (0 and S_w / 2), 2 / S_w for those that also stand
    for their mirror image, which the real DFT leaves out; the real inverse is then sum_v weight Re(Y e^{+i angle})."""
    (_, sw), (_, v) = grid.size, grid.bins
    bins = np.arange(v)
    return np.where((bins == 0) | (2 * bins == sw), 1.0, 2.0) / sw


class _Synthesis:
    """The inverse transform of a half spectrum, (V, U, re/im, N * channels), onto an (N, channels, A, B)
    window at `offsets`: per v a complex inverse DFT along columns, then per output row a real one along rows.

    `stacked`: the input holds per bin instead the four products (weights' re/im) x (data's re/im), as
    (V, U, 4, N * channels), which the column step combines as a complex product while inverting.
    """

    def __init__(self, xp: ModuleType, grid: _Grid, dst: Array, offsets: tuple[int, int], stacked: bool, relu: bool):
        n, channels, a, b = dst.shape
        (sh, sw), (u, v) = grid.size, grid.bins
        self.xp, self.dst, self.m, self.relu = xp, dst, n * channels, relu
        angle = _phase(u, np.arange(a) + offsets[0], sh).T  # (A, U)
        cos, sin = np.cos(angle) / sh, np.sin(angle) / sh  # e^{+i angle} / S_h
        # rows (a, re/im), columns (u, re/im): Re' = cos Re - sin Im, Im' = sin Re + cos Im
        columns = np.stack([np.stack([cos, -sin], axis=-1), np.stack([sin, cos], axis=-1)], axis=1).reshape(2 * a, u, 2)
        if stacked:  # Re = P[re, re] - P[im, im], Im = P[im, re] + P[re, im], weights' part first
            combine = np.array([[1.0, 0.0, 0.0, -1.0], [0.0, 1.0, 1.0, 0.0]])
            columns = columns @ combine
        self.columns = xp.asarray(columns.reshape(2 * a, -1).astype(dst.dtype))
        row_angle = _phase(v, np.arange(b) + offsets[1], sw)  # (V, B)
        weight = _row_weights(grid)[:, None]
        self.rows = xp.asarray(np.concatenate([weight * np.cos(row_angle), -weight * np.sin(row_angle)]).astype(dst.dtype))
        self.spectrum = scratch(xp, (v, u, 4 if stacked else 2, self.m), dst.dtype)
        self.half = scratch(xp, (a, 2, v, self.m), dst.dtype)
        self.rows_out = scratch(xp, (a, self.m, b), dst.dtype)

    def steps(self) -> list[Run]:
        """Columns per v, then rows per output row a into (A, M, B) scratch, then one copy (or relu) into dst.

        The row step writing dst directly, rows of B at a stride of A x B, ran 2-3x slower than into the
        scratch; the copy moves runs of B (LeNet's conv2: 2.8-3.1 ms against 1.3 + 0.5).
        """
        xp, (v, u), a, m = self.xp, self.spectrum.shape[:2], self.half.shape[0], self.m
        landed = self.rows_out.transpose(1, 0, 2).reshape(self.dst.shape[:2] + self.rows_out.shape[::2])
        return [
            partial(xp.matmul, self.columns, self.spectrum.reshape(v, -1, m), out=self.half.reshape(2 * a, v, m).transpose(1, 0, 2)),
            partial(xp.matmul, self.half.reshape(a, 2 * v, m).transpose(0, 2, 1), self.rows, out=self.rows_out),
            relu_into(xp, landed, self.dst) if self.relu else partial(xp.copyto, self.dst, landed),
        ]


def _tap_angles(grid: _Grid) -> np.ndarray:
    """(V, U, kh * kw): the phase of tap (i, j) at bin (u, v), 2 pi (u i / S_h + v j / S_w)."""
    (sh, sw), (u, v), (kh, kw) = grid.size, grid.bins, grid.window.kernel
    return (_phase(v, np.arange(kw), sw)[:, None, None, :] + _phase(u, np.arange(kh), sh)[None, :, :, None]).reshape(v, u, kh * kw)


def _weight_spectrum(xp: ModuleType, grid: _Grid, w: Array, forward: bool, stacked: bool) -> tuple[Array, Run]:
    """A (V, U, re/im out, re/im in, channels in, channels out) buffer for the per-bin real form of the
    complex factor a + ib (conj(DFT(w)) for the forward, DFT(w) for the input gradient), and the step that
    fills it, one GEMM per input channel.

    With the data's spectrum per bin as (N, (re/im, channels in)), the output's real part is the product
    with [a; -b] and its imaginary part with [b; a]. `stacked` keeps only a and b, (V, U, 2, 1, in, out),
    for data as ((re/im, N), channels in), whose four products `_Synthesis` combines.
    """
    f, c, kh, kw = w.shape
    (u, v), taps = grid.bins, kh * kw
    angle = _tap_angles(grid)
    a, b = np.cos(angle), (1.0 if forward else -1.0) * np.sin(angle)  # DFT(w) = sum w e^{-i angle}
    parts = [a, b] if stacked else [a, -b, b, a]
    matrix = xp.asarray(np.stack(parts, axis=2).reshape(len(parts) * u * v, taps).astype(w.dtype))
    per_tap = w.reshape(f, c, taps)
    channels_in, channels_out = (c, f) if forward else (f, c)
    spectrum = scratch(xp, (v, u, 2, len(parts) // 2, channels_in, channels_out), w.dtype)
    out = spectrum.reshape(-1, channels_in, channels_out).transpose(1, 0, 2)
    return spectrum, partial(xp.matmul, matrix, per_tap.transpose(1, 2, 0) if forward else per_tap.transpose(0, 2, 1), out=out)


def _stacked(channels_in: int, channels_out: int) -> bool:
    """Whether the per-bin products take the data's spectrum as it is, ((re/im, N), channels in), which
    doubles the inverse's column step, rather than after a copy that interleaves re/im with the channels.

    The copy moves the input's spectrum, the extra columns cost in proportion to the output's: LeNet's
    conv2, process time, interleaved against stacked, forward (32 -> 64) 9.9 against 10.8 ms, input
    gradient (64 -> 32) 10.7 against 9.8 ms.
    """
    return channels_in > channels_out


def _through_weights(
    xp: ModuleType,
    grid: _Grid,
    src: Array,
    weights: Array,
    dst: Array,
    offsets: tuple[tuple[int, int], tuple[int, int]],
    prologue: list[Run],
    constant: Array | None = None,
    relu: bool = False,
) -> Run:
    """dst from src through `weights` (`_weight_spectrum`); `constant` (channels out,) is added to bin (0, 0).

    Per bin each output part is one GEMM: (N, 2 channels in) x (2 channels in, channels out) with the
    spectrum interleaved, ((re/im, N), channels in) x (channels in, channels out) stacked. Each thread
    takes a part of the batch.
    """
    (u, v), (channels, out) = grid.bins, (src.shape[1], dst.shape[1])
    stacked = _stacked(channels, out)

    def part(span: range) -> tuple[list[Run], None]:
        images, count = slice(span.start, span.stop), span.stop - span.start
        analysis = _analysis(xp, grid, src[images], offsets[0])
        synthesis = _Synthesis(xp, grid, dst[images], offsets[1], stacked, relu)
        steps = list(analysis.steps)
        if stacked:
            data = analysis.spectrum.reshape(v, u, 1, 2 * count, channels)
            product = partial(xp.matmul, data, weights[:, :, :, 0], out=synthesis.spectrum.reshape(v, u, 2, 2 * count, out))
        else:
            interleaved = scratch(xp, (v, u, count, 2, channels), src.dtype)
            split = analysis.spectrum.reshape(v, u, 2, count, channels).transpose(0, 1, 3, 2, 4)
            steps.append(partial(xp.copyto, interleaved, split))
            data = interleaved.reshape(v, u, 1, count, 2 * channels)
            product = partial(xp.matmul, data, weights.reshape(v, u, 2, 2 * channels, out), out=synthesis.spectrum.reshape(v, u, 2, count, out))
        steps.append(product)
        if constant is not None:
            real = synthesis.spectrum[0, 0, 0].reshape(count, out)  # bin (0, 0): its real part (stacked: weights' re x data's re)
            steps.append(partial(xp.add, real, constant, out=real))
        return steps + synthesis.steps(), None

    return Split(xp, src.shape[0], prologue, part)


def conv2d(xp: ModuleType, window: Window, epilogue: str | None, x: Array, w: Array, bias: Sequence[Array], y: Array) -> Run:
    """y = x * w by transforms; a bias b is added to the constant bin as S_h S_w b, which is b at every pixel."""
    grid = _Grid(window)
    weights, fill_weights = _weight_spectrum(xp, grid, w, True, _stacked(x.shape[1], y.shape[1]))
    prologue, constant = [fill_weights], None
    if epilogue is not None:
        constant = scratch(xp, (w.shape[0],), y.dtype)
        prologue.append(partial(xp.multiply, bias[0], float(np.prod(grid.size)), out=constant))
    offsets = ((0, 0), (-window.pads[0], -window.pads[2]))
    return _through_weights(xp, grid, x, weights, y, offsets, prologue, constant, epilogue == "bias_add_relu")


def conv2d_grad_input(xp: ModuleType, window: Window, dy: Array, w: Array, dx: Array) -> Run:
    """dx = dy (*) w: per bin DX = DY W, with dy placed where the forward's windows read."""
    grid = _Grid(window)
    weights, fill_weights = _weight_spectrum(xp, grid, w, False, _stacked(dy.shape[1], dx.shape[1]))
    offsets = ((-window.pads[0], -window.pads[2]), (0, 0))
    return _through_weights(xp, grid, dy, weights, dx, offsets, [fill_weights])


def conv2d_grad_filter(xp: ModuleType, window: Window, dy: Array, x: Array, dw: Array) -> Run:
    """dw = sum over the batch of x correlated with dy: per bin DW = X^T conj(DY), inverted at the taps.

    Each thread sums a part of the batch; the parts' sums are added in part order.
    """
    grid = _Grid(window)
    (n, c), f, (u, v), (sh, _) = x.shape[:2], dy.shape[1], grid.bins, grid.size
    angle = _tap_angles(grid)
    weight = _row_weights(grid)[:, None, None] / sh
    taps = xp.asarray(np.stack([weight * np.cos(angle), -weight * np.sin(angle)], axis=2).reshape(2 * u * v, -1).astype(dw.dtype))

    def part(span: range) -> tuple[list[Run], Array]:
        images, count = slice(span.start, span.stop), span.stop - span.start
        inputs = _analysis(xp, grid, x[images], (0, 0), rotated=True)
        grads = _analysis(xp, grid, dy[images], (-window.pads[0], -window.pads[2]))
        per_bin = scratch(xp, (v, u, 2, f, c), dw.dtype)
        stacked = grads.spectrum.reshape(v, u, 1, 2 * count, f).swapaxes(-1, -2)
        product = partial(xp.matmul, stacked, inputs.spectrum.reshape(v, u, 2, 2 * count, c), out=per_bin)
        return [*inputs.steps, *grads.steps, product], per_bin

    def at_taps(total: Array) -> list[Run]:
        return [partial(xp.matmul, total.reshape(2 * u * v, f * c).T, taps, out=dw.reshape(f * c, -1))]

    return Split(xp, n, [], part, summed(xp, at_taps))
