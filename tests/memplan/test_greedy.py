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
