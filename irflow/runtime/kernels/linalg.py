"""matmul: (..., m, k) x (..., k, n) with OneFlow's transpose_a / transpose_b flags, and a weight gradient's
matmul that the optimizer update reading it alone takes as its `epilogue` (fuse-elementwise)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from . import workspace
from .blas import accumulating_gemm
from .optimizer import momentum_update, sgd_update
from .parallel import Split
from .registry import Array, Run, register, sequence

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
    if "epilogue" in attrs:
        return _updating(xp, attrs, ins, outs)
    (a, b), (y,) = _operands(attrs, ins), outs
    if y.ndim != 2 or a.shape[0] * a.shape[1] * b.shape[1] < _SPLIT_MACS:
        return partial(xp.matmul, a, b, out=y)
    by_rows = a.shape[0] >= b.shape[1]

    def part(span: range) -> tuple[list[Run], None]:
        block = slice(span.start, span.stop)
        if by_rows:
            return [gemm(xp, a[block], b, y[block])], None
        return [gemm(xp, a, b[:, block], y[:, block])], None

    return Split(xp, y.shape[0] if by_rows else y.shape[1], [], part)


def _operands(attrs: Mapping[str, Any], ins: Sequence[Array]) -> tuple[Array, Array]:
    """a and b as multiplied: the transposes are views."""
    a, b = ins[:2]
    if attrs.get("transpose_a", False):
        a = a.swapaxes(-1, -2)
    if attrs.get("transpose_b", False):
        b = b.swapaxes(-1, -2)
    return a, b


# The optimizer updates a matmul applies to its product, which is their gradient, and each one's own kernel.
UPDATES = {"sgd_update": sgd_update, "momentum_update": momentum_update}


def _updating(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """ins (a, b, w[, m], lr), outs the update's (w[, m]): the update `epilogue` with gradient a @ b.

    Where numpy's BLAS takes a GEMM that adds into its output (kernels/blas.py), the product goes
    straight into what the update accumulates: m = -lr a @ b + beta m (then m -= lr weight_decay w
    and w += m) for momentum, w = -lr a @ b + (1 - lr weight_decay) w for SGD, one GEMM and no
    gradient array. The MLP's 512x784 weight, 1 thread: 1.47 -> 1.23 ms for its gradient and
    update (docs/kernels.md). Elsewhere (a GPU, another BLAS, or a w that overlaps a or b) the
    product lands in an array of its own and the update's kernel runs on it, as unfused.
    """
    update = str(attrs["epilogue"])
    if update not in UPDATES:
        raise ValueError(f"matmul: unknown epilogue {update!r}; an update epilogue is one of {sorted(UPDATES)}")
    a, b = _operands(attrs, ins)
    w, *state, lr = ins[2:]
    shape = (*a.shape[:-1], b.shape[-1])
    if tuple(shape) != tuple(w.shape) or len(state) != (update == "momentum_update"):
        raise ValueError(
            f"matmul: epilogue {update!r} takes (a, b, w{', m' if update == 'momentum_update' else ''}, lr) with a @ b "
            f"of w's shape; given {len(ins)} inputs, a @ b {tuple(shape)}, w {tuple(w.shape)}"
        )
    params = {k: attrs[k] for k in ("beta", "weight_decay") if k in attrs}
    accumulated = outs[-1]  # m (w for SGD): the GEMM adds into it
    # Split by rows, every part's GEMM reads all of b while the parts write their rows of w: w must lie apart.
    if accumulating_gemm(xp, a, b, accumulated) is None or any(np.may_share_memory(outs[0], x) for x in (a, b)):
        product = workspace.scratch(xp, shape, w.dtype)
        return sequence([matmul(xp, {}, [a, b], [product]), UPDATES[update](xp, params, [w, product, *state, lr], outs)])
    weight_decay = float(params.get("weight_decay", 0.0))
    beta = float(params["beta"]) if state else None
    coefficients = [0.0, 0.0]  # alpha and beta of this step's GEMM, from lr

    def read_rate() -> None:
        rate = float(lr)
        coefficients[:] = -rate, (1.0 - rate * weight_decay if beta is None else beta)

    prologue: list[Run] = [read_rate]
    held = (state or [w])[0]
    if not _same(held, accumulated):
        prologue.append(partial(xp.copyto, accumulated, held))
    decay = scratch = None
    if weight_decay and state:  # momentum's term in w: lr x weight_decay, times w into scratch
        decay, scratch = workspace.scratch(xp, (), w.dtype), workspace.scratch(xp, w.shape, w.dtype)
        prologue.append(partial(xp.multiply, lr, weight_decay, out=decay))

    def part(span: range) -> tuple[list[Run], None]:
        rows = slice(span.start, span.stop)
        gemm = accumulating_gemm(xp, a[rows], b, accumulated[rows])
        assert gemm is not None  # rows of what BLAS took whole
        steps: list[Run] = [lambda: gemm(*coefficients)]
        if state:
            m = accumulated[rows]
            if scratch is not None:
                t = scratch[rows]
                steps += [partial(xp.multiply, w[rows], decay, out=t), partial(xp.subtract, m, t, out=m)]
            steps.append(partial(xp.add, w[rows], m, out=outs[0][rows]))
        return steps, None

    if shape[0] * a.shape[1] * shape[1] < _SPLIT_MACS:
        return sequence([*prologue, *part(range(shape[0]))[0]])
    return Split(xp, shape[0], prologue, part)


def _same(x: Array, y: Array) -> bool:
    """Whether two numpy arrays are views of the same elements in the same layout."""
    return x.ctypes.data == y.ctypes.data and x.shape == y.shape and x.strides == y.strides
