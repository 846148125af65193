"""flow.math's binary functions and reductions beyond the arithmetic (xlogy ... l2_normalize), against PyTorch.

Forward and gradient through test_composite_ops.py's `check` (a train job watching the
gradient of sum(out * cotangent), against PyTorch's autograd); edge values where a
naive formula overflows, underflows or meets 0 * inf; training on 1 and 2 devices.
"""

import re
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
from predict_jobs import on_one_device_and, run  # noqa: E402
check, values, FLOATS = _checks.check, _checks.values, _checks.FLOATS


# ----------------------------------------------------------------- xlogy, xdivy


def zero_where_x_is(f):
    """OneFlow's definitions of xlogy and xdivy: f(x, y), and 0 (value and both gradients) where x is 0.

    PyTorch's xlogy has the same values for y not NaN (checked below), but its gradient in x
    at x = 0 is log(y), where OneFlow's kernel gives 0.
    """

    def defined(x, y):
        zero = x == 0
        return torch.where(zero, 0.0, f(x, torch.where(zero, 1.0, y)))

    return defined


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0), x / 0
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name, f", [("xlogy", lambda x, y: x * torch.log(y)), ("xdivy", torch.div)])
def test_xlogy_and_xdivy_are_zero_where_x_is(name, f, dtype):
    x = values(dtype, 0.0, 0.0, -0.0, 2.0, 3.0, 0.0, shape=(4, 5))
    y = np.abs(values(dtype, 0.0, 1e-30, 5.0, 0.0, np.inf, np.inf, shape=(4, 5))) + np.asarray(0.1, x.dtype)
    y.reshape(-1)[:6] = (0.0, 1e-30, 5.0, 0.0, np.inf, np.inf)
    (out,), (dx, dy) = check(getattr(flow.math, name), zero_where_x_is(f), [x, y], dtype)
    assert (out.reshape(-1)[[0, 1, 2, 5]] == 0).all()
    assert (dx.reshape(-1)[[0, 1, 2, 5]] == 0).all() and (dy.reshape(-1)[[0, 1, 2, 5]] == 0).all()
    if name == "xlogy":
        np.testing.assert_allclose(out, torch.xlogy(torch.tensor(x), torch.tensor(y)).numpy(), rtol=1e-6)


def test_xlogy_broadcasts_and_takes_numbers():
    x = np.array([[0.0], [2.0]], np.float32)
    y = np.array([4.0, 8.0, np.nan], np.float32)
    out = run(lambda a, b: flow.math.xlogy(a, b) + flow.math.xlogy(2.0, b) * 0, x, y)
    # x = 0 gives 0 even for y NaN, as OneFlow's kernel (PyTorch gives NaN there)
    np.testing.assert_allclose(out[0, :2], [0.0, 0.0])
    np.testing.assert_allclose(out[1, :2], 2 * np.log([4.0, 8.0]), rtol=1e-6)
    assert np.isnan(out[:, 2]).all()  # 2 * log(NaN) * 0 is NaN in the second term


# ----------------------------------------------------------------- mod, atan2


@pytest.mark.parametrize("dtype", FLOATS)
def test_mod_matches_pytorchs_remainder(dtype):
    """The divisor's sign, exact for large quotients; the gradient is dy for x and -floor(x / y) dy for y."""
    x = values(dtype, 7.0, -7.0, 7.0, -7.0, 0.0, 1e6, -3.5, 2.25)
    y = values(dtype, 2.0, 2.0, -2.0, -2.0, 3.0, 0.75, 1.5, -0.5)
    y = np.where(np.abs(y) < 0.1, 0.5, y).astype(y.dtype)  # no divisor near 0: the quotient jumps there
    check(flow.math.mod, torch.remainder, [x, y], dtype)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mod_edges_are_oneflows():
    """C's fmod corrected by the divisor: 1e30 mod 7 exactly, NaN for a divisor of 0 or x inf, -1 mod inf is inf."""
    x = np.array([1e30, -1e30, 5.0, np.inf, -1.0, 1.0, -0.0], np.float64)
    y = np.array([7.0, 7.0, 0.0, 3.0, np.inf, np.inf, 2.0], np.float64)
    out = run(lambda a, b: a % b, x, y)  # Blob % Blob is flow.math.mod, as in OneFlow
    np.testing.assert_array_equal(out, [a % b if b != 0 and np.isfinite(a) else np.nan for a, b in zip(x, y)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_mod_has_the_divisors_sign_and_refuses_zero(dtype):
    x = np.array([7, -7, 7, -7, 0, np.iinfo(dtype).min], dtype)
    y = np.array([3, 3, -3, -3, 5, -1], dtype)
    out = run(flow.math.mod, x, y)
    np.testing.assert_array_equal(out, torch.remainder(torch.tensor(x), torch.tensor(y)).numpy())
    with pytest.raises(flow.ExecutionError, match="division by zero: divisor 0 at position \\[1\\]"):
        run(flow.math.mod, x[:2], np.array([1, 0], dtype))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # x*x + y*y overflows at 1e30 in float32
@pytest.mark.parametrize("dtype", FLOATS)
def test_atan2_matches_pytorch(dtype):
    """The quadrants, large and tiny values (the train job's shift makes -0.0 +0.0: signed zeros below)."""
    x = values(dtype, 1.0, 1.0, -1.0, 0.0, -1e-30, 1e30, 1e-30, 2.0, shape=(4, 5))
    y = values(dtype, 1.0, -1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1e-30, shape=(4, 5))
    check(flow.math.atan2, torch.atan2, [x, y], dtype)


def test_atan2_of_infinities_and_zeros_is_pytorchs():
    x = np.array([np.inf, np.inf, -np.inf, 0.0, -0.0, 0.0, np.nan], np.float32)
    y = np.array([np.inf, -np.inf, 1.0, 0.0, 0.0, -0.0, 1.0], np.float32)
    out = run(flow.math.atan2, x, y)
    want = torch.atan2(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


def test_atan2_of_integers_is_a_trace_error():
    with pytest.raises(flow.TraceError, match="operand must be a floating-point tensor"):
        run(flow.math.atan2, np.ones(2, np.int32), np.ones(2, np.int32))


# ----------------------------------------------------------------- floordiv, logical_and, polyval


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floordiv_floors_the_float_quotient(dtype):
    x = np.array([7.0, -7.0, 7.0, -7.0, 1.0, -1.0, 0.0, 5.5, np.inf, 1.0], dtype)
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 3.0, 0.5, 2.0, np.inf], dtype)
    np.testing.assert_array_equal(run(flow.math.floordiv, x, y), np.floor(x / y))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_floordiv_of_integers_rounds_toward_zero_as_oneflow(dtype):
    """OneFlow 0.x floors C's integer quotient, already truncated: -7 // 2 is -3 there."""
    x = np.array([7, -7, 7, -7, 6, -6, 0], dtype)
    y = np.array([2, 2, -2, -2, 4, 4, 3], dtype)
    want = torch.div(torch.tensor(x), torch.tensor(y), rounding_mode="trunc").numpy()
    np.testing.assert_array_equal(run(flow.math.floordiv, x, y), want)


def test_floordiv_of_integers_by_zero_is_an_execution_error():
    x, y = np.array([7, -7], np.int32), np.array([2, 0], np.int32)
    with pytest.raises(flow.ExecutionError, match="division by zero"):
        run(flow.math.floordiv, x, y)


def test_floordiv_passes_no_gradient():
    x = values(flow.float32, 1.5, -1.5)
    check(lambda b: (flow.math.floordiv(b, 0.5), b), lambda t: (torch.floor(t / 0.5), t), [x], flow.float32)


def test_logical_and_is_int8_and_counts_nan_as_true():
    x = np.array([[1.0, 0.0, -0.0, np.nan, 2.0, np.inf]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    out = run(flow.math.logical_and, x, y)
    want = torch.logical_and(torch.tensor(x), torch.tensor(y)).numpy().astype(np.int8)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("coeffs", [[1.0, 3.0, -2.0], [2.5], [], [1, 0, 0, -4]])
def test_polyval_is_horners_rule(coeffs):
    x = values(flow.float64, 0.0, -1.0, 1e3)
    want = lambda t: sum(c * t ** (len(coeffs) - 1 - i) for i, c in enumerate(coeffs)) + 0 * t  # noqa: E731
    if len(coeffs) < 2:
        np.testing.assert_array_equal(run(lambda b: flow.math.polyval(coeffs, b), x), want(x) + np.zeros_like(x))
    else:
        check(lambda b: flow.math.polyval(coeffs, b), want, [x], flow.float64)


def test_polyval_of_inf_has_no_nan():
    out = run(lambda b: flow.math.polyval([1.0, 0.0, 1.0], b), np.array([np.inf, -np.inf], np.float32))
    np.testing.assert_array_equal(out, [np.inf, np.inf])


def test_polyval_refuses_coefficients_that_are_not_numbers():
    with pytest.raises(flow.TraceError, match="coeffs must be a list or tuple of numbers"):
        run(lambda b: flow.math.polyval([1.0, "x"], b), np.zeros(3, np.float32))


# ----------------------------------------------------------------- reduce_any, reduce_all


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, True), ([0, 2], False), (-1, False), ([], False)])
@pytest.mark.parametrize("name", ["any", "all"])
def test_reduce_any_and_all_match_pytorch(name, axis, keepdims):
    rng = np.random.default_rng(3)
    x = (rng.random((4, 3, 5)) < 0.7).astype(np.int8) * rng.integers(-2, 3, (4, 3, 5)).astype(np.int8)
    x[0] = 1  # a slice with no zero
    x[1, :, 0] = 0  # one with only zeros
    out = run(lambda b: getattr(flow.math, f"reduce_{name}")(b, axis, keepdims), x)
    t = torch.tensor(x).bool()
    dims = [] if axis == [] else list(range(3)) if axis is None else [axis] if isinstance(axis, int) else axis
    want = getattr(torch, name)(t, dim=tuple(dims), keepdim=keepdims) if dims else t
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, want.numpy().astype(np.int8))


def test_reduce_any_and_all_count_nan_as_nonzero():
    x = np.array([[np.nan, 0.0], [np.nan, 1.0], [0.0, -0.0]], np.float32)
    out = run(lambda b: flow.math.reduce_any(b, 1) * 10 + flow.math.reduce_all(b, 1), x)
    np.testing.assert_array_equal(out, [10, 11, 0])


# ----------------------------------------------------------------- logsumexp, euclidean norm, l2_normalize


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis, keepdims", [(1, False), ([0, 2], True), (None, False), (-1, True)])
def test_reduce_logsumexp_matches_pytorch(dtype, axis, keepdims):
    x = values(dtype, 100.0, 1e4, -1e4, 88.0, 89.0, -200.0, shape=(3, 4, 5))
    dims = tuple(range(3)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    check(lambda b: flow.math.reduce_logsumexp(b, axis, keepdims),
          lambda t: torch.logsumexp(t, dim=dims, keepdim=keepdims), [x], dtype)  # fmt: skip


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_reduce_logsumexp_of_infinities():
    """A row of -inf is -inf; +inf anywhere is inf; NaN stays NaN: as torch.logsumexp."""
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0], [-np.inf, 3.0]], np.float32)
    out = run(lambda b: flow.math.reduce_logsumexp(b, 1), x)
    np.testing.assert_array_equal(out, torch.logsumexp(torch.tensor(x), 1).numpy())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis, keepdims", [(1, False), ([0, 2], True), (None, False)])
def test_reduce_euclidean_norm_matches_pytorch(dtype, axis, keepdims):
    x = values(dtype, 3.0, 4.0, 1e25, -1e-25, shape=(3, 4, 5))
    x[2, :, 1] = 0.0  # an all-zero slice: gradient 0, as PyTorch's
    x[1, :, :] *= 1e-30 if dtype is flow.float64 else 1e-20  # squares that underflow
    dims = tuple(range(3)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    # PyTorch in float64: its float32 norm of 1e25 overflows to inf
    _, (grad,) = check(lambda b: flow.math.reduce_euclidean_norm(b, axis, keepdims),
                       lambda t: torch.linalg.vector_norm(t, dim=dims, keepdim=keepdims), [x], dtype,
                       oracle_dtype=torch.float64)  # fmt: skip
    assert np.isfinite(grad).all()


def test_reduce_euclidean_norm_of_large_and_infinite_values():
    x = np.array([[3e30, 4e30], [np.inf, 1.0], [np.nan, 1.0], [0.0, -0.0], [1e-40, 0.0]], np.float32)
    out = run(lambda b: flow.math.reduce_euclidean_norm(b, 1), x)
    np.testing.assert_allclose(out, torch.linalg.vector_norm(torch.tensor(x, dtype=torch.float64), dim=1).numpy(),
                               rtol=1e-6)  # fmt: skip


def torch_l2_normalize(axis, epsilon):
    def normalize(t):
        dims = tuple(range(t.ndim)) if axis is None else axis
        return t / torch.sqrt(torch.clamp_min((t * t).sum(dim=dims, keepdim=True), epsilon))

    return normalize


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis, epsilon", [(1, 1e-12), (0, 1e-12), (None, 1e-12), (1, 0.5)])
def test_l2_normalize_matches_the_definition(dtype, axis, epsilon):
    """Against x / sqrt(max(sum(x * x), epsilon)) by PyTorch's autograd, in float64: rows of zeros and of
    norms below sqrt(epsilon) take the constant divisor and dy / sqrt(epsilon) as gradient."""
    x = values(dtype, 1e15, -1e15, shape=(4, 5))
    x[2] = 0.0
    x[3] *= 1e-3
    check(lambda b: flow.math.l2_normalize(b, axis, epsilon), torch_l2_normalize(axis, epsilon), [x], dtype,
          oracle_dtype=torch.float64)  # fmt: skip


def test_l2_normalize_of_values_whose_squares_overflow():
    x = np.array([[3e30, 4e30], [-1e25, 0.0]], np.float32)
    out = run(lambda b: flow.math.l2_normalize(b, axis=1), x)
    np.testing.assert_allclose(out, [[0.6, 0.8], [-1.0, 0.0]], rtol=1e-6)


def test_l2_normalize_refuses_a_bad_epsilon():
    with pytest.raises(flow.TraceError, match="epsilon must be a positive number"):
        run(lambda b: flow.math.l2_normalize(b, 0, epsilon=0.0), np.ones(3, np.float32))


# ----------------------------------------------------------------- top_k


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("axis, k", [(-1, 3), (0, 2), (1, 1), (-1, 99)])
def test_top_k_indices_pick_pytorchs_values(dtype, axis, k):
    """The values at our indices are torch.topk's; equal values come in index order (its order is not promised)."""
    rng = np.random.default_rng(9)
    x = rng.integers(-4, 4, (5, 6)).astype(dtype)
    out = run(lambda b: flow.math.top_k(b, axis=axis, k=k), x)
    kept = min(k, x.shape[axis])
    want = torch.topk(torch.tensor(x), kept, dim=axis, largest=True, sorted=True)
    assert out.dtype == np.int32 and out.shape == tuple(want.values.shape)
    np.testing.assert_array_equal(np.take_along_axis(x, out.astype(np.int64), axis), want.values.numpy())
    moved = np.moveaxis(out, axis, -1).reshape(-1, kept)
    values = np.moveaxis(np.take_along_axis(x, out.astype(np.int64), axis), axis, -1).reshape(-1, kept)
    for row, vals in zip(moved, values):
        ties = vals[1:] == vals[:-1]
        assert (row[1:][ties] > row[:-1][ties]).all()


def test_top_k_takes_nan_as_the_largest_and_ignores_sorted():
    x = np.array([[1.0, np.nan, 8.0, 7.0, np.inf], [2.0, 2.0, -np.inf, 2.0, 1.0]], np.float32)
    out = run(lambda b: flow.math.top_k(b, k=3, sorted=False), x)
    np.testing.assert_array_equal(out, [[1, 4, 2], [0, 1, 3]])
    np.testing.assert_array_equal(out[0], torch.topk(torch.tensor(x[0]), 3).indices.numpy())


@pytest.mark.parametrize("k, axis, match", [(0, -1, "k must be a positive int"), (2.0, -1, "k must be a positive int"),
                                            (1, 2, "axis must be an int in")])  # fmt: skip
def test_top_k_refuses_bad_arguments(k, axis, match):
    with pytest.raises(flow.TraceError, match=match):
        run(lambda b: flow.math.top_k(b, axis=axis, k=k), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("devices", [2, 3])
def test_top_k_on_several_devices_is_one_devices(devices):
    """Split along the batch, top_k along rows stays split; along the split axis the input is moved first."""
    x = np.random.default_rng(4).normal(size=(6, 6)).astype(np.float32)

    def both(b):
        b = b.with_distribute(flow.distribute.split(0))
        return flow.math.top_k(b, k=2) * 10 + flow.transpose(flow.math.top_k(b, axis=0, k=2), [1, 0])

    one, many = on_one_device_and(devices, lambda: run(both, x))
    np.testing.assert_array_equal(many, one)
    want = torch.topk(torch.tensor(x), 2, dim=1).indices * 10 + torch.topk(torch.tensor(x), 2, dim=0).indices.T
    np.testing.assert_array_equal(one, want.numpy())


def test_a_train_job_with_top_k_trains_the_rest():
    """top_k's integer indices carry no gradient: the train job differentiates around it."""

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((4, 3))) -> Tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(3, 3), initializer=flow.ones_initializer())
        h = flow.matmul(x, w)
        picked = flow.math.top_k(h, k=1)
        loss = flow.math.reduce_sum(flow.math.square(h)) + flow.math.reduce_sum(flow.cast(picked, flow.float32))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), momentum=0).minimize(loss)
        return picked, h

    x = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
    picked, h = step(x)
    np.testing.assert_array_equal(picked[:, 0], np.argmax(h, axis=1))
    grad = 2 * x.T @ (x @ np.ones((3, 3), np.float32))
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), 1 - 0.01 * grad, rtol=1e-5)


# ----------------------------------------------------------------- sort, argsort


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8])
@pytest.mark.parametrize("direction", ["ASCENDING", "DESCENDING"])
def test_argsort_and_sort_are_pytorchs_stable_sort_of_the_last_axis(dtype, direction):
    x = np.random.default_rng(2).integers(-3, 3, (3, 4, 7)).astype(dtype)  # many ties
    if np.dtype(dtype).kind == "f":
        x[0, 1, 2], x[2, 3, 0], x[1, 0, 4] = np.nan, np.inf, -np.inf
    else:
        x[0, 0, 0] = np.iinfo(dtype).min  # a negation would wrap it
    indices = run(lambda b: flow.argsort(b, direction), x)
    values = run(lambda b: flow.sort(b, direction=direction), x)
    want = torch.sort(torch.tensor(x), dim=-1, descending=direction == "DESCENDING", stable=True)
    assert indices.dtype == np.int32 and values.dtype == x.dtype
    np.testing.assert_array_equal(indices, want.indices.numpy())
    np.testing.assert_array_equal(values, want.values.numpy())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_sends_each_gradient_to_the_entry_it_came_from(dtype, descending):
    x = values(dtype, shape=(4, 6))  # distinct: each value has one source
    direction = "DESCENDING" if descending else "ASCENDING"
    check(lambda b: flow.sort(b, direction), lambda t: torch.sort(t, dim=-1, descending=descending).values, [x], dtype)


def test_sort_refuses_a_bad_direction_or_a_scalar_at_the_users_line():
    with pytest.raises(flow.TraceError, match=r"test_math_functions.py:\d+.*flow.sort: direction must be 'ASCENDING' or "
                                              r"'DESCENDING', got 'UP'"):  # fmt: skip
        run(lambda b: flow.sort(b, "UP"), np.zeros((2, 3), np.float32))
    with pytest.raises(flow.TraceError, match="flow.argsort: input must be a Blob with at least one axis"):
        run(lambda b: flow.argsort(flow.math.reduce_sum(b)), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("devices", [2, 3])
def test_argsort_on_several_devices_is_one_devices(devices):
    """Rows split along the batch sort where they are; sorted along the split axis, the input moves first."""
    x = np.random.default_rng(5).normal(size=(6, 6)).astype(np.float32)

    def both(b):
        b = b.with_distribute(flow.distribute.split(0))
        return flow.argsort(b) * 10 + flow.transpose(flow.argsort(flow.transpose(b, [1, 0]), "DESCENDING"), [1, 0])

    one, many = on_one_device_and(devices, lambda: run(both, x))
    np.testing.assert_array_equal(many, one)
    np.testing.assert_array_equal(one, np.argsort(x, axis=1) * 10 + np.argsort(-x, axis=0))


# ----------------------------------------------------------------- unsorted_segment_sum


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unsorted_segment_sum_matches_index_add(dtype, axis):
    """Repeated ids add up, an id no slice has sums to 0; the gradient gathers (PyTorch's index_add)."""
    x = values(dtype, shape=(4, 5))
    size = x.shape[axis]
    ids = np.array([3, 0, 3, 1, 0][:size], np.int32)  # segment 2 stays empty

    def theirs(t):
        shape = list(t.shape)
        shape[axis] = 4
        return torch.zeros(shape, dtype=t.dtype).index_add(axis % 2, torch.tensor(ids, dtype=torch.int64), t)

    check(lambda b, i: flow.math.unsorted_segment_sum(b, i, 4, axis=axis), lambda t, i: theirs(t), [x, ids], dtype)


def test_unsorted_segment_sum_like_takes_likes_shape():
    data = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    out = run(lambda d, i, like: flow.math.unsorted_segment_sum_like(d, i, like, axis=0),
              data, np.array([0, 1, 0], np.int32), np.zeros((2, 4), np.float32))  # fmt: skip
    np.testing.assert_array_equal(out, [[10, 12, 14, 16], [5, 6, 7, 8]])


def test_unsorted_segment_sum_of_ids_by_rows():
    """segment_ids of rank 2: data's two leading axes, summed into segments by both."""
    data = np.random.default_rng(1).normal(size=(2, 3, 4))
    ids = np.array([[0, 1, 1], [2, 0, 1]], np.int64)
    want = np.zeros((3, 4))
    np.add.at(want, ids.reshape(-1), data.reshape(6, 4))
    np.testing.assert_allclose(run(lambda d, i: flow.math.unsorted_segment_sum(d, i, 3), data, ids), want, rtol=1e-12)


@pytest.mark.parametrize("bad", [5, -1])
def test_unsorted_segment_sum_of_an_id_out_of_range_is_an_execution_error(bad):
    ids = np.array([0, bad, 1], np.int32)
    with pytest.raises(flow.ExecutionError, match="position"):
        run(lambda d, i: flow.math.unsorted_segment_sum(d, i, 5 if bad < 0 else 3), np.ones((3, 2), np.float32), ids)


def test_unsorted_segment_sum_refuses_ids_that_do_not_fit_the_data():
    with pytest.raises(flow.TraceError, match="must be data's axes from 0 on"):
        run(lambda d, i: flow.math.unsorted_segment_sum(d, i, 2), np.ones((3, 2), np.float32), np.zeros(2, np.int32))


def torch_batch_segment_sum(t, ids, num_segments):
    """OneFlow's unsorted_batch_segment_sum in PyTorch: scatter_add along ids' last axis, ids broadcast over
    data's trailing axes."""
    at, rest = ids.dim() - 1, tuple(t.shape[ids.dim():])
    index = ids.long().reshape(tuple(ids.shape) + (1,) * len(rest)).expand(tuple(t.shape))
    out_shape = tuple(t.shape[:at]) + (num_segments,) + rest
    return torch.zeros(out_shape, dtype=t.dtype).scatter_add(at, index, t)


def test_unsorted_batch_segment_sum_is_oneflows_example():
    data = np.array([[1, 2, 3, 4]] * 3, np.float32)
    ids = np.array([[0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0]], np.int32)
    out = run(lambda d, i: flow.math.unsorted_batch_segment_sum(d, i, 2), data, ids)
    np.testing.assert_array_equal(out, [[6, 4], [7, 3], [8, 2]])  # OneFlow's docstring's result
    assert flow.unsorted_batch_segment_sum is flow.math.unsorted_batch_segment_sum  # both names, as in OneFlow


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, id_shape, num_segments", [((3, 5), (3, 5), 4), ((2, 3, 5, 2), (2, 3, 5), 6),
                                                           ((4, 6, 3), (4, 6), 2)])  # fmt: skip
def test_unsorted_batch_segment_sum_matches_scatter_add(dtype, shape, id_shape, num_segments):
    """Each batch entry sums its own slices by id (repeats add up, an id none has gives 0); the gradient is
    the batch gather of dy at the ids."""
    x = values(dtype, shape=shape)
    ids = np.random.default_rng(len(shape)).integers(0, num_segments - 1, id_shape).astype(np.int32)  # one id unused
    check(lambda b, i: flow.math.unsorted_batch_segment_sum(b, i, num_segments),
          lambda t, i: torch_batch_segment_sum(t, i, num_segments), [x, ids], dtype)  # fmt: skip


BATCH_SEGMENTS = np.array([[0, 2, 0, 1, 2, 2], [1, 1, 0, 0, 2, 1], [2, 0, 0, 0, 0, 1], [0, 1, 2, 0, 1, 2]], np.int32)


def batch_segment_steps(devices):
    """3 SGD steps through unsorted_batch_segment_sum of a variable split along the batch axis on `devices`."""
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)
    scale = np.random.default_rng(3).normal(size=(4, 3, 3))

    @flow.global_function(type="train")
    def step(ids: tp.Numpy.Placeholder((4, 6), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", (4, 6, 3), initializer=flow.random_normal_initializer(seed=1),
                              distribute=flow.distribute.split(0))  # fmt: skip
        sums = flow.math.unsorted_batch_segment_sum(w, ids, 3)
        loss = flow.math.reduce_sum(flow.math.square(sums) * flow.constant(scale.astype(np.float32)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0).minimize(loss)
        return loss

    w0 = flow.get_all_variables()["w"].numpy().copy()
    losses = [float(step(BATCH_SEGMENTS)) for _ in range(3)]
    if devices > 1:
        assert re.search(r"= job\.gather_grad .*sbp = #job\.nd_sbp<\[split", step.ir("sbp-infer"))
    w = torch.tensor(w0, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.05)
    want = []
    for _ in range(3):
        opt.zero_grad()
        loss = (torch_batch_segment_sum(w, torch.tensor(BATCH_SEGMENTS), 3) ** 2 * torch.tensor(scale)).sum()
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("devices", [1, 2])
def test_unsorted_batch_segment_sum_trains_as_pytorch(devices):
    batch_segment_steps(devices)


@pytest.mark.parametrize("data_shape, id_shape, num_segments, message", [
    ((3, 4), (3,), 2, r"segment_ids needs a batch axis before its segment axis \(2 or more axes, as OneFlow's op\), "
                      r"got shape \(3,\)"),
    ((3, 4), (4, 3), 2, r"segment_ids of shape \(4, 3\) must be data's axes from 0 on, of data's shape \(3, 4\)"),
    ((3, 4), (3, 4), 0, r"num_segments must be a positive int, got 0"),
])  # fmt: skip
def test_unsorted_batch_segment_sum_with_bad_arguments_is_a_trace_error(data_shape, id_shape, num_segments, message):
    with pytest.raises(flow.TraceError, match=r"flow.math.unsorted_batch_segment_sum: " + message) as info:
        @flow.global_function()
        def f(d: tp.Numpy.Placeholder(data_shape), i: tp.Numpy.Placeholder(id_shape, dtype=flow.int32)) -> tp.Numpy:
            return flow.math.unsorted_batch_segment_sum(d, i, num_segments)  # the batch segment sum

    assert info.value.location.file == __file__
    assert open(__file__).read().splitlines()[info.value.location.line - 1].endswith("# the batch segment sum")


def test_unsorted_batch_segment_sum_of_an_id_out_of_range_is_an_execution_error():
    ids = np.array([[0, 1], [2, 1]], np.int32)
    with pytest.raises(flow.ExecutionError, match=r"index 2 at position \[1, 0\] is outside \[0, 2\)") as info:
        run(lambda d, i: flow.math.unsorted_batch_segment_sum(d, i, 2), np.ones((2, 2, 3), np.float32), ids)
    assert info.value.location.file == __file__


# ----------------------------------------------------------------- in_top_k, tril, two_stage_reduce_*


def in_top_k_by_hand(targets, predictions, k):
    """OneFlow's rule, element by element: fewer than k predictions above the target's; 0 when it cannot say."""
    out = []
    for t, row in zip(targets, predictions):
        sayable = 0 <= t < len(row) and np.isfinite(row).all()
        out.append(int(sayable and sum(p > row[t] for p in row) < k))
    return np.array(out, np.int8)


@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract")  # inf - inf: the finiteness test
@pytest.mark.parametrize("k", [0, 1, 2, 5])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_in_top_k_is_oneflows_rule(k, dtype):
    predictions = np.array([[0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.5], [1.0, np.nan, 0.0, 0.0],
                            [np.inf, 0.0, 1.0, 2.0], [0.5, 0.2, 0.9, 0.1], [0.5, 0.2, 0.9, 0.1]], np.float32)  # fmt: skip
    targets = np.array([3, 1, 2, 0, 3, 7, -1], dtype)  # ties, NaN, inf, out of range both ways
    out = run(lambda t, p: flow.math.in_top_k(t, p, k), targets, predictions)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, in_top_k_by_hand(targets, predictions, k))


def test_in_top_k_on_random_rows_matches_torch_topk():
    """Without ties, in the top k is being one of torch.topk's k indices."""
    rng = np.random.default_rng(8)
    predictions = rng.normal(size=(16, 10)).astype(np.float32)
    targets = rng.integers(0, 10, 16).astype(np.int32)
    out = run(lambda t, p: flow.math.in_top_k(t, p, 3), targets, predictions)
    top = torch.topk(torch.tensor(predictions), 3).indices.numpy()
    np.testing.assert_array_equal(out, (top == targets[:, None]).any(axis=1).astype(np.int8))


def test_in_top_k_refuses_mismatched_shapes():
    with pytest.raises(flow.TraceError, match="targets must be a Blob of shape"):
        run(lambda t, p: flow.math.in_top_k(t, p, 1), np.zeros(3, np.int32), np.zeros((2, 4), np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("diagonal, fill_value", [(0, 0), (1, -1.5), (-2, 7), (9, 0)])
def test_tril_matches_pytorch(dtype, diagonal, fill_value):
    x = values(dtype, shape=(2, 4, 5))
    x[0, 0, 4] = np.inf  # above the diagonal: replaced, and no NaN in the gradient
    theirs = lambda t: torch.where(torch.ones(4, 5, dtype=torch.bool).tril(diagonal), t, fill_value)  # noqa: E731
    (out,), (grad,) = check(lambda b: flow.math.tril(b, diagonal, fill_value), theirs, [x], dtype)
    np.testing.assert_array_equal(out, torch.tril(torch.tensor(x), diagonal).numpy() + np.triu(
        np.full((4, 5), fill_value, x.dtype), diagonal + 1))  # fmt: skip
    assert np.isfinite(grad).all()


@pytest.mark.parametrize("name, theirs", [("max", torch.amax), ("min", torch.amin)])
def test_two_stage_reductions_are_the_reductions(name, theirs):
    x = values(flow.float32, 1.0, 1.0, shape=(4, 5))
    x[0, 1] = x[0, 0] = x.max() + 1 if name == "max" else x.min() - 1  # a tie: the gradient is shared
    check(lambda b: getattr(flow.math, f"two_stage_reduce_{name}")(b, axis=1), lambda t: theirs(t, 1), [x],
          flow.float32)  # fmt: skip


# ----------------------------------------------------------------- training, 1 and 2 devices


SEGMENTS = np.array([0, 2, 0, 1, 2], np.int32)


def reduced(m, h, target, segments):
    """A loss path through the reductions, xlogy, atan2, mod and a segment sum, for flow.math (m) or the torch shim."""
    p = m.l2_normalize(h, 1)
    y = m.reduce_logsumexp(h * 3.0, 1) + m.reduce_euclidean_norm(h, 1) + m.reduce_sum(m.xlogy(target, m.exp(p)), 1)
    y = y + m.reduce_sum(m.atan2(h, target + 0.5) + m.mod(h, 0.7), 1)
    return y + m.reduce_sum(m.square(m.unsorted_segment_sum(h, segments, 3, axis=1)), 1)


class TorchMath:
    l2_normalize = staticmethod(lambda t, axis: torch_l2_normalize(axis, 1e-12)(t))
    reduce_logsumexp = staticmethod(lambda t, axis: torch.logsumexp(t, axis))
    reduce_euclidean_norm = staticmethod(lambda t, axis: torch.linalg.vector_norm(t, dim=axis))
    reduce_sum = staticmethod(lambda t, axis: t.sum(axis))
    xlogy = staticmethod(torch.xlogy)
    exp = staticmethod(torch.exp)
    atan2 = staticmethod(torch.atan2)
    mod = staticmethod(torch.remainder)
    square = staticmethod(torch.square)
    unsorted_segment_sum = staticmethod(
        lambda t, ids, n, axis: torch.zeros(t.shape[0], n, dtype=t.dtype).index_add(axis, ids, t))


def train(devices, steps=3):
    if devices > 1:
        flow.config.cpu_device_num(devices)
    data = np.random.default_rng(5)
    w0 = data.normal(size=(5, 4)).astype(np.float32) * 0.5

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((6, 4)), target: tp.Numpy.Placeholder((6, 5))) -> tp.Numpy:
        h = flow.layers.dense(x.with_distribute(flow.distribute.split(0)), 5, name="fc")
        y = reduced(flow.math, h, target, flow.constant(SEGMENTS, dtype=flow.int32))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(
            flow.math.reduce_mean(y))
        return y

    flow.load_variables({"fc-weight": w0})
    target = data.random((6, 5)).astype(np.float32)
    target[:, 0] = 0.0  # xlogy's zeros
    inputs = [(data.normal(size=(6, 4)).astype(np.float32), target) for _ in range(steps)]
    outputs = [step(x, t) for x, t in inputs]
    return w0, inputs, outputs, {name: v.numpy() for name, v in flow.get_all_variables().items()}


def torch_train(w0, inputs):
    fc = torch.nn.Linear(4, 5)
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(w0))
        fc.bias.zero_()
    opt = torch.optim.SGD(fc.parameters(), lr=0.05, momentum=0.9)
    outputs = []
    for x, target in inputs:
        opt.zero_grad()
        y = reduced(TorchMath, fc(torch.tensor(x)), torch.tensor(target), torch.tensor(SEGMENTS, dtype=torch.int64))
        y.mean().backward()
        opt.step()
        outputs.append(y.detach().numpy())
    return outputs, {"fc-weight": fc.weight.detach().numpy(), "fc-bias": fc.bias.detach().numpy()}


def test_training_through_the_reductions_matches_pytorch():
    w0, inputs, outputs, variables = train(devices=1)
    want_outputs, want_variables = torch_train(w0, inputs)
    for got, want in zip(outputs, want_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for name, want in want_variables.items():
        np.testing.assert_allclose(variables[name], want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(variables["fc-weight"], w0)


def test_two_devices_train_as_one():
    _, _, one_outputs, one_variables = train(devices=1)
    flow.clear_default_session()
    w0, inputs, outputs, variables = train(devices=2)
    for got, want in zip(outputs, one_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for name in ("fc-weight", "fc-bias", "fc-weight-momentum"):
        np.testing.assert_allclose(variables[name], one_variables[name], rtol=1e-6, atol=1e-7)
    _, want_variables = torch_train(w0, inputs)
    np.testing.assert_allclose(variables["fc-weight"], want_variables["fc-weight"], rtol=1e-5, atol=1e-6)
