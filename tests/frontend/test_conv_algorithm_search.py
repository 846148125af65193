"""A job that measures its convolution algorithms (cudnn_conv_heuristic_search_algo(False)) trains as PyTorch does."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.runtime.kernels import algorithms


def test_a_searching_job_measures_its_convolutions_and_trains_like_torch(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(algorithms, "_chosen", {})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16, 8, 8))
    w0 = rng.standard_normal((16, 16, 3, 3)) * 0.1
    w1 = rng.standard_normal((8, 16, 3, 3)) * 0.1
    config = flow.FunctionConfig()
    config.default_data_type(flow.float64)
    config.cudnn_conv_heuristic_search_algo(False)

    @flow.global_function(type="train", function_config=config)
    def step(images: tp.Numpy.Placeholder((4, 16, 8, 8), dtype=flow.float64)) -> tp.Numpy:
        a = flow.get_variable("a", (16, 16, 3, 3), initializer=flow.zeros_initializer())
        b = flow.get_variable("b", (8, 16, 3, 3), initializer=flow.zeros_initializer())
        hidden = flow.nn.relu(flow.nn.conv2d(images, a, strides=1, padding="SAME"))
        loss = flow.math.reduce_sum(flow.math.square(flow.nn.conv2d(hidden, b, strides=1, padding="SAME")))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
        return loss

    flow.load_variables({"a": w0, "b": w1})
    loss = step(x)

    ta, tb = (torch.tensor(v, requires_grad=True) for v in (w0, w1))
    hidden = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), ta, padding=1))
    expected = (torch.nn.functional.conv2d(hidden, tb, padding=1) ** 2).sum()
    expected.backward()
    np.testing.assert_allclose(loss, expected.item(), rtol=1e-10)
    trained = flow.get_all_variables()
    lr = float(np.float32(0.01))  # the learning rate is a float32 blob, as in OneFlow
    np.testing.assert_allclose(trained["a"].numpy(), w0 - lr * ta.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(trained["b"].numpy(), w1 - lr * tb.grad.numpy(), rtol=1e-9, atol=1e-12)
    # both convolutions forward, both filter gradients and the second's input gradient were measured: the input
    # gradient's correlation (a conv2d measured itself) against its in-place GEMM (few rows: kernels/conv.py)
    kinds = sorted(key[0] for key, _ in algorithms.chosen())
    assert kinds == ["conv2d"] * 3 + ["conv2d_grad_filter"] * 2 + ["conv2d_grad_input"]
