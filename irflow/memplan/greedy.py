"""Placement in a fixed order, the way the greedy planners compilers ship work.

`greedy_by_size` is TFLite Micro's GreedyMemoryPlanner (also XLA's and TVM's
greedy): largest buffer first, equal sizes in input order, each at the lowest
offset that clears the buffers already placed whose lifetimes overlap its own
(first fit).  `plan` runs it as one of its candidates, so its plan is never
worse than greedy by size wherever that runs; the benchmark also uses it, and
`fit_in_order(..., best_fit=True)` in allocation order, as its baselines.

The buffers placed so far are kept sorted by offset, so the ones overlapping a
new buffer in time (its hits) come out of a mask already in offset order, and
the gaps between them follow from a running maximum of their ends.  First fit
places a batch of 64 buffers with one set of numpy calls: one mask of the batch
against everything placed, one running maximum over all the batch's hits (each
row lifted above the previous one's values), a first fitting gap per row.  Those
are first fits against the buffers placed before the batch; one stays exact
wherever it clears the batch's earlier members, since more obstacles never open
a lower place.  Where it meets one, the search goes on in Python from that
member's end, over the row's hits already at hand.  The plans are the same as
placing one buffer at a time, with about 60 numpy operations per batch instead
of 15-20 per buffer; the element work stays quadratic (the mask over everything
placed).  Greedy by size at 10k buffers, as `plan` calls it, interleaved best of
five against one buffer at a time (AMD EPYC Zen 3 at 2.45 GHz, 2 cores, load
2.7-3 with another job), batches of 32, seeds 0-3: mixed 0.126-0.129 CPU s
against 0.261-0.278, tiled 0.099-0.132 against 0.252-0.376, training 0.288-0.322
against 0.292-0.326 (its long lifetimes give 1,250 hits per buffer, whose
element work batches do not change, and 5,204 repair searches for seed 0's 10k
buffers).  Batches of 64 took another 13-18% off mixed and tiled at 10k (best
of three, seeds 0-1: mixed 0.084-0.085 against 0.100-0.103 CPU s) and 1-5% off
training; more rows meet earlier members, so repairs grow with the batch:
training 30k lost 8% (1.27-1.29 against 1.18-1.19 s), a size where the default runs
greedy by size only on plans 1/100 above the bound, which training's are not.

Best fit stays one buffer at a time: a best fit can move even where it clears
the batch's earlier members, since they can cut a larger gap into a smaller one
that still fits, so in allocation order (neighbours overlapping in time) a batch
rarely gets past its first member (1.9 CPU s against 0.4 on training 10k)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

import numpy as np

# Buffers placed per batch of numpy calls.
_BATCH = 64
# Batch rows are told apart by adding row x (the arena's top + 1); that must stay within int64.
_ROOM = 1 << 62
# Which members of a batch come before which: [j, i] for i < j.
_EARLIER = np.tri(_BATCH, k=-1, dtype=bool)
_OPEN = np.iinfo(np.int64).max


def greedy_by_size(
    size: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    beat: int | None = None,
    deadline: float = float("inf"),
    clock: Callable[[], float] = time.perf_counter,
    lowest: np.ndarray | None = None,
) -> np.ndarray | None:
    """First fit, largest first; equal sizes keep their input order as in TFLite Micro.

    None as soon as the arena reaches `beat` (it only grows, so the plan could not be smaller),
    or once `clock()` passes `deadline` (read between batches).  `lowest` is, per buffer, the
    lowest offset it may take (0 by default): what lies below it is taken, as under a floor.
    """
    return _first_fit(size, first, last, np.argsort(-size, kind="stable"), beat, deadline, clock, lowest)


def fit_in_order(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, order: np.ndarray, best_fit: bool = False
) -> np.ndarray:
    """Offsets placing the buffers in `order`, each in the lowest gap it fits (the smallest with `best_fit`).

    A gap runs from the top of everything placed below it among the buffers that overlap in
    time to the next such buffer's offset; the last one is open.
    """
    offsets = (_best_fit if best_fit else _first_fit)(size, first, last, order)
    assert offsets is not None  # nothing to beat
    return offsets


def _first_fit(
    size: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    order: np.ndarray,
    beat: int | None = None,
    deadline: float = float("inf"),
    clock: Callable[[], float] = time.perf_counter,
    lowest: np.ndarray | None = None,
) -> np.ndarray | None:
    """First fit in `order`, a batch of buffers at a time (see the module's docstring), each
    buffer at `lowest` or above."""
    n = len(size)
    offsets = np.zeros(n, np.int64)
    lowest = np.zeros(n, np.int64) if lowest is None else lowest
    floor = int(lowest.max(initial=0))
    span = max(-int(first.min()), int(last.max())) if n else 0
    steps = np.int16 if span < 1 << 15 else np.int32 if span < 1 << 31 else np.int64
    first, last = first.astype(steps), last.astype(steps)
    placed = _Placed(n, steps)
    order = np.asarray(order, np.int64)
    done = 0
    while done < n:
        if clock() > deadline:
            return None
        batch = order[done : done + min(_BATCH, max(1, _ROOM // (max(placed.top, floor) + 1)))]
        s, f, l = size[batch], first[batch], last[batch]
        fits = _Fits(placed, s, f, l, lowest[batch])
        at = fits.at
        # Member j's place against the placed buffers is its place unless it meets an earlier
        # member in time and in bytes.
        meets = (f[:, None] <= l) & (l[:, None] >= f) & _EARLIER[: len(s), : len(s)]
        clashes = (meets & (at[:, None] < at + s) & (at < (at + s)[:, None])).any(axis=1)
        if clashes.any():
            at = _repair(fits, int(clashes.argmax()), meets)
        placed.insert(at, s, f, l)
        if beat is not None and placed.top >= beat:
            return None
        offsets[batch] = at
        done += len(batch)
    return offsets


class _Placed:
    """The buffers placed so far, sorted by offset, and the top of the arena."""

    def __init__(self, n: int, steps: type) -> None:
        self.off = np.zeros(0, np.int64)
        self.end = np.zeros(0, np.int64)
        self.first = np.zeros(0, steps)
        self.last = np.zeros(0, steps)
        self.top = 0
        # Scratch for a batch's masks against everything placed, reused: the two compares into fresh
        # arrays took 330-340 us against 40-60 us here for 32 x 5,000 in a micro-benchmark.
        self.mask = np.empty(_BATCH * n, bool)
        self.other = np.empty(_BATCH * n, bool)

    def insert(self, at: np.ndarray, s: np.ndarray, f: np.ndarray, l: np.ndarray) -> None:
        """Add the buffers at `at`."""
        by = np.argsort(at, kind="stable")
        at, end = at[by], (at + s)[by]
        new = np.searchsorted(self.off, at, "right") + np.arange(len(at))
        old = np.ones(len(self.off) + len(at), bool)
        old[new] = False
        self.off, self.end, self.first, self.last = (
            _merged(mine, theirs, old, new)
            for mine, theirs in ((self.off, at), (self.end, end), (self.first, f[by]), (self.last, l[by]))
        )
        self.top = max(self.top, int(end.max(initial=0)))  # the arena only grows


def _merged(mine: np.ndarray, theirs: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """`mine` at the positions `old` marks and `theirs` at `new`."""
    out = np.empty(len(old), mine.dtype)
    out[old] = mine
    out[new] = theirs
    return out


class _Fits:
    """First fits of a batch of buffers (rows) against the placed ones alone, each row at its
    `low` or above.

    The placed buffers overlapping each row in time (its hits) come out of one mask, row
    after row, each row's in offset order.  The running top of their ends is one accumulate
    over all rows, row r's ends lifted by r x `big` (above every end and low), so no row's
    values reach the next's.
    """

    def __init__(self, placed: _Placed, s: np.ndarray, f: np.ndarray, l: np.ndarray, low: np.ndarray) -> None:
        m, k = len(s), len(placed.off)
        self.s, self.big = s, max(placed.top, int(low.max())) + 1
        mask = placed.mask[: m * k].reshape(m, k)
        other = placed.other[: m * k].reshape(m, k)
        np.less_equal(placed.first, l[:, None], out=mask)
        np.greater_equal(placed.last, f[:, None], out=other)
        mask &= other
        hits = placed.mask[: m * k].nonzero()[0]  # the mask flat, as flatnonzero without its ravel
        ids = np.arange(m)
        lifts = ids * self.big
        # Row r's hits are hits[bounds[r]:bounds[r + 1]].
        self.bounds = bounds = np.searchsorted(hits, np.arange(m + 1) * k)
        count = bounds[1:] - bounds[:-1]
        hits -= np.repeat(ids * k, count)  # the placed buffers' positions
        run = placed.end.take(hits, mode="clip")  # valid positions: "clip" skips the bounds checks
        run += np.repeat(lifts, count)
        # A row's top starts at its low: its first hit ends there at least.
        hit, starts = count > 0, bounds[:-1][count > 0]
        run[starts] = np.maximum(run[starts], (lifts + low)[hit])
        self.run = np.maximum.accumulate(run, out=run)
        self.off = off = placed.off.take(hits, mode="clip")
        # The gap below hit h holds the row where off[h] - s >= the top before h: low at a row's first
        # hit (the previous row's lifted top is below the lift, so that case is set apart).
        room = np.repeat(lifts - s, count)
        room += off
        ok = np.empty(len(hits), bool)
        np.greater_equal(room[1:], run[:-1], out=ok[1:])
        ok[starts] = off[starts] - low[hit] >= s[hit]
        # Each row's first fit, else on top of its hits (its low without any).
        self.at = np.where(hit, run[bounds[1:] - 1] - lifts, low) if len(hits) else low
        fit = np.flatnonzero(ok)
        if len(fit):
            h = fit[np.minimum(np.searchsorted(fit, bounds[:-1]), len(fit) - 1)]
            below = np.where(h > bounds[:-1], run[h - 1] - lifts, low)
            self.at = np.where((h >= bounds[:-1]) & (h < bounds[1:]), below, self.at)

    def from_(self, j: int, a: int) -> int:
        """Row j's lowest place at or above `a` against the placed buffers alone."""
        b0, b1, s, lift = int(self.bounds[j]), int(self.bounds[j + 1]), int(self.s[j]), j * self.big
        # Gaps below h0, the first hit at or above a + s, are too low.
        h0 = b0 + int(np.searchsorted(self.off[b0:b1], a + s))
        at = max(a, int(self.run[h0 - 1]) - lift) if h0 > b0 else a
        if h0 == b1 or self.off[h0] - at >= s:
            return at
        tops = np.maximum(self.run[h0:b1] - lift, a)  # the top after each hit from h0 on
        ok = np.flatnonzero(self.off[h0 + 1 : b1] - tops[:-1] >= s)
        return int(tops[ok[0]] if len(ok) else tops[-1])


def _repair(fits: _Fits, start: int, meets: np.ndarray) -> np.ndarray:
    """The batch's first fits against the placed buffers and its earlier members, from row `start` on.

    A row's first fit against the placed buffers stays its first fit against more buffers
    wherever it clears them: more obstacles never open a lower place.  Where it meets one,
    every place from it up to that one's end is taken too, so the search goes on from there:
    past the earlier members in offset order (one pass clears a stack of them, as buffers
    sharing a floor make), then past the placed buffers, until neither moves it.
    """
    at, s = fits.at.tolist(), fits.s.tolist()
    earlier: list[list[int]] = [[] for _ in at]
    for j, i in zip(*meets[start:].nonzero()):
        earlier[start + j].append(i)
    for j in range(start, len(at)):
        a, size, members = at[j], s[j], sorted(earlier[j], key=at.__getitem__)
        while True:  # a is clear of the placed buffers here
            clear = a
            for i in members:
                if at[i] >= a + size:
                    break
                if at[i] + s[i] > a:
                    a = at[i] + s[i]
            if a == clear:
                break
            a = fits.from_(j, a)
        at[j] = a
    return np.array(at, np.int64)


def _best_fit(size: np.ndarray, first: np.ndarray, last: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Best fit in `order`, one buffer at a time.

    Batches do not carry over: a best fit against more buffers can move even where it clears
    them, since they can cut a larger gap into a smaller one that still fits.
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
            ends = np.maximum.accumulate(p_end[hit])
            # Gap 0 runs from 0 to offs[0], gap g from ends[g - 1] to offs[g]; the last is open.
            gaps = np.empty(len(offs) + 1, np.int64)
            gaps[0], gaps[1:-1], gaps[-1] = offs[0], offs[1:] - ends[:-1], _OPEN
            fits = (gaps >= s).nonzero()[0]
            g = int(fits[gaps[fits].argmin()])
            at = int(ends[g - 1]) if g else 0
        offsets[i] = at
        slot = bisect.bisect_right(sorted_offsets, at)
        sorted_offsets.insert(slot, at)
        placed[:, slot + 1 : k + 1] = placed[:, slot:k]
        placed[:, slot] = at, at + s, f, l
    return offsets
