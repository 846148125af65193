"""flow.layers.batch_normalization against PyTorch's BatchNorm: training steps, moving statistics, inference."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)

SHAPE = (4, 3, 2, 2)


def define(axis: int, shape):
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        y = flow.layers.batch_normalization(x, axis=axis, momentum=0.9, epsilon=1e-5, name="bn")
        loss = flow.math.reduce_mean(flow.math.square(y - 0.5))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return y

    @flow.global_function()
    def infer(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        return flow.layers.batch_normalization(x, axis=axis, momentum=0.9, epsilon=1e-5, name="bn")

    return train, infer


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "dense"])
def test_training_and_inference_match_pytorch(layout):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    axis, shape, norm = {"NCHW": (1, SHAPE, torch.nn.BatchNorm2d(3, eps=1e-5, momentum=0.1)),
                         "NHWC": (-1, (4, 2, 2, 3), torch.nn.BatchNorm2d(3, eps=1e-5, momentum=0.1)),
                         "dense": (1, (6, 3), torch.nn.BatchNorm1d(3, eps=1e-5, momentum=0.1))}[layout]
    train, infer = define(axis, shape)
    to_torch = (lambda a: torch.tensor(a).permute(0, 3, 1, 2)) if layout == "NHWC" else torch.tensor
    from_torch = (lambda t: t.permute(0, 2, 3, 1).detach().numpy()) if layout == "NHWC" else (lambda t: t.detach().numpy())
    opt = torch.optim.SGD(norm.parameters(), lr=0.1)
    xs = [(rng.normal(size=shape) * 3 + 1).astype(np.float32) for _ in range(3)]
    for x in xs:
        y = train(x)
        opt.zero_grad()
        expected = norm(to_torch(x))
        ((expected - 0.5) ** 2).mean().backward()
        opt.step()
        np.testing.assert_allclose(y, from_torch(expected), rtol=1e-5, atol=1e-5)
    values = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    np.testing.assert_allclose(values["bn-moving_mean"], norm.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["bn-moving_variance"], norm.running_var.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["bn-gamma"], norm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["bn-beta"], norm.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    norm.eval()
    np.testing.assert_allclose(infer(xs[0]), from_torch(norm(to_torch(xs[0]))), rtol=1e-5, atol=1e-5)


def test_moving_statistics_are_not_trained():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        y = flow.layers.batch_normalization(x, axis=1, name="bn", training=False)
        loss = flow.math.reduce_mean(y)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return y

    train(np.ones((4, 2), np.float32))  # training=False: the moving statistics normalize and stay as they are
    values = flow.get_all_variables()
    np.testing.assert_array_equal(values["bn-moving_mean"].numpy(), np.zeros(2, np.float32))
    np.testing.assert_array_equal(values["bn-moving_variance"].numpy(), np.ones(2, np.float32))
    assert "bn-moving_mean-momentum" not in values


def test_bad_arguments_name_the_layer():
    with pytest.raises(flow.TraceError, match="batch_normalization: axis 4 is out of range"):

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            return flow.layers.batch_normalization(x, axis=4)


def test_inside_a_namespace_the_moving_statistics_move():
    """The model zoo builds its batch norms inside flow.scope.namespace: the statistics it moves are the
    namespaced variables `ns-bn-moving_*` (a KeyError at trace time before)."""
    torch.manual_seed(0)
    norm = torch.nn.BatchNorm1d(3, eps=1e-5, momentum=0.1)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((6, 3))) -> tp.Numpy:
        with flow.scope.namespace("Resnet"):
            y = flow.layers.batch_normalization(x, axis=1, momentum=0.9, epsilon=1e-5, name="bn")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_mean(flow.math.square(y - 0.5)))
        return y

    opt = torch.optim.SGD(norm.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = (rng.normal(size=(6, 3)) * 2 + 1).astype(np.float32)
        y = train(x)
        opt.zero_grad()
        expected = norm(torch.tensor(x))
        ((expected - 0.5) ** 2).mean().backward()
        opt.step()
        np.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    values = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    np.testing.assert_allclose(values["Resnet-bn-moving_mean"], norm.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["Resnet-bn-moving_variance"], norm.running_var.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["Resnet-bn-gamma"], norm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("with_addend", [True, False])
def test_batch_normalization_add_relu_and_relu_train_as_pytorch(with_addend):
    """ResNet's fused layers: relu(bn(x) + addend) and relu(bn(x)), with the gradient reaching the addend's
    variable too; OneFlow's zoo arguments (gamma/moving_variance initializers, regularizers) as keywords."""
    torch.manual_seed(0)
    norm = torch.nn.BatchNorm2d(3, eps=1e-5, momentum=0.1)
    with torch.no_grad():
        norm.weight.zero_()  # gamma_initializer=zeros, as the zoo's last batch norm of a block
        norm.running_var.zero_()  # moving_variance_initializer=zeros too
    rng = np.random.default_rng(2)
    skip0 = rng.normal(size=(2, 3, 2, 2)).astype(np.float32)
    kw = dict(axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True, trainable=True, training=True,
              gamma_initializer=flow.zeros_initializer(), moving_variance_initializer=flow.zeros_initializer(),
              gamma_regularizer=None, beta_regularizer=None)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3, 2, 2))) -> tp.Numpy:
        skip = flow.get_variable("skip", shape=(2, 3, 2, 2), initializer=flow.constant_initializer(0.0))
        if with_addend:
            y = flow.layers.batch_normalization_add_relu(inputs=x, addend=skip, name="b_bn_add_relu", **kw)
        else:
            y = flow.layers.batch_normalization_relu(inputs=x + skip, name="b_bn_add_relu", **kw)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(
            flow.math.reduce_mean(flow.math.square(y - 0.25)))
        return y

    flow.load_variables({"skip": skip0})
    skip = torch.tensor(skip0, requires_grad=True)
    opt = torch.optim.SGD([*norm.parameters(), skip], lr=0.5)
    for _ in range(3):
        x = rng.normal(size=(2, 3, 2, 2)).astype(np.float32)
        y = train(x)
        opt.zero_grad()
        expected = torch.relu(norm(torch.tensor(x)) + skip) if with_addend else torch.relu(norm(torch.tensor(x) + skip))
        ((expected - 0.25) ** 2).mean().backward()
        opt.step()
        np.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    values = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    np.testing.assert_allclose(values["skip"], skip.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["b_bn_add_relu-gamma"], norm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["b_bn_add_relu-moving_variance"], norm.running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_explicit_variable_names():
    @flow.global_function()
    def infer(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        with flow.scope.namespace("enc"):
            return flow.layers.batch_normalization(x, axis=1, name="bn", gamma_name="g", beta_name="b",
                                                   moving_mean_name="mm", moving_variance_name="mv")

    flow.load_variables({"enc-g": np.full(3, 2.0, np.float32), "enc-b": np.ones(3, np.float32),
                         "enc-mm": np.arange(3, dtype=np.float32), "enc-mv": np.full(3, 4.0, np.float32)})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(infer(x), (x - np.arange(3)) / np.sqrt(4.0 + 1e-3) * 2.0 + 1.0, rtol=1e-6)
    assert sorted(flow.get_all_variables()) == ["enc-b", "enc-g", "enc-mm", "enc-mv"]
