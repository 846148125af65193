"""Placement in a fixed order, the way the greedy planners compilers ship work.

`greedy_by_size` is TFLite Micro's GreedyMemoryPlanner (also XLA's and TVM's
greedy): largest buffer first, equal sizes in input order, each at the lowest
offset that clears the buffers already placed whose lifetimes overlap its own
(first fit).  `plan` runs it as one of its candidates, so its plan is never
worse than greedy by size wherever that runs; the benchmark also uses it, and
`fit_in_order(..., best_fit=True)` in allocation order, as its baselines.

Each placement is a numpy pass over the buffers placed so far: O(n^2) element
operations and about 10-15 us of numpy calls per buffer (0.02-0.03 s at 2k
buffers, 0.2-0.9 s at 10k, tens of seconds at 100k).
"""

from __future__ import annotations

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
    # The placed buffers, in placement order.
    p_first, p_last, p_off, p_end = (np.zeros(n, np.int64) for _ in range(4))
    sizes, firsts, lasts = size.tolist(), first.tolist(), last.tolist()
    for k, i in enumerate(order.tolist()):
        s, f, l = sizes[i], firsts[i], lasts[i]
        hit = ((p_first[:k] <= l) & (p_last[:k] >= f)).nonzero()[0]
        at = 0
        if len(hit):
            offs = p_off[hit]
            by_off = offs.argsort()  # equal offsets overlap, so their order changes no gap that fits
            offs = offs[by_off]
            ends = np.maximum.accumulate(p_end[hit[by_off]])
            if best_fit or offs[0] < s:  # else first fit takes 0
                # Gap 0 runs from 0 to offs[0], gap g from ends[g - 1] to offs[g]; the last is open.
                gaps = np.empty(len(offs) + 1, np.int64)
                gaps[0], gaps[1:-1], gaps[-1] = offs[0], offs[1:] - ends[:-1], _OPEN
                fits = (gaps >= s).nonzero()[0]
                g = int(fits[gaps[fits].argmin()] if best_fit else fits[0])
                at = int(ends[g - 1]) if g else 0
        offsets[i] = at
        p_first[k], p_last[k], p_off[k], p_end[k] = f, l, at, at + s
    return offsets
