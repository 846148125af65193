"""The API functions composed of existing job ops, against PyTorch.

Each is checked forward and backward: a train job watches the gradient of
sum(output * cotangent) with respect to its inputs (flow.watch_diff), and
PyTorch's autograd computes the same vector-Jacobian product.
"""

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.frontend.dtypes import from_numpy

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

FLOATS = [flow.float32, flow.float64]
TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
rng = np.random.default_rng(7)


def tol(dtype, atol=None):
    if dtype is flow.float32:
        return dict(rtol=1e-5, atol=1e-6 if atol is None else atol)
    return dict(rtol=1e-11, atol=1e-12 if atol is None else atol)


def torch_vjp(theirs, inputs, cotangents, oracle_dtype=None):
    """PyTorch's outputs and gradients of sum(out * cotangent) for the float inputs (None for the others)."""

    def tensor(a):
        t = torch.tensor(a)
        if a.dtype.kind != "f":
            return t
        return t.to(oracle_dtype or TORCH_DTYPES[a.dtype]).requires_grad_(True)

    tensors = [tensor(a) for a in inputs]
    outs = theirs(*tensors)
    outs = outs if isinstance(outs, tuple) else (outs,)
    sum((o * torch.tensor(c).to(o.dtype)).sum() for o, c in zip(outs, cotangents)).backward()
    grads = [t.grad.numpy() if t.dtype.is_floating_point else None for t in tensors]
    return [o.detach().numpy() for o in outs], grads


def irflow_vjp(ours, inputs, cotangents):
    """Our outputs and gradients of sum(out * cotangent), from one call of a train job.

    Each float input gets a trainable zero added, so that the loss depends on a variable;
    the watched gradient is the loss's with respect to that sum, i.e. to the input.
    """
    grads = [None] * len(inputs)

    def recorder(i):
        def record(diff: tp.Numpy):
            grads[i] = diff

        return record

    def job(xs, cots):
        shifted = []
        for i, x in enumerate(xs):
            if x.dtype.is_floating_point:
                zero = flow.get_variable(f"shift{i}", shape=x.shape, dtype=x.dtype)
                x = x + zero
                flow.watch_diff(x, recorder(i))
            shifted.append(x)
        outs = ours(*shifted)
        outs = outs if isinstance(outs, tuple) else (outs,)
        loss = flow.math.add_n([flow.math.reduce_sum(o * c) for o, c in zip(outs, cots)])
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return outs

    def placeholders(arrays):
        return Tuple[tuple(tp.Numpy.Placeholder(a.shape, dtype=from_numpy(a.dtype)) for a in arrays)]

    job.__annotations__ = {"xs": placeholders(inputs), "cots": placeholders(cotangents), "return": Tuple[tp.Numpy, ...]}
    outs = flow.global_function(type="train")(job)(tuple(inputs), tuple(cotangents))
    return list(outs), grads


def check(ours, theirs, inputs, dtype, atol=None, oracle_dtype=None, grad_atol="atol"):
    """Outputs and input gradients of `ours` (irflow) and `theirs` (PyTorch) agree within `dtype`'s tolerance.

    `atol` replaces the dtype's absolute tolerance for the outputs, and for the gradients
    too unless `grad_atol` is given (None: the dtype's).
    """
    grad_atol = atol if grad_atol == "atol" else grad_atol
    shapes = [o.shape for o in torch_vjp(theirs, inputs, [np.float64(0)] * 8, oracle_dtype)[0]]
    cotangents = [rng.normal(size=s).astype(dtype.np_dtype) for s in shapes]
    want, want_grads = torch_vjp(theirs, inputs, cotangents, oracle_dtype)
    got, got_grads = irflow_vjp(ours, inputs, cotangents)
    for g, w in zip(got, want):
        assert g.dtype == dtype.np_dtype or g.dtype.kind != "f"
        np.testing.assert_allclose(g, w, **tol(dtype, atol))
    for g, w in zip(got_grads, want_grads):
        if w is not None:
            np.testing.assert_allclose(g, w, **tol(dtype, grad_atol))
    return got, got_grads


def values(dtype, *edges, shape=(4, 5), scale=3.0):
    """Random values of `shape` with `edges` (the points where a function bends) in its first entries."""
    a = (rng.normal(size=shape) * scale).astype(dtype.np_dtype)
    a.reshape(-1)[: len(edges)] = edges
    return a


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (-1.0, None), (None, 1.0), (2, 2)])
def test_clip_by_value_passes_the_gradient_at_its_bounds(dtype, bounds):
    low, high = bounds
    x = values(dtype, -1.0, 1.0, 2.0, -3.0, 3.0, 0.5)
    out, (grad,) = check(lambda b: flow.math.clip_by_value(b, low, high), lambda t: torch.clamp(t, low, high),
                         [x], dtype)  # fmt: skip
    on_a_bound = np.isin(x, [b for b in bounds if b is not None])
    assert on_a_bound.any() and (grad[on_a_bound] != 0).all()


def test_clip_by_values_other_names_and_integers():
    assert flow.clip_by_value is flow.math.clip_by_value is flow.clip is flow.clamp is flow.clip_by_scalar

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3,), dtype=flow.int32)) -> tp.Numpy:
        return flow.clip(x, min_value=-2, max_value=3)

    np.testing.assert_array_equal(f(np.array([-5, 0, 5], np.int32)), np.array([-2, 0, 3], np.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softplus_is_stable_and_keeps_its_tail(dtype):
    """Against PyTorch in float64: x = 100 must not overflow, x = -100 gives e**-100, not 0; sigmoid(0) at 0."""
    x = values(dtype, 0.0, 100.0, -100.0, 30.0, -30.0, 15.0, -15.0, 1e-4, -1e-4, -700.0)
    tiny = 1e-43 if dtype is flow.float32 else 0.0  # float32's e**-100 is subnormal: a few of its units apart
    (out,), (grad,) = check(flow.math.softplus, torch.nn.functional.softplus, [x], dtype, atol=tiny,
                            oracle_dtype=torch.float64)  # fmt: skip
    assert np.isfinite(out).all() and out.flat[1] == 100.0
    assert out.flat[2] > 0 and grad.flat[2] != 0
    assert grad.flat[0] != 0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5))])
def test_squared_difference(dtype, shapes):
    x, y = values(dtype, shape=shapes[0]), values(dtype, shape=shapes[1])
    check(flow.math.squared_difference, lambda a, b: (a - b) ** 2, [x, y], dtype)


AXES = [[0], [1], [0, 2], -1, None, []]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axes", AXES[:-1])  # PyTorch reads [] as every axis
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_variance_and_std(dtype, axes, keepdims):
    x = values(dtype, shape=(3, 4, 5))
    dims = list(range(3)) if axes is None else axes
    check(lambda b: (flow.math.reduce_variance(b, axes, keepdims), flow.math.reduce_std(b, axes, keepdims)),
          lambda t: (t.var(dims, correction=0, keepdim=keepdims), t.std(dims, correction=0, keepdim=keepdims)),
          [x], dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
def test_reduce_std_of_a_constant_row_has_gradient_zero(dtype):
    """sqrt's gradient at 0 is infinite; PyTorch gives 0 there, and so must we, not NaN."""
    x = values(dtype, shape=(3, 4))
    x[1] = 2.0
    _, (grad,) = check(lambda b: flow.math.reduce_std(b, 1), lambda t: t.std(1, correction=0), [x], dtype)
    np.testing.assert_array_equal(grad[1], np.zeros(4))


def test_reduce_variance_keeps_its_digits_with_a_large_mean():
    """mean(x**2) - mean(x)**2 (OneFlow's composition) loses it all here: float32's unit at x**2 = 1e8 is 8."""
    x = (np.array([[1.0, 2.0, 3.0, 4.0]]) + 1e4).astype(np.float32)
    out, _ = check(lambda b: flow.math.reduce_variance(b, 1), lambda t: t.var(1, correction=0), [x], flow.float32)
    np.testing.assert_allclose(out[0], [1.25], rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("alpha", [0.2, 1.5, -0.1])
def test_leaky_relu_is_alpha_at_and_below_zero(dtype, alpha):
    x = values(dtype, 0.0, -0.0, 1e-30, -1e-30, np.inf, 5.0, -5.0)
    _, (grad,) = check(lambda b: flow.nn.leaky_relu(b, alpha), lambda t: torch.nn.functional.leaky_relu(t, alpha),
                       [x], dtype)  # fmt: skip
    assert grad[0, 0] != 0  # the kink: PyTorch and OneFlow give alpha's share there, not 0 or 1


def test_leaky_relu_default_alpha_is_oneflows():
    out, _ = check(flow.nn.leaky_relu, lambda t: torch.nn.functional.leaky_relu(t, 0.2),
                   [np.array([-1.0, 2.0], np.float32)], flow.float32)  # fmt: skip
    np.testing.assert_array_equal(out[0], np.array([-0.2, 2.0], np.float32))


def bce_oracle(labels, logits):
    """l * softplus(-z) + (1 - l) * softplus(z) in float64: two terms >= 0, so nothing cancels.

    PyTorch's binary_cross_entropy_with_logits is not the oracle at the edges: in float64
    it gives 0 for e**-100 (logits -100, labels 0), and in float32 it loses digits to
    cancellation (logits -100, labels 0.001).
    """

    def softplus(t):
        return torch.nn.functional.softplus(t, threshold=1000)  # log1p(exp(t)) throughout: exact enough in float64

    return labels * softplus(-logits) + (1 - labels) * softplus(logits)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_cross_entropy_is_stable_for_large_logits(dtype):
    logits = values(dtype, 0.0, 100.0, -100.0, 100.0, -100.0, 100.0, -100.0, 30.0, -30.0, 0.0)
    labels = rng.uniform(0, 1, size=logits.shape).astype(dtype.np_dtype)
    # at logits +-100, labels 1 - 1e-5 and 1e-5 give a loss of 1e-3: relu(z) - z * l would lose 3 of its digits
    labels.reshape(-1)[:10] = [0.3, 0.0, 1.0, 1.0, 0.0, 1 - 1e-5, 1e-5, 0.5, 0.5, 1.0]
    tiny = 1e-43 if dtype is flow.float32 else 0.0  # float32's e**-100 is subnormal: a few of its units apart
    # the gradient sigmoid(z) - l: at z = 100, l = 1 it is -e**-100, and the rounding of
    # 1 - 1 swamps that (as in PyTorch's own sigmoid(z) - l): absolute tolerance there
    (loss,), _ = check(flow.nn.sigmoid_cross_entropy_with_logits, bce_oracle, [labels, logits], dtype, atol=tiny,
                       oracle_dtype=torch.float64, grad_atol=None)  # fmt: skip
    assert np.isfinite(loss).all() and (loss >= 0).all()
    assert loss.flat[4] > 0  # e**-100, not 0


def test_sigmoid_cross_entropy_matches_pytorchs_loss_away_from_the_edges():
    logits, labels = values(flow.float64), rng.uniform(0, 1, size=(4, 5))
    check(flow.nn.sigmoid_cross_entropy_with_logits,
          lambda l, z: torch.nn.functional.binary_cross_entropy_with_logits(z, l, reduction="none"),
          [labels, logits], flow.float64)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_moments(dtype, axes, keepdims):
    x = values(dtype, shape=(3, 4, 5)) + 10.0
    dims = list(range(3)) if axes is None else axes

    def theirs(t):
        if dims == []:
            return t * 1, t * 0
        return t.mean(dims, keepdim=keepdims), t.var(dims, correction=0, keepdim=keepdims)

    check(lambda b: flow.nn.moments(b, axes, keepdims), theirs, [x], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dims", [(0, -1), (1, -1), (1, 2), (-2, -1), (2, 2)])
def test_flatten(dtype, dims):
    x = values(dtype, shape=(2, 3, 4, 5))
    (out,), _ = check(lambda b: flow.flatten(b, *dims), lambda t: torch.flatten(t, *dims), [x], dtype)
    assert out.shape == torch.flatten(torch.tensor(x), *dims).shape


@pytest.mark.parametrize("dtype", FLOATS)
def test_identity(dtype):
    check(lambda b: flow.identity(b) * 3, lambda t: t * 3, [values(dtype)], dtype)


def test_identity_is_a_value_of_its_own():
    """OneFlow's identity is an op: its result takes a hint of its own while x keeps split(0)."""
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        x = x.with_distribute(flow.distribute.split(0))
        return flow.identity(x).with_distribute(flow.distribute.split(1)) * 2

    x = rng.normal(size=(4, 6)).astype(np.float32)
    np.testing.assert_array_equal(f(x), x * 2)


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64, flow.int32])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("on_off", [(1, 0), (0.9, 0.1), (-2, 3)])
def test_one_hot(dtype, axis, on_off):
    indices = np.array([[0, 3, 1], [2, 2, 4]], np.int64)
    on, off = on_off
    want = torch.nn.functional.one_hot(torch.tensor(indices), 5).numpy()
    want = np.moveaxis(np.where(want == 1, on, off), -1, axis).astype(dtype.np_dtype)

    @flow.global_function()
    def f(i: tp.Numpy.Placeholder((2, 3), dtype=flow.int64)) -> tp.Numpy:
        return flow.one_hot(i, 5, on_value=on, off_value=off, axis=axis, dtype=dtype)

    out = f(indices)
    assert out.dtype == dtype.np_dtype
    np.testing.assert_array_equal(out, want)


def test_one_hot_defaults_and_indices_out_of_range():
    """int32 indices, a float result; an index outside [0, depth) is a row of off_value (documented)."""

    @flow.global_function()
    def f(i: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        return flow.one_hot(i, 3)

    out = f(np.array([2, 0, 3, -1], np.int32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[0, 0, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize("dtype", FLOATS)
def test_one_hot_in_a_loss(dtype):
    """Gradients flow through the on/off values it multiplies; the indices have none."""
    indices = np.array([1, 0, 3], np.int32)
    check(lambda x, i: x * flow.one_hot(i, 4, 0.8, 0.05, dtype=dtype),
          lambda x, i: x * torch.nn.functional.one_hot(i.long(), 4).to(x.dtype).mul(0.75).add(0.05),
          [values(dtype, shape=(3, 4)), indices], dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", [((4, 6), 1, -1), ((2, 3, 4), 1, -1), ((2, 3, 4), -1, -1), ((2, 3, 4), 1, 1)])
def test_layer_norm_forward_and_gradient(dtype, case):
    shape, norm_axis, params_axis = case
    x = values(dtype, shape=shape) + 5.0
    normalized = shape[norm_axis % len(shape):]

    def theirs(t):  # gamma = 1, beta = 0, of shape[params_axis:], as the layer initializes them
        return torch.nn.functional.layer_norm(t, normalized, eps=1e-5)

    kwargs = dict(begin_norm_axis=norm_axis, begin_params_axis=params_axis)
    check(lambda b: flow.layers.layer_norm(b, **kwargs), theirs, [x], dtype)
    names = set(flow.get_all_variables())
    assert {"LayerNorm_0-gamma", "LayerNorm_0-beta"} <= names
    assert flow.get_all_variables()["LayerNorm_0-gamma"].numpy().shape == shape[params_axis:]


@pytest.mark.parametrize("devices", [1, 2])
def test_layer_norm_trains_as_pytorchs(devices):
    """Dense + layer_norm, 3 SGD steps with momentum, against torch.nn.Linear + LayerNorm; on 2 devices a split batch."""
    if devices > 1:
        flow.config.cpu_device_num(devices)
    data = np.random.default_rng(3)
    w0 = data.normal(size=(5, 4)).astype(np.float32)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((6, 4)), target: tp.Numpy.Placeholder((6, 5))) -> tp.Numpy:
        x = x.with_distribute(flow.distribute.split(0))
        hidden = flow.layers.dense(x, 5, name="fc")
        y = flow.layers.layer_norm(hidden, name="ln")
        loss = flow.math.reduce_mean(flow.math.square(y * flow.math.sigmoid(y) - target))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return y

    flow.load_variables({"fc-weight": w0})
    fc, ln = torch.nn.Linear(4, 5), torch.nn.LayerNorm(5, eps=1e-5)
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(w0))
        fc.bias.zero_()
    opt = torch.optim.SGD([*fc.parameters(), *ln.parameters()], lr=0.1, momentum=0.9)
    for _ in range(3):
        x = data.normal(size=(6, 4)).astype(np.float32)
        target = data.normal(size=(6, 5)).astype(np.float32)
        y = train(x, target)
        opt.zero_grad()
        expected = ln(fc(torch.tensor(x)))
        ((expected * torch.sigmoid(expected) - torch.tensor(target)) ** 2).mean().backward()
        opt.step()
        np.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    got = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    for name, param in [("ln-gamma", ln.weight), ("ln-beta", ln.bias), ("fc-weight", fc.weight), ("fc-bias", fc.bias)]:
        np.testing.assert_allclose(got[name], param.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got["ln-gamma"], 1.0) and not np.allclose(got["ln-beta"], 0.0)
    assert "ln-gamma-momentum" in got


@pytest.mark.parametrize(
    "body, message",
    [
        (lambda x, i: flow.math.clip_by_value(x), "min_value and max_value cannot both be None"),
        (lambda x, i: flow.math.clip_by_value(x, x), "must be numbers"),
        (lambda x, i: flow.nn.leaky_relu(i), "must be a floating-point Blob"),
        (lambda x, i: flow.nn.sigmoid_cross_entropy_with_logits(x[0], x), "one shape and dtype"),
        (lambda x, i: flow.flatten(x, 1, 0), "start_dim 1 comes after end_dim 0"),
        (lambda x, i: flow.flatten(x, 2), "start_dim: axis must be an int in"),
        (lambda x, i: flow.one_hot(x, 3), "indices must be an int32 or int64 Blob"),
        (lambda x, i: flow.one_hot(i, 0), "depth must be a positive int"),
        (lambda x, i: flow.one_hot(i, 3, axis=3), "axis must be an int in \\[-3, 3\\)"),
        (lambda x, i: flow.layers.layer_norm(x, begin_norm_axis=2), "begin_norm_axis 2 is out of range"),
        (lambda x, i: flow.math.reduce_variance(x, 5), "reduce_variance: axis 5 is out of range"),
        (lambda x, i: flow.nn.hardtanh(x, 1.0, -1.0), "min_val must be below max_val, got 1.0 and -1.0"),
        (lambda x, i: flow.nn.hardswish(i), "hardswish: x must be a floating-point Blob"),
        (lambda x, i: flow.nn.elu(x, alpha=x), "elu: alpha must be a number"),
        (lambda x, i: flow.nn.swish(x, beta="2"), "swish: beta must be a number"),
    ],
)
def test_bad_arguments_are_trace_errors(body, message):
    with pytest.raises(flow.TraceError, match=message):

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2, 3)), i: tp.Numpy.Placeholder((2, 3), dtype=flow.int32)) -> tp.Numpy:
            return body(x, i)


F = torch.nn.functional
LARGE = (1e30, -1e30, 80.0, -80.0)
# name -> (ours, PyTorch's, the points where it bends)
ACTIVATIONS = {
    "hardtanh": (lambda b: flow.nn.hardtanh(b, -1.5, 2.0), lambda t: F.hardtanh(t, -1.5, 2.0), (-1.5, 2.0)),
    "relu6": (flow.nn.relu6, F.relu6, (0.0, -0.0, 6.0)),
    # F.hardsigmoid's float64 backward scales by float32's 1/6 (3e-8 off): its own formula through relu6 instead
    "hardsigmoid": (flow.nn.hardsigmoid, lambda t: F.relu6(t + 3) / 6, (-3.0, 3.0)),
    "hardswish": (flow.nn.hardswish, F.hardswish, (-3.0, 3.0, 0.0)),
    "swish": (flow.nn.swish, F.silu, (0.0,)),
    "swish-beta": (lambda b: flow.nn.swish(b, beta=1.7), lambda t: t * torch.sigmoid(1.7 * t), (0.0,)),
    "mish": (flow.nn.mish, F.mish, (0.0, 20.0, -20.0)),
    "elu": (flow.nn.elu, F.elu, (0.0, -0.0, 1e-8, -1e-8)),
    "elu-alpha": (lambda b: flow.nn.elu(b, alpha=0.3), lambda t: F.elu(t, 0.3), (0.0, -1e-8)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_pytorch_at_their_kinks_and_far_out(dtype, name):
    """Forward and gradient at the kinks (OneFlow's and PyTorch's choice there) and at large |x| (finite)."""
    ours, theirs, kinks = ACTIVATIONS[name]
    x = values(dtype, *kinks, *LARGE)
    (out,), (grad,) = check(ours, theirs, [x], dtype)
    assert np.isfinite(out).all() and np.isfinite(grad).all()


@pytest.mark.parametrize(
    "name, want",
    [
        ("hardswish", [0.0, 1.0, 0.5, 1.0]),  # 0 at -3, 1 at 3
        ("hardsigmoid", [0.0, 0.0, 1 / 6, 0.0]),  # 0 at both bounds
        ("relu6", [0.0, 1.0, 0.0, 0.0]),  # 0 at 0 and at 6
        ("elu-alpha", [0.3 * np.exp(-3.0), 1.0, 0.3, 1.0]),  # alpha at 0
    ],
)
def test_activation_derivatives_at_the_kinks(name, want):
    """The derivatives PyTorch's autograd (and OneFlow's kernels) give at x = -3, 3, 0, 6, spelled out."""
    ours, theirs, _ = ACTIVATIONS[name]
    x = np.array([-3.0, 3.0, 0.0, 6.0])
    _, (grad,) = irflow_vjp(ours, [x], [np.ones(4)])
    _, (torch_grad,) = torch_vjp(theirs, [x], [np.ones(4)])
    np.testing.assert_allclose(grad, want, rtol=1e-15)
    np.testing.assert_allclose(torch_grad, want, rtol=1e-15)


def test_elu_keeps_its_digits_near_zero():
    """alpha * expm1(x): e**x - 1 in float32 gives 0 for x = -1e-8 (OneFlow's formula); PyTorch's expm1 does not."""
    (out,), _ = check(flow.nn.elu, F.elu, [np.array([-1e-8, -1e-30], np.float32)], flow.float32, atol=0)
    assert (out < 0).all()


def test_activations_train_as_pytorchs():
    """Dense + hardswish + elu + mish in the loss, 3 SGD steps with momentum, against torch.nn.Linear."""
    data = np.random.default_rng(5)
    w0 = data.normal(size=(5, 4)).astype(np.float32)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((6, 4)), target: tp.Numpy.Placeholder((6, 5))) -> tp.Numpy:
        h = flow.layers.dense(x, 5, name="fc")
        y = flow.nn.hardswish(h) + flow.nn.elu(h, 0.7) + flow.nn.mish(h) + flow.nn.relu6(h) + flow.nn.swish(h, 0.5)
        loss = flow.math.reduce_mean(flow.math.square(y - target))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return y

    flow.load_variables({"fc-weight": w0})
    fc = torch.nn.Linear(4, 5)
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(w0))
        fc.bias.zero_()
    opt = torch.optim.SGD(fc.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        x = (data.normal(size=(6, 4)) * 2).astype(np.float32)
        target = data.normal(size=(6, 5)).astype(np.float32)
        y = train(x, target)
        opt.zero_grad()
        h = fc(torch.tensor(x))
        expected = F.hardswish(h) + F.elu(h, 0.7) + F.mish(h) + F.relu6(h) + h * torch.sigmoid(0.5 * h)
        ((expected - torch.tensor(target)) ** 2).mean().backward()
        opt.step()
        np.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    got = flow.get_all_variables()
    np.testing.assert_allclose(got["fc-weight"].numpy(), fc.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["fc-bias"].numpy(), fc.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got["fc-weight"].numpy(), w0)
