import math

import numpy as np
import pytest

from irflow.runtime.kernels import DataError

REFERENCE = {
    "reduce_sum": math.fsum,
    "reduce_mean": lambda v: math.fsum(v) / len(v),
    "reduce_max": max,
    "reduce_min": min,
    "reduce_prod": math.prod,
}
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


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("name, fn", [("reduce_min", min), ("reduce_max", max)])
def test_integer_min_and_max_keep_the_extremes_of_the_type(kernel, rng, dtype, name, fn) -> None:
    """The type's minimum and maximum themselves, which a negation would wrap."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (3, 4, 5), dtype=dtype, endpoint=True)
    x[0, 1, 2], x[2, 3, 0], x[1, 0, 4] = info.min, info.max, info.min
    ref = [fn(int(v) for v in x[:, j, :].flat) for j in range(4)]  # Python ints: exact
    (y,) = kernel(name, [x], [((4,), dtype)], axes=(0, 2), keepdims=False)
    assert [int(v) for v in y] == ref


@pytest.mark.parametrize(
    "name, dtype, identity",
    [("reduce_max", np.float32, -np.inf), ("reduce_max", np.int32, np.iinfo(np.int32).min),
     ("reduce_min", np.float32, np.inf), ("reduce_min", np.int32, np.iinfo(np.int32).max),
     ("reduce_min", np.int64, np.iinfo(np.int64).max)],
)  # fmt: skip
def test_max_and_min_over_an_empty_axis_are_their_identities(kernel, name, dtype, identity) -> None:
    """A dynamic axis with no rows: max's or min's identity (numpy has none and raises)."""
    (m,) = kernel(name, [np.zeros((0, 3), dtype)], [((1, 3), dtype)], axes=(0,), keepdims=True)
    np.testing.assert_array_equal(m, np.full((1, 3), identity, dtype))


def test_argmax_over_an_empty_axis_is_a_data_error(kernel) -> None:
    with pytest.raises(DataError, match=r"axis 0 of a value of shape \(0, 3\) has no entries to take the index of"):
        kernel("argmax", [np.zeros((0, 3), np.float32)], [((3,), np.int64)], axis=0)


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


def top_k_reference(row: list[float], k: int) -> list[int]:
    """By hand: indices by value descending, NaN first, ties by index (torch.topk's order, which it does not promise)."""
    return sorted(range(len(row)), key=lambda i: (not math.isnan(row[i]), -row[i] if not math.isnan(row[i]) else 0, i))[:k]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.int64])
@pytest.mark.parametrize("axis, k", [(1, 3), (0, 2), (1, 5), (0, 1)])
def test_top_k_orders_by_value_then_index(kernel, rng, dtype, axis, k) -> None:
    x = rng.integers(-3, 3, (4, 5)).astype(dtype)  # many ties
    if np.dtype(dtype).kind == "f":
        x[1, 2] = x[3, 0] = np.nan
        x[2, 1] = np.inf
    else:
        x[0, 0] = np.iinfo(dtype).min  # a negation would wrap it to the top
    moved = np.moveaxis(x, axis, -1)
    ref = np.array([top_k_reference(list(map(float, row)), k) for row in moved.reshape(-1, moved.shape[-1])])
    ref = np.moveaxis(ref.reshape(*moved.shape[:-1], k), -1, axis)
    (y,) = kernel("top_k", [x], [(ref.shape, np.int32)], axis=axis)
    np.testing.assert_array_equal(y, ref)


def arg_sort_reference(row: list[float], descending: bool) -> list[int]:
    """By hand: ties by index either way, NaN the largest (last ascending, first descending)."""
    sign = -1 if descending else 1
    return sorted(range(len(row)), key=lambda i: (math.isnan(row[i]) != descending, sign * row[i] if not math.isnan(row[i]) else 0, i))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint8, np.int64])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("descending", [False, True])
def test_arg_sort_orders_by_value_then_index(kernel, rng, dtype, axis, descending) -> None:
    x = rng.integers(0, 4, (4, 5)).astype(dtype)  # many ties
    if np.dtype(dtype).kind == "f":
        x[1, 2] = x[3, 0] = np.nan
        x[2, 1] = -np.inf
    else:
        x[0, 0], x[1, 1] = np.iinfo(dtype).min, np.iinfo(dtype).max  # a negation would wrap them
    moved = np.moveaxis(x, axis, -1)
    ref = np.array([arg_sort_reference(list(map(float, row)), descending) for row in moved.reshape(-1, moved.shape[-1])])
    ref = np.moveaxis(ref.reshape(moved.shape), -1, axis)
    (y,) = kernel("arg_sort", [x], [(x.shape, np.int32)], axis=axis, descending=descending)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("name, fn", [("reduce_max", max), ("reduce_min", min)])
@pytest.mark.parametrize("shape, axes", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_max_and_min_grad_match_finite_differences(
    kernel, finite_diff, rng, name, fn, shape, axes, keepdims
) -> None:
    x = rng.permutation(np.arange(float(np.prod(shape)))).reshape(shape) / 7  # distinct: differentiable
    (y,) = kernel(name, [x], [(reduce_rows(fn, x, axes, keepdims).shape, np.float64)], axes=axes, keepdims=keepdims)
    dy = rng.standard_normal(y.shape)
    (dx,) = kernel(f"{name}_grad", [dy, x, y], [(shape, np.float64)], axes=axes, keepdims=keepdims)
    expected = finite_diff(name, [x], 0, (y.shape, np.float64), dy, axes=axes, keepdims=keepdims)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)


def test_reduce_max_grad_splits_ties_evenly(kernel) -> None:
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 0.0, 2.0, -1.0]])
    y, dy = np.array([3.0, 2.0]), np.array([6.0, 1.0])
    (dx,) = kernel("reduce_max_grad", [dy, x, y], [(x.shape, np.float64)], axes=(1,), keepdims=False)
    np.testing.assert_array_equal(dx, [[0, 2, 2, 2], [0.5, 0, 0.5, 0]])


def test_reduce_min_grad_splits_ties_evenly(kernel) -> None:
    x = np.array([[1.0, -3.0, -3.0, 3.0], [2.0, 0.0, 2.0, 0.0]])
    y, dy = np.array([-3.0, 0.0]), np.array([6.0, 1.0])
    (dx,) = kernel("reduce_min_grad", [dy, x, y], [(x.shape, np.float64)], axes=(1,), keepdims=False)
    np.testing.assert_array_equal(dx, [[0, 3, 3, 0], [0, 0.5, 0, 0.5]])


@pytest.mark.parametrize("name", ["max", "min"])
def test_reduce_max_and_min_grad_match_torch_amax_and_amin(kernel, rng, name) -> None:
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float64)  # many ties
    dy = rng.standard_normal((3, 1, 5))
    tx = torch.tensor(x, requires_grad=True)
    getattr(torch, f"a{name}")(tx, dim=(1,), keepdim=True).backward(torch.tensor(dy))
    (y,) = kernel(f"reduce_{name}", [x], [((3, 1, 5), np.float64)], axes=(1,), keepdims=True)
    (dx,) = kernel(f"reduce_{name}_grad", [dy, x, y], [(x.shape, np.float64)], axes=(1,), keepdims=True)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-14)


def others_product(row: list[float]) -> list[float]:
    """Reference: for each entry, the product of the other entries of its row (no division)."""
    return [math.prod(row[:i] + row[i + 1 :]) for i in range(len(row))]


@pytest.mark.parametrize("zeros", [0, 1, 2])
@pytest.mark.parametrize("shape, axes", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_prod_grad_with_zeros(kernel, rng, shape, axes, keepdims, dtype, zeros) -> None:
    """dx = dy * the product of the other entries: exact where a group holds one or two zeros."""
    norm = tuple(a % len(shape) for a in axes)
    rest = [a for a in range(len(shape)) if a not in norm]
    groups = rng.uniform(0.5, 1.5, (math.prod(shape[a] for a in rest), math.prod(shape[a] for a in norm)))
    groups *= rng.choice([-1.0, 1.0], groups.shape)
    for g, row in enumerate(groups):
        row[rng.permutation(row.size)[: min((zeros + g) % 3, row.size)]] = 0.0  # groups with 0, 1 and 2 zeros
    moved = groups.reshape([shape[a] for a in rest] + [shape[a] for a in norm])
    x = np.moveaxis(moved, list(range(len(shape))), rest + list(norm)).astype(dtype)
    assert (x == 0).sum() == (groups == 0).sum()
    kept = reduce_rows(max, x, axes, keepdims).shape
    dy = rng.standard_normal(kept).astype(dtype)
    (dx,) = kernel("reduce_prod_grad", [dy, x], [(x.shape, dtype)], axes=axes, keepdims=keepdims)
    ref = np.empty(x.shape)
    for index in np.ndindex(*x.shape):
        group = x[tuple(index[a] if a in rest else slice(None) for a in range(x.ndim))].reshape(-1)
        position = np.ravel_multi_index([index[a] for a in norm], [x.shape[a] for a in norm])
        own = tuple(0 if a in norm else index[a] for a in range(x.ndim)) if keepdims else tuple(index[a] for a in rest)
        ref[index] = float(dy[own]) * others_product([float(v) for v in group])[position]
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(dx, ref, rtol=tol, atol=tol / 10)
