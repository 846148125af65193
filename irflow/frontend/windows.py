"""Windows of convolutions and pools: OneFlow's `padding`, strides and sizes as per-axis pads and pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from irflow.frontend.locations import fail


def pair(value: int | Sequence[int], what: str, arg: str) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return (value[0], value[-1])
    fail(f"{what}: {arg} must be an int or a list of two ints, got {value!r}")


def window_pads(
    padding: str | Sequence[Any],
    size: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    channels_last: bool,
    what: str,
) -> list[int]:
    """Per spatial axis its (before, after) pads, flattened ([top, bottom, left, right] in 2-D), for OneFlow's
    `padding` argument: a string, one pad per spatial axis, or one per axis of the data format.

    SAME is OneFlow's SAME_LOWER: an odd total pad puts its larger half at the start (TensorFlow's
    SAME, SAME_UPPER, at the end). Stride 2 over an even size is such a case, as in every
    downsampling 3x3 convolution and pool of a ResNet.
    """
    n = len(size)
    for arg, values in (("strides", strides), ("dilations", dilations)):
        if any(v < 1 for v in values):  # before SAME divides by them
            fail(f"{what}: {arg} must be positive, got {list(values)}")
    if isinstance(padding, str):
        mode = "SAME_LOWER" if padding.upper() == "SAME" else padding.upper()
        if mode == "VALID":
            return [0] * (2 * n)
        if mode not in ("SAME_UPPER", "SAME_LOWER"):
            fail(f"{what}: padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', 'VALID' or explicit pads, got {padding!r}")
        pads = []
        for m, k, s, d in zip(size, kernel, strides, dilations):
            out = -(-m // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - m, 0)
            small = total // 2
            pads += [small, total - small] if mode != "SAME_LOWER" else [total - small, small]
        return pads
    if isinstance(padding, (list, tuple)) and len(padding) == n:
        per_axis = list(padding)
    elif isinstance(padding, (list, tuple)) and len(padding) == n + 2:
        spatial_axes = range(1, n + 1) if channels_last else range(2, n + 2)
        for i, p in enumerate(padding):
            if i not in spatial_axes and p not in (0, (0, 0), [0, 0]):
                fail(f"{what}: explicit padding {list(padding)} may only pad the {_COUNTS[n]} spatial axes")
        per_axis = [padding[i] for i in spatial_axes]
    else:
        fail(f"{what}: padding must be a string or one pad per axis ({n + 2} entries), got {padding!r}")
    pads = []
    for p in per_axis:
        lo, hi = pair(p, what, "each pad")
        if lo < 0 or hi < 0:
            fail(f"{what}: pads must be non-negative, got {padding!r}")
        pads += [lo, hi]
    return pads


_COUNTS = {1: "one", 2: "two", 3: "three"}
