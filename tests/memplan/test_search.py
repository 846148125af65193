"""The exact search (irflow/memplan/search.py) on its own, started from a poor plan."""

import random
import time

import numpy as np

from irflow.memplan import Buffer, Plan, validate
from irflow.memplan.instances import tiled
from irflow.memplan.orderings import ORDERINGS
from irflow.memplan.search import ABORTED, INFEASIBLE, Search, improve
from irflow.memplan.skyline import compress


def search_of(buffers):
    size = np.array([b.size for b in buffers])
    first = np.array([b.first for b in buffers])
    last = np.array([b.last for b in buffers])
    cfirst, clast, steps = compress(first, last)
    ranks = [order(size, first, last) for order in ORDERINGS.values()]
    return Search(cfirst, clast, size, steps), ranks


def test_capacity_decisions():
    # Optimum 80 (the lower bound); 79 is infeasible, which the search proves.
    search, ranks = search_of([Buffer(*b) for b in [(10, 0, 1), (20, 1, 2), (30, 2, 3), (40, 3, 4), (50, 0, 1)]])
    found = search.run(80, ranks[0].tolist(), 100, time.perf_counter() + 10)
    assert isinstance(found, np.ndarray) and (found + search.size).max() <= 80
    assert search.run(79, ranks[0].tolist(), 1000, time.perf_counter() + 10) is INFEASIBLE


def test_runs_stop_at_their_dead_end_limit():
    # Fitting in 22 (the lower bound) takes backtracking under this order.
    shape = [(9, 1, 3), (5, 2, 4), (6, 4, 5), (7, 0, 1), (5, 3, 4), (6, 0, 2)]
    search, ranks = search_of([Buffer(*b) for b in shape])
    rank = ranks[0].tolist()
    assert search.run(22, rank, 0, time.perf_counter() + 10) is ABORTED
    found = search.run(22, rank, 100, time.perf_counter() + 10)
    assert (found + search.size).max() == 22


def test_improve_reaches_the_brute_force_optimum(optimum):
    rng = random.Random(99)
    for _ in range(120):
        n = rng.randint(1, 6)
        buffers = []
        for _ in range(n):
            first = rng.randint(0, 4)
            buffers.append(Buffer(rng.randint(1, 12), first, first + rng.randint(0, 3)))
        search, ranks = search_of(buffers)
        # Start from no reuse at all: everything found is the search's own work.
        stacked = np.concatenate([[0], np.cumsum(search.size)[:-1]])
        _, height = improve(
            search, ranks, stacked, int(search.size.sum()), int(search.load.max()), time.perf_counter() + 10
        )
        assert height == optimum(buffers), buffers


def test_backjumping_keeps_the_search_exact_on_seven_buffers(optimum):
    # Infeasibility proofs skip choices (backjumping): the optimum proves them sound.
    rng = random.Random(7)
    for _ in range(25):
        buffers = []
        for _ in range(7):
            first = rng.randint(0, 6)
            buffers.append(Buffer(rng.randint(1, 9), first, first + rng.randint(0, 4)))
        search, ranks = search_of(buffers)
        best = optimum(buffers)
        deadline = time.perf_counter() + 10
        for rank in ranks:
            for chain in (True, False):
                found = search.run(best, rank.tolist(), 10**6, deadline, chain)
                assert isinstance(found, np.ndarray) and (found + search.size).max() <= best, buffers
                assert search.run(best - 1, rank.tolist(), 10**6, deadline, chain) is INFEASIBLE, buffers


def test_improve_on_the_time_mirrored_instance_alone(optimum):
    # Only mirrored runs: their plans must be valid for the original instance and reach its optimum.
    rng = random.Random(5)
    for _ in range(60):
        buffers = []
        for _ in range(rng.randint(1, 6)):
            first = rng.randint(0, 4)
            buffers.append(Buffer(rng.randint(1, 12), first, first + rng.randint(0, 3)))
        search, ranks = search_of(buffers)
        stacked = np.concatenate([[0], np.cumsum(search.size)[:-1]])
        offsets, height = improve(
            search, [], stacked, int(search.size.sum()), int(search.load.max()), time.perf_counter() + 10,
            mirrored=ranks,
        )
        plan = Plan(tuple(offsets.tolist()), height)
        validate(buffers, plan)
        assert height == max((o + b.size for o, b in zip(offsets.tolist(), buffers)), default=0)
        assert height == optimum(buffers), buffers


def test_mirrored_runs_count_towards_the_node_limit():
    buffers = [Buffer(*b) for b in [(9, 1, 3), (5, 2, 4), (6, 4, 5), (7, 0, 1), (5, 3, 4), (6, 0, 2)]]
    search, ranks = search_of(buffers)
    stacked = np.concatenate([[0], np.cumsum(search.size)[:-1]])
    improve(search, [], stacked, int(search.size.sum()), 22, time.perf_counter() + 10, nodes=3, mirrored=ranks)
    # The first run stops at the limit; each later one expands a node before it sees the limit.
    assert 3 <= search.nodes <= 3 + len(ranks)


def test_the_clock_stops_the_search_within_a_few_nodes():
    # A clock that counts nodes: past the deadline, no further order may run its first nodes too.
    # A tiling of 200 buffers: the lower bound is its optimum, which 3,000 nodes do not reach.
    search, ranks = search_of(tiled(200, seed=0))
    search.clock = lambda: search.nodes
    stacked = np.concatenate([[0], np.cumsum(search.size)[:-1]])
    _, height = improve(search, ranks, stacked, int(search.size.sum()), int(search.load.max()), 3_000)
    assert height > search.load.max() and 3_000 < search.nodes <= 3_000 + 32
