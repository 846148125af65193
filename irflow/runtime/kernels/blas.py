"""c = alpha a @ b + beta c in one BLAS call, from the BLAS numpy itself loaded: numpy's matmul has no beta.

A GEMM that adds into its output lets an optimizer update take a weight gradient as it is made
(`matmul` with an update `epilogue`, kernels/linalg.py): the product goes into the momentum, or
into the weight for SGD, with no gradient array written and read back.

The routine is CBLAS's ?gemm in the library threadpoolctl finds numpy's BLAS in, reached through
ctypes, which releases the GIL for the call. Only the 64-bit-integer interfaces are used, named
with a `64_` suffix (`scipy_cblas_sgemm64_` in numpy's own wheels, `cblas_sgemm64_` in OpenBLAS
builds with that suffix), since their integer width is known from the name. Where none is found
(numpy on Accelerate or MKL, or a GPU array) `accumulating_gemm` says so and the caller keeps
numpy's matmul and a separate pass.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from types import ModuleType

import numpy as np

from irflow.runtime import threads

from .registry import Array

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_PREFIXES = {np.dtype(np.float32): ("s", ctypes.c_float), np.dtype(np.float64): ("d", ctypes.c_double)}

Gemm = Callable[[float, float], None]


@functools.cache
def _routine(dtype: np.dtype) -> Callable[..., None] | None:
    """CBLAS ?gemm with 64-bit integers for `dtype` from numpy's BLAS, or None."""
    letter, scalar = _PREFIXES[dtype]
    for info in threads.blas_info():
        try:
            library = ctypes.CDLL(info["filepath"])
        except OSError:
            continue
        for name in (f"scipy_cblas_{letter}gemm64_", f"cblas_{letter}gemm64_"):
            routine = getattr(library, name, None)
            if routine is not None:
                size, pointer, flag = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
                routine.argtypes = [flag, flag, flag, size, size, size, scalar, pointer, size, pointer, size, scalar, pointer, size]
                routine.restype = None
                return routine
    return None


def _operand(x: np.ndarray) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) for reading a 2-D array as it lies, in row-major terms; None if BLAS cannot."""
    rows, cols = x.shape
    step = x.itemsize
    if any(s % step or s < 0 for s in x.strides):
        return None
    s0, s1 = x.strides[0] // step, x.strides[1] // step
    if (cols == 1 or s1 == 1) and (rows == 1 or s0 >= cols):
        return _NO_TRANS, s0 if rows > 1 else cols
    if (rows == 1 or s0 == 1) and (cols == 1 or s1 >= rows):
        return _TRANS, s1 if cols > 1 else rows
    return None


class _Gemm:
    """One GEMM call's arguments; it holds the arrays, since BLAS gets only their addresses."""

    def __init__(self, routine: Callable[..., None], head: tuple[int, ...], operands: list[tuple[np.ndarray, int]]):
        self.routine, self.head = routine, head
        self.arrays = [x for x, _ in operands]
        self.addresses = [(x.ctypes.data, ld) for x, ld in operands]

    def __call__(self, alpha: float, beta: float) -> None:
        (a, lda), (b, ldb), (c, ldc) = self.addresses
        self.routine(*self.head, alpha, a, lda, b, ldb, beta, c, ldc)


def accumulating_gemm(xp: ModuleType, a: Array, b: Array, c: Array) -> Gemm | None:
    """`gemm(alpha, beta)`: c = alpha a @ b + beta c for 2-D numpy arrays of one float dtype, c stored by rows
    apart from a and b; None where BLAS cannot take them as they lie or numpy's BLAS has no such routine."""
    if xp.__name__ != "numpy" or not (a.ndim == b.ndim == c.ndim == 2) or 0 in (*a.shape, b.shape[1]):
        return None
    dtype = np.dtype(c.dtype)
    if dtype not in _PREFIXES or a.dtype != dtype or b.dtype != dtype:
        return None
    if np.may_share_memory(c, a) or np.may_share_memory(c, b):  # BLAS reads a and b while it writes c
        return None
    layout_c, layout_a, layout_b = _operand(c), _operand(a), _operand(b)
    if layout_c is None or layout_c[0] != _NO_TRANS or layout_a is None or layout_b is None:
        return None
    routine = _routine(dtype)
    if routine is None:
        return None
    (m, k), n = a.shape, b.shape[1]
    (trans_a, lda), (trans_b, ldb), (_, ldc) = layout_a, layout_b, layout_c
    return _Gemm(routine, (_ROW_MAJOR, trans_a, trans_b, m, n, k), [(a, lda), (b, ldb), (c, ldc)])
