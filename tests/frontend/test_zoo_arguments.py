"""The argument forms OneFlow-Benchmark's models and training scripts use, each against PyTorch or numpy:
forward values, and variables after a few train steps where the op takes part in a loss."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle

SGD = flow.optimizer.SGD


def constant_sgd(lr: float) -> flow.optimizer.SGD:
    return SGD(flow.optimizer.PiecewiseConstantScheduler([], [lr]), momentum=0)


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_nn_conv2d_with_bias_positionally_trains_as_pytorch(data_format):
    """alexnet/vgg/inception: flow.nn.conv2d(input, weight, strides, padding, None, data_format, dilation_rate),
    OneFlow's `bias` fifth; here the bias is a variable given there too."""
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=(2, 3, 6, 6)).astype(np.float32)
    w0 = rng.normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3
    b0 = rng.normal(size=(4,)).astype(np.float32)
    last = data_format == "NHWC"
    x_in = x0.transpose(0, 2, 3, 1) if last else x0
    w_in = w0.transpose(0, 2, 3, 1) if last else w0

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(x_in.shape)) -> tp.Numpy:
        w = flow.get_variable("conv-weight", shape=w_in.shape, initializer=flow.zeros_initializer())
        b = flow.get_variable("conv-bias", shape=(4,), initializer=flow.zeros_initializer())
        y = flow.nn.conv2d(x, w, 2, "SAME", b, data_format, 1, name="conv")
        constant_sgd(0.1).minimize(flow.math.reduce_mean(flow.math.square(y)))
        return y

    flow.load_variables({"conv-weight": w_in, "conv-bias": b0})
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = torch.optim.SGD([tw, tb], lr=0.1)
    for _ in range(3):
        y = train(x_in)
        opt.zero_grad()
        # OneFlow's SAME for 6 -> 3 with k=3, s=2: the one pad at the start (SAME_LOWER)
        expected = torch.nn.functional.conv2d(torch.nn.functional.pad(torch.tensor(x0), (1, 0, 1, 0)), tw, tb, stride=2)
        (expected**2).mean().backward()
        opt.step()
        got = y.transpose(0, 3, 1, 2) if last else y
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    values = flow.get_all_variables()
    w = values["conv-weight"].numpy()
    np.testing.assert_allclose(w.transpose(0, 3, 1, 2) if last else w, tw.detach().numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(values["conv-bias"].numpy(), tb.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_nn_conv2d_bias_must_have_one_value_per_output_channel():
    with pytest.raises(flow.TraceError, match="bias must be 1-D with one value per output channel"):

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((1, 2, 4, 4)), w: tp.Numpy.Placeholder((3, 2, 1, 1)),
              b: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return flow.nn.conv2d(x, w, 1, "VALID", b)


def test_gather_with_batch_dims_is_batch_gather_and_trains_as_pytorch():
    """BERT's masked-LM positions: flow.gather(params=seq (b, s, h), indices=positions (b, p), axis=2,
    batch_dims=2) takes seq[i, positions[i, j], :], as OneFlow's batch_gather reads it (TensorFlow's reading
    of batch_dims=2 has no index axis left); repeated positions add up their gradients (torch.gather's
    scatter-add backward)."""
    rng = np.random.default_rng(3)
    seq0 = rng.normal(size=(2, 5, 3)).astype(np.float32)
    positions = np.array([[4, 0, 4], [1, 2, 3]], np.int32)
    scale = rng.normal(size=(2, 3, 3)).astype(np.float32)

    @flow.global_function(type="train")
    def train(pos: tp.Numpy.Placeholder((2, 3), dtype=flow.int32)) -> tp.Numpy:
        seq = flow.get_variable("seq", shape=(2, 5, 3), initializer=flow.zeros_initializer())
        picked = flow.gather(params=seq, indices=pos, axis=2, batch_dims=2)
        constant_sgd(0.5).minimize(flow.math.reduce_sum(flow.math.square(picked) * flow.constant(scale)))
        return picked

    flow.load_variables({"seq": seq0})
    seq = torch.tensor(seq0, requires_grad=True)
    opt = torch.optim.SGD([seq], lr=0.5)
    index = torch.tensor(positions, dtype=torch.int64)[..., None].expand(2, 3, 3)
    for _ in range(3):
        got = train(positions)
        opt.zero_grad()
        expected = torch.gather(seq, 1, index)
        (expected**2 * torch.tensor(scale)).sum().backward()
        opt.step()
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(flow.get_all_variables()["seq"].numpy(), seq.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_batch_gather_refuses_an_index_past_its_own_row():
    """Each index is checked against its own entry's row count: 5 of a 5-long row is an error, not the next row."""

    @flow.global_function()
    def pick(seq: tp.Numpy.Placeholder((2, 5, 3)), pos: tp.Numpy.Placeholder((2, 1), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(seq, pos, batch_dims=1)

    seq = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    np.testing.assert_array_equal(pick(seq, np.array([[2], [4]], np.int32)), seq[[0, 1], [2, 4]][:, None])
    with pytest.raises(flow.ExecutionError, match="index 5"):
        pick(seq, np.array([[5], [0]], np.int32))


def test_concat_values_and_identity_n():
    """inception: flow.concat(values=[...], axis=1, name=...); Wide&Deep: flow.identity_n([...])."""

    @flow.global_function()
    def f(a: tp.Numpy.Placeholder((2, 1)), b: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        x, y = flow.identity_n([a, b])
        return flow.concat(values=[x, y], axis=1, name="concat")

    a, b = np.ones((2, 1), np.float32), np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(f(a, b), np.concatenate([a, b], axis=1))
    with pytest.raises(flow.TraceError, match="flow.concat: give exactly one of inputs and values"):

        @flow.global_function()
        def g(a: tp.Numpy.Placeholder((2, 1))) -> tp.Numpy:
            return flow.concat([a], values=[a])


def adamw_program(**decay):
    """A dense layer and a layer norm inside a namespace, trained by AdamW with BERT's arguments."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.namespace("enc"):
            h = flow.layers.dense(x, 2, name="dense")
            y = flow.layers.layer_norm(h, name="LayerNorm", begin_norm_axis=-1, begin_params_axis=-1)
        loss = flow.math.reduce_mean(flow.math.square(y * flow.constant(np.array([1.0, 2.0], np.float32)) - h))
        lr = flow.optimizer.PolynomialScheduler(0.1, 10, 0.0, warmup=flow.optimizer.warmup.linear(2, 0))
        flow.optimizer.AdamW(lr, epsilon=1e-6, weight_decay=0.3, do_bias_correction=True,  # torch's AdamW's
                             grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0), loss_scale_policy=None,
                             **decay).minimize(loss)
        return loss

    return train


@pytest.mark.parametrize("decay", [{"weight_decay_excludes": ["bias", "LayerNorm", "layer_norm"]},
                                   {"weight_decay_includes": "dense-weight"}])
def test_adamw_decays_only_the_variables_its_patterns_choose(decay):
    """BERT's AdamW(weight_decay_excludes=[...]): torch.optim.AdamW with the excluded variables in a group of
    weight_decay 0; the learning rate follows the polynomial schedule with linear warmup."""
    train = adamw_program(**decay)
    assert "weight_decay_" in train.ir("job")
    rng = np.random.default_rng(4)
    w0, b0 = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2,)).astype(np.float32)
    flow.load_variables({"enc-dense-weight": w0, "enc-dense-bias": b0})
    w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    gamma, beta = torch.ones(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    opt = torch.optim.AdamW([{"params": [w]}, {"params": [b, gamma, beta], "weight_decay": 0.0}],
                            lr=0.1, eps=1e-6, weight_decay=0.3)
    for step in range(4):
        for group in opt.param_groups:  # OneFlow's: the base rate warmed up, then the unshifted polynomial decay
            group["lr"] = 0.1 * step / 2 if step < 2 else 0.1 * (1 - min(step, 10) / 10)
        x = rng.normal(size=(4, 3)).astype(np.float32)
        loss = train(x)
        opt.zero_grad()
        h = torch.tensor(x) @ w.T + b
        y = torch.nn.functional.layer_norm(h, (2,), gamma, beta, eps=1e-5)
        expected = ((y * torch.tensor([1.0, 2.0]) - h) ** 2).mean()
        expected.backward()
        torch.nn.utils.clip_grad_norm_([w, b, gamma, beta], 1.0)
        opt.step()
        np.testing.assert_allclose(loss, expected.item(), rtol=1e-5)
    values = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    for name, ref in (("enc-dense-weight", w), ("enc-dense-bias", b), ("enc-LayerNorm-gamma", gamma),
                      ("enc-LayerNorm-beta", beta)):
        np.testing.assert_allclose(values[name], ref.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_weight_decay_patterns_and_loss_scaling_are_checked():
    lr = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    with pytest.raises(ValueError, match="not both"):
        flow.optimizer.AdamW(lr, weight_decay=0.1, weight_decay_includes="a", weight_decay_excludes="b")
    with pytest.raises(ValueError, match="is not a regular expression"):
        flow.optimizer.AdamW(lr, weight_decay=0.1, weight_decay_excludes=["bias("])
    policy = flow.optimizer.loss_scale.dynamic_loss_scale(increment_period=2000)
    with pytest.raises(ValueError, match="no loss to scale"):
        flow.optimizer.SGD(lr, loss_scale_policy=policy)
    with pytest.raises(ValueError, match="no loss to scale"):
        flow.optimizer.Adam(lr, loss_scale_factor=1024.0)
    flow.optimizer.RMSProp(lr, loss_scale_policy=None)  # what the zoo passes without --use_fp16


@pytest.mark.parametrize("dtype", [flow.int32, flow.int8])
def test_sigmoid_cross_entropy_takes_integer_labels(dtype):
    """Wide&Deep feeds its 0/1 click labels as int32 (OneFlow's kernel takes int32 and int8 labels)."""
    rng = np.random.default_rng(6)
    labels = rng.integers(0, 2, (5, 1)).astype(dtype.np_dtype)
    z0 = rng.normal(size=(5, 1)).astype(np.float32) * 3

    @flow.global_function(type="train")
    def train(y: tp.Numpy.Placeholder((5, 1), dtype=dtype)) -> tp.Numpy:
        z = flow.get_variable("z", shape=(5, 1), initializer=flow.zeros_initializer())
        loss = flow.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z)
        constant_sgd(2.0).minimize(loss)
        return loss

    flow.load_variables({"z": z0})
    z = torch.tensor(z0, requires_grad=True)
    opt = torch.optim.SGD([z], lr=2.0)
    for _ in range(3):
        got = train(labels)
        opt.zero_grad()
        expected = torch.nn.functional.binary_cross_entropy_with_logits(
            z, torch.tensor(labels, dtype=torch.float32), reduction="none")
        expected.mean().backward()
        opt.step()
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(flow.get_all_variables()["z"].numpy(), z.detach().numpy(), rtol=1e-5, atol=1e-6)
