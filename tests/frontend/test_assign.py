"""flow.assign (OneFlow 0.x): a variable holds a value from the next step on, written after every read."""

import re
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp


def test_an_average_kept_by_assign_reads_the_old_value_within_the_step():
    @flow.global_function()
    def average(x: tp.Numpy.Placeholder((3,))) -> Tuple[tp.Numpy, tp.Numpy]:
        kept = flow.get_variable("kept", shape=(3,), initializer=flow.constant_initializer(1.0))
        flow.assign(kept, kept * 0.75 + x * 0.25)
        return kept + 0, kept * 2  # both before the write

    want = np.ones(3, np.float32)
    for x in np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32):
        before, twice = average(x)
        np.testing.assert_allclose(before, want, rtol=1e-6)
        np.testing.assert_allclose(twice, 2 * want, rtol=1e-6)
        want = want * np.float32(0.75) + x * np.float32(0.25)
        np.testing.assert_allclose(flow.get_all_variables()["kept"].numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("devices", [1, 2])
def test_an_average_of_a_trained_weight_takes_it_before_the_update(devices):
    flow.config.cpu_device_num(devices)

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer(), distribute=flow.distribute.split(0))
        average = flow.get_variable("w_average", shape=(2,), initializer=flow.zeros_initializer(), trainable=False)
        flow.system.assign(average, average * 0.5 + w * 0.5)
        loss = flow.math.reduce_sum(x * w)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.125]), momentum=0).minimize(loss)
        return loss

    w, average = np.ones(2), np.zeros(2)
    for x in np.random.default_rng(2).normal(size=(3, 4, 2)).astype(np.float32):
        step(x)
        average = average * 0.5 + w * 0.5
        w = w - 0.125 * x.sum(axis=0)
        np.testing.assert_allclose(flow.get_all_variables()["w_average"].numpy(), average, rtol=1e-5)
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-5)


def test_a_step_that_stops_assigns_nothing():
    @flow.global_function()
    def pick(x: tp.Numpy.Placeholder((3,)), at: tp.Numpy.Placeholder((1,), dtype=flow.int32)) -> tp.Numpy:
        count = flow.get_variable("count", shape=(1,), initializer=flow.zeros_initializer())
        flow.assign(count, count + 1)
        return flow.gather(x, at)

    pick(np.ones(3, np.float32), np.array([2], np.int32))
    with pytest.raises(flow.ExecutionError, match="gather: index 5"):
        pick(np.ones(3, np.float32), np.array([5], np.int32))
    np.testing.assert_array_equal(flow.get_all_variables()["count"].numpy(), [1.0])


def test_assign_refuses_what_is_not_one_write_of_a_variable_at_the_users_line():
    with pytest.raises(flow.TraceError, match=r"test_assign.py:\d+.*flow.assign: ref must be a variable of this job"):

        @flow.global_function()
        def not_a_variable(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            flow.assign(x, x)
            return x

    with pytest.raises(flow.TraceError, match=r"flow.assign: value must be a float32 \(3,\) Blob like variable 'v'"):

        @flow.global_function()
        def other_shape(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            flow.assign(flow.get_variable("v", shape=(3,)), x)
            return x

    with pytest.raises(flow.TraceError, match=r"test_assign.py:(\d+):\d+: error: flow.assign: variable 'v' is already "
                                              r"assigned in this step, at .*test_assign.py:(\d+)") as info:  # fmt: skip

        @flow.global_function()
        def twice(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            v = flow.get_variable("v", shape=(3,))
            flow.assign(v, x)
            flow.assign(v, x * 2)
            return x

    second, first = (int(n) for n in re.search(r"test_assign.py:(\d+).*test_assign.py:(\d+)", str(info.value)).groups())
    assert second == first + 1


def test_assigning_a_variable_the_optimizer_trains_is_a_compile_error_naming_both_lines():
    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        flow.assign(w, w * 0.5)
        loss = flow.math.reduce_sum(x * w)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    with pytest.raises(flow.CompileError, match=r"variable 'w' is trained here and written by flow.assign at "
                                                r".*test_assign.py:\d+"):  # fmt: skip
        step(np.ones((4, 3), np.float32))
