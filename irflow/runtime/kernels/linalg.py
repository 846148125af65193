"""matmul: (..., m, k) x (..., k, n) with OneFlow's transpose_a / transpose_b flags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from .registry import Array, Run, register


@register("matmul")
def matmul(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """One BLAS call (per batch entry for rank >= 3); transposes are views, which BLAS reads as flags."""
    (a, b), (y,) = ins, outs
    if attrs.get("transpose_a", False):
        a = a.swapaxes(-1, -2)
    if attrs.get("transpose_b", False):
        b = b.swapaxes(-1, -2)
    return partial(xp.matmul, a, b, out=y)
