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

    dx = s * (g - sum(g) / M - (x - mean) * sum(g * (x - mean)) / (M * (variance + epsilon)))

with g = dy (masked by y > 0 when the relu is fused) and M the elements per
channel. Per-channel sums are BLAS matrix-vector products with a vector of
ones (several times faster than numpy's strided reductions); the elementwise
steps run on chunks of about `CHUNK_BYTES` so that their scratch stays in cache.
Statistics and vectors of C elements are computed in the data's dtype.

With `flow.config.cpu_thread_num` > 1 each pass gives every thread a part of
the chunks (kernels/parallel.py); the sums' parts are added in part order, so
a result does not depend on scheduling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .activation import relu_into
from .parallel import Split
from .registry import Array, Run, register, sequence

CHUNK_BYTES = 1 << 19


class _Layout:
    """An (A, C, B) view of arrays normalized over axes A and B per channel C, walked in chunks of whole A rows."""

    def __init__(self, xp: ModuleType, like: Array, axis: int, kernel: str):
        shape, dtype = like.shape, like.dtype
        if not 0 <= axis < len(shape):
            raise ValueError(f"{kernel}: axis {axis} is out of range for shape {tuple(shape)}")
        self.xp, self.dtype, self.kernel = xp, dtype, kernel
        self.a, self.c, self.b = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
        self.count = self.a * self.b
        self.step = max(1, min(self.a, CHUNK_BYTES // max(self.c * self.b * like.itemsize, 1)))
        self.chunks = [slice(i, min(i + self.step, self.a)) for i in range(0, self.a, self.step)]
        self.ones_b = xp.ones(self.b, dtype)
        self.ones_a = xp.ones(self.step, dtype)

    def view(self, array: Array, name: str) -> Array:
        """`array` as (A, C, B), checked to hold the data's shape."""
        if array.size != self.a * self.c * self.b:
            expected = self.a * self.c * self.b
            raise ValueError(f"{self.kernel}: {name} has shape {array.shape}, expected {expected} elements")
        return array.reshape(self.a, self.c, self.b)

    def vector(self, array: Array, name: str) -> Array:
        """A per-channel array (C,) or (1, C, 1, ...) as (C,)."""
        if array.size != self.c:
            raise ValueError(f"{self.kernel}: {name} has shape {array.shape}, expected {self.c} (one per channel)")
        return array.reshape(self.c)

    def plane(self) -> Array:
        """A (C, B) array for a per-channel vector spread along B (see `spread`)."""
        return self.xp.empty((self.c, self.b), self.dtype)

    def spread(self, vector: Array, plane: Array) -> Run:
        """plane[c, :] = vector[c]: numpy broadcasts a (C, B) operand over (rows, C, B) 2-3x faster than (C, 1)."""
        return partial(self.xp.copyto, plane, vector.reshape(self.c, 1))

    def span(self, chunks: range) -> slice:
        """The rows of A that chunks `chunks` cover."""
        return slice(self.chunks[chunks.start].start, self.chunks[chunks.stop - 1].stop)

    def walk(
        self, chunk_steps: Callable[[slice, _Part], list[Run]], into: Sequence[Array] = (), mask: bool = False
    ) -> Split:
        """A pass over the chunks, one part per thread, then `into[i]` = per-channel sum i over all chunks.

        `chunk_steps(rows, part)` are the steps for the chunk `rows` of A, with the part's scratch (and a
        bool `mask` chunk if asked); they add their sums to `part.totals[i]` with `part.add_sums`.
        """
        xp = self.xp

        def part(chunks: range) -> tuple[list[Run], list[Array]]:
            scratch = _Part(self, len(into), mask)
            steps: list[Run] = [partial(total.fill, 0) for total in scratch.totals]
            for i in chunks:
                steps += chunk_steps(self.chunks[i], scratch)
            return steps, scratch.totals

        def combine(parts: list[list[Array]]) -> list[Run]:
            steps: list[Run] = []
            for i, out in enumerate(into):
                steps.append(partial(xp.copyto, out, parts[0][i]))
                steps += [partial(xp.add, out, totals[i], out=out) for totals in parts[1:]]
            return steps

        return Split(xp, len(self.chunks), [], part, combine)


class _Part:
    """One thread's scratch for a pass over its chunks: a chunk of data, a mask, row sums and per-channel totals."""

    def __init__(self, layout: _Layout, totals: int, mask: bool):
        xp, dtype = layout.xp, layout.dtype
        self.layout = layout
        self.chunk = xp.empty((layout.step, layout.c, layout.b), dtype)
        self.mask = xp.empty((layout.step, layout.c, layout.b), bool) if mask else None
        self.row_sums = xp.empty((layout.step, layout.c), dtype)
        self.sum = xp.empty(layout.c, dtype)
        self.totals = [xp.empty(layout.c, dtype) for _ in range(totals)]

    def add_sums(self, chunk: Array, total: int) -> list[Run]:
        """totals[total] += the per-channel sums of a (rows, C, B) chunk, through two matrix-vector products."""
        xp, layout, rows = self.layout.xp, self.layout, chunk.shape[0]
        sums, into = self.row_sums[:rows], self.totals[total]
        flat = rows * layout.c
        return [
            partial(xp.matmul, chunk.reshape(flat, layout.b), layout.ones_b, out=sums.reshape(flat)),
            partial(xp.matmul, layout.ones_a[:rows], sums, out=self.sum),
            partial(xp.add, into, self.sum, out=into),
        ]


def _scale(xp: ModuleType, variance: Array, gamma: Array, epsilon: float, rstd: Array, scale: Array) -> list[Run]:
    """rstd = 1 / sqrt(variance + epsilon); scale = gamma * rstd."""
    return [
        partial(xp.add, variance, epsilon, out=rstd),
        partial(xp.sqrt, rstd, out=rstd),
        partial(xp.divide, 1.0, rstd, out=rstd),
        partial(xp.multiply, gamma, rstd, out=scale),
    ]


@register("batch_norm_stats")
def batch_norm_stats(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """The per-channel mean and biased variance, the variance as the mean of (x - mean)**2 (no cancellation)."""
    (x,), (mean_out, var_out) = ins, outs
    layout = _Layout(xp, x, int(attrs["axis"]), "batch_norm_stats")
    x3 = layout.view(x, "x")
    mean, var = layout.vector(mean_out, "mean"), layout.vector(var_out, "variance")
    centre = layout.plane()

    def squares(rows: slice, part: _Part) -> list[Run]:
        t = part.chunk[: rows.stop - rows.start]
        return [partial(xp.subtract, x3[rows], centre, out=t), partial(xp.multiply, t, t, out=t), *part.add_sums(t, 0)]

    return sequence(
        [
            layout.walk(lambda rows, part: part.add_sums(x3[rows], 0), [mean]),
            partial(xp.divide, mean, layout.count, out=mean),
            layout.spread(mean, centre),
            layout.walk(squares, [var]),
            partial(xp.divide, var, layout.count, out=var),
        ]
    )


@register("batch_norm")
def batch_norm(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = (x - mean) / sqrt(variance + epsilon) * gamma + beta, as x * s + t per channel; relu'd with `relu`."""
    (x, mean_in, var_in, gamma_in, beta_in), (y_out,) = ins, outs
    epsilon, relu = float(attrs["epsilon"]), bool(attrs.get("relu", False))
    layout = _Layout(xp, y_out, int(attrs["axis"]), "batch_norm")
    x3, y3 = layout.view(x, "x"), layout.view(y_out, "y")
    mean, var = layout.vector(mean_in, "mean"), layout.vector(var_in, "variance")
    gamma, beta = layout.vector(gamma_in, "gamma"), layout.vector(beta_in, "beta")
    rstd, scale, shift = (xp.empty(layout.c, y_out.dtype) for _ in range(3))
    s, t = layout.plane(), layout.plane()
    prologue = [
        *_scale(xp, var, gamma, epsilon, rstd, scale),
        partial(xp.multiply, mean, scale, out=shift),
        partial(xp.subtract, beta, shift, out=shift),
        layout.spread(scale, s),
        layout.spread(shift, t),
    ]

    def part(chunks: range) -> tuple[list[Run], None]:
        rows = layout.span(chunks)
        y = y3[rows]
        steps = [partial(xp.multiply, x3[rows], s, out=y), partial(xp.add, y, t, out=y)]
        return steps + ([relu_into(xp, y, y)] if relu else []), None

    return Split(xp, len(layout.chunks), prologue, part)


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
    dy3, x3, dx3 = layout.view(dy, "dy"), layout.view(x, "x"), layout.view(dx_out, "dx")
    y3 = layout.view(ins[5], "y") if relu else None
    mean, var = layout.vector(mean_in, "mean"), layout.vector(var_in, "variance")
    gamma = layout.vector(gamma_in, "gamma")
    dgamma, dbeta = layout.vector(dgamma_out, "dgamma"), layout.vector(dbeta_out, "dbeta")
    rstd, scale, sum_gx, k_x, k_0 = (xp.empty(layout.c, dx_out.dtype) for _ in range(5))
    centre, s, kx, k0 = (layout.plane() for _ in range(4))

    def sums(rows: slice, part: _Part) -> list[Run]:
        """g into dx, and the sums of g and g * (x - mean)."""
        n = rows.stop - rows.start
        g, t = dx3[rows], part.chunk[:n]
        if y3 is None or part.mask is None:
            steps: list[Run] = [partial(xp.copyto, g, dy3[rows])]
        else:
            mask = part.mask[:n]
            steps = [partial(xp.greater, y3[rows], 0, out=mask), partial(xp.multiply, dy3[rows], mask, out=g)]
        steps += part.add_sums(g, 0)
        steps += [partial(xp.subtract, x3[rows], centre, out=t), partial(xp.multiply, t, g, out=t)]
        return steps + part.add_sums(t, 1)

    def gradient(rows: slice, part: _Part) -> list[Run]:
        """dx = s g + k_x (x - mean) + k_0."""
        g, t = dx3[rows], part.chunk[: rows.stop - rows.start]
        steps = [partial(xp.subtract, x3[rows], centre, out=t), partial(xp.multiply, t, kx, out=t)]
        return steps + [partial(xp.multiply, g, s, out=g), partial(xp.add, g, t, out=g), partial(xp.add, g, k0, out=g)]

    # k_x = -s rstd**2 sum_gx / M, k_0 = -s sum(g) / M
    coefficients = [
        *_scale(xp, var, gamma, epsilon, rstd, scale),
        partial(xp.multiply, sum_gx, rstd, out=dgamma),
        partial(xp.multiply, rstd, rstd, out=k_x),
        partial(xp.multiply, k_x, sum_gx, out=k_x),
        partial(xp.multiply, k_x, scale, out=k_x),
        partial(xp.divide, k_x, -layout.count, out=k_x),
        partial(xp.multiply, scale, dbeta, out=k_0),
        partial(xp.divide, k_0, -layout.count, out=k_0),
        *(layout.spread(v, plane) for v, plane in ((scale, s), (k_x, kx), (k_0, k0))),
    ]
    first = layout.walk(sums, [dbeta, sum_gx], mask=relu)
    return sequence([layout.spread(mean, centre), first, *coefficients, layout.walk(gradient)])
