"""`plan`: validity, alignment, determinism, optimality on small inputs, real-profile quality."""

import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irflow.memplan import Buffer, Plan, lower_bound, plan, validate
from irflow.memplan.instances import mixed, tiled, training

B = Buffer
# Greedy by size puts 50 and 40 at 0, 30 on 40, then 20 must clear both 50 and 30: 90 bytes.
FIVE = [B(10, 0, 1), B(20, 1, 2), B(30, 2, 3), B(40, 3, 4), B(50, 0, 1)]


def planned(buffers, alignment=1, budget_s=None, clock=time.perf_counter):
    result = plan(buffers, alignment=alignment, budget_s=budget_s, clock=clock)
    validate(buffers, result, alignment)
    assert result.size >= lower_bound(buffers)
    return result


def test_small_case_reaches_the_lower_bound():
    assert lower_bound(FIVE) == 80
    assert planned(FIVE).size == 80
    assert planned(FIVE, budget_s=1).size == 80


@pytest.mark.parametrize("n, seeds", [(60, range(20)), (100, range(3))])
def test_default_reaches_the_optimum_of_perfect_packings(n, seeds):
    # A guillotine tiling: the optimum is the lower bound, and the default search must find it.
    for seed in seeds:
        buffers = tiled(n, seed=seed)
        assert planned(buffers).size == lower_bound(buffers) == 1 << 20, seed


def test_default_is_optimal_on_tiny_instances(optimum):
    rng = random.Random(77)
    for _ in range(100):
        n = rng.randint(1, 6)
        buffers = []
        for _ in range(n):
            first = rng.randint(0, 5)
            buffers.append(B(rng.choice([1, 2, 3, 5, 8, 13, 21]), first, first + rng.randint(0, 3)))
        assert planned(buffers).size == optimum(buffers), buffers


def test_empty_and_zero_sized():
    assert planned([]).size == 0 and planned([]).offsets == ()
    result = planned([B(0, 0, 5), B(8, 1, 2), B(0, 2, 2)], alignment=64)
    assert result.offsets == (0, 0, 0) and result.size == 8


@pytest.mark.parametrize("alignment", [1, 48, 64, 4096])
def test_alignment(alignment):
    buffers = mixed(300, seed=alignment)
    result = planned(buffers, alignment)
    assert all(o % alignment == 0 for o in result.offsets)
    # Sizes are padded for placement only: the arena ends at the top buffer's last byte.
    assert result.size == max(o + b.size for o, b in zip(result.offsets, buffers))


def test_unaligned_sizes_share_an_aligned_arena():
    result = planned([B(10, 0, 3), B(10, 1, 2)], alignment=64)
    assert sorted(result.offsets) == [0, 64] and result.size == 74


@pytest.mark.parametrize("make", [tiled, training, mixed])
def test_generated_instances(make):
    buffers = make(3000, seed=5)
    first, second = planned(buffers, 64), planned(buffers, 64)
    assert first == second  # deterministic


def test_budget_never_worse_and_deterministic_when_finished():
    buffers = tiled(40, seed=2)
    default = planned(buffers)
    improved = planned(buffers, budget_s=10)
    assert improved.size <= default.size
    assert improved.size == lower_bound(buffers) == 1 << 20  # a tiling: the optimum is the LB
    assert planned(buffers, budget_s=10) == improved


def test_budget_stops_at_the_lower_bound():
    began = time.perf_counter()
    assert planned(FIVE, budget_s=30).size == 80
    assert time.perf_counter() - began < 5


def test_brute_force_optimum_on_tiny_instances(optimum):
    rng = random.Random(1234)
    for _ in range(150):
        n = rng.randint(1, 6)
        buffers = []
        for _ in range(n):
            first = rng.randint(0, 5)
            buffers.append(B(rng.choice([0, 1, 2, 3, 5, 8, 13, 21]), first, first + rng.randint(0, 3)))
        assert planned(buffers, budget_s=5).size == optimum(buffers), buffers


buffer_lists = st.lists(
    st.builds(
        lambda size, first, length: B(size, first, first + length),
        st.integers(0, 300),
        st.integers(-20, 40),
        st.integers(0, 15),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(buffer_lists, st.sampled_from([1, 3, 64]))
def test_any_input_gives_a_valid_plan(buffers, alignment):
    default = planned(buffers, alignment)
    assert planned(buffers, alignment, budget_s=0.05).size <= default.size


@pytest.mark.parametrize("alignment", [1, 64])
def test_resnet50_within_one_percent(profile, alignment):
    buffers = profile("resnet50")
    assert planned(buffers, alignment).size <= 1.01 * lower_bound(buffers)


@pytest.mark.parametrize("name", ["mm_B", "mm_K"])
def test_search_solves_a_challenging_instance(profile, name):
    # Both fit in their lower bound (MiniMalloc's published capacity); the budget is a ceiling.
    buffers = profile(name)
    assert planned(buffers, budget_s=30).size == lower_bound(buffers) == 1 << 20


def test_default_plans_a_large_tiling_through_rectangles():
    # The load of a tiling is at the lower bound everywhere, so the default coalesces it into
    # rectangles and packs those, chain first: 1.08 of the optimum where the chain order on the
    # buffers stops at 1.13 and the plain orders at 1.31.
    buffers = tiled(10_000)
    assert planned(buffers).size <= 1.10 * lower_bound(buffers)


@pytest.mark.parametrize("n, seed, ratio", [(10_000, 0, 1.080), (100_000, 2, 1.20)])
def test_the_earlier_rectangles_packed_mirrored_win_on_some_tilings(n, seed, ratio):
    # The final rectangles alone give 1.0821 and 1.2866 of the optimum here; the rectangles before
    # stacks of any size, packed in time mirrored, 1.0793 and 1.1838.
    buffers = tiled(n, seed=seed)
    assert planned(buffers).size <= ratio * lower_bound(buffers)


def test_a_tilings_rectangles_are_also_planned_block_by_block():
    # Seed 12's rectangles fall into six blocks no rectangle joins in time: packed whole, 1.1557 of
    # the optimum; each block by its own best order, 1.0668.
    buffers = tiled(10_000, seed=12)
    assert planned(buffers).size <= 1.07 * lower_bound(buffers)


def test_tilings_are_also_packed_by_chain_in_order_of_last_step():
    # Seed 9's rectangles: 1.1039 of the optimum by the other orders, 1.0984 by chain in order of last step.
    buffers = tiled(10_000, seed=9)
    assert planned(buffers).size <= 1.099 * lower_bound(buffers)


def test_large_tilings_rectangles_get_a_second_chain_order():
    # Above 10k buffers the default's work holds one pack of the rectangles, chain by size: 1.1045 of
    # the optimum here; a second, chain by area, gives 1.0577.
    buffers = tiled(100_000, seed=5)
    assert planned(buffers).size <= 1.06 * lower_bound(buffers)


def test_budget_on_a_coalesced_tiling_is_never_worse():
    buffers = tiled(3_000, seed=1)
    assert planned(buffers, budget_s=0.5).size <= planned(buffers).size


def test_budget_runs_on_the_given_clock(profile):
    buffers = profile("mm_D")  # the default's plan is 1.11 of the LB; a second's search finds 1.05
    reads = []

    def clock() -> float:  # an hour passes between any two reads: the budget is gone at once
        reads.append(None)
        return 3600.0 * len(reads)

    default = planned(buffers)
    assert plan(buffers, alignment=1, budget_s=60, clock=clock) == default and reads
    assert planned(buffers, budget_s=2, clock=time.process_time).size < default.size


def first_fit_by_size(buffers: list[B], alignment: int) -> int:
    """TFLite Micro's greedy planner (largest first, first fit) in plain Python: an oracle sharing no code."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    top = 0
    for b in sorted(buffers, key=lambda b: b.size // -alignment):  # largest first; stable for equal ones
        units = -(-b.size // alignment)
        at = 0
        for lo, hi in sorted((lo, hi) for lo, hi, f, l in placed if f <= b.last and b.first <= l):
            if lo >= at + units:
                break
            at = max(at, hi)
        placed.append((at, at + units, b.first, b.last))
        top = max(top, at + units)
    return top


def random_lifetimes(n: int, seed: int) -> list[B]:
    """Small and large sizes, short to long lifetimes: an instance family where greedy by size
    sometimes beats every skyline order (seed 3 of 1,000 buffers by 1.1%)."""
    rng = random.Random(seed)
    buffers = []
    for _ in range(n):
        first = rng.randint(0, 200)
        size = rng.choice([rng.randint(1, 64), rng.randint(1, 4096)])
        buffers.append(B(size, first, first + rng.randint(0, rng.choice([2, 10, 60]))))
    return buffers


@pytest.mark.parametrize("alignment", [1, 64])
@pytest.mark.parametrize("make, n, seed", [(random_lifetimes, 1000, 3), (random_lifetimes, 400, 8),
                                           (mixed, 700, 2), (training, 500, 4), (tiled, 300, 6)])
def test_never_worse_than_greedy_by_size(make, n, seed, alignment):
    # Greedy by size is one of the default's candidates, in alignment units.
    buffers = make(n, seed=seed)
    arena = planned(buffers, alignment).size
    assert -(-arena // alignment) <= first_fit_by_size(buffers, alignment)


def test_default_runs_greedy_by_size_above_the_exact_searchs_reach(monkeypatch):
    # Up to 10,000 buffers greedy by size is a default candidate unless the plan is already within
    # 1/400 of the bound; here it wins (218,008 bytes against the skyline orders' 218,215).
    import irflow.memplan.planner as planner

    buffers = random_lifetimes(2_200, seed=11)
    assert planned(buffers).size == first_fit_by_size(buffers, 1)
    # Above the default's reach greedy by size of the whole runs only with a budget.
    monkeypatch.setattr(planner, "_GREEDY_DEFAULT_MAX", 2_100)
    monkeypatch.setattr(planner, "_GREEDY_WHOLE_MAX", 2_100)
    assert planned(buffers).size > first_fit_by_size(buffers, 1)
    assert planned(buffers, budget_s=30, clock=time.process_time).size <= first_fit_by_size(buffers, 1)


def test_budget_runs_greedy_by_size_until_it_is_spent(monkeypatch):
    # Above the default's reach greedy by size runs last in the budget and counts only if it
    # finishes: the clock stands still until it starts, then each read takes a second.
    import irflow.memplan.planner as planner

    monkeypatch.setattr(planner, "_GREEDY_DEFAULT_MAX", 2_100)
    monkeypatch.setattr(planner, "_GREEDY_TOP_MAX", 2_100)  # nor of the plan's top
    monkeypatch.setattr(planner, "_GREEDY_WHOLE_MAX", 2_100)  # nor of the whole, last
    buffers = random_lifetimes(2_200, seed=11)  # greedy by size beats every skyline order here
    default = planned(buffers)
    now, results = [0.0], []
    greedy_by_size = planner.greedy_by_size

    def ticking() -> float:
        now[0] += 1.0 if results else 0.0
        return now[0]

    def timed_greedy(*args):
        results.append("running")
        results[-1] = greedy_by_size(*args)
        return results[-1]

    monkeypatch.setattr(planner, "greedy_by_size", timed_greedy)
    # 2,200 buffers take 69 batches of greedy by size, one clock read each: 10 s are too few.
    cut = planned(buffers, budget_s=10, clock=ticking)
    assert results == [None] and first_fit_by_size(buffers, 1) < cut.size <= default.size
    results.clear()
    assert planned(buffers, budget_s=100, clock=ticking).size == first_fit_by_size(buffers, 1) < default.size
    assert len(results) == 1 and results[0] is not None


def test_default_stops_packing_near_the_lower_bound(calls):
    # Above 2,000 buffers, a plan within 1/400 of the lower bound ends the default's packing (the
    # training family's first order gets there); a budget packs the remaining orders as well.
    import irflow.memplan.planner as planner

    packs = calls(planner, "skyline_pack")
    buffers = training(10_000, seed=2)  # `area` packs it to 1.0005 of the lower bound
    default = planned(buffers)
    assert len(packs) == 1 and default.size <= lower_bound(buffers) * (1 + 1 / 400)
    packs.clear()
    budgeted = planned(buffers, budget_s=2, clock=time.process_time)
    assert len(packs) > 1 and budgeted.size <= default.size


def test_default_repacks_the_top_where_greedy_by_size_no_longer_runs(calls, monkeypatch):
    # Above 10,000 buffers greedy by size is not run first; the top fifth of a plan not near the
    # bound is packed again, by flush `length`, above the rest. On mixed 20k seed 0 that takes
    # `area`'s 1.0189 of the bound to 1.0109, below greedy by size's 1.0163 (so without greedy by
    # size of the whole, which runs last up to 40k).
    import irflow.memplan.planner as planner
    from irflow.memplan.greedy import greedy_by_size
    from irflow.memplan.orderings import ORDERINGS
    from irflow.memplan.problem import as_arrays
    from irflow.memplan.skyline import compress, skyline_pack

    monkeypatch.setattr(planner, "_GREEDY_WHOLE_MAX", 19_999)
    greedy = calls(planner, "greedy_by_size")
    buffers = mixed(20_000, seed=0)
    size, first, last = as_arrays(buffers)
    cfirst, clast, steps = compress(first, last)
    by_area = max(np.array(skyline_pack(cfirst, clast, size, ORDERINGS["area"](size, first, last), steps)) + size)
    by_size = max(greedy_by_size(size, cfirst, clast) + size)
    default = planned(buffers)
    assert all(len(args[0]) < len(buffers) for args in greedy)  # not greedy by size of the whole
    assert default.size < min(by_area, by_size)


def greedy_arena(buffers) -> int:
    """Greedy by size's arena at alignment 1, as the planner runs it (on compressed steps)."""
    from irflow.memplan.greedy import greedy_by_size
    from irflow.memplan.problem import as_arrays
    from irflow.memplan.skyline import compress

    size, first, last = as_arrays(buffers)
    cfirst, clast, _ = compress(first, last)
    return int((greedy_by_size(size, cfirst, clast) + size).max())


def test_default_places_the_top_again_by_greedy_by_size_up_to_50k(calls, monkeypatch):
    # On mixed 12k seed 0 the plan repacked by flush `length` stays above greedy by size's (52,289,368
    # bytes against 52,180,951); greedy by size of its top fifth, above the others, ends at 52,149,297.
    import irflow.memplan.planner as planner

    buffers = mixed(12_000, seed=0)
    by_size = greedy_arena(buffers)
    greedy = calls(planner, "greedy_by_size")
    monkeypatch.setattr(planner, "_GREEDY_WHOLE_MAX", 0)  # greedy by size of the whole would also beat it
    assert planned(buffers).size <= by_size
    assert [len(args[0]) for args in greedy] == [len(buffers) // 5]
    monkeypatch.setattr(planner, "_GREEDY_TOP_MAX", 0)
    assert planned(buffers).size > by_size


def test_default_runs_greedy_by_size_of_the_whole_last_up_to_40k(calls, monkeypatch):
    # On mixed 12k seed 3 greedy by size beats the plan with its top placed again (44,724,858 bytes
    # against 44,879,887): greedy by size of the whole, run last with that plan to beat, gives its plan.
    import irflow.memplan.planner as planner

    buffers = mixed(12_000, seed=3)
    by_size = greedy_arena(buffers)
    greedy = calls(planner, "greedy_by_size")
    assert planned(buffers).size == by_size
    assert [len(args[0]) for args in greedy] == [len(buffers) // 5, len(buffers)]
    monkeypatch.setattr(planner, "_GREEDY_WHOLE_MAX", 11_999)
    assert planned(buffers).size > by_size
    # Nor where the plan is within 1/100 of the bound (mixed 15k seed 3: 1.0063): it could save less.
    monkeypatch.undo()
    greedy = calls(planner, "greedy_by_size")
    buffers = mixed(15_000, seed=3)
    assert planned(buffers).size < lower_bound(buffers) * 1.01
    assert [len(args[0]) for args in greedy] == [len(buffers) // 5]


def test_default_is_never_worse_than_greedy_by_size_at_25k():
    # Mixed 25k seed 6: the default's pack and both repacks of its top stay above greedy by size's
    # arena (1.0273 of the bound against 1.0217); greedy by size of the whole, run last up to 40k,
    # gives its plan.
    buffers = mixed(25_000, seed=6)
    assert planned(buffers).size == greedy_arena(buffers)


def stacked(size, first, last):
    """No reuse inside each block: any plan of the blocks must still be a valid plan of the whole."""
    from irflow.memplan.planner import split

    offsets, blocks = split(size, first, last)
    for idx, base in blocks:
        offsets[idx] = base + np.cumsum(size[idx]) - size[idx]
    return offsets, blocks


def test_split_keeps_the_optimum(optimum):
    # Splitting at boundaries no buffer crosses and putting buffers live over their whole block
    # at its bottom lose nothing: the blocks' optima on their bases give the whole's optimum.
    from irflow.memplan.planner import split

    rng = random.Random(5)
    parts = 0
    for _ in range(150):
        buffers = []
        for _ in range(rng.randint(1, 7)):
            first = rng.randint(0, 8)
            buffers.append(B(rng.choice([1, 2, 3, 5, 8, 13]), first, first + rng.randint(0, 4)))
        size, first, last = (np.array(v) for v in zip(*((b.size, b.first, b.last) for b in buffers)))
        offsets, blocks = split(size, first, last)
        in_block = np.zeros(len(buffers), bool)
        for idx, _ in blocks:
            in_block[idx] = True
        bottom = int((offsets + size)[~in_block].max(initial=0))  # the buffers put at a block's bottom
        assert max([bottom] + [base + optimum([buffers[i] for i in idx]) for idx, base in blocks]) == optimum(buffers)
        whole, _ = stacked(size, first, last)
        validate(buffers, Plan(tuple(whole.tolist()), int((whole + size).max())), 1)
        parts += len(blocks) != 1 or not in_block.all()
    assert parts > 50  # most random instances split


def test_split_lets_the_search_solve_mm_e(profile):
    # The whole of MiniMalloc's E is not solved in a CPU second (1.0039 of its bound); its two
    # blocks are, each within its share of the budget.
    buffers = profile("mm_E")
    assert planned(buffers, budget_s=1, clock=time.process_time).size == lower_bound(buffers) == 1 << 20
