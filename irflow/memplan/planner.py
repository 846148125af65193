"""`plan`: offsets for buffers with known lifetimes in one arena.

The default runs these steps, each keeping the plan only if strictly smaller
(docs/memplan.md, "Design", says why each is there):

1. Tight instances (the load at the lower bound almost everywhere) first pack
   the rectangles `coalesce` finds, with the default's work (without the exact
   search above 2,000 buffers), then once more: up to 10,000 buffers block by
   block of `split`, above that by a second chain order; and the earlier
   rectangles (before stacks of any size) once more in time mirrored.
2. The skyline packer runs under a few priority orders (`orderings.py`), the
   chain orders first on tight instances.  How many scales down with the
   number of buffers (about 20,000 placements in all, one order at least):
   on a 2-core Zen 3 VM, best of 3 CPU s, 10k buffers plan in 0.07-0.24 s
   (mixed lifetimes: 0.19-0.46, two packs and step 3) and 100k in 1.0-2.0 s,
   the spread that machine's from one run to the next (its quiet spells the
   low ends: mixed 10k 0.193-0.211, mixed 100k 1.37).  Above 2,000 buffers no
   further order runs once the plan is within 1/400 of the lower bound.
3. Greedy by size (TFLite's planner) runs up to 2,000 buffers, and up to
   10,000 where the plan is not within 1/400 of the bound, so there the plan
   is never worse than it (in alignment units); it stops as soon as its arena
   reaches the plan's.
4. Above 10,000 buffers, where the plan is not within 1/400 of the bound and
   the instance not tight, the top fifth of its buffers is packed again by
   flush `length` above what the rest leave free; up to 50,000 that top is
   then placed once more by greedy by size, each buffer above the rest; up to
   40,000, where the plan is still 1/100 above the bound, greedy by size of
   the whole runs last.  The repack adds about a sixth to 100k's time.
5. Up to 500 buffers the exact search of `search.py` runs for 1,000 nodes
   (tens of milliseconds), which finds the optimum of small problems.

With `budget_s`, an improvement phase continues from that plan: the exact
search (up to 2,000 buffers), then the orders the default skipped, then greedy
by size where the default did not run it, each only where its estimated time
fits (greedy by size also stops at the deadline, its plan then lost), until
the budget is spent or the plan meets the lower bound.  Every step is
deterministic and only ever replaces the plan with a strictly smaller one: the
same input gives the same plan, and more time never gives a worse one.

Up to 2,000 buffers all of this runs per block of `split`: buffers live over
their whole block go to its bottom, and blocks no buffer joins in time are
planned apart (each with its share of the budget).  Neither loses anything,
and the exact search solves blocks it could not solve as one problem.

Placement works in units of `alignment` times the sizes' gcd: a size is
rounded up for placement only (nothing aligned may start in the padding
anyway); the arena size reported is max(offset + size) in bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from irflow.memplan.coalesce import coalesce
from irflow.memplan.greedy import greedy_by_size
from irflow.memplan.orderings import (
    MIRRORED_ORDER,
    ORDERINGS,
    ORDERS,
    SEARCH_ORDERS,
    SECOND_RECTANGLES_ORDER,
    TIGHT_ORDERS,
    Order,
)
from irflow.memplan.problem import Buffer, Plan, as_arrays, check_alignment, load_profile
from irflow.memplan.search import Search, improve
from irflow.memplan.skyline import compress, skyline, skyline_pack, span_max, step_load

# The default places about this many buffers in all (orders x buffers), with one order at least.
_DEFAULT_WORK = 20_000
# The exact search pays numpy and Python costs per node; beyond this size it rarely finishes a run.
_SEARCH_MAX = 2_000
# Without a budget, instances up to this size still get the exact search, for this many nodes
# in all (tens of milliseconds): a node count, not a time, keeps the default deterministic.
_DEFAULT_SEARCH_MAX = 500
_DEFAULT_SEARCH_NODES = 1_000
_INF = 1 << 62
# Greedy by size (TFLite's planner) is a candidate by default up to _GREEDY_MAX buffers (0.015-0.026
# CPU s at 2k buffers on a Zen 3 at 2.45 GHz, growing as n^2), and up to _GREEDY_DEFAULT_MAX where the
# plan is not within 1/_NEAR of the bound (training 10k's are, and would pay up to 0.15 s on its
# 0.11-0.18; mixed 10k pays 0.07-0.13 s); with a budget, beyond it too where its estimated time fits.
_GREEDY_MAX = 2_000
_GREEDY_DEFAULT_MAX = 10_000
# Tight: the load is at least this fraction of the lower bound at this fraction of the steps.
_TIGHT, _TIGHT_STEPS = 0.99, 0.9
# Without a budget, above _GREEDY_MAX buffers the default packs no further order once its plan is
# within 1/_NEAR of the lower bound: no order can save more than that gap, and each costs a pack.
_NEAR = 400
# Above _GREEDY_DEFAULT_MAX buffers, where greedy by size no longer runs by default, a plan not within
# 1/_NEAR of the bound (and not tight) has its top 1/_REPACK_SHARE of buffers (the highest offsets: the
# packer's last placements) packed again above the rest by _REPACK_ORDER, kept if smaller (docs/memplan.md,
# "Repacking the top"): mixed 100k seeds 0 and 2 go from 1.0285 and 1.0386 of the bound to 1.0155 and
# 1.0218, below greedy by size's 1.0265 and 1.0276.
_REPACK_SHARE = 5
_REPACK_ORDER = ("length", True)  # (ordering, flush)
# Up to this size that repack's result has its top placed again by greedy by size (each buffer above
# the others' skyline), kept if smaller: 0.05-0.4 CPU s at 20k-50k, where greedy by size of the whole
# costs 0.5-3.3 s (docs/memplan.md, "Repacking the top").
_GREEDY_TOP_MAX = 50_000
# Up to this size greedy by size of the whole runs last, after those repacks, where the plan is still at
# least 1/_GREEDY_WHOLE_GAP above the bound, and is kept if smaller. It stops once its arena reaches the
# plan's, early where it loses by much, and where it wins it runs to the end (mixed 20k: 0.4-0.6 CPU s,
# 40k: 1.3-1.9 s on a Zen 3 at 2.45 GHz). Without it, 8 of mixed 25k-50k seeds 0-7 end above greedy by
# size's arena, by 0.03-0.85%; with it, none up to 40k. 50k seed 5's 0.06% stays: there greedy by size
# costs 2.1-3.0 s, above what 100k takes in all. Closer to the bound it could save less than that 1/100,
# and can cost a whole run: pangu's plan (1.0076 of the bound) is greedy by size's too, which reaches it
# only at its 18,686th buffer of 18,692 (0.7 CPU s).
_GREEDY_WHOLE_MAX, _GREEDY_WHOLE_GAP = 40_000, 100
# Up to this size a tiling's rectangles are also planned per block of `split` (`_blockwise`); on tiled
# 100k (seeds 0-15) that changed no plan and cost up to 0.4 CPU s.  Above it they are packed once
# more by SECOND_RECTANGLES_ORDER instead: tiled 100k seeds 0-31 go from 9 to 7 above 1.20 of the
# bound, for 0.06-0.21 CPU s (docs/memplan.md, "Blocks of rectangles").
_BLOCKWISE_MAX = 10_000
# ... and only where no block holds more than this share of the rectangles (`_blocks`).
_BLOCK_SHARE = 0.9


def plan(
    buffers: Sequence[Buffer],
    alignment: int = 64,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Plan:
    """Place every buffer at an offset that is a multiple of `alignment`.

    Buffers whose inclusive lifetimes overlap never share a byte.  `budget_s`
    (seconds of `clock`: wall time by default, `time.process_time` for CPU
    time on a shared machine) enables the improvement phase; it stops early
    when the plan reaches the lower bound, and a step starts only if it
    should end in time.
    """
    check_alignment(alignment)
    if budget_s is not None and budget_s < 0:
        raise ValueError(f"budget_s must be non-negative, got {budget_s}")
    deadline = clock() + (budget_s or 0.0)
    size, first, last = as_arrays(buffers)
    offsets = np.zeros(len(size), np.int64)
    units = -(-size // alignment)
    used = np.flatnonzero(units > 0)  # zero-byte buffers stay at offset 0
    if len(used):
        # Offsets that are sums of sizes stay multiples of their gcd: the search then
        # never tries a capacity between two of them.
        g = int(np.gcd.reduce(units[used]))
        placed = _place_blocks(units[used] // g, first[used], last[used], deadline, budget_s is not None, clock)
        offsets[used] = alignment * g * placed
    return Plan(tuple(offsets.tolist()), int((offsets + size).max(initial=0)))


def _pack_costs(orders: list[Order], n: int) -> np.ndarray:
    """Placements spent on `n` buffers by packing `orders[:k + 1]`, for each k: a chain pack costs up to
    twice a plain one (its tiling searches), so it counts twice."""
    return np.cumsum([2 if chain else 1 for _, _, chain in orders]) * n


def _orders_within(orders: list[Order], n: int, work: int) -> int:
    """How many of `orders` the default packs with `work` placements."""
    return int(np.searchsorted(_pack_costs(orders, n), work, side="right"))


def _packed_work(orders: list[Order], n: int, work: int) -> int:
    """The placements the default spends on `n` buffers: its orders within `work`, one at least."""
    return int(_pack_costs(orders, n)[max(1, _orders_within(orders, n, work)) - 1])


def _pack_once(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, order: Order, mirrored: bool = False
) -> np.ndarray:
    """Offsets from one skyline pack by `order`.  `mirrored` packs the time-mirrored instance: the
    same conflicts, so a plan of this one, but the packer fills from the other end of time and meets
    other choices first."""
    name, flush, chain = order
    if mirrored:
        first, last = -last, -first
    cfirst, clast, steps = compress(first, last)
    offsets = skyline_pack(cfirst, clast, size, ORDERINGS[name](size, first, last), steps, flush, chain)
    return np.array(offsets, np.int64)


def _top_and_floor(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, steps: int, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The top 1/_REPACK_SHARE of the buffers (the highest offsets: the packer's last placements),
    and the others' skyline: per step, where what they leave free begins."""
    n = len(size)
    top = np.argsort(offsets, kind="stable")[n - n // _REPACK_SHARE :]
    kept = np.ones(n, bool)
    kept[top] = False
    return top, skyline(first[kept], last[kept], (offsets + size)[kept], steps)


def _repacked_top(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, steps: int, offsets: np.ndarray, rank: np.ndarray,
    flush: bool,
) -> np.ndarray:
    """`offsets` with the top buffers packed again in `rank`'s order above the others' skyline."""
    top, floor = _top_and_floor(size, first, last, steps, offsets)
    ranked = np.empty(len(top), np.int64)
    ranked[np.argsort(rank[top])] = np.arange(len(top))  # the same order among them, as a permutation
    repacked = offsets.copy()
    repacked[top] = skyline_pack(first[top], last[top], size[top], ranked, steps, flush, False, floor)
    return repacked


def _greedy_top(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, steps: int, offsets: np.ndarray, beat: int
) -> np.ndarray | None:
    """`offsets` with the top buffers placed again by greedy by size above the others' skyline
    (each at the highest floor over its lifetime or above), or None once their arena reaches `beat`."""
    top, floor = _top_and_floor(size, first, last, steps, offsets)
    lowest = span_max(floor, first[top], last[top])
    placed = greedy_by_size(size[top], first[top], last[top], beat, lowest=lowest)
    if placed is None:
        return None
    repacked = offsets.copy()
    repacked[top] = placed
    return repacked


# `split`'s result: the offsets of the buffers at their blocks' bottoms, and each block with its base.
Blocks = tuple[np.ndarray, list[tuple[np.ndarray, int]]]


def split(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> Blocks:
    """Offsets of the buffers that go at the bottom of their block, and the blocks left to plan.

    A block is a set of buffers with its base offset.  Where no buffer of a block lives
    across a step boundary, the two sides share no step and are planned apart; a buffer
    live over the whole span of its block conflicts with all of it, so putting it at the
    bottom (what was under it moving up by its size) keeps any plan's arena.  Neither
    step loses anything, and each can reveal the other: the blocks left are smaller
    problems with the same optimum, which the exact search solves where it could not
    solve the whole (MiniMalloc's E).
    """
    offsets = np.zeros(len(size), np.int64)
    blocks: list[tuple[np.ndarray, int]] = []
    todo = [(np.arange(len(size)), 0)]
    while todo:
        idx, base = todo.pop()
        f, l = first[idx], last[idx]
        full = (f == f.min()) & (l == l.max())
        if full.any():
            bottom = idx[full]
            offsets[bottom] = base + np.cumsum(size[bottom]) - size[bottom]
            if not full.all():
                todo.append((idx[~full], base + int(size[bottom].sum())))
            continue
        # A boundary after step t (the last step of some buffer) is crossed by the buffers with
        # first <= t < last: the number starting by t less the number ending by t.
        ends = np.unique(l)[:-1]
        crossed = np.searchsorted(np.sort(f), ends, side="right") - np.searchsorted(np.sort(l), ends, side="right")
        cuts = ends[crossed == 0]
        if not len(cuts):
            blocks.append((idx, base))
            continue
        side = np.searchsorted(cuts, f)  # which piece: the number of cuts before the buffer
        by_side = np.argsort(side, kind="stable")
        bounds = np.searchsorted(side[by_side], np.arange(len(cuts) + 2))
        todo.extend((idx[by_side[a:b]], base) for a, b in zip(bounds[:-1], bounds[1:]))
    return offsets, blocks


def _blocks(size: np.ndarray, first: np.ndarray, last: np.ndarray) -> Blocks | None:
    """`split` of a tiling's rectangles where planning them block by block may pay, else None.

    Coalescing a tiling rebuilds its guillotine cuts: a cut across time becomes a boundary no
    rectangle crosses, one across bytes a rectangle spanning its block.  Packed whole, one order
    serves every block and raises merge segments across their boundaries; apart, each block gets
    its best order (tiled 10k seeds 0-47: 9 plans smaller, seed 12's 1.1557 -> 1.0668 of the bound;
    docs/memplan.md, "Blocks of rectangles").  That needs two blocks at least, and none holding
    nearly every rectangle, which is nearly the whole problem again: every plan this improved on
    those seeds had its largest block at 88% of the rectangles or less, and seed 2's 778 of 802
    cost 0.05 CPU s for nothing.
    """
    offsets, blocks = split(size, first, last)
    if max((len(idx) for idx, _ in blocks), default=0) > _BLOCK_SHARE * len(size):
        return None
    return offsets, blocks


def _blockwise(
    size: np.ndarray, first: np.ndarray, last: np.ndarray, parts: Blocks, work: int, clock: Callable[[], float]
) -> np.ndarray:
    """Offsets of rectangles from `_blocks`' blocks, each planned by default without the exact search."""
    offsets, blocks = parts
    for idx, base in blocks:
        block = (size[idx], first[idx], last[idx])
        offsets[idx] = base + _place(*block, float("inf"), False, clock, work, coalesced=True, search_small=False)
    return offsets


def _place_blocks(
    size: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    deadline: float,
    improve_plan: bool,
    clock: Callable[[], float],
) -> np.ndarray:
    """Offsets in units for positive unit sizes: `split`'s blocks placed one by one.

    Only up to the exact search's size: above it a block gets nothing the whole would not
    (the same skyline orders), and the split's repeated passes would only cost time.

    With a budget, each block may run until its share of the budget by buffers is spent
    (counted from the start, so time a block leaves unused goes to the next), so every block
    gets at least its share and more time gives no block a worse plan.  Greedy by
    size of the whole stays a candidate, so the plan is never worse than it.
    """
    n = len(size)
    if n > _SEARCH_MAX:
        return _place(size, first, last, deadline, improve_plan, clock)
    offsets, blocks = split(size, first, last)
    if len(blocks) == 1 and len(blocks[0][0]) == n:
        return _place(size, first, last, deadline, improve_plan, clock)
    began, done, total = clock(), 0, sum(len(idx) for idx, _ in blocks)
    # Smallest first: what a block that meets its bound early leaves goes on to the larger ones.
    for idx, base in sorted(blocks, key=lambda block: len(block[0])):
        done += len(idx)
        until = began + (deadline - began) * done / total
        offsets[idx] = base + _place(size[idx], first[idx], last[idx], until, improve_plan, clock)
    height = int((offsets + size).max())
    if n <= _GREEDY_MAX and height > load_profile(size, first, last)[1].max():
        whole = greedy_by_size(size, first, last, height)
        if whole is not None:
            offsets = whole
    return offsets


def _place(
    size: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    deadline: float,
    improve_plan: bool,
    clock: Callable[[], float],
    work: int = _DEFAULT_WORK,
    coalesced: bool = False,
    search_small: bool = True,
) -> np.ndarray:
    """Offsets in units for positive unit sizes.

    With a budget, the improvement phase continues the default's steps, so more time never
    gives a worse plan.  `work` is the default's number of placements (orders x buffers);
    `coalesced` marks an instance of rectangles already at coalescing's fixed point;
    `search_small` False skips the default's exact search of small instances (see `_blockwise`).
    """
    cfirst, clast, steps = compress(first, last)
    load = step_load(cfirst, clast, size, steps)
    lower = int(load.max())
    # Where the load is at the bound almost everywhere, a perfect packing may exist: chain first.
    tight = np.mean(load >= _TIGHT * lower) >= _TIGHT_STEPS
    orders = TIGHT_ORDERS if tight else ORDERS
    ranks: dict[str, np.ndarray] = {}  # computed when first needed: 20 ms each at 100k buffers
    best, height, took = np.zeros(0, np.int64), _INF, 0.0
    if tight and not coalesced:
        # The rectangles come first, with the default's work: what they leave goes to the buffers.
        began = clock()
        early, coarse = coalesce(size, cfirst, clast)
        if len(coarse.size) < len(size):
            until = deadline if not improve_plan else began + (deadline - began) / 2
            # Above _GREEDY_MAX buffers the default skips the exact search of the rectangles: on tiled 10k
            # (seeds 0-23) it never beat the packs there, and cost up to 0.15 s.
            small = improve_plan or len(size) <= _GREEDY_MAX
            rectangles = (coarse.size, coarse.first, coarse.last)
            parts = _blocks(*rectangles) if len(size) <= _BLOCKWISE_MAX else None
            # Where the blocks are planned apart, the whole gets the chain orders alone (they come first):
            # on tiled 10k seeds 0-47 its other orders never beat the blocks' plan there.
            chains = sum(chain for _, _, chain in orders)
            given = work if parts is None else int(_pack_costs(orders, len(coarse.size))[chains - 1])
            placed = _place(*rectangles, until, improve_plan, clock, given, coalesced=True, search_small=small)
            best = coarse.expand(placed)
            height = int((best + size).max())
            second = None
            if parts is not None:
                second = coarse.expand(_blockwise(*rectangles, parts, work, clock))
            elif len(size) > _BLOCKWISE_MAX:  # the work above held a single pack of them: one more
                second = coarse.expand(_pack_once(*rectangles, SECOND_RECTANGLES_ORDER))
            if second is not None and (top := int((second + size).max())) < height:
                best, height = second, top
            work -= _packed_work(orders, len(coarse.size), work)
            # Another candidate: the rectangles before stacks of any size, packed once in time mirrored
            # (tiled 100k seeds 2 and 3: 1.1838 and 1.1882 of the bound, the final ones 1.2866, 1.2592).
            placed = early.expand(_pack_once(early.size, early.first, early.last, MIRRORED_ORDER, mirrored=True))
            if (top := int((placed + size).max())) < height:
                best, height = placed, top
            work -= _packed_work([MIRRORED_ORDER], len(early.size), work)
            # Until a pack of the buffers has run, the rectangles' time stands for its cost (a chain
            # pack of tiled 100k takes 1.2-1.5 s, coalescing and the rectangles' packs about as long).
            took = clock() - began
    # A budget decides for itself how far to go: it packs every order the default would.
    near = lower + lower // _NEAR
    enough = lower if improve_plan or len(size) <= _GREEDY_MAX else near

    def rank(name: str) -> np.ndarray:
        if name not in ranks:
            ranks[name] = ORDERINGS[name](size, first, last)
        return ranks[name]

    def pack(orders: list[Order], until: float) -> None:
        """Keep the best skyline plan over `orders`; stop once close enough, or when the next would end late."""
        nonlocal best, height, took
        for name, flush, chain in orders:
            began = clock()
            if height <= enough or began + took > until:
                return
            offsets = np.array(skyline_pack(cfirst, clast, size, rank(name), steps, flush, chain), np.int64)
            took = clock() - began
            if (top := int((offsets + size).max())) < height:
                best, height = offsets, top

    def greedy(until: float) -> None:
        """Keep greedy by size's plan if smaller: so the plan is never worse than TFLite's."""
        nonlocal best, height
        n = len(size)
        # It starts where the last pack's time x (1 + n / 4,000) fits, near its measured worst case
        # (a pack's 1.1-1.7x at 2k buffers, 1.2-3.4x at 10k, 2.4-7.9x at 30k, the training family
        # dearest), and stops at `until` wherever it runs longer: its plan counts only if it finishes.
        if height == lower or (n > _GREEDY_MAX and clock() + took * (1 + n / 4_000) > until):
            return
        offsets = greedy_by_size(size, cfirst, clast, height, until, clock)
        if offsets is not None:  # smaller, else it stopped once it reached the plan's height, or late
            best, height = offsets, int((offsets + size).max())

    def search(until: float, nodes: int | None, floor: int) -> None:
        nonlocal best, height
        ranked = [rank(name) for name in SEARCH_ORDERS]
        mirrored = [ORDERINGS[name](size, -last, -first) for name in SEARCH_ORDERS]
        best, height = improve(exact, ranked, best, height, lower, until, nodes, floor, mirrored)

    default = _orders_within(orders, len(size), work)
    if not len(best):
        default = max(1, default)
    pack(orders[:default], float("inf"))
    # Above _GREEDY_MAX, by default only where the plan is not already within 1/_NEAR of the bound.
    greedy_ran = len(size) <= _GREEDY_MAX or (len(size) <= _GREEDY_DEFAULT_MAX and height > near)
    if greedy_ran:
        greedy(float("inf"))
    # Where greedy by size stops running by default, the top of a plan not near the bound is packed again.
    if len(size) > _GREEDY_DEFAULT_MAX and height > near and not tight:
        name, flush = _REPACK_ORDER
        offsets = _repacked_top(size, cfirst, clast, steps, best, rank(name), flush)
        if (top := int((offsets + size).max())) < height:
            best, height = offsets, top
        if len(size) <= _GREEDY_TOP_MAX and height > near:
            offsets = _greedy_top(size, cfirst, clast, steps, best, height)
            if offsets is not None and (top := int((offsets + size).max())) < height:
                best, height = offsets, top
        if len(size) <= _GREEDY_WHOLE_MAX and height >= lower + lower // _GREEDY_WHOLE_GAP:
            greedy(float("inf"))
            greedy_ran = True
    searched = _SEARCH_MAX if improve_plan else _DEFAULT_SEARCH_MAX if search_small else 0
    exact = Search(cfirst, clast, size, steps, clock) if len(size) <= searched and height > lower else None
    # A budgeted search runs the default's search first, whatever the clock says, and goes on
    # from there: the same steps, so never a worse plan.
    floor = _DEFAULT_SEARCH_NODES if len(size) <= _DEFAULT_SEARCH_MAX else 0
    if exact is not None and improve_plan:
        search(deadline, None, floor)
    elif exact is not None:
        search(float("inf"), _DEFAULT_SEARCH_NODES, 0)
    if improve_plan:
        pack(orders[default:], deadline)
        if not greedy_ran:
            greedy(deadline)
    return best
