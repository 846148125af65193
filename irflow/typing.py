"""Annotations of job functions, as OneFlow's `oneflow.typing` (imported as `tp`).

Parameters: `tp.Numpy.Placeholder(shape, dtype=flow.float)` takes one ndarray
of exactly that shape and dtype (OneFlow's static shape); `tp.ListNumpy.Placeholder`
a list with one array per device, and `tp.ListListNumpy.Placeholder` a list per
device of a tensor list (a list of arrays). On one device a list placeholder's
shape is a bound: axis 0 may hold fewer rows, a tensor list any number of
instances whose rows fit it together, and the job's outputs have the actual rows
(docs/dynamic.md; OneFlow lets every axis be smaller). On several devices in the
mirrored view each device passes one array of the placeholder's exact shape. A parameter may also
be a `Tuple[...]` of placeholders; it then receives a tuple of arrays.

Returns: `tp.Numpy` (an ndarray), `tp.ListNumpy` (a list with one ndarray per
device), `tp.ListListNumpy`, and `Tuple`, `List`, `Dict[str, ...]` of those;
`tp.Bundle[T]` accepts any nesting of T in lists, tuples and dicts; and
`tp.Callback[T]` makes the call asynchronous: `job(x)(handler)` calls
`handler(result)` later.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence

from irflow.errors import TraceError
from irflow.frontend import dtypes
from irflow.frontend.tracing import user_location

T = typing.TypeVar("T")


class PlaceholderDef:
    """A placeholder annotation: a class (so that `Tuple[...]` accepts it) with a shape and a dtype."""

    shape: tuple[int, ...] = ()
    dtype: dtypes.DType = dtypes.float32
    kind: str = "numpy"


def _placeholder(kind: str, label: str, shape: Sequence[int], dtype: object) -> type[PlaceholderDef]:
    """Checked where it is written: a bad shape or dtype is an error at the annotation, not at the first call."""
    sizes = dtypes.positive_sizes(shape)
    if sizes is None:
        raise TraceError(f"{label}: shape must be a tuple of positive ints, got {shape!r}", user_location())
    try:
        dtype = dtypes.as_dtype(dtype, f"{label} dtype")
    except TypeError as err:
        raise TraceError(str(err), user_location()) from None
    if math.prod(sizes) * dtype.np_dtype.itemsize >= 1 << 63:
        raise TraceError(f"{label}: shape {sizes} of {dtype.name} is larger than any memory", user_location())
    return type(label, (PlaceholderDef,), {"shape": sizes, "dtype": dtype, "kind": kind})


class Numpy:
    """One numpy.ndarray, in or out of a job function."""

    @staticmethod
    def Placeholder(shape: Sequence[int], dtype: object = dtypes.float32) -> type[PlaceholderDef]:  # noqa: N802
        return _placeholder("numpy", "Numpy.Placeholder", shape, dtype)


class ListNumpy:
    """A list with one numpy.ndarray per device."""

    @staticmethod
    def Placeholder(shape: Sequence[int], dtype: object = dtypes.float32) -> type[PlaceholderDef]:  # noqa: N802
        return _placeholder("list_numpy", "ListNumpy.Placeholder", shape, dtype)


class ListListNumpy:
    """A list per device of a list of numpy.ndarray (OneFlow's tensor lists; one array each on several devices)."""

    @staticmethod
    def Placeholder(shape: Sequence[int], dtype: object = dtypes.float32) -> type[PlaceholderDef]:  # noqa: N802
        return _placeholder("list_list_numpy", "ListListNumpy.Placeholder", shape, dtype)


class Callback(typing.Generic[T]):
    """`-> tp.Callback[T]`: the call returns at once; `job(x)(handler)` gets T later."""


class Bundle(typing.Generic[T]):
    """One or a collection of T: x, [x], (x,), {"key": x} and any nesting of them."""


LEAVES = {Numpy: "numpy", ListNumpy: "list_numpy", ListListNumpy: "list_list_numpy"}

__all__ = ["Numpy", "ListNumpy", "ListListNumpy", "Callback", "Bundle", "PlaceholderDef"]
