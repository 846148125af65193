"""conv2d by Winograd's F(2x2, 3x3): 16 multiplies per 2x2 output tile and channel pair instead of 36.

Each 2x2 output tile reads a 4x4 input tile (tiles overlap by 2). With the 16 bins of a tile's transform
U = B^T d B and the filters' V = G g G^T, the tile is A^T (U . V) A, where the pointwise product summed
over the input channels is, per bin, one (tiles, C) x (C, F) GEMM. The filters' transform is one GEMM
with kron(G, G); B^T and A^T hold only 0 and +-1, so the data's transforms are adds, one axis at a time
(as kron GEMMs the input's transform alone cost as many multiply-adds as the channel GEMMs). Entries
0, +-1 and +-1/2 keep float32 close to the direct sum. An odd output size pads the tile grid; the extra
row or column is computed and dropped. conv2d_grad_input's stride-1 correlation takes it too: through
ResNet-BN's three float32 steps of tests/test_resnet_parity.py its error matches PyTorch float32's.

The filter gradient is the same algebra run backward: dy's tiles go to their bins through A (adds
again), each bin's (F, tiles) x (tiles, C) product sums over the batch, and G^T M G per filter and
channel is one GEMM with kron(G, G).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType

import numpy as np

from .parallel import Pulled, even_chunks, pulled_sum
from .registry import Array, Run
from .window import Window
from .workspace import scratch

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)
# Bytes of a chunk's bins, (16, images x tiles, C), at most: they stay in a core's L2 (1 MB here). Forward,
# batch 100, C=32 F=32 14x14 (100 KB of bins per image), ms best of 60 at 1 / 2 threads, load ~0.3: 4 images
# 4.00-4.06 / 3.36-3.40, 8 3.80-4.04 / 2.62-2.69, 10 3.66 / 2.28, 12 3.69-3.74 / 2.29-2.37, 16 3.67 / 2.34.
# Fewer, larger chunks also mean fewer numpy calls, each holding the GIL the other thread waits for.
_CHUNK_BYTES = 1 << 20
# Input and output channels from which Winograd is chosen. Forward, batch 100, 3x3, pads 1, wall ms best of 45
# at 1 / 2 threads, load ~0.3, current path (shifted rows or im2col) -> Winograd in chunks of `_CHUNK_BYTES`:
# C=16 F=16 28x28 7.15 / 3.87 -> 6.63 / 3.72, C=16 F=32 14x14 3.52 / 1.76 -> 2.64 / 1.46, C=32 F=16 14x14
# 3.06 / 1.59 -> 2.68 / 1.63, C=12 F=16 28x28 6.28 / 3.58 -> 5.64 / 3.35, C=16 F=8 28x28 6.09 / 4.40 ->
# 5.55 / 4.11; with 8 input channels the shifted rows stay faster: C=8 F=16 28x28 4.20 / 2.18 -> 4.62 / 2.67,
# C=8 F=8 3.04 / 1.62 -> 3.70 / 2.14.
# The filter gradient (per bin, dy's bins times the input's, summed over the tiles), against the current path,
# best of 60 alternating at 1 / 2 threads, load ~0.3: C=32 F=32 14x14 5.86 / 2.84 -> 3.96 / 2.23 (im2col); where
# shifted rows run it, it loses or ties: C=16 F=16 28x28 4.92 / 2.53 -> 7.00 / 4.03, C=16 F=32 14x14 2.41 / 1.25
# -> 2.40 / 1.43.
_CHANNELS = {"forward": (12, 8), "filter": (32, 32)}


def applies(window: Window, groups: int, w: Array) -> bool:
    """Whether Winograd can run a convolution: 3x3, stride 1, undilated, one group, contiguous weights (read or
    written through a reshaped view)."""
    return groups == 1 and window.kernel == (3, 3) and window.stride_one_undilated and w.flags.c_contiguous


def chosen(window: Window, groups: int, c: int, f: int, w: Array, direction: str) -> bool:
    """Whether the heuristics run `direction` of conv2d ('forward', which the input gradient's correlation is
    too, or 'filter') by Winograd: where it `applies`, with input and output channels where it measured faster."""
    channels, filters = _CHANNELS[direction]
    return applies(window, groups, w) and c >= channels and f >= filters


def _through_b(xp: ModuleType, d: list[Array], into: list[Array]) -> list[Run]:
    """into[q] = sum_j B^T[q, j] d[j] by adds (B^T's entries are 0 and +-1): one axis of the input transform."""
    return [
        partial(xp.subtract, d[0], d[2], out=into[0]),
        partial(xp.add, d[1], d[2], out=into[1]),
        partial(xp.subtract, d[2], d[1], out=into[2]),
        partial(xp.subtract, d[1], d[3], out=into[3]),
    ]


def _through_a(xp: ModuleType, m: list[Array], into: list[Array]) -> list[Run]:
    """into[a] = sum_p A^T[a, p] m[p] by adds: one axis of the output transform."""
    return [
        partial(xp.add, m[0], m[1], out=into[0]),
        partial(xp.add, into[0], m[2], out=into[0]),
        partial(xp.subtract, m[1], m[2], out=into[1]),
        partial(xp.subtract, into[1], m[3], out=into[1]),
    ]


def _through_a_transposed(xp: ModuleType, g: list[Array], into: list[Array]) -> list[Run]:
    """into[p] = sum_a A^T[a, p] g[a]: one axis of a tile's output gradient taken to its 16 bins."""
    return [
        partial(xp.copyto, into[0], g[0]),
        partial(xp.add, g[0], g[1], out=into[1]),
        partial(xp.subtract, g[0], g[1], out=into[2]),
        partial(xp.negative, g[1], out=into[3]),
    ]


class _Tiles:
    """The tile grid of a batch's 3x3 stride-1 convolution with input channels C, in chunks of images.

    Bins and products are (16, rows) buffers whose rows run over (tile row, image, tile column,
    channel): a chunk shorter than the longest is a prefix of each row.
    """

    def __init__(self, window: Window, x: Array):
        n, self.c, h, wd = x.shape
        (oh, ow), (self.top, _, self.left, _) = window.out_hw, window.pads
        self.th, self.tw = -(-oh // 2), -(-ow // 2)
        self.chunks = even_chunks(n, _CHUNK_BYTES // (16 * self.th * self.tw * self.c * x.dtype.itemsize))
        self.most = max((len(s) for s in self.chunks), default=1)
        # the input as far as the tiles read: rows and columns past it (pads, a padded tile grid) are zero or dropped
        self.hp, self.wp = 2 * self.th + 2, 2 * self.tw + 2
        self.rows, self.cols = min(h, self.hp - self.top), min(wd, self.wp - self.left)

    def tiles(self, chunk: range) -> int:
        """Tiles of a chunk's images, the rows of its bins per channel."""
        return len(chunk) * self.th * self.tw

    @staticmethod
    def _landing(offset: int, pad: int, size: int, slots: int) -> tuple[range, int]:
        """Along one axis, the input's indices whose padded index (index + pad) is 2 s + offset with 0 <= s <
        `slots`, every other one, and the first such s."""
        first = offset - pad if offset >= pad else (offset - pad) % 2
        at = (first + pad - offset) // 2
        return range(first, min(size, first + 2 * (slots - at)), 2), at

    def input_bins(self, xp: ModuleType, x: Array) -> tuple[Array, Callable[[range], list[Run]]]:
        """A lane's (16, most x tiles x C) bins of the input, and the steps that fill them for a chunk: B^T d B."""
        c, hp, th, tw = self.c, self.hp, self.th, self.tw
        # the padded input's columns j::2 (j < 4) as (row parity, hp / 2, images, tw, C), each tile row's block of
        # every image contiguous (numpy 2 buffers, allocating, ufunc operands strided along more than one axis),
        # filled straight from x. Their padding is zeroed once and kept: their own, one set per chunk length (the
        # images axis is inside, so a shorter chunk's borders lie elsewhere; even_chunks makes at most two lengths).
        phases = {k: xp.zeros((4, 2, hp // 2, k, tw, c), x.dtype) for k in {len(s) for s in self.chunks}}
        across = scratch(xp, (4, self.most * hp * tw * c), x.dtype)  # B^T along the columns
        bins = scratch(xp, (16, self.most * th * tw * c), x.dtype)
        # per tile column j and row parity: x's rows and columns landing there, and the first row pair and tile they fill
        spans = [
            (j, parity, *self._landing(parity, self.top, self.rows, hp // 2), *self._landing(j, self.left, self.cols, tw))
            for j in range(4)
            for parity in range(2)
        ]

        def steps(chunk: range) -> list[Run]:
            k, m = len(chunk), self.tiles(chunk)
            phased, images = phases[k], x[chunk.start : chunk.stop]
            out: list[Run] = []
            for j, parity, rows, at_row, cols, at_col in spans:
                if len(rows) and len(cols):
                    target = phased[j, parity, at_row : at_row + len(rows), :, at_col : at_col + len(cols)]
                    source = images[:, :, rows.start : rows.stop : 2, cols.start : cols.stop : 2].transpose(2, 0, 3, 1)
                    out.append(partial(xp.copyto, target, source))
            rowwise = across[:, : k * hp * tw * c].reshape(4, 2, hp // 2, m * c // th)
            out += _through_b(xp, [phased[j].reshape(k * hp * tw * c) for j in range(4)], [across[q, : k * hp * tw * c] for q in range(4)])
            grid = bins[:, : m * c].reshape(4, 4, m * c)
            for q in range(4):  # contiguous operands (differing strides along an outer axis get buffered too)
                out += _through_b(xp, [rowwise[q, i % 2, i // 2 : i // 2 + th].reshape(m * c) for i in range(4)], list(grid[:, q]))
            return out

        return bins, steps


def conv2d(xp: ModuleType, window: Window, epilogue: str | None, x: Array, w: Array, bias: Sequence[Array], y: Array) -> Run:
    """y = x * w by F(2x2, 3x3), the threads taking the batch's chunks; bias and relu on each chunk's tiles."""
    grid = _Tiles(window, x)
    c, f, th, tw, most = grid.c, w.shape[0], grid.th, grid.tw, grid.most
    filters = xp.asarray(np.kron(_G, _G).T.astype(w.dtype))  # (9, 16)
    transformed = scratch(xp, (f, c, 16), w.dtype)
    weights = scratch(xp, (16, c, f), w.dtype)
    # (F * C, 9) x (9, 16): the filters' transform, then turned to the per-bin GEMMs' (bin, C, F)
    prologue = [
        partial(xp.matmul, w.reshape(f * c, 9), filters, out=transformed.reshape(f * c, 16)),
        partial(xp.copyto, weights, transformed.transpose(2, 1, 0)),
    ]

    def lane() -> Callable[[int], list[Run]]:
        bins, transform = grid.input_bins(xp, x)
        products = scratch(xp, (16, most * th * tw * f), y.dtype)
        reduced = scratch(xp, (2, 4 * most * th * tw * f), y.dtype)  # A^T along the bins' rows
        out = scratch(xp, (4, most * th * tw * f), y.dtype)

        def chunk_steps(index: int) -> list[Run]:
            chunk = grid.chunks[index]
            k, m = len(chunk), grid.tiles(chunk)
            steps = transform(chunk)
            steps.append(partial(xp.matmul, bins[:, : m * c].reshape(16, m, c), weights, out=products[:, : m * f].reshape(16, m, f)))
            if epilogue is not None:  # bin (1, 1) reaches all four outputs of a tile with weight 1
                centre = products[5, : m * f].reshape(m, f)
                steps.append(partial(xp.add, centre, bias[0], out=centre))
            per_bin = products[:, : m * f].reshape(4, 4, m * f)
            half = reduced[:, : 4 * m * f].reshape(2, 4, m * f)
            result = out[:, : m * f].reshape(2, 2, th, k, tw, f)
            steps += _through_a(xp, list(per_bin), list(half))
            steps += _through_a(xp, [half[:, q] for q in range(4)], [result[:, b].reshape(2, m * f) for b in range(2)])
            if epilogue == "bias_add_relu":
                steps += [partial(xp.maximum, out[r, : m * f], 0, out=out[r, : m * f]) for r in range(4)]
            for a in range(2):
                for b in range(2):
                    target = y[chunk.start : chunk.stop, :, a::2, b::2]
                    landed = result[a, b, : target.shape[2], :, : target.shape[3]].transpose(1, 3, 0, 2)
                    steps.append(partial(xp.copyto, target, landed))
            return steps

        return chunk_steps

    return Pulled(xp, len(grid.chunks), prologue, lane)


def conv2d_grad_filter(xp: ModuleType, window: Window, dy: Array, x: Array, dw: Array) -> Run:
    """dw by F(2x2, 3x3): per bin, the input's bins (B^T d B) times dy's (A dy A^T) summed over the tiles, one
    batched (16, F, tiles) x (16, tiles, C) GEMM per chunk; then G^T M G per filter, one GEMM with kron(G, G).

    Each group of consecutive chunks sums into a slot of its own; the slots are added in order.
    """
    grid = _Tiles(window, x)
    c, f, th, tw, most = grid.c, dy.shape[1], grid.th, grid.tw, grid.most
    filters = xp.asarray(np.kron(_G, _G).astype(dw.dtype))  # (16, 9)
    odd = any(size % 2 for size in window.out_hw)

    total = scratch(xp, (16, f, c), dw.dtype)

    def lane() -> Callable[[int, Array], list[Run]]:
        bins, transform = grid.input_bins(xp, x)
        # dy by position in its tile: each term writes all of its rows (zeroing them first where odd sizes leave some)
        tiles = scratch(xp, (2, 2, most * th * tw * f), dy.dtype)
        half = scratch(xp, (2, 4, most * th * tw * f), dy.dtype)  # A along the tiles' columns
        grads = scratch(xp, (16, most * th * tw * f), dy.dtype)

        def term(index: int, into: Array) -> list[Run]:
            chunk = grid.chunks[index]
            k, m = len(chunk), grid.tiles(chunk)
            steps = transform(chunk)
            rows = tiles[:, :, : m * f]
            if odd:  # the tiles' outputs past the edge are zero: a longer chunk may have written there
                steps.append(partial(rows.fill, 0))
            for a in range(2):
                for b in range(2):
                    source = dy[chunk.start : chunk.stop, :, a::2, b::2]
                    landed = rows[a, b].reshape(th, k, tw, f)[: source.shape[2], :, : source.shape[3]].transpose(1, 3, 0, 2)
                    steps.append(partial(xp.copyto, landed, source))
            steps += _through_a_transposed(xp, [rows[:, b] for b in range(2)], [half[:, q, : m * f] for q in range(4)])
            per_bin = grads[:, : m * f].reshape(4, 4, m * f)
            for q in range(4):
                steps += _through_a_transposed(xp, [half[a, q, : m * f] for a in range(2)], list(per_bin[:, q]))
            operands = grads[:, : m * f].reshape(16, m, f).swapaxes(1, 2), bins[:, : m * c].reshape(16, m, c)
            return [*steps, partial(xp.matmul, *operands, out=into)]

        return term

    at_taps = partial(xp.matmul, total.reshape(16, f * c).T, filters, out=dw.reshape(f * c, 9))
    return pulled_sum(xp, len(grid.chunks), (16, f, c), dw.dtype, lane, total, [at_taps])
