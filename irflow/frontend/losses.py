"""flow.losses.add_loss, OneFlow's older way to mark a train job's loss; and flow.smooth_l1_loss.

The optimizer comes from the job's `config.train` (`primary_lr` and
`model_update_conf`); `add_loss` then does what
`flow.optimizer.<kind>(...).minimize(loss)` does. The losses of flow.nn
(L1Loss, BCELoss, ...) live in nn.py; smooth_l1_loss is at the top of `flow`,
as in OneFlow's loss_ops.
"""

from __future__ import annotations

from irflow.frontend import dtypes, math
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.ops import where
from irflow.frontend.tracing import current


def smooth_l1_loss(prediction: Blob, label: Blob, beta: float = 1.0, name: str | None = None) -> Blob:
    """Elementwise 0.5 * d**2 / beta where |d| < beta, else |d| - 0.5 * beta, for d = prediction - label.

    Not reduced, as OneFlow's. beta = 0 is the L1 loss |d| (OneFlow's kernel and PyTorch
    agree); it is traced as such, since d**2 / 0 would put NaN into the gradient. At |d| = beta
    the gradient is sign(d), as both have it.
    """
    what = "flow.smooth_l1_loss"
    floats = isinstance(prediction, Blob) and isinstance(label, Blob) and prediction.dtype.is_floating_point
    if not floats or (label.shape, label.dtype) != (prediction.shape, prediction.dtype):
        fail(f"{what}: prediction and label must be floating-point Blobs of one shape and dtype, got {prediction!r} "
             f"and {label!r}")
    if not dtypes.is_number(beta) or not beta >= 0:
        fail(f"{what}: beta must be a number >= 0, got {beta!r}")
    diff = prediction - label
    if beta == 0:
        return math.abs(diff, name)
    distance = math.abs(diff)
    quadratic = math.square(diff) * (0.5 / float(beta))
    return where(math.less(distance, float(beta)), quadratic, distance - 0.5 * float(beta), name)


def add_loss(loss: Blob) -> None:
    """Minimize `loss` with the optimizer that the job's function_config.train describes."""
    what = "flow.losses.add_loss"
    trace = current(what)
    if not trace.config.train.configured:
        fail(f"{what}: the job's function_config sets no optimizer; call config.train.primary_lr(...) and "
             "config.train.model_update_conf(...), or use flow.optimizer.SGD(...).minimize(loss)")
    try:
        optimizer = trace.config.train.optimizer()
    except ValueError as err:
        fail(f"{what}: {err}")
    optimizer.minimize(loss)
