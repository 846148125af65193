import numpy as np
import pytest

from irflow.runtime.kernels import DataError, checks_data

DTYPES = [np.float32, np.float64, np.int32]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_copies_in_row_major_order(kernel, dtype) -> None:
    x = np.arange(24).astype(dtype).reshape(2, 3, 4)
    (y,) = kernel("reshape", [x], [((4, 6), dtype)])
    assert [int(v) for v in y.reshape(-1)] == list(range(24))


def test_reshape_of_a_non_contiguous_input(kernel) -> None:
    x = np.arange(12.0).reshape(3, 4)[:, ::2]
    (y,) = kernel("reshape", [x], [((6,), np.float64)])
    np.testing.assert_array_equal(y, [0, 2, 4, 6, 8, 10])


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 1, 2)])
def test_transpose(kernel, rng, perm) -> None:
    x = rng.standard_normal((2, 3, 4))
    out_shape = tuple(x.shape[p] for p in perm)
    (y,) = kernel("transpose", [x], [(out_shape, np.float64)], perm=perm)
    for index in np.ndindex(*x.shape):
        assert y[tuple(index[p] for p in perm)] == x[index]


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_concat(kernel, rng, axis, dtype) -> None:
    pieces = [
        rng.integers(0, 9, s).astype(dtype) for s in ([(2, 3), (1, 3), (4, 3)] if axis == 0 else [(2, 1), (2, 4)])
    ]
    total = np.concatenate(pieces, axis=axis)  # the reference: numpy's own concatenate
    (y,) = kernel("concat", pieces, [(total.shape, dtype)], axis=axis)
    np.testing.assert_array_equal(y, total)


SLICES = [((5, 6), (1, 0), (4, 6), (1, 2)), ((7,), (0,), (7,), (3,)), ((2, 1, 4), (1, 0, 3), (2, 1, 4), (1, 1, 1))]


@pytest.mark.parametrize("shape, start, stop, step", SLICES)
def test_slice_and_its_gradient(kernel, rng, shape, start, stop, step) -> None:
    x = rng.standard_normal(shape)
    ranges = [range(a, b, s) for a, b, s in zip(start, stop, step)]
    out_shape = tuple(len(r) for r in ranges)
    (y,) = kernel("slice", [x], [(out_shape, np.float64)], start=start, stop=stop, step=step)
    dy = rng.standard_normal(out_shape)
    (dx,) = kernel("slice_grad", [dy], [(shape, np.float64)], start=start, stop=stop, step=step)
    expected_dx = np.zeros(shape)
    for index in np.ndindex(*out_shape):
        source = tuple(r[i] for r, i in zip(ranges, index))
        assert y[index] == x[source]
        expected_dx[source] = dy[index]
    np.testing.assert_array_equal(dx, expected_dx)


def test_slice_grad_is_the_transpose_of_slice(kernel, finite_diff, rng) -> None:
    attrs = dict(start=(1, 0), stop=(4, 6), step=(2, 3))
    x, dy = rng.standard_normal((5, 6)), rng.standard_normal((2, 2))
    (dx,) = kernel("slice_grad", [dy], [((5, 6), np.float64)], **attrs)
    np.testing.assert_allclose(dx, finite_diff("slice", [x], 0, ((2, 2), np.float64), dy, **attrs), atol=1e-9)


@pytest.mark.parametrize("in_shape, out_shape", [((3, 1), (2, 3, 4)), ((), (2, 2)), ((4,), (4,))])
def test_broadcast_to(kernel, rng, in_shape, out_shape) -> None:
    x = rng.standard_normal(in_shape)
    (y,) = kernel("broadcast_to", [x], [(out_shape, np.float64)])
    for index in np.ndindex(*out_shape):
        tail = index[len(out_shape) - len(in_shape) :]
        assert y[index] == x[tuple(0 if d == 1 else i for d, i in zip(in_shape, tail))]


@pytest.mark.parametrize("dtype, value", [(np.float32, 0.5), (np.int64, 3), (np.float64, 1.0)])
def test_fill_refills_every_run(build_kernel, dtype, value) -> None:
    step, (y,) = build_kernel("fill", [], [((2, 3), dtype)], value=value)
    step()
    y[...] = 0
    step()
    np.testing.assert_array_equal(y, np.full((2, 3), value, dtype))


GATHERS = [((5, 3), (4,), 0, 0), ((5, 3), (2, 3), 1, 0), ((2, 6, 3), (2, 2), 1, 0), ((4,), (3,), -1, 0),
           ((3, 4, 2), (), 2, 0), ((2, 5, 3), (2, 4), 1, 1), ((2, 3, 5, 4), (2, 3, 6), 2, 2),
           ((3, 2, 4, 2), (3, 5, 2), 2, 1), ((2, 4), (2,), 1, 1)]  # fmt: skip
"""(params shape, indices shape, axis, batch_dims)"""


def gathered_by_hand(params: np.ndarray, indices: np.ndarray, axis: int, batch: int = 0) -> np.ndarray:
    """out[a..., i..., b...] = params[a..., indices[a[:batch]..., i...], b...], element by element."""
    axis %= params.ndim
    picked_rank = indices.ndim - batch
    out = np.empty(params.shape[:axis] + indices.shape[batch:] + params.shape[axis + 1 :], params.dtype)
    for where in np.ndindex(*out.shape):
        lead, picked, rest = where[:axis], where[axis : axis + picked_rank], where[axis + picked_rank :]
        out[where] = params[(*lead, int(indices[lead[:batch] + picked]), *rest)]
    return out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params_shape, indices_shape, axis, batch", GATHERS)
def test_gather(kernel, rng, dtype, index_dtype, params_shape, indices_shape, axis, batch) -> None:
    params = (rng.standard_normal(params_shape) * 10).astype(dtype)
    indices = rng.integers(0, params_shape[axis], indices_shape).astype(index_dtype)
    expected = gathered_by_hand(params, indices, axis, batch)
    (out,) = kernel("gather", [params, indices], [(expected.shape, dtype)], axis=axis, batch_dims=batch)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("params_shape, indices_shape, axis, batch", GATHERS)
def test_gather_grad_adds_the_slices_of_repeated_indices(kernel, rng, params_shape, indices_shape, axis, batch) -> None:
    """The adjoint of gather: <gather(p), dy> = <p, gather_grad(dy)> for every p, checked on unit vectors,
    with indices drawn from few values so that they repeat."""
    indices = rng.integers(0, min(2, params_shape[axis]), indices_shape)
    dy = rng.standard_normal(gathered_by_hand(np.zeros(params_shape), indices, axis, batch).shape)
    (dparams,) = kernel("gather_grad", [dy, indices], [(params_shape, np.float64)], axis=axis, batch_dims=batch)
    for where in np.ndindex(*params_shape):
        unit = np.zeros(params_shape)
        unit[where] = 1.0
        assert dparams[where] == pytest.approx(np.sum(gathered_by_hand(unit, indices, axis, batch) * dy), abs=1e-12)


@pytest.mark.parametrize("params_shape, axis, batch", [((5, 2), 0, 0), ((2, 5, 2), 1, 1)])
@pytest.mark.parametrize("name", ["gather", "gather_grad"])
@pytest.mark.parametrize("bad, position", [(5, (1, 0)), (-1, (0, 2)), (99, (1, 2))])
def test_gather_refuses_indices_outside_the_axis_before_writing(build_kernel, name, bad, position, params_shape,
                                                                axis, batch) -> None:  # fmt: skip
    indices = np.array([[0, 1, 2], [3, 4, 0]], np.int32)
    indices[position] = bad
    params = np.ones(params_shape)
    dy = np.ones(gathered_by_hand(params, np.zeros((2, 3), np.int32), axis, batch).shape)
    ins, out = [params, indices], (dy.shape, np.float64)
    if name == "gather_grad":
        ins, out = [dy, indices], (params.shape, np.float64)
    run, (result,) = build_kernel(name, ins, [out], axis=axis, batch_dims=batch)
    with pytest.raises(DataError, match=rf"index {bad} at position \[{position[0]}, {position[1]}\] is outside "
                                        rf"\[0, 5\) \(axis {axis} of params has 5 entries\)"):
        run()
    assert np.isnan(result).all()  # nothing written
    assert checks_data(name, np.dtype(np.float64))


DIM_GATHERS = [((5, 3), (4, 3), 0), ((5, 3), (5, 6), 1), ((2, 4, 3), (2, 7, 3), -2), ((4,), (6,), 0)]
"""(input shape, index shape, dim)"""


def dim_gathered_by_hand(x: np.ndarray, index: np.ndarray, dim: int) -> np.ndarray:
    """out[w] = x[w with its `dim` entry replaced by index[w]], element by element."""
    dim %= x.ndim
    out = np.empty(index.shape, x.dtype)
    for where in np.ndindex(*index.shape):
        out[where] = x[where[:dim] + (int(index[where]),) + where[dim + 1 :]]
    return out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape, dim", DIM_GATHERS)
def test_dim_gather(kernel, rng, dtype, index_dtype, shape, index_shape, dim) -> None:
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    index = rng.integers(0, shape[dim], index_shape).astype(index_dtype)
    (out,) = kernel("dim_gather", [x, index], [(index_shape, dtype)], dim=dim)
    np.testing.assert_array_equal(out, dim_gathered_by_hand(x, index, dim))


@pytest.mark.parametrize("shape, index_shape, dim", DIM_GATHERS)
def test_dim_gather_grad_adds_repeated_indices(kernel, rng, shape, index_shape, dim) -> None:
    """The adjoint of dim_gather, checked on unit vectors, with indices that repeat."""
    index = rng.integers(0, min(2, shape[dim]), index_shape)
    dy = rng.standard_normal(index_shape)
    (dx,) = kernel("dim_gather_grad", [dy, index], [(shape, np.float64)], dim=dim)
    for where in np.ndindex(*shape):
        unit = np.zeros(shape)
        unit[where] = 1.0
        assert dx[where] == pytest.approx(np.sum(dim_gathered_by_hand(unit, index, dim) * dy), abs=1e-12)


@pytest.mark.parametrize("name", ["dim_gather", "dim_gather_grad"])
@pytest.mark.parametrize("bad, position", [(4, (1, 0)), (-2, (2, 1))])
def test_dim_gather_refuses_indices_outside_the_dim_before_writing(build_kernel, name, bad, position) -> None:
    index = np.array([[0, 1], [3, 2], [0, 0]], np.int64)
    index[position] = bad
    x, dy = np.ones((3, 4)), np.ones((3, 2))
    ins, out = [x, index], (dy.shape, np.float64)
    if name == "dim_gather_grad":
        ins, out = [dy, index], (x.shape, np.float64)
    run, (result,) = build_kernel(name, ins, [out], dim=1)
    with pytest.raises(DataError, match=rf"index {bad} at position \[{position[0]}, {position[1]}\] is outside "
                                        r"\[0, 4\) \(dim 1 of input has 4 entries\)"):
        run()
    assert np.isnan(result).all()  # nothing written
    assert checks_data(name, np.dtype(np.float64))


ND_GATHERS = [((5, 3), (4, 1)), ((3, 4, 5), (2, 6, 2)), ((3, 4), (7, 2)), ((2, 3, 2), (3,))]
"""(params shape, indices shape): the indices' last axis counts the coordinates"""


def nd_gathered_by_hand(params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """out[i...] = params[tuple(indices[i...])], slice by slice."""
    out = np.empty(indices.shape[:-1] + params.shape[indices.shape[-1] :], params.dtype)
    for where in np.ndindex(*indices.shape[:-1]):
        out[where] = params[tuple(int(c) for c in indices[where])]
    return out


def nd_indices(rng: np.random.Generator, shape: tuple[int, ...], index_shape: tuple[int, ...], few: bool = False):
    """In-range coordinates (from two values per axis when `few`, so that they repeat)."""
    columns = [rng.integers(0, min(2, n) if few else n, index_shape[:-1]) for n in shape[: index_shape[-1]]]
    return np.stack(columns, axis=-1).astype(np.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape", ND_GATHERS)
def test_gather_nd(kernel, rng, dtype, shape, index_shape) -> None:
    params = (rng.standard_normal(shape) * 10).astype(dtype)
    indices = nd_indices(rng, shape, index_shape)
    expected = nd_gathered_by_hand(params, indices)
    (out,) = kernel("gather_nd", [params, indices], [(expected.shape, dtype)])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("shape, index_shape", ND_GATHERS)
def test_scatter_nd_is_the_adjoint_of_gather_nd(kernel, rng, shape, index_shape) -> None:
    indices = nd_indices(rng, shape, index_shape, few=True)
    updates = rng.standard_normal(nd_gathered_by_hand(np.zeros(shape), indices).shape)
    (out,) = kernel("scatter_nd", [updates, indices], [(shape, np.float64)])
    for where in np.ndindex(*shape):
        unit = np.zeros(shape)
        unit[where] = 1.0
        assert out[where] == pytest.approx(np.sum(nd_gathered_by_hand(unit, indices) * updates), abs=1e-12)


@pytest.mark.parametrize("name", ["gather_nd", "scatter_nd"])
@pytest.mark.parametrize("bad, position, axis, size", [(3, (1, 0), 0, 3), (-1, (2, 1), 1, 4), (4, (0, 1), 1, 4)])
def test_gather_nd_refuses_coordinates_outside_their_axis_before_writing(build_kernel, name, bad, position, axis,
                                                                         size) -> None:  # fmt: skip
    indices = np.array([[0, 1], [2, 3], [1, 0]], np.int64)
    indices[position] = bad
    params, slices = np.ones((3, 4, 2)), np.ones((3, 2))
    ins, out = [params, indices], (slices.shape, np.float64)
    if name == "scatter_nd":
        ins, out = [slices, indices], (params.shape, np.float64)
    run, (result,) = build_kernel(name, ins, [out])
    with pytest.raises(DataError, match=rf"index {bad} at position \[{position[0]}, {position[1]}\] is outside "
                                        rf"\[0, {size}\) \(axis {axis} of params has {size} entries\)"):
        run()
    assert np.isnan(result).all()  # nothing written
    assert checks_data(name, np.dtype(np.float64))


def tensor_scattered_by_hand(params: np.ndarray, indices: np.ndarray, updates: np.ndarray, update: bool):
    """OneFlow's tensor_scatter_nd kernels, slice by slice: a copy of params, the indexed slices zeroed first
    when `update`, then each slice of updates added at its index."""
    out = params.copy()
    if update:
        for where in np.ndindex(*indices.shape[:-1]):
            out[tuple(int(c) for c in indices[where])] = 0
    for where in np.ndindex(*indices.shape[:-1]):
        out[tuple(int(c) for c in indices[where])] += updates[where]
    return out


@pytest.mark.parametrize("name", ["tensor_scatter_nd_update", "tensor_scatter_nd_add"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape", ND_GATHERS)
def test_tensor_scatter_nd(kernel, rng, name, dtype, shape, index_shape) -> None:
    params = (rng.standard_normal(shape) * 10).astype(dtype)
    indices = nd_indices(rng, shape, index_shape, few=True)  # repeated: update sums them, as OneFlow's kernel
    updates = (rng.standard_normal(nd_gathered_by_hand(params, indices).shape) * 10).astype(dtype)
    expected = tensor_scattered_by_hand(params, indices, updates, name.endswith("update"))
    (out,) = kernel(name, [params, indices, updates], [(shape, dtype)])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("name", ["tensor_scatter_nd_update", "tensor_scatter_nd_add"])
def test_tensor_scatter_nd_refuses_coordinates_outside_their_axis_before_writing(build_kernel, name) -> None:
    indices = np.array([[0, 1], [2, 4], [1, 0]], np.int32)
    run, (result,) = build_kernel(name, [np.ones((3, 4, 2)), indices, np.ones((3, 2))], [((3, 4, 2), np.float64)])
    with pytest.raises(DataError, match=r"index 4 at position \[1, 1\] is outside \[0, 4\) "
                                        r"\(axis 1 of params has 4 entries\)"):
        run()
    assert np.isnan(result).all()  # nothing written
    assert checks_data(name, np.dtype(np.float64))
