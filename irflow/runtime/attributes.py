"""IR attributes as the plain Python values kernels and initializers take."""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
)
from xdsl.ir import Attribute


def python_value(attr: Attribute | Any) -> Any:
    """IR attribute -> plain value (ints, floats, bools, strings, tuples, dicts); anything else as is."""
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if isinstance(attr.type, IntegerType) and attr.type.width.data == 1 else int(value)
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        return tuple(attr.get_values())
    if isinstance(attr, DictionaryAttr):
        return {k: python_value(v) for k, v in attr.data.items()}
    if isinstance(attr, ArrayAttr):
        return tuple(python_value(a) for a in attr.data)
    return attr
