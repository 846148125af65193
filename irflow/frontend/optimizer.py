"""flow.optimizer: learning-rate schedules and optimizers whose `minimize` marks a train job's loss.

`minimize(loss)` appends `job.minimize %loss {optimizer = {...}}`; the autodiff
and optimizer passes turn it into gradients and update ops. The dictionary:

    {kind = "sgd" | "adam" | "adamw" | "rmsprop" | "lamb" | "lars" | "lazy_adam", momentum, beta1, beta2, epsilon,
     do_bias_correction, weight_decay, decay_rate, centered, lars_coefficient, clip_norm (only when clipping),
     indexed_slices = [variable names] (only with function_config.indexed_slices_optimizer_conf),
     lr = {kind = "piecewise_constant", boundaries = [ints], values = [floats]}
        | {kind = "piecewise_scaling", base_lr, boundaries = [ints], scales = [floats]}
        | {kind = "cosine", base_lr, steps, alpha}
        | {kind = "linear_cosine", base_lr, steps, num_periods, alpha, beta}
        | {kind = "polynomial", base_lr, steps, end_learning_rate, power, cycle}
        | {kind = "exponential" | "inverse_time" | "natural_exp", base_lr, steps, decay_rate, staircase},
     warmup = {kind = "linear" | "constant", steps, multiplier} (only with a warmup)}

Every key is always present (but the optional ones), so a pass reads the same
shape whatever the kind; the values a kind does not use keep their defaults.
"""

from __future__ import annotations

import numbers
import re
import types
from collections.abc import Iterable, Sequence
from typing import Any

from irflow.dialects import job
from irflow.frontend import dtypes, math
from irflow.frontend.blob import Blob
from irflow.frontend.regularizers import Regularizer
from irflow.frontend.locations import fail
from irflow.frontend.tracing import append_op, current, own_value


class Warmup:
    def __init__(self, kind: str, steps: int, multiplier: float):
        if not dtypes.is_int(steps) or steps < 0:
            raise ValueError(f"warmup steps must be a non-negative int, got {steps!r}")
        self.spec = {"kind": kind, "steps": int(steps), "multiplier": float(multiplier)}


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


class LossScalePolicy:
    """OneFlow's loss-scale policies, for float16 training; irflow's optimizers refuse them (see `_no_loss_scale`)."""

    def __init__(self, kind: str, **settings: float):
        self.kind, self.settings = kind, settings


def _static_loss_scale(loss_scale_factor: float) -> LossScalePolicy:
    return LossScalePolicy("static", loss_scale_factor=loss_scale_factor)


def _dynamic_loss_scale(
    initial_loss_scale: float = 2**30, increment_period: int = 2000, multiplier: float = 2.0
) -> LossScalePolicy:
    return LossScalePolicy("dynamic", initial_loss_scale=initial_loss_scale, increment_period=increment_period,
                           multiplier=multiplier)


loss_scale = types.SimpleNamespace(static_loss_scale=_static_loss_scale, dynamic_loss_scale=_dynamic_loss_scale)


def _no_loss_scale(loss_scale_factor: float | None, loss_scale_policy: LossScalePolicy | None) -> None:
    """None only: loss scaling keeps float16 gradients from underflowing, and irflow has no float16 compute
    (function_config.enable_auto_mixed_precision(True) is refused too); a dynamic policy would skip steps."""
    if loss_scale_factor is not None or loss_scale_policy is not None:
        raise ValueError("loss_scale_factor / loss_scale_policy are not supported: irflow computes in the job's "
                         "own dtypes, without float16, so there is no loss to scale; leave them None")


def _decay_patterns(includes: str | Sequence[str] | None, excludes: str | Sequence[str] | None) -> dict[str, list[str]]:
    """OneFlow's weight_decay_includes / weight_decay_excludes (a pattern or a list of them; at most one of the two),
    as the optimizer dictionary's key; each a regular expression searched in the variable's name."""
    if includes is not None and excludes is not None:
        raise ValueError("give weight_decay_includes or weight_decay_excludes, not both")
    key, patterns = ("weight_decay_includes", includes) if includes is not None else ("weight_decay_excludes", excludes)
    if patterns is None:
        return {}
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise TypeError(f"{key} must be a string or a list of strings, got {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as err:
            raise ValueError(f"{key}: {pattern!r} is not a regular expression ({err})") from None
    return {key: patterns} if patterns else {}


class LrScheduler:
    def __init__(self, spec: dict[str, Any], warmup: Warmup | None):
        if warmup is not None and not isinstance(warmup, Warmup):
            raise TypeError(f"warmup must come from flow.optimizer.warmup.linear/constant, got {warmup!r}")
        self.spec = spec
        self.warmup = warmup


def _steps(scheduler: str, steps: int) -> int:
    """`steps` as an int, checked positive."""
    if not dtypes.is_int(steps) or steps < 1:
        raise ValueError(f"{scheduler}: steps must be a positive int, got {steps!r}")
    return int(steps)


def _boundaries(scheduler: str, boundaries: Sequence[int]) -> list[int]:
    """`boundaries` as a list of ints, checked increasing."""
    boundaries = list(boundaries)
    if not all(dtypes.is_int(b) for b in boundaries) or boundaries != sorted(boundaries):
        raise ValueError(f"{scheduler}: boundaries must be increasing ints, got {boundaries}")
    return [int(b) for b in boundaries]


class PiecewiseConstantScheduler(LrScheduler):
    """values[i] for the first i with step <= boundaries[i] (docs/training.md); values[-1] after the last boundary."""

    def __init__(self, boundaries: Sequence[int], values: Sequence[float], warmup: Warmup | None = None):
        boundaries, values = _boundaries("PiecewiseConstantScheduler", boundaries), list(values)
        if len(values) != len(boundaries) + 1:
            raise ValueError(
                f"PiecewiseConstantScheduler needs one more value than boundaries: "
                f"{len(boundaries)} boundaries {boundaries} and {len(values)} values {values}"
            )
        spec = {"kind": "piecewise_constant", "boundaries": boundaries, "values": [float(v) for v in values]}
        super().__init__(spec, warmup)


class PiecewiseScalingScheduler(LrScheduler):
    """base_lr * ([1] + scale)[i] for the first i with step <= boundaries[i]; a single float is the scale
    after every boundary (scales multiply base_lr, they do not compound).  OneFlow's kernel keeps the old rate at the boundary step itself, so this is
    torch.optim.lr_scheduler.MultiStepLR with milestones one step later."""

    def __init__(self, base_lr: float, boundaries: Sequence[int], scale: float | Sequence[float],
                 warmup: Warmup | None = None):
        boundaries = _boundaries("PiecewiseScalingScheduler", boundaries)
        scales = [scale] * len(boundaries) if isinstance(scale, numbers.Real) else list(scale)
        if len(scales) != len(boundaries):
            raise ValueError(
                f"PiecewiseScalingScheduler needs a scale per boundary: "
                f"{len(boundaries)} boundaries {boundaries} and {len(scales)} scales {scales}"
            )
        spec = {"kind": "piecewise_scaling", "base_lr": float(base_lr), "boundaries": boundaries,
                "scales": [float(s) for s in scales]}
        super().__init__(spec, warmup)


class CosineScheduler(LrScheduler):
    """base_lr * ((1 - alpha) * (1 + cos(pi * min(step, steps) / steps)) / 2 + alpha)."""

    def __init__(self, base_lr: float, steps: int, alpha: float = 0.0, warmup: Warmup | None = None):
        steps = _steps("CosineScheduler", steps)
        super().__init__({"kind": "cosine", "base_lr": float(base_lr), "steps": steps, "alpha": float(alpha)}, warmup)


class LinearCosineScheduler(LrScheduler):
    """base_lr * ((alpha + (steps - s) / steps) * (1 + cos(2 pi num_periods s / steps)) / 2 + beta),
    s = min(step, steps): tf.compat.v1.train.linear_cosine_decay."""

    def __init__(self, base_lr: float, steps: int, num_periods: float = 0.5, alpha: float = 0.0, beta: float = 0.001,
                 warmup: Warmup | None = None):
        steps = _steps("LinearCosineScheduler", steps)
        spec = {"kind": "linear_cosine", "base_lr": float(base_lr), "steps": steps, "num_periods": float(num_periods),
                "alpha": float(alpha), "beta": float(beta)}
        super().__init__(spec, warmup)


class PolynomialScheduler(LrScheduler):
    """(base_lr - end_learning_rate) * (1 - s / length) ** power + end_learning_rate.

    Without cycle s = min(step, steps) and length = steps
    (torch.optim.lr_scheduler.PolynomialLR when end_learning_rate is 0).  With
    cycle s = step and length is the first multiple of steps from s on,
    step 0 counting as step 1 (OneFlow's kernel), so unlike tf's
    polynomial_decay the cycled rate at step 0 is already one step down.
    """

    def __init__(self, base_lr: float, steps: int, end_learning_rate: float = 0.0001, power: float = 1.0,
                 cycle: bool = False, warmup: Warmup | None = None):
        steps = _steps("PolynomialScheduler", steps)
        spec = {"kind": "polynomial", "base_lr": float(base_lr), "steps": steps,
                "end_learning_rate": float(end_learning_rate), "power": float(power), "cycle": bool(cycle)}
        super().__init__(spec, warmup)


class _DecayRateScheduler(LrScheduler):
    """The schedules of p = step / steps (floored when staircase) and a decay_rate."""

    KIND = ""

    def __init__(self, base_lr: float, steps: int, decay_rate: float, staircase: bool = False,
                 warmup: Warmup | None = None):
        steps = _steps(type(self).__name__, steps)
        spec = {"kind": self.KIND, "base_lr": float(base_lr), "steps": steps, "decay_rate": float(decay_rate),
                "staircase": bool(staircase)}
        super().__init__(spec, warmup)


class ExponentialScheduler(_DecayRateScheduler):
    """base_lr * decay_rate ** p, p = step / steps, floored when staircase
    (torch.optim.lr_scheduler.StepLR with staircase, ExponentialLR with gamma = decay_rate ** (1 / steps) without)."""

    KIND = "exponential"


class InverseTimeScheduler(_DecayRateScheduler):
    """base_lr / (1 + decay_rate * p), p = step / steps, floored when staircase.

    OneFlow's docstring floors decay_rate * p; its kernel, which irflow
    follows, floors p alone (as tf's inverse_time_decay).
    """

    KIND = "inverse_time"


class NaturalExpScheduler(_DecayRateScheduler):
    """base_lr * exp(-decay_rate * p), p = step / steps, floored when staircase."""

    KIND = "natural_exp"


class Optimizer:
    KIND = ""

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        momentum: float = 0.0,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        do_bias_correction: bool = False,
        weight_decay: float | None = None,
        grad_clipping: ClipGradient | None = None,
        decay_rate: float = 0.99,
        centered: bool = False,
        lars_coefficient: float = 0.0001,
        loss_scale_factor: float | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
        decay_patterns: dict[str, list[str]] | None = None,
    ):
        _no_loss_scale(loss_scale_factor, loss_scale_policy)
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
            "decay_rate": float(decay_rate),
            "centered": bool(centered),
            "lars_coefficient": float(lars_coefficient),
            "lr": dict(lr_scheduler.spec),
        }
        self.spec.update(decay_patterns or {})
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
        indexed = list(trace.config.indexed_slices)
        spec = {**self.spec, "indexed_slices": indexed} if indexed else self.spec
        objective = _regularized(loss, trace.regularizers.values()) if trace.regularizers else loss
        append_op(job.MinimizeOp.create(operands=[objective.value], properties={"optimizer": job.to_attr(spec)}), what)
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
    """Stochastic gradient descent, with OneFlow's momentum (0.9 by default; 0 for plain SGD).

    The positional order is OneFlow's (`loss_scale_factor` second); `weight_decay`, which
    OneFlow's SGD does not take (its SGDW does), is irflow's and keyword-only.
    """

    KIND = "sgd"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        loss_scale_factor: float | None = None,
        momentum: float = 0.9,
        grad_clipping: ClipGradient | None = None,
        *,
        loss_scale_policy: LossScalePolicy | None = None,
        weight_decay: float | None = None,
    ):
        super().__init__(lr_scheduler, momentum=momentum, weight_decay=weight_decay, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy)


class SGDW(Optimizer):
    """SGD with momentum and decoupled weight decay, `weight_decay_includes` / `_excludes` as AdamW's."""

    KIND = "sgd"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        loss_scale_factor: float | None = None,
        momentum: float = 0.9,
        weight_decay: float | None = None,
        weight_decay_includes: str | Sequence[str] | None = None,
        weight_decay_excludes: str | Sequence[str] | None = None,
        grad_clipping: ClipGradient | None = None,
        *,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, momentum=momentum, weight_decay=weight_decay, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy,
                         decay_patterns=_decay_patterns(weight_decay_includes, weight_decay_excludes))


class Adam(Optimizer):
    """Adam, w -= lr * m / (sqrt(v) + epsilon); with do_bias_correction (False by default, as OneFlow 0.x's
    Adam and AdamW) m and v are first divided by 1 - beta**step, as the Adam paper and torch.optim.Adam do."""

    KIND = "adam"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        do_bias_correction: bool = False,
        loss_scale_factor: float | None = None,
        grad_clipping: ClipGradient | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, 0.0, beta1, beta2, epsilon, do_bias_correction, None, grad_clipping,
                         loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy)


class AdamW(Optimizer):
    """Adam with decoupled weight decay.

    `weight_decay_includes` / `weight_decay_excludes` (OneFlow's; a regular
    expression or a list of them, searched in each variable's name) decay only
    the variables some pattern matches / no pattern matches, e.g. BERT's
    `weight_decay_excludes=["bias", "LayerNorm"]`.
    """

    KIND = "adamw"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        do_bias_correction: bool = False,
        loss_scale_factor: float | None = None,
        weight_decay: float | None = None,
        weight_decay_includes: str | Sequence[str] | None = None,
        weight_decay_excludes: str | Sequence[str] | None = None,
        grad_clipping: ClipGradient | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, 0.0, beta1, beta2, epsilon, do_bias_correction, weight_decay, grad_clipping,
                         loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy,
                         decay_patterns=_decay_patterns(weight_decay_includes, weight_decay_excludes))


class RMSProp(Optimizer):
    """RMSProp as OneFlow computes it: w -= lr * g / sqrt(ms + epsilon), ms = decay_rate * ms + (1 - decay_rate) * g**2;
    centered, the root is of ms - mg**2 + epsilon with mg the same average of g.

    epsilon sits inside the square root (torch.optim.RMSprop adds it after); OneFlow's
    train_step_lbn and variables are not taken (loss_scale_* only as None).
    """

    KIND = "rmsprop"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        decay_rate: float = 0.99,
        epsilon: float = 1e-8,
        centered: bool = False,
        loss_scale_factor: float | None = None,
        grad_clipping: ClipGradient | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, epsilon=epsilon, grad_clipping=grad_clipping, decay_rate=decay_rate,
                         centered=centered, loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy)


class LAMB(Optimizer):
    """LAMB as OneFlow computes it: bias-corrected Adam moments, u = m_hat / sqrt(v_hat + epsilon),
    w -= lr * (|w| / |u|) * u per variable (the ratio 1 when either norm is 0).

    Epsilon is under the square root (the LAMB paper adds it after); OneFlow's
    train_step_lbn and variables are not taken.  `weight_decay` (with
    `weight_decay_includes` / `_excludes` as AdamW's) is OneFlow's later 0.x
    decay: w -= lr * (|w| / |u|) * (u + weight_decay * w), the ratio of u alone.
    The norms are of the whole variable also when it is split over devices.
    """

    KIND = "lamb"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-6,
        loss_scale_factor: float | None = None,
        weight_decay: float | None = None,
        weight_decay_includes: str | Sequence[str] | None = None,
        weight_decay_excludes: str | Sequence[str] | None = None,
        grad_clipping: ClipGradient | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, beta1=beta1, beta2=beta2, epsilon=epsilon, weight_decay=weight_decay,
                         grad_clipping=grad_clipping, loss_scale_factor=loss_scale_factor,
                         loss_scale_policy=loss_scale_policy,
                         decay_patterns=_decay_patterns(weight_decay_includes, weight_decay_excludes))


class LARS(Optimizer):
    """LARS as OneFlow's lars_update kernel computes it: per variable a local rate
    local_lr = lr * lars_coefficient * |w| / (epsilon + |g| + weight_decay * |w|), then
    m = momentum_beta * m - local_lr * (g + weight_decay * w); w += m.

    Where OneFlow differs from the LARS paper (You et al., 2017), this follows
    OneFlow: epsilon is added to the gradient's norm, and when |w| or |g| is 0
    the local rate is the plain lr (the ratio 1, not lars_coefficient).
    `weight_decay_includes` / `_excludes` choose the decayed variables, as AdamW's.  The
    momentum `<var>-momentum` holds the negated step, as OneFlow's kernel keeps
    it (the paper's v = m * v + local_lr * g; w -= v is the same update).
    train_step_lbn and variables are not taken (loss_scale_* only as None).
    The norms are of the whole variable also when it is split over devices.
    """

    KIND = "lars"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        momentum_beta: float = 0.9,
        epsilon: float = 1e-9,
        lars_coefficient: float = 0.0001,
        loss_scale_factor: float | None = None,
        weight_decay: float | None = None,
        weight_decay_includes: str | Sequence[str] | None = None,
        weight_decay_excludes: str | Sequence[str] | None = None,
        grad_clipping: ClipGradient | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, momentum=momentum_beta, epsilon=epsilon, weight_decay=weight_decay,
                         grad_clipping=grad_clipping, lars_coefficient=lars_coefficient,
                         loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy,
                         decay_patterns=_decay_patterns(weight_decay_includes, weight_decay_excludes))


class LazyAdam(Optimizer):
    """OneFlow's LazyAdam: Adam that updates only the elements whose gradient is not 0 (|g| >= 1e-12, OneFlow's
    lazy_adam kernel), so the rows of an embedding table that a step did not gather keep their value, m and v.

    The updated elements take m = beta1 * m + (1 - beta1) * g, v = beta2 * v + (1 - beta2) * g**2 and
    w -= lr * sqrt(1 - beta2**step) / (1 - beta1**step) * m / (sqrt(v) + epsilon), step counting every train
    step (torch.optim.SparseAdam's update; epsilon is not bias-corrected, as it is in Adam's).  For a variable
    that function_config.indexed_slices_optimizer_conf names, the gathered rows are updated whole, as SparseAdam
    does.  OneFlow's train_step_lbn and variables are not taken (loss_scale_* only as None).
    """

    KIND = "lazy_adam"

    def __init__(
        self,
        lr_scheduler: LrScheduler,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        loss_scale_factor: float | None = None,
        grad_clipping: ClipGradient | None = None,
        loss_scale_policy: LossScalePolicy | None = None,
    ):
        super().__init__(lr_scheduler, beta1=beta1, beta2=beta2, epsilon=epsilon, grad_clipping=grad_clipping,
                         loss_scale_factor=loss_scale_factor, loss_scale_policy=loss_scale_policy)
