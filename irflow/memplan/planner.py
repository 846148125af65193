"""`plan`: offsets for buffers with known lifetimes in one arena.

Two phases.  The default runs the skyline packer under a few priority orders
and keeps the best plan; how many orders run scales down with the number of
buffers so that 100k buffers plan in about a second.  With `budget_s`, the
improvement phase first runs the remaining orders, then (for instances small
enough to search) the exact search of `search.py` until the budget is spent
or the plan meets the lower bound.  Every step is deterministic, and steps
only replace the plan with a strictly smaller one: the same input gives the
same plan, and more time never gives a worse one.

Placement works in units of `alignment`: a size is rounded up for placement
only (nothing aligned may start in the padding anyway), the arena size
reported is max(offset + size) in bytes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from irflow.memplan.orderings import ORDERINGS
from irflow.memplan.problem import Buffer, Plan, as_arrays, check_alignment
from irflow.memplan.search import Search, improve
from irflow.memplan.skyline import compress, skyline_pack

# The default runs about this many buffer placements (orders x buffers), at least one order.
_DEFAULT_WORK = 12_000
# The exact search is worth its per-node numpy cost only up to this many buffers.
_SEARCH_MAX = 2_000


def plan(buffers: Sequence[Buffer], alignment: int = 64, budget_s: float | None = None) -> Plan:
    """Place every buffer at an offset that is a multiple of `alignment`.

    Buffers whose inclusive lifetimes overlap never share a byte.  `budget_s`
    (seconds) enables the improvement phase; it stops early when the plan
    reaches the lower bound, and a step is started only when it should end
    in time.
    """
    check_alignment(alignment)
    if budget_s is not None and budget_s < 0:
        raise ValueError(f"budget_s must be non-negative, got {budget_s}")
    start = time.perf_counter()
    size, first, last = as_arrays(buffers)
    offsets = np.zeros(len(size), np.int64)
    units = -(-size // alignment)
    used = np.flatnonzero(units > 0)  # zero-byte buffers stay at offset 0
    if len(used):
        deadline = start + (budget_s or 0.0)
        offsets[used] = alignment * _place(units[used], first[used], last[used], deadline, budget_s is not None)
    return Plan(tuple(offsets.tolist()), int((offsets + size).max(initial=0)))


def _place(size: np.ndarray, first: np.ndarray, last: np.ndarray, deadline: float, improve_plan: bool) -> np.ndarray:
    """Offsets in units for positive unit sizes."""
    cfirst, clast, steps = compress(first, last)
    search = Search(cfirst, clast, size, steps)
    lower = int(search.load.max())
    ranks = [order(size, first, last) for order in ORDERINGS.values()]
    default = max(1, min(len(ranks), _DEFAULT_WORK // len(size)))
    best, height = None, None
    for k, rank in enumerate(ranks):
        if k >= default and not improve_plan:
            break
        began = time.perf_counter()
        if k >= default and began + step > deadline:
            break
        offsets = np.array(skyline_pack(cfirst, clast, size, rank, steps), np.int64)
        step = time.perf_counter() - began
        top = int((offsets + size).max())
        if height is None or top < height:
            best, height = offsets, top
        if height == lower:
            return best
    if improve_plan and len(size) <= _SEARCH_MAX:
        best, height = improve(search, ranks, best, height, lower, deadline)
    return best
