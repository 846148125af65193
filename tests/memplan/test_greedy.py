"""`fit_in_order`: the offsets of first fit and best fit, against a plain-Python oracle sharing no code."""

import numpy as np
import pytest

from irflow.memplan.greedy import fit_in_order, greedy_by_size
from irflow.memplan.instances import mixed, training
from irflow.memplan.problem import as_arrays


def fit_by_scanning(size, first, last, order, best_fit):
    """Each buffer in `order` tried at 0 and at every top of a placed buffer it meets in time."""
    offsets: dict[int, int] = {}
    for i in order:
        meets = [j for j in offsets if first[j] <= last[i] and first[i] <= last[j]]
        free = [
            at
            for at in sorted({0} | {offsets[j] + size[j] for j in meets})
            if all(at + size[i] <= offsets[j] or offsets[j] + size[j] <= at for j in meets)
        ]
        if best_fit:
            # The gap a candidate opens ends at the lowest placed buffer above it.
            def room(at):
                return min((offsets[j] - at for j in meets if offsets[j] >= at + size[i]), default=1 << 62)

            offsets[i] = min(free, key=lambda at: (room(at), at))
        else:
            offsets[i] = free[0]
    return np.array([offsets[i] for i in range(len(size))])


@pytest.mark.parametrize("best_fit", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_fit_in_order_matches_the_scanning_oracle(seed, best_fit):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    size = rng.integers(1, 40, n)
    first = rng.integers(0, 30, n)
    last = first + rng.integers(0, 12, n)
    order = rng.permutation(n)
    expected = fit_by_scanning(size.tolist(), first.tolist(), last.tolist(), order.tolist(), best_fit)
    assert np.array_equal(fit_in_order(size, first, last, order, best_fit), expected)


@pytest.mark.parametrize("make", [mixed, training])
def test_greedy_by_size_places_largest_first_at_the_lowest_fit(make):
    size, first, last = as_arrays(make(300, seed=1))
    order = np.argsort(-size, kind="stable")
    expected = fit_by_scanning(size.tolist(), first.tolist(), last.tolist(), order.tolist(), False)
    assert np.array_equal(greedy_by_size(size, first, last), expected)


def first_fit_by_sweep(size, first, last, order, lowest=None):
    """Each buffer in `order` at its lowest offset (0 by default), moved above every placed buffer (by
    offset) it meets in time and bytes."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets = [0] * len(size)
    for i in order:
        at = lowest[i] if lowest else 0
        for lo, hi in sorted((lo, hi) for lo, hi, f, l in placed if f <= last[i] and first[i] <= l):
            if lo >= at + size[i]:
                break
            at = max(at, hi)
        placed.append((at, at + size[i], first[i], last[i]))
        offsets[i] = at
    return np.array(offsets)


@pytest.mark.parametrize("seed", range(30))
def test_first_fit_in_batches_matches_the_sweep(seed, calls):
    # Hundreds of buffers: many batches, whose members meet earlier ones of their batch in time and
    # bytes (long lifetimes, few sizes), equal sizes, zero-byte buffers, lifetimes that only touch.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(100, 400))
    size = rng.choice(np.append(rng.integers(1, 60, 5), 0), n)
    first = rng.integers(0, 80, n)
    last = first + rng.integers(0, [1, 8, 80][seed % 3], n)
    order = np.argsort(-size, kind="stable") if seed % 2 else rng.permutation(n)
    import irflow.memplan.greedy as greedy

    repaired = calls(greedy, "_repair")  # batches whose first fits had to be repaired
    expected = first_fit_by_sweep(size.tolist(), first.tolist(), last.tolist(), order.tolist())
    assert np.array_equal(fit_in_order(size, first, last, order), expected)
    assert repaired


@pytest.mark.parametrize("seed", range(20))
def test_greedy_by_size_above_lowest_offsets_matches_the_sweep(seed):
    # Lowest offsets from 0 to above everything the buffers would fill, with equal and zero sizes.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 300))
    size = rng.choice(np.append(rng.integers(1, 60, 5), 0), n)
    first = rng.integers(0, 60, n)
    last = first + rng.integers(0, [1, 8, 60][seed % 3], n)
    lowest = rng.integers(0, [1, 40, 400][seed % 3 - 1], n) * (rng.random(n) < 0.7)
    order = np.argsort(-size, kind="stable")
    expected = first_fit_by_sweep(size.tolist(), first.tolist(), last.tolist(), order.tolist(), lowest.tolist())
    offsets = greedy_by_size(size, first, last, lowest=lowest)
    assert np.array_equal(offsets, expected)
    assert (offsets >= lowest).all()


def test_first_fit_with_arenas_near_the_int64_limit():
    # Batches shrink as the arena grows, so that rows lifted by the arena's top stay within int64.
    rng = np.random.default_rng(0)
    size = rng.integers(1 << 54, 1 << 56, 60)
    first = rng.integers(0, 20, 60)
    last = first + rng.integers(0, 10, 60)
    order = np.argsort(-size, kind="stable")
    expected = first_fit_by_sweep(size.tolist(), first.tolist(), last.tolist(), order.tolist())
    assert np.array_equal(greedy_by_size(size, first, last), expected)


def test_no_buffers():
    empty = np.zeros(0, np.int64)
    for best_fit in (False, True):
        assert len(fit_in_order(empty, empty, empty, empty, best_fit)) == 0


def test_greedy_by_size_stops_once_its_arena_reaches_the_plan_to_beat():
    size, first, last = as_arrays(mixed(500, seed=3))
    offsets = greedy_by_size(size, first, last)
    arena = int((offsets + size).max())
    assert greedy_by_size(size, first, last, arena) is None
    assert np.array_equal(greedy_by_size(size, first, last, arena + 1), offsets)


def test_greedy_by_size_gives_up_at_its_deadline():
    size, first, last = as_arrays(mixed(500, seed=3))  # 8 batches of 64, a clock read before each
    offsets = greedy_by_size(size, first, last)

    def ticking():
        """A clock at 0 whose every read is a second later."""
        reads = iter(range(10**6))
        return lambda: float(next(reads))

    assert greedy_by_size(size, first, last, deadline=6.0, clock=ticking()) is None
    assert np.array_equal(greedy_by_size(size, first, last, deadline=7.0, clock=ticking()), offsets)
