"""Buffer checks, the lower bound and the validator (irflow/memplan/problem.py)."""

import numpy as np
import pytest

from irflow.memplan import Buffer, Plan, lower_bound, plan, validate

B = Buffer


def test_lower_bound_known_cases():
    assert lower_bound([]) == 0
    assert lower_bound([B(7, 3, 3)]) == 7
    # Inclusive lifetimes: sharing step 2 makes them live together.
    assert lower_bound([B(10, 0, 2), B(20, 2, 4)]) == 30
    assert lower_bound([B(10, 0, 1), B(20, 2, 4)]) == 20
    assert lower_bound([B(10, 0, 1), B(20, 1, 2), B(30, 2, 3), B(40, 3, 4), B(50, 0, 1)]) == 80
    assert lower_bound([B(5, -10, -5), B(0, -7, 100), B(6, -5, -5)]) == 11


@pytest.mark.parametrize(
    "buffers, message",
    [
        ([B(1, 0, 0), B(-3, 0, 1)], "buffer 1: negative size -3"),
        ([B(1, 0, 0), B(1, 0, 0), B(2, 5, 4)], "buffer 2: last step 4 is before first step 5"),
    ],
)
def test_bad_buffers_name_the_index(buffers, message):
    for call in (lambda: plan(buffers), lambda: lower_bound(buffers), lambda: validate(buffers, Plan((0,) * 3, 9))):
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize(
    "buffers, error, message",
    [
        ([B(1, 0, 0), (8, 0, 1)], TypeError, r"buffer 1: expected a Buffer\(size, first, last\), got tuple \(8, 0, 1\)"),
        ([B(1.5, 0, 0)], TypeError, "buffer 0: size must be an integer, got float 1.5"),
        ([B(1, 0, 0), B(1, 0.0, 2)], TypeError, "buffer 1: first must be an integer, got float 0.0"),
        ([B(1, 0, "3")], TypeError, "buffer 0: last must be an integer, got str '3'"),
        ([B(1, 0, 0), B(1 << 62, 0, 1)], ValueError, r"buffer 1: size 4611686018427387904 is out of range"),
        ([B(1, -(1 << 62), 0)], ValueError, r"buffer 0: first -4611686018427387904 is out of range"),
        ([B(1, 0, 1 << 70)], ValueError, r"buffer 0: last 1180591620717411303424 is out of range"),
        # Each alone is in range; together they would overflow an arena's int64 offsets.
        ([B(1 << 61, 0, 1), B(1 << 61, 1, 2)], ValueError, r"sizes total 4611686018427387904 bytes"),
    ],
)
def test_buffers_that_are_not_integers_in_range_name_the_index(buffers, error, message):
    """Floats would be truncated and huge values wrap around in int64: each is refused, naming the buffer."""
    for call in (lambda: plan(buffers), lambda: lower_bound(buffers), lambda: validate(buffers, Plan((0,) * 2, 9))):
        with pytest.raises(error, match=message):
            call()


def test_numpy_integers_are_integers():
    buffers = [B(np.int64(8), np.int32(0), np.uint8(3)), B(np.int16(8), 2, 5)]
    assert plan(buffers, 1).size == lower_bound(buffers) == 16


def test_validate_refuses_offsets_out_of_range():
    """An offset near int64's limit would wrap past the arena check."""
    with pytest.raises(ValueError, match="buffer 1: offset 9223372036854775800 is out of range"):
        validate([B(8, 0, 1), B(16, 0, 1)], Plan((0, (1 << 63) - 8), 16))


@pytest.mark.parametrize("alignment", [0, -64])
def test_bad_alignment(alignment):
    with pytest.raises(ValueError, match="alignment must be positive"):
        plan([B(1, 0, 0)], alignment=alignment)
    with pytest.raises(ValueError, match="alignment must be positive"):
        validate([B(1, 0, 0)], Plan((0,), 1), alignment)


def test_negative_budget():
    with pytest.raises(ValueError, match="budget_s"):
        plan([B(1, 0, 0)], budget_s=-1)


def test_validate_accepts_reuse_and_touching_bytes():
    buffers = [B(10, 0, 1), B(64, 2, 3), B(64, 0, 3), B(0, 0, 3)]
    validate(buffers, Plan((0, 0, 64, 5), 128), 1)  # 0 and 1 share bytes at disjoint steps; 3 is empty


@pytest.mark.parametrize(
    "offsets, message",
    [
        ((0, 0, 64), "buffers 0 and 1 overlap"),  # lifetimes share step 2 only: still a conflict
        ((0, 5, 64), "buffers 0 and 1 overlap"),  # 1 starts inside 0
        ((64, 0, 32), "buffers 1 and 2 overlap"),  # steps 4..9, bytes [0, 50) and [32, 82)
        ((0, 60, 60), "buffers 1 and 2 overlap"),  # equal offsets
    ],
)
def test_validate_names_the_overlapping_pair(offsets, message):
    buffers = [B(10, 0, 2), B(50, 2, 9), B(50, 4, 9)]
    with pytest.raises(ValueError, match=message):
        validate(buffers, Plan(offsets, 200), 1)


def test_validate_finds_an_overlap_among_many():
    rng = np.random.default_rng(3)
    buffers = [B(8, int(t), int(t) + 3) for t in rng.integers(0, 50, 300)]
    good = plan(buffers, alignment=8)
    validate(buffers, good, 8)
    offsets = list(good.offsets)
    # Move one buffer onto a neighbour in time: the validator must name both.
    i = 17
    j = next(k for k, b in enumerate(buffers) if k != i and b.first <= buffers[i].last and buffers[i].first <= b.last)
    offsets[i] = offsets[j]
    with pytest.raises(ValueError, match=f"buffers {min(i, j)} and {max(i, j)} overlap"):
        validate(buffers, Plan(tuple(offsets), good.size), 8)


def test_validate_alignment_and_arena():
    buffers = [B(10, 0, 1), B(10, 0, 1)]
    with pytest.raises(ValueError, match="buffer 1: offset 10 is not a non-negative multiple of 64"):
        validate(buffers, Plan((0, 10), 100), 64)
    with pytest.raises(ValueError, match="buffer 0: offset -64"):
        validate(buffers, Plan((-64, 64), 100), 64)
    with pytest.raises(ValueError, match=r"buffer 1: \[64, 74\) ends past the arena size 70"):
        validate(buffers, Plan((0, 64), 70), 64)
    with pytest.raises(ValueError, match="2 offsets for 1 buffers"):
        validate(buffers[:1], Plan((0, 64), 74), 64)
