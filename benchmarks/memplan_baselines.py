"""Baseline planners for benchmarks/memplan.py, written the way the systems we compare with plan.

- `no_reuse`: every buffer gets its own bytes (a plain bump allocator).
- `greedy_by_size`: TFLite Micro's GreedyMemoryPlanner and the XLA/TVM greedy:
  largest buffer first, each at the lowest offset that clears the buffers
  already placed whose lifetimes overlap its own (first fit).
- `best_fit_in_order`: XLA's heap simulator style (also TFLite's ArenaPlanner
  and IREE): buffers in input (allocation) order, each in the smallest gap
  between overlapping buffers already placed, or on top.

All take (size, first, last) arrays in alignment units and return offsets in
units.  The two greedy ones are `irflow.memplan.greedy`'s (the planner runs
greedy by size as one of its candidates, a batch of buffers at a time): a numpy
pass over the buffers placed so far per buffer, O(n^2) element operations, tens
of seconds at 100k buffers.
"""

from __future__ import annotations

import numpy as np

from irflow.memplan.greedy import fit_in_order, greedy_by_size

__all__ = ["best_fit_in_order", "greedy_by_size", "no_reuse"]


def no_reuse(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(size)[:-1]]) if len(size) else np.zeros(0, np.int64)


def best_fit_in_order(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    return fit_in_order(size, first, last, np.arange(len(size)), best_fit=True)
