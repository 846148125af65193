"""Blob: a value of a job function while it is being defined (OneFlow's BlobDef).

A Blob has no data, only a shape and a dtype. Python's operators on Blobs
append job ops; the modules that define those ops install them (`flow.math`
the arithmetic and comparisons, `ops` indexing and `@`), so this module
imports no op module. Python numbers mix in as rank-0 constants of the Blob's
dtype, as OneFlow's scalar ops do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

from xdsl.ir import SSAValue

from irflow.dialects.job import dtype_of, shape_of
from irflow.frontend import dtypes
from irflow.frontend.locations import fail

if TYPE_CHECKING:
    from irflow.frontend.tracing import Trace


class Blob:
    def __init__(self, value: SSAValue, trace: Trace, name: str):
        self.value = value
        self.trace = trace
        self.name = name

    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value.type)

    @property
    def dtype(self) -> dtypes.DType:
        return dtypes.from_element_type(dtype_of(self.value.type))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Blob(name={self.name!r}, shape={self.shape}, dtype={self.dtype!r})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a rank-0 Blob")
        return self.shape[0]

    def __iter__(self) -> Iterator[Blob]:
        """`a, b = blob` and `for row in blob`: a slice per index of axis 0, as numpy iterates.

        Without it Python iterates through `__getitem__` until an IndexError, and
        the index past the end is a TraceError instead, so every loop failed at its end.
        """
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        fail(f"the truth value of Blob '{self.name}' is unknown while a job is defined; use flow.math ops instead")

    def numpy(self) -> NoReturn:
        """OneFlow's eager mode reads a blob's value inside the job function; a traced job has none yet."""
        fail(f"Blob '{self.name}' has no value while a job is defined (irflow compiles job functions, as OneFlow's "
             "lazy mode); return it from the job, or pass it to flow.watch(blob, handler)")

    __hash__ = object.__hash__  # Blobs compare elementwise (flow.math installs ==), yet stay usable as dict keys
    __array_ufunc__ = None  # `np.float32(2) * blob` defers to Blob.__rmul__ instead of making an object array


def expect_blobs(what: str, **arguments: object) -> None:
    """Fail at the user's line, naming the first of `arguments` (name=value, in order) that is not a Blob."""
    for label, value in arguments.items():
        if not isinstance(value, Blob):
            fail(f"{what}: {label} must be a Blob, got {type(value).__name__} {value!r}")
