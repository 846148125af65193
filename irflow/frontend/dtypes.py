"""OneFlow's data types (`flow.float`, `flow.int32`, ...) as xDSL element types and numpy dtypes."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Attribute

from irflow.dialects.job import f16, f32, f64, i8, i32, i64, ui8


@dataclass(frozen=True, eq=False)
class DType:
    """One element type: its OneFlow name, its IR element type and its numpy dtype."""

    name: str
    element_type: Attribute
    np_dtype: np.dtype

    @property
    def is_floating_point(self) -> bool:
        return self.np_dtype.kind == "f"

    def __repr__(self) -> str:
        return f"oneflow.{self.name}"


float16 = DType("float16", f16, np.dtype(np.float16))
float32 = DType("float32", f32, np.dtype(np.float32))
float64 = DType("float64", f64, np.dtype(np.float64))
int8 = DType("int8", i8, np.dtype(np.int8))
int32 = DType("int32", i32, np.dtype(np.int32))
int64 = DType("int64", i64, np.dtype(np.int64))
uint8 = DType("uint8", ui8, np.dtype(np.uint8))

# OneFlow's aliases: flow.float is float32, flow.double float64, flow.char int8.
float = float32  # noqa: A001
double = float64
char = int8

ALL = (float16, float32, float64, int8, int32, int64, uint8)
_BY_ELEMENT = {d.element_type: d for d in ALL}
_BY_NUMPY = {d.np_dtype: d for d in ALL}


def from_element_type(element_type: Attribute) -> DType:
    return _BY_ELEMENT[element_type]


def from_numpy(dtype: object) -> DType | None:
    """The irflow dtype of a numpy dtype, or None when irflow has no such type (bool, complex, ...)."""
    return _BY_NUMPY.get(np.dtype(dtype))


def as_dtype(value: object, what: str = "dtype") -> DType:
    """Accept flow.float32, a numpy dtype or a numpy scalar type; TypeError for anything else."""
    if isinstance(value, DType):
        return value
    try:
        found = None if value is None else from_numpy(value)  # np.dtype(None) would be float64
    except TypeError:
        found = None
    if found is None:
        names = ", ".join(f"flow.{d.name}" for d in ALL)
        raise TypeError(f"{what} must be one of {names}, got {value!r}")
    return found


def is_int(value: object) -> bool:
    """An int or a numpy integer (a size computed with np.prod is an np.int64), but not a bool (True is 1)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """A real number, numpy's included, but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive_sizes(shape: object) -> tuple[int, ...] | None:
    """`shape` as a tuple of Python ints if it is a list or tuple of positive integers (`is_int`), else None."""
    if not isinstance(shape, (list, tuple)):
        return None
    if not all(is_int(d) and d > 0 for d in shape):
        return None
    return tuple(int(d) for d in shape)
