"""Blob: a value of a job function while it is being defined (OneFlow's BlobDef).

A Blob has no data, only a shape and a dtype; Python's operators on Blobs
append job ops, and Python numbers mix in as rank-0 constants of the Blob's
dtype, as OneFlow's scalar ops do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xdsl.ir import SSAValue

from irflow.dialects.job import dtype_of, shape_of
from irflow.frontend import dtypes

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

    def __bool__(self) -> bool:
        from irflow.frontend.tracing import fail

        fail(f"the truth value of Blob '{self.name}' is unknown while a job is defined; use flow.math ops instead")

    def __getitem__(self, index: Any) -> Blob:
        """Basic indexing with ints and slices of positive step (`x[:, 1:3]`, `x[0]`), as a static slice."""
        from irflow.frontend.ops import reshape, static_slice

        return static_slice(self, index, reshape)

    def with_distribute(self, distribute: Any) -> Blob:
        """This Blob, its SBP fixed to `distribute` (flow.distribute.split(0), ...): a hint sbp-infer keeps."""
        from irflow.frontend.distribute import hint

        hint(self, distribute, "Blob.with_distribute")
        return self

    def with_split_distribute(self, axis: int) -> Blob:
        from irflow.frontend.distribute import split

        return self.with_distribute(split(axis))

    def with_broadcast_distribute(self) -> Blob:
        from irflow.frontend.distribute import broadcast

        return self.with_distribute(broadcast())

    __hash__ = object.__hash__  # Blobs compare elementwise, yet stay usable as dict keys by identity
    __array_ufunc__ = None  # `np.float32(2) * blob` defers to Blob.__rmul__ instead of making an object array

    # -- arithmetic: each operator is the flow.math function of the same name
    def __add__(self, other: Any) -> Blob:
        return _math().add(self, other)

    def __radd__(self, other: Any) -> Blob:
        return _math().add(other, self)

    def __sub__(self, other: Any) -> Blob:
        return _math().subtract(self, other)

    def __rsub__(self, other: Any) -> Blob:
        return _math().subtract(other, self)

    def __mul__(self, other: Any) -> Blob:
        return _math().multiply(self, other)

    def __rmul__(self, other: Any) -> Blob:
        return _math().multiply(other, self)

    def __truediv__(self, other: Any) -> Blob:
        return _math().divide(self, other)

    def __rtruediv__(self, other: Any) -> Blob:
        return _math().divide(other, self)

    def __pow__(self, other: Any) -> Blob:
        return _math().pow(self, other)

    def __rpow__(self, other: Any) -> Blob:
        return _math().pow(other, self)

    def __matmul__(self, other: Any) -> Blob:
        from irflow.frontend.ops import matmul

        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Blob:
        from irflow.frontend.ops import matmul

        return matmul(other, self)

    def __neg__(self) -> Blob:
        return _math().negative(self)

    def __pos__(self) -> Blob:
        return self

    def __abs__(self) -> Blob:
        return _math().abs(self)

    # -- comparisons give int8 Blobs of 0/1, as OneFlow's
    def __eq__(self, other: Any) -> Blob:  # type: ignore[override]
        return _math().equal(self, other)

    def __ne__(self, other: Any) -> Blob:  # type: ignore[override]
        return _math().not_equal(self, other)

    def __lt__(self, other: Any) -> Blob:
        return _math().less(self, other)

    def __le__(self, other: Any) -> Blob:
        return _math().less_equal(self, other)

    def __gt__(self, other: Any) -> Blob:
        return _math().greater(self, other)

    def __ge__(self, other: Any) -> Blob:
        return _math().greater_equal(self, other)


def _math() -> Any:
    from irflow.frontend import math

    return math
