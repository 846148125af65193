"""matmul: (..., m, k) x (..., k, n) with OneFlow's transpose_a / transpose_b flags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .parallel import Split
from .registry import Array, Run, register

# Below this many multiply-adds a matmul is one BLAS call whatever the thread count: handing half of it to
# another thread costs tens of microseconds.
_SPLIT_MACS = 1 << 21


def gemm(xp: ModuleType, a: Array, b: Array, out: Array) -> Run:
    """out = a @ b, through `dot` for matrices and vectors (or a batch of one) into a C-contiguous out, else `matmul`;
    as (b^T a^T)^T when out is stored column-major, so that BLAS writes it in place.

    numpy 2.4's matmul keeps the GIL while its output has fewer than about 500 elements, whatever
    the work: two threads each multiplying (16 x 4000) by (4000 x 16) took 2.1x one product's time,
    through `dot` 1.04x at the same speed for one. Kernels whose parts make such products on the
    CPU threads (filter gradients of few channels, per-channel sums as products with ones) call this.
    """
    if out.ndim >= 2 and out.strides[-2] == out.itemsize != out.strides[-1]:
        return gemm(xp, b.swapaxes(-1, -2), a.swapaxes(-1, -2), out.swapaxes(-1, -2))
    if out.ndim == a.ndim == b.ndim == 3 and len(out) == len(a) == len(b) == 1:
        a, b, out = a[0], b[0], out[0]
    # dot takes only an out it would have made itself: C-contiguous, of the operands' dtype
    if a.ndim <= 2 and b.ndim <= 2 and out.flags.c_contiguous and out.dtype == a.dtype == b.dtype:
        return partial(xp.dot, a, b, out=out)
    return partial(xp.matmul, a, b, out=out)


@register("matmul")
def matmul(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """One BLAS call (per batch entry for rank >= 3); transposes are views, which BLAS reads as flags.

    A large rank-2 product is cut over the CPU threads (kernels/parallel.py), each part one
    single-threaded BLAS call, rather than left to BLAS's own busy-waiting threads (held at one,
    runtime/threads.py). The cut goes through the larger operand, so that each part packs
    only its own share of it: by rows of the result when a (m, k) is at least as large as
    b (k, n), else by columns (the MLP's 100x784 @ 784x512 forward: each part reads half of b).
    """
    (a, b), (y,) = ins, outs
    if attrs.get("transpose_a", False):
        a = a.swapaxes(-1, -2)
    if attrs.get("transpose_b", False):
        b = b.swapaxes(-1, -2)
    if y.ndim != 2 or a.shape[0] * a.shape[1] * b.shape[1] < _SPLIT_MACS:
        return partial(xp.matmul, a, b, out=y)
    by_rows = a.shape[0] >= b.shape[1]

    def part(span: range) -> tuple[list[Run], None]:
        block = slice(span.start, span.stop)
        if by_rows:
            return [gemm(xp, a[block], b, y[block])], None
        return [gemm(xp, a, b[:, block], y[:, block])], None

    return Split(xp, y.shape[0] if by_rows else y.shape[1], [], part)
