"""3-D convolution and pooling (OneFlow's flow.nn.conv3d, max_pool3d, avg_pool3d) over NCDHW or NDHWC volumes.

Each is composed of the 2-D job op over the volume's depth slices, so autodiff, SBP and the kernels are
the 2-D ones'. A convolution takes, for each output depth, the input slices under the filters' depth taps as
extra input channels: one conv2d over N x depth images, whose GEMM runs over the depth taps, the channels
and the 2-D window at once. A pool takes the max (or the mean over the taps in bounds) along depth first,
then pools each slice in 2-D; both steps exclude the padding, as OneFlow's pools do.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from irflow.dialects import job
from irflow.frontend import dtypes, math
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.ops import constant, pad, reshape, stack, transpose
from irflow.frontend.tracing import build, published
from irflow.frontend.windows import window_pads

_TO_FIRST, _TO_LAST = (0, 4, 1, 2, 3), (0, 2, 3, 4, 1)


def conv3d(
    input: Blob,  # noqa: A002
    filters: Blob,
    strides: int | Sequence[int],
    padding: str | Sequence[Any],
    data_format: str = "NCDHW",
    dilations: int | Sequence[int] | None = None,
    groups: int = 1,
    name: str | None = None,
) -> Blob:
    """3-D convolution with weight `filters` (out, in/groups, kd, kh, kw), or (out, kd, kh, kw, in/groups) for NDHWC.

    `padding` as conv2d's: a string (SAME is SAME_LOWER), one pad per spatial axis or one per axis of
    the data format. irflow also takes groups > 1 with NDHWC (OneFlow refuses them).
    """
    what = "flow.nn.conv3d"
    last = _channels_last(data_format, what)
    if not isinstance(input, Blob) or not isinstance(filters, Blob) or input.ndim != 5 or filters.ndim != 5:
        fail(f"{what}: input and filters must be rank-5 Blobs, got {input!r} and {filters!r}")
    if last:
        input, filters = transpose(input, _TO_FIRST), transpose(filters, _TO_FIRST)
    (n, c, *size), (f, per_group, *kernel) = input.shape, filters.shape
    if not dtypes.is_int(groups) or groups < 1 or c % groups or f % groups or per_group * groups != c:
        fail(f"{what}: {c} input channels, filters {filters.shape} and groups {groups!r} do not match: the filters "
             f"take in/groups channels and their count divides by groups")  # fmt: skip
    s, d = triple(strides, what, "strides"), triple(dilations if dilations is not None else 1, what, "dilations")
    pads = window_pads(padding, tuple(size), tuple(kernel), s, d, last, what)
    taps = _depth_taps(input, kernel[0], s[0], d[0], pads[:2], 0.0, what)
    depth = taps[0].shape[2]
    # (n, kd, groups, c/groups, depth, h, w) -> images (n depth, groups kd c/groups, h, w): each group's
    # channels stay together, the depth taps inside it, as the weight below orders its inputs.
    grouped = reshape(stack(taps, axis=1), (n, kernel[0], groups, per_group, depth, *size[1:]))
    images = reshape(transpose(grouped, (0, 4, 2, 1, 3, 5, 6)), (n * depth, groups * kernel[0] * per_group, *size[1:]))
    weight = reshape(transpose(filters, (0, 2, 1, 3, 4)), (f, kernel[0] * per_group, *kernel[1:]))
    out = build(job.Conv2DOp, [images, weight], None, None, what, strides=s[1:], pads=pads[2:], dilations=d[1:],
                groups=int(groups))  # fmt: skip
    return _volume(out, n, depth, last, name)


def _pool(largest: bool, what: str, doc: str) -> Any:
    def pool(
        input: Blob,  # noqa: A002
        ksize: int | Sequence[int],
        strides: int | Sequence[int],
        padding: str | Sequence[Any],
        data_format: str = "NCDHW",
        name: str | None = None,
    ) -> Blob:
        return _pool3d(input, ksize, strides, padding, data_format, name, largest, what)

    return published(pool, what, f"{what}(input, ksize, strides, padding, data_format='NCDHW'): {doc}")


max_pool3d = _pool(True, "flow.nn.max_pool3d",
                   "the max over each (kd, kh, kw) window: along depth first (its padding -inf), then max_pool2d per "
                   "slice.")  # fmt: skip
avg_pool3d = _pool(False, "flow.nn.avg_pool3d",
                   "the mean over each (kd, kh, kw) window's elements in bounds (padding excluded, as OneFlow's): "
                   "along depth over the taps in bounds, then avg_pool2d per slice, which excludes its own.")  # fmt: skip


def _pool3d(
    input: Blob,  # noqa: A002
    ksize: int | Sequence[int],
    strides: int | Sequence[int],
    padding: str | Sequence[Any],
    data_format: str,
    name: str | None,
    largest: bool,
    what: str,
) -> Blob:
    last = _channels_last(data_format, what)
    if not isinstance(input, Blob) or input.ndim != 5:
        fail(f"{what}: input must be a rank-5 Blob ({data_format}), got {input!r}")
    if last:
        input = transpose(input, _TO_FIRST)
    (n, c, *size) = input.shape
    k, s = triple(ksize, what, "ksize"), triple(strides, what, "strides")
    pads = window_pads(padding, tuple(size), k, s, (1, 1, 1), last, what)
    taps = _depth_taps(input, k[0], s[0], 1, pads[:2], -np.inf if largest else 0.0, what)
    depth = taps[0].shape[2]
    if largest:
        along = functools.reduce(math.maximum, taps)
    else:
        # the taps of each output depth that fall inside the volume, not in its padding
        first = np.arange(depth) * s[0] - pads[0]
        inside = np.clip(first + k[0], 0, size[0]) - np.clip(first, 0, size[0])
        scale = constant((1.0 / inside).reshape(1, 1, depth, 1, 1).astype(input.dtype.np_dtype), input.dtype)
        along = math.multiply(math.add_n(taps) if len(taps) > 1 else taps[0], scale)
    slices = reshape(transpose(along, (0, 2, 1, 3, 4)), (n * depth, c, *size[1:]))
    out = build(job.MaxPool2DOp if largest else job.AvgPool2DOp, [slices], None, None, what, kernel=k[1:], strides=s[1:],
                pads=pads[2:])  # fmt: skip
    return _volume(out, n, depth, last, name)


def _volume(slices: Blob, n: int, depth: int, last: bool, name: str | None) -> Blob:
    """The 2-D op's output over (n depth) slices back as a volume, NCDHW, or NDHWC where the input was."""
    out = transpose(reshape(slices, (n, depth, *slices.shape[1:])), (0, 2, 1, 3, 4), name=None if last else name)
    return transpose(out, _TO_LAST, name=name) if last else out


def _depth_taps(x: Blob, kd: int, sd: int, dd: int, pads: Sequence[int], value: float, what: str) -> list[Blob]:
    """For each depth tap of the window, the (n, c, out depth, h, w) slices of x (padded along depth with
    `value`) that it reads for every output depth."""
    if any(pads):
        x = pad(x, [(0, 0), (0, 0), tuple(pads), (0, 0), (0, 0)], value)
    reach = (kd - 1) * dd + 1
    if x.shape[2] < reach:
        fail(f"{what}: the window reaches {reach} along depth, more than the padded depth {x.shape[2]}")
    depth = (x.shape[2] - reach) // sd + 1
    return [x[:, :, t * dd : t * dd + (depth - 1) * sd + 1 : sd] for t in range(kd)]


def _channels_last(data_format: object, what: str) -> bool:
    if not isinstance(data_format, str) or data_format.upper() not in ("NCDHW", "NDHWC"):
        fail(f"{what}: data_format must be 'NCDHW' or 'NDHWC', got {data_format!r}")
    return data_format.upper() == "NDHWC"


def triple(value: int | Sequence[int], what: str, arg: str) -> tuple[int, int, int]:
    """A 3-D window's size, stride or dilation: an int, or a list of three."""
    values = [value] * 3 if dtypes.is_int(value) else value
    if isinstance(values, (list, tuple)) and len(values) == 3 and all(dtypes.is_int(v) and v > 0 for v in values):
        return tuple(int(v) for v in values)  # type: ignore[return-value]
    fail(f"{what}: {arg} must be an int or a list of three positive ints, got {value!r}")
