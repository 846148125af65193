"""Bottom-up skyline packing: the fast constructive planner.

Buffers are rectangles (steps x bytes) that may only move vertically.  The
packer keeps the skyline, the top of what is placed at every step, as maximal
flat segments, and always works on the lowest one: it places there the
best-ranked buffer whose lifetime fits inside the segment, or, when none fits,
raises the segment to its lower neighbour (that space stays unused).  This
fills memory from the bottom and leaves a hole only where nothing fits, which
is why it beats greedy-by-size first fit (TFLite Micro, XLA's heap simulator)
on real profiles: within 1% of the lower bound where first fit lands 2-4% off.
It is also MiniMalloc's canonical search (offsets non-decreasing in placement
order) without backtracking; `search.py` adds the backtracking.  With
`chain`, it prefers what a packing without waste must do next, for instances
where one may exist.

Cost: one range query per placement or raise.  Unplaced buffers sit in an
array sorted by first step, so the candidates of segment [a, b] are a
contiguous slice filtered by last <= b, found through an index of where each
step's buffers begin; short slices are scanned in Python, long ones with
numpy, and placed entries are compacted away as they pile up.  What a
placement leaves of the lowest segment is worked on at once, without a round
trip through the heap, and a segment merged into its left neighbour keeps
that one's heap entry.  With a numpy query by groups for `flush`, these cut
the instructions of a pack by 15-44%
(callgrind: mixed 10k by `area` 675M -> 528M, training 10k by flush `area`
1,057M -> 587M, tiled 10k by chain `size` 703M -> 600M), with the same plans.
A query that finds nothing cuts later slices of segments with the same right
end, and `flush` finds the best buffer flush with the right end in a list of
those ending there: flush `area` on mixed 10k 519M -> 447M, `area` 444M ->
417M, the top's repack of mixed 100k 1,751M -> 1,582M (docs/memplan.md).
What a placement leaves at the lowest height waits in a list, not the heap,
or is worked on at once: `area` 409M -> 399M, flush `area` 467M -> 439M.
"""

from __future__ import annotations

import bisect
import heapq
import itertools

import numpy as np

_INF = 1 << 62
# Slices up to this length are scanned in Python; longer ones pay numpy's call overhead.
_SCAN = 32


def compress(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Renumber steps densely (0..T-1), keeping which lifetimes overlap.

    Where the steps span at most 4 per buffer, a running count over a mark per step numbers
    them without a sort (0.9 ms against 45 ms at mixed 100k, the same numbers)."""
    if len(first):
        low = min(int(first.min()), int(last.min()))
        span = max(int(first.max()), int(last.max())) - low + 1
        if span <= 4 * len(first):
            used = np.zeros(span, bool)
            used[first - low] = used[last - low] = True
            number = np.cumsum(used) - 1
            return number[first - low], number[last - low], int(number[-1]) + 1
    steps = np.unique(np.concatenate([first, last]))
    return np.searchsorted(steps, first), np.searchsorted(steps, last), len(steps)


def step_load(first: np.ndarray, last: np.ndarray, size: np.ndarray, steps: int) -> np.ndarray:
    """Summed size of the buffers live at each (compressed) step."""
    load = np.zeros(steps + 1, np.int64)
    np.add.at(load, first, size)
    np.add.at(load, last + 1, -size)
    return np.cumsum(load)[:steps]


def step_starts(by_first: np.ndarray, steps: int) -> np.ndarray:
    """For first steps sorted ascending: begin[t], where those starting at t or later begin (t = 0..steps),
    so the buffers starting in steps [x, y) are begin[x]:begin[y].  A count per step, not a search
    (0.2 against 1.5 ms at 48k steps)."""
    begin = np.zeros(steps + 1, np.int64)
    np.cumsum(np.bincount(by_first, minlength=steps), out=begin[1:])
    return begin


def _index(by_first: np.ndarray, lasts: np.ndarray, steps: int) -> tuple[list[int], list[int]]:
    """For each step t, where the listed buffers starting at t or later begin (and, at t = steps,
    their end), and the earliest last step among them.

    A segment [a, b]'s candidates are then the buffers from begin[a] to begin[b + 1]; where the
    earliest last step is past b, nothing unplaced fits and the segment needs no query.  Placed
    buffers count as lasting forever, and placements only make the true value grow, so a value
    computed earlier still makes a safe skip, and so does b + 1 at a once a query of [a, b] found
    nothing.  The buffers placed since the index was built made 33-45% of the queries find nothing
    (10k buffers, flush `area`); the raise takes 42-62% of those away, and 6-10% of a pack's
    instructions.
    """
    begin = step_starts(by_first, steps)
    suffix = np.minimum.accumulate(lasts[::-1])[::-1]
    return begin.tolist(), np.append(suffix, _INF)[begin[:-1]].tolist()


def _runs(heights: np.ndarray) -> list[tuple[int, int, int]]:
    """The maximal runs [a, b] of equal height h in `heights`, as (a, b, h)."""
    starts = np.flatnonzero(np.diff(heights, prepend=heights[0] - 1))
    ends = np.append(starts[1:] - 1, len(heights) - 1)
    return list(zip(starts.tolist(), ends.tolist(), heights[starts].tolist()))


def _log2_lengths(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """floor(log2) of each lifetime's length: the power-of-two spans, two of which cover it."""
    return np.frexp((last - first + 1).astype(np.float64))[1] - 1


def skyline(first: np.ndarray, last: np.ndarray, top: np.ndarray, steps: int) -> np.ndarray:
    """Per step, the highest `top` among the buffers live there (0 where none is): where placed
    buffers leave memory free for more above them.

    Each lifetime is covered by two spans of a power-of-two length, and the spans' maxima go down
    one length at a time, halving: O(n + T log T) in numpy.
    """
    if not len(first):
        return np.zeros(steps, np.int64)
    level = _log2_lengths(first, last)
    levels = int(level.max()) + 1
    table = np.zeros((levels, steps), np.int64)
    np.maximum.at(table, (level, first), top)
    np.maximum.at(table, (level, last + 1 - (1 << level)), top)
    for k in range(levels - 1, 0, -1):
        half = 1 << (k - 1)
        spans = steps - (1 << k) + 1  # where a span of 2**k steps can start
        np.maximum(table[k - 1, :spans], table[k, :spans], out=table[k - 1, :spans])
        np.maximum(table[k - 1, half : half + spans], table[k, :spans], out=table[k - 1, half : half + spans])
    return table[0]


def span_max(heights: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Per lifetime, the highest of `heights` over its steps: the lowest offset a buffer can take
    above a floor (`skyline`'s converse).

    A sparse table: row k holds the maxima over 2**k steps, and a lifetime is covered by two of
    its spans: O(T log T + n) in numpy.
    """
    if not len(first):
        return np.zeros(0, heights.dtype)
    level = _log2_lengths(first, last)
    table = np.zeros((int(level.max()) + 1, len(heights)), heights.dtype)
    table[0] = heights
    for k in range(1, len(table)):
        half = 1 << (k - 1)
        np.maximum(table[k - 1, :-half], table[k - 1, half:], out=table[k, :-half])
    return np.maximum(table[level, first], table[level, last + 1 - (1 << level)])


def skyline_pack(
    first: np.ndarray,
    last: np.ndarray,
    size: np.ndarray,
    rank: np.ndarray,
    steps: int,
    flush: bool = False,
    chain: bool = False,
    floor: np.ndarray | None = None,
) -> list[int]:
    """Offsets for buffers with lifetimes [first, last] over steps 0..steps-1, above `floor`
    (per step, the height where memory is free; 0 everywhere by default).

    `size` must be positive and `rank` a permutation (lower places first
    among buffers that fit the same lowest segment).  With `flush`, buffers
    filling the segment exactly go first, then those flush with one of its
    ends, each group by rank: a packing without waste must put a buffer flush
    with the segment's left end (its left neighbour is higher), so this
    wastes less on random lifetimes (mixed 10k: 1.0085 of the lower bound
    against 1.0243), and more on some real profiles (pangu: 1.011 against
    1.0076), hence an option.

    With `chain`, buffers flush with the segment's left end go first (only
    they can cover its first step there), preferring those after which
    unplaced buffers can still tile the rest of the segment exactly, then
    those whose top meets the left neighbour's: what a packing without waste
    needs, so this wins where the lower bound is tight at every step (tiled
    10k: 1.13 against 1.31).
    """
    n = len(size)
    weight = n if flush else 0  # the group outweighs any rank
    # By first step, then rank: one sort of a packed key where it fits (a fifth of lexsort's time;
    # the keys are distinct, rank being a permutation).
    order = np.argsort(first.astype(np.int64) * n + rank) if steps < _INF // max(n, 1) else np.lexsort((rank, first))
    by_first = first[order]
    lasts = last[order]  # _INF once placed
    ranks = rank[order]
    firsts_l, lasts_l, ranks_l, who_l = by_first.tolist(), lasts.tolist(), ranks.tolist(), order.tolist()
    sizes_l = size[order].tolist()
    begin, soonest = _index(by_first, lasts, steps)
    infs = np.full(n, _INF)  # best_ranked's filler
    done = bytearray(n)  # by buffer: placed
    if weight:
        # The buffers by last step, then rank (ends_at[end_begin[b]:end_begin[b + 1]] end at b), and
        # their first steps and ranks: `long_query` finds the best flush with a right end b among a
        # few of them in Python instead of over its whole slice in numpy (with `empty_from` below, flush
        # `area` on mixed 10k: 519M -> 447M instructions, the same plans).
        by_last = np.argsort(last.astype(np.int64) * n + rank) if steps < _INF // max(n, 1) else np.lexsort((rank, last))
        ends_at, end_begin = by_last.tolist(), step_starts(last[by_last], steps).tolist()
        first_of, rank_of = first.tolist(), rank.tolist()
    # Segments: end_of[a] = b and height[a] for a segment [a, b]; start_of[b] = a.  end_of is -1
    # where no segment starts, which also invalidates stale heap entries.
    end_of = [-1] * steps
    start_of = [-1] * steps
    height = [0] * steps
    # The heap holds (h, a) for segments [a, end_of[a]] at height h, as the int h x room + a (the
    # same order as the pair, without a tuple to build and compare per entry; room a power of two,
    # so a shift and a mask take it apart, cheaper than divmod); an entry is stale once a segment no
    # longer starts at a or has moved from h, and one entry stands for a segment that grows while it
    # stays at (h, a).
    shift = int(steps).bit_length()  # steps may come as a numpy int
    room, mask = 1 << shift, (1 << shift) - 1
    heap: list[int] = []
    for a, b, h in _runs(floor) if floor is not None else [(0, steps - 1, 0)]:
        end_of[a], start_of[b], height[a] = b, a, h
        heap.append(h * room + a)
    heapq.heapify(heap)
    offsets = [0] * n
    placed = dead = 0
    # A compaction costs O(unplaced + steps) (the index is per step), so where steps outnumber the
    # buffers it waits for more placed ones: the top's repack at mixed 100k (20k buffers over 48k steps)
    # took 4.00G -> 3.79G instructions with steps // 32, mixed 10k's packs 1.137G -> 1.127G.
    compact_at = max(64, n // 4, steps // 32)
    push, pop = heapq.heappush, heapq.heappop
    # Per segment (b, h): whether unplaced buffers tile [t, b] exactly, for the steps t asked so
    # far.  While [a, b] is a segment at h no buffer inside it was placed, so answers found for
    # a wider segment ending at b still hold.
    tilings: dict[tuple[int, int], dict[int, bool]] = {}

    def tiles(t: int, b: int, known: dict[int, bool]) -> bool:
        """Whether unplaced buffers tile [t, b] exactly: a depth-first search along buffers
        starting where the last one ended, remembering every step it settles."""
        if t > b or t in known:
            return t > b or known[t]
        path = [[t, begin[t]]]
        while path:
            frame = path[-1]
            u, k = frame
            child = -1
            while k < len(firsts_l) and firsts_l[k] == u:  # unplaced buffers starting at u
                y = lasts_l[k]
                k += 1
                if y == b or (y < b and known.get(y + 1)):
                    break  # it ends the tiling, or leads to a step known to tile
                if y < b and y + 1 not in known:
                    child = y + 1
                    break
            else:
                frame[1] = k
                known[u] = False
                path.pop()
                continue
            if child < 0:  # reached b, or a step known to tile: so does the whole path
                for f in path:
                    known[f[0]] = True
                return True
            frame[1] = k
            path.append([child, begin[child]])
        return False

    def left_flush(lo: int, a: int, b: int, h: int) -> int:
        """The best buffer starting at a and fitting [a, b] under `chain`'s preferences, or -1."""
        hi = begin[a + 1]
        if hi - lo < 2:  # most segments: at most one buffer starts there
            return lo if hi > lo and lasts_l[lo] <= b else -1
        # The slice is in rank order (sorted by first step, then rank): those whose top meets a
        # neighbour's go first, each part keeping it.
        left = height[start_of[a - 1]] - h if a else _INF
        right = height[b + 1] - h if b < steps - 1 else _INF
        meet, rest = [], []
        for k in range(lo, hi):
            y = lasts_l[k]
            if y <= b:
                (meet if sizes_l[k] == left or (sizes_l[k] == right and y == b) else rest).append(k)
        fits = meet + rest
        if len(fits) < 2:
            return fits[0] if fits else -1
        known = tilings.get((b, h))
        if known is None:
            if len(tilings) > 64:
                tilings.clear()
            known = tilings[b, h] = {}
        for k in fits:
            if tiles(lasts_l[k] + 1, b, known):
                return k
        return fits[0]

    def best_ranked(lo: int, hi: int, b: int) -> int:
        """The best-ranked of the buffers lo..hi - 1 that end by b, or -1: numpy over a long slice."""
        # A slice of a kept filler costs numpy fewer instructions than a Python int, and the list
        # tells whether the minimum fits more cheaply than a numpy scalar.
        key = np.where(lasts[lo:hi] <= b, ranks[lo:hi], infs[lo:hi])
        k = lo + int(key.argmin())
        return k if lasts_l[k] <= b else -1

    def long_query(lo: int, hi: int, a: int, b: int) -> int:
        """The main loop's query of buffers lo..hi - 1 (those starting in [a, b]) over a long slice."""
        if not weight:
            return best_ranked(lo, hi, b)
        # Exact fits and those flush with the left end start at a: the first of them in rank order.
        starts, j = begin[a + 1], -1
        if starts - lo <= _SCAN:
            for k in range(lo, starts):
                if lasts_l[k] <= b:
                    if lasts_l[k] == b:
                        return k
                    if j < 0:
                        j = k
        elif len(inside := (lasts[lo:starts] <= b).nonzero()[0]):
            exact = (lasts[lo + inside] == b).nonzero()[0]
            if len(exact):
                return lo + int(inside[exact[0]])
            j = lo + int(inside[0])
        # Else the better ranked of that one and the best flush with the right end only; the rest
        # only where neither exists.  Those ending at b come listed by rank (few, but for a long list).
        k, e, stop = -1, end_begin[b], end_begin[b + 1]
        if stop - e <= _SCAN:
            for t in range(e, stop):
                i = ends_at[t]
                if first_of[i] > a and not done[i]:
                    f = first_of[i]  # its place: by rank among those starting at f
                    k = bisect.bisect_left(ranks_l, rank_of[i], begin[f], begin[f + 1])
                    break
        elif len(right := (lasts[starts:hi] == b).nonzero()[0]):
            k = starts + int(right[0] if len(right) == 1 else right[ranks[starts + right].argmin()])
        if k >= 0:
            return k if j < 0 or ranks_l[k] < ranks_l[j] else j
        return j if j >= 0 or starts == hi else best_ranked(starts, hi, b)

    # empty_from[b]: the lowest step c known to start no unplaced buffer that ends by b, in [c, b]
    # (b + 1 while none is known).  Placements only make that truer, so a query of [a, b] that found
    # nothing cuts the slice of every later segment [a', b] at begin[a]: a segment raised into its
    # left neighbour is queried over the neighbour's starts alone.
    empty_from = list(range(1, steps + 1))
    # Segments left at the lowest height by a placement, waiting their turn: a list, not the heap,
    # since all of them are at the lowest height (the order among segments at one height changes no
    # choice: their buffers and neighbours are their own).
    level: list[int] = []
    while placed < n:
        entry = level.pop() if level else pop(heap)
        h, a = entry >> shift, entry & mask
        b = end_of[a]
        if b < 0 or height[a] != h:
            continue
        while True:  # [a, b] at h is the lowest segment
            j = -1
            if soonest[a] <= b and empty_from[b] > a:
                lo = begin[a]
                if chain:
                    j = left_flush(lo, a, b, h)
                if j < 0:
                    # The best-ranked unplaced buffer inside [a, b] (with `flush`, exact fits first, then
                    # those flush with an end); a short slice is scanned here, without a call.
                    hi = begin[empty_from[b]]
                    if hi - lo > _SCAN:
                        j = long_query(lo, hi, a, b)
                    else:
                        best = _INF
                        for k in range(lo, hi):
                            if lasts_l[k] <= b:
                                key = ranks_l[k]
                                if weight:
                                    key += weight * ((firsts_l[k] != a) + (lasts_l[k] != b))
                                if key < best:
                                    best, j = key, k
                if j < 0:  # nothing unplaced that starts at a or later ends by b (see _index)
                    soonest[a] = b + 1
                    empty_from[b] = a
            if j < 0:  # nothing fits: raise the segment
                left = height[start_of[a - 1]] if a else _INF
                right = height[b + 1] if b < steps - 1 else _INF
                if left == right == _INF:
                    raise AssertionError("skyline: unplaced buffers but no segment can hold them")
                if left <= right:  # merge into the left neighbour, whose heap entry stands for both
                    end_of[a] = -1
                    h, a = left, start_of[a - 1]
                if right <= left:  # and/or the right one
                    h, b = right, end_of[b + 1]
                    end_of[start_of[b]] = -1
                end_of[a], start_of[b], height[a] = b, a, h
                if level or (heap and heap[0] < h * room):  # no longer the lowest: queue it
                    if left > right:  # merged right only; merged left, the left one's entry stands
                        push(heap, h * room + a)
                    break
                continue
            x, y, top = firsts_l[j], lasts_l[j], h + sizes_l[j]
            lasts_l[j] = lasts[j] = _INF
            offsets[who_l[j]] = h
            done[who_l[j]] = 1
            placed += 1
            dead += 1
            if y < b:
                end_of[y + 1], start_of[b], height[y + 1] = b, y + 1, h
                if x > a:  # else worked on next, below
                    level.append(h * room + y + 1)
            elif b < steps - 1 and height[b + 1] == top:  # flush with the right neighbour: merge
                y, end_of[b + 1] = end_of[b + 1], -1
            if x == a and a and height[start_of[a - 1]] == top:  # flush with the left one: its entry stands
                end_of[a], x = -1, start_of[a - 1]
                end_of[x], start_of[y] = y, x
            else:
                end_of[x], start_of[y], height[x] = y, x, top
                push(heap, top * room + x)
            if dead > compact_at:
                keep = lasts != _INF
                by_first, lasts, ranks = by_first[keep], lasts[keep], ranks[keep]
                # Filtered, the lists keep their ints: tolist would make new ones and free the old.
                kept = keep.tolist()
                firsts_l, lasts_l, ranks_l, who_l, sizes_l = (
                    list(itertools.compress(column, kept)) for column in (firsts_l, lasts_l, ranks_l, who_l, sizes_l)
                )
                dead, compact_at = 0, max(64, len(firsts_l) // 4, steps // 32)
                begin, soonest = _index(by_first, lasts, steps)
            if placed == n:
                break
            # The rest of the segment, [a, x - 1] or [y + 1, b] at h, is still the lowest: no heap round trip.
            if x > a:
                end_of[a], start_of[x - 1] = x - 1, a
                b = x - 1
            elif y < b:
                a = y + 1
            else:
                break
    return offsets
