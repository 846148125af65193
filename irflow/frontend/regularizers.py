"""flow.regularizers: weight penalties given to get_variable and the layers (`kernel_regularizer=`).

As OneFlow's regularize-gradient op does, a regularized trainable variable's
gradient gains `l1 * sign(w) + l2 * w` in train jobs: `minimize(loss)` adds
the penalty `l1 * sum(|w|) + l2 / 2 * sum(w * w)` to the loss's mean. Jobs
that minimize nothing ignore regularizers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Regularizer:
    l1: float = 0.0
    l2: float = 0.0

    def __post_init__(self) -> None:
        for name in ("l1", "l2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"flow.regularizers: {name} must be a non-negative number, got {value!r}")


def l1(l: float = 0.01) -> Regularizer:  # noqa: E741  OneFlow's parameter name
    return Regularizer(l1=float(l))


def l2(l: float = 0.01) -> Regularizer:  # noqa: E741
    return Regularizer(l2=float(l))


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> Regularizer:
    return Regularizer(l1=float(l1), l2=float(l2))
