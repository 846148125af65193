"""Baseline planners for benchmarks/memplan.py, written the way the systems we compare with plan.

- `no_reuse`: every buffer gets its own bytes (a plain bump allocator).
- `greedy_by_size`: TFLite Micro's GreedyMemoryPlanner and the XLA/TVM greedy:
  largest buffer first, each at the lowest offset that clears the buffers
  already placed whose lifetimes overlap its own (first fit).
- `best_fit_in_order`: XLA's heap simulator style (also TFLite's ArenaPlanner
  and IREE): buffers in input (allocation) order, each in the smallest gap
  between overlapping buffers already placed, or on top.

All take (size, first, last) arrays in alignment units and return offsets in
units.  The overlap search is a numpy pass over the buffers placed so far, so
these cost O(n^2) element operations: seconds at 100k buffers.
"""

from __future__ import annotations

import numpy as np


def no_reuse(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(size)[:-1]]) if len(size) else np.zeros(0, np.int64)


def greedy_by_size(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    # TFLite Micro sorts by size only, so equal sizes keep their input order.
    return _place(size, first, last, np.argsort(-size, kind="stable"), best_fit=False)


def best_fit_in_order(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    return _place(size, first, last, np.arange(len(size)), best_fit=True)


def _place(size: np.ndarray, first: np.ndarray, last: np.ndarray, order: np.ndarray, best_fit: bool) -> np.ndarray:
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
            # Gap g runs from the top of everything below it to the next offset; the last is open.
            starts = np.concatenate([[0], ends])
            gaps = np.concatenate([offs, [np.iinfo(np.int64).max]]) - starts
            fits = np.flatnonzero(gaps >= s)
            g = fits[np.argmin(gaps[fits])] if best_fit else fits[0]
            at = int(starts[g])
        offsets[i] = at
        p_first[k], p_last[k], p_off[k], p_end[k] = first[i], last[i], at, at + s
    return offsets
