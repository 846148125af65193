"""conv2d by Winograd's F(2x2, 3x3): 16 multiplies per 2x2 output tile and channel pair instead of 36.

Each 2x2 output tile reads a 4x4 input tile (tiles overlap by 2). With the 16 bins of a tile's transform
U = B^T d B and the filters' V = G g G^T, the tile is A^T (U . V) A, where the pointwise product summed
over the input channels is, per bin, one (tiles, C) x (C, F) GEMM. The filters' transform is one GEMM
with kron(G, G); B^T and A^T hold only 0 and +-1, so the data's transforms are adds, one axis at a time
(as kron GEMMs the input's transform alone cost as many multiply-adds as the channel GEMMs). Entries
0, +-1 and +-1/2 keep float32 close to the direct sum. An odd output size pads the tile grid; the extra
row or column is computed and dropped. conv2d_grad_input's stride-1 correlation takes it too: through
ResNet-BN's three float32 steps of tests/test_resnet_parity.py its error matches PyTorch float32's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from types import ModuleType

import numpy as np

from .parallel import Split, even_chunks
from .registry import Array, Run
from .window import Window

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
_CHANNELS, _FILTERS = 12, 8


def chosen(window: Window, groups: int, c: int, f: int, w: Array) -> bool:
    """Whether conv2d runs by Winograd: 3x3, stride 1, undilated, one group, contiguous weights (read through
    a reshaped view), and channels where it measured faster."""
    if groups != 1 or window.kernel != (3, 3) or not window.stride_one_undilated:
        return False
    if not w.flags.c_contiguous:
        return False
    return c >= _CHANNELS and f >= _FILTERS


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


def conv2d(xp: ModuleType, window: Window, epilogue: str | None, x: Array, w: Array, bias: Sequence[Array], y: Array) -> Run:
    """y = x * w by F(2x2, 3x3), each thread a part of the batch's chunks; bias and relu on each chunk's tiles."""
    n, c, h, wd = x.shape
    f, (oh, ow), (top, _, left, _) = w.shape[0], window.out_hw, window.pads
    th, tw = -(-oh // 2), -(-ow // 2)
    chunks = even_chunks(n, _CHUNK_BYTES // (16 * th * tw * c * x.dtype.itemsize))
    most = max((len(s) for s in chunks), default=1)
    filters = xp.asarray(np.kron(_G, _G).T.astype(w.dtype))  # (9, 16)
    transformed = xp.empty((f, c, 16), w.dtype)
    weights = xp.empty((16, c, f), w.dtype)
    # (F * C, 9) x (9, 16): the filters' transform, then turned to the per-bin GEMMs' (bin, C, F)
    prologue = [
        partial(xp.matmul, w.reshape(f * c, 9), filters, out=transformed.reshape(f * c, 16)),
        partial(xp.copyto, weights, transformed.transpose(2, 1, 0)),
    ]
    # the input as far as the tiles read: rows and columns past it (pads, a padded tile grid) are zero or dropped
    hp, wp = 2 * th + 2, 2 * tw + 2
    rows, cols = min(h, hp - top), min(wd, wp - left)

    def part(span: range) -> tuple[list[Run], None]:
        padded = xp.zeros((most, hp, wp, c), x.dtype)
        # the padded input's columns j::2 (j < 4) as (row parity, hp / 2, images, tw, C), then through B^T along them
        columns, across = (xp.empty((4, most * hp * tw * c), x.dtype) for _ in range(2))
        bins = xp.empty((16, most * th * tw * c), x.dtype)  # per bin, a shorter last chunk is a prefix of each row
        products = xp.empty((16, most * th * tw * f), y.dtype)
        reduced = xp.empty((2, 4 * most * th * tw * f), y.dtype)  # A^T along the bins' rows
        out = xp.empty((4, most * th * tw * f), y.dtype)
        steps: list[Run] = []
        for chunk in chunks[span.start : span.stop]:
            k, images = len(chunk), slice(chunk.start, chunk.stop)
            m = k * th * tw
            source = x[images, :, :rows, :cols].transpose(0, 2, 3, 1)
            steps.append(partial(xp.copyto, padded[:k, top : top + rows, left : left + cols], source))
            # (row parity, hp / 2, images, tw, C): each tile row's block of every image is contiguous, as numpy 2
            # buffers (allocates for) ufunc operands strided along more than one axis
            phased = columns[:, : k * hp * tw * c].reshape(4, 2, hp // 2, k, tw, c)
            steps += [
                partial(xp.copyto, phased[j], padded[:k, :, j : j + 2 * tw : 2].reshape(k, hp // 2, 2, tw, c).transpose(2, 1, 0, 3, 4))
                for j in range(4)
            ]
            rowwise = across[:, : k * hp * tw * c].reshape(4, 2, hp // 2, m * c // th)
            steps += _through_b(xp, [columns[j, : k * hp * tw * c] for j in range(4)], [across[q, : k * hp * tw * c] for q in range(4)])
            grid = bins[:, : m * c].reshape(4, 4, m * c)
            for q in range(4):  # contiguous operands (differing strides along an outer axis get buffered too)
                steps += _through_b(xp, [rowwise[q, i % 2, i // 2 : i // 2 + th].reshape(m * c) for i in range(4)], list(grid[:, q]))
            steps += [
                partial(xp.matmul, bins[:, : m * c].reshape(16, m, c), weights, out=products[:, : m * f].reshape(16, m, f)),
            ]
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
                    target = y[images, :, a::2, b::2]
                    landed = result[a, b, : target.shape[2], :, : target.shape[3]].transpose(1, 3, 0, 2)
                    steps.append(partial(xp.copyto, target, landed))
        return steps, None

    return Split(xp, len(chunks), prologue, part)

