"""Placement in a fixed order, the way the greedy planners compilers ship work.

`greedy_by_size` is TFLite Micro's GreedyMemoryPlanner (also XLA's and TVM's
greedy): largest buffer first, equal sizes in input order, each at the lowest
offset that clears the buffers already placed whose lifetimes overlap its own
(first fit).  `plan` runs it as one of its candidates, so its plan is never
worse than greedy by size wherever that runs; the benchmark also uses it, and
`fit_in_order(..., best_fit=True)` in allocation order, as its baselines.

The buffers placed so far are kept sorted by offset, so the ones overlapping a
new buffer in time come out of one mask already in offset order, and the gaps
between them follow from a running maximum of their ends, with no sort per
placement.  Each placement is still a numpy pass over everything placed:
O(n^2) element operations and about a dozen numpy calls per buffer (0.16 CPU s
at 10k buffers on mixed lifetimes, 0.21 s on training ones, whose long
lifetimes made the per-placement sort cost 0.7 s).
"""

from __future__ import annotations

import bisect

import numpy as np

_OPEN = np.iinfo(np.int64).max


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
    # The placed buffers sorted by offset: rows offset, end, first step, last step.
    placed = np.zeros((4, n), np.int64)
    p_off, p_end, p_first, p_last = placed
    sorted_offsets: list[int] = []  # p_off[:k] as a list, for bisect
    sizes, firsts, lasts = size.tolist(), first.tolist(), last.tolist()
    for k, i in enumerate(order.tolist()):
        s, f, l = sizes[i], firsts[i], lasts[i]
        hit = ((p_first[:k] <= l) & (p_last[:k] >= f)).nonzero()[0]
        at = 0
        if len(hit):
            offs = p_off[hit]
            if best_fit or offs[0] < s:  # else first fit takes 0
                ends = np.maximum.accumulate(p_end[hit])
                # Gap 0 runs from 0 to offs[0], gap g from ends[g - 1] to offs[g]; the last is open.
                gaps = np.empty(len(offs) + 1, np.int64)
                gaps[0], gaps[1:-1], gaps[-1] = offs[0], offs[1:] - ends[:-1], _OPEN
                fits = (gaps >= s).nonzero()[0]
                g = int(fits[gaps[fits].argmin()] if best_fit else fits[0])
                at = int(ends[g - 1]) if g else 0
        offsets[i] = at
        slot = bisect.bisect_right(sorted_offsets, at)
        sorted_offsets.insert(slot, at)
        placed[:, slot + 1 : k + 1] = placed[:, slot:k]
        placed[:, slot] = at, at + s, f, l
    return offsets
