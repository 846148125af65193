"""flow.nn's losses and functional normalizations, flow.smooth_l1_loss and the small flow.nn ops, against PyTorch.

Forward and gradient of each through test_composite_ops.py's `check` (a train job watching
the gradient of sum(out * cotangent), against PyTorch's autograd), at the edges too; then
training steps against PyTorch's optimizer, on one device and on two.
"""

import importlib.util
import pathlib
from types import SimpleNamespace
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)
F = torch.nn.functional

_spec = importlib.util.spec_from_file_location(
    "composite_checks", pathlib.Path(__file__).with_name("test_composite_ops.py")
)
_checks = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(_checks)  # type: ignore[union-attr]
irflow_vjp, values, FLOATS = _checks.irflow_vjp, _checks.values, _checks.FLOATS


def check(*args, **kwargs):
    """test_composite_ops.py's `check` in a session of its own: its train job steps its zero shifts away."""
    flow.clear_default_session()
    return _checks.check(*args, **kwargs)

REDUCTIONS = ["none", "mean", "sum"]
rng = np.random.default_rng(11)


def probabilities(dtype, shape=(4, 5), low=0.02):
    return rng.uniform(low, 1 - low, size=shape).astype(dtype.np_dtype)


def signs(dtype, shape=(4, 5)):
    return rng.choice([-1.0, 1.0], size=shape).astype(dtype.np_dtype)


def torch_batch_norm(x, mean, variance, offset, scale, eps, axis):
    """(x - mean) / sqrt(variance + eps) * scale + offset along `axis`, written out (F.batch_norm passes no
    gradient to the statistics)."""
    shape = [x.shape[axis] if a == axis % x.dim() else 1 for a in range(x.dim())]

    def view(t):
        return None if t is None else t.reshape(shape)

    out = (x - view(mean)) / torch.sqrt(view(variance) + eps)
    out = out if scale is None else out * view(scale)
    return out if offset is None else out + view(offset)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [1, -1, 0])
@pytest.mark.parametrize("affine", ["both", "scale", "offset", "none"])
def test_batch_normalization(dtype, axis, affine):
    x = values(dtype, shape=(3, 4, 5)) + 2.0
    channels = x.shape[axis]
    mean, offset, scale = (values(dtype, shape=(channels,)) for _ in range(3))
    variance = probabilities(dtype, shape=(channels,)) * 3
    given = {label: array for label, array in (("offset", offset), ("scale", scale)) if affine in (label, "both")}
    use_scale, use_offset = "scale" in given, "offset" in given

    def ours(a, m, v, *affines):
        kw = dict(zip(given, affines))
        return flow.nn.batch_normalization(a, m, v, kw.get("offset"), kw.get("scale"), 1e-3, axis)

    def theirs(a, m, v, *affines):
        kw = dict(zip(given, affines))
        return torch_batch_norm(a, m, v, kw.get("offset"), kw.get("scale"), 1e-3, axis)

    (out,), _ = check(ours, theirs, [x, mean, variance, *given.values()], dtype)
    if axis == 1:  # PyTorch's own batch_norm, forward
        want = F.batch_norm(torch.tensor(x), torch.tensor(mean), torch.tensor(variance),
                            torch.tensor(scale) if use_scale else None, torch.tensor(offset) if use_offset else None,
                            training=False, eps=1e-3)  # fmt: skip
        np.testing.assert_allclose(out, want.numpy(), **_checks.tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_normalization_takes_statistics_of_xs_rank(dtype):
    """OneFlow's own example: the statistics of flow.nn.moments, kept 1-D, along axis 0."""
    x = values(dtype, shape=(2, 6))
    check(lambda a: flow.nn.batch_normalization(a, *flow.nn.moments(a, [1], keepdims=True), axis=0),
          lambda t: (t - t.mean(1, keepdim=True)) / torch.sqrt(t.var(1, correction=0, keepdim=True) + 1e-5),
          [x], dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", [((4, 6), 1, -1), ((2, 3, 4), 1, 1), ((2, 3, 4), -1, -1), ((2, 3, 4), 2, 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, case, affine):
    shape, norm_axis, params_axis = case
    x = values(dtype, shape=shape) + 5.0
    params = shape[params_axis:]
    gamma, beta = values(dtype, shape=params), values(dtype, shape=params)

    def ours(a, *affine):
        return flow.nn.layer_norm(a, *affine, begin_norm_axis=norm_axis, begin_params_axis=params_axis, epsilon=1e-4)

    def theirs(a, *affine):
        out = F.layer_norm(a, shape[norm_axis % len(shape):], eps=1e-4)
        return out * affine[0] + affine[1] if affine else out

    check(ours, theirs, [x, gamma, beta] if affine else [x], dtype, atol=1e-5 if dtype is flow.float32 else None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_bias_add_gelu_and_sparse_cross_entropy(dtype):
    x, bias = values(dtype, shape=(4, 3, 2)), values(dtype, shape=(3,))
    check(flow.nn.fused_bias_add_gelu, lambda a, b: F.gelu(a + b.reshape(3, 1)), [x, bias], dtype)
    check(lambda a, b: flow.nn.fused_bias_add_gelu(a, b, "NHWC"), lambda a, b: F.gelu(a + b),
          [values(dtype, shape=(4, 3)), bias], dtype)  # fmt: skip
    labels = np.array([0, 2, 1, 2], np.int32)
    check(lambda p, i: flow.nn.sparse_cross_entropy(i, p),
          lambda p, i: F.nll_loss(torch.log(p), i.long(), reduction="none"),
          [probabilities(dtype, shape=(4, 3)), labels], dtype)  # fmt: skip


def test_logsoftmax_and_distributed_sparse_softmax_cross_entropy_are_oneflows_other_names():
    logits = values(flow.float64, shape=(4, 5))
    labels = np.array([0, 4, 2, 1], np.int64)
    check(lambda z: flow.nn.logsoftmax(z, axis=0), lambda t: F.log_softmax(t, 0), [logits], flow.float64)
    check(lambda z, i: flow.nn.distributed_sparse_softmax_cross_entropy_with_logits(i, z),
          lambda z, i: F.cross_entropy(z, i, reduction="none"), [logits, labels], flow.float64)  # fmt: skip


def test_random_mask_like_and_fused_bias_add_dropout():
    """The mask is int8 0/1, seeded (the same twice) and about 1 - rate of ones; the fused dropout is
    dropout(bias_add(...)): zero where its mask drops, (x + b) / (1 - rate) elsewhere."""

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((200, 50))) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(50,), initializer=flow.constant_initializer(0.5))
        out = flow.nn.fused_bias_add_dropout(x, w, data_format="NHWC", rate=0.25, seed=3)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(out)
        return flow.nn.random_mask_like(x, 0.3, seed=5), flow.nn.random_mask_like(x, 0.3, seed=5), out

    x = np.ones((200, 50), np.float32)
    first, second, out = job(x)
    assert first.dtype == np.int8 and set(np.unique(first)) == {0, 1}
    np.testing.assert_array_equal(first, second)
    assert abs(first.mean() - 0.7) < 0.02
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(out[kept], 1.5 / 0.75)


def test_random_mask_like_is_random_in_predict_jobs_too():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((100, 10), dtype=flow.int32)) -> tp.Numpy:
        return flow.nn.random_mask_like(x, 0.5)

    mask = job(np.zeros((100, 10), np.int32))
    assert mask.shape == (100, 10) and 0.4 < mask.mean() < 0.6


BAD = [
    (lambda x, i: flow.nn.batch_normalization(x, x[:, 0], x[0]), r"mean must be a Blob of shape \(3,\) \(axis 1 of x"),
    (lambda x, i: flow.nn.batch_normalization(x, x[0], x[0], axis=2), r"axis must be an int in \[-2, 2\), got 2"),
    (lambda x, i: flow.nn.layer_norm(x, gamma=x), r"layer_norm: gamma must be None or a Blob of shape \(3,\)"),
    (lambda x, i: flow.nn.layer_norm(x, begin_norm_axis=2), "layer_norm: begin_norm_axis 2 is out of range"),
    (lambda x, i: flow.nn.sparse_cross_entropy(i, x), r"sparse_cross_entropy: labels must be a Blob of shape \(2,\)"),
    (lambda x, i: flow.nn.random_mask_like(x, 1.0), r"random_mask_like: rate must be in \[0, 1\), got 1.0"),
    (lambda x, i: flow.nn.fused_bias_add_dropout(x, x[0], rate=-0.5), r"dropout: rate must be in \[0, 1\)"),
]


@pytest.mark.parametrize("body, message", BAD)
def test_bad_arguments_are_trace_errors_at_the_users_line(body, message):
    with pytest.raises(flow.TraceError, match=message) as info:

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2, 3)), i: tp.Numpy.Placeholder((2, 3), dtype=flow.int32)) -> tp.Numpy:
            return body(x, i)

    assert (info.value.location.file, info.value.location.line) == (__file__, body.__code__.co_firstlineno)

