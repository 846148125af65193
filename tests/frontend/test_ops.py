"""Every API op against an independent numpy reference, float32 and float64, on random inputs."""

import math

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.frontend.dtypes import from_numpy

FLOATS = [flow.float32, flow.float64]
rng = np.random.default_rng(1234)


def tol(dtype, scale=1.0):
    return dict(rtol=1e-5 * scale, atol=1e-5 * scale) if dtype is flow.float32 else dict(rtol=1e-11, atol=1e-11)


def rand(shape, dtype, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape).astype(dtype.np_dtype)


def run(body, inputs, dtype=None):
    """Trace `body(*blobs)` as a predict job over placeholders shaped like `inputs`; return its result."""
    params = [tp.Numpy.Placeholder(a.shape, dtype=from_numpy(a.dtype)) for a in inputs]
    names = [f"x{i}" for i in range(len(inputs))]
    namespace = {"body": body, "tp": tp}
    sig = ", ".join(f"{n}: P{i}" for i, n in enumerate(names))
    namespace.update({f"P{i}": p for i, p in enumerate(params)})
    exec(f"def job({sig}) -> tp.Numpy:\n    return body({', '.join(names)})", namespace)
    return flow.global_function()(namespace["job"])(*inputs)


BINARY = {
    "add": (flow.math.add, np.add),
    "subtract": (flow.math.subtract, np.subtract),
    "multiply": (flow.math.multiply, np.multiply),
    "divide": (flow.math.divide, np.divide),
    "maximum": (flow.math.maximum, np.maximum),
    "minimum": (flow.math.minimum, np.minimum),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2))])
def test_binary(name, dtype, shapes):
    ours, ref = BINARY[name]
    a, b = rand(shapes[0], dtype), rand(shapes[1], dtype, 0.5, 2.0)
    np.testing.assert_allclose(run(ours, [a, b]), ref(a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_operators_with_scalars(dtype):
    a = rand((2, 3), dtype, 0.5, 2.0)
    out = run(lambda x: (2.0 - x) * 3 / (x + 1) - (-x) ** 2 + 1.5 ** x, [a])
    np.testing.assert_allclose(out, (2.0 - a) * 3 / (a + 1) - a**2 + 1.5**a, **tol(dtype, 10))
    assert out.dtype == dtype.np_dtype


def test_pow():
    a, b = rand((5,), flow.float64, 0.5, 2.0), rand((5,), flow.float64)
    np.testing.assert_allclose(run(flow.math.pow, [a, b]), a**b, rtol=1e-12)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


UNARY = {
    "exp": (flow.math.exp, np.exp, (-2, 2)),
    "log": (flow.math.log, np.log, (0.1, 3)),
    "sqrt": (flow.math.sqrt, np.sqrt, (0.1, 3)),
    "rsqrt": (flow.math.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 3)),
    "square": (flow.math.square, np.square, (-2, 2)),
    "relu": (flow.nn.relu, lambda x: np.maximum(x, 0), (-2, 2)),
    "sigmoid": (flow.math.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    "tanh": (flow.math.tanh, np.tanh, (-3, 3)),
    "gelu": (flow.math.gelu, _gelu, (-3, 3)),
    "negative": (flow.math.negative, np.negative, (-2, 2)),
    "abs": (flow.math.abs, np.abs, (-2, 2)),
    "reciprocal": (flow.math.reciprocal, lambda x: 1 / x, (0.5, 2)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape", [(7,), (2, 1, 3), ()])
def test_unary(name, dtype, shape):
    ours, ref, (lo, hi) = UNARY[name]
    a = rand(shape, dtype, lo, hi)
    np.testing.assert_allclose(run(ours, [a]), ref(a.astype(np.float64)).astype(dtype.np_dtype), **tol(dtype, 10))


def test_comparisons_give_int8():
    a, b = rand((4, 3), flow.float32), rand((3,), flow.float32)
    b[0] = a[0, 0]
    for ours, ref in [
        (lambda x, y: x < y, np.less), (lambda x, y: x <= y, np.less_equal), (lambda x, y: x > y, np.greater),
        (lambda x, y: x >= y, np.greater_equal), (lambda x, y: x == y, np.equal), (lambda x, y: x != y, np.not_equal),
    ]:  # fmt: skip
        out = run(ours, [a, b])
        assert out.dtype == np.int8
        np.testing.assert_array_equal(out, ref(a, b).astype(np.int8))


REDUCTIONS = {
    "reduce_sum": (flow.math.reduce_sum, np.sum),
    "reduce_mean": (flow.math.reduce_mean, np.mean),
    "reduce_max": (flow.math.reduce_max, np.max),
    "reduce_min": (flow.math.reduce_min, np.min),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", [None, 0, -1, [0, 2], (1,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, dtype, axis, keepdims):
    ours, ref = REDUCTIONS[name]
    a = rand((3, 4, 5), dtype)
    out = run(lambda x: ours(x, axis=axis, keepdims=keepdims), [a])
    np_axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    np.testing.assert_allclose(out, ref(a, axis=np_axis, keepdims=keepdims), **tol(dtype, 10))


def test_reduce_with_an_empty_axis_list_is_identity():
    a = rand((2, 3), flow.float32)
    np.testing.assert_array_equal(run(lambda x: flow.math.reduce_sum(x, axis=[]) * 1, [a]), a)


INTEGERS = [flow.int8, flow.int32, flow.int64]


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("name", ["reduce_min", "reduce_max"])
@pytest.mark.parametrize("axis", [None, 0, -1, [0, 2], (1,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_integer_min_and_max(name, dtype, axis, keepdims):
    """Integers reduce as OneFlow's do: reduce_min was -reduce_max(-x), which refused them (and would
    wrap the type's minimum); the type's extremes come out exactly."""
    ours, ref = REDUCTIONS[name]
    info = np.iinfo(dtype.np_dtype)
    a = rng.integers(info.min, info.max, (3, 4, 5), endpoint=True).astype(dtype.np_dtype)
    a[0, 0, 0], a[1, 2, 3], a[2, 3, 4] = info.min, info.max, info.min
    out = run(lambda x: ours(x, axis=axis, keepdims=keepdims), [a])
    want = ref(a, axis=tuple(axis) if isinstance(axis, (list, tuple)) else axis, keepdims=keepdims)
    assert out.dtype == dtype.np_dtype
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_reduce_min_is_what_it_was(dtype):
    """min(x) where it was -max(-x): the same values, signed zeros, infinities and NaNs included."""
    a = rng.choice(np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, 3.0], dtype.np_dtype), size=(6, 7, 5))
    a[0, :, 0], a[1, 1, :] = np.nan, -0.0
    for axis in (0, 1, [0, 2], None):
        out = run(lambda x: flow.math.reduce_min(x, axis=axis), [a])
        was = -np.max(-a, axis=tuple(axis) if isinstance(axis, list) else axis)
        np.testing.assert_array_equal(out, was)
        assert (np.signbit(out) == np.signbit(was))[~np.isnan(was)].all()


@pytest.mark.parametrize("dtype", [flow.int32, flow.float32])
def test_reduce_min_over_an_empty_axis_list_is_the_input(dtype):
    a = rng.integers(-9, 9, (2, 3)).astype(dtype.np_dtype)
    np.testing.assert_array_equal(run(lambda x: flow.math.reduce_min(x, axis=[]) + 1, [a]), a + 1)


def test_reduce_min_of_an_axis_out_of_range_is_an_error_at_its_line():
    with pytest.raises(flow.TraceError, match=r"flow\.math\.reduce_min: axis 2 is out of range") as err:
        run(lambda x: flow.math.reduce_min(x, axis=2), [np.zeros((2, 3), np.int32)])
    assert err.value.location.file == __file__


def min_gradient(a: np.ndarray, c: np.ndarray, axis, keepdims: bool) -> np.ndarray:
    """The gradient of sum(reduce_min(x) * c) at x = a, watched in a train job (a trainable zero added to x)."""
    grads = []

    def record(diff: tp.Numpy):
        grads.append(diff)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder(a.shape, dtype=flow.float64),
            cot: tp.Numpy.Placeholder(c.shape, dtype=flow.float64)) -> tp.Numpy:  # fmt: skip
        x = x + flow.get_variable("shift", shape=a.shape, dtype=flow.float64, initializer=flow.zeros_initializer())
        flow.watch_diff(x, record)
        loss = flow.math.reduce_sum(flow.math.reduce_min(x, axis=axis, keepdims=keepdims) * cot)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    job(a, c)
    return grads[0]


@pytest.mark.parametrize("axis, keepdims", [(1, False), ([0, 2], True), (None, False), (-1, True)])
def test_reduce_min_gradient_matches_finite_differences(axis, keepdims):
    a = rng.permutation(60).reshape(3, 4, 5) / 7.0  # distinct entries: min is differentiable there
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    c = rng.standard_normal(np.min(a, axis=np_axis, keepdims=keepdims).shape)
    loss = lambda x: float(np.sum(np.min(x, axis=np_axis, keepdims=keepdims) * c))  # noqa: E731
    eps, want = 1e-6, np.zeros_like(a)
    for i in np.ndindex(a.shape):
        step = np.zeros_like(a)
        step[i] = eps
        want[i] = (loss(a + step) - loss(a - step)) / (2 * eps)
    np.testing.assert_allclose(min_gradient(a, c, axis, keepdims), want, rtol=1e-6, atol=1e-8)


def test_reduce_min_gradient_is_shared_among_ties():
    a = np.array([[2.0, -1.0, -1.0, 5.0], [0.0, 0.0, 0.0, 1.0]])
    got = min_gradient(a, np.array([4.0, 3.0]), 1, False)
    np.testing.assert_array_equal(got, [[0.0, 2.0, 2.0, 0.0], [1.0, 1.0, 1.0, 0.0]])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_argmax(axis):
    a = rand((4, 6), flow.float32)
    out = run(lambda x: flow.math.argmax(x, axis=axis), [a])
    np.testing.assert_array_equal(out, np.argmax(a, axis=axis))


@pytest.mark.parametrize("dtype", FLOATS)
def test_shape_ops(dtype):
    a = rand((2, 3, 4), dtype)
    np.testing.assert_array_equal(run(lambda x: flow.reshape(x, [-1, 6]), [a]), a.reshape(-1, 6))
    np.testing.assert_array_equal(run(lambda x: flow.reshape(x, (24,)), [a]), a.reshape(24))
    np.testing.assert_array_equal(run(lambda x: flow.transpose(x, perm=[2, 0, 1]), [a]), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(run(flow.transpose, [a]), a.transpose())
    np.testing.assert_array_equal(run(lambda x: flow.expand_dims(x, 1), [a]), a[:, None])
    np.testing.assert_array_equal(run(lambda x: flow.squeeze(flow.expand_dims(x, 0)), [a]), a)
    b = rand((2, 5, 4), dtype)
    np.testing.assert_array_equal(run(lambda x, y: flow.concat([x, y], axis=1), [a, b]), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(
        run(lambda x, y: flow.concat([x, y, x], axis=-2), [a, b]), np.concatenate([a, b, a], -2)
    )


def test_squeeze_takes_an_int_axis_and_negative_axes():
    a = rand((3, 1, 1), flow.float32)
    np.testing.assert_array_equal(run(lambda x: flow.squeeze(x, axis=1), [a]), np.squeeze(a, 1))
    np.testing.assert_array_equal(run(lambda x: flow.squeeze(x, axis=[-1]), [a]), np.squeeze(a, -1))


@pytest.mark.parametrize(
    "body",
    [lambda x: flow.squeeze(x, axis=[4]), lambda x: flow.squeeze(x, axis=[-4]), lambda x: flow.expand_dims(x, 4),
     lambda x: flow.expand_dims(x, 1.0)],
)
def test_squeeze_and_expand_dims_refuse_axes_out_of_range(body):
    """axis 4 of a rank-3 Blob once wrapped around to axis 1 and squeezed it; now a TraceError at the user's line."""
    with pytest.raises(flow.TraceError, match=r"axis must be an int in \[-\d, \d\)") as err:
        run(body, [rand((3, 1, 1), flow.float32)])
    assert err.value.location.file == __file__


@pytest.mark.parametrize(
    "begin, size, expected",
    [
        ([0, 1, 0], [2, 2, 4], np.s_[0:2, 1:3, 0:4]),
        ([None, -2, 1], [None, -1, 2], np.s_[:, 1:, 1:3]),
        ([1, 0, 3], [1, 3, 1], np.s_[1:2, 0:3, 3:4]),
        ([0, 2, 2], [1, 3, 3], np.s_[0:1, 2:, 2:]),  # clipped at the end, as OneFlow
    ],
)
def test_slice(begin, size, expected):
    a = rand((2, 3, 4), flow.float32)
    np.testing.assert_array_equal(run(lambda x: flow.slice(x, begin, size), [a]), a[expected])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul(dtype, ta, tb):
    a = rand((4, 3) if ta else (3, 4), dtype)
    b = rand((5, 4) if tb else (4, 5), dtype)
    out = run(lambda x, y: flow.matmul(x, y, transpose_a=ta, transpose_b=tb), [a, b])
    np.testing.assert_allclose(out, (a.T if ta else a) @ (b.T if tb else b), **tol(dtype, 10))


def test_batched_matmul_alpha_and_operator():
    a, b = rand((2, 3, 4), flow.float64), rand((2, 4, 5), flow.float64)
    np.testing.assert_allclose(run(lambda x, y: flow.matmul(x, y, alpha=0.5), [a, b]), 0.5 * (a @ b), rtol=1e-12)
    np.testing.assert_allclose(run(lambda x, y: x @ y, [a, b]), a @ b, rtol=1e-12)


def test_cast_and_constants():
    a = rand((3, 2), flow.float32, -5, 5)
    out = run(lambda x: flow.cast(x, flow.int32), [a])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, a.astype(np.int32))
    np.testing.assert_array_equal(run(lambda x: flow.cast(x, flow.float64), [a]), a.astype(np.float64))
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(run(lambda x: x + flow.constant(table), [a]), a + table)
    np.testing.assert_array_equal(run(lambda x: x * flow.constant(2.5, shape=(3, 2)), [a]), a * 2.5)
    np.testing.assert_array_equal(run(lambda x: x + flow.ones_like(x), [a]), a + 1)
    scalar = np.array(1.5, np.float32)  # a rank-0 array stays rank 0 (np.ascontiguousarray made it (1,))
    out = run(lambda x: x * flow.constant(np.array(2.0, np.float32)), [scalar])
    assert out.shape == () and out == 3.0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_softmax_family(dtype, axis):
    a = rand((4, 6), dtype, -4, 4)
    ax = -1 if axis is None else axis
    e = np.exp(a - a.max(axis=ax, keepdims=True))
    soft = e / e.sum(axis=ax, keepdims=True)
    np.testing.assert_allclose(run(lambda x: flow.nn.softmax(x, axis=axis), [a]), soft, **tol(dtype, 10))
    np.testing.assert_allclose(run(lambda x: flow.nn.log_softmax(x, axis=axis), [a]), np.log(soft), **tol(dtype, 10))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("label_dtype", [flow.int32, flow.int64])
def test_cross_entropies(dtype, label_dtype):
    logits = rand((5, 7), dtype, -3, 3)
    labels = rng.integers(0, 7, size=5).astype(label_dtype.np_dtype)
    shifted = logits - logits.max(1, keepdims=True)
    log_soft = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    expected = -log_soft[np.arange(5), labels]
    out = run(lambda y, x: flow.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x), [labels, logits])
    np.testing.assert_allclose(out, expected, **tol(dtype, 10))
    dense = np.eye(7, dtype=dtype.np_dtype)[labels] * 0.7 + 0.3 / 7
    out = run(lambda y, x: flow.nn.softmax_cross_entropy_with_logits(labels=y, logits=x), [dense, logits])
    np.testing.assert_allclose(out, -(dense * log_soft).sum(1), **tol(dtype, 10))


@pytest.mark.parametrize("fmt", [None, "NCHW", "NHWC"])
def test_bias_add(fmt):
    a = rand((2, 3, 4, 5), flow.float32)
    channels = 5 if fmt == "NHWC" else 3
    b = rand((channels,), flow.float32)
    out = run(lambda x, y: flow.nn.bias_add(x, y, data_format=fmt), [a, b])
    expected = a + (b if fmt == "NHWC" else b[None, :, None, None])
    np.testing.assert_allclose(out, expected, rtol=1e-6)


# --------------------------------------------------------------- windows


def same_pads(size, kernel, stride, dilation=1):
    """OneFlow's SAME (its SAME_LOWER): output ceil(size / stride), the odd pad at the start (TensorFlow's: the end)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total - total // 2, total // 2


def conv_ref(x, w, strides, pads, dilations=(1, 1), groups=1):
    x = x.astype(np.float64)
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pads[0:2], pads[2:4]))
    oh = (h + pads[0] + pads[1] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[2] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, f, oh, ow))
    fg = f // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg : (g + 1) * cg], w[g * fg : (g + 1) * fg]
        for i in range(kh):
            for j in range(kw):
                r, s = i * dilations[0], j * dilations[1]
                patch = xs[:, :, r : r + strides[0] * (oh - 1) + 1 : strides[0], s : s + strides[1] * (ow - 1) + 1 : strides[1]]
                out[:, g * fg : (g + 1) * fg] += np.einsum("nchw,fc->nfhw", patch, ws[:, :, i, j])
    return out


CONV_CASES = [
    # x shape, w shape, strides, padding, dilations, groups
    ((2, 3, 7, 7), (4, 3, 3, 3), 1, "SAME", None, 1),
    ((2, 3, 8, 7), (4, 3, 3, 2), 2, "SAME", None, 1),
    ((1, 4, 9, 9), (6, 2, 3, 3), [2, 1], "VALID", None, 2),
    ((1, 2, 9, 8), (3, 2, 3, 3), 1, "SAME", 2, 1),
    ((2, 2, 6, 6), (3, 2, 2, 3), 1, [0, 0, 1, [2, 0]], None, 1),
    ((1, 1, 5, 5), (1, 1, 5, 5), 1, "VALID", None, 1),  # output 1x1
    ((1, 3, 5, 5), (2, 3, 1, 1), 3, "SAME_LOWER", None, 1),
    ((2, 3, 8, 7), (4, 3, 3, 2), 2, "SAME_UPPER", None, 1),
]


def explicit(padding, x_shape, w_shape, strides, dilations):
    s = (strides, strides) if isinstance(strides, int) else tuple(strides)
    d = (1, 1) if dilations is None else ((dilations, dilations) if isinstance(dilations, int) else tuple(dilations))
    if padding == "VALID":
        return (0, 0, 0, 0)
    if isinstance(padding, str):
        (t, b), (l, r) = (same_pads(x_shape[2 + i], w_shape[2 + i], s[i], d[i]) for i in range(2))
        return (b, t, r, l) if padding == "SAME_UPPER" else (t, b, l, r)
    pads = [p if isinstance(p, list) else [p, p] for p in padding[2:]]
    return (*pads[0], *pads[1])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(dtype, case):
    x_shape, w_shape, strides, padding, dilations, groups = case
    x, w = rand(x_shape, dtype), rand(w_shape, dtype)
    out = run(lambda a, b: flow.nn.conv2d(a, b, strides, padding, dilations=dilations, groups=groups), [x, w])
    s = (strides, strides) if isinstance(strides, int) else tuple(strides)
    d = (1, 1) if dilations is None else (dilations, dilations)
    expected = conv_ref(x, w, s, explicit(padding, x_shape, w_shape, strides, dilations), d, groups)
    np.testing.assert_allclose(out, expected, **tol(dtype, 100))


def test_conv2d_nhwc():
    x, w = rand((2, 6, 6, 3), flow.float64), rand((4, 3, 3, 3), flow.float64)  # OneFlow's NHWC weight: (f, kh, kw, c)
    out = run(lambda a, b: flow.nn.conv2d(a, b, 1, "SAME", data_format="NHWC"), [x, w])
    expected = conv_ref(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), (1, 1), (1, 1, 1, 1))
    np.testing.assert_allclose(out, expected.transpose(0, 2, 3, 1), rtol=1e-10)


def pool_ref(x, k, s, pads, kind):
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else np.nan
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[0:2], pads[2:4]), constant_values=fill)
    oh = (h + pads[0] + pads[1] - k[0]) // s[0] + 1
    ow = (w + pads[2] + pads[3] - k[1]) // s[1] + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = xp[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]]
            out[:, :, i, j] = window.max((2, 3)) if kind == "max" else np.nanmean(window, (2, 3))
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    "shape, ksize, strides, padding",
    [((2, 3, 8, 8), 2, 2, "SAME"), ((1, 2, 7, 7), 3, 2, "SAME"), ((1, 2, 7, 6), [3, 2], 1, "VALID"), ((1, 1, 5, 5), 3, 3, "SAME")],
)
def test_pools(dtype, kind, shape, ksize, strides, padding):
    x = rand(shape, dtype)
    fn = flow.nn.max_pool2d if kind == "max" else flow.nn.avg_pool2d
    out = run(lambda a: fn(a, ksize=ksize, strides=strides, padding=padding), [x])
    k = (ksize, ksize) if isinstance(ksize, int) else tuple(ksize)
    s = (strides, strides) if isinstance(strides, int) else tuple(strides)
    pads = (0, 0, 0, 0) if padding == "VALID" else (*same_pads(shape[2], k[0], s[0]), *same_pads(shape[3], k[1], s[1]))
    np.testing.assert_allclose(out, pool_ref(x, k, s, pads, kind), **tol(dtype, 10))


def test_pool_nhwc():
    x = rand((1, 6, 6, 2), flow.float32)
    out = run(lambda a: flow.nn.max_pool2d(a, 2, 2, "VALID", data_format="NHWC"), [x])
    expected = pool_ref(x.transpose(0, 3, 1, 2), (2, 2), (2, 2), (0, 0, 0, 0), "max").transpose(0, 2, 3, 1)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


# --------------------------------------------------------------- layers


@pytest.mark.parametrize("dtype", FLOATS)
def test_dense_layer(dtype):
    x = rand((2, 3, 4), dtype)
    out = run(
        lambda a: flow.layers.dense(
            a, 5, activation=flow.math.tanh, kernel_initializer=flow.random_normal_initializer(),
            bias_initializer=flow.random_uniform_initializer(-1, 1), name="fc",
        ),
        [x],
    )  # fmt: skip
    v = flow.get_all_variables()
    w, b = v["fc-weight"].numpy(), v["fc-bias"].numpy()
    assert w.shape == (5, 4) and b.shape == (5,) and w.dtype == dtype.np_dtype
    np.testing.assert_allclose(out, np.tanh(x @ w.T + b), **tol(dtype, 10))


def test_conv2d_layer():
    x = rand((2, 4, 6, 6), flow.float64)
    out = run(
        lambda a: flow.layers.conv2d(
            a, 6, 3, strides=1, padding="SAME", groups=2, activation=flow.nn.relu,
            bias_initializer=flow.constant_initializer(0.5), name="conv",
        ),
        [x],
    )  # fmt: skip
    v = flow.get_all_variables()
    w, b = v["conv-weight"].numpy(), v["conv-bias"].numpy()
    assert w.shape == (6, 2, 3, 3)
    np.testing.assert_array_equal(b, 0.5)
    expected = np.maximum(conv_ref(x, w, (1, 1), (1, 1, 1, 1), groups=2) + b[None, :, None, None], 0)
    np.testing.assert_allclose(out, expected, rtol=1e-10)


@pytest.mark.parametrize(
    "index",
    [np.s_[1], np.s_[:, 1:3], np.s_[..., ::2], np.s_[-1, :, 1:], np.s_[0, 2, 3], np.s_[1:, ..., -2]],
)
def test_blob_indexing(index):
    a = rand((2, 3, 4), flow.float32)
    np.testing.assert_array_equal(run(lambda x: x[index] * 1, [a]), a[index])


def test_blob_unpacks_and_iterates_along_axis_0():
    """Python iterated through __getitem__ until an IndexError; the index past the end raised a TraceError instead."""
    a = rand((3, 4), flow.float32)
    np.testing.assert_array_equal(run(lambda x: flow.math.add_n(list(x)), [a]), a.sum(0))

    def unpack(x):
        first, second, third = x
        return first * second - third

    np.testing.assert_array_equal(run(unpack, [a]), a[0] * a[1] - a[2])


def test_a_blob_as_an_index_is_refused_by_name():
    """Looking for Ellipsis with == traced flow.math.equal(index, Ellipsis) and failed with that op's message."""
    with pytest.raises(flow.TraceError, match=r"a Blob index takes ints and slices, got Blob\(name='x0'") as err:
        run(lambda x: x[x], [rand((3, 4), flow.float32)])
    assert err.value.location.file == __file__


def test_transpose_takes_oneflows_arguments_and_no_others():
    """**kwargs swallowed a misspelt perm, and flow.transpose(x, perms=[0, 2, 1]) reversed every axis instead."""
    a = rand((2, 3, 4), flow.float32)
    out = run(lambda x: flow.transpose(x, [0, 2, 1], conjugate=False, batch_axis_non_change=True, name="t"), [a])
    np.testing.assert_array_equal(out, a.transpose(0, 2, 1))
    with pytest.raises(TypeError, match="unexpected keyword argument 'perms'"):
        run(lambda x: flow.transpose(x, perms=[0, 2, 1]), [a])
    with pytest.raises(flow.TraceError, match="conjugate=True needs complex dtypes"):
        run(lambda x: flow.transpose(x, [0, 2, 1], conjugate=True), [a])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_rounds_toward_zero_as_oneflow_does(dtype):
    """OneFlow's kernels divide integers with C's `/`: -7 / 2 is -3 (numpy's // gives -4)."""
    a = np.array([-7, 7, -7, 7, -6, 6, 0, -1, 1, 9], dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 5, 2, -2, 10], dtype)
    truncated = np.trunc(a.astype(np.float64) / b).astype(dtype)  # exact: the values are small
    np.testing.assert_array_equal(run(lambda x, y: x / y, [a, b]), truncated)
    np.testing.assert_array_equal(run(lambda x: x / 2, [a]), np.trunc(a / 2).astype(dtype))
    # The quotient written over its dividend's buffer (an in-place partner after x + 1): the correction is
    # found before the quotient overwrites it.
    np.testing.assert_array_equal(run(lambda x, y: (x + 1) / y, [a, b]), np.trunc((a + 1.0) / b).astype(dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_by_zero_stops_the_step_at_the_line(dtype):
    """x / 0 on integers has no value (OneFlow's CPU kernel traps, as C's `/`; torch raises): an ExecutionError
    at the division naming the position, where it gave 1 for -7 / 0 and 0 for 7 / 0 without a word."""
    a, b = np.array([-7, 7, 4], dtype), np.array([2, 0, 0], dtype)
    with pytest.raises(flow.ExecutionError, match=r"test_ops\.py:\d+:\d+: .*divisor 0 at position \[1\]"):
        run(lambda x, y: x / y, [a, b])


@pytest.mark.parametrize("reduce", [flow.math.reduce_prod, flow.math.reduce_sum, flow.math.reduce_variance])
def test_reduction_axes_take_numpy_ints_and_refuse_bools(reduce):
    """np.int64 axes (what np.argmax or shape arithmetic gives) reduce as ints do: one alone was a TypeError
    ('not iterable') outside any line, in a list 'out of range'. A bool is no axis: True reduced axis 1."""
    a = rand((2, 3, 2), flow.float64)
    expected = run(lambda x: reduce(x, axis=[0, 2]), [a])
    np.testing.assert_array_equal(run(lambda x: reduce(x, axis=[np.int64(0), np.int32(-1)]), [a]), expected)
    np.testing.assert_array_equal(run(lambda x: reduce(x, axis=np.int64(1)), [a]), run(lambda x: reduce(x, axis=1), [a]))
    for axis in (True, [0, False]):
        with pytest.raises(flow.TraceError, match=r"test_ops\.py:\d+:\d+: .*axis (True|False) is not an int"):
            run(lambda x: reduce(x, axis=axis), [a])
