"""Exact search for the improvement phase: does everything fit in `cap` units?

A depth-first search over MiniMalloc's canonical solutions (buffers placed in
non-decreasing offset order), phrased on the skyline of `skyline.py`: at every
node take the lowest segment, then either place one of the buffers whose
lifetime fits inside it, or raise it and leave that space unused.  Branching
that way covers every solution in which each buffer rests on another or on 0.
What prunes:

- capacity: at every step, skyline + unplaced live bytes <= cap; only raises
  can break it, so it is checked there;
- valleys: a segment lower than both neighbours stays empty, up to the lower
  neighbour at least, at every step no buffer fitting inside it covers (the
  buffers that do cover it reach over a neighbour), which MiniMalloc's
  section floors see only after the fact;
- covers: a step of the lowest segment whose slack is less than the least
  waste a bare step costs there (the smallest usable buffer, or the raise)
  must be covered at the segment's height, so disjoint buffers that are still
  usable there must cover all such steps (an interval DP);
- symmetry: a buffer already tried at this height is not tried there again
  deeper down (nor its identical twins), and a raise is skipped when some
  fitting buffer would fit under it (dropping that buffer gives a solution
  found in an earlier branch);
- backjumping: a dead end names the steps whose state decides it (the segment
  and its neighbours, or the valley that cannot fit); choices made at segments
  that miss those steps cannot change it and are skipped, not retried.  This
  is what stops the search from thrashing on MiniMalloc's I and K, where the
  plain depth-first search retried thousands of unrelated choices.

Branches go exact fits first, then buffers flush with the segment's left end,
right end, the rest, each group by a priority order; with `chain`, left-flush
buffers after which the rest of the segment can be tiled exactly go first.

`improve` drives it as MiniMalloc drives its solver: restarts over a few
(order, chain) pairs, forward and on the time-mirrored instance, with a
dead-end limit per run that doubles every round;
per round, the lower bound itself first, then capacities 3/4 of the way from
the best proven bound to the best plan.  Deterministic given that it
finishes, so more time can only give a better plan.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from irflow.memplan.skyline import step_load, step_starts

ABORTED = "aborted"
INFEASIBLE = "infeasible"
_INF = 1 << 62
# Dead ends allowed per run in the first round of `improve`, doubled every round.  With
# backjumping, short runs and many restarts do best on the MiniMalloc set (128 over 64 and 256).
_FIRST_FAIL_LIMIT = 128


class _State:
    """What a search path changes, with the undo records to take it back."""

    def __init__(self, load: np.ndarray, n: int) -> None:
        self.free = load.copy()  # live bytes of the unplaced buffers at each step
        self.level = np.where(load > 0, 0, _INF)  # the skyline where something is left to place
        # Where a segment of the skyline starts: step 0, then wherever the level changes, which
        # `_expand` writes through these views (kept: making them costs as much as the compare).
        self.starts = np.ones(len(load), bool)
        self.changes, self.after, self.before = self.starts[1:], self.level[1:], self.level[:-1]
        self.unplaced = [True] * n
        self.banned = [-1] * n  # per group: the height at which it was already tried
        self.trail: list[tuple] = []
        self.placed = 0

    # Places and lifts act inside a segment, so the level they replace is its height: that is
    # what their undo records keep, not a copy.

    def place(self, c: int, x: int, y: int, h: int, size: int) -> None:
        """Buffer c over steps [x, y) at h, the level there."""
        self.trail.append(("place", c, x, y, h, size))
        free, level = self.free[x:y], self.level[x:y]
        free -= size
        level.fill(h + size)
        level[free == 0] = _INF
        self.unplaced[c] = False
        self.placed += 1

    def lift(self, a: int, b: int, h: int, to: int) -> None:
        """Steps [a, b) from h, the level there, to `to`."""
        self.trail.append(("lift", a, b, h))
        self.level[a:b] = to

    def ban(self, groups: list[int], h: int) -> None:
        self.trail.append(("ban", groups, [self.banned[g] for g in groups]))
        for g in groups:
            self.banned[g] = h

    def undo(self, mark: int) -> None:
        while len(self.trail) > mark:
            record = self.trail.pop()
            if record[0] == "ban":
                for g, old in zip(record[1], record[2]):
                    self.banned[g] = old
            elif record[0] == "lift":
                _, a, b, self.level[a:b] = record
            else:
                _, c, x, y, self.level[x:y], size = record
                self.free[x:y] += size
                self.unplaced[c] = True
                self.placed -= 1


class Search:
    """Static data of one instance: lifetimes over steps 0..steps-1, positive sizes in units."""

    def __init__(
        self,
        first: np.ndarray,
        last: np.ndarray,
        size: np.ndarray,
        steps: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.size, self.steps, self.clock = size, steps, clock
        # Nodes expanded by all runs, the most allowed, and how many the clock cannot stop.
        self.nodes, self.node_limit, self.node_floor = 0, _INF, 0
        self.load = step_load(first, last, size, steps)
        self.first_at, self.last_at = first, last
        self.first, self.last, self.sizes = first.tolist(), last.tolist(), size.tolist()
        by_first = np.argsort(first, kind="stable")
        self.by_first = by_first.tolist()
        # The buffers starting in steps [x, y) are by_first[begin[x] : begin[y]].
        self.begin = step_starts(first[by_first], steps).tolist()
        # Identical buffers share a group and are placed in index order: `twin` is the
        # previous one of the group (-1 for the first), which must be placed first.
        group = np.unique(np.stack([first, last, size]), axis=1, return_inverse=True)[1].ravel()
        self.group = group.tolist()
        self.twin = [-1] * len(size)
        seen: dict[int, int] = {}
        for i, g in enumerate(self.group):
            self.twin[i] = seen.get(g, -1)
            seen[g] = i

    def mirror(self) -> Search:
        """The instance with time reversed.  Its conflicts are the same, so its plans are this
        one's; its canonical search, filling from the other end of time, finds others first."""
        end = self.steps - 1
        return Search(end - self.last_at, end - self.first_at, self.size, self.steps, self.clock)

    def run(
        self, cap: int, rank: Sequence[int], fail_limit: int, deadline: float, chain: bool = True
    ) -> np.ndarray | str:
        """Offsets with every top <= cap, INFEASIBLE (proved), or ABORTED (too many dead ends, or time).

        With `chain`, a buffer flush with the segment's left end goes before the others flush
        with it when unplaced buffers could then tile the rest of the segment exactly.
        """
        if self.load.max(initial=0) > cap:
            return INFEASIBLE
        n = len(self.sizes)
        st = _State(self.load, n)
        offsets = [0] * n
        # Choice points: [h, a, b, raise_to, branches, conflict lo, conflict hi, next branch, trail length].
        stack: list[list] = []
        fails = 0
        while st.placed < n:
            self.nodes += 1
            if self.nodes >= self.node_limit or self._late(deadline):
                return ABORTED
            changed = (stack[-1][1] - 1, stack[-1][2] + 1) if stack else (0, self.steps - 1)
            stack.append(self._expand(cap, rank, st, chain, changed) + [0, len(st.trail)])
            while True:  # take the next open branch, backtracking as needed
                cp = stack[-1]
                h, a, b, raise_to, branches, lo, hi, k, mark = cp
                if len(st.trail) > mark:
                    fails += 1
                    if fails > fail_limit:
                        return ABORTED
                    st.undo(mark)
                if k == len(branches):
                    # Every branch failed for what steps [lo, hi] hold, which only choices made
                    # at segments meeting them decide: back to the last of those (backjumping).
                    stack.pop()
                    while stack and (stack[-1][2] < lo or stack[-1][1] > hi):
                        stack.pop()
                    if not stack:
                        return INFEASIBLE
                    top = stack[-1]
                    top[5], top[6] = min(top[5], lo), max(top[6], hi)
                    continue
                cp[7] = k + 1
                c = branches[k]
                if c < 0:
                    st.lift(a, b + 1, h, raise_to)
                    break
                tried = [self.group[d] for d in branches[:k] if d >= 0]
                if tried:
                    st.ban(tried, h)
                st.place(c, self.first[c], self.last[c] + 1, h, self.sizes[c])
                offsets[c] = h
                break
        return np.array(offsets, np.int64)

    def _late(self, deadline: float, every: int = 32) -> bool:
        """Past the deadline, once the floor is reached; the clock is read every `every` nodes."""
        return self.nodes >= self.node_floor and self.nodes % every == 0 and self.clock() > deadline

    def _expand(self, cap: int, rank: Sequence[int], st: _State, chain: bool, changed: tuple[int, int]) -> list:
        """[h, a, b, raise height, branches, conflict lo, conflict hi] for the lowest segment.

        A branch is a buffer, or -1 to raise.  The conflict is the steps whose state decides
        the branches: the segment and its neighbours, or a valley that already cannot fit.
        """
        first, last, size, group, twin = self.first, self.last, self.sizes, self.group, self.twin
        level, free, unplaced = st.level, st.free, st.unplaced
        # Segment k spans steps [bounds[k], bounds[k + 1]) at heights[k], where the unplaced
        # bytes peak at peaks[k]; the lowest is the first lowest.  Past the last segment, heights
        # has an infinite one, which as heights[-1] is also the first segment's left neighbour.
        np.not_equal(st.after, st.before, out=st.changes)
        (starts,) = st.starts.nonzero()
        heights, peaks = level[starts].tolist(), np.maximum.reduceat(free, starts).tolist()
        heights.append(_INF)
        bounds = starts.tolist()
        bounds.append(self.steps)
        h = min(heights)
        k = heights.index(h)
        a, b = bounds[k], bounds[k + 1] - 1
        raise_to = min(heights[k - 1], heights[k + 1])
        valley = self._valley_misfit(cap, st, bounds, heights, peaks, *changed)
        if valley is not None:
            return [h, a, b, raise_to, [], *valley]
        conflict = [a - 1 if a else 0, b + 1]
        fit = [c for c in self.by_first[self.begin[a] : self.begin[b + 1]] if unplaced[c] and last[c] <= b]
        banned, size_of = st.banned, size.__getitem__
        usable = [c for c in fit if banned[group[c]] != h]  # by first step, as `fit`
        fit_least = min(map(size_of, fit), default=_INF)
        usable_least = fit_least if len(usable) == len(fit) else min(map(size_of, usable), default=_INF)
        # A step left uncovered at h wastes at least `least` bytes: what is later placed over it
        # rests on a buffer placed at h beside it, or on a raise to a neighbour.
        least = usable_least if usable_least < raise_to - h else raise_to - h
        peak = peaks[k]
        if peak > cap - h - least:
            if not _covers((free[a : b + 1] > cap - h - least).tolist(), usable, first, last, a):
                return [h, a, b, raise_to, [], *conflict]
        # A raise is dominated when some fitting buffer fits under it.
        can_raise = raise_to < _INF and fit_least > raise_to - h and peak + raise_to <= cap
        cands = sorted([c for c in usable if twin[c] < 0 or not unplaced[twin[c]]], key=rank.__getitem__)
        # Exact fits first, then buffers flush with the left end (with `chain`, those after which
        # the rest can be tiled first), then with the right end, then the rest.
        flush: list[list[int]] = [[], [], [], [], []]
        for c in cands:
            flush[2 * (first[c] != a) + (last[c] != b)].append(c)
        if chain and len(flush[1]) > 1:
            tiles = _tiles(usable, first, last, a, b)
            flush[1], flush[4] = [c for c in flush[1] if tiles[last[c] + 1 - a]], [
                c for c in flush[1] if not tiles[last[c] + 1 - a]
            ]
        branches = flush[0] + flush[1] + flush[4] + flush[2] + flush[3]
        return [h, a, b, raise_to, branches + [-1] if can_raise else branches, *conflict]

    def _valley_misfit(
        self, cap: int, st: _State, bounds: list[int], heights: list[int], peaks: list[int], lo: int, hi: int
    ) -> list[int] | None:
        """Steps [lo', hi'] around a valley segment meeting steps [lo, hi] whose steps that no
        buffer inside covers do not fit when lifted to its lower neighbour, if there is one.

        Only the steps the last choice changed need a look: every other valley passed the
        same test before it.  The segments a choice touches are few (3 on average on
        MiniMalloc's J), so they are walked in Python: numpy's calls on them cost more than
        their work.
        """
        lo, hi = max(lo, 0), min(hi, self.steps - 1)
        for k in range(bisect_right(bounds, lo) - 1, bisect_right(bounds, hi)):
            if heights[k] >= heights[k - 1] or heights[k] >= heights[k + 1]:
                continue
            lifted = min(heights[k - 1], heights[k + 1])
            x, y = bounds[k], bounds[k + 1]
            if peaks[k] > cap - lifted and self._uncovered(st, x, y, cap - lifted):
                return [max(x - 1, 0), y]
        return None

    def _uncovered(self, st: _State, x: int, y: int, above: int) -> bool:
        """Whether some step of [x, y) with more than `above` unplaced bytes is covered by no
        unplaced buffer inside [x, y): a sweep over those buffers by first step."""
        first, last, unplaced = self.first, self.last, st.unplaced
        inside = [c for c in self.by_first[self.begin[x] : self.begin[y]] if unplaced[c] and last[c] < y]
        i, reach = 0, x - 1  # the next buffer of `inside`, the last step covered by those before it
        for t in (st.free[x:y] > above).nonzero()[0].tolist():
            t += x
            while i < len(inside) and first[inside[i]] <= t:
                if last[inside[i]] > reach:
                    reach = last[inside[i]]
                i += 1
            if reach < t:
                return True
        return False


def _tiles(usable: list[int], first: list[int], last: list[int], a: int, b: int) -> list[bool]:
    """For each step t of [a, b + 1], whether disjoint buffers of `usable` (by first step) tile [t, b]."""
    tiles = [False] * (b - a + 2)
    tiles[b - a + 1] = True
    for c in reversed(usable):  # a buffer's end is settled before its start: later starts come first
        if tiles[last[c] + 1 - a]:
            tiles[first[c] - a] = True
    return tiles


def _covers(tight: list[bool], usable: list[int], first: list[int], last: list[int], a: int) -> bool:
    """Whether disjoint buffers of `usable` (by first step) cover every tight step of [a, a + len(tight)).

    At a tight step the bytes still to place fill the room above the lowest segment
    exactly, so one of them must start at the segment's height there; buffers at one
    height never share a step, and all of them lie inside the segment, whose
    neighbours are higher.
    """
    n = len(tight)
    done = [False] * (n + 1)  # done[t]: steps t.. can be covered
    done[n] = True
    k = len(usable) - 1
    for t in range(n - 1, -1, -1):
        ok = not tight[t] and done[t + 1]
        while k >= 0 and first[usable[k]] - a == t:
            ok = ok or done[last[usable[k]] + 1 - a]
            k -= 1
        done[t] = ok
    return done[0]


def improve(
    search: Search,
    ranks: Sequence[np.ndarray],
    offsets: np.ndarray,
    height: int,
    lower: int,
    deadline: float,
    nodes: int | None = None,
    floor: int = 0,
    mirrored: Sequence[np.ndarray] = (),
) -> tuple[np.ndarray, int]:
    """Best (offsets, height) found before `deadline` and within `nodes` search nodes, from a known plan.

    The first `floor` nodes run whatever the clock says.

    Each round tries the lower bound itself, then capacities 3/4 of the way
    from the bound to the best height (closer to what is likely feasible than
    halving), every capacity with each (rank, chain) pair in turn, the last
    one that worked first; a round's dead-end limit is twice the last one's.
    A run that finishes without a solution proves its capacity infeasible and
    raises the bound.  `mirrored` ranks the buffers of the time-mirrored
    instance: each is tried with `chain` after the pairs above, on
    `search.mirror()`, and its runs count towards the same node limits.
    """
    twin = search.mirror() if len(mirrored) else search
    orders = [(search, rank.tolist(), chain) for chain in (True, False) for rank in ranks]
    orders += [(twin, rank.tolist(), True) for rank in mirrored]
    limit = _FIRST_FAIL_LIMIT
    search.node_limit = _INF if nodes is None else search.nodes + nodes
    search.node_floor = search.nodes + floor

    def more() -> bool:
        return search.nodes < search.node_limit and not search._late(deadline, every=1)

    def run(on: Search, cap: int, rank: list[int], chain: bool) -> np.ndarray | str:
        """`on.run`, with the twin's node count and limits kept as `search`'s."""
        on.nodes, on.node_limit, on.node_floor = search.nodes, search.node_limit, search.node_floor
        found = on.run(cap, rank, limit, deadline, chain)
        search.nodes = on.nodes
        return found

    while height > lower and more():
        low, cap = lower, lower
        while low < height and more():
            for k, (on, rank, chain) in enumerate(orders):
                found = run(on, cap, rank, chain)
                if found is not ABORTED:
                    orders.insert(0, orders.pop(k))  # what worked goes first next time
                    break
                if not more():  # out of time: the next order would run its first `every` nodes late
                    break
            if found is INFEASIBLE:
                lower = low = cap + 1
            elif found is ABORTED:
                low = cap + 1
            else:
                offsets, height = found, int((found + search.size).max())
            cap = low + 3 * (height - low) // 4
        limit *= 2
    return offsets, height
