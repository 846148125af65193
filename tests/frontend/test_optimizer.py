"""flow.optimizer: the schedulers and optimizers as a train job runs them, against numpy and PyTorch."""

import math  # no `from __future__ import annotations`: the jobs' annotations are evaluated

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.dialects import job
from irflow.runtime.attributes import python_value

STEPS = 12


def rates_seen(scheduler: flow.optimizer.LrScheduler, steps: int = STEPS) -> list[float]:
    """The rate of each train step, read back from plain SGD on loss = sum(w): every step moves w by -lr."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,), dtype=flow.float64)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), dtype=flow.float64, initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(scheduler, momentum=0).minimize(loss)
        return loss

    seen, before = [], 0.0
    for _ in range(steps):
        train(np.ones(2))
        after = float(flow.get_all_variables()["w"].numpy()[0])
        seen.append(before - after)
        before = after
    return seen


def f32(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(np.float64)  # the rate is a float32 scalar, as in OneFlow


SCHEDULERS = {
    "exponential": (lambda: flow.optimizer.ExponentialScheduler(0.5, 4, 0.6),
                    [0.5 * 0.6 ** (k / 4) for k in range(STEPS)]),
    "exponential-staircase": (lambda: flow.optimizer.ExponentialScheduler(0.5, 4, 0.6, staircase=True),
                              [0.5 * 0.6 ** (k // 4) for k in range(STEPS)]),
    "inverse-time": (lambda: flow.optimizer.InverseTimeScheduler(0.5, 3, 0.9, staircase=True),
                     [0.5 / (1 + 0.9 * (k // 3)) for k in range(STEPS)]),
    "natural-exp": (lambda: flow.optimizer.NaturalExpScheduler(0.5, 5, 0.5),
                    [0.5 * math.exp(-0.5 * k / 5) for k in range(STEPS)]),
    "polynomial": (lambda: flow.optimizer.PolynomialScheduler(0.5, 5, power=2.0),
                   [(0.5 - 1e-4) * (1 - min(k, 5) / 5) ** 2 + 1e-4 for k in range(STEPS)]),
    "polynomial-cycle": (lambda: flow.optimizer.PolynomialScheduler(0.5, 4, end_learning_rate=0.0, cycle=True),
                         [0.5 * (1 - max(k, 1) / (4 * math.ceil(max(k, 1) / 4))) for k in range(STEPS)]),
    "linear-cosine": (lambda: flow.optimizer.LinearCosineScheduler(0.5, 8),
                      [0.5 * ((8 - min(k, 8)) / 8 * 0.5 * (1 + math.cos(math.pi * min(k, 8) / 8)) + 0.001)
                       for k in range(STEPS)]),
    "piecewise-scaling": (lambda: flow.optimizer.PiecewiseScalingScheduler(0.5, [3, 7], [0.5, 0.1]),
                          [0.5 if k <= 3 else 0.25 if k <= 7 else 0.05 for k in range(STEPS)]),
    "piecewise-scaling-one-scale": (lambda: flow.optimizer.PiecewiseScalingScheduler(0.5, [3, 7], 0.5),
                                    [0.5 if k <= 3 else 0.25 for k in range(STEPS)]),  # scales do not compound
    "exponential-warmup": (
        lambda: flow.optimizer.ExponentialScheduler(0.5, 2, 0.5, warmup=flow.optimizer.warmup.linear(4, 0.2)),
        [0.5 * (0.2 + 0.8 * k / 4) if k < 4 else 0.5 * 0.5 ** (k / 2) for k in range(STEPS)],
    ),
}


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_sets_each_steps_rate_in_a_train_job(name: str):
    make, expected = SCHEDULERS[name]
    np.testing.assert_allclose(rates_seen(make()), f32(expected), rtol=1e-12, atol=1e-15)


def test_the_schedule_is_an_op_of_the_compiled_job():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        loss = flow.math.reduce_sum(x * flow.get_variable("w", shape=(2,)))
        scheduler = flow.optimizer.PolynomialScheduler(0.1, 10, cycle=True)
        flow.optimizer.SGD(scheduler).minimize(loss)
        return loss

    module = train.module.clone()
    run_pipeline(module, "autodiff,optimizer")
    (lr,) = [op for op in module.walk() if isinstance(op, job.LearningRateOp)]
    schedule = lr.schedule.data
    assert schedule["kind"].data == "polynomial" and python_value(schedule["cycle"]) is True
    assert schedule["end_learning_rate"].value.data == 0.0001 and schedule["power"].value.data == 1.0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: flow.optimizer.ExponentialScheduler(0.1, 0, 0.5), "ExponentialScheduler: steps must be a positive"),
        (lambda: flow.optimizer.NaturalExpScheduler(0.1, 2.5, 0.5), "NaturalExpScheduler: steps must be a positive"),
        (lambda: flow.optimizer.PiecewiseScalingScheduler(0.1, [5, 10], [0.5]), "a scale per boundary"),
        (lambda: flow.optimizer.PiecewiseScalingScheduler(0.1, [10, 5], 0.5), "boundaries must be increasing"),
        (lambda: flow.optimizer.PolynomialScheduler(0.1, -1), "PolynomialScheduler: steps must be a positive"),
    ],
)
def test_bad_scheduler_arguments(make, message: str):
    with pytest.raises(ValueError, match=message):
        make()
