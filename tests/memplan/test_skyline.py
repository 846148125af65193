"""The skyline packer (irflow/memplan/skyline.py): canonical, valid plans."""

import numpy as np
import pytest

from irflow.memplan import Plan, validate
from irflow.memplan.instances import mixed, tiled, training
from irflow.memplan.orderings import ORDERINGS
from irflow.memplan.problem import as_arrays
from irflow.memplan import skyline as skyline_module
from irflow.memplan.skyline import compress, skyline, skyline_pack, span_max, step_load


@pytest.mark.parametrize("make", [tiled, training, mixed])
@pytest.mark.parametrize("order", list(ORDERINGS))
@pytest.mark.parametrize("flush, chain", [(False, False), (True, False), (False, True)])
def test_plans_are_valid_and_canonical(make, order, flush, chain):
    buffers = [b for b in make(400, seed=11) if b.size]
    size, first, last = as_arrays(buffers)
    cfirst, clast, steps = compress(first, last)
    rank = ORDERINGS[order](size, first, last)
    offsets = np.array(skyline_pack(cfirst, clast, size, rank, steps, flush, chain))
    validate(buffers, Plan(tuple(offsets.tolist()), int((offsets + size).max())), 1)
    # Canonical: every buffer rests on the floor or on a buffer live with it.
    tops = offsets + size
    for i in range(len(buffers)):
        live = (first <= last[i]) & (last >= first[i])
        assert offsets[i] == 0 or offsets[i] in tops[live]


def test_compress_keeps_overlaps():
    first, last = np.array([5, 100, 7, -3]), np.array([7, 200, 99, 5])
    cfirst, clast, steps = compress(first, last)
    assert steps == 6
    overlap = (first[:, None] <= last[None, :]) & (first[None, :] <= last[:, None])
    assert ((cfirst[:, None] <= clast[None, :]) & (cfirst[None, :] <= clast[:, None]) == overlap).all()
    assert step_load(cfirst, clast, np.array([1, 2, 4, 8]), steps).tolist() == [8, 9, 5, 4, 2, 2]


@pytest.mark.parametrize("spread", [1, 3, 1000])
def test_compress_numbers_steps_in_order(spread):
    """Dense steps (numbered by marks) and sparse ones (by a sort) get the same numbers."""
    rng = np.random.default_rng(spread)
    first = rng.integers(-50, 50, 40) * spread
    last = first + rng.integers(0, 5, 40) * spread
    steps = np.unique(np.concatenate([first, last]))
    cfirst, clast, count = compress(first, last)
    assert count == len(steps)
    assert (steps[cfirst] == first).all() and (steps[clast] == last).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_chain_packs_tilings_tighter(seed):
    # A tiling's optimum is its lower bound; preferring left-flush buffers whose remainder can
    # still be tiled must leave less waste than the same order without that preference.
    buffers = tiled(3000, seed=seed)
    size, first, last = as_arrays(buffers)
    cfirst, clast, steps = compress(first, last)
    rank = ORDERINGS["size"](size, first, last)
    tops = [max(np.array(skyline_pack(cfirst, clast, size, rank, steps, chain=c)) + size) for c in (False, True)]
    assert tops[1] < tops[0]
    assert tops[1] <= 1.13 * (1 << 20)


def lifetimes(seed):
    """100 random sets of up to 29 lifetimes over 1 to 79 steps (some sets empty): (steps, first, last, rng)."""
    rng = np.random.default_rng(seed)
    for _ in range(100):
        steps, n = int(rng.integers(1, 80)), int(rng.integers(0, 30))
        first = rng.integers(0, steps, n)
        yield steps, first, np.minimum(first + rng.integers(0, steps, n), steps - 1), rng


def test_skyline_is_the_highest_top_at_each_step():
    for steps, first, last, rng in lifetimes(5):
        top = rng.integers(1, 1000, len(first))
        expected = np.zeros(steps, np.int64)
        for f, l, t in zip(first, last, top):
            expected[f : l + 1] = np.maximum(expected[f : l + 1], t)
        assert skyline(first, last, top, steps).tolist() == expected.tolist()


def test_span_max_is_the_highest_step_of_each_lifetime():
    for steps, first, last, rng in lifetimes(6):
        heights = rng.integers(0, 1000, steps)
        expected = [int(heights[f : l + 1].max()) for f, l in zip(first, last)]
        assert span_max(heights, first, last).tolist() == expected


@pytest.mark.parametrize("flush, chain", [(False, False), (True, False), (False, True)])
def test_packs_above_a_floor(flush, chain):
    buffers = [b for b in mixed(300, seed=4) if b.size]
    size, first, last = as_arrays(buffers)
    cfirst, clast, steps = compress(first, last)
    rank = ORDERINGS["length"](size, first, last)
    assert skyline_pack(cfirst, clast, size, rank, steps, flush, chain, np.zeros(steps, np.int64)) == skyline_pack(
        cfirst, clast, size, rank, steps, flush, chain
    )
    floor = np.random.default_rng(2).integers(0, 1 << 20, steps)
    floor[10:40] = 7  # a flat run, a segment of its own
    offsets = np.array(skyline_pack(cfirst, clast, size, rank, steps, flush, chain, floor))
    validate(buffers, Plan(tuple(offsets.tolist()), int((offsets + size).max())), 1)
    for i in range(len(buffers)):
        assert offsets[i] >= floor[cfirst[i] : clast[i] + 1].max()


def reference_pack(first, last, size, rank, steps, flush, floor):
    """The packer's rule, one step at a time over a height per step: the lowest segment (the leftmost
    of the lowest), the best-ranked unplaced buffer inside it (with `flush`, exact fits, then those
    flush with one end, then the rest), else the segment raised to its lower neighbour."""
    height = list(floor)
    unplaced = set(range(len(size)))
    offsets = [0] * len(size)
    while unplaced:
        h = min(height)
        a = b = height.index(h)
        while b + 1 < steps and height[b + 1] == h:
            b += 1
        inside = [i for i in unplaced if a <= first[i] and last[i] <= b]
        if inside:
            i = min(inside, key=lambda i: (flush * ((first[i] != a) + (last[i] != b)), rank[i]))
            offsets[i] = h
            height[first[i] : last[i] + 1] = [h + size[i]] * (last[i] + 1 - first[i])
            unplaced.remove(i)
        else:
            neighbours = [height[a - 1]] if a else []
            neighbours += [height[b + 1]] if b + 1 < steps else []
            height[a : b + 1] = [min(neighbours)] * (b + 1 - a)
    return offsets


@pytest.mark.parametrize("make", [tiled, training, mixed])
@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("floored", [False, True])
@pytest.mark.parametrize("scan", [None, 1])
def test_packs_by_the_skyline_rule(make, flush, floored, scan, monkeypatch):
    # Every placement the packer skips work for (queries its index says find nothing, slices cut
    # where nothing can fit, compacted entries, segments kept off the heap) must still follow the
    # rule itself.  With `scan` 1, almost every query takes the numpy paths meant for long slices.
    if scan is not None:
        monkeypatch.setattr(skyline_module, "_SCAN", scan)
    buffers = [b for b in make(400, seed=7) if b.size]
    size, first, last = as_arrays(buffers)
    cfirst, clast, steps = compress(first, last)
    rank = ORDERINGS["area"](size, first, last)
    floor = np.random.default_rng(3).integers(0, 4, steps) * int(size.max()) if floored else np.zeros(steps, np.int64)
    expected = reference_pack(cfirst.tolist(), clast.tolist(), size.tolist(), rank.tolist(), steps, flush, floor.tolist())
    assert skyline_pack(cfirst, clast, size, rank, steps, flush, False, floor if floored else None) == expected
