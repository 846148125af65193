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


def _decay(schedule: Mapping[str, Any]) -> tuple[float, Schedule]:
    """(base rate, rate at a step) of the decay rule."""
    kind = schedule["kind"]
    if kind == "piecewise_constant":
        boundaries = [int(b) for b in schedule["boundaries"]]
        values = [float(v) for v in schedule["values"]]
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"learning_rate: {len(boundaries)} boundaries need {len(boundaries) + 1} values")
        # values[i] for boundaries[i-1] < step <= boundaries[i], as OneFlow and tf piecewise_constant.
        return values[0], lambda step: values[bisect.bisect_left(boundaries, step)]
    if kind == "cosine":
        base, steps, alpha = float(schedule["base_lr"]), int(schedule["steps"]), float(schedule.get("alpha", 0.0))

        def cosine(step: int) -> float:
            done = min(step, steps) / steps
            return base * ((1.0 - alpha) * 0.5 * (1.0 + math.cos(math.pi * done)) + alpha)

        return base, cosine
    raise ValueError(f"learning_rate: unknown schedule kind {kind!r}")


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
