"""Ops that index with data refuse values outside their range, at the user's line, changing nothing."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

MARK = "# the loss" + " line"
LOSS_LINE = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1) if text.endswith(MARK))


def define_train():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 10, kernel_initializer=flow.random_normal_initializer(), name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)  # the loss line
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    return train


@pytest.mark.parametrize("bad, position", [(10, 2), (-1, 0), (1000, 3)])
def test_a_label_out_of_range_is_named_and_changes_nothing(bad, position):
    train = define_train()
    x = np.ones((4, 3), np.float32)
    train(x, np.array([0, 9, 5, 1], np.int32))  # a good step first: momentum and step counter are non-zero
    before = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    labels = np.array([3, 4, 5, 6], np.int32)
    labels[position] = bad
    with pytest.raises(flow.ExecutionError) as info:
        train(x, labels)
    message = str(info.value)
    assert f"sparse_softmax_cross_entropy: label {bad} at position [{position}] is outside [0, 10)" in message
    assert info.value.location.file == __file__ and info.value.location.line == LOSS_LINE
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


def test_predict_jobs_check_labels_too_and_async_calls_report_at_the_sync():
    @flow.global_function()
    def evaluate(x: tp.Numpy.Placeholder((2, 3)), y: tp.Numpy.Placeholder((2,), dtype=flow.int64)) -> tp.Callback[tp.Numpy]:
        return flow.nn.sparse_softmax_cross_entropy_with_logits(y, x)

    seen = []
    evaluate(np.zeros((2, 3), np.float32), np.array([0, 2], np.int64))(seen.append)
    evaluate(np.zeros((2, 3), np.float32), np.array([0, 3], np.int64))(seen.append)
    with pytest.raises(flow.ExecutionError, match=r"label 3 at position \[1\] is outside \[0, 3\)"):
        flow.sync_default_session()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], np.log(3.0), rtol=1e-6)  # the good call's loss, unchanged


def define_batch_norm_train(detect_anomaly: bool):
    config = flow.function_config()
    config.detect_anomaly(detect_anomaly)

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.Numpy.Placeholder((4, 3)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        normed = flow.layers.batch_normalization(x, axis=1, name="bn")  # assigns its moving statistics here
        roots = flow.math.reduce_mean(flow.math.sqrt(x))  # NaN for a negative input, after the assignments
        logits = flow.layers.dense(normed, 3, kernel_initializer=flow.random_normal_initializer(), name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits) + roots
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return train


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")  # the NaN it stops at
@pytest.mark.parametrize("detect_anomaly", [False, True])
def test_a_step_stopped_after_batch_norm_leaves_its_moving_statistics(detect_anomaly):
    """Batch normalization assigns its moving statistics in the forward pass, before the loss's label
    check (or a later NaN, with detect_anomaly): a step stopped there must leave them, and every other
    variable, as they were, so the next good step continues from the last good one."""
    train = define_batch_norm_train(detect_anomaly)
    rng = np.random.default_rng(3)
    x1, x2 = rng.random((4, 3), np.float32), rng.random((4, 3), np.float32)
    labels = np.array([0, 1, 2, 1], np.int32)
    train(x1, labels)
    before = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    bad_x, bad_labels = (x1 - 1, labels) if detect_anomaly else (x1 * 5, np.array([0, 1, 3, 1], np.int32))
    with pytest.raises(flow.ExecutionError, match="produced NaN" if detect_anomaly else "label 3 at position"):
        train(bad_x, bad_labels)
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)
    train(x2, labels)
    mean, var = np.zeros(3), np.ones(3)  # OneFlow's initial moving statistics
    for x in (x1, x2):  # moving = momentum * moving + (1 - momentum) * batch, unbiased variance
        mean = 0.99 * mean + 0.01 * x.astype(np.float64).mean(axis=0)
        var = 0.99 * var + 0.01 * x.astype(np.float64).var(axis=0, ddof=1)
    state = flow.get_all_variables()
    np.testing.assert_allclose(state["bn-moving_mean"].numpy(), mean, rtol=1e-5)
    np.testing.assert_allclose(state["bn-moving_variance"].numpy(), var, rtol=1e-5)
    assert state["System-Train-TrainStep"].numpy() == 2


def test_on_two_devices_a_bad_label_names_the_device_whose_part_holds_it():
    """Each device's kernel sees its half of the batch, so the position it finds is within that half."""
    flow.config.cpu_device_num(2)
    train = define_train()
    x = np.ones((4, 3), np.float32)
    train(x, np.array([0, 1, 2, 3], np.int32))
    before = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    with pytest.raises(flow.ExecutionError) as info:
        train(x, np.array([0, 1, 2, 10], np.int32))  # row 3: row 1 of device 1's rows 2-3
    assert "on device 1 of 2 (positions within its part): label 10 at position [1] is outside [0, 10)" in str(info.value)
    assert info.value.location.file == __file__ and info.value.location.line == LOSS_LINE
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


@pytest.mark.parametrize("dtype, kept", [(flow.float32, False), (flow.int32, True)])
def test_only_integer_division_makes_a_step_keep_the_variables_it_writes_before_it(dtype, kept):
    """Integer division stops a step at a zero divisor, so batch norm's moving statistics, assigned before
    it, are copied aside every step; a float division cannot stop it, and costs no copy."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)), d: tp.Numpy.Placeholder((4, 3), dtype=dtype)) -> tp.Numpy:
        normed = flow.layers.batch_normalization(x, axis=1, name="bn")
        ratio = flow.cast(flow.math.divide(d, d), flow.float32)
        loss = flow.math.reduce_mean(flow.layers.dense(normed * ratio, 1, name="fc"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    train(np.ones((4, 3), np.float32), np.ones((4, 3), dtype.np_dtype))
    assert bool(train._exe.executor.kept) is kept
