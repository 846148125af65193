"""OneFlow's older API, as the documentation's programs still use it."""


import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.frontend.signature import LocalBlob


def old_train_config(update):
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(0.5)
    config.train.model_update_conf(update)
    return config


def define_old_train_job(update):
    with pytest.warns(DeprecationWarning):

        @flow.global_function(old_train_config(update))
        def train(x=flow.FixedTensorDef((4, 3), dtype=flow.float), y=flow.FixedTensorDef((4,), dtype=flow.int32)):
            logits = flow.layers.dense(x, 2, kernel_initializer=flow.constant_initializer(0.1), name="fc")
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            flow.losses.add_loss(loss)
            return loss

    return train


def numpy_sgd_steps(x, y, lr, momentum, steps):
    """The same model trained by hand: softmax cross-entropy, mean over the batch, SGD with momentum."""
    w, b = np.full((2, 3), 0.1), np.zeros(2)
    mw, mb = np.zeros_like(w), np.zeros_like(b)
    for _ in range(steps):
        logits = x @ w.T + b
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        gw, gb = p.T @ x / len(y), p.sum(0) / len(y)
        mw, mb = momentum * mw + gw, momentum * mb + gb
        w, b = w - lr * mw, b - lr * mb
    return w, b


@pytest.mark.parametrize("update, momentum", [({"naive_conf": {}}, 0.0), ({"momentum_conf": {"beta": 0.8}}, 0.8)])
def test_config_train_and_add_loss_make_a_train_job(update, momentum):
    train = define_old_train_job(update)
    assert train.job_type == "train"
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    y = np.array([0, 1, 1, 0], np.int32)
    for _ in range(3):
        loss = train(x, y).get()
        assert isinstance(loss, LocalBlob) and loss.shape == (4,)
        assert type(loss.ndarray()) is np.ndarray
    w, b = numpy_sgd_steps(x.astype(np.float64), y, 0.5, momentum, 3)
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["fc-weight"].numpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["fc-bias"].numpy(), b, rtol=1e-5, atol=1e-6)


def test_adam_conf_builds_adam():
    define_old_train_job({"adam_conf": {"beta1": 0.8}})
    flow.sync_default_session()
    assert "fc-weight-m" in flow.get_all_variables()


def test_future_async_get_and_nested_results():
    with pytest.warns(DeprecationWarning):

        @flow.global_function(flow.function_config())
        def f(x=flow.FixedTensorDef((2,))):
            return {"x": x, "pair": (x + 1, x * 2)}

    seen = []
    for i in range(3):
        f(np.full(2, i, np.float32)).async_get(seen.append)
    flow.sync_default_session()
    assert [float(r["x"][0]) for r in seen] == [0, 1, 2]
    assert float(seen[2]["pair"][1].ndarray()[0]) == 4
    assert f(np.ones(2, np.float32)).get()["pair"][0].tolist() == [2, 2]


def test_a_job_without_a_return_value_returns_a_future_of_none():
    seen = []

    def handler(value: tp.Numpy):
        seen.append(value)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))):
        flow.watch(x, handler)

    assert f(np.ones(2, np.float32)).get() is None
    assert len(seen) == 1


def test_mirrored_tensor_def_is_a_list_placeholder():
    with pytest.warns(DeprecationWarning, match="MirroredTensorDef is deprecated"):
        spec = flow.MirroredTensorDef((2,), dtype=flow.float)
    assert spec.kind == "list_numpy" and spec.shape == (2,)


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda c: c.train.primary_lr(-1), "primary_lr expects a positive number"),
        (lambda c: c.train.model_update_conf({"rmsprop_conf": {}}), "expects one of naive_conf"),
        (lambda c: c.train.model_update_conf({"momentum_conf": {"alpha": 1}}), r"has no option\(s\) \['alpha'\]"),
    ],
)
def test_bad_train_settings(setup, message):
    with pytest.raises(ValueError, match=message):
        setup(flow.function_config())


def test_add_loss_needs_train_settings():
    with pytest.raises(flow.TraceError, match="sets no optimizer"):

        @flow.global_function(type="train")
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            flow.losses.add_loss(flow.math.reduce_mean(x))
            return x


def test_a_train_job_must_minimize_something():
    with pytest.raises(flow.TraceError, match="minimizes nothing"):

        @flow.global_function(type="train")
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            return x


def test_get_raises_the_calls_own_error_once():
    def handler(value: tp.Numpy):
        raise ZeroDivisionError("from the watcher")

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))):
        flow.watch(x, handler)
        return x

    future = f(np.ones(2, np.float32))
    with pytest.raises(ZeroDivisionError):
        future.get()
    flow.sync_default_session()  # already reported: not raised again


@pytest.mark.parametrize("devices", [1, 3])
def test_numpy_list_gives_each_devices_array(devices):
    """OneFlow's older programs read a mirrored job's result with .get().numpy_list(); LocalBlob had no such method."""
    flow.config.cpu_device_num(devices)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def mirrored(x: tp.ListNumpy.Placeholder((4, 2))):
        return x * 2

    @flow.global_function()
    def consistent(x: tp.Numpy.Placeholder((4, 2))):
        return x + 1

    data = [np.full((d + 1, 2), d, np.float32) for d in range(devices)]
    got = mirrored(data).get()
    assert len(got.numpy_list()) == devices
    for part, x in zip(got.ndarray_list(), data):
        np.testing.assert_array_equal(part, x * 2)
    (whole,) = consistent(np.zeros((4, 2), np.float32)).get().numpy_list()
    np.testing.assert_array_equal(whole, np.ones((4, 2), np.float32))


def test_name_scope_and_its_other_names_prefix_variables_as_namespace_does():
    """`flow.name_scope` (BERT's docs), `flow.deprecated.variable_scope` and `flow.experimental.name_scope` (the
    model zoo) are OneFlow's deprecated names of `flow.scope.namespace`: each warns, and they nest."""
    with pytest.warns(DeprecationWarning, match="flow.scope.namespace"):

        @flow.global_function()
        def infer(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            with flow.name_scope("cls-squad"):
                h = flow.layers.dense(x, 4, name="output")
            with flow.deprecated.variable_scope("Resnet"), flow.experimental.name_scope("stem"):
                return flow.layers.dense(h, 2, use_bias=False, name="fc")

    assert sorted(flow.get_all_variables()) == ["Resnet-stem-fc-weight", "cls-squad-output-bias",
                                                "cls-squad-output-weight"]


@pytest.mark.parametrize("scope", [lambda: flow.name_scope(""), lambda: flow.deprecated.variable_scope(3)])
def test_name_scope_needs_a_name(scope):
    with pytest.warns(DeprecationWarning), pytest.raises(flow.TraceError, match="non-empty string") as err:
        scope()
    assert "test_legacy_api.py" in str(err.value)


def sgd_step_job():
    """A train job as OneFlow 0.x's eager page writes it: defined anew inside the step, then called."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 2, kernel_initializer=flow.constant_initializer(0.1), name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
        return loss

    return train


def test_eager_mode_job_functions_defined_per_call_train_as_one_job():
    """flow.enable_eager_execution(True) is recorded; each step's new definition compiles and takes one SGD step
    of the variables it shares by name, as a hand-written numpy loop does."""
    flow.enable_eager_execution(True)
    try:
        assert flow.eager_execution_enabled()
        x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
        y = np.array([0, 1, 1, 0], np.int32)
        for _ in range(3):
            sgd_step_job()(x, y)
        w, b = numpy_sgd_steps(x.astype(np.float64), y, 0.5, 0.0, 3)
        values = flow.get_all_variables()
        np.testing.assert_allclose(values["fc-weight"].numpy(), w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values["fc-bias"].numpy(), b, rtol=1e-5, atol=1e-6)
    finally:
        flow.clear_default_session()
        flow.enable_eager_execution(False)
    assert not flow.eager_execution_enabled()


def test_the_mode_is_chosen_before_any_job_function():
    sgd_step_job()
    with pytest.raises(flow.ExecutionError, match="after the job function 'train' was defined"):
        flow.enable_eager_execution(True)
    assert not flow.eager_execution_enabled()
    with pytest.raises(ValueError, match="True or False"):
        flow.enable_eager_execution("yes")


def test_reading_a_blobs_value_inside_a_job_function_names_the_line():
    """What only eager mode allows: blob.numpy() while the job is defined."""
    with pytest.raises(flow.TraceError, match="Blob .* has no value while a job is defined") as err:

        @flow.global_function()
        def infer(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            print(flow.math.relu(x).numpy())
            return x

    assert "test_legacy_api.py" in str(err.value)
