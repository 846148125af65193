"""Snapshots, checkpoints and loads from one thread while another trains: always the state between two steps."""

import sys
import threading
import time

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

STEPS = 100
X = np.linspace(-1, 1, 256, dtype=np.float32).reshape(1, 256)


@pytest.fixture(autouse=True)
def frequent_thread_switches():
    """Threads take turns every microsecond instead of every 5 ms, so a torn snapshot shows within a few steps."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def train_job():
    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((1, 256))) -> tp.Numpy:
        h = x
        for i in range(4):
            w = flow.get_variable(f"w{i}", shape=(256, 256), initializer=flow.random_normal_initializer(stddev=0.05))
            h = flow.matmul(h, w)
        loss = flow.math.reduce_sum(h * h)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-4]), momentum=0.9).minimize(loss)
        return loss

    return step


def fingerprint(variables: dict[str, np.ndarray]) -> tuple:
    return tuple(sorted((name, value.tobytes()) for name, value in variables.items()))


def states_between_steps() -> set[tuple]:
    """Every state the model passes through, one step at a time in one thread (a fresh session, same seed)."""
    step = train_job()
    step(X)
    states = {fingerprint({k: v.numpy() for k, v in flow.get_all_variables().items()})}
    for _ in range(STEPS):
        step(X)
        states.add(fingerprint({k: v.numpy() for k, v in flow.get_all_variables().items()}))
    flow.clear_default_session()
    return states


def test_snapshots_and_saves_during_training_in_another_thread(tmp_path):
    states = states_between_steps()
    step = train_job()
    step(X)  # creates the variables and the optimizer state
    def train() -> None:
        for _ in range(STEPS - 1):
            step(X)
            time.sleep(0.0005)  # an idle machine would finish before the first snapshot; steps still race them

    trainer = threading.Thread(target=train)
    torn, snapshots, saves = [], 0, 0
    deadline = time.monotonic() + 10.0
    trainer.start()
    while trainer.is_alive() and time.monotonic() < deadline:
        if snapshots % 8 == 7 and saves < 3:
            flow.checkpoint.save(tmp_path / f"ck{saves}")
            seen = flow.checkpoint.get(tmp_path / f"ck{saves}")
            saves += 1
        else:
            seen = {k: v.numpy() for k, v in flow.get_all_variables().items()}
        snapshots += 1
        if fingerprint(seen) not in states:
            torn.append(snapshots)
    trainer.join()
    assert snapshots >= 5
    assert torn == [], f"{len(torn)} of {snapshots} snapshots mixed two steps"


def test_load_variables_lands_between_steps():
    """Loads from another thread replace weights and momentum together, never half-way through a step."""
    step = train_job()
    step(X)
    start = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    trainer = threading.Thread(target=lambda: [step(X) for _ in range(STEPS)])
    trainer.start()
    loads = 0
    while trainer.is_alive() and loads < 20:
        flow.load_variables(start)
        loads += 1
    trainer.join()
    final = fingerprint({k: v.numpy() for k, v in flow.get_all_variables().items()})
    # The last load was followed by k whole steps: replay them from the start in one thread.
    flow.load_variables(start)
    states = {fingerprint(start)}
    for _ in range(STEPS):
        step(X)
        states.add(fingerprint({k: v.numpy() for k, v in flow.get_all_variables().items()}))
    assert loads >= 1 and final in states
