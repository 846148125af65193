"""Bad definitions and data caught early: placeholders, memory at compile time, masked arrays, NaN/inf."""

import inspect

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow import compiler as compile_module

HERE = __file__


def line_of(marker: str) -> int:
    """The line of this file holding `marker` (a comment), so expected lines follow edits."""
    source = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(i for i, text in enumerate(source, 1) if text.endswith(marker) and "line_of(" not in text)


@pytest.mark.parametrize(
    "shape, dtype, match",
    [
        ((True, 8), flow.float32, r"shape must be a tuple of positive ints, got \(True, 8\)"),
        ((0, 3), flow.float32, r"positive ints, got \(0, 3\)"),
        ((4, -1), flow.float32, r"positive ints, got \(4, -1\)"),
        ((2.0,), flow.float32, r"positive ints, got \(2.0,\)"),
        (5, flow.float32, "positive ints, got 5"),
        ((2,), None, "dtype must be one of .*got None"),
        ((2,), "nope", "dtype must be one of .*got 'nope'"),
        ((10**10, 10**10), flow.float32, r"shape \(10000000000, 10000000000\) of float32 is larger than any memory"),
    ],
)
@pytest.mark.parametrize("kind", [tp.Numpy, tp.ListNumpy, tp.ListListNumpy])
def test_bad_placeholders_fail_where_written(kind, shape, dtype, match):
    with pytest.raises(flow.TraceError, match=match) as err:
        kind.Placeholder(shape, dtype=dtype)  # the placeholder line
    assert err.value.location.file == HERE and err.value.location.line == line_of("# the placeholder line")


def test_numpy_integer_sizes_are_sizes():
    """A size computed by numpy (np.prod) is an np.int64: placeholders and get_variable refused it as not an int."""
    features = np.prod((2, 3))

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, features))) -> tp.Numpy:
        return x + flow.get_variable("b", shape=(np.int32(features),), initializer=flow.ones_initializer())

    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(f(x), x + 1)


def test_a_job_too_big_for_memory_fails_at_compile_time_naming_its_buffers():
    @flow.global_function()
    def huge(x: tp.Numpy.Placeholder((10**6, 10**6))) -> tp.Numpy:
        return flow.math.relu(x) * 2  # the huge line

    with pytest.raises(flow.CompileError) as err:
        huge.executable()
    message = str(err.value)
    assert message.startswith("job 'huge' needs 3725.3 GiB (4000000000004 bytes)")
    assert "of memory is available; largest buffers: " in message
    assert f"(test_early_checks.py:{line_of('# the huge line')}) 3725.3 GiB (4000000000000 bytes)" in message


def test_the_memory_check_counts_new_variables(monkeypatch):
    monkeypatch.setattr(compile_module, "available_memory", lambda xp: 100_000)

    @flow.global_function()
    def small_input_big_weight(x: tp.Numpy.Placeholder((1, 8))) -> tp.Numpy:
        return flow.layers.dense(x, 5000, name="wide")  # 8 x 5000 + 5000 floats: 180000 bytes

    with pytest.raises(flow.CompileError, match=r"and 175.8 KiB \(180000 bytes\) of new variables\) but only "
                                                r"97.7 KiB \(100000 bytes\) of memory is available"):  # fmt: skip
        small_input_big_weight.executable()
    monkeypatch.undo()
    assert small_input_big_weight(np.ones((1, 8), np.float32)).shape == (1, 5000)


def test_masked_arrays_are_rejected():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x + 1

    masked = np.ma.masked_array(np.array([1, 2, 3], np.float32), mask=[0, 1, 0])
    with pytest.raises(flow.ExecutionError, match="argument 'x' is a masked array; jobs would ignore its mask") as err:
        f(masked)
    assert err.value.location.file == HERE
    np.testing.assert_array_equal(f(masked.filled(0)), [2, 1, 4])


def anomaly_job(check: bool, job_type: str = "predict"):
    config = flow.function_config()
    if check:
        config.detect_anomaly(True)

    @flow.global_function(type=job_type, function_config=config)
    def f(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        y = flow.math.exp(x * w)
        z = flow.math.sqrt(x - 1)  # the sqrt line
        loss = flow.math.reduce_sum(y + z)
        if job_type == "train":
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return f


def test_detect_anomaly_names_the_first_op_and_the_users_line():
    f = anomaly_job(check=True)
    assert np.isfinite(f(np.array([2, 3, 4], np.float32)))
    with np.errstate(invalid="ignore"), pytest.raises(flow.ExecutionError, match="'sqrt' produced NaN") as err:
        f(np.array([0, 3, 4], np.float32))
    assert err.value.location.file == HERE and err.value.location.line == line_of("# the sqrt line")
    with np.errstate(over="ignore"), pytest.raises(flow.ExecutionError, match="'exp' produced inf"):
        f(np.array([1000, 3, 4], np.float32))


def test_detect_anomaly_stops_a_train_step_before_its_update():
    f = anomaly_job(check=True, job_type="train")
    f(np.array([2, 3, 4], np.float32))
    w = flow.get_all_variables()["w"].numpy()
    with np.errstate(invalid="ignore"), pytest.raises(flow.ExecutionError, match="'sqrt' produced NaN"):
        f(np.array([0, 3, 4], np.float32))
    np.testing.assert_array_equal(flow.get_all_variables()["w"].numpy(), w)


def test_without_detect_anomaly_nothing_is_checked():
    f = anomaly_job(check=False)
    with np.errstate(invalid="ignore"):
        assert np.isnan(f(np.array([0, 3, 4], np.float32)))
    def checking(step) -> bool:
        return getattr(step, "__qualname__", "") == "finite_checked.<locals>.checked"

    assert not any(map(checking, f.executable().executor.steps))  # the plain kernels: no cost when off
    flow.clear_default_session()
    assert any(map(checking, anomaly_job(check=True).executable().executor.steps))


def test_detect_anomaly_takes_a_bool():
    with pytest.raises(TypeError, match="detect_anomaly expects True or False, got 'yes'"):
        flow.function_config().detect_anomaly("yes")
