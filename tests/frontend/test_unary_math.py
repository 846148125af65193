"""flow.math's unary job ops (sin ... erfc, lgamma) against PyTorch: forward and gradient, training, 2 devices.

The vector-Jacobian products come from test_composite_ops.py's `check` (a train job
watching the gradient of sum(out * cotangent), against PyTorch's autograd).
"""


import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
check, values, FLOATS = _checks.check, _checks.values, _checks.FLOATS

HALVES = (-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, 2.0, -3.0)

# name -> (PyTorch's function, edge values, the scale of the random values, smallest input)
SMOOTH = {
    "sin": (torch.sin, (0.0, -0.0, np.pi, -np.pi / 2, 1e4, -1e4), 3.0, None),
    "cos": (torch.cos, (0.0, -0.0, np.pi, np.pi / 2, 1e4, -1e4), 3.0, None),
    "log1p": (torch.log1p, (0.0, 1e-10, -1e-10, -0.5, -0.999, 1e30), 3.0, -0.9),
    "expm1": (torch.special.expm1, (0.0, 1e-10, -1e-10, -30.0, 20.0, -1e30), 3.0, None),
    "erf": (torch.special.erf, (0.0, -0.0, 0.5, -5.0, 10.0, -1e30), 2.0, None),
    "erfc": (torch.special.erfc, (0.0, -0.0, 0.5, -5.0, 9.0, 26.0, 1e30), 2.0, None),
}
STEPS = {
    "floor": (torch.floor, HALVES),
    "ceil": (torch.ceil, HALVES),
    "round": (torch.round, HALVES),
    "rint": (torch.round, HALVES),
    "sign": (torch.sign, (0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30)),
}


@pytest.mark.filterwarnings("ignore:overflow encountered in square")  # erf's gradient at 1e30: e**-inf = 0
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", SMOOTH)
def test_smooth_ops_and_their_gradients(name, dtype):
    theirs, edges, scale, low = SMOOTH[name]
    edges = [e for e in edges if dtype is flow.float64 or abs(e) < 1e38]
    x = values(dtype, *edges, scale=scale)
    if low is not None:
        x = np.maximum(x, np.asarray(low, x.dtype))
        x.reshape(-1)[: len(edges)] = edges
    (out,), (grad,) = check(getattr(flow.math, name), theirs, [x], dtype)
    assert np.isfinite(out).all() and np.isfinite(grad).all()


# name -> (PyTorch's function, edge values, the scale of the random values, the domain they are clipped to)
INVERSES = {
    "tan": (torch.tan, (0.0, -0.0, np.pi / 4, 1.5, -1.5, 100.0), 1.0, None),
    "asin": (torch.asin, (0.0, -0.0, 0.5, -0.999, 1e-30, 0.9999), 0.5, (-0.99, 0.99)),
    "acos": (torch.acos, (0.0, -0.0, 0.5, -0.999, 1e-30, 0.9999), 0.5, (-0.99, 0.99)),
    "atan": (torch.atan, (0.0, -0.0, 1.0, -1e4, 1e30, -1e30), 3.0, None),
    "sinh": (torch.sinh, (0.0, -0.0, 1e-10, 20.0, -20.0, 80.0), 3.0, None),
    "cosh": (torch.cosh, (0.0, -0.0, 1e-10, 20.0, -20.0, 80.0), 3.0, None),
    "asinh": (torch.asinh, (0.0, -0.0, 1e-10, -1e10, 1e30, -1e30), 3.0, None),
    "acosh": (torch.acosh, (1.5, 1.001, 10.0, 1e10, 1e30), 3.0, (1.01, None)),
    "atanh": (torch.atanh, (0.0, -0.0, 0.5, -0.999, 1e-10, 0.9999), 0.5, (-0.99, 0.99)),
    "log_sigmoid": (torch.nn.functional.logsigmoid, (0.0, -0.0, 100.0, -100.0, -1e30, 1e30), 3.0, None),
    "reciprocal_no_nan": (lambda t: torch.where(t == 0, 0.0, 1 / torch.where(t == 0, 1.0, t)), (1e-3, -1e-10, 1e18, -7.0), 3.0, None),
}


@pytest.mark.filterwarnings("ignore:overflow encountered")  # atan's and asinh's gradients at 1e30: x*x is inf
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", INVERSES)
def test_inverse_and_hyperbolic_ops_and_their_gradients(name, dtype):
    """Against PyTorch in float64: near |x| = 1 its float32 1 - x*x keeps fewer digits than our (1 - x)(1 + x)."""
    theirs, edges, scale, domain = INVERSES[name]
    edges = [e for e in edges if dtype is flow.float64 or abs(e) < 1e38]
    x = values(dtype, *edges, scale=scale)
    if domain is not None:
        x = np.clip(x, *domain).astype(x.dtype)
        x.reshape(-1)[: len(edges)] = edges
    (out,), (grad,) = check(getattr(flow.math, name), theirs, [x], dtype, oracle_dtype=torch.float64)
    assert np.isfinite(out).all() and np.isfinite(grad).all()


# x at and beyond the domain edges: infinities and NaNs where PyTorch has them, gradients too
DOMAIN_EDGES = {
    "asin": (1.0, -1.0, 1.5, -2.0, np.inf, np.nan),
    "acos": (1.0, -1.0, 1.5, -2.0, np.inf, np.nan),
    "atanh": (1.0, -1.0, 1.5, -2.0, np.inf, np.nan),
    "acosh": (1.0, 0.5, -3.0, np.inf, -np.inf, np.nan),
    "tan": (np.inf, -np.inf, np.nan, np.pi / 2, 0.0, 1.0),
    "atan": (np.inf, -np.inf, np.nan, 0.0, 1.0, -1.0),
    "sinh": (np.inf, -np.inf, np.nan, 100.0, -100.0, 0.0),
    "cosh": (np.inf, -np.inf, np.nan, 100.0, -100.0, 0.0),
    "asinh": (np.inf, -np.inf, np.nan, 0.0, 1.0, -1.0),
    "log_sigmoid": (np.inf, -np.inf, np.nan, -1e4, 0.0, 1.0),
    "reciprocal_no_nan": (0.0, -0.0, np.inf, -np.inf, np.nan, 2.0),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's invalid value and division by zero
@pytest.mark.parametrize("name", DOMAIN_EDGES)
def test_domain_edges_give_pytorchs_infinities_and_nans(name):
    x = np.array([DOMAIN_EDGES[name]], np.float32)
    check(getattr(flow.math, name), INVERSES[name][0], [x], flow.float32, oracle_dtype=torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lgamma_and_its_gradient_digamma(dtype):
    """Against PyTorch in float64 (torch.digamma in float32 keeps fewer digits below 0 than ours, computed
    in float64 and rounded once): both sides of 0, near the roots at 1 and 2, tiny and huge x."""
    x = values(dtype, 1.0, 2.0, 1.0 + 1e-6, 0.5, -0.5, -2.5, -3.7, 1e-10, -1e-10, 30.0, 1e10, scale=4.0)
    (out,), (grad,) = check(flow.math.lgamma, torch.lgamma, [x], dtype, oracle_dtype=torch.float64)
    assert np.isfinite(out).all() and np.isfinite(grad).all()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in PyTorch's and our chain rule
def test_lgamma_at_its_poles_and_infinities_is_pytorchs():
    """+inf at 0, the negative integers and both infinities; the gradient dy * digamma is -inf at 0, NaN at
    the negative integers and -inf, as PyTorch's (-0.0 is test_gamma.py's: check adds a zero to x)."""
    x = np.array([[0.0, -2.0, -1.0, -4.0, np.inf, -np.inf, np.nan, 3.0]], np.float32)
    (out,), (grad,) = check(flow.math.lgamma, torch.lgamma, [x], flow.float32, oracle_dtype=torch.float32)
    assert np.isinf(out[0, :6]).all() and np.isnan(grad[0, 1:4]).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", STEPS)
def test_piecewise_constant_ops_have_gradient_zero(name, dtype):
    """Returned next to x itself, so the loss depends on a variable: the gradient is the cotangent of x alone."""
    theirs, edges = STEPS[name]
    x = values(dtype, *edges)
    check(lambda b: (getattr(flow.math, name)(b), b), lambda t: (theirs(t), t), [x], dtype)


@pytest.mark.parametrize("name", STEPS)
def test_piecewise_constant_ops_keep_the_sign_of_zero(name):
    """Bit for bit PyTorch's, -0.0 included (floor(-0.0) is -0.0, round(-0.5) is -0.0, sign(-0.0) is 0.0)."""
    theirs, edges = STEPS[name]
    x = np.array(edges, np.float64)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder(x.shape, dtype=flow.float64)) -> tp.Numpy:
        return getattr(flow.math, name)(x)

    out, want = f(x), theirs(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


def test_round_and_rint_take_halves_to_even():
    """OneFlow's round (C's nearbyint) and rint both do, as PyTorch's round and numpy's rint."""
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], np.float32)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((6,))) -> tp.Numpy:
        return flow.math.round(x) * 10 + flow.math.rint(x)

    np.testing.assert_array_equal(f(x), np.array([-2, -2, 0, 0, 2, 2], np.float32) * 11)


def test_sign_of_nan_is_nan():
    """numpy's and cupy's sign (documented; OneFlow's and PyTorch's kernels give 0)."""

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.sign(x)

    out = f(np.array([np.nan, -2.0], np.float32))
    assert np.isnan(out[0]) and out[1] == -1.0


def test_an_integer_operand_is_a_trace_error():
    with pytest.raises(flow.TraceError, match="test_unary_math.py"):

        @flow.global_function()
        def f(i: tp.Numpy.Placeholder((2, 3), dtype=flow.int32)) -> tp.Numpy:
            return flow.math.sin(i)


def sines(m, h):
    """The loss path of the first training test, written once for flow.math (m) and once for the torch shim."""
    y = m.sin(h) * m.cos(h * 0.5) + m.log1p(m.abs(h)) + m.expm1(h * 0.3) + m.erf(h) - m.erfc(h)
    y = y + m.lgamma(m.square(h) + 0.25)
    return y + m.floor(h) + m.ceil(h) + m.round(h) + m.sign(h)  # piecewise constant: no gradient


def inverses(m, h):
    """Every inverse and hyperbolic function, each inside its domain, and log_sigmoid."""
    inside = m.tanh(h) * 0.9
    y = m.tan(h * 0.3) + m.asin(inside) + m.acos(inside) + m.atan(h) + m.atanh(inside)
    y = y + m.sinh(h * 0.5) + m.cosh(h * 0.5) + m.asinh(h) + m.acosh(m.square(h) + 1.5)
    return y + m.log_sigmoid(h)


class TorchMath:
    """flow.math's names over torch, for the oracle's side of the loss paths above."""

    def __getattr__(self, name):
        if name == "log_sigmoid":
            return torch.nn.functional.logsigmoid
        return getattr(torch.special, name, None) or getattr(torch, name)


def train_with_unary_math(devices: int, path=sines, steps: int = 3):
    """A dense layer whose loss goes through `path`; its outputs and variables after `steps` SGD steps."""
    if devices > 1:
        flow.config.cpu_device_num(devices)
    data = np.random.default_rng(11)
    w0 = data.normal(size=(5, 4)).astype(np.float32) * 0.5

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 4)), target: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        h = flow.layers.dense(x.with_distribute(flow.distribute.split(0)), 5, name="fc")
        y = path(flow.math, h)
        loss = flow.math.reduce_mean(flow.math.square(y - target))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return y

    flow.load_variables({"fc-weight": w0})
    inputs = [(data.normal(size=(8, 4)).astype(np.float32), data.normal(size=(8, 5)).astype(np.float32))
              for _ in range(steps)]  # fmt: skip
    outputs = [train(x, target) for x, target in inputs]
    variables = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    return w0, inputs, outputs, variables


def torch_train(w0, inputs, path=sines):
    fc = torch.nn.Linear(4, 5)
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(w0))
        fc.bias.zero_()
    opt = torch.optim.SGD(fc.parameters(), lr=0.05, momentum=0.9)
    outputs = []
    for x, target in inputs:
        opt.zero_grad()
        y = path(TorchMath(), fc(torch.tensor(x)))
        ((y - torch.tensor(target)) ** 2).mean().backward()
        opt.step()
        outputs.append(y.detach().numpy())
    return outputs, {"fc-weight": fc.weight.detach().numpy(), "fc-bias": fc.bias.detach().numpy()}


@pytest.mark.parametrize("path", [sines, inverses])
def test_training_through_the_unary_ops_matches_pytorch(path):
    w0, inputs, outputs, variables = train_with_unary_math(devices=1, path=path)
    want_outputs, want_variables = torch_train(w0, inputs, path)
    for got, want in zip(outputs, want_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for name, want in want_variables.items():
        np.testing.assert_allclose(variables[name], want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(variables["fc-weight"], w0)


@pytest.mark.parametrize("path", [sines, inverses])
def test_two_devices_train_as_one(path):
    """The ops' SBP rules split the batch: 2 simulated devices give the one-device numbers (and PyTorch's)."""
    _, _, one_outputs, one_variables = train_with_unary_math(devices=1, path=path)
    flow.clear_default_session()
    w0, inputs, outputs, variables = train_with_unary_math(devices=2, path=path)
    for got, want in zip(outputs, one_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for name in ("fc-weight", "fc-bias", "fc-weight-momentum"):
        np.testing.assert_allclose(variables[name], one_variables[name], rtol=1e-6, atol=1e-7)
    want_outputs, want_variables = torch_train(w0, inputs, path)
    np.testing.assert_allclose(variables["fc-weight"], want_variables["fc-weight"], rtol=1e-5, atol=1e-6)
