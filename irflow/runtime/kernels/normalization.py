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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from .activation import relu_into
from .registry import Array, Run, register

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
        step = max(1, min(self.a, CHUNK_BYTES // max(row, 1)))
        self.chunks = [slice(i, min(i + step, self.a)) for i in range(0, self.a, step)]
        self.scratch = xp.empty((step, self.c, self.b), dtype)
        self.row_sums = xp.empty((step, self.c), dtype)
        self.part = xp.empty(self.c, dtype)
        self.ones_b = xp.ones(self.b, dtype)
        self.ones_a = xp.ones(step, dtype)

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
        """A (C, B) array for a per-channel vector spread along B (see `spread`)."""
        return self.xp.empty((self.c, self.b), self.dtype)

    def spread(self, vector: Array, plane: Array) -> None:
        """plane[c, :] = vector[c]: numpy broadcasts a (C, B) operand over (rows, C, B) 2-3x faster than a (C, 1) one."""
        self.xp.copyto(plane, vector.reshape(self.c, 1))

    def add_sums(self, chunk: Array, into: Array) -> None:
        """into += the per-channel sums of a (rows, C, B) chunk, through two matrix-vector products."""
        rows = chunk.shape[0]
        sums = self.row_sums[:rows]
        self.xp.matmul(chunk.reshape(rows * self.c, self.b), self.ones_b, out=sums.reshape(rows * self.c))
        self.xp.matmul(self.ones_a[:rows], sums, out=self.part)
        self.xp.add(into, self.part, out=into)


def _scale(xp: ModuleType, variance: Array, gamma: Array, epsilon: float, rstd: Array, scale: Array) -> None:
    """rstd = 1 / sqrt(variance + epsilon); scale = gamma * rstd."""
    xp.add(variance, epsilon, out=rstd)
    xp.sqrt(rstd, out=rstd)
    xp.divide(1.0, rstd, out=rstd)
    xp.multiply(gamma, rstd, out=scale)


@register("batch_norm_stats")
def batch_norm_stats(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """The per-channel mean and biased variance, the variance as the mean of (x - mean)**2 (no cancellation)."""
    kernel = "batch_norm_stats"
    (x,), (mean_out, var_out) = ins, outs
    layout = _Layout(xp, x, int(attrs["axis"]), kernel)
    x3 = layout.view(x, "x", kernel)
    mean, var = layout.vector(mean_out, "mean", kernel), layout.vector(var_out, "variance", kernel)
    centre = layout.plane()

    def run() -> None:
        mean.fill(0)
        for rows in layout.chunks:
            layout.add_sums(x3[rows], mean)
        xp.divide(mean, layout.count, out=mean)
        layout.spread(mean, centre)
        var.fill(0)
        for rows in layout.chunks:
            t = layout.scratch[: rows.stop - rows.start]
            xp.subtract(x3[rows], centre, out=t)
            xp.multiply(t, t, out=t)
            layout.add_sums(t, var)
        xp.divide(var, layout.count, out=var)

    return run


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
    rstd, scale, shift = (xp.empty(layout.c, y_out.dtype) for _ in range(3))
    s, t = layout.plane(), layout.plane()
    relu_y = relu_into(xp, y3, y3)

    def run() -> None:
        _scale(xp, var, gamma, epsilon, rstd, scale)
        xp.multiply(mean, scale, out=shift)
        xp.subtract(beta, shift, out=shift)
        layout.spread(scale, s)
        layout.spread(shift, t)
        xp.multiply(x3, s, out=y3)
        xp.add(y3, t, out=y3)
        if relu:
            relu_y()

    return run


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
    rstd, scale, sum_gx, k_x, k_0 = (xp.empty(layout.c, dx_out.dtype) for _ in range(5))
    mask = xp.empty(layout.scratch.shape, bool) if relu else None
    centre, s, kx, k0 = (layout.plane() for _ in range(4))

    def run() -> None:
        layout.spread(mean, centre)
        dbeta.fill(0)
        sum_gx.fill(0)
        for rows in layout.chunks:  # g into dx, and the sums of g and g * (x - mean)
            n = rows.stop - rows.start
            g, t = dx3[rows], layout.scratch[:n]
            if y3 is not None:
                xp.greater(y3[rows], 0, out=mask[:n])
                xp.multiply(dy3[rows], mask[:n], out=g)
            else:
                xp.copyto(g, dy3[rows])
            layout.add_sums(g, dbeta)
            xp.subtract(x3[rows], centre, out=t)
            xp.multiply(t, g, out=t)
            layout.add_sums(t, sum_gx)
        _scale(xp, var, gamma, epsilon, rstd, scale)
        xp.multiply(sum_gx, rstd, out=dgamma)
        # dx = s g + k_x (x - mean) + k_0 with k_x = -s rstd**2 sum_gx / M, k_0 = -s sum(g) / M
        xp.multiply(rstd, rstd, out=k_x)
        xp.multiply(k_x, sum_gx, out=k_x)
        xp.multiply(k_x, scale, out=k_x)
        xp.divide(k_x, -layout.count, out=k_x)
        xp.multiply(scale, dbeta, out=k_0)
        xp.divide(k_0, -layout.count, out=k_0)
        for vector, plane in ((scale, s), (k_x, kx), (k_0, k0)):
            layout.spread(vector, plane)
        for rows in layout.chunks:
            n = rows.stop - rows.start
            g, t = dx3[rows], layout.scratch[:n]
            xp.subtract(x3[rows], centre, out=t)
            xp.multiply(t, kx, out=t)
            xp.multiply(g, s, out=g)
            xp.add(g, t, out=g)
            xp.add(g, k0, out=g)

    return run
