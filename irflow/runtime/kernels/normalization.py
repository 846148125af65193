"""Batch normalization in training, fused (the fuse-batch-norm pass makes these from the traced composite).

    batch_norm_stats (x) -> (mean, variance) {axis}
    batch_norm (x, mean, variance, gamma, beta) -> y {axis, epsilon, relu}
    batch_norm_grad (dy, x, mean, variance, gamma[, y]) -> (dx, dgamma, dbeta) {axis, epsilon, relu}

Statistics are over every axis but `axis`; the variance is the biased one
(the unbiased one for the moving average is the IR's business). Traced as
ordinary ops, batch normalization is about eight passes over the tensor
forward and fourteen backward; here it is two reading passes for the
statistics, one for y = x * s + t (s = gamma / sqrt(variance + epsilon),
t = beta - mean * s, then the relu when fused), and backward one reading pass
for the two sums and one for

    dx = s * g + k_x * (x - mean) + k_0,  k_x = -s * sum(g * (x - mean)) / (M * (variance + epsilon)),
                                          k_0 = -s * sum(g) / M

with g = dy (masked by y > 0 when the relu is fused) and M the elements per
channel. Without the relu the first pass leaves x - mean in dx for the second
(four passes there instead of five). Writing k_x * (x - mean) + k_0 as
k_x * x + (k_0 - k_x * mean) would save that pass with the relu too, but in
float32 the two terms cancel: tests/test_resnet_parity.py's block2_a beta
ended 1.2e-3 from the float64 truth, against PyTorch float32's 2.0e-4. Per-channel sums are BLAS matrix-vector products with a vector of
ones (several times faster than numpy's strided reductions); the elementwise
steps run on chunks of about `CHUNK_BYTES` so that their scratch stays in cache.
Statistics and vectors of C elements are computed in the data's dtype.

With more than one CPU thread the threads take the chunks of each pass of
batch_norm and batch_norm_grad one at a time (kernels/parallel.py), each with
scratch of its own; every chunk's sums go to a slot of their own, added in
chunk order, and BLAS runs on one thread (as throughout a step). batch_norm_stats stays on one thread
(its docstring says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .activation import relu_into
from .linalg import gemm
from .parallel import Pulled, chunk_sum, even_chunks
from .registry import Array, Run, register, sequence
from .workspace import scratch as transient

CHUNK_BYTES = 1 << 19


class _Layout:
    """An (A, C, B) view of arrays normalized over axes A and B per channel C, walked in chunks of whole A rows."""

    def __init__(self, xp: ModuleType, like: Array, axis: int, kernel: str):
        shape, dtype = like.shape, like.dtype
        if not 0 <= axis < len(shape):
            raise ValueError(f"{kernel}: axis {axis} is out of range for shape {tuple(shape)}")
        self.xp, self.dtype = xp, dtype
        self.a, self.c, self.b = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
        self.count = self.a * self.b
        row = self.c * self.b * like.itemsize
        self.chunks = [slice(r.start, r.stop) for r in even_chunks(self.a, CHUNK_BYTES // max(row, 1))]
        self.rows = max((c.stop - c.start for c in self.chunks), default=1)  # the scratch's

    def view(self, array: Array, name: str, kernel: str) -> Array:
        """`array` as (A, C, B), checked to hold the data's shape."""
        if array.size != self.a * self.c * self.b:
            raise ValueError(f"{kernel}: {name} has shape {array.shape}, expected {self.a * self.c * self.b} elements")
        return array.reshape(self.a, self.c, self.b)

    def vector(self, array: Array, name: str, kernel: str) -> Array:
        """A per-channel array (C,) or (1, C, 1, ...) as (C,)."""
        if array.size != self.c:
            raise ValueError(f"{kernel}: {name} has shape {array.shape}, expected {self.c} elements (one per channel)")
        return array.reshape(self.c)

    def plane(self) -> Array:
        """A (C, B) array for a per-channel vector spread along B (see `spread`) in every run before it is read."""
        return transient(self.xp, (self.c, self.b), self.dtype)

    def spread(self, vector: Array, plane: Array) -> Run:
        """plane[c, :] = vector[c]: numpy broadcasts a (C, B) operand over (rows, C, B) 2-3x faster than a (C, 1) one."""
        return partial(self.xp.copyto, plane, vector.reshape(self.c, 1))

    def split(
        self,
        prologue: Sequence[Run],
        chunk_steps: Callable[[slice, _Lane, Array], list[Run]],
        sums: int = 0,
        finish: Callable[[Array], list[Run]] = lambda totals: [],
        scratch: bool = True,
    ) -> Pulled:
        """One pass over the chunks, taken by the threads: `chunk_steps(rows, lane, slot)` for each chunk, with
        `sums` per-channel sums into the chunk's own (sums, C) slot, added in chunk order and handed to `finish`;
        `scratch`: whether the steps use the lane's chunk-sized buffers."""
        xp = self.xp
        slots = transient(xp, (len(self.chunks), sums, self.c), self.dtype)
        totals = transient(xp, (sums, self.c), self.dtype)

        def lane() -> Callable[[int], list[Run]]:
            own = _Lane(self, scratch)
            return lambda index: chunk_steps(self.chunks[index], own, slots[index])

        added = [chunk_sum(xp, slots, totals)] if sums else []
        return Pulled(xp, len(self.chunks), prologue, lane, [*added, *finish(totals)])


class _Lane:
    """One thread's scratch for a pass: a chunk-sized buffer (none without `scratch`), and what its sums need."""

    def __init__(self, layout: _Layout, scratch: bool = True):
        xp, dtype, rows = layout.xp, layout.dtype, layout.rows if scratch else 0
        self.layout = layout
        self.scratch = transient(xp, (rows, layout.c, layout.b), dtype)
        self.row_sums = transient(xp, (rows, layout.c), dtype)
        self.ones_b, self.ones_a = xp.ones(layout.b, dtype), xp.ones(rows, dtype)  # kept: filled once
        self.flags: Array | None = None

    def mask(self, rows: int) -> Array:
        """A boolean chunk of `rows` rows, the lane's own (made on first use)."""
        if self.flags is None:
            self.flags = transient(self.layout.xp, self.scratch.shape, bool)
        return self.flags[:rows]

    def sums(self, chunk: Array, into: Array) -> list[Run]:
        """Steps for into (C,) = the per-channel sums of a (rows, C, B) chunk: two matrix-vector products."""
        xp, (rows, c, b) = self.layout.xp, chunk.shape
        sums = self.row_sums[:rows]
        return [gemm(xp, chunk.reshape(rows * c, b), self.ones_b, sums.reshape(rows * c)), gemm(xp, self.ones_a[:rows], sums, into)]


def _scale(xp: ModuleType, variance: Array, gamma: Array, epsilon: float, rstd: Array, scale: Array) -> list[Run]:
    """Steps for rstd = 1 / sqrt(variance + epsilon); scale = gamma * rstd."""
    return [
        partial(xp.add, variance, epsilon, out=rstd),
        partial(xp.sqrt, rstd, out=rstd),
        partial(xp.divide, 1.0, rstd, out=rstd),
        partial(xp.multiply, gamma, rstd, out=scale),
    ]


@register("batch_norm_stats")
def batch_norm_stats(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """The per-channel mean and biased variance, the variance as the mean of (x - mean)**2 (no cancellation).

    One thread at any thread count, BLAS on one too: split over two threads (each part its own mean and
    squared distances, the parts combined as Chan et al. combine partial variances) it was slower with a
    core free, 0.44-0.53 -> 0.52-0.80 ms and 0.23-0.31 -> 0.25-0.43 ms (docs/kernels.md). With the sums
    through `gemm`, which lets the other thread run, two split passes (a mean, then squared distances) gave
    0.41 -> 0.35-0.39 ms (16x28x28) and 0.22-0.27 -> 0.22-0.25 ms (32x14x14): not worth a second pass's handoff
    (nor on a Zen 3 machine, where the pass takes about 1 ms: docs/kernels.md).
    """
    kernel = "batch_norm_stats"
    (x,), (mean_out, var_out) = ins, outs
    layout = _Layout(xp, x, int(attrs["axis"]), kernel)
    x3 = layout.view(x, "x", kernel)
    mean, var = layout.vector(mean_out, "mean", kernel), layout.vector(var_out, "variance", kernel)
    own, centre = _Lane(layout), layout.plane()
    slots = transient(xp, (2, len(layout.chunks), layout.c), x.dtype)  # per pass, a chunk's sums, added in chunk order
    steps: list[Run] = []
    for index, rows in enumerate(layout.chunks):
        steps += own.sums(x3[rows], slots[0, index])
    steps += [chunk_sum(xp, slots[0], mean), partial(xp.divide, mean, layout.count, out=mean), layout.spread(mean, centre)]
    for index, rows in enumerate(layout.chunks):
        t = own.scratch[: rows.stop - rows.start]
        steps += [partial(xp.subtract, x3[rows], centre, out=t), partial(xp.multiply, t, t, out=t), *own.sums(t, slots[1, index])]
    steps += [chunk_sum(xp, slots[1], var), partial(xp.divide, var, layout.count, out=var)]
    return sequence(steps)


@register("batch_norm")
def batch_norm(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = (x - mean) / sqrt(variance + epsilon) * gamma + beta, as x * s + t per channel; relu'd with `relu`."""
    kernel = "batch_norm"
    (x, mean_in, var_in, gamma_in, beta_in), (y_out,) = ins, outs
    epsilon, relu = float(attrs["epsilon"]), bool(attrs.get("relu", False))
    layout = _Layout(xp, y_out, int(attrs["axis"]), kernel)
    x3, y3 = layout.view(x, "x", kernel), layout.view(y_out, "y", kernel)
    mean, var = layout.vector(mean_in, "mean", kernel), layout.vector(var_in, "variance", kernel)
    gamma, beta = layout.vector(gamma_in, "gamma", kernel), layout.vector(beta_in, "beta", kernel)
    rstd, scale, shift = (transient(xp, layout.c, y_out.dtype) for _ in range(3))
    s, t = layout.plane(), layout.plane()
    prologue = [
        *_scale(xp, var, gamma, epsilon, rstd, scale),
        partial(xp.multiply, mean, scale, out=shift),
        partial(xp.subtract, beta, shift, out=shift),
        layout.spread(scale, s),
        layout.spread(shift, t),
    ]

    def normalize(rows: slice, lane: _Lane, slot: Array) -> list[Run]:
        y = y3[rows]
        steps = [partial(xp.multiply, x3[rows], s, out=y), partial(xp.add, y, t, out=y)]
        return steps + [relu_into(xp, y, y)] if relu else steps

    return layout.split(prologue, normalize, scratch=False)


@register("batch_norm_grad")
def batch_norm_grad(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dx, dgamma = sum(g * xhat), dbeta = sum(g) of batch_norm in training (batch statistics), g = dy or,
    with `relu`, dy where the forward's output y > 0 (y is then the sixth input)."""
    kernel = "batch_norm_grad"
    relu = bool(attrs.get("relu", False))
    if len(ins) != (6 if relu else 5):
        raise ValueError(f"{kernel}: takes {6 if relu else 5} inputs with relu={relu}, given {len(ins)}")
    dy, x, mean_in, var_in, gamma_in = ins[:5]
    dx_out, dgamma_out, dbeta_out = outs
    epsilon = float(attrs["epsilon"])
    layout = _Layout(xp, dx_out, int(attrs["axis"]), kernel)
    dy3, x3, dx3 = (layout.view(a, n, kernel) for a, n in ((dy, "dy"), (x, "x"), (dx_out, "dx")))
    y3 = layout.view(ins[5], "y", kernel) if relu else None
    mean, var = layout.vector(mean_in, "mean", kernel), layout.vector(var_in, "variance", kernel)
    gamma = layout.vector(gamma_in, "gamma", kernel)
    dgamma, dbeta = layout.vector(dgamma_out, "dgamma", kernel), layout.vector(dbeta_out, "dbeta", kernel)
    rstd, scale, k_x, k_0 = (transient(xp, layout.c, dx_out.dtype) for _ in range(4))
    centre, s, kx, k0 = (layout.plane() for _ in range(4))

    def sums(rows: slice, lane: _Lane, slot: Array) -> list[Run]:
        """sum(g) and sum(g * (x - mean)). With the relu, g = dy masked goes into dx; without it, x - mean does."""
        n = rows.stop - rows.start
        t = lane.scratch[:n]
        if y3 is None:
            g, centred = dy3[rows], dx3[rows]
            masking = []
        else:
            g, centred, mask = dx3[rows], t, lane.mask(n)
            masking = [partial(xp.greater, y3[rows], 0, out=mask), partial(xp.multiply, dy3[rows], mask, out=g)]
        return [
            *masking,
            *lane.sums(g, slot[0]),
            partial(xp.subtract, x3[rows], centre, out=centred),
            partial(xp.multiply, centred, g, out=t),
            *lane.sums(t, slot[1]),
        ]

    def coefficients(totals: Array) -> list[Run]:
        """dbeta, dgamma, and the planes of s, k_x and k_0 (k_x = -s rstd**2 sum_gx / M, k_0 = -s dbeta / M)."""
        sum_g, sum_gx = totals
        return [
            partial(xp.copyto, dbeta, sum_g),
            *_scale(xp, var, gamma, epsilon, rstd, scale),
            partial(xp.multiply, sum_gx, rstd, out=dgamma),
            partial(xp.multiply, rstd, rstd, out=k_x),
            partial(xp.multiply, k_x, sum_gx, out=k_x),
            partial(xp.multiply, k_x, scale, out=k_x),
            partial(xp.divide, k_x, -layout.count, out=k_x),
            partial(xp.multiply, scale, sum_g, out=k_0),
            partial(xp.divide, k_0, -layout.count, out=k_0),
            *(layout.spread(vector, plane) for vector, plane in ((scale, s), (k_x, kx), (k_0, k0))),
        ]

    def gradient(rows: slice, lane: _Lane, slot: Array) -> list[Run]:
        """dx = s g + k_x (x - mean) + k_0, with x - mean in dx already when g is dy."""
        n = rows.stop - rows.start
        dx, t = dx3[rows], lane.scratch[:n]
        if y3 is None:
            return [
                partial(xp.multiply, dx, kx, out=dx),
                partial(xp.multiply, dy3[rows], s, out=t),
                partial(xp.add, dx, t, out=dx),
                partial(xp.add, dx, k0, out=dx),
            ]
        return [
            partial(xp.subtract, x3[rows], centre, out=t),
            partial(xp.multiply, t, kx, out=t),
            partial(xp.multiply, dx, s, out=dx),
            partial(xp.add, dx, t, out=dx),
            partial(xp.add, dx, k0, out=dx),
        ]

    first = layout.split([layout.spread(mean, centre)], sums, 2, coefficients)
    return sequence([first, layout.split([], gradient)])
