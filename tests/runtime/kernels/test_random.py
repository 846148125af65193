import subprocess
import sys

import numpy as np
import pytest

from .conftest import build_on_gpu


def masks(build_kernel, seed: int, calls: int, rate: float = 0.3, shape=(64, 50), dtype=np.float32) -> list[np.ndarray]:
    step, (mask,) = build_kernel("dropout_mask", [], [(shape, dtype)], rate=rate, seed=seed)
    out = []
    for _ in range(calls):
        step()
        out.append(mask.copy())
    return out


def test_same_seed_same_sequence(build_kernel) -> None:
    first, second = masks(build_kernel, 7, 3), masks(build_kernel, 7, 3)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_calls_and_seeds_differ(build_kernel) -> None:
    a, b = masks(build_kernel, 7, 2)
    (c,) = masks(build_kernel, 8, 1)
    assert (a != b).any() and (a != c).any()


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_values_and_mean(build_kernel, rate, dtype) -> None:
    (mask,) = masks(build_kernel, 3, 1, rate=rate, shape=(200, 500), dtype=dtype)
    scale = dtype(1 / (1 - rate))
    assert mask.dtype == dtype
    assert set(np.unique(mask)) <= {0, scale}
    assert abs(float(mask.astype(np.float64).mean()) - 1) < 0.03
    assert abs(float((mask == 0).mean()) - rate) < 0.01


def test_rate_zero_keeps_everything(build_kernel) -> None:
    for mask in masks(build_kernel, 5, 2, rate=0.0):
        np.testing.assert_array_equal(mask, 1)


def test_rate_one_is_rejected(build_kernel) -> None:
    with pytest.raises(ValueError, match="rate"):
        build_kernel("dropout_mask", [], [((2,), np.float32)], rate=1.0, seed=0)


def test_stream_is_the_same_in_another_process(build_kernel) -> None:
    xp = "cupy" if build_kernel is build_on_gpu else "numpy"
    script = (
        f"import numpy as np, {xp} as xp; from irflow.runtime.kernels import get_kernel;"
        "m = xp.empty((8, 8), np.float32); run = get_kernel('dropout_mask')(xp, dict(rate=0.5, seed=11), [], [m]);"
        "run(); run(); print(','.join(str(int(v)) for v in (xp.asnumpy(m) if xp is not np else m).reshape(-1) > 0))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    second = masks(build_kernel, 11, 2, rate=0.5, shape=(8, 8))[1]
    assert result.stdout.strip() == ",".join(str(int(v)) for v in (second > 0).reshape(-1))


def draws(build_kernel, name: str, seed: int, calls: int, spec) -> list[np.ndarray]:
    step, (out,) = build_kernel(name, [], [spec], seed=seed)
    values = []
    for _ in range(calls):
        step()
        values.append(out.copy())
    return values


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_draws_repeat_per_seed_and_are_uniform(build_kernel, dtype) -> None:
    a, b = draws(build_kernel, "random_uniform", 4, 2, ((100_000,), dtype))
    np.testing.assert_array_equal(draws(build_kernel, "random_uniform", 4, 2, ((100_000,), dtype))[1], b)
    assert a.dtype == dtype and (a != b).any() and (a != draws(build_kernel, "random_uniform", 5, 1, ((100_000,), dtype))[0]).any()
    assert 0.0 <= a.min() and a.max() < 1.0
    # 10 equal bins: chi-square with 9 degrees of freedom, above 34.1 with probability about 1e-4
    counts = np.bincount((a * 10).astype(np.int64), minlength=10)
    assert ((counts - 10_000) ** 2 / 10_000).sum() < 34.1


def test_negative_seeds_are_taken(build_kernel) -> None:
    """OneFlow's seeds are any int64; numpy's generators take non-negative ones only."""
    (u,) = draws(build_kernel, "random_uniform", -3, 1, ((5,), np.float32))
    np.testing.assert_array_equal(u, draws(build_kernel, "random_uniform", 2**64 - 3, 1, ((5,), np.float32))[0])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64])
def test_bernoulli_is_u_below_p(build_kernel, dtype) -> None:
    u = np.array([[0.0, 0.5, 0.999], [0.25, 0.25, 0.7]], np.float32)
    p = np.array([[0.0, 0.5, 1.0], [0.25, 0.3, 0.6]], np.float16)
    step, (out,) = build_kernel("bernoulli", [u, p], [(p.shape, dtype)])
    step()
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.array([[0, 0, 1], [0, 1, 0]], dtype))


@pytest.mark.parametrize("bad, position", [(-0.5, "0, 1"), (1.5, "1, 0"), (np.nan, "1, 1")])
def test_bernoulli_refuses_probabilities_outside_0_1_before_writing(build_kernel, bad, position) -> None:
    from irflow.runtime.kernels import DataError

    p = np.full((2, 2), 0.5, np.float64)
    p[tuple(int(i) for i in position.split(", "))] = bad
    step, (out,) = build_kernel("bernoulli", [np.zeros((2, 2)), p], [((2, 2), np.float64)])
    with pytest.raises(DataError, match=rf"probability {bad} at position \[{position}\] is outside \[0, 1\]"):
        step()
    assert np.isnan(out).all()  # untouched


def test_permutations_are_permutations_new_each_call_and_repeat_per_seed(build_kernel) -> None:
    first = draws(build_kernel, "random_permutation", 9, 3, ((50,), np.int32))
    again = draws(build_kernel, "random_permutation", 9, 3, ((50,), np.int32))
    for perm, same in zip(first, again):
        assert perm.dtype == np.int32
        np.testing.assert_array_equal(np.sort(perm), np.arange(50))
        np.testing.assert_array_equal(perm, same)
    assert (first[0] != first[1]).any() and (first[1] != first[2]).any()


def test_every_permutation_is_equally_likely(build_kernel) -> None:
    """24,000 permutations of 4: each of the 24 about 1,000 times (chi-square, 23 degrees of freedom,
    above 57.3 with probability about 1e-4)."""
    step, (perm,) = build_kernel("random_permutation", [], [((4,), np.int32)], seed=1)
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(24_000):
        step()
        counts[tuple(perm)] = counts.get(tuple(perm), 0) + 1
    assert len(counts) == 24
    assert sum((c - 1000) ** 2 / 1000 for c in counts.values()) < 57.3
