"""Coalescing: buffers that tile a rectangle are planned as one buffer.

Where the load sits at the lower bound (a tiling), a plan without waste must,
at every step boundary, fill exactly the bytes that the buffers ending there
free with the buffers starting there.  A skyline packer placing one buffer at
a time cannot see that far; it wastes bytes as soon as it has stacked, beside
a long buffer, neighbours that belong above it.  Coalescing instead finds
groups of buffers that can stay together, each a rectangle (one lifetime, one
size) with its members at fixed offsets inside, and the packer places the
rectangles.  The rules, the safest first, each tried only when those before
it find nothing:

- clean joins: where a single buffer ends at step c - 1 and a single one of
  the same size starts at c, the two become one buffer with the lifetime of
  both, at one offset;
- joined stacks: buffers sharing a lifetime stack into one whose size is
  their sum, where that sum is the only one of its kind on both sides of a
  boundary (a stack on the other side, or a single buffer, with the same sum)
  and the two are joined;
- joins: as clean joins, where others end or start at c too, but none of the
  same size (a neighbour that is still to be made of several buffers may
  have that size: where many small buffers live, sizes repeat);
- stacks: buffers sharing a lifetime stack alone, small groups first (2,
  then 4, 8, 16, then any): a large group of one lifetime mixes buffers of
  unrelated parts of the tiling more often.

Any packing of the rectangles is a packing of the buffers, since a
rectangle's members lie inside it without overlapping each other; what a rule
can lose is freedom the optimum needed, so `plan` keeps the coalesced plan
only where it is smaller.  Steps are the packer's compressed ones: two steps
with no boundary between them conflict with the same buffers, so joining
across them loses nothing either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Stack sizes tried, smallest first, once the joins find nothing: a large group of one lifetime
# more often mixes buffers from unrelated parts of the tiling (the default on tiled 10k, seeds
# 0-3, with every join alike: 1.0896, 1.0270, 1.0821, 1.0677 of the lower bound, against 1.0948,
# 1.0271, 1.0821, 1.0685 with every group stacked at once).
_STACK_LIMITS = (2, 4, 8, 16, np.iinfo(np.int64).max)


@dataclass
class Coalesced:
    """Rectangles (`size`, `first`, `last`) standing for the buffers; `expand` maps their offsets back."""

    size: np.ndarray
    first: np.ndarray
    last: np.ndarray
    _parent: np.ndarray
    _offset: np.ndarray
    _buffers: int

    def expand(self, offsets: np.ndarray) -> np.ndarray:
        """The buffers' offsets, given one offset per rectangle."""
        top = self._parent < 0
        at = self._offset.copy()
        at[top] = offsets
        # Pointer jumping: each node adds its ancestors' offsets, doubling the reach every round.
        up = self._parent.copy()
        while (climbing := np.flatnonzero(up >= 0)).size:
            above = up[climbing]
            at[climbing] += at[above]
            up[climbing] = up[above]
        return at[: self._buffers]


class _Forest:
    """Nodes are buffers and the rectangles made of them; a rectangle is created after its members."""

    def __init__(self, size: np.ndarray, first: np.ndarray, last: np.ndarray) -> None:
        n = len(size)
        capacity = 2 * n + 1  # every rectangle has at least two members
        self.size, self.first, self.last = (np.zeros(capacity, np.int64) for _ in range(3))
        self.size[:n], self.first[:n], self.last[:n] = size, first, last
        self.parent = np.full(capacity, -1, np.int64)
        self.offset = np.zeros(capacity, np.int64)
        self.count = n

    def tops(self) -> np.ndarray:
        return np.flatnonzero(self.parent[: self.count] < 0)

    def rectangles(self, buffers: int) -> Coalesced:
        """The rectangles as they stand; the first `buffers` nodes are the buffers `expand` places."""
        tops, n = self.tops(), self.count
        return Coalesced(
            self.size[tops], self.first[tops], self.last[tops], self.parent[:n].copy(), self.offset[:n].copy(), buffers
        )

    def make(self, size: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
        ids = np.arange(self.count, self.count + len(size))
        self.size[ids], self.first[ids], self.last[ids] = size, first, last
        self.count += len(size)
        return ids

    def stack(self, nodes: np.ndarray, group: np.ndarray) -> np.ndarray:
        """One rectangle per group (sorted, each of two members or more), its members one on another."""
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        sizes = self.size[nodes]
        totals = np.add.reduceat(sizes, starts)
        ids = self.make(totals, self.first[nodes[starts]], self.last[nodes[starts]])
        below, members = np.cumsum(sizes) - sizes, np.diff(np.r_[starts, len(nodes)])
        self.parent[nodes] = np.repeat(ids, members)
        self.offset[nodes] = below - np.repeat(below[starts], members)
        return ids

    def join(self, nodes: np.ndarray, after: np.ndarray) -> None:
        """Chains of `nodes` where `after[i]` (an index into `nodes`, or -1) follows node i in time, joined."""
        before = np.full(len(nodes), -1, np.int64)
        linked = np.flatnonzero(after >= 0)
        before[after[linked]] = linked
        members = np.flatnonzero((after >= 0) | (before >= 0))
        head, tail = _roots(before, members), _roots(after, members)
        heads = members[head == members]
        ids = self.make(self.size[nodes[heads]], self.first[nodes[heads]], self.last[nodes[tail[np.searchsorted(members, heads)]]])
        chain = np.full(len(nodes), -1, np.int64)
        chain[heads] = ids
        self.parent[nodes[members]] = chain[head]
        self.offset[nodes[members]] = 0


def _roots(link: np.ndarray, members: np.ndarray) -> np.ndarray:
    """For each member, the end of its chain along `link` (-1 ends a chain)."""
    root = np.where(link >= 0, link, np.arange(len(link)))
    while True:
        deeper = root[root]
        if np.array_equal(deeper, root):
            return root[members]
        root = deeper


def _unique_pairs(end: np.ndarray, start: np.ndarray, size: np.ndarray) -> np.ndarray:
    """For each item, the item starting at step `end[i]` with its size, where that (step, size) is the
    only one among the items' ends and the only one among their starts; else -1."""
    n = len(size)
    sizes = np.r_[size, size]
    if (int(max(end.max(), start.max())) + 1) * (int(size.max()) + 1) >= 1 << 61:
        sizes = np.unique(sizes, return_inverse=True)[1]  # dense ranks keep the key below
    # One key per item, (step, size, side): an end sorts before a start of the same (step, size).
    # Only runs of two distinct keys are paired, so how a sort orders equal keys does not matter,
    # and a single int64 key sorts in about a third of a lexsort's time.
    key = (np.r_[end, start] * (int(sizes.max()) + 1) + sizes) * 2 + np.repeat(np.arange(2), n)
    order = _argsort(key)
    key = key[order]
    bounds = np.flatnonzero(np.r_[True, (key[1:] >> 1) != (key[:-1] >> 1), True])
    lone = bounds[:-1][np.diff(bounds) == 2]  # runs of two: one end then one start, or two of a side
    pair = lone[(key[lone] & 1 == 0) & (key[lone + 1] & 1 == 1)]
    after = np.full(n, -1, np.int64)
    after[order[pair]] = order[pair + 1] - n
    return after


def _clean_joins(forest: _Forest) -> bool:
    """Joins at boundaries where one rectangle ends and one of its size starts, and nothing else: the safest."""
    nodes = forest.tops()
    end, start = forest.last[nodes] + 1, forest.first[nodes]
    steps = int(end.max()) + 1
    ending, starting = np.full(steps, -1, np.int64), np.full(steps, -1, np.int64)
    ending[end], starting[start] = np.arange(len(nodes)), np.arange(len(nodes))
    clean = np.flatnonzero((np.bincount(end, minlength=steps) == 1) & (np.bincount(start, minlength=steps) == 1))
    clean = clean[forest.size[nodes[ending[clean]]] == forest.size[nodes[starting[clean]]]]
    if not len(clean):
        return False
    after = np.full(len(nodes), -1, np.int64)
    after[ending[clean]] = starting[clean]
    forest.join(nodes, after)
    return True


def _joins(forest: _Forest) -> bool:
    nodes = forest.tops()
    after = _unique_pairs(forest.last[nodes] + 1, forest.first[nodes], forest.size[nodes])
    if not (after >= 0).any():
        return False
    forest.join(nodes, after)
    return True


def _argsort(key: np.ndarray) -> np.ndarray:
    """A stable argsort of non-negative keys.

    Where the position fits in the key's low bits (compressed steps: below about a million
    buffers), numpy's vectorised sort of the packed keys does it: the rounds of `coalesce`
    sort up to 200k keys each, and at 80k that took 1.1 ms against `argsort`'s 2.9.
    """
    n = len(key)
    shift = max(n - 1, 1).bit_length()
    if not n or int(key.max()) >= 1 << (62 - shift):
        return np.argsort(key, kind="stable")
    return np.sort((key << shift) | np.arange(n)) & ((1 << shift) - 1)


def _lifetimes(forest: _Forest, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`nodes` sorted by lifetime (then id), and each one's group number."""
    life = forest.first[nodes] * (int(forest.last[nodes].max()) + 1) + forest.last[nodes]
    order = _argsort(life)
    nodes, life = nodes[order], life[order]
    return nodes, np.cumsum(np.r_[True, life[1:] != life[:-1]]) - 1


def _joined_stacks(forest: _Forest) -> bool:
    nodes, group = _lifetimes(forest, forest.tops())
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    members = np.diff(np.r_[starts, len(nodes)])
    total = np.add.reduceat(forest.size[nodes], starts)
    first, last = forest.first[nodes[starts]], forest.last[nodes[starts]]
    after = _unique_pairs(last + 1, first, total)
    # A pair of single buffers is a plain join, which has failed: its size is not unique by buffer.
    paired = np.flatnonzero(after >= 0)
    after[paired[(members[paired] == 1) & (members[after[paired]] == 1)]] = -1
    linked = np.flatnonzero(after >= 0)
    if not len(linked):
        return False
    used = np.zeros(len(starts), bool)
    used[linked] = used[after[linked]] = True
    # Stack the groups with several members, then join the chains of groups.
    stacked = used & (members > 1)
    rectangle = nodes[starts].copy()
    take = np.repeat(stacked, members)
    rectangle[stacked] = forest.stack(nodes[take], group[take])
    forest.join(rectangle, after)
    return True


def _stacks(forest: _Forest, limit: int) -> bool:
    nodes, group = _lifetimes(forest, forest.tops())
    members = np.bincount(group)[group]
    take = (members > 1) & (members <= limit)
    if not take.any():
        return False
    forest.stack(nodes[take], group[take])
    return True


def coalesce(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> tuple[Coalesced, Coalesced]:
    """Rectangles standing for the buffers (sizes and compressed first/last steps), the rules above to
    a fixed point: before stacks of any size, and at the end.

    Both are candidates: stacking every group of one lifetime merges the most buffers, and more
    often joins unrelated parts of the tiling (see `plan`).
    """
    forest = _Forest(size, first, last)
    limits = iter(_STACK_LIMITS)
    limit = next(limits)
    while True:
        # Chains of joins are maximal, so joins right after joins find nothing new: only new stacks
        # give them more to do.  Clean joins first: tiled 10k seeds 0-3 end at 1.0821, 1.0085,
        # 1.0613, 1.0456 of the bound, against 1.0896, 1.0270, 1.0821, 1.0677 with every join alike.
        _clean_joins(forest)
        while _joined_stacks(forest) or _joins(forest):
            _clean_joins(forest)
        while not _stacks(forest, limit):
            if limit == _STACK_LIMITS[-1]:
                return early, forest.rectangles(len(size))
            limit = next(limits)
            if limit == _STACK_LIMITS[-1]:
                early = forest.rectangles(len(size))
