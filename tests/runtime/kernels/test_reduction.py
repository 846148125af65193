import math

import numpy as np
import pytest

REFERENCE = {"reduce_sum": math.fsum, "reduce_mean": lambda v: math.fsum(v) / len(v), "reduce_max": max}
AXES = [
    ((2, 3, 4), (1,)),
    ((2, 3, 4), (0, 2)),
    ((2, 3, 4), (-1,)),
    ((2, 3, 4), (0, 1, 2)),
    ((5,), (0,)),
    ((1, 6), (0,)),
]


def reduce_rows(fn, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Reference: move the reduced axes last, apply `fn` to each row of Python floats."""
    axes = tuple(a % x.ndim for a in axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = x.transpose(*kept, *axes).reshape(*(x.shape[a] for a in kept), -1)
    out = np.array([fn([float(v) for v in row]) for row in rows.reshape(-1, rows.shape[-1])])
    shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keepdims else [x.shape[a] for a in kept]
    return out.reshape(shape)


@pytest.mark.parametrize("name", REFERENCE)
@pytest.mark.parametrize("shape, axes", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions(kernel, rng, name, shape, axes, keepdims, dtype) -> None:
    x = rng.standard_normal(shape).astype(dtype)
    ref = reduce_rows(REFERENCE[name], x, axes, keepdims)
    (y,) = kernel(name, [x], [(ref.shape, dtype)], axes=axes, keepdims=keepdims)
    np.testing.assert_allclose(y, ref, rtol=1e-5 if dtype == np.float32 else 1e-13)


def test_integer_sum_and_max(kernel, rng) -> None:
    x = rng.integers(-100, 100, (3, 4)).astype(np.int32)
    (s,) = kernel("reduce_sum", [x], [((3,), np.int32)], axes=(1,), keepdims=False)
    (m,) = kernel("reduce_max", [x], [((4,), np.int32)], axes=(0,), keepdims=False)
    np.testing.assert_array_equal(s, [sum(int(v) for v in row) for row in x])
    np.testing.assert_array_equal(m, [max(int(v) for v in col) for col in x.T])


def test_output_shape_is_checked(build_kernel) -> None:
    with pytest.raises(ValueError, match="expected"):
        build_kernel("reduce_sum", [np.zeros((2, 3))], [((2, 1), np.float64)], axes=(1,), keepdims=False)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_argmax_picks_the_first_maximum(kernel, rng, axis) -> None:
    x = rng.integers(0, 3, (4, 5)).astype(np.float32)  # many ties
    moved = np.moveaxis(x, axis, -1)
    ref = np.array([list(row).index(max(row)) for row in moved.reshape(-1, moved.shape[-1])]).reshape(moved.shape[:-1])
    (y,) = kernel("argmax", [x], [(ref.shape, np.int64)], axis=axis)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("shape, axes", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_max_grad_matches_finite_differences(kernel, finite_diff, rng, shape, axes, keepdims) -> None:
    x = rng.permutation(np.arange(float(np.prod(shape)))).reshape(shape) / 7  # distinct: differentiable
    (y,) = kernel(
        "reduce_max", [x], [(reduce_rows(max, x, axes, keepdims).shape, np.float64)], axes=axes, keepdims=keepdims
    )
    dy = rng.standard_normal(y.shape)
    (dx,) = kernel("reduce_max_grad", [dy, x, y], [(shape, np.float64)], axes=axes, keepdims=keepdims)
    expected = finite_diff("reduce_max", [x], 0, (y.shape, np.float64), dy, axes=axes, keepdims=keepdims)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)


def test_reduce_max_grad_splits_ties_evenly(kernel) -> None:
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 0.0, 2.0, -1.0]])
    y, dy = np.array([3.0, 2.0]), np.array([6.0, 1.0])
    (dx,) = kernel("reduce_max_grad", [dy, x, y], [(x.shape, np.float64)], axes=(1,), keepdims=False)
    np.testing.assert_array_equal(dx, [[0, 2, 2, 2], [0.5, 0, 0.5, 0]])


def test_reduce_max_grad_matches_torch_amax(kernel, rng) -> None:
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float64)
    dy = rng.standard_normal((3, 1, 5))
    tx = torch.tensor(x, requires_grad=True)
    torch.amax(tx, dim=(1,), keepdim=True).backward(torch.tensor(dy))
    (y,) = kernel("reduce_max", [x], [((3, 1, 5), np.float64)], axes=(1,), keepdims=True)
    (dx,) = kernel("reduce_max_grad", [dy, x, y], [(x.shape, np.float64)], axes=(1,), keepdims=True)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-14)
