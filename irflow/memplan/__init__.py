"""Static memory planning: byte offsets in one arena for buffers with known lifetimes.

    from irflow.memplan import Buffer, plan, lower_bound, validate
    p = plan([Buffer(size=256, first=0, last=3), ...], alignment=64)
    validate(buffers, p, 64)    # raises ValueError on any overlap or misalignment

See docs/memplan.md for the design and the measured results.
"""

from irflow.memplan.planner import plan
from irflow.memplan.plot import plot_plan
from irflow.memplan.problem import Buffer, Plan, lower_bound, validate

__all__ = ["Buffer", "Plan", "lower_bound", "plan", "plot_plan", "validate"]
