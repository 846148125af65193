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
from predict_jobs import on_one_device_and, run  # noqa: E402

check, values, FLOATS = _checks.check, _checks.values, _checks.FLOATS


def run_all(function, *arrays):
    """`function` of the arrays in a predict job, its results (a tuple of Blobs) as numpy."""
    return run(function, *arrays, returns=Tuple[tp.Numpy, ...])


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


def test_filled_constants_take_their_name():
    names = []

    @flow.global_function()
    def job() -> tp.Numpy:
        blobs = (flow.zeros((2,), name="z"), flow.ones((2,), name="o"), flow.constant(3.0, shape=(2,), name="c"))
        blobs += (flow.constant_like(blobs[0], 2.0, name="cl"),)
        names.extend(b.name for b in blobs)
        return blobs[0]

    job()
    assert names == ["z", "o", "c", "cl"]


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

    one, two = on_one_device_and(2, lambda: run(flipped, x))
    np.testing.assert_array_equal(two, one)
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


# ----------------------------------------------------------------- expand, diag, pad_grad, counts and the rest


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, size", [((1, 3, 1, 2), (1, 3, 2, 2)), ((3, 1), (2, 4, -1, 5)), ((2, 3), (-1, -1))])
def test_expand_repeats_size_1_axes_with_torchs_gradient(dtype, shape, size):
    x = values(dtype, shape=shape)
    want = tuple(d if s == -1 else s for s, d in zip(size, (None,) * (len(size) - len(shape)) + shape))
    (out,), _ = check(lambda b: flow.expand(b, size), lambda t: t.expand(*size), [x], dtype)
    np.testing.assert_array_equal(out, np.broadcast_to(x, want))


@pytest.mark.parametrize("size, match", [
    ((3,), r"expand_size \(3,\) has fewer axes than x"),
    ((2, 4), r"axis 1 of expand_size \(2, 4\) must be -1 or a size x's 3 can be repeated to, got 4"),
    ((-1, 2, 3), r"axis 0 of expand_size \(-1, 2, 3\) is a new axis and needs a size of 1 or more, got -1"),
])  # fmt: skip
def test_expand_refuses_sizes_it_cannot_reach(size, match):
    with pytest.raises(flow.TraceError, match=r"test_oneflow_array_ops.py:\d+.*flow.expand: " + match):
        run(lambda b: flow.expand(b, size), np.zeros((2, 3), np.float32))


def test_broadcast_to_compatible_with_takes_every_shapes_broadcast():
    x, a, b = np.arange(4, dtype=np.float32).reshape(4, 1, 1), np.zeros((1, 5, 1), np.float32), np.zeros((3,), np.float32)
    out = run(lambda x_, a_, b_: flow.math.broadcast_to_compatible_with(x_, [a_, b_]), x, a, b)
    np.testing.assert_array_equal(out, np.broadcast_to(x, np.broadcast_shapes(x.shape, a.shape, b.shape)))
    assert flow.broadcast_to_compatible_with is flow.math.broadcast_to_compatible_with
    with pytest.raises(flow.TraceError, match=r"flow.broadcast_to_compatible_with: shapes \(4, 1, 1\) and \(3, 1, 1\) "
                                              r"do not broadcast"):  # fmt: skip
        run(lambda x_, c_: flow.broadcast_to_compatible_with(x_, [c_]), x, np.zeros((3, 1, 1), np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4,), (3, 5), (5, 3)])
@pytest.mark.parametrize("k", [0, 2, -1])
def test_diag_builds_or_reads_a_diagonal_with_torchs_gradient(dtype, shape, k):
    x = values(dtype, shape=shape)
    (out,), _ = check(lambda b: flow.diag(b, k), lambda t: torch.diag(t, k), [x], dtype)
    np.testing.assert_array_equal(out, np.diag(x, k))


def test_diag_refuses_a_diagonal_outside_the_matrix():
    with pytest.raises(flow.TraceError, match="flow.diag: diagonal 3 lies outside a matrix of shape \\(2, 3\\)"):
        run(lambda b: flow.diag(b, 3), np.zeros((2, 3), np.float32))


def test_pad_grad_is_pads_adjoint():
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(6, 5)).astype(np.float32)
    paddings = [(1, 2), (0, 1)]
    padded, cut = run_all(lambda a, b: (flow.pad(a, paddings), flow.pad_grad(b, paddings)), x, y)
    np.testing.assert_array_equal(cut, y[1:4, 0:4])
    np.testing.assert_allclose(np.sum(padded * y), np.sum(x * cut), rtol=1e-5)


def test_counts_of_elements_and_of_entries_not_finite():
    x = np.array([[1.0, np.inf, 2.0], [np.nan, -np.inf, 0.0]], np.float32)
    y = np.array([np.nan, 1.0], np.float64)
    got = run_all(lambda a, b: (flow.elem_cnt(a), flow.math.reduced_shape_elem_cnt(a, axis=[1], dtype=flow.int64),
                            flow.count_not_finite(a), flow.multi_count_not_finite([a, b]), flow.constant_scalar(2.5)),
              x, y)  # fmt: skip
    for out, want in zip(got, [np.array([6], np.int32), np.array([3], np.int64), np.array([3], np.int64),
                               np.array([4], np.int64), np.array([2.5], np.float32)]):  # fmt: skip
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)


def test_counts_of_a_dynamic_blob_are_its_actual_ones():
    @flow.global_function()
    def counts(x: tp.ListNumpy.Placeholder((5, 3))) -> Tuple[tp.Numpy, tp.Numpy, tp.ListNumpy]:
        return flow.elem_cnt(x), flow.math.reduced_shape_elem_cnt(x, axis=0), flow.dynamic_reshape(x, (-1,))

    for n in (5, 2, 0):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        every, rows, flat = counts([x])
        np.testing.assert_array_equal(every, [3 * n])
        np.testing.assert_array_equal(rows, [n])
        np.testing.assert_array_equal(flat[0], x.reshape(-1))


def test_cast_to_static_shape_checks_the_rows_are_all_there_when_the_step_runs():
    @flow.global_function()
    def static(x: tp.ListNumpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.cast_to_static_shape(x) * 2

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(static([x]), 2 * x)
    with pytest.raises(flow.ExecutionError, match=r"test_oneflow_array_ops.py:\d+.*flow.cast_to_static_shape: axis 0 "
                                                  r"needs its bound's size 4"):  # fmt: skip
        static([x[:2]])


def test_sync_dynamic_resize_is_refused_at_the_users_line():
    with pytest.raises(flow.TraceError, match=r"test_oneflow_array_ops.py:\d+.*flow.sync_dynamic_resize is not "
                                              r"supported: its size depends on the values"):  # fmt: skip
        run(lambda b: flow.sync_dynamic_resize(b, flow.constant(np.array([2], np.int32))), np.zeros((4, 3), np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_scale_tril_is_tril_of_the_scaled_input_with_torchs_gradient(dtype):
    x = values(dtype, shape=(2, 4, 5))
    (out,), _ = check(lambda b: flow.math.fused_scale_tril(b, diagonal=1, fill_value=-3.0, scale=0.5),
                      lambda t: torch.where(torch.ones(4, 5, dtype=torch.bool).tril(1), t * 0.5, torch.tensor(-3.0, dtype=t.dtype)),
                      [x], dtype)  # fmt: skip
    assert flow.nn.fused_scale_tril is flow.math.fused_scale_tril


@pytest.mark.parametrize("name, forward, saved", [
    ("nn.softmax_grad", lambda t: torch.softmax(t, dim=-1), "y"),
    ("math.sigmoid_grad", torch.sigmoid, "y"),
    ("math.gelu_grad", torch.nn.functional.gelu, "x"),
])  # fmt: skip
def test_the_explicit_backward_functions_are_torchs_vector_jacobian_products(name, forward, saved):
    rng = np.random.default_rng(8)
    x, dy = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    t = torch.tensor(x, requires_grad=True)
    y = forward(t)
    (want,) = torch.autograd.grad(y, t, torch.tensor(dy))
    module, function = name.split(".")
    given = y.detach().numpy() if saved == "y" else x
    got = run(lambda a, d: getattr(getattr(flow, module), function)(a, d), given, dy)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-7 if name != "math.gelu_grad" else 1e-6)


def test_a_variable_with_the_empty_initializer_can_be_read():
    (value,) = constants(lambda: (flow.get_variable("empty", shape=(2, 3), initializer=flow.empty_initializer()) + 0,))
    assert value.shape == (2, 3) and np.isfinite(value).all()
