"""conv2d and its two gradients as im2col + one GEMM per group.

Columns are laid out (C*kh*kw, N*oh*ow): channel-major, the whole batch in
one row. Then the forward (W @ cols), the filter gradient (dy @ cols^T) and
the input gradient (W^T @ dy, scattered back tap by tap) are each a single
matmul over a stack of `groups` matrices, the shape BLAS runs fastest, and
the gather is one strided copy of a persistent zero-padded input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from .registry import Array, Run, register
from .shapes import expect_shape
from .window import Window, padded_source


class _Conv:
    """Shapes of one convolution: x (N, C, H, W) * w (F, C/groups, kh, kw) -> y (N, F, oh, ow)."""

    def __init__(self, attrs: Mapping[str, Any], x_shape: Sequence[int], w_shape: Sequence[int]):
        n, c, h, w = x_shape
        f, cg, kh, kw = w_shape
        g = int(attrs.get("groups", 1))
        if g < 1 or cg * g != c or f % g:
            raise ValueError(f"conv2d: input {tuple(x_shape)} and weight {tuple(w_shape)} do not fit {g} groups")
        self.window = Window.from_attrs(attrs, (kh, kw), (h, w))
        oh, ow = self.window.out_hw
        self.x_shape = (n, c, h, w)
        self.y_shape = (n, f, oh, ow)
        self.weights = (g, f // g, cg * kh * kw)  # grouped weight matrices
        self.columns = (g, cg * kh * kw, n * oh * ow)
        self.outputs = (g, f // g, n * oh * ow)

    def gather_columns(self, xp: ModuleType, x: Array) -> tuple[Array, Run]:
        """The (groups, C/groups*kh*kw, N*oh*ow) im2col buffer of `x`, and the step that refills it."""
        padded, refresh = padded_source(xp, x, self.window, 0)
        n, c = self.x_shape[:2]
        (kh, kw), (oh, ow) = self.window.kernel, self.window.out_hw
        (sh, sw), (dh, dw) = self.window.strides, self.window.dilations
        s_n, s_c, s_h, s_w = padded.strides
        taps = xp.lib.stride_tricks.as_strided(
            padded, (c, kh, kw, n, oh, ow), (s_c, s_h * dh, s_w * dw, s_n, s_h * sh, s_w * sw)
        )
        columns = xp.empty(taps.shape, x.dtype)

        def gather() -> None:
            refresh()
            xp.copyto(columns, taps)

        return columns.reshape(self.columns), gather

    def channel_major(self, xp: ModuleType, dy: Array) -> tuple[Array, Run]:
        """dy (N, F, oh, ow) as (groups, F/groups, N*oh*ow) matrices, and the step that copies it there."""
        n, f, oh, ow = self.y_shape
        buffer = xp.empty((f, n, oh, ow), dy.dtype)
        source = dy.transpose(1, 0, 2, 3)

        def gather() -> None:
            xp.copyto(buffer, source)

        return buffer.reshape(self.outputs), gather


@register("conv2d")
def conv2d(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x, w), (y,) = ins, outs
    conv = _Conv(attrs, x.shape, w.shape)
    expect_shape("conv2d", "output", y.shape, conv.y_shape)
    columns, gather = conv.gather_columns(xp, x)
    product = xp.empty(conv.outputs, y.dtype)
    n, f, oh, ow = conv.y_shape
    product_nchw = product.reshape(f, n, oh, ow).transpose(1, 0, 2, 3)

    def run() -> None:
        gather()
        xp.matmul(w.reshape(conv.weights), columns, out=product)
        xp.copyto(y, product_nchw)

    return run


@register("conv2d_grad_filter")
def conv2d_grad_filter(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dw = dy @ cols^T per group."""
    (dy, x), (dw,) = ins, outs
    conv = _Conv(attrs, x.shape, dw.shape)
    expect_shape("conv2d_grad_filter", "dy", dy.shape, conv.y_shape)
    columns, gather = conv.gather_columns(xp, x)
    dy_rows, gather_dy = conv.channel_major(xp, dy)
    grad = xp.empty(conv.weights, dw.dtype)
    columns_t = columns.swapaxes(1, 2)
    grad_view = grad.reshape(dw.shape)

    def run() -> None:
        gather()
        gather_dy()
        xp.matmul(dy_rows, columns_t, out=grad)
        xp.copyto(dw, grad_view)

    return run


@register("conv2d_grad_input")
def conv2d_grad_input(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """dcols = W^T @ dy per group, then col2im: each tap's slice is added back where it was read.

    The scatter accumulates in a channel-major (C, N, H+pads, W+pads) buffer, the
    layout dcols already has, so every add walks both operands in the same order.
    """
    (dy, w), (dx,) = ins, outs
    conv = _Conv(attrs, dx.shape, w.shape)
    expect_shape("conv2d_grad_input", "dy", dy.shape, conv.y_shape)
    dy_rows, gather_dy = conv.channel_major(xp, dy)
    dcols = xp.empty(conv.columns, dx.dtype)
    n, c = conv.x_shape[:2]
    window = conv.window
    (kh, kw), (oh, ow) = window.kernel, window.out_hw
    per_tap = dcols.reshape(c, kh, kw, n, oh, ow)
    sink = xp.empty((c, n, *window.padded_hw), dx.dtype)
    scatter = [(window.tap(sink, i, j), per_tap[:, i, j]) for i, j in window.taps()]
    landed = window.interior(sink).transpose(1, 0, 2, 3)

    def run() -> None:
        gather_dy()
        xp.matmul(w.reshape(conv.weights).swapaxes(1, 2), dy_rows, out=dcols)
        sink.fill(0)
        for target, part in scatter:
            xp.add(target, part, out=target)
        xp.copyto(dx, landed)

    return run
