"""Ctrl-C during a step takes effect when the step ends (irflow/runtime/interrupts.py)."""

import os
import signal
import threading

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.runtime.interrupts import deferring
from irflow.runtime.kernels.registry import KERNELS

LR, BETA = 0.1, 0.9


def define_train():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4, 3)), y: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 2, kernel_initializer=flow.random_normal_initializer(), name="fc")
        loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum=BETA).minimize(loss)
        return loss

    return train


def numpy_steps(w, b, batches):
    """Weights after momentum SGD on mean cross-entropy, in float64."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    for x, y in batches:
        logits = x @ w.T + b
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        g = p / len(y)
        vw, vb = BETA * vw + g.T @ x, BETA * vb + g.sum(axis=0)
        w, b = w - LR * vw, b - LR * vb
    return w, b


def interrupting(factory, times: int):
    """`factory`'s kernels, the first `times` runs of which send this process SIGINT before they run."""
    sent = []

    def wrapped(xp, attrs, ins, outs):
        run = factory(xp, attrs, ins, outs)

        def interrupted():
            if len(sent) < times:
                sent.append(True)
                os.kill(os.getpid(), signal.SIGINT)
            run()

        return interrupted

    return wrapped


def test_a_step_interrupted_in_its_updates_finishes_them_then_raises(monkeypatch):
    """SIGINT arrives while the first of two variables is updated: the call raises KeyboardInterrupt
    after the step, so both weights, both momenta and the step counter moved together, and the next
    step continues from a whole step (without the deferral the bias kept its initial value)."""
    monkeypatch.setitem(KERNELS, "momentum_update", interrupting(KERNELS["momentum_update"], 1))
    train = define_train()
    rng = np.random.default_rng(0)
    batches = [(rng.random((4, 3), np.float32), np.array([0, 1, 1, 0], np.int32)) for _ in range(2)]
    flow.train.CheckPoint().init()
    state = flow.get_all_variables()
    w0, b0 = state["fc-weight"].numpy(), state["fc-bias"].numpy()
    with pytest.raises(KeyboardInterrupt):
        train(*batches[0])
    assert flow.get_all_variables()["System-Train-TrainStep"].numpy() == 1
    train(*batches[1])
    state = flow.get_all_variables()
    w, b = numpy_steps(w0, b0, batches)
    np.testing.assert_allclose(state["fc-weight"].numpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state["fc-bias"].numpy(), b, rtol=1e-5, atol=1e-6)
    assert state["System-Train-TrainStep"].numpy() == 2


def test_outside_a_step_ctrl_c_acts_at_once():
    deferring(lambda: None)  # irflow's handler is in place from here
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between two bytecodes, here
            pass


def test_a_step_that_fails_and_is_interrupted_raises_both():
    def step():
        os.kill(os.getpid(), signal.SIGINT)
        raise ValueError("kernel failed")

    with pytest.raises(KeyboardInterrupt) as info:
        deferring(step)
    assert isinstance(info.value.__context__, ValueError)


def test_off_the_main_thread_steps_run_as_they_are():
    ran = []
    worker = threading.Thread(target=deferring, args=(lambda: ran.append(threading.current_thread().name),))
    worker.start()
    worker.join()
    assert len(ran) == 1
