"""OneFlow 0.x array functions made of existing job ops: zeros, ones, range, masked_fill, reverse,
slice_v2 and slice_update, and OneFlow's other names for flow.math.in_top_k, flow.math.tril and
flow.matmul.

Values against numpy; gradients against PyTorch's autograd (test_composite_ops.py's `check`).
"""

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
from test_math_functions import run  # noqa: E402

check, values, FLOATS = _checks.check, _checks.values, _checks.FLOATS


def constants(make):
    """The Blobs `make()` returns, from a predict job without inputs."""

    @flow.global_function()
    def job() -> Tuple[tp.Numpy, ...]:
        return make()

    return job()


def test_zeros_and_ones_are_float32_unless_told():
    zeros, ones, int_ones = constants(lambda: (flow.zeros((2, 3)), flow.ones([4]), flow.ones(2, dtype=flow.int32)))
    np.testing.assert_array_equal(zeros, np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(ones, np.ones(4, np.float32))
    np.testing.assert_array_equal(int_ones, np.ones(2, np.int32))
    assert zeros.dtype == ones.dtype == np.float32 and int_ones.dtype == np.int32


@pytest.mark.parametrize("args, kwargs", [((5,), {}), ((2, 9, 3), {}), ((3, -4, -2), {}), ((1, 2, 0.25), {"dtype": flow.float}),
                                          ((4, 4), {}), ((0.5, 3), {"dtype": flow.double})])  # fmt: skip
def test_range_counts_as_pythons_range(args, kwargs):
    (got,) = constants(lambda: (flow.range(*args, **kwargs),))
    want = np.arange(*args).astype(kwargs.get("dtype", flow.int64).np_dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make, match", [
    (lambda: flow.range(0, 3, 0), "flow.range: delta must not be 0"),
    (lambda: flow.range("3"), "flow.range: limit must be a number, got '3'"),
    (lambda: flow.zeros((2, -1)), r"flow.zeros: shape must not have a negative dimension, got \(2, -1\)"),
    (lambda: flow.ones("2"), "flow.ones: shape must be a list or tuple of ints"),
])  # fmt: skip
def test_bad_constructors_are_trace_errors_at_the_users_line(make, match):
    with pytest.raises(flow.TraceError, match=r"test_oneflow_array_ops.py:\d+.*" + match):
        constants(lambda: (make(),))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mask_shape", [(4, 5), (4, 1), (5,)])
def test_masked_fill_writes_where_the_mask_is_set_and_passes_no_gradient_there(dtype, mask_shape):
    x = values(dtype)
    mask = np.random.default_rng(3).integers(0, 2, mask_shape).astype(np.int8)
    (out,), (grad, _) = check(lambda b, m: flow.masked_fill(b, m, -7.5),
                              lambda t, m: t.masked_fill(m.bool(), -7.5), [x, mask], dtype)  # fmt: skip
    filled = np.broadcast_to(mask, x.shape).astype(bool)
    assert (out[filled] == -7.5).all() and (grad[filled] == 0).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [0, -1, [0, 1], (1,), []])
def test_reverse_is_torch_flip_with_its_gradient(dtype, axis):
    x = values(dtype, shape=(3, 4))
    dims = [axis] if isinstance(axis, int) else list(axis)
    check(lambda b: flow.reverse(b, axis), lambda t: torch.flip(t, dims), [x], dtype)


def test_reverse_on_two_devices_is_one_devices():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)

    def flipped(b):
        return flow.reverse(b.with_distribute(flow.distribute.split(0)), [0, 1])

    one = run(flipped, x)
    flow.clear_default_session()
    flow.config.cpu_device_num(2)
    np.testing.assert_array_equal(run(flipped, x), one)
    np.testing.assert_array_equal(one, x[::-1, ::-1])


def test_reverse_refuses_a_dynamic_axis():
    with pytest.raises(flow.TraceError, match=r"test_oneflow_array_ops.py:\d+.*flow.reverse: axis 1 is dynamic"):

        @flow.global_function()
        def backwards(x: tp.ListNumpy.Placeholder((5, 3))) -> tp.ListNumpy:
            return flow.reverse(x, 1)


SLICES = [
    [(None, None, None), (0, 5, 2), (0, 6, 3)],
    [(None, None, -1), (5, 0, -2)],
    [(-2, None, None), (None, -4, None), (8, None, -3)],
    [(1, 2, 1)],
    [(None, None, 2), (4, -7, -1), (-1, -10, -4)],
]


def taken(shape, tuples):
    """The indices each axis' (start, stop, step) takes, as Python's slices do (OneFlow's reading)."""
    tuples = [*tuples, *[(None, None, None)] * (len(shape) - len(tuples))]
    return [np.arange(*slice(*t).indices(d)) for t, d in zip(tuples, shape)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("tuples", SLICES)
def test_slice_v2_takes_pythons_slices_negative_steps_too(dtype, tuples):
    x = values(dtype, shape=(3, 6, 9))
    index = taken(x.shape, tuples)

    def theirs(t):
        for axis, i in enumerate(index):
            t = torch.index_select(t, axis, torch.tensor(i, dtype=torch.long))
        return t

    (out,), _ = check(lambda b: flow.slice_v2(b, tuples), theirs, [x], dtype)
    np.testing.assert_array_equal(out, x[np.ix_(*index)])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("tuples", SLICES)
def test_slice_update_replaces_that_slice_and_splits_the_gradient(dtype, tuples):
    x = values(dtype, shape=(3, 6, 9))
    index = taken(x.shape, tuples)
    update = values(dtype, shape=tuple(len(i) for i in index))

    def theirs(t, u):
        y = t.clone()
        y[torch.meshgrid(*(torch.tensor(i, dtype=torch.long) for i in index), indexing="ij")] = u
        return y

    (out,), (dx, du) = check(lambda b, u: flow.slice_update(b, u, tuples), theirs, [x, update], dtype)
    want = x.copy()
    want[np.ix_(*index)] = update
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("tuples, match", [
    ([(0, 3, 0)], "the step of axis 0 must not be 0"),
    ([(3, None, 1)], r"start 3 of axis 0 is outside \[-3, 3\)"),
    ([(None, -5, 1)], r"stop -5 of axis 0 is outside \[-4, 3\]"),
    ([(0, 1)], r"entry 0 of slice_tup_list must be \(start, stop, step\)"),
    ([(0, 1, 1)] * 3, "slice_tup_list must be a list of at most 2"),
])  # fmt: skip
def test_bad_slice_tuples_are_trace_errors_at_the_users_line(tuples, match):
    with pytest.raises(flow.TraceError, match=r"test_oneflow_array_ops.py:\d+.*flow.slice_v2: " + match):
        run(lambda b: flow.slice_v2(b, tuples), np.zeros((3, 4), np.float32))


def test_slice_update_refuses_an_update_of_another_shape_or_a_dynamic_x():
    with pytest.raises(flow.TraceError, match=r"flow.slice_update: update must be a float32 Blob of the slice's "
                                              r"shape \(2, 4\)"):  # fmt: skip
        run(lambda b, u: flow.slice_update(b, u, [(0, 2, 1)]), np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32))
    with pytest.raises(flow.TraceError, match="flow.slice_update: x of .* has dynamic axes"):

        @flow.global_function()
        def job(x: tp.ListNumpy.Placeholder((5, 3)), u: tp.Numpy.Placeholder((1, 3))) -> tp.ListNumpy:
            return flow.slice_update(x, u, [(0, 1, 1)])


def test_oneflows_other_names_are_the_same_functions():
    assert flow.in_top_k is flow.math.in_top_k
    assert flow.nn.tril is flow.math.tril
    assert flow.linalg.matmul is flow.matmul
