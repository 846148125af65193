"""flow.optimizer: learning-rate schedules and optimizers whose `minimize` marks a train job's loss.

`minimize(loss)` appends `job.minimize %loss {optimizer = {...}}`; the autodiff
and optimizer passes turn it into gradients and update ops. The dictionary:

    {kind = "sgd" | "adam" | "adamw", momentum, beta1, beta2, epsilon,
     do_bias_correction, weight_decay, clip_norm (only when clipping),
     lr = {kind = "piecewise_constant", boundaries = [ints], values = [floats]}
        | {kind = "cosine", base_lr, steps, alpha},
     warmup = {kind = "linear" | "constant", steps, multiplier} (only with a warmup)}

Every key is always present (but the optional two), so a pass reads the same
shape whatever the kind; the values a kind does not use keep their defaults.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Sequence
from typing import Any

from irflow.dialects import job
from irflow.frontend import math
from irflow.frontend.blob import Blob
from irflow.frontend.regularizers import Regularizer
from irflow.frontend.locations import fail
from irflow.frontend.tracing import append_op, current, own_value


class Warmup:
    def __init__(self, kind: str, steps: int, multiplier: float):
        if not isinstance(steps, int) or steps < 0:
            raise ValueError(f"warmup steps must be a non-negative int, got {steps!r}")
        self.spec = {"kind": kind, "steps": steps, "multiplier": float(multiplier)}


def _linear(steps: int, start_multiplier: float) -> Warmup:
    """Scale the learning rate from start_multiplier up to 1 over `steps` steps."""
    return Warmup("linear", steps, start_multiplier)


def _constant(steps: int, multiplier: float) -> Warmup:
    """Scale the learning rate by `multiplier` for the first `steps` steps."""
    return Warmup("constant", steps, multiplier)


warmup = types.SimpleNamespace(linear=_linear, constant=_constant)


class ClipGradient:
    def __init__(self, clip_norm: float):
        if not clip_norm > 0:
            raise ValueError(f"clip_norm must be positive, got {clip_norm!r}")
        self.clip_norm = float(clip_norm)


def _by_global_norm(clip_norm: float) -> ClipGradient:
    """Scale all gradients by clip_norm / max(global_norm, clip_norm)."""
    return ClipGradient(clip_norm)


grad_clipping = types.SimpleNamespace(by_global_norm=_by_global_norm)


class LrScheduler:
    def __init__(self, spec: dict[str, Any], warmup: Warmup | None):
        if warmup is not None and not isinstance(warmup, Warmup):
            raise TypeError(f"warmup must come from flow.optimizer.warmup.linear/constant, got {warmup!r}")
        self.spec = spec
        self.warmup = warmup


class PiecewiseConstantScheduler(LrScheduler):
    """values[i] for the first i with step <= boundaries[i] (docs/training.md); values[-1] after the last boundary."""

    def __init__(self, boundaries: Sequence[int], values: Sequence[float], warmup: Warmup | None = None):
        boundaries, values = list(boundaries), list(values)
        if len(values) != len(boundaries) + 1:
            raise ValueError(
                f"PiecewiseConstantScheduler needs one more value than boundaries: "
                f"{len(boundaries)} boundaries {boundaries} and {len(values)} values {values}"
            )
        if any(not isinstance(b, int) for b in boundaries) or boundaries != sorted(boundaries):
            raise ValueError(f"PiecewiseConstantScheduler: boundaries must be increasing ints, got {boundaries}")
        spec = {"kind": "piecewise_constant", "boundaries": boundaries, "values": [float(v) for v in values]}
        super().__init__(spec, warmup)


class CosineScheduler(LrScheduler):
    """base_lr * ((1 - alpha) * (1 + cos(pi * min(step, steps) / steps)) / 2 + alpha)."""

    def __init__(self, base_lr: float, steps: int, alpha: float = 0.0, warmup: Warmup | None = None):
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"CosineScheduler: steps must be a positive int, got {steps!r}")
        super().__init__({"kind": "cosine", "base_lr": float(base_lr), "steps": steps, "alpha": float(alpha)}, warmup)


class Optimizer:
    KIND = ""

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        momentum: float = 0.0,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        do_bias_correction: bool = True,
        weight_decay: float | None = None,
        grad_clipping: ClipGradient | None = None,
    ):
        if not isinstance(lr_scheduler, LrScheduler):
            raise TypeError(
                f"{type(self).__name__} needs a learning-rate scheduler such as "
                f"flow.optimizer.PiecewiseConstantScheduler([], [0.1]), got {lr_scheduler!r}"
            )
        if grad_clipping is not None and not isinstance(grad_clipping, ClipGradient):
            raise TypeError(f"grad_clipping must come from flow.optimizer.grad_clipping.by_global_norm, got {grad_clipping!r}")
        self.spec: dict[str, Any] = {
            "kind": self.KIND,
            "momentum": float(momentum),
            "beta1": float(beta1),
            "beta2": float(beta2),
            "epsilon": float(epsilon),
            "do_bias_correction": bool(do_bias_correction),
            "weight_decay": float(weight_decay or 0.0),
            "lr": dict(lr_scheduler.spec),
        }
        if grad_clipping is not None:
            self.spec["clip_norm"] = grad_clipping.clip_norm
        if lr_scheduler.warmup is not None:
            self.spec["warmup"] = dict(lr_scheduler.warmup.spec)

    def minimize(self, loss: Blob) -> None:
        """Mark `loss` as what this train job minimizes (once per job)."""
        what = f"flow.optimizer.{type(self).__name__}.minimize"
        trace = current(what)
        if trace.job_type != "train":
            fail(f"{what}: only a job with @flow.global_function(type='train') can minimize a loss")
        if trace.minimized:
            fail(f"{what}: job '{trace.name}' already minimizes a loss; a job has one optimizer")
        own_value(trace, loss, what)
        objective = _regularized(loss, trace.regularizers.values()) if trace.regularizers else loss
        append_op(job.MinimizeOp.create(operands=[objective.value], properties={"optimizer": job.to_attr(self.spec)}), what)
        trace.minimized = True


def _regularized(loss: Blob, penalized: Iterable[tuple[Blob, Regularizer]]) -> Blob:
    """mean(loss) + sum of l1 * sum(|w|) + l2 / 2 * sum(w * w): the gradient of w gains l1 * sign(w) + l2 * w."""
    objective = math.reduce_mean(loss) if loss.ndim else loss
    for weight, regularizer in penalized:
        if regularizer.l1:
            objective = objective + math.reduce_sum(math.abs(weight)) * regularizer.l1
        if regularizer.l2:
            objective = objective + math.reduce_sum(math.square(weight)) * (regularizer.l2 / 2)
    return objective


class SGD(Optimizer):
    """Stochastic gradient descent, with OneFlow's momentum (0.9 by default; 0 for plain SGD)."""

    KIND = "sgd"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        momentum: float = 0.9,
        weight_decay: float | None = None,
        grad_clipping: ClipGradient | None = None,
    ):
        super().__init__(lr_scheduler, momentum=momentum, weight_decay=weight_decay, grad_clipping=grad_clipping)


class Adam(Optimizer):
    """Adam; irflow corrects the moments' bias by default (do_bias_correction=True), as the Adam paper does."""

    KIND = "adam"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        do_bias_correction: bool = True,
        grad_clipping: ClipGradient | None = None,
    ):
        super().__init__(lr_scheduler, 0.0, beta1, beta2, epsilon, do_bias_correction, None, grad_clipping)


class AdamW(Optimizer):
    """Adam with decoupled weight decay."""

    KIND = "adamw"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        do_bias_correction: bool = True,
        weight_decay: float | None = None,
        grad_clipping: ClipGradient | None = None,
    ):
        super().__init__(lr_scheduler, 0.0, beta1, beta2, epsilon, do_bias_correction, weight_decay, grad_clipping)
