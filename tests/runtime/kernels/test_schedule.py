"""learning_rate: every schedule against numpy of OneFlow's formula, and against PyTorch's scheduler where one
computes the same rate, step by step past every boundary and the end of the decay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from irflow.runtime.kernels.schedule import make_schedule

torch = pytest.importorskip("torch")
STEPS = 15


def oneflow_rates(schedule: dict, count: int = STEPS) -> np.ndarray:
    """OneFlow's documented formulas, vectorized over the steps 0..count-1 (no warmup)."""
    s = np.arange(count, dtype=np.float64)
    kind = schedule["kind"]
    if kind == "piecewise_scaling":
        scales = np.array([1.0, *schedule["scales"]])
        return schedule["base_lr"] * scales[np.searchsorted(schedule["boundaries"], s, side="left")]
    base, steps = schedule["base_lr"], schedule["steps"]
    if kind in ("exponential", "inverse_time", "natural_exp"):
        p = s / steps
        if schedule["staircase"]:
            p = np.floor(p)
        rate = schedule["decay_rate"]
        return {"exponential": base * np.power(rate, p), "inverse_time": base / (1 + rate * p),
                "natural_exp": base * np.exp(-rate * p)}[kind]
    if kind == "polynomial":
        end, power = schedule["end_learning_rate"], schedule["power"]
        if schedule["cycle"]:
            s = np.maximum(s, 1.0)  # OneFlow's kernel: ceil(0 / steps) would give a zero-length first cycle
            length = steps * np.ceil(s / steps)
        else:
            s, length = np.minimum(s, steps), steps
        return (base - end) * np.power(1 - s / length, power) + end
    assert kind == "linear_cosine"
    s = np.minimum(s, steps)
    linear = (steps - s) / steps
    cosine = 0.5 * (1 + np.cos(2 * np.pi * schedule["num_periods"] * s / steps))
    return base * ((schedule["alpha"] + linear) * cosine + schedule["beta"])


def decay_rate(kind: str, base_lr: float, steps: int, rate: float, staircase: bool) -> dict:
    return {"kind": kind, "base_lr": base_lr, "steps": steps, "decay_rate": rate, "staircase": staircase}


def polynomial(steps: int, end: float, power: float, cycle: bool) -> dict:
    return {"kind": "polynomial", "base_lr": 0.5, "steps": steps, "end_learning_rate": end, "power": power,
            "cycle": cycle}


SCHEDULES = {
    "exponential": decay_rate("exponential", 0.5, 4, 0.6, False),
    "exponential-staircase": decay_rate("exponential", 0.5, 4, 0.6, True),
    "inverse-time": decay_rate("inverse_time", 0.5, 3, 0.9, False),
    "inverse-time-staircase": decay_rate("inverse_time", 0.5, 3, 0.9, True),
    "natural-exp": decay_rate("natural_exp", 0.5, 5, 0.5, False),
    "natural-exp-staircase": decay_rate("natural_exp", 0.5, 5, 0.5, True),
    "polynomial": polynomial(6, 0.01, 2.0, False),
    "polynomial-cycle": polynomial(4, 0.01, 2.0, True),
    "polynomial-cycle-sqrt": polynomial(5, 0.0, 0.5, True),
    "linear-cosine": {"kind": "linear_cosine", "base_lr": 0.5, "steps": 10, "num_periods": 0.5, "alpha": 0.0,
                      "beta": 0.001},
    "linear-cosine-periods": {"kind": "linear_cosine", "base_lr": 0.5, "steps": 8, "num_periods": 2.0, "alpha": 0.2,
                              "beta": 0.05},
    "piecewise-scaling": {"kind": "piecewise_scaling", "base_lr": 0.5, "boundaries": [3, 7, 8],
                          "scales": [0.5, 0.1, 0.01]},
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_matches_numpy_of_oneflows_formula(name: str):
    rate = make_schedule(SCHEDULES[name])
    np.testing.assert_allclose([rate(step) for step in range(STEPS)], oneflow_rates(SCHEDULES[name]), rtol=1e-13)


def test_hand_computed_points():
    """A few values worked out by hand, so the numpy oracle is checked too."""
    poly = make_schedule(polynomial(4, 0.0, 1.0, True))
    # cycle: step 0 counts as 1 -> 0.5 * 3/4; step 4 ends the first cycle at 0; step 5 is 1 - 5/8 of the second
    assert [poly(0), poly(1), poly(4), poly(5)] == [0.375, 0.375, 0.0, 0.5 * 3 / 8]
    inverse = make_schedule(decay_rate("inverse_time", 1.0, 2, 0.5, True))
    assert [inverse(1), inverse(2), inverse(5)] == [1.0, 1 / 1.5, 1 / 2.0]
    scaling = make_schedule(SCHEDULES["piecewise-scaling"])
    assert [scaling(3), scaling(4), scaling(8), scaling(9)] == [0.5, 0.25, 0.05, 0.005]
    cosine = make_schedule(SCHEDULES["linear-cosine"])
    assert math.isclose(cosine(5), 0.5 * (0.5 * 0.5 + 0.001)) and math.isclose(cosine(12), 0.5 * 0.001)


def torch_rates(base_lr: float, make) -> list[float]:
    """The rate PyTorch's scheduler gives at each of STEPS steps."""
    param = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([param], lr=base_lr)
    scheduler = make(opt)
    rates = []
    for _ in range(STEPS):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    return rates


sched = torch.optim.lr_scheduler
SAME_AS_TORCH = {
    "exponential-staircase": lambda o: sched.StepLR(o, step_size=4, gamma=0.6),
    "exponential": lambda o: sched.ExponentialLR(o, gamma=0.6 ** (1 / 4)),
    "natural-exp-staircase": lambda o: sched.StepLR(o, step_size=5, gamma=math.exp(-0.5)),
    "natural-exp": lambda o: sched.ExponentialLR(o, gamma=math.exp(-0.5 / 5)),
    # OneFlow keeps the old rate at a boundary step; MultiStepLR changes it there: milestones one later.
    "piecewise-scaling-multistep": lambda o: sched.MultiStepLR(o, milestones=[4, 8], gamma=0.1),
    "polynomial-end-0": lambda o: sched.PolynomialLR(o, total_iters=6, power=2.0),
}
OURS_FOR_TORCH = {
    **SCHEDULES,
    "piecewise-scaling-multistep": {"kind": "piecewise_scaling", "base_lr": 0.5, "boundaries": [3, 7],
                                    "scales": [0.1, 0.01]},
    "polynomial-end-0": polynomial(6, 0.0, 2.0, False),
}


@pytest.mark.parametrize("name", SAME_AS_TORCH)
def test_schedule_matches_pytorchs_scheduler(name: str):
    schedule = OURS_FOR_TORCH[name]
    rate = make_schedule(schedule)
    expected = torch_rates(schedule["base_lr"], SAME_AS_TORCH[name])
    np.testing.assert_allclose([rate(step) for step in range(STEPS)], expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["polynomial-cycle", "piecewise-scaling", "natural-exp-staircase"])
def test_warmup_scales_the_base_rate_then_hands_over_at_the_same_step(name: str):
    warmup = {"kind": "linear", "steps": 5, "multiplier": 0.2}
    rate = make_schedule({**SCHEDULES[name], "warmup": warmup})
    base = SCHEDULES[name]["base_lr"]
    expected = oneflow_rates(SCHEDULES[name])
    expected[:5] = base * (0.2 + 0.8 * np.arange(5) / 5)
    np.testing.assert_allclose([rate(step) for step in range(STEPS)], expected, rtol=1e-13)
