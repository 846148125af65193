import numpy as np
import pytest

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
