import math
import operator

import numpy as np
import pytest

from irflow.runtime.kernels import DataError, checks_data

FLOATS = [np.float32, np.float64]
TOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}

BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "maximum": max,
    "minimum": min,
    "pow": operator.pow,
    "floor_mod": operator.mod,  # Python's % has the divisor's sign, for floats exactly, as OneFlow's floor_mod
    "atan2": math.atan2,
}
COMPARE = {
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
}
SHAPES = [((3, 1, 4), (2, 4)), ((5,), ()), ((1,), (2, 3)), ((2, 3), (2, 3))]


def elementwise(fn, *arrays: np.ndarray, dtype: object) -> np.ndarray:
    """Reference: the Python scalar function applied element by element (after broadcasting)."""
    b = np.broadcast_arrays(*arrays)
    return np.array([fn(*(v.item() for v in vs)) for vs in zip(*(a.reshape(-1) for a in b))], dtype=dtype).reshape(
        b[0].shape
    )


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float16, *FLOATS])
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary(kernel, rng, name, dtype, shapes) -> None:
    a = rng.uniform(0.5, 2.0, shapes[0]).astype(dtype)
    b = rng.uniform(0.5, 2.0, shapes[1]).astype(dtype)
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    (y,) = kernel(name, [a, b], [(out_shape, dtype)])
    np.testing.assert_allclose(y, elementwise(BINARY[name], a, b, dtype=dtype), rtol=TOL[np.dtype(dtype)])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum", "pow"])
def test_binary_integers(kernel, rng, name) -> None:
    a, b = rng.integers(-5, 6, (4, 3)).astype(np.int32), rng.integers(0, 4, (3,)).astype(np.int32)
    (y,) = kernel(name, [a, b], [((4, 3), np.int32)])
    np.testing.assert_array_equal(y, elementwise(BINARY[name], a, b, dtype=np.int32))


def test_integer_div_rounds_toward_zero(kernel) -> None:
    """As OneFlow's kernels divide (C's `/`), not as numpy's // (which gives -4 and -2 here)."""
    a, b = np.array([7, -7, 6, -6, 5], np.int64), np.array([2, 2, -4, -4, 5], np.int64)
    (y,) = kernel("div", [a, b], [((5,), np.int64)])
    np.testing.assert_array_equal(y, [3, -3, -1, 1, 1])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, *FLOATS])
def test_floor_mod_has_the_divisors_sign(kernel, dtype) -> None:
    """Python's %, as OneFlow's floor_mod: C's remainder, plus b where it is nonzero and its sign is not b's."""
    a = np.array([7, -7, 7, -7, 6, -6, 0, 3], dtype)
    b = np.array([3, 3, -3, -3, 3, -3, 5, 1], dtype)
    (y,) = kernel("floor_mod", [a, b], [((8,), dtype)])
    np.testing.assert_array_equal(y, elementwise(operator.mod, a, b, dtype=dtype))


@pytest.mark.filterwarnings("ignore:invalid value encountered in fmod")
def test_float_floor_mod_is_exact_at_large_quotients_and_nan_for_zero(kernel) -> None:
    a = np.array([1e30, -1e30, 5.5, 1.0, -1.0, np.inf, 2.0])
    b = np.array([7.0, 7.0, 0.0, np.inf, np.inf, 3.0, -0.5])
    (y,) = kernel("floor_mod", [a, b], [((7,), np.float64)])
    np.testing.assert_array_equal(y[:2], [1e30 % 7.0, -1e30 % 7.0])
    np.testing.assert_array_equal(y[3:5], [1.0, np.inf])  # Python's % too: -1 % inf is inf
    assert np.isnan(y[[2, 5]]).all() and y[6] == 0.0


@pytest.mark.parametrize("name", ["div", "floor_mod"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_floor_mod_by_zero_is_a_data_error(build_kernel, name, dtype) -> None:
    a, b = np.array([[7, -7], [3, 1]], dtype), np.array([[1, 2], [0, 5]], dtype)
    run, (y,) = build_kernel(name, [a, b], [((2, 2), dtype)])
    y[...] = 42
    with pytest.raises(DataError, match=r"division by zero: divisor 0 at position \[1, 0\]"):
        run()
    assert (y == 42).all()
    assert checks_data(name, np.dtype(dtype)) and not checks_data(name, np.dtype(np.float64))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_div_by_zero_is_a_data_error(build_kernel, dtype) -> None:
    """C's `/` has no value for x / 0 (OneFlow's CPU kernel traps, torch raises ZeroDivisionError); the floor
    division and its correction gave 1 for -7 / 0 and 0 for 7 / 0, silently. Nothing is written."""
    a, b = np.array([[7, -7], [3, 1]], dtype), np.array([[1, 2], [0, 5]], dtype)
    run, (y,) = build_kernel("div", [a, b], [((2, 2), dtype)])
    y[...] = 42
    with pytest.raises(DataError, match=r"division by zero: divisor 0 at position \[1, 0\]"):
        run()
    assert (y == 42).all()
    assert checks_data("div", np.dtype(dtype)) and not checks_data("div", np.dtype(np.float32))


@pytest.mark.parametrize("name", COMPARE)
@pytest.mark.parametrize("dtype", [np.int32, *FLOATS])
def test_comparisons_write_int8(kernel, rng, name, dtype) -> None:
    a = rng.integers(0, 3, (4, 1, 3)).astype(dtype)
    b = rng.integers(0, 3, (2, 3)).astype(dtype)
    (y,) = kernel(name, [a, b], [((4, 2, 3), np.int8)])
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, elementwise(COMPARE[name], a, b, dtype=np.int8))


def _sigmoid(v: float) -> float:
    return 1 / (1 + math.exp(-v)) if v >= 0 else math.exp(v) / (1 + math.exp(v))


UNARY = {
    "neg": (operator.neg, (-3, 3)),
    "exp": (math.exp, (-5, 5)),
    "log": (math.log, (0.01, 10)),
    "sqrt": (math.sqrt, (0.0, 10)),
    "rsqrt": (lambda v: 1 / math.sqrt(v), (0.01, 10)),
    "square": (lambda v: v * v, (-3, 3)),
    "abs": (abs, (-3, 3)),
    "identity": (lambda v: v, (-3, 3)),
    "relu": (lambda v: max(v, 0.0), (-3, 3)),
    "tanh": (math.tanh, (-20, 20)),
    "sigmoid": (_sigmoid, (-750, 750)),
    "gelu": (lambda v: v * 0.5 * math.erfc(-v / math.sqrt(2)), (-8, 8)),
    "erf": (math.erf, (-5, 5)),
    "erfc": (math.erfc, (-5, 5)),
    "sin": (math.sin, (-10, 10)),
    "cos": (math.cos, (-10, 10)),
    "floor": (math.floor, (-5, 5)),
    "ceil": (math.ceil, (-5, 5)),
    "round": (round, (-5, 5)),  # Python's round takes halves to even, as OneFlow's
    "sign": (lambda v: (v > 0) - (v < 0), (-3, 3)),
    "log1p": (math.log1p, (-0.99, 10)),
    "expm1": (math.expm1, (-5, 5)),
    "tan": (math.tan, (-1.5, 1.5)),
    "asin": (math.asin, (-1, 1)),
    "acos": (math.acos, (-1, 1)),
    "atan": (math.atan, (-50, 50)),
    "sinh": (math.sinh, (-10, 10)),
    "cosh": (math.cosh, (-10, 10)),
    "asinh": (math.asinh, (-50, 50)),
    "acosh": (math.acosh, (1, 50)),
    "atanh": (math.atanh, (-0.99, 0.99)),
    "lgamma": (math.lgamma, (2.5, 10)),  # math.lgamma loses digits near its roots 1 and 2: test_gamma.py
}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float16, *FLOATS])
@pytest.mark.parametrize("shape", [(2, 1, 257), (1,), ()])
def test_unary(kernel, rng, name, dtype, shape) -> None:
    fn, (lo, hi) = UNARY[name]
    x = rng.uniform(lo, hi, shape).astype(dtype)
    (y,) = kernel(name, [x], [(shape, dtype)])
    ref = elementwise(fn, x.astype(np.float64), dtype=np.float64)
    tol = TOL[np.dtype(dtype)]
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol, atol=tol * 1e-3)


def test_sigmoid_saturates_without_overflow(kernel) -> None:
    x = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        (y,) = kernel("sigmoid", [x], [((5,), np.float64)])
    np.testing.assert_allclose(y, [0.0, _sigmoid(-40.0), 0.5, 1.0, 1.0], rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_round_takes_halves_to_even(kernel, dtype) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997], dtype)
    (y,) = kernel("round", [x], [((8,), dtype)])
    np.testing.assert_array_equal(y, np.array([-2, -2, 0, 0, 2, 2, 4, 0], dtype))


def test_sign_of_zeros_is_zero(kernel) -> None:
    x = np.array([-0.0, 0.0, -1e-300, 1e-300])
    (y,) = kernel("sign", [x], [((4,), np.float64)])
    np.testing.assert_array_equal(y, [0.0, 0.0, -1.0, 1.0])


@pytest.mark.parametrize("name, fn", [("log1p", math.log1p), ("expm1", math.expm1)])
def test_log1p_and_expm1_keep_relative_accuracy_near_zero(kernel, name, fn) -> None:
    """Where 1 + x rounds to 1 (log(1 + x) and exp(x) - 1 would give 0 or lose every digit)."""
    x = np.array([1e-20, -1e-20, 1e-10, -3e-9, 1e-5])
    (y,) = kernel(name, [x], [((5,), np.float64)])
    np.testing.assert_allclose(y, [fn(v) for v in x], rtol=1e-15)


def test_gelu_negative_tail_keeps_relative_accuracy(kernel) -> None:
    x = np.array([-10.0, -20.0])
    (y,) = kernel("gelu", [x], [((2,), np.float64)])
    ref = [v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x]
    np.testing.assert_allclose(y, ref, rtol=1e-13)


@pytest.mark.parametrize(
    "src, dst, expected",
    [
        (np.float64, np.float32, [1.5, -2.25, 3.0]),
        (np.float32, np.int32, [1, -2, 3]),  # truncates toward zero
        (np.int64, np.float64, [1.0, -2.0, 3.0]),
    ],
)
def test_cast(kernel, src, dst, expected) -> None:
    x = np.array([1.5, -2.25, 3.0]).astype(src) if np.dtype(src).kind == "f" else np.array([1, -2, 3], src)
    (y,) = kernel("cast", [x], [((3,), dst)])
    assert y.dtype == dst
    np.testing.assert_array_equal(y, np.array(expected, dst))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, axis", [((2, 3, 4, 5), 1), ((6, 7), -1), ((6, 7), 0), ((3,), 0)])
def test_bias_add(kernel, rng, dtype, shape, axis) -> None:
    x = rng.standard_normal(shape).astype(dtype)
    bias = rng.standard_normal(shape[axis]).astype(dtype)
    (y,) = kernel("bias_add", [x, bias], [(shape, dtype)], axis=axis)
    ref = np.empty(shape, dtype)
    for index in np.ndindex(*shape):
        ref[index] = x[index] + bias[index[axis]]
    np.testing.assert_allclose(y, ref, rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, axis", [((2, 3, 4, 5), 1), ((6, 7), -1), ((6, 7), 0)])
def test_bias_add_relu(kernel, rng, dtype, shape, axis) -> None:
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[0] = np.nan  # propagates, as relu's
    bias = rng.standard_normal(shape[axis]).astype(dtype)
    (y,) = kernel("bias_add_relu", [x, bias], [(shape, dtype)], axis=axis)
    ref = np.empty(shape, dtype)
    for index in np.ndindex(*shape):
        total = x[index] + bias[index[axis]]
        ref[index] = total if np.isnan(total) or total > 0 else 0
    np.testing.assert_allclose(y, ref, rtol=1e-6)


@pytest.mark.parametrize("name", ["bias_add", "bias_add_relu"])
def test_bias_add_rejects_a_mismatched_bias(build_kernel, name) -> None:
    with pytest.raises(ValueError, match="bias has shape"):
        build_kernel(name, [np.zeros((2, 3)), np.zeros(2)], [((2, 3), np.float64)], axis=1)


ALIASABLE = [(name, 1, 0) for name in [*UNARY, "digamma"]] + [
    (name, 2, alias) for name in [*BINARY, "relu_grad", "sigmoid_grad", "tanh_grad", "gelu_grad"] for alias in (0, 1)
]


@pytest.mark.parametrize("name, arity, alias", ALIASABLE)
def test_output_may_share_memory_with_an_input(kernel, rng, name, arity, alias) -> None:
    ins = [rng.uniform(0.2, 1.5, (4, 33)) * rng.choice([-1, 1], (4, 33)) for _ in range(arity)]
    if name in ("pow", "log", "sqrt", "rsqrt", "log1p"):
        ins[0] = np.abs(ins[0])
    (expected,) = kernel(name, [a.copy() for a in ins], [((4, 33), np.float64)])
    (got,) = kernel(name, ins, [ins[alias]])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", ["bias_add", "bias_add_relu"])
def test_bias_add_in_place(kernel, rng, name) -> None:
    x, bias = rng.standard_normal((4, 3)), rng.standard_normal(3)
    (expected,) = kernel(name, [x.copy(), bias], [((4, 3), np.float64)], axis=1)
    kernel(name, [x, bias], [x], axis=1)
    np.testing.assert_array_equal(x, expected)


def test_every_kernel_plan_memory_runs_in_place_is_alias_tested() -> None:
    from irflow.passes.plan_memory import ELEMENTWISE_KERNELS

    assert ELEMENTWISE_KERNELS <= {name for name, _, _ in ALIASABLE} | {"bias_add", "bias_add_relu"}


WHERE_SHAPES = [((3, 1), (3, 4), (4,)), ((), (2, 3), (2, 3)), ((2, 3), (1,), ()), ((2, 1, 3), (4, 1), (2, 4, 3))]


@pytest.mark.parametrize("dtype", [*FLOATS, np.int32])
@pytest.mark.parametrize("shapes", WHERE_SHAPES)
def test_where_selects_with_broadcasting(kernel, rng, dtype, shapes) -> None:
    c_shape, x_shape, y_shape = shapes
    condition = rng.integers(-1, 2, c_shape).astype(np.int8)  # any nonzero selects x
    x = (rng.standard_normal(x_shape) * 10).astype(dtype)
    y = (rng.standard_normal(y_shape) * 10).astype(dtype)
    out_shape = np.broadcast_shapes(c_shape, x_shape, y_shape)
    (out,) = kernel("where", [condition, x, y], [(out_shape, dtype)])
    np.testing.assert_array_equal(out, elementwise(lambda c, a, b: a if c != 0 else b, condition, x, y, dtype=dtype))


def test_where_keeps_inf_and_nan_of_the_branch_not_taken_out(kernel) -> None:
    condition = np.array([1, 0, 1, 0], np.int8)
    x = np.array([1.0, np.inf, -np.inf, np.nan])
    y = np.array([np.nan, 2.0, np.inf, -3.0])
    (out,) = kernel("where", [condition, x, y], [((4,), np.float64)])
    np.testing.assert_array_equal(out, [1.0, 2.0, -np.inf, -3.0])
