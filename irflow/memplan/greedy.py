"""Placement in a fixed order, the way the greedy planners compilers ship work.

`greedy_by_size` is TFLite Micro's GreedyMemoryPlanner (also XLA's and TVM's
greedy): largest buffer first, equal sizes in input order, each at the lowest
offset that clears the buffers already placed whose lifetimes overlap its own
(first fit).  `plan` runs it as one of its candidates, so its plan is never
worse than greedy by size wherever that runs; the benchmark also uses it, and
`fit_in_order(..., best_fit=True)` in allocation order, as its baselines.

Each placement is a numpy pass over the buffers placed so far: O(n^2) element
operations and about 25 us of numpy calls per buffer (0.05 s at 2k buffers,
0.4-1 s at 10k, tens of seconds at 100k).
"""

from __future__ import annotations

import numpy as np


def greedy_by_size(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """First fit, largest first; equal sizes keep their input order as in TFLite Micro."""
    return fit_in_order(size, first, last, np.argsort(-size, kind="stable"))


def fit_in_order(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, order: np.ndarray, best_fit: bool = False
) -> np.ndarray:
    """Offsets placing the buffers in `order`, each in the lowest gap it fits (the smallest with `best_fit`).

    A gap runs from the top of everything placed below it among the buffers that overlap in
    time to the next such buffer's offset; the last one is open.
    """
    n = len(size)
    offsets = np.zeros(n, np.int64)
    # The placed buffers, in placement order.
    p_first, p_last, p_off, p_end = (np.zeros(n, np.int64) for _ in range(4))
    for k, i in enumerate(order.tolist()):
        s = int(size[i])
        hit = (p_first[:k] <= last[i]) & (p_last[:k] >= first[i])
        offs, ends = p_off[:k][hit], p_end[:k][hit]
        at = 0
        if len(offs):
            by_off = np.argsort(offs, kind="stable")
            offs, ends = offs[by_off], np.maximum.accumulate(ends[by_off])
            starts = np.concatenate([[0], ends])
            gaps = np.concatenate([offs, [np.iinfo(np.int64).max]]) - starts
            fits = np.flatnonzero(gaps >= s)
            g = fits[np.argmin(gaps[fits])] if best_fit else fits[0]
            at = int(starts[g])
        offsets[i] = at
        p_first[k], p_last[k], p_off[k], p_end[k] = first[i], last[i], at, at + s
    return offsets
