"""flow.nn's losses and functional normalizations, flow.smooth_l1_loss and the small flow.nn ops, against PyTorch.

Forward and gradient of each through test_composite_ops.py's `check` (a train job watching
the gradient of sum(out * cotangent), against PyTorch's autograd), at the edges too; then
training steps against PyTorch's optimizer, on one device and on two.
"""

from types import SimpleNamespace
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)
F = torch.nn.functional

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
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


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_and_mse_losses(dtype, reduction):
    x, y = values(dtype), values(dtype)
    x.flat[:3] = y.flat[:3]  # ties: the L1 gradient there is 0, as PyTorch's
    (_,), (grad, _) = check(lambda a, b: flow.nn.L1Loss(a, b, reduction=reduction),
                            lambda a, b: F.l1_loss(a, b, reduction=reduction), [x, y], dtype)  # fmt: skip
    assert (grad.flat[:3] == 0).all()
    check(lambda a, b: flow.nn.MSELoss(a, b, reduction), lambda a, b: F.mse_loss(a, b, reduction=reduction),
          [x, y], dtype)  # fmt: skip


def constant(array):
    """(ours, theirs): `array` as a constant of the job and as a tensor PyTorch differentiates nothing for.

    PyTorch's binary cross entropies take no gradient for their weights; None gives None to both.
    """
    if array is None:
        return (lambda: None), None
    return (lambda: flow.constant(array)), torch.tensor(array)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_loss(dtype, reduction, weighted):
    p, t = probabilities(dtype), probabilities(dtype, low=0.0)
    our_weight, their_weight = constant(probabilities(dtype) if weighted else None)
    check(lambda a, b: flow.nn.BCELoss(a, b, our_weight(), reduction),
          lambda a, b: F.binary_cross_entropy(a, b, their_weight, reduction=reduction),
          [p, t], dtype, atol=1e-5 if dtype is flow.float32 else None)  # fmt: skip


def clamped_bce_gradient(p, t):
    """d/dp of -(t * max(log p, -100) + (1 - t) * max(log(1 - p), -100)), by hand: a clamped log passes 0."""
    q = 1 - p
    near = np.where(p > np.exp(-100), -t / np.where(p > 0, p, 1), 0.0)
    far = np.where(q > np.exp(-100), (1 - t) / np.where(q > 0, q, 1), 0.0)
    return near + far


@pytest.mark.parametrize("dtype", FLOATS)
def test_bce_loss_at_probabilities_0_and_1_is_finite_as_pytorchs(dtype):
    """The loss is PyTorch's (each log clamped at -100); the gradient the clamped loss' derivative, finite."""
    p = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1e-30, 0.5], dtype.np_dtype)
    t = np.array([0.0, 1.0, 0.0, 1.0, 0.3, 0.7, 1.0, 0.5], dtype.np_dtype)
    want = F.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="none").numpy()
    (got,), (grad, _) = irflow_vjp(lambda a, b: flow.nn.BCELoss(a, b, reduction="none"), [p, t], [np.ones_like(p)])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[1] == got[2] == 100.0 and got[0] == got[3] == 0.0
    np.testing.assert_allclose(grad, clamped_bce_gradient(p.astype(np.float64), t), rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weights", ["none", "weight", "pos_weight", "both"])
def test_bce_with_logits_loss(dtype, reduction, weights):
    x, t = values(dtype), probabilities(dtype, low=0.0)
    pos_weight = rng.uniform(0.5, 3.0, size=(5,)).astype(dtype.np_dtype)
    our_w, their_w = constant(probabilities(dtype) if weights in ("weight", "both") else None)
    our_pw, their_pw = constant(pos_weight if weights in ("pos_weight", "both") else None)
    check(lambda a, b: flow.nn.BCEWithLogitsLoss(a, b, our_w(), our_pw(), reduction),
          lambda a, b: F.binary_cross_entropy_with_logits(a, b, their_w, reduction=reduction, pos_weight=their_pw),
          [x, t], dtype, atol=1e-5 if dtype is flow.float32 else None)  # fmt: skip


def bce_with_pos_weight_oracle(x, t, pw):
    """pw * t * softplus(-x) + (1 - t) * softplus(x) in float64, log1p(exp(.)) throughout: nothing cancels."""

    def softplus(v):
        return F.softplus(v, threshold=1000)

    return pw * t * softplus(-x) + (1 - t) * softplus(x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_bce_with_logits_loss_is_stable_for_large_logits(dtype):
    x = values(dtype, 100.0, -100.0, 100.0, -100.0, 1e4, -1e4, 30.0, -30.0, 0.0, shape=(2, 5))
    t = np.array([[0.0, 1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.5, 0.3]], dtype.np_dtype)
    pw = np.array([2.0, 0.5, 1.0, 3.0, 1.5], dtype.np_dtype)
    tiny = 1e-43 if dtype is flow.float32 else 0.0  # float32's e**-100 is subnormal: a few of its units apart
    (loss,), _ = check(lambda a, b, c: flow.nn.BCEWithLogitsLoss(a, b, pos_weight=c, reduction="none"),
                       bce_with_pos_weight_oracle, [x, t, pw], dtype, atol=tiny, oracle_dtype=torch.float64,
                       grad_atol=None)  # fmt: skip
    assert np.isfinite(loss).all() and (loss >= 0).all()
    assert loss[0, 2] > 0 and loss[0, 3] > 0  # e**-100, not 0
    assert (loss[0, 0], loss[0, 1]) == (100.0, 50.0)  # softplus(100) and pos_weight 0.5 * softplus(100)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")  # OneFlow's 'mean' is PyTorch's
def test_kl_div_loss(dtype, reduction, log_target):
    x = np.log(probabilities(dtype))
    t = np.log(probabilities(dtype)) if log_target else probabilities(dtype)
    check(lambda a, b: flow.nn.KLDivLoss(a, b, log_target, reduction),
          lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target), [x, t], dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
def test_kl_div_loss_is_0_where_the_target_is_not_positive(dtype):
    """PyTorch gives 0 (and a gradient of 0 for the input) at target 0; OneFlow documents 0 below 0 as well."""
    x = np.log(probabilities(dtype, shape=(6,)))
    t = np.array([0.0, 0.0, -0.3, -2.0, 0.4, 0.6], dtype.np_dtype)
    (loss,), (dx, dt) = irflow_vjp(lambda a, b: flow.nn.KLDivLoss(a, b, reduction="none"), [x, t], [np.ones_like(x)])
    np.testing.assert_array_equal(F.kl_div(torch.tensor(x[:2]), torch.tensor(t[:2]), reduction="none"), 0.0)
    np.testing.assert_array_equal(loss[:4], 0.0)
    np.testing.assert_allclose(loss[4:], t[4:] * (np.log(t[4:]) - x[4:]), rtol=1e-6)
    np.testing.assert_array_equal(dx[:4], 0.0)
    assert np.isfinite(dt).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_loss(dtype, reduction):
    x1, x2, y = values(dtype), values(dtype), signs(dtype)
    x2.flat[:2] = np.round(x2.flat[:2] * 8) / 8  # so that x1 - x2 is exactly 0.5 * y
    x1.flat[:2] = x2.flat[:2] + 0.5 * y.flat[:2]  # at the bound (margin 0.5): the gradient passes, as PyTorch's
    (_,), (grad, _, _) = check(lambda a, b, c: flow.nn.MarginRankingLoss(a, b, c, 0.5, reduction),
                               lambda a, b, c: F.margin_ranking_loss(a, b, c, 0.5, reduction=reduction),
                               [x1, x2, y], dtype)  # fmt: skip
    assert (grad.flat[:2] != 0).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p, swap", [(2.0, False), (1.0, False), (3.0, False), (2.0, True), (1.5, True)])
def test_triplet_margin_loss(dtype, reduction, p, swap):
    a, pos, neg = values(dtype, shape=(6, 4)), values(dtype, shape=(6, 4)), values(dtype, shape=(6, 4))
    check(lambda *b: flow.nn.TripletMarginLoss(*b, margin=2.0, p=p, eps=1e-6, swap=swap, reduction=reduction),
          lambda *t: F.triplet_margin_loss(*t, margin=2.0, p=p, eps=1e-6, swap=swap, reduction=reduction),
          [a, pos, neg], dtype, atol=1e-5 if dtype is flow.float32 else None)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.5, 0.0])
def test_smooth_l1_loss(dtype, beta):
    x, y = values(dtype), values(dtype)
    y.flat[:4] = x.flat[:4] + np.array([beta, -beta, 0.0, beta / 2])  # both bounds, a tie, inside
    (_,), (grad, _) = check(lambda a, b: flow.smooth_l1_loss(a, b, beta),
                            lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=beta), [x, y], dtype)  # fmt: skip
    assert np.isfinite(grad).all() and grad.flat[2] == 0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m1, m2, m3", [(1.0, 0.5, 0.0), (2.0, 0.0, 0.0), (1.0, 0.0, 0.35), (1.0, 0.3, 0.2)])
def test_combined_margin_loss_changes_the_label_entries_only(dtype, m1, m2, m3):
    cosines = np.tanh(values(dtype, shape=(5, 6))) * dtype.np_dtype.type(0.9)  # away from +-1: 1/sin(theta) stays small
    cosines[1, 0] = 1.0  # an entry at a bound off the label: its gradient is dy, not NaN
    label = np.array([2, 1, 5, 0, 9], np.int64)  # 9 is outside the classes: that row stays as it is

    def theirs(x, lab):
        hit = F.one_hot(lab.clamp(max=5), 6).bool() & (lab < 6)[:, None]
        theta = torch.acos(torch.where(hit, x, torch.zeros_like(x)))
        return torch.where(hit, torch.cos(theta * m1 + m2) - m3, x)

    (out,), (grad, _) = check(lambda x, lab: flow.combined_margin_loss(x, lab, m1, m2, m3), theirs, [cosines, label],
                              dtype)  # fmt: skip
    np.testing.assert_array_equal(out[4], cosines[4])
    assert np.isfinite(grad).all()
    theta = np.arccos(cosines[0, 2].astype(np.float64))
    np.testing.assert_allclose(out[0, 2], np.cos(m1 * theta + m2) - m3, rtol=1e-5)


def test_combined_margin_loss_refuses_other_shapes_at_the_users_line():
    with pytest.raises(flow.TraceError, match=r"test_losses.py:\d+.*flow.combined_margin_loss: label must be a Blob of "
                                              r"shape \(5,\)"):  # fmt: skip

        @flow.global_function()
        def job(x: tp.Numpy.Placeholder((5, 6)), label: tp.Numpy.Placeholder((6,), dtype=flow.int32)) -> tp.Numpy:
            return flow.combined_margin_loss(x, label, m2=0.5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("alpha", [1.0, 0.125])
def test_fused_self_attention_query_mul_key_and_value(dtype, alpha):
    x = values(dtype, shape=(5, 2, 2 * 3 * 4))  # (seq, batch, heads x (q, k, v) x head_size)

    def theirs(t):
        q, k, v = t.reshape(5, 2, 2, 3, 4).permute(3, 1, 2, 0, 4)  # each (batch, heads, seq, head_size)
        return alpha * q @ k.transpose(-1, -2), v

    check(lambda b: flow.nn.fused_self_attention_query_mul_key_and_value(b, 4, alpha), theirs, [x], dtype)
    with pytest.raises(flow.TraceError, match="head_size must be a positive int dividing x's hidden size 24"):
        check(lambda b: flow.nn.fused_self_attention_query_mul_key_and_value(b, 5), theirs, [x], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("begin", [1, -1])
def test_the_explicit_layer_norm_gradients_are_pytorchs(dtype, begin):
    """layers.layer_norm_grad from the statistics, and layers.layer_norm_param_grad, against torch's backward."""
    x, dy = values(dtype, shape=(3, 4, 5)), values(dtype, shape=(3, 4, 5))
    gamma = values(dtype, shape=(4, 5)[begin - 1 if begin > 0 else 1:])
    normalized = tuple(range(begin % 3, 3))
    mean = x.mean(axis=normalized)
    inv = (1 / np.sqrt(x.var(axis=normalized) + 1e-5)).astype(x.dtype)
    norm = (x - mean.reshape(mean.shape + (1,) * len(normalized))) * inv.reshape(inv.shape + (1,) * len(normalized))

    @flow.global_function()
    def grads(d: tp.Numpy.Placeholder(x.shape, dtype=dtype), a: tp.Numpy.Placeholder(x.shape, dtype=dtype),
              m: tp.Numpy.Placeholder(mean.shape, dtype=dtype), iv: tp.Numpy.Placeholder(inv.shape, dtype=dtype),
              n: tp.Numpy.Placeholder(x.shape, dtype=dtype), g: tp.Numpy.Placeholder(gamma.shape, dtype=dtype)
              ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:  # fmt: skip
        return (flow.layers.layer_norm_grad(d, a, m, iv, begin_norm_axis=begin),
                *flow.layers.layer_norm_param_grad(d, n, g, begin_params_axis=begin))  # fmt: skip

    dx, dnorm, dbeta, dgamma = grads(dy, x, mean, inv, norm, gamma)
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    F.layer_norm(t, x.shape[begin % 3:], eps=1e-5).backward(torch.tensor(dy, dtype=torch.float64))
    tolerance = dict(rtol=1e-4, atol=1e-5) if dtype is flow.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx, t.grad.numpy(), **tolerance)
    leading = tuple(range(begin % 3))
    np.testing.assert_allclose(dnorm, dy * gamma, **tolerance)
    np.testing.assert_allclose(dbeta, dy.sum(axis=leading), **tolerance)
    np.testing.assert_allclose(dgamma, (dy * norm).sum(axis=leading), **tolerance)


def test_smooth_l1_loss_is_oneflows_example():
    @flow.global_function()
    def job(prediction: tp.Numpy.Placeholder((5,)), label: tp.Numpy.Placeholder((5,))) -> tp.Numpy:
        return flow.smooth_l1_loss(prediction=prediction, label=label)

    out = job(np.array([0.1, 0.4, 0.3, 0.5, 0.9], np.float32), np.array([0.3, 0.9, 2.5, 0.4, 0.3], np.float32))
    np.testing.assert_allclose(out, [0.02, 0.125, 1.7, 0.005, 0.18], rtol=1e-6)


DATA = {"x": (8, 4), "target": (8, 5), "labels": (8, 5), "sign": (8,), "pos": (8, 5), "neg": (8, 5), "probs": (8, 5)}


def batch(data):
    arrays = {name: data.normal(size=shape).astype(np.float32) for name, shape in DATA.items()}
    arrays["labels"] = data.uniform(0, 1, size=DATA["labels"]).astype(np.float32)
    arrays["sign"] = np.sign(arrays["sign"])
    arrays["probs"] = np.exp(arrays["probs"]) / np.exp(arrays["probs"]).sum(1, keepdims=True)
    return arrays


def regression_losses(nn, y, d, p):
    """MSE + L1 + smooth L1 + BCE with logits (weight, pos_weight) + BCE: `nn` is flow.nn or PyTorch's functions."""
    return (nn.mse(y, d["target"]) + nn.l1(y, d["target"], "sum") * 0.1 + nn.smooth_l1(y, d["target"], 0.5)
            + nn.bce_logits(y, d["labels"], p["weight"], p["pos_weight"]) + nn.bce(nn.sigmoid(y), d["labels"]) * 0.5)


def ranking_losses(nn, y, d, p):
    """batch_normalization with the batch's moments, layer_norm, then KL divergence + margin ranking + triplet."""
    z = nn.batch_norm(y, p["bn-gamma"], p["bn-beta"])
    z = nn.layer_norm(z, p["ln-gamma"], p["ln-beta"])
    return (nn.kl(nn.log_softmax(z), d["probs"]) + nn.margin_ranking(z[:, 0], z[:, 1], d["sign"])
            + nn.triplet(z, d["pos"], d["neg"]))


def our_batch_norm(a, gamma, beta):
    mean, variance = flow.nn.moments(a, [0])
    return flow.nn.batch_normalization(a, mean, variance, beta, gamma, 1e-3, axis=1)


OURS = SimpleNamespace(  # the losses through irflow's API
    mse=flow.nn.MSELoss,
    sigmoid=flow.math.sigmoid,
    log_softmax=flow.nn.logsoftmax,
    l1=lambda a, b, reduction: flow.nn.L1Loss(a, b, reduction),
    smooth_l1=lambda a, b, beta: flow.math.reduce_mean(flow.smooth_l1_loss(a, b, beta)),
    bce_logits=lambda a, b, w, pw: flow.nn.BCEWithLogitsLoss(a, b, w, pw),
    bce=lambda a, b: flow.nn.BCELoss(a, b, reduction="sum"),
    kl=lambda a, b: flow.nn.KLDivLoss(a, b, reduction="sum"),
    margin_ranking=lambda a, b, s: flow.nn.MarginRankingLoss(a, b, s, margin=0.2),
    triplet=lambda a, b, c: flow.nn.TripletMarginLoss(a, b, c, margin=1.5, p=1.0),
    layer_norm=lambda a, g, b: flow.nn.layer_norm(a, g, b, epsilon=1e-3),
    batch_norm=our_batch_norm,
)
THEIRS = SimpleNamespace(  # the same through PyTorch's
    mse=F.mse_loss,
    sigmoid=torch.sigmoid,
    log_softmax=lambda t: F.log_softmax(t, -1),
    l1=lambda a, b, reduction: F.l1_loss(a, b, reduction=reduction),
    smooth_l1=lambda a, b, beta: F.smooth_l1_loss(a, b, beta=beta),
    bce_logits=lambda a, b, w, pw: F.binary_cross_entropy_with_logits(a, b, w, pos_weight=pw),
    bce=lambda a, b: F.binary_cross_entropy(a, b, reduction="sum"),
    kl=lambda a, b: F.kl_div(a, b, reduction="sum"),
    margin_ranking=lambda a, b, s: F.margin_ranking_loss(a, b, s, margin=0.2),
    triplet=lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=1.5, p=1.0),
    layer_norm=lambda a, g, b: F.layer_norm(a, (5,), g, b, eps=1e-3),
    batch_norm=lambda a, gamma, beta: F.batch_norm(a, None, None, gamma, beta, training=True, eps=1e-3),
)
CONSTANTS = {"weight": rng.uniform(0.5, 2, size=(8, 5)).astype(np.float32),
             "pos_weight": rng.uniform(0.5, 3, size=(5,)).astype(np.float32)}  # fmt: skip
PARAMETERS = {"bn-gamma": 1.0, "bn-beta": 0.0, "ln-gamma": 1.0, "ln-beta": 0.0}


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("losses", [regression_losses, ranking_losses])
def test_losses_train_as_pytorchs(devices, losses):
    """Dense + the losses, 3 SGD steps with momentum, against torch.nn.Linear; on 2 devices a split batch."""
    if devices > 1:
        flow.config.cpu_device_num(devices)
    data = np.random.default_rng(4)
    w0 = data.normal(size=(5, 4)).astype(np.float32)
    rows, vector = tp.Numpy.Placeholder((8, 5)), tp.Numpy.Placeholder((8,))

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 4)), target: rows, labels: rows, sign: vector, pos: rows, neg: rows,
              probs: rows) -> tp.Numpy:  # fmt: skip
        d = dict(x=x, target=target, labels=labels, sign=sign, pos=pos, neg=neg, probs=probs)
        y = flow.layers.dense(d["x"].with_distribute(flow.distribute.split(0)), 5, name="fc")
        p = {name: flow.constant(array) for name, array in CONSTANTS.items()}
        p.update({name: flow.get_variable(name, shape=(5,), initializer=flow.constant_initializer(value))
                  for name, value in PARAMETERS.items()})  # fmt: skip
        loss = losses(OURS, y, d, p)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return loss

    flow.load_variables({"fc-weight": w0})
    fc = torch.nn.Linear(4, 5)
    params = {name: torch.nn.Parameter(torch.full((5,), value)) for name, value in PARAMETERS.items()}
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(w0))
        fc.bias.zero_()
    opt = torch.optim.SGD([*fc.parameters(), *params.values()], lr=0.05, momentum=0.9)
    for _ in range(3):
        arrays = batch(data)
        loss = train(*arrays.values())
        opt.zero_grad()
        d = {name: torch.tensor(a) for name, a in arrays.items()}
        expected = losses(THEIRS, fc(d["x"]), d, {**{n: torch.tensor(a) for n, a in CONSTANTS.items()}, **params})
        expected.backward()
        opt.step()
        np.testing.assert_allclose(loss, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    got = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    want = {"fc-weight": fc.weight, "fc-bias": fc.bias, **params}
    for name in ["fc-weight", "fc-bias", *(PARAMETERS if losses is ranking_losses else [])]:
        np.testing.assert_allclose(got[name], want[name].detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(got["fc-weight"], w0)


BAD = [
    (lambda x, i: flow.nn.L1Loss(x, x, reduction="avg"), "L1Loss: reduction must be one of 'none', 'mean', 'sum'"),
    (lambda x, i: flow.nn.MSELoss(x, x[0]), r"MSELoss: target must be a Blob of input's shape \(2, 3\)"),
    (lambda x, i: flow.nn.BCELoss(x, x, x[0]), "BCELoss: weight must be a Blob of input's shape"),
    (lambda x, i: flow.nn.BCELoss(i, i), "BCELoss: input must be a floating-point Blob"),
    (lambda x, i: flow.nn.BCEWithLogitsLoss(x, x, pos_weight=x), r"pos_weight must be a Blob of shape \(3,\)"),
    (lambda x, i: flow.nn.BCEWithLogitsLoss(x, x, reduction=None), "reduction must be one of"),
    (lambda x, i: flow.nn.MSELoss(x, x, x), "MSELoss: reduction must be one of .* got Blob\\(name="),
    (lambda x, i: flow.nn.KLDivLoss(x, x, reduction="batchmean"), "KLDivLoss: reduction must be one of"),
    (lambda x, i: flow.nn.MarginRankingLoss(x, x[0], x), "MarginRankingLoss: input2 must be a Blob of input1's shape"),
    (lambda x, i: flow.nn.MarginRankingLoss(x, x, i), "MarginRankingLoss: target must be a floating-point Blob"),
    (lambda x, i: flow.nn.TripletMarginLoss(x, x, x[0]), "negative must be a Blob of anchor's shape"),
    (lambda x, i: flow.nn.TripletMarginLoss(x[0], x[0], x[0]), r"must be \(batch, features\), got shape \(3,\)"),
    (lambda x, i: flow.nn.TripletMarginLoss(x, x, x, p=0), "TripletMarginLoss: p must be positive, got 0.0"),
    (lambda x, i: flow.smooth_l1_loss(x, x, beta=-1.0), "smooth_l1_loss: beta must be a number >= 0, got -1.0"),
    (lambda x, i: flow.smooth_l1_loss(x, x[0]), "prediction and label must be floating-point Blobs of one"),
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

