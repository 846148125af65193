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
