"""Exact search for the improvement phase: does everything fit in `cap` units?

A depth-first search over MiniMalloc's canonical solutions (buffers placed in
non-decreasing offset order), phrased on the skyline of `skyline.py`: at every
node take the lowest segment, then either place one of the buffers whose
lifetime fits inside it, or raise it and leave that space unused.  Branching
that way covers every solution in which each buffer rests on another or on 0.
What prunes:

- capacity: at every step, skyline + unplaced live bytes <= cap; only raises
  can break it, so it is checked there;
- uncovered steps: steps of the segment that no fitting buffer covers stay
  empty up to the raise height at least;
- symmetry: a buffer already tried at this height is not tried there again
  deeper down (nor its identical twins), and a raise is skipped when some
  fitting buffer would fit under it (dropping that buffer gives a solution
  found in an earlier branch).

`improve` drives it: binary search on the capacity between the best known
lower and upper bounds, several candidate orders per capacity (restarts),
node limits doubling per round; deterministic given that it finishes, so more
time can only give a better plan.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

import numpy as np

from irflow.memplan.skyline import step_load

_INF = 1 << 62
ABORTED = "aborted"
# Dead ends allowed per run in the first round of `improve`, doubled every round.  On the
# MiniMalloc set, 1k-4k beat both shorter runs (too little repair) and longer ones (stuck).
_FIRST_FAIL_LIMIT = 1024
INFEASIBLE = "infeasible"


class Search:
    """Static data of one instance: lifetimes over steps 0..steps-1, positive sizes in units."""

    def __init__(self, first: np.ndarray, last: np.ndarray, size: np.ndarray, steps: int) -> None:
        self.size, self.steps = size, steps
        self.load = step_load(first, last, size, steps)
        self.first, self.last, self.sizes = first.tolist(), last.tolist(), size.tolist()
        by_first = np.argsort(first, kind="stable")
        self.by_first, self.firsts = by_first.tolist(), first[by_first].tolist()
        # Identical buffers share a group and are placed in index order: `twin` is the
        # previous one of the group (-1 for the first), which must be placed first.
        group = np.unique(np.stack([first, last, size]), axis=1, return_inverse=True)[1].ravel()
        self.group = group.tolist()
        self.twin = [-1] * len(size)
        seen: dict[int, int] = {}
        for i, g in enumerate(self.group):
            self.twin[i] = seen.get(g, -1)
            seen[g] = i

    def run(self, cap: int, rank: Sequence[int], fail_limit: int, deadline: float) -> np.ndarray | str:
        """Offsets with every top <= cap, INFEASIBLE (proved), or ABORTED (too many dead ends, or time)."""
        if self.load.max(initial=0) > cap:
            return INFEASIBLE
        first, last, size, group = self.first, self.last, self.sizes, self.group
        n = len(size)
        sky = np.zeros(self.steps, np.int64)
        free = self.load.copy()  # live bytes of unplaced buffers
        level = np.where(free > 0, sky, _INF)  # skyline where something is left to place
        unplaced = [True] * n
        banned = [-1] * n  # per group: a height at which it was already tried
        offsets = [0] * n
        trail: list[tuple] = []  # undo records
        stack: list[list] = []  # choice points: [h, a, b, raise_to, branches, next branch, trail length]
        fails = placed = 0
        while placed < n:
            if fails & 63 == 63 and time.perf_counter() > deadline:
                return ABORTED
            stack.append(self._expand(cap, rank, level, free, unplaced, banned) + [0, len(trail)])
            while True:  # take the next open branch, backtracking as needed
                if not stack:
                    return INFEASIBLE
                cp = stack[-1]
                h, a, b, raise_to, branches, k, mark = cp
                if len(trail) > mark:
                    fails += 1
                    if fails > fail_limit:
                        return ABORTED
                    while len(trail) > mark:
                        placed -= _undo(trail.pop(), sky, free, level, unplaced, banned)
                if k == len(branches):
                    stack.pop()
                    continue
                cp[5] = k + 1
                c = branches[k]
                if c < 0:
                    trail.append(("raise", a, b + 1, sky[a : b + 1].copy(), level[a : b + 1].copy()))
                    sky[a : b + 1] = level[a : b + 1] = raise_to
                    break
                tried = [group[d] for d in branches[:k] if d >= 0]
                if tried:
                    trail.append(("ban", tried, [banned[g] for g in tried]))
                    for g in tried:
                        banned[g] = h
                x, y, top = first[c], last[c] + 1, h + size[c]
                trail.append(("place", c, x, y, sky[x:y].copy(), level[x:y].copy(), size[c]))
                sky[x:y] = top
                free[x:y] -= size[c]
                level[x:y] = np.where(free[x:y] > 0, top, _INF)
                unplaced[c] = False
                offsets[c] = h
                placed += 1
                break
        return np.array(offsets, np.int64)

    def _expand(
        self,
        cap: int,
        rank: Sequence[int],
        level: np.ndarray,
        free: np.ndarray,
        unplaced: list[bool],
        banned: list[int],
    ) -> list:
        """[h, a, b, raise height, branches] for the lowest segment; a branch is a buffer, or -1 to raise."""
        first, last, size, group, twin = self.first, self.last, self.sizes, self.group, self.twin
        a = int(level.argmin())
        h = int(level[a])
        above = level[a:] != h
        k = int(above.argmax())
        b = a + k - 1 if above[k] else self.steps - 1
        left = int(level[a - 1]) if a else _INF
        right = int(level[b + 1]) if b + 1 < self.steps else _INF
        raise_to = min(left, right)
        lo = bisect_left(self.firsts, a)
        fit = [c for c in self.by_first[lo : bisect_right(self.firsts, b, lo)] if unplaced[c] and last[c] <= b]
        can_raise = raise_to < _INF
        if can_raise:
            # Steps no fitting buffer covers stay empty up to raise_to at least.
            reach = a
            for c in fit:
                if first[c] > reach and free[reach : first[c]].max() + raise_to > cap:
                    return [h, a, b, raise_to, []]
                reach = max(reach, last[c] + 1)
            if reach <= b and free[reach : b + 1].max() + raise_to > cap:
                return [h, a, b, raise_to, []]
            # A raise is dominated when some fitting buffer fits under it.
            can_raise = not any(size[c] <= raise_to - h for c in fit) and free[a : b + 1].max() + raise_to <= cap
        cands = [c for c in fit if banned[group[c]] != h and (twin[c] < 0 or not unplaced[twin[c]])]
        # Buffers flush with the segment's left end first (exact fits before them), then by rank.
        cands.sort(key=lambda c: (first[c] != a, last[c] != b, rank[c]))
        return [h, a, b, raise_to, cands + [-1] if can_raise else cands]


def _undo(
    record: tuple, sky: np.ndarray, free: np.ndarray, level: np.ndarray, unplaced: list[bool], banned: list[int]
) -> int:
    """Revert one trail record; returns 1 if it un-placed a buffer."""
    kind = record[0]
    if kind == "ban":
        for g, old in zip(record[1], record[2]):
            banned[g] = old
        return 0
    if kind == "raise":
        _, a, b, old_sky, old_level = record
        sky[a:b] = old_sky
        level[a:b] = old_level
        return 0
    _, c, x, y, old_sky, old_level, s = record
    sky[x:y] = old_sky
    level[x:y] = old_level
    free[x:y] += s
    unplaced[c] = True
    return 1


def improve(
    search: Search, ranks: Sequence[np.ndarray], offsets: np.ndarray, height: int, lower: int, deadline: float
) -> tuple[np.ndarray, int]:
    """Best (offsets, height) found before `deadline`, starting from a known plan.

    Each round tries the lower bound itself, then binary-searches the
    capacity between it and the best height, every capacity with each rank in
    turn; a round's dead-end limit is twice the last one's.  A run that finishes
    without a solution proves its capacity infeasible and raises the bound.
    """
    ranks = [rank.tolist() for rank in ranks]
    limit = _FIRST_FAIL_LIMIT
    while height > lower and time.perf_counter() < deadline:
        low, cap = lower, lower
        while low < height and time.perf_counter() < deadline:
            for rank in ranks:
                found = search.run(cap, rank, limit, deadline)
                if found is not ABORTED:
                    break
            if found is INFEASIBLE:
                lower = low = cap + 1
            elif found is ABORTED:
                low = cap + 1
            else:
                offsets, height = found, int((found + search.size).max())
            cap = low + (height - low) // 2
        limit *= 2
    return offsets, height
