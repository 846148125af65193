"""flow.losses.add_loss: OneFlow's older way to mark a train job's loss.

The optimizer comes from the job's `config.train` (`primary_lr` and
`model_update_conf`); `add_loss` then does what
`flow.optimizer.<kind>(...).minimize(loss)` does.
"""

from __future__ import annotations

from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.tracing import current


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
