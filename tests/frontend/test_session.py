"""Session start-up as OneFlow does it, and resuming training in another process."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp


def define_jobs():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 5, kernel_initializer=flow.random_normal_initializer(), name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    @flow.global_function()
    def predict(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 5, name="fc")

    return train, predict


@pytest.mark.parametrize(
    "start",
    [
        flow.get_all_variables,
        flow.sync_default_session,
        lambda: flow.train.CheckPoint().init(),
        lambda: flow.load_variables({}),
    ],
    ids=["get_all_variables", "sync_default_session", "CheckPoint.init", "load_variables"],
)
def test_start_up_creates_every_variable_of_every_job(start):
    train, predict = define_jobs()
    start()
    names = set(flow.get_all_variables())
    # the train job's optimizer state and step counter exist before any call
    assert {"fc-weight", "fc-bias", "fc-weight-m", "fc-weight-v", "fc-bias-m", "fc-bias-v",
            "System-Train-TrainStep"} <= names


def test_values_handed_out_before_the_first_call_are_the_ones_it_uses():
    _, predict = define_jobs()
    values = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    expected = x @ values["fc-weight"].T + values["fc-bias"]
    np.testing.assert_allclose(predict(x), expected, rtol=1e-5)


def test_checkpoint_saved_before_any_call_holds_every_variable(tmp_path):
    define_jobs()
    flow.checkpoint.save(tmp_path / "ckpt")
    assert "fc-weight-m" in flow.checkpoint.get(tmp_path / "ckpt")


def test_optimizer_state_loads_before_the_first_call():
    train, _ = define_jobs()
    state = {"fc-weight-m": np.full((5, 3), 0.5, np.float32), "System-Train-TrainStep": np.array(7, np.int64)}
    flow.load_variables(state)
    values = flow.get_all_variables()
    np.testing.assert_array_equal(values["fc-weight-m"].numpy(), state["fc-weight-m"])
    assert int(values["System-Train-TrainStep"].numpy()) == 7
    train(np.ones((4, 3), np.float32), np.zeros(4, np.int32))
    assert int(flow.get_all_variables()["System-Train-TrainStep"].numpy()) == 8


def test_a_job_defined_after_start_up_compiles_at_once_and_shares_trained_variables():
    train, _ = define_jobs()
    x, y = np.ones((4, 3), np.float32), np.zeros(4, np.int32)
    train(x, y)
    trained = flow.get_all_variables()["fc-weight"].numpy()

    @flow.global_function()
    def late(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        h = flow.layers.dense(x, 5, name="fc")
        return flow.layers.dense(h, 2, kernel_initializer=flow.ones_initializer(), name="late")

    values = flow.get_all_variables()  # its new variables exist before it is called
    np.testing.assert_array_equal(values["late-weight"].numpy(), np.ones((2, 5), np.float32))
    np.testing.assert_array_equal(values["fc-weight"].numpy(), trained)
    hidden = x @ trained.T + values["fc-bias"].numpy()
    np.testing.assert_allclose(late(x), hidden @ np.ones((5, 2)), rtol=1e-5)


def test_a_job_that_fails_to_trace_after_start_up_leaves_the_session_as_it_was():
    define_jobs()
    flow.sync_default_session()
    before = set(flow.get_all_variables())
    with pytest.raises(flow.TraceError, match="one name is one variable"):

        @flow.global_function()
        def bad(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
            flow.get_variable("new-one", shape=(3,))
            return flow.layers.dense(x, 6, name="fc")  # fc-weight is (5, 3)

    assert set(flow.get_all_variables()) == before
    assert "new-one" not in flow.frontend.session.default_session().variables


RESUME = textwrap.dedent(
    """
    import sys
    import numpy as np
    import irflow as flow
    import irflow.typing as tp

    mode, path, k, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 5)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, 16, activation=flow.nn.relu, kernel_initializer=flow.random_normal_initializer(), name="h")
        logits = flow.layers.dense(h, 3, kernel_initializer=flow.random_normal_initializer(), name="out")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        # the learning rate drops after step k + 1: the step counter must resume too
        schedule = flow.optimizer.PiecewiseConstantScheduler([k + 1], [0.05, 0.01])
        flow.optimizer.Adam(schedule).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    batches = [(rng.random((8, 5), dtype=np.float32), rng.integers(0, 3, 8).astype(np.int32)) for _ in range(k + m)]
    if mode == "first":
        for x, y in batches[:k]:
            train(x, y)
        flow.checkpoint.save(path)
    else:
        if mode != "full":
            saved = flow.checkpoint.get(path)
            if mode == "weights-only":
                saved = {name: value for name, value in saved.items() if name.count("-") == 1}
            flow.load_variables(saved)
        for x, y in batches[k:] if mode != "full" else batches:
            train(x, y)
        np.savez(path + "." + mode + ".npz", **{n: v.numpy() for n, v in flow.get_all_variables().items()})
    """
)


def test_resuming_in_a_new_process_continues_the_same_run(tmp_path):
    path, k, m = str(tmp_path / "ckpt"), "3", "4"
    for mode in ("full", "first", "resumed", "weights-only"):
        subprocess.run([sys.executable, "-c", RESUME, mode, path, k, m], check=True, timeout=300)
    full, resumed = np.load(path + ".full.npz"), np.load(path + ".resumed.npz")
    assert sorted(full.files) == sorted(resumed.files)
    assert int(resumed["System-Train-TrainStep"]) == 7
    for name in full.files:
        np.testing.assert_allclose(resumed[name], full[name], rtol=1e-6, atol=0, err_msg=name)
    # the oracle can fail: restoring the weights alone (momentum and step restart) gives another run
    weights_only = np.load(path + ".weights-only.npz")
    assert not np.allclose(weights_only["out-weight"], full["out-weight"], rtol=1e-4)


def test_a_failed_start_up_undoes_itself(monkeypatch):
    import irflow.compiler
    from irflow.frontend.session import default_session

    train, predict = define_jobs()
    real = irflow.compiler.compile_job

    def failing(module, name, *args, **kwargs):
        if name == "predict":
            raise flow.CompileError("no backend today")
        return real(module, name, *args, **kwargs)

    monkeypatch.setattr(irflow.compiler, "compile_job", failing)
    with pytest.raises(flow.CompileError, match="no backend today"):
        train(np.ones((4, 3), np.float32), np.zeros(4, np.int32))
    session = default_session()
    assert not session.started and session._store is None  # the train job's variables went too
    monkeypatch.setattr(irflow.compiler, "compile_job", real)
    train(np.ones((4, 3), np.float32), np.zeros(4, np.int32))
    assert int(flow.get_all_variables()["System-Train-TrainStep"].numpy()) == 1
