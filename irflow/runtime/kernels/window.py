"""Sliding-window geometry shared by conv2d and the pools (NCHW, ONNX-style explicit pads).

A window op is a loop over kernel taps (i, j): tap (i, j) reads the padded
input at rows i*dh + sh*oh and columns j*dw + sw*ow, one strided view per tap.
Padding lives in a persistent buffer whose border is written once, at build.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, Run
from .workspace import scratch


def _pair(values: Sequence[int], what: str) -> tuple[int, int]:
    a, b = (int(v) for v in values)
    if a < 1 or b < 1:
        raise ValueError(f"{what} must be positive, got {tuple(values)}")
    return a, b


@dataclass(frozen=True)
class Window:
    """Where each output of a 2-D window op reads: kernel size, strides, pads, dilations, input size."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, bottom, left, right
    dilations: tuple[int, int]
    in_hw: tuple[int, int]

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], kernel: Sequence[int], in_hw: Sequence[int]) -> Window:
        pads = tuple(int(p) for p in attrs.get("pads", (0, 0, 0, 0)))
        if len(pads) != 4 or min(pads) < 0:
            raise ValueError(f"pads must be four non-negative ints (top, bottom, left, right), got {pads}")
        return cls(
            _pair(kernel, "kernel"),
            _pair(attrs.get("strides", (1, 1)), "strides"),
            (pads[0], pads[1], pads[2], pads[3]),
            _pair(attrs.get("dilations", (1, 1)), "dilations"),
            (int(in_hw[0]), int(in_hw[1])),
        )

    @property
    def stride_one_undilated(self) -> bool:
        """Stride 1 and undilated: every tap reads neighbouring pixels, which the GEMM-per-tap,
        transform and Winograd convolutions need."""
        return self.strides == self.dilations == (1, 1)

    @property
    def padded_hw(self) -> tuple[int, int]:
        (h, w), (top, bottom, left, right) = self.in_hw, self.pads
        return h + top + bottom, w + left + right

    @property
    def out_hw(self) -> tuple[int, int]:
        (hp, wp), (kh, kw), (sh, sw), (dh, dw) = self.padded_hw, self.kernel, self.strides, self.dilations
        return (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1

    def taps(self) -> Iterator[tuple[int, int]]:
        """Kernel offsets in row-major order (the order in which ties resolve)."""
        return itertools.product(range(self.kernel[0]), range(self.kernel[1]))

    def tap(self, padded: Array, i: int, j: int) -> Array:
        """The (..., oh, ow) view of `padded` that kernel tap (i, j) reads."""
        return self.column_tap(self.row_tap(padded, i), j)

    def row_tap(self, padded: Array, i: int) -> Array:
        """The (..., oh, padded width) view of `padded`: the rows that kernel row i reads."""
        oh, sh, dh = self.out_hw[0], self.strides[0], self.dilations[0]
        return padded[..., i * dh : i * dh + sh * (oh - 1) + 1 : sh, :]

    def column_tap(self, rows: Array, j: int) -> Array:
        """The (..., ow) view of `rows` (anything of the padded width) that kernel column j reads."""
        ow, sw, dw = self.out_hw[1], self.strides[1], self.dilations[1]
        return rows[..., j * dw : j * dw + sw * (ow - 1) + 1 : sw]

    def interior(self, padded: Array) -> Array:
        """The unpadded (..., h, w) part of a padded buffer."""
        (h, w), (top, _, left, _) = self.in_hw, self.pads
        return padded[..., top : top + h, left : left + w]


def padded_source(xp: ModuleType, x: Array, window: Window, fill: float) -> tuple[Array, Callable[[slice], list[Run]]]:
    """`x` padded with `fill` in a persistent buffer, and for a slice of the images the steps that refresh it from `x`.

    Without padding this is `x` itself, with no steps at all.
    """
    if not any(window.pads):
        return x, _no_steps
    padded = xp.full((*x.shape[:-2], *window.padded_hw), fill, dtype=x.dtype)
    interior = window.interior(padded)
    return padded, lambda images: [partial(xp.copyto, interior[images], x[images])]


def padded_sink(xp: ModuleType, dx: Array, window: Window) -> tuple[Array, Callable[[slice], list[Run]]]:
    """A buffer of the padded shape to scatter a gradient into, and for a slice of the images the steps that land it in `dx`.

    Without padding this is `dx` itself, with no steps. The buffer is scratch (`workspace.scratch`): a user zeroes
    each chunk of it, or writes all of it, in every run.
    """
    if not any(window.pads):
        return dx, _no_steps
    padded = scratch(xp, (*dx.shape[:-2], *window.padded_hw), dx.dtype)
    interior = window.interior(padded)
    return padded, lambda images: [partial(xp.copyto, dx[images], interior[images])]


def _no_steps(images: slice) -> list[Run]:
    return []
