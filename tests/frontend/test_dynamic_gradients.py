"""Gradients through `job.pin_size` and through an input's dynamic axes past 0 (docs/dynamic.md).

A variable scaled or added onto a mirrored input whose sizes vary gets its gradient over
the actual elements only; where an op pins axes (a convolution's spatial axes, a reshape)
the gradient is unpinned back to the input's actual sizes. Oracle: PyTorch on the same
data, in float64, at several actual sizes in an order where a stale padding would show.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

SGD = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
LR = float(np.float32(0.1))  # irflow's learning rate is a float32: PyTorch steps with the same number


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def torch_parameters(torch, names: list[str]) -> dict:
    return {n: torch.tensor(flow.get_all_variables()[n].numpy().copy(), requires_grad=True) for n in names}


def assert_variables_match(params: dict, rtol: float = 1e-10) -> None:
    variables = flow.get_all_variables()
    for name, p in params.items():
        np.testing.assert_allclose(variables[name].numpy(), p.detach().numpy(), rtol=rtol, atol=1e-12, err_msg=name)


def step_like_pytorch(opt, objective, params: dict) -> None:
    """One PyTorch SGD step on `objective`; irflow's step has run, so its variables must now match."""
    opt.zero_grad()
    objective.backward()
    opt.step()
    assert_variables_match(params)


def test_variables_on_input_features_before_a_dense_layer_train_like_pytorch():
    """x * scale + shift feeds a dense layer: the features meet its weight, so their gradient comes back
    static (checked 6 at run time) and is unpinned to the input's sizes; scale's and shift's gradients
    sum over the actual rows only."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(1,), dtype=flow.float64, initializer=flow.constant_initializer(1.5))
        shift = flow.get_variable("shift", shape=(6,), dtype=flow.float64,
                                  initializer=flow.random_normal_initializer(seed=2))  # fmt: skip
        h = flow.layers.dense(x * scale + shift, 3, activation=flow.math.tanh, name="dense",
                              kernel_initializer=flow.random_normal_initializer(seed=3))  # fmt: skip
        loss = flow.math.reduce_sum(flow.math.square(h), axis=1)
        flow.optimizer.SGD(SGD, momentum=0).minimize(loss)
        return loss

    assert "job.unpin_size" in train.ir("autodiff")
    p = torch_parameters(torch, ["scale", "shift", "dense-weight", "dense-bias"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(0)
    for n in (8, 3, 6, 1, 8):
        x = rng.standard_normal((n, 6))
        (loss,) = train([x])
        h = torch.tanh((torch.from_numpy(x) * p["scale"] + p["shift"]) @ p["dense-weight"].T + p["dense-bias"])
        expected = h.square().sum(dim=1)
        np.testing.assert_allclose(loss, expected.detach().numpy(), rtol=1e-10, err_msg=f"{n} rows")
        step_like_pytorch(opt, expected.mean(), p)


def test_a_scale_before_a_convolution_trains_through_the_pin_like_pytorch():
    """The convolution takes its spatial axes pinned: the scale's gradient goes back through the pin."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(images: tp.ListNumpy.Placeholder((4, 2, 6, 6), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(1, 2, 1, 1), dtype=flow.float64,
                                  initializer=flow.random_uniform_initializer(0.5, 1.5))  # fmt: skip
        conv = flow.layers.conv2d(images * scale, 3, 3, padding="SAME", activation=flow.nn.relu, name="conv",
                                  kernel_initializer=flow.random_normal_initializer(seed=5))  # fmt: skip
        loss = flow.math.reduce_mean(flow.reshape(conv, (conv.shape[0], -1)), axis=1)
        flow.optimizer.SGD(SGD, momentum=0).minimize(loss)
        return loss

    assert "job.pin_size" in train.ir("job") and "job.unpin_size" in train.ir("autodiff")
    p = torch_parameters(torch, ["scale", "conv-weight", "conv-bias"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(1)
    for n in (4, 1, 3, 4, 2):
        x = rng.standard_normal((n, 2, 6, 6))
        (loss,) = train([x])
        conv = torch.nn.functional.conv2d(torch.from_numpy(x) * p["scale"], p["conv-weight"], p["conv-bias"], padding=1)
        expected = torch.relu(conv).reshape(n, -1).mean(dim=1)
        np.testing.assert_allclose(loss, expected.detach().numpy(), rtol=1e-10, err_msg=f"{n} images")
        step_like_pytorch(opt, expected.mean(), p)
    with pytest.raises(flow.ExecutionError, match=r"takes axes \[2, 3\] of operand #0 at their bound"):
        train([rng.standard_normal((2, 2, 5, 6))])


def test_a_reshape_that_pins_trailing_axes_trains_like_pytorch():
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((5, 2, 3), dtype=flow.float64)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        gain = flow.get_variable("gain", shape=(3,), dtype=flow.float64,
                                 initializer=flow.random_uniform_initializer(0.5, 1.5))  # fmt: skip
        flat = flow.reshape(flow.math.sigmoid(x * gain), (5, 6))
        logits = flow.layers.dense(flat, 4, name="head", kernel_initializer=flow.random_normal_initializer(seed=7))
        loss = flow.math.reduce_sum(flow.math.square(logits), axis=1)
        flow.optimizer.SGD(SGD, momentum=0).minimize(loss)
        return flat, loss

    p = torch_parameters(torch, ["gain", "head-weight", "head-bias"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(2)
    for n in (5, 2, 4, 1):
        x = rng.standard_normal((n, 2, 3))
        (flat,), (loss,) = train([x])
        assert flat.shape == (n, 6)
        logits = torch.sigmoid(torch.from_numpy(x) * p["gain"]).reshape(n, 6) @ p["head-weight"].T + p["head-bias"]
        expected = logits.square().sum(dim=1)
        np.testing.assert_allclose(loss, expected.detach().numpy(), rtol=1e-10)
        step_like_pytorch(opt, expected.mean(), p)


def test_gradients_over_features_of_changing_size_sum_the_actual_elements_only():
    """No op pins the features here: every step has its own (rows, columns), and the scale's gradient is
    a sum over exactly those elements (a bigger step first leaves its values in the padding)."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((6, 5), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(1,), dtype=flow.float64, initializer=flow.constant_initializer(0.7))
        y = flow.math.tanh(x * scale)
        loss = flow.math.reduce_mean(y * x, axis=1)
        flow.optimizer.SGD(SGD, momentum=0).minimize(loss)
        return loss

    p = torch_parameters(torch, ["scale"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(3)
    for n, c in ((6, 5), (2, 3), (6, 1), (4, 5), (1, 2)):
        x = rng.standard_normal((n, c)) + 1.0
        (loss,) = train([x])
        t = torch.from_numpy(x)
        expected = (torch.tanh(t * p["scale"]) * t).mean(dim=1)
        np.testing.assert_allclose(loss, expected.detach().numpy(), rtol=1e-10)
        step_like_pytorch(opt, expected.mean(), p)


@pytest.mark.parametrize("axis", [1, 0], ids=["features", "rows"])
def test_a_max_over_a_dynamic_axis_trains_like_pytorch(axis):
    """reduce_max's gradient (reduce_max_grad) runs at the actual sizes: only the maxima among the step's
    elements get a share, never a stale value in the padding."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((6, 5), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(5,), dtype=flow.float64,
                                  initializer=flow.random_normal_initializer(seed=8))  # fmt: skip
        peak = flow.math.reduce_max(flow.math.tanh(x * flow.math.reduce_mean(scale)), axis=axis)
        flow.optimizer.SGD(SGD, momentum=0).minimize(peak)
        return peak

    p = torch_parameters(torch, ["scale"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(4)
    for n, c in ((6, 5), (3, 2), (6, 4), (1, 5), (4, 1)):
        x = rng.standard_normal((n, c))
        (got,) = train([x])
        expected = torch.tanh(torch.from_numpy(x) * p["scale"].mean()).amax(dim=axis)
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-10)
        step_like_pytorch(opt, expected.mean(), p)


def test_a_sum_over_the_leading_axis_of_transposed_features_trains_like_pytorch():
    """The sum's gradient expands over a leading axis by broadcast_like alone: a dynamic gradient cannot be
    reshaped to put a size-1 axis before its dynamic axes."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((6, 5), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(1,), dtype=flow.float64, initializer=flow.constant_initializer(0.8))
        columns = flow.math.reduce_sum(flow.math.sigmoid(flow.transpose(x * scale, perm=[1, 0])), axis=0)
        flow.optimizer.SGD(SGD, momentum=0).minimize(columns)
        return columns

    p = torch_parameters(torch, ["scale"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(5)
    for n, c in ((6, 5), (2, 3), (5, 1), (6, 5)):
        x = rng.standard_normal((n, c))
        (got,) = train([x])
        expected = torch.sigmoid((torch.from_numpy(x) * p["scale"]).T).sum(dim=0)
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-10)
        step_like_pytorch(opt, expected.mean(), p)


@pytest.mark.parametrize("axis, keepdims", [(1, False), (2, False), (1, True), ((0, 2), False)],
                         ids=["middle", "last", "middle-keepdims", "outer"])
def test_sums_over_any_axes_between_dynamic_ones_train_like_pytorch(axis, keepdims):
    """Their gradient puts the summed axes back as size 1 between dynamic ones (broadcast_like's axes)."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((3, 4, 5), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(1,), dtype=flow.float64, initializer=flow.constant_initializer(0.8))
        loss = flow.math.reduce_sum(flow.math.tanh(x * scale), axis=axis, keepdims=keepdims)
        flow.optimizer.SGD(SGD, momentum=0).minimize(flow.math.square(loss))
        return loss

    p = torch_parameters(torch, ["scale"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(6)
    for shape in ((3, 4, 5), (2, 3, 4), (3, 1, 2), (1, 4, 5)):
        x = rng.standard_normal(shape)
        (got,) = train([x])
        expected = torch.tanh(torch.from_numpy(x) * p["scale"]).sum(dim=axis, keepdim=keepdims)
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-10, atol=1e-12)
        step_like_pytorch(opt, expected.square().mean(), p)


def test_a_concat_along_a_static_axis_between_dynamic_ones_trains_like_pytorch():
    """concat's gradient slices dy along the concatenated axis and keeps the dynamic ones whole."""
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((3, 1, 5), dtype=flow.float64)) -> tp.ListNumpy:
        scale = flow.get_variable("scale", shape=(1,), dtype=flow.float64, initializer=flow.constant_initializer(0.8))
        y = x * scale
        both = flow.concat([flow.math.tanh(y), y * y], axis=1)  # (<=3, 2, <=5): axis 1 of bound 1 is static
        loss = flow.math.reduce_sum(both, axis=[1, 2])
        flow.optimizer.SGD(SGD, momentum=0).minimize(loss)
        return loss

    p = torch_parameters(torch, ["scale"])
    opt = torch.optim.SGD(list(p.values()), lr=LR)
    rng = np.random.default_rng(7)
    for n, c in ((3, 5), (2, 3), (1, 5), (3, 1)):
        x = rng.standard_normal((n, 1, c))
        (got,) = train([x])
        y = torch.from_numpy(x) * p["scale"]
        expected = torch.cat([torch.tanh(y), y * y], dim=1).sum(dim=(1, 2))
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-10, atol=1e-12)
        step_like_pytorch(opt, expected.mean(), p)
