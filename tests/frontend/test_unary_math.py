"""flow.math's unary job ops (sin ... erfc) against PyTorch: forward and gradient, training, 2 devices.

The vector-Jacobian products come from test_composite_ops.py's `check` (a train job
watching the gradient of sum(out * cotangent), against PyTorch's autograd).
"""

import importlib.util
import pathlib

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

_spec = importlib.util.spec_from_file_location("composite_checks", pathlib.Path(__file__).with_name("test_composite_ops.py"))
_checks = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(_checks)  # type: ignore[union-attr]
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


def train_with_unary_math(devices: int, steps: int = 3):
    """A dense layer whose loss goes through every new op; its outputs and variables after `steps` SGD steps."""
    if devices > 1:
        flow.config.cpu_device_num(devices)
    data = np.random.default_rng(11)
    w0 = data.normal(size=(5, 4)).astype(np.float32) * 0.5

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 4)), target: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        h = flow.layers.dense(x.with_distribute(flow.distribute.split(0)), 5, name="fc")
        m = flow.math
        y = m.sin(h) * m.cos(h * 0.5) + m.log1p(m.abs(h)) + m.expm1(h * 0.3) + m.erf(h) - m.erfc(h)
        y = y + m.floor(h) + m.ceil(h) + m.round(h) + m.sign(h)  # piecewise constant: no gradient
        loss = m.reduce_mean(m.square(y - target))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return y

    flow.load_variables({"fc-weight": w0})
    inputs = [(data.normal(size=(8, 4)).astype(np.float32), data.normal(size=(8, 5)).astype(np.float32))
              for _ in range(steps)]  # fmt: skip
    outputs = [train(x, target) for x, target in inputs]
    variables = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    return w0, inputs, outputs, variables


def torch_train(w0, inputs):
    fc = torch.nn.Linear(4, 5)
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(w0))
        fc.bias.zero_()
    opt = torch.optim.SGD(fc.parameters(), lr=0.05, momentum=0.9)
    outputs = []
    for x, target in inputs:
        opt.zero_grad()
        h = fc(torch.tensor(x))
        y = (torch.sin(h) * torch.cos(h * 0.5) + torch.log1p(h.abs()) + torch.special.expm1(h * 0.3)
             + torch.special.erf(h) - torch.special.erfc(h))  # fmt: skip
        y = y + torch.floor(h) + torch.ceil(h) + torch.round(h) + torch.sign(h)
        ((y - torch.tensor(target)) ** 2).mean().backward()
        opt.step()
        outputs.append(y.detach().numpy())
    return outputs, {"fc-weight": fc.weight.detach().numpy(), "fc-bias": fc.bias.detach().numpy()}


def test_training_through_the_unary_ops_matches_pytorch():
    w0, inputs, outputs, variables = train_with_unary_math(devices=1)
    want_outputs, want_variables = torch_train(w0, inputs)
    for got, want in zip(outputs, want_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for name, want in want_variables.items():
        np.testing.assert_allclose(variables[name], want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(variables["fc-weight"], w0)


def test_two_devices_train_as_one():
    """The ops' SBP rules split the batch: 2 simulated devices give the one-device numbers (and PyTorch's)."""
    _, _, one_outputs, one_variables = train_with_unary_math(devices=1)
    flow.clear_default_session()
    w0, inputs, outputs, variables = train_with_unary_math(devices=2)
    for got, want in zip(outputs, one_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for name in ("fc-weight", "fc-bias", "fc-weight-momentum"):
        np.testing.assert_allclose(variables[name], one_variables[name], rtol=1e-6, atol=1e-7)
    want_outputs, want_variables = torch_train(w0, inputs)
    np.testing.assert_allclose(variables["fc-weight"], want_variables["fc-weight"], rtol=1e-5, atol=1e-6)
