"""Name -> kernel factory, the table the executor looks every `buffer.kernel` up in.

A kernel is built once, when the executor binds buffers to arena views, and
run every step: `build(xp, attrs, ins, outs)` returns a zero-argument closure
that reads the current contents of `ins` and writes `outs` in place.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

Array = Any
"""A numpy or cupy ndarray (kernels see only the API both share)."""

Run = Callable[[], None]
KernelFactory = Callable[[ModuleType, Mapping[str, Any], Sequence[Array], Sequence[Array]], Run]

KERNELS: dict[str, KernelFactory] = {}
DataCheck = Callable[[np.dtype], bool]
"""Whether a kernel checks its data when its first output has this dtype."""
CHECKS_DATA: dict[str, DataCheck] = {}
"""Kernels that validate the values they index or divide with; the executor locates their DataErrors at the op,
and keeps the variables written before them so that a step they stop changes nothing."""


def lowest(dtype: Any) -> float:
    """The identity of max in `dtype`: -inf, or an integer type's minimum."""
    dt = np.dtype(dtype)
    return float("-inf") if dt.kind == "f" else int(np.iinfo(dt).min)


def highest(dtype: Any) -> float:
    """The identity of min in `dtype`: inf, or an integer type's maximum."""
    dt = np.dtype(dtype)
    return float("inf") if dt.kind == "f" else int(np.iinfo(dt).max)


class DataError(ValueError):
    """A kernel met values it cannot compute with (a label outside its classes); raised before any output is written."""


def check_indices(xp: ModuleType, values: Array, size: int, what: str, why: str) -> None:
    """A DataError naming the first of `values` outside [0, size) (`what`: "label", "index") and its position,
    row-major; `why` says what the range is. Kernels call it before they write anything."""
    if values.size and (int(values.min()) < 0 or int(values.max()) >= size):
        outside = xp.logical_or(xp.less(values, 0), xp.greater_equal(values, size))
        first, position = first_position(xp, outside)
        raise DataError(f"{what} {int(values.reshape(-1)[first])} at position [{position}] is outside [0, {size}) ({why})")


def first_position(xp: ModuleType, mask: Array) -> tuple[int, str]:
    """The row-major flat index of `mask`'s first true entry and its position "i, j, ..." for a DataError."""
    first = int(xp.argmax(mask.reshape(-1)))
    return first, ", ".join(str(int(i)) for i in np.unravel_index(first, mask.shape))


def register(*names: str, checks_data: bool | DataCheck = False) -> Callable[[KernelFactory], KernelFactory]:
    """Register a factory under one or more kernel names (a family shares one factory).

    `checks_data`: the kernel may raise DataError, which the executor reports at the op's location; a
    function of the first output's dtype where only some dtypes check (integer division, not float).
    """

    def add(factory: KernelFactory) -> KernelFactory:
        for name in names:
            if name in KERNELS:
                raise ValueError(f"kernel {name!r} is registered twice")
            KERNELS[name] = factory
            if checks_data:
                CHECKS_DATA[name] = checks_data if callable(checks_data) else _always
        return factory

    return add


def _always(dtype: np.dtype) -> bool:
    return True


def checks_data(name: str, dtype: np.dtype) -> bool:
    """Whether kernel `name` with a first output of `dtype` may raise DataError."""
    check = CHECKS_DATA.get(name)
    return check is not None and check(dtype)


def get_kernel(name: str) -> KernelFactory:
    """The factory for `name`; an unknown name raises LookupError with the closest known names."""
    factory = KERNELS.get(name)
    if factory is None:
        close = difflib.get_close_matches(name, KERNELS, n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise LookupError(f"unknown kernel {name!r}{hint} ({len(KERNELS)} kernels are registered)")
    return factory


def sequence(steps: Sequence[Run]) -> Run:
    """One run performing `steps` in order: kernels bind their views into partials at build time."""
    steps = tuple(steps)

    def run() -> None:
        for step in steps:
            step()

    return run
