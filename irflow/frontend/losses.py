"""flow.losses.add_loss, OneFlow's older way to mark a train job's loss; flow.smooth_l1_loss and
flow.combined_margin_loss.

The optimizer comes from the job's `config.train` (`primary_lr` and
`model_update_conf`); `add_loss` then does what
`flow.optimizer.<kind>(...).minimize(loss)` does. The losses of flow.nn
(L1Loss, BCELoss, ...) live in nn.py; smooth_l1_loss and combined_margin_loss are at the top
of `flow`, as in OneFlow.
"""

from __future__ import annotations

from irflow.frontend import dtypes, math
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.ops import one_hot, where
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


def combined_margin_loss(x: Blob, label: Blob, m1: float = 1, m2: float = 0, m3: float = 0,
                         name: str | None = None) -> Blob:  # fmt: skip
    """flow.combined_margin_loss (InsightFace's margins, as OneFlow's): x (batch, classes) of cosines with each
    row's label entry replaced by cos(m1 acos(x) + m2) - m3 (SphereFace m1, ArcFace m2, CosFace m3); a label
    outside [0, classes) leaves its row as it is.

    The margin is computed only on the label entries (the others see acos(0)), so an entry at |x| >= 1
    elsewhere gets dy, never NaN; at the label entry the gradient is OneFlow's, m1 sin(m1 theta + m2) /
    sin(theta) times dy.
    """
    what = "flow.combined_margin_loss"
    if not isinstance(x, Blob) or x.ndim != 2 or not x.dtype.is_floating_point:
        fail(f"{what}: x must be a (batch, classes) floating-point Blob, got {x!r}")
    if not isinstance(label, Blob) or label.shape != x.shape[:1]:
        fail(f"{what}: label must be a Blob of shape {x.shape[:1]}, got {label!r}")
    for margin, value in (("m1", m1), ("m2", m2), ("m3", m3)):
        if not dtypes.is_number(value):
            fail(f"{what}: {margin} must be a number, got {value!r}")
    hit = one_hot(label, x.shape[1], dtype=dtypes.int8)  # a label out of range: a row of 0
    theta = math.acos(where(hit, x, 0.0))
    return where(hit, math.cos(theta * float(m1) + float(m2)) - float(m3), x, name)


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
