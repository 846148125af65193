"""OneFlow's checkpoint layout: one directory per variable holding `out` and `meta`.

`out` is the value's raw bytes, little-endian, C order; `meta` is a text proto
giving its shape and data type:

    shape {
      dim: 4
      dim: 3
    }
    data_type: kFloat

This module only translates between that layout and numpy; checkpoint_store
adds irflow's index, checksums and atomic replacement on top.
"""

from __future__ import annotations

import re

import numpy as np

OUT = "out"
META = "meta"
SNAPSHOT_DONE = "snapshot_done"

# OneFlow's data_type.proto names; kChar is OneFlow's char, read as int8.
DATA_TYPES: dict[str, np.dtype] = {
    "kFloat": np.dtype("<f4"),
    "kDouble": np.dtype("<f8"),
    "kFloat16": np.dtype("<f2"),
    "kInt8": np.dtype("i1"),
    "kInt32": np.dtype("<i4"),
    "kInt64": np.dtype("<i8"),
    "kUInt8": np.dtype("u1"),
    "kBool": np.dtype("?"),
    "kChar": np.dtype("i1"),
}
_NAMES = {dtype: name for name, dtype in reversed(DATA_TYPES.items())}  # int8 -> kInt8, not kChar

_DIM = re.compile(r"\s*dim\s*:\s*(\d+)\s*")
_SHAPE = re.compile(r"\s*shape\s*\{((?:\s*dim\s*:\s*\d+)*)\s*\}\s*")
_DATA_TYPE = re.compile(r"\s*data_type\s*:\s*(k\w+)\s*")


def data_type_name(dtype: np.dtype) -> str | None:
    """OneFlow's name for `dtype`, or None when OneFlow has no such type."""
    return _NAMES.get(np.dtype(dtype).newbyteorder("<"))


def format_meta(shape: tuple[int, ...], dtype: np.dtype) -> str:
    name = data_type_name(dtype)
    assert name is not None, f"{dtype} has no OneFlow data type"
    dims = "".join(f"  dim: {d}\n" for d in shape)
    return f"shape {{\n{dims}}}\ndata_type: {name}\n"


def parse_meta(text: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from a `meta` file; ValueError saying what is wrong otherwise."""
    rest, shape, dtype = text, None, None
    while rest.strip():
        if (m := _SHAPE.match(rest)) and shape is None:
            shape = tuple(int(d) for d in _DIM.findall(m.group(1)))
        elif (m := _DATA_TYPE.match(rest)) and dtype is None:
            if m.group(1) not in DATA_TYPES:
                raise ValueError(f"unsupported data_type {m.group(1)} (irflow reads {', '.join(DATA_TYPES)})")
            dtype = DATA_TYPES[m.group(1)]
        else:
            raise ValueError(f"unexpected text {rest.strip()[:40]!r}")
        rest = rest[m.end() :]
    if shape is None or dtype is None:
        raise ValueError("lacks a shape or a data_type")
    return shape, dtype


def from_bytes(data: bytes, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The array held by `out`, in native byte order; ValueError if the size disagrees."""
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"holds {len(data)} bytes, {dtype.name} {list(shape)} needs {expected}")
    return np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def to_bytes(array: np.ndarray) -> bytes:
    """What `out` holds: little-endian, C order, whatever the array's own layout."""
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
