"""accumulating_gemm: c = alpha a @ b + beta c through numpy's BLAS, on every layout it accepts, against float64 numpy."""

import numpy as np
import pytest

from irflow.runtime.kernels import blas

from .conftest import XP

pytestmark = pytest.mark.skipif(
    blas._routine(np.dtype(np.float32)) is None, reason="numpy's BLAS has no 64-bit CBLAS gemm here"
)


def stored(x: np.ndarray, layout: str) -> np.ndarray:
    """`x`'s values as a view BLAS reads: rows, columns (a transposed array), or rows of a wider one."""
    if layout == "rows":
        return x.copy()
    if layout == "columns":
        return np.ascontiguousarray(x.T).T
    wide = np.full((x.shape[0], x.shape[1] + 3), np.nan, x.dtype)
    wide[:, 1 : 1 + x.shape[1]] = x
    return wide[:, 1 : 1 + x.shape[1]]


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("layout_a", ["rows", "columns", "padded"])
@pytest.mark.parametrize("layout_b", ["rows", "columns", "padded"])
@pytest.mark.parametrize("layout_c", ["rows", "padded"])
@pytest.mark.parametrize("m, k, n", [(5, 7, 3), (1, 4, 6), (6, 4, 1), (3, 1, 2)])
def test_adds_the_scaled_product_into_c(rng, dtype, tol, layout_a, layout_b, layout_c, m, k, n) -> None:
    a, b, c = (rng.standard_normal(shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))
    expected = -0.25 * a.astype(np.float64) @ b.astype(np.float64) + 0.9 * c
    out = stored(c, layout_c)
    gemm = blas.accumulating_gemm(XP, stored(a, layout_a), stored(b, layout_b), out)
    assert gemm is not None
    gemm(-0.25, 0.9)
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    if layout_c == "padded":  # nothing outside the view was written
        assert np.isnan(out.base[:, 0]).all() and np.isnan(out.base[:, -2:]).all()


def test_declines_what_blas_cannot_take_as_it_lies(rng) -> None:
    a, b, c = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), np.zeros((4, 5))
    mixed = blas.accumulating_gemm(XP, a.astype(np.float32), b, c)
    integer = blas.accumulating_gemm(XP, a.astype(np.int64), b.astype(np.int64), c.astype(np.int64))
    column_major_c = blas.accumulating_gemm(XP, a, b, np.asfortranarray(c))
    strided = blas.accumulating_gemm(XP, a[:, ::2], b[::2], c)  # a[:, ::2]: no unit stride either way
    batched = blas.accumulating_gemm(XP, a[None], b[None], c[None])
    empty = blas.accumulating_gemm(XP, a[:, :0], b[:0], c)
    square = rng.standard_normal((4, 4))
    overlapping = blas.accumulating_gemm(XP, square, square[:, :2], square[:, 2:])  # c would be written as b is read
    assert mixed is integer is column_major_c is strided is batched is empty is overlapping is None
    fake_gpu = type(XP)("cupy")
    assert blas.accumulating_gemm(fake_gpu, a, b, c) is None


def test_a_call_keeps_the_arrays_it_addresses_alive(rng) -> None:
    import gc
    import weakref

    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), np.zeros((3, 2))
    expected, alive = a @ b, [weakref.ref(x) for x in (a, b)]
    gemm = blas.accumulating_gemm(XP, a, b, c)
    del a, b
    gc.collect()
    assert all(ref() is not None for ref in alive)
    gemm(1.0, 0.0)
    np.testing.assert_allclose(c, expected, rtol=1e-12)
