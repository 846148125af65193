"""Build-time shape arithmetic shared by the kernels (plain Python; never runs per step)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import DTypeLike


def normalize_axes(axes: int | Iterable[int], ndim: int) -> tuple[int, ...]:
    """Axes as sorted non-negative ints; negative axes count from the end, as in numpy."""
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    norm = sorted({a + ndim if a < 0 else a for a in axes})
    if any(not 0 <= a < ndim for a in norm):
        raise ValueError(f"axes {axes} out of range for rank {ndim}")
    return tuple(norm)


def kept_shape(shape: Sequence[int], axes: Iterable[int]) -> tuple[int, ...]:
    """`shape` with the reduced axes kept as size 1 (numpy's keepdims=True)."""
    reduced = set(axes)
    return tuple(1 if i in reduced else d for i, d in enumerate(shape))


def expect_shape(kernel: str, what: str, actual: Sequence[int], expected: Sequence[int]) -> None:
    """Fail at build time, not mid-step, when the compiler bound a buffer of the wrong shape."""
    if tuple(actual) != tuple(expected):
        raise ValueError(f"{kernel}: {what} has shape {tuple(actual)}, expected {tuple(expected)}")


def compute_dtype(dtype: DTypeLike) -> np.dtype:
    """Scratch dtype for multi-step float math: float16 intermediates overflow, so widen them."""
    return np.dtype(np.float32) if np.dtype(dtype).itemsize < 4 else np.dtype(dtype)
