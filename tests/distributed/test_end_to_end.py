"""Distributed jobs through the whole pipeline: what the IR explains, what is rejected, logical variables."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.dialects import job
from irflow.textir import parse_module

HERE = __file__


def line_of(marker: str) -> int:
    for i, text in enumerate(open(HERE).read().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return i
    raise AssertionError(marker)


def predict(devices: int, hints: dict, config=None):
    if devices > 1:
        flow.config.cpu_device_num(devices)

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((6, 5), dtype=flow.float64)) -> tp.Numpy:
        init = flow.random_normal_initializer(0.0, 0.5)
        w = flow.get_variable("w", shape=(4, 5), dtype=flow.float64, initializer=init, distribute=hints.get("w"))
        h = flow.math.tanh(flow.matmul(x, w, transpose_b=True))
        if "cast" in hints:
            h = flow.parallel_cast(h, distribute=hints["cast"])
        return flow.math.reduce_sum(h * h, axis=1)

    return f


def test_every_value_has_sbp_and_placement_after_sbp_infer():
    f = predict(4, {"w": flow.distribute.split(0)})
    f(np.ones((6, 5)))
    module = parse_module(f.ir("sbp-infer"))
    ops = [op for op in module.walk() if isinstance(op, job.JobOp) and op.results]
    assert ops and all(op.sbp is not None and op.placement is not None for op in ops)
    origins = {op.attributes["sbp_origin"].data for op in ops}
    assert "hint" in origins and origins <= {"hint", "default", "rule", "cost"}
    boxing = [op for op in parse_module(f.ir("insert-boxing")).walk() if isinstance(op, job.BoxingOp)]
    assert boxing and all("reason" in op.attributes for op in boxing)


def test_one_device_inserts_nothing():
    f = predict(1, {})
    f(np.ones((6, 5)))
    assert "job.boxing" not in f.ir("insert-boxing")


def test_parallel_cast_forces_a_conversion_and_keeps_the_numbers():
    x = np.random.default_rng(0).standard_normal((6, 5))
    want = predict(1, {})(x)
    flow.clear_default_session()
    f = predict(3, {"cast": flow.distribute.split(1)})
    np.testing.assert_allclose(f(x), want, rtol=1e-12)
    casts = [op for op in parse_module(f.ir("insert-boxing")).walk()
             if isinstance(op, job.BoxingOp) and op.attributes.get("sbp_origin").data == "hint"]  # fmt: skip
    assert len(casts) == 1 and str(casts[0].sbp.components.data[0]) == "split(1)"


def hinted_boxings(f) -> list[job.BoxingOp]:
    """The boxings sbp-infer's output holds for hints (parallel_cast's, or a hint moved off its op)."""
    ops = parse_module(f.ir("sbp-infer")).walk()
    return [op for op in ops if isinstance(op, job.BoxingOp) and op.attributes["sbp_origin"].data == "hint"]


def test_a_hint_its_op_cannot_produce_is_boxed_after_it():
    """relu never makes partial sums, a convolution never splits its output's rows: the op runs as sbp-infer
    chooses, and a boxing after it gives its readers what the hint names."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 6)), rng.standard_normal((6, 8))
    flow.config.cpu_device_num(2)

    @flow.global_function()
    def relu_partial(x: tp.Numpy.Placeholder((4, 6), dtype=flow.float64)) -> tp.Numpy:
        return flow.math.relu(x).with_distribute(flow.distribute.partial_sum()) * 2

    np.testing.assert_array_equal(relu_partial(x), np.maximum(x, 0) * 2)
    (box,) = hinted_boxings(relu_partial)
    assert str(box.sbp) == "#job.nd_sbp<[partial_sum]>" and isinstance(box.x.owner, job.ReluOp)

    flow.clear_default_session()
    flow.config.cpu_device_num(2)
    images, filters = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))

    @flow.global_function()
    def rows(x: tp.Numpy.Placeholder((2, 3, 5, 5), dtype=flow.float64)) -> tp.Numpy:
        w = flow.get_variable("w", (4, 3, 3, 3), dtype=flow.float64, initializer=flow.zeros_initializer())
        return flow.math.tanh(flow.nn.conv2d(x, w, 1, "SAME").with_distribute(flow.distribute.split(2)))

    flow.load_variables({"w": filters})
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(images, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    np.testing.assert_allclose(rows(images), np.tanh(np.einsum("ncijab,fcab->nfij", windows, filters)), rtol=1e-12)
    (box,) = hinted_boxings(rows)
    assert str(box.sbp) == "#job.nd_sbp<[split(2)]>" and isinstance(box.x.owner, job.Conv2DOp)


def test_a_hint_whose_signatures_read_partial_sums_is_boxed_after_its_op():
    """A sum over an unevenly split axis (7 over 2 devices) hinted partial: only the signature reading partial sums
    produces that, and nothing makes an op's operand partial, so the sum runs whole-row and a boxing after it makes
    its partial sums; the same for the negation of a broadcast variable."""
    flow.config.cpu_device_num(2)
    x = np.arange(28, dtype=np.float32).reshape(4, 7)

    @flow.global_function()
    def uneven(x: tp.Numpy.Placeholder((4, 7))) -> tp.Numpy:
        x = x.with_distribute(flow.distribute.split(1))
        return flow.math.reduce_sum(x, axis=1).with_distribute(flow.distribute.partial_sum()) * 2

    np.testing.assert_array_equal(uneven(x), x.sum(axis=1) * 2)
    (box,) = hinted_boxings(uneven)
    assert str(box.sbp) == "#job.nd_sbp<[partial_sum]>" and isinstance(box.x.owner, job.ReduceSumOp)

    @flow.global_function()
    def negated(x: tp.Numpy.Placeholder((4, 7))) -> tp.Numpy:
        v = flow.get_variable("v", (4, 7), initializer=flow.constant_initializer(2.0))
        return flow.math.reduce_sum(flow.math.negative(v).with_distribute(flow.distribute.partial_sum()) + x, axis=0)

    np.testing.assert_array_equal(negated(x), (x - 2).sum(axis=0))
    (box,) = hinted_boxings(negated)
    assert isinstance(box.x.owner, job.NegOp)


def test_variables_stay_logical_across_device_counts(tmp_path):
    """A model-parallel variable reads, loads and checkpoints as its whole value; 1 device reads it back."""
    x = np.random.default_rng(1).standard_normal((6, 5))
    f = predict(4, {"w": flow.distribute.split(0)})
    first = f(x)
    (w,) = [v.numpy() for name, v in flow.get_all_variables().items() if name == "w"]
    assert w.shape == (4, 5)
    np.testing.assert_allclose(first, (np.tanh(x @ w.T) ** 2).sum(axis=1), rtol=1e-12)
    changed = w[::-1] * 2.0
    flow.load_variables({"w": changed})
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), changed)
    flow.checkpoint.save(tmp_path / "ckpt")
    flow.clear_default_session()
    g = predict(1, {})
    flow.load_variables(flow.checkpoint.get(tmp_path / "ckpt"))
    np.testing.assert_allclose(g(x), (np.tanh(x @ changed.T) ** 2).sum(axis=1), rtol=1e-12)


def test_jobs_of_one_session_share_their_devices():
    f = predict(2, {})
    f(np.ones((6, 5)))
    # The session has started, so a new job compiles at its definition.
    with pytest.raises(flow.ExecutionError, match=r"runs on the device mesh \[3\], but this session's variables live on \[2\]"):

        @flow.global_function()
        def other(x: tp.Numpy.Placeholder((6, 5), dtype=flow.float64)) -> tp.Numpy:
            with flow.scope.placement("cpu", "0:0-2"):
                return x * 2.0


def test_mirrored_predict_returns_each_devices_rows():
    x = np.random.default_rng(2).standard_normal((6, 5))
    want = predict(1, {})(x)
    flow.clear_default_session()
    flow.config.cpu_device_num(3)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def f(x: tp.ListNumpy.Placeholder((2, 5), dtype=flow.float64)) -> tp.ListNumpy:
        w = flow.get_variable("w", shape=(4, 5), dtype=flow.float64,
                              initializer=flow.random_normal_initializer(0.0, 0.5))  # fmt: skip
        return flow.math.reduce_sum(flow.math.tanh(flow.matmul(x, w, transpose_b=True)) ** 2, axis=1)

    got = f([x[0:2], x[2:4], x[4:6]])
    assert isinstance(got, list) and [g.shape for g in got] == [(2,)] * 3
    np.testing.assert_allclose(np.concatenate(got), want, rtol=1e-12)
    with pytest.raises(TypeError, match=r"one array per device \(3 device\(s\) here\)"):
        f([x[0:2], x[2:4]])


def test_detect_anomaly_checks_every_device():
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.detect_anomaly(True)

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((4, 3), dtype=flow.float64)) -> tp.Numpy:
        return flow.math.sqrt(x)  # MARK-sqrt

    np.testing.assert_array_equal(f(np.full((4, 3), 4.0)), np.full((4, 3), 2.0))
    x = np.full((4, 3), 4.0)
    x[3, 0] = -1.0  # a row of the second device's split(0) piece
    with np.errstate(invalid="ignore"), pytest.raises(flow.ExecutionError, match="'sqrt' produced NaN") as err:
        f(x)
    assert err.value.location.line == line_of("MARK-sqrt")


def test_a_mirrored_view_scope_around_the_definition_makes_a_mirrored_job():
    flow.config.cpu_device_num(2)
    with flow.scope.mirrored_view():

        @flow.global_function()
        def f(x: tp.ListNumpy.Placeholder((2, 3), dtype=flow.float64)) -> tp.ListNumpy:
            return x * 2.0

    got = f([np.ones((2, 3)), np.full((2, 3), 3.0)])
    assert [g.tolist() for g in got] == [[[2.0] * 3] * 2, [[6.0] * 3] * 2]


def test_a_slice_keeps_a_split_axis_whole_on_every_device():
    """7 rows over 3 devices: the columns slice cuts each device's rows, forward and in its gradient."""
    flow.config.cpu_device_num(3)
    rng = np.random.default_rng(3)
    x, w0 = rng.standard_normal((7, 5)), rng.standard_normal((7, 5))

    @flow.global_function(type="train")
    def f(x: tp.Numpy.Placeholder((7, 5), dtype=flow.float64)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(7, 5), dtype=flow.float64, initializer=flow.zeros_initializer(),
                              distribute=flow.distribute.split(0))  # fmt: skip
        cols = flow.slice(x * w, [0, 1], [7, 2])  # begin, size: columns 1-2
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_sum(cols * cols)
        )
        return cols

    flow.load_variables({"w": w0})
    np.testing.assert_allclose(f(x), (x * w0)[:, 1:3], rtol=1e-12)
    grad = np.zeros_like(w0)
    grad[:, 1:3] = 2 * (x * w0)[:, 1:3] * x[:, 1:3]
    lr = float(np.float32(0.1))  # the schedule's rates are float32
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w0 - lr * grad, rtol=1e-12)


def test_a_softmax_over_axis_0_runs_on_column_pieces():
    """Columns split over 2 devices; softmax over the rows needs no communication (compared with numpy)."""
    flow.config.cpu_device_num(2)
    x = np.random.default_rng(4).standard_normal((3, 4, 6))

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3, 4, 6), dtype=flow.float64)) -> tp.Numpy:
        return flow.nn.softmax(flow.math.tanh(x).with_split_distribute(2), axis=1)

    e = np.exp(np.tanh(x))
    np.testing.assert_allclose(f(x), e / e.sum(axis=1, keepdims=True), rtol=1e-12)


def test_detect_anomaly_ignores_the_padding_of_uneven_pieces():
    """7 rows over 2 devices: the second piece's padding row is log(0) = -inf, which is no entry of the value."""
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.detect_anomaly(True)

    @flow.global_function(function_config=config)
    def f(x: tp.Numpy.Placeholder((7, 3), dtype=flow.float64)) -> tp.Numpy:
        return flow.math.log(x)  # MARK-log

    x = np.random.default_rng(5).uniform(1.0, 2.0, (7, 3))
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(f(x), np.log(x), rtol=1e-12)
        x[6, 2] = 0.0  # the last row: the second device's, just before its padding
        with pytest.raises(flow.ExecutionError, match="'log' produced inf") as err:
            f(x)
    assert err.value.location.line == line_of("MARK-log")


@pytest.mark.parametrize("devices", [1, 2])
def test_a_rank_0_input_runs_on_many_devices(devices):
    """A synchronous call passed a rank-0 array as rank 1 (np.ascontiguousarray), which the N-device runtime refused."""
    if devices > 1:
        flow.config.cpu_device_num(devices)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4,), dtype=flow.float64), s: tp.Numpy.Placeholder((), dtype=flow.float64)) -> tp.Numpy:
        return x * s

    np.testing.assert_array_equal(f(np.arange(4.0), np.array(3.0)), [0.0, 3.0, 6.0, 9.0])


def test_a_cast_to_integers_takes_whole_sums_not_partial_ones():
    """Each device's row sum of 0.4s is 0.8, the row's 1.6: truncating the parts gave 0 + 0 where int(1.6) is 1.
    A float cast still passes partial sums through (linear up to rounding). An integer cast hinted partial_sum
    cannot make partial sums itself: it casts whole sums, and a boxing after it makes them partial, as the hint
    asks of what its readers take."""
    flow.config.cpu_device_num(2)
    partial = flow.distribute.partial_sum()

    @flow.global_function()
    def to_float(x: tp.Numpy.Placeholder((2, 4), dtype=flow.float64)) -> tp.Numpy:
        return flow.cast(flow.math.reduce_sum(x, axis=1), flow.float32).with_distribute(partial)

    @flow.global_function()
    def chosen(x: tp.Numpy.Placeholder((2, 4), dtype=flow.float64)) -> tp.Numpy:
        return flow.cast(flow.math.reduce_sum(x, axis=1).with_distribute(partial), flow.int32)

    @flow.global_function()
    def to_int(x: tp.Numpy.Placeholder((2, 4), dtype=flow.float64)) -> tp.Numpy:
        return flow.cast(flow.math.reduce_sum(x, axis=1), flow.int32).with_distribute(partial) * 3

    x = np.full((2, 4), 0.4)
    np.testing.assert_allclose(to_float(x), [1.6, 1.6], rtol=1e-6)
    np.testing.assert_array_equal(chosen(x), [1, 1])
    np.testing.assert_array_equal(to_int(x), [3, 3])
    ops = parse_module(to_int.ir("sbp-infer")).walk()
    (cast,) = [op for op in ops if isinstance(op, job.CastOp)]
    (box,) = [use.operation for use in cast.results[0].uses]
    assert isinstance(box, job.BoxingOp) and str(box.sbp) == "#job.nd_sbp<[partial_sum]>"
    assert box.attributes["sbp_origin"].data == "hint" and cast.attributes["sbp_origin"].data != "hint"
    assert "partial" not in str(cast.properties["sbp"])


def reduce_min_sbp_in(f) -> str:
    """The SBP job.reduce_min's operand has after sbp-infer (its one axis)."""
    (op,) = [op for op in parse_module(f.ir("sbp-infer")).walk() if isinstance(op, job.ReduceMinOp)]
    return str(op.attributes["sbp_in"].data[0].components.data[0])


@pytest.mark.parametrize("devices", [2, 3, 4])
@pytest.mark.parametrize("split", [0, 1])
@pytest.mark.parametrize("dtype", [flow.int32, flow.int64, flow.float64])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_min_of_a_split_input_is_the_whole_inputs_min(devices, split, dtype, keepdims):
    """7 x 6 split unevenly along the reduced axis (0) or the kept one (1): the min over the rows is numpy's.
    Split along the reduced axis, the value is moved off it first (as for reduce_max, no partial min is offered)."""
    flow.config.cpu_device_num(devices)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((7, 6), dtype=dtype)) -> tp.Numpy:
        return flow.math.reduce_min(x.with_distribute(flow.distribute.split(split)), axis=0, keepdims=keepdims)

    rng = np.random.default_rng(devices)
    if dtype is flow.float64:
        x = rng.standard_normal((7, 6))
    else:
        info = np.iinfo(dtype.np_dtype)
        x = rng.integers(info.min, info.max, (7, 6), endpoint=True).astype(dtype.np_dtype)
        x[6, 5], x[3, 0] = info.min, info.max  # the last (padded) piece's row holds a column's minimum
    got = f(x)
    assert got.dtype == dtype.np_dtype
    np.testing.assert_array_equal(got, x.min(axis=0, keepdims=keepdims))
    assert reduce_min_sbp_in(f) in ("split(1)", "broadcast")


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("split", [0, 1])
def test_reduce_min_trains_a_split_variable(devices, split):
    """w (8 x 6) split along the rows the min is taken over, or along its columns: one SGD step of
    sum(min(x * w, axis=0) * c) moves each column's minimal entry by lr * c * x there, as by hand."""
    flow.config.cpu_device_num(devices)
    rng = np.random.default_rng(10 + devices)
    x, w0, c = rng.standard_normal((8, 6)), rng.standard_normal((8, 6)), rng.standard_normal(6)

    @flow.global_function(type="train")
    def f(x: tp.Numpy.Placeholder((8, 6), dtype=flow.float64), c: tp.Numpy.Placeholder((6,), dtype=flow.float64)
          ) -> tp.Numpy:  # fmt: skip
        w = flow.get_variable("w", shape=(8, 6), dtype=flow.float64, initializer=flow.zeros_initializer(),
                              distribute=flow.distribute.split(split))  # fmt: skip
        low = flow.math.reduce_min(x * w, axis=0)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_sum(low * c)
        )
        return low

    flow.load_variables({"w": w0})
    np.testing.assert_array_equal(f(x, c), (x * w0).min(axis=0))
    grad = np.zeros_like(w0)
    for j, i in enumerate((x * w0).argmin(axis=0)):  # random products: one minimum per column
        grad[i, j] = c[j] * x[i, j]
    lr = float(np.float32(0.1))  # the schedule's rates are float32
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w0 - lr * grad, rtol=1e-12)
