"""learning_rate: the learning-rate schedule evaluated at the current train step.

The schedule dictionary is the one the `optimizer` pass validates and writes
on `job.learning_rate` (docs/training.md).  Semantics follow OneFlow's
learning-rate schedule kernel: while `step < warmup.steps` the warmup rule
scales the schedule's base rate; afterwards the decay rule is evaluated at
the same (unshifted) step.  `step` counts finished train steps, from 0.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from .registry import Array, Run, register

Schedule = Callable[[int], float]


def _piecewise(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """values[i] for boundaries[i-1] < step <= boundaries[i], as OneFlow and tf piecewise_constant.

    piecewise_scaling's values are base_lr times (1, *scales).
    """
    boundaries = [int(b) for b in schedule["boundaries"]]
    if schedule["kind"] == "piecewise_constant":
        values = [float(v) for v in schedule["values"]]
    else:
        values = [float(schedule["base_lr"]) * s for s in (1.0, *schedule["scales"])]
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"learning_rate: {len(boundaries)} boundaries need {len(boundaries) + 1} values")
    return values[0], lambda step: values[bisect.bisect_left(boundaries, step)]


def _cosine(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """base * ((1 - alpha) * (1 + cos(pi * s / steps)) / 2 + alpha), s = min(step, steps)."""
    base, steps, alpha = float(schedule["base_lr"]), int(schedule["steps"]), float(schedule.get("alpha", 0.0))

    def rate(step: int) -> float:
        done = min(step, steps) / steps
        return base * ((1.0 - alpha) * 0.5 * (1.0 + math.cos(math.pi * done)) + alpha)

    return base, rate


def _linear_cosine(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """base * ((alpha + (steps - s) / steps) * (1 + cos(2 pi num_periods s / steps)) / 2 + beta), s = min(step, steps)."""
    base, steps = float(schedule["base_lr"]), int(schedule["steps"])
    periods, alpha, beta = float(schedule["num_periods"]), float(schedule["alpha"]), float(schedule["beta"])

    def rate(step: int) -> float:
        done = min(step, steps)
        cosine = 0.5 * (1.0 + math.cos(2.0 * math.pi * periods * done / steps))
        return base * ((alpha + (steps - done) / steps) * cosine + beta)

    return base, rate


def _polynomial(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """(base - end) * (1 - s / length) ** power + end: s = min(step, steps) and length = steps, or with `cycle`
    s = step and length the first multiple of steps from s on.

    With cycle, step 0 counts as step 1 (OneFlow's kernel; its documented
    ceil(0 / steps) would make the first length 0), so the rate at step 0 is
    already one step down, where tf.compat.v1.train.polynomial_decay starts at base.
    """
    base, steps = float(schedule["base_lr"]), int(schedule["steps"])
    end, power, cycle = float(schedule["end_learning_rate"]), float(schedule["power"]), bool(schedule["cycle"])

    def rate(step: int) -> float:
        if cycle:
            done = max(step, 1)
            length = steps * math.ceil(done / steps)
        else:
            done, length = min(step, steps), steps
        return (base - end) * (1.0 - done / length) ** power + end

    return base, rate


def _exponential_family(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """With p = step / steps, floored when `staircase`: exponential base * decay_rate**p,
    inverse_time base / (1 + decay_rate * p), natural_exp base * exp(-decay_rate * p)."""
    base, steps = float(schedule["base_lr"]), int(schedule["steps"])
    decay_rate, staircase = float(schedule["decay_rate"]), bool(schedule["staircase"])
    factor = {
        "exponential": lambda p: decay_rate**p,
        "inverse_time": lambda p: 1.0 / (1.0 + decay_rate * p),
        "natural_exp": lambda p: math.exp(-decay_rate * p),
    }[schedule["kind"]]

    def rate(step: int) -> float:
        p = step / steps
        return base * factor(math.floor(p) if staircase else p)

    return base, rate


_DECAYS: dict[str, Callable[[Mapping[str, Any]], tuple[float, Schedule]]] = {
    "piecewise_constant": _piecewise,
    "piecewise_scaling": _piecewise,
    "cosine": _cosine,
    "linear_cosine": _linear_cosine,
    "polynomial": _polynomial,
    "exponential": _exponential_family,
    "inverse_time": _exponential_family,
    "natural_exp": _exponential_family,
}


def _decay(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """(base rate, rate at a step) of the decay rule."""
    build = _DECAYS.get(schedule["kind"])
    if build is None:
        raise ValueError(f"learning_rate: unknown schedule kind {schedule['kind']!r}")
    return build(schedule)


def make_schedule(schedule: Mapping[str, Any]) -> Schedule:
    """The learning rate as a function of the 0-based train step."""
    base, decayed = _decay(schedule)
    warmup = schedule.get("warmup")
    if not warmup:
        return decayed
    kind, steps, multiplier = warmup["kind"], int(warmup["steps"]), float(warmup["multiplier"])
    if kind == "linear":
        def warm(step: int) -> float:
            return base * (multiplier + (1.0 - multiplier) * step / steps)
    elif kind == "constant":
        def warm(step: int) -> float:
            return base * multiplier
    else:
        raise ValueError(f"learning_rate: unknown warmup kind {kind!r}")
    return lambda step: warm(step) if step < steps else decayed(step)


@register("learning_rate")
def learning_rate(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (step,), (lr,) = ins, outs
    rate = make_schedule(attrs["schedule"])

    def run() -> None:
        lr.fill(rate(int(step)))  # one host read of a scalar per step, as OneFlow's CPU kernel

    return run
