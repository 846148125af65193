"""Calling jobs: input and return annotations, callbacks, call-time checks, sessions and seeds."""

import runpy
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

ROOT = Path(__file__).resolve().parents[2]
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# --------------------------------------------------------------- returns


def test_numpy_list_numpy_and_list_list_numpy():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return x * 2

    @flow.global_function()
    def g(x: tp.ListNumpy.Placeholder((2, 3))) -> tp.ListNumpy:
        return x + 1

    @flow.global_function()
    def h(x: tp.ListListNumpy.Placeholder((2, 3))) -> tp.ListListNumpy:
        return x - 1

    x = f32(2, 3)
    out = f(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, x * 2)
    (y,) = g([x])
    np.testing.assert_allclose(y, x + 1)
    ((z,),) = h([[x]])
    np.testing.assert_allclose(z, x - 1)


def test_nested_tuple_list_dict_returns():
    @flow.global_function()
    def f(
        a: tp.Numpy.Placeholder((2,)), b: tp.Numpy.Placeholder((3,))
    ) -> Tuple[tp.Numpy, List[tp.ListNumpy], Dict[str, tp.Numpy], Tuple[tp.Numpy, ...]]:
        return a, [a, b], {"twice": b * 2, "same": a}, (a, b, a)

    a, b = f32(2), f32(3)
    out = f(a, b)
    assert isinstance(out, tuple) and len(out) == 4
    np.testing.assert_allclose(out[0], a)
    assert isinstance(out[1], list) and [len(x) for x in out[1]] == [1, 1]
    np.testing.assert_allclose(out[1][1][0], b)
    assert list(out[2]) == ["twice", "same"]
    np.testing.assert_allclose(out[2]["twice"], b * 2)
    assert isinstance(out[3], tuple) and len(out[3]) == 3


@pytest.mark.parametrize(
    "make, check",
    [
        (lambda x: x, lambda o, x: np.testing.assert_allclose(o, x)),
        (lambda x: [x], lambda o, x: np.testing.assert_allclose(o[0], x)),
        (lambda x: (x,), lambda o, x: isinstance(o, tuple) and np.testing.assert_allclose(o[0], x)),
        (lambda x: {"k": x}, lambda o, x: np.testing.assert_allclose(o["k"], x)),
        (
            lambda x: {"a": [x, (x, {"deep": x * 3})], "b": x},
            lambda o, x: np.testing.assert_allclose(o["a"][1][1]["deep"], x * 3),
        ),
    ],
)
def test_bundle_nestings(make, check):
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Bundle[tp.Numpy]:
        return make(x)

    x = f32(2)
    out = f(x)
    check(out, x)
    assert type(out) is type(make(np.zeros(2, np.float32)))


def test_bundle_of_list_numpy():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Bundle[tp.ListNumpy]:
        return {"x": x, "both": (x, x)}

    out = f(f32(2))
    assert len(out["x"]) == 1 and len(out["both"][1]) == 1


def test_tuple_parameters():
    @flow.global_function()
    def f(pair: Tuple[tp.Numpy.Placeholder((2,)), tp.Numpy.Placeholder((2,))]) -> tp.Numpy:
        a, b = pair
        return a - b

    a, b = f32(2), f32(2)
    np.testing.assert_allclose(f((a, b)), a - b)


def test_none_return_and_keyword_arguments():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,)), y: tp.Numpy.Placeholder((2,))) -> None:
        x + y

    assert f(y=f32(2), x=f32(2)) is None


def test_returning_a_placeholder_and_the_same_blob_twice():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3,)), labels: tp.Numpy.Placeholder((3,), dtype=flow.int32)) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy]:
        return labels, x, x

    x, labels = f32(3), np.array([1, 2, 3], np.int32)
    out = f(x, labels)
    np.testing.assert_array_equal(out[0], labels)
    assert out[0].dtype == np.int32
    np.testing.assert_array_equal(out[1], out[2])


# --------------------------------------------------------------- callbacks


def test_callback_of_tuples_in_call_order():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((4,))) -> tp.Callback[Tuple[tp.Numpy, tp.Numpy]]:
        return x, x * 2

    seen = []
    inputs = [f32(4) for _ in range(20)]
    for x in inputs:
        f(x)(lambda result: seen.append(result))
    flow.sync_default_session()
    assert len(seen) == 20
    for x, (a, b) in zip(inputs, seen):
        np.testing.assert_allclose(a, x)
        np.testing.assert_allclose(b, x * 2)


def test_callback_inputs_are_copied_before_the_call_returns():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3,))) -> tp.Callback[tp.Numpy]:
        return x + 0

    seen = []
    buffer = np.zeros(3, np.float32)
    for i in range(10):
        buffer[:] = i
        f(buffer)(seen.append)
    flow.sync_default_session()
    assert [int(s[0]) for s in seen] == list(range(10))


def test_handler_registered_late_still_runs_in_order():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
        return x

    seen = []
    first = f(np.array([1.0], np.float32))
    f(np.array([2.0], np.float32))(lambda r: seen.append(float(r[0])))
    time.sleep(0.05)
    assert seen == []  # the first call's handler is not registered yet
    first(lambda r: seen.append(float(r[0])))
    flow.sync_default_session()
    assert seen == [1.0, 2.0]


def test_exception_in_a_handler_is_raised_at_the_next_sync():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
        return x

    def boom(result):
        raise ValueError("handler failed")

    ok = []
    f(np.ones(1, np.float32))(boom)
    f(np.ones(1, np.float32))(ok.append)
    with pytest.raises(ValueError, match="handler failed"):
        flow.sync_default_session()
    assert len(ok) == 1  # later handlers still ran
    flow.sync_default_session()  # raised once, then gone


def test_exception_in_a_handler_is_raised_at_the_next_call():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
        return x

    @flow.global_function()
    def g(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        return x

    def boom(result):
        raise KeyError("late")

    f(np.ones(1, np.float32))(boom)
    time.sleep(0.1)
    with pytest.raises(KeyError, match="late"):
        g(np.ones(1, np.float32))
    np.testing.assert_array_equal(g(np.ones(1, np.float32)), [1.0])


def test_a_handler_may_call_jobs():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
        return x + 1

    @flow.global_function()
    def g(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        return x * 10

    seen = []
    for i in range(5):
        f(np.full(1, i, np.float32))(lambda r: seen.append(float(g(r)[0])))
    flow.sync_default_session()
    assert seen == [10.0, 20.0, 30.0, 40.0, 50.0]


def test_sync_and_async_calls_stay_in_order():
    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((1,))) -> tp.Callback[tp.Numpy]:
        v = flow.get_variable("count", shape=(1,), initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(v * x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return v  # the value this step saw, not the updated one

    @flow.global_function()
    def read() -> tp.Numpy:
        return flow.get_variable("count", shape=(1,)) + 0

    seen = []
    for _ in range(5):
        step(np.ones(1, np.float32))(lambda r: seen.append(float(r[0])))
    assert float(read()[0]) == -5.0  # every earlier step has run
    flow.sync_default_session()
    assert seen == [0.0, -1.0, -2.0, -3.0, -4.0]


# --------------------------------------------------------------- call-time checks


@pytest.fixture
def counter_job():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3)), y: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Callback[tp.Numpy]:
        logits = flow.layers.dense(x, 4, kernel_initializer=flow.random_normal_initializer(), name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
        return loss

    return train


def test_wrong_inputs_change_nothing(counter_job):
    x, y = f32(2, 3), np.array([1, 2], np.int32)
    seen = []
    counter_job(x, y)(seen.append)
    flow.sync_default_session()
    before = {k: v.numpy() for k, v in flow.get_all_variables().items()}

    bad_calls = [
        ((f32(2, 4), y), flow.ExecutionError, r"argument 'x': expected shape \(2, 3\), given \(2, 4\)"),
        ((x.astype(np.float64), y), flow.ExecutionError, "argument 'x': expected dtype float32, given float64"),
        ((x, y.astype(np.int64)), flow.ExecutionError, "argument 'y': expected dtype int32, given int64"),
        ((x,), TypeError, r"train\(\) takes 2 argument\(s\) \(x, y\)"),
        ((x, y, y), TypeError, "takes 2 argument"),
        ((x.tolist(), y), TypeError, "argument 'x' must be a numpy.ndarray of shape"),
    ]
    for args, error, message in bad_calls:
        with pytest.raises(error, match=message):
            counter_job(*args)
    flow.sync_default_session()
    after = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    assert len(seen) == 1


def test_input_errors_carry_the_callers_line():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return x

    with pytest.raises(flow.ExecutionError) as info:
        f(np.zeros(3, np.float32))
    assert info.value.location.file == __file__


def test_list_numpy_inputs_are_checked():
    @flow.global_function()
    def f(x: tp.ListNumpy.Placeholder((2,))) -> tp.Numpy:
        return x

    with pytest.raises(TypeError, match="one array per device"):
        f(np.zeros(2, np.float32))
    with pytest.raises(flow.ExecutionError, match="expected shape"):
        f([np.zeros(3, np.float32)])


def test_jobs_of_a_cleared_session_refuse_calls():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((1,))) -> tp.Numpy:
        return x

    f(np.zeros(1, np.float32))
    flow.clear_default_session()
    with pytest.raises(flow.ExecutionError, match="define it again"):
        f(np.zeros(1, np.float32))


# --------------------------------------------------------------- variables, seeds, checkpoints


def make_initialized_job():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3, 4))) -> tp.Numpy:
        return flow.layers.dense(
            x, 5, kernel_initializer=flow.truncated_normal(0.1), bias_initializer=flow.random_uniform_initializer(), name="d"
        )

    return f


def test_same_seed_same_values():
    x = f32(3, 4)
    flow.random.seed(42)
    first = make_initialized_job()(x)
    flow.clear_default_session()
    flow.random.seed(42)
    again = make_initialized_job()(x)
    flow.clear_default_session()
    flow.random.seed(43)
    other = make_initialized_job()(x)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_seed_after_variables_exist_is_an_error():
    make_initialized_job()(f32(3, 4))
    with pytest.raises(flow.ExecutionError, match="set the seed before the first call"):
        flow.random.seed(1)


def test_initial_values_follow_the_initializers():
    make_initialized_job()(f32(3, 4))
    v = flow.get_all_variables()
    w, b = v["d-weight"].numpy(), v["d-bias"].numpy()
    assert w.shape == (5, 4) and np.abs(w).max() <= 0.2 and w.std() > 0.01
    assert b.min() >= 0.0 and b.max() < 1.0


def test_load_variables_is_checked_and_all_or_nothing():
    f = make_initialized_job()
    x = f32(3, 4)
    f(x)
    w = flow.get_all_variables()["d-weight"].numpy()
    with pytest.raises(flow.ExecutionError, match=r"unknown names \['nope'\], no value for \['d-bias'\]"):
        flow.load_variables({"d-weight": np.zeros((5, 4), np.float32), "nope": np.zeros(1)}, ignore_mismatch=False)
    with pytest.raises(flow.ExecutionError, match=r"'d-bias' is float32 \(5,\), given float32 \(4,\)"):
        flow.load_variables({"d-weight": np.zeros((5, 4), np.float32), "d-bias": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(flow.get_all_variables()["d-weight"].numpy(), w)
    flow.load_variables({"d-weight": np.zeros((5, 4), np.float32), "d-bias": np.ones(5, np.float32), "other": x})
    np.testing.assert_array_equal(f(x), np.ones((3, 5), np.float32))  # unknown names skipped, as OneFlow


def test_load_variables_before_the_first_call():
    f = make_initialized_job()
    flow.load_variables({"d-weight": np.zeros((5, 4), np.float32), "d-bias": np.full(5, 2, np.float32)})
    np.testing.assert_array_equal(f(f32(3, 4)), np.full((3, 5), 2, np.float32))


def test_checkpoint_save_and_get_round_trip(tmp_path, counter_job):
    x, y = f32(2, 3), np.array([0, 3], np.int32)
    counter_job(x, y)(lambda _: None)
    flow.checkpoint.save(tmp_path / "ckpt")
    saved = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    counter_job(x, y)(lambda _: None)  # moves the weights on
    restored = flow.checkpoint.get(tmp_path / "ckpt")
    assert restored.keys() == saved.keys()
    flow.load_variables(restored)
    for k, v in flow.get_all_variables().items():
        np.testing.assert_array_equal(v.numpy(), saved[k])


# --------------------------------------------------------------- watch, IR, placement


def test_watch_sees_every_call():
    seen, listed = [], []

    def handler(y: tp.Numpy):
        seen.append(y)

    def list_handler(y: tp.ListNumpy):
        listed.append(y)

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        y = flow.math.relu(x)
        flow.watch(y, handler)
        flow.watch(x * 2, list_handler)
        return y + 1

    xs = [f32(3) for _ in range(3)]
    for x in xs:
        np.testing.assert_allclose(f(x), np.maximum(x, 0) + 1)
    assert len(seen) == 3 and len(listed) == 3
    np.testing.assert_allclose(seen[1], np.maximum(xs[1], 0))
    np.testing.assert_allclose(listed[2][0], xs[2] * 2)


def test_ir_stages_and_dump(tmp_path, monkeypatch):
    monkeypatch.setenv("IRFLOW_DUMP_IR", str(tmp_path))

    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.exp(x)

    traced = f.ir("job")
    assert "job.exp" in traced
    f(np.zeros(2, np.float32))
    assert "buffer" in f.ir("buffer") or "buffer." in f.ir("buffer")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files and all(name.startswith("f.") and name.endswith(".mlir") for name in files)
    assert any(".job." in name for name in files) and any(".buffer." in name for name in files)


def test_gpu_placement_falls_back_with_one_warning():
    from irflow.runtime.backend import gpu_module

    if gpu_module() is not None:
        pytest.skip("a GPU is usable here")

    def make(i):
        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            with flow.scope.placement("gpu", "0:0"):
                return x * i

        return f

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            np.testing.assert_allclose(make(i)(np.ones(2, np.float32)), [i, i])
    gpu = [w for w in caught if "no usable GPU" in str(w.message)]
    assert len(gpu) == 1 and gpu[0].category is RuntimeWarning


# --------------------------------------------------------------- the documentation's programs


@pytest.fixture
def examples_on_path(monkeypatch):
    """`python examples/x.py` puts examples/ on sys.path, so that a script can import `models`; runpy does not."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


@pytest.mark.usefixtures("examples_on_path")
@pytest.mark.parametrize("script", ["mlp_predict.py", "lenet_eval.py", "lenet_eval_callback.py"])
def test_examples_run(script, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [script])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        namespace = runpy.run_path(str(ROOT / "examples" / script), run_name="__main__")
    assert "accuracy:" in capsys.readouterr().out
    assert namespace["g_total"] == 1000


@pytest.mark.usefixtures("examples_on_path")
def test_mlp_train_then_predict_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    checkpoint = str(tmp_path / "mlp")
    monkeypatch.setattr(sys, "argv", ["mlp_train.py", checkpoint])
    trained = runpy.run_path(str(ROOT / "examples" / "mlp_train.py"), run_name="__main__")
    losses = trained["g_losses"]
    assert len(losses) == 40 and np.mean(losses[-5:]) < 0.5 * losses[0]
    train_accuracy = capsys.readouterr().out.split("accuracy: ")[1].split("%")[0]
    assert float(train_accuracy) > 70

    flow.clear_default_session()
    monkeypatch.setattr(sys, "argv", ["mlp_predict.py", checkpoint])
    runpy.run_path(str(ROOT / "examples" / "mlp_predict.py"), run_name="__main__")
    assert capsys.readouterr().out.split("accuracy: ")[1].split("%")[0] == train_accuracy


@pytest.mark.usefixtures("examples_on_path")
def test_lenet_train_steps_lower_the_loss():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        namespace = runpy.run_path(str(ROOT / "examples" / "lenet_train.py"))
        (images, labels), _ = flow.data.load_mnist(100)
        losses = [float(namespace["train_job"](images[0], labels[0]).mean()) for _ in range(3)]
    assert losses[-1] < losses[0]


def test_older_checkpoint_api(tmp_path):
    f = make_initialized_job()
    check_point = flow.train.CheckPoint()
    check_point.init()
    x = f32(3, 4)
    before = f(x)
    check_point.save(str(tmp_path / "old"))
    flow.load_variables({"d-weight": np.zeros((5, 4), np.float32)})
    check_point.load(str(tmp_path / "old"))
    np.testing.assert_array_equal(f(x), before)
