import numpy as np
import pytest

CASES = [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((2, 3, 4), (2, 4, 6)), ((2, 1, 3, 4), (2, 1, 4, 2))]


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Triple loop over every batch entry."""
    out = np.zeros((*a.shape[:-1], b.shape[-1]))
    for index in np.ndindex(*a.shape[:-2]):
        for i in range(a.shape[-2]):
            for j in range(b.shape[-1]):
                out[index + (i, j)] = sum(
                    float(a[index + (i, k)]) * float(b[index + (k, j)]) for k in range(a.shape[-1])
                )
    return out


@pytest.mark.parametrize("a_shape, b_shape", CASES)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_matmul(kernel, rng, a_shape, b_shape, transpose_a, transpose_b, dtype, tol) -> None:
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    ref = matmul_reference(a, b)
    stored_a = np.ascontiguousarray(a.swapaxes(-1, -2)) if transpose_a else a
    stored_b = np.ascontiguousarray(b.swapaxes(-1, -2)) if transpose_b else b
    (y,) = kernel(
        "matmul", [stored_a, stored_b], [(ref.shape, dtype)], transpose_a=transpose_a, transpose_b=transpose_b
    )
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)


def test_integer_matmul(kernel) -> None:
    a, b = np.arange(6, dtype=np.int64).reshape(2, 3), np.arange(6, dtype=np.int64).reshape(3, 2)
    (y,) = kernel("matmul", [a, b], [((2, 2), np.int64)])
    np.testing.assert_array_equal(y, matmul_reference(a, b))
