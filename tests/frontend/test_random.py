"""flow.random's ops: Bernoulli samples, coin flips, batch permutations and shuffle, checked by statistics
and by numpy written here (a shuffle's gradient is the upstream gradient put back through the permutation)."""

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

HERE = __file__
LEVELS = np.array([0.0, 0.01, 0.1, 0.3, 0.5, 0.62, 0.9, 0.99, 1.0])


def line_of(marker: str) -> int:
    return next(n for n, text in enumerate(open(HERE).read().splitlines(), 1) if text.endswith(marker))


def within_sigmas(ones: np.ndarray, p: float, sigmas: float = 5.0) -> bool:
    """The mean of `ones` (0/1 draws of probability p) within `sigmas` standard errors of p; exact at 0 and 1."""
    spread = sigmas * np.sqrt(p * (1 - p) / ones.size)
    return abs(float(ones.mean()) - p) <= spread


def test_bernoulli_means_follow_each_elements_probability_and_steps_are_independent():
    """100k draws, p picked per element from nine levels: each level's mean within 5 sigma of its p, and
    two steps agree where both draw 1 or both 0, with probability p**2 + (1-p)**2, within 5 sigma."""
    p = np.random.default_rng(0).choice(LEVELS, size=(250, 400)).astype(np.float32)

    @flow.global_function()
    def sample(x: tp.Numpy.Placeholder((250, 400))) -> tp.Numpy:
        return flow.random.bernoulli(x)

    first, second = sample(p), sample(p)
    assert first.dtype == np.float32 and set(np.unique(first)) <= {0.0, 1.0}
    for level in LEVELS:
        at = p == np.float32(level)
        assert within_sigmas(first[at], float(np.float32(level))), level
        assert within_sigmas(second[at], float(np.float32(level))), level
    agree = (first == second).astype(np.float64)
    want = p.astype(np.float64) ** 2 + (1 - p.astype(np.float64)) ** 2
    assert abs(agree.sum() - want.sum()) <= 5 * np.sqrt((want * (1 - want)).sum())


def test_bernoulli_dtype_defaults_to_xs_and_can_be_given():
    @flow.global_function()
    def sample(x: tp.Numpy.Placeholder((3, 4), dtype=flow.float64)) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.random.bernoulli(x), flow.random.bernoulli(x, dtype=flow.int8)

    same, small = sample(np.full((3, 4), 0.5))
    assert same.dtype == np.float64 and small.dtype == np.int8
    assert set(np.unique(same)) <= {0, 1} and set(np.unique(small)) <= {0, 1}


def draws(sample, x, steps=3):
    return [sample(x) for _ in range(steps)]


def test_a_seed_repeats_the_draws_and_without_one_the_job_and_op_names_fix_them():
    x = np.full((64,), 0.5, np.float32)

    def define(job_name, seed):
        def sample(x: tp.Numpy.Placeholder((64,))) -> Tuple[tp.Numpy, tp.Numpy]:
            return flow.random.bernoulli(x, seed=seed), flow.random.bernoulli(x, seed=seed)

        sample.__name__ = job_name  # the job's name, which a derived seed depends on
        return flow.global_function()(sample)

    seeded = draws(define("a", 7), x)
    for (a, b), (c, d) in zip(seeded, draws(define("b", 7), x)):  # another job, the same seed
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(a, b)  # one seed, one stream
    assert (seeded[0][0] != seeded[1][0]).any()  # a new draw every step
    unseeded = draws(define("c", None), x)
    assert (unseeded[0][0] != unseeded[0][1]).any()  # two ops: two seeds
    flow.clear_default_session()
    for (a, b), (c, d) in zip(unseeded, draws(define("c", None), x)):  # the same program again
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_one_name_given_twice_still_draws_two_streams():
    @flow.global_function()
    def sample(x: tp.Numpy.Placeholder((64,))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.random.bernoulli(x, name="coin"), flow.random.bernoulli(x, name="coin")

    a, b = sample(np.full((64,), 0.5, np.float32))
    assert (a != b).any()


def test_a_probability_outside_0_1_stops_the_step_at_the_users_line():
    @flow.global_function()
    def sample(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.random.bernoulli(x)  # the bernoulli line

    p = np.full((2, 3), 0.5, np.float32)
    p[1, 2] = 1.25
    with pytest.raises(flow.ExecutionError, match=r"bernoulli: probability 1.25 at position \[1, 2\] is outside \[0, 1\]") as info:
        sample(p)
    assert info.value.location.file == HERE and info.value.location.line == line_of("# the bernoulli line")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x, i: flow.random.bernoulli(i), r"bernoulli: x must be a floating-point Blob of probabilities"),
        (lambda x, i: flow.random.bernoulli(x, dtype=bool), r"bernoulli: dtype must be one of"),
        (lambda x, i: flow.random.bernoulli(x, seed=1.5), r"bernoulli: seed must be an int64 or None, got 1.5"),
        (lambda x, i: flow.random.bernoulli(x, seed=2**63), r"seed must be an int64 or None"),
        (lambda x, i: flow.random.coin_flip(0), r"coin_flip: batch_size must be a positive int, got 0"),
        (lambda x, i: flow.random.coin_flip(4, probability=1.5), r"coin_flip: probability must be in \[0, 1\], got 1.5"),
        (lambda x, i: flow.random.shuffle(3.0), r"shuffle: value must be a Blob with an axis 0 to permute"),
        (lambda x, i: flow.random.generate_random_batch_permutation_indices(flow.math.reduce_sum(x)),
         r"generate_random_batch_permutation_indices: value must be a Blob with an axis 0"),
    ],
)
def test_bad_arguments_are_trace_errors_at_the_users_line(call, message):
    with pytest.raises(flow.TraceError, match=message) as info:

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((4, 3)), i: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
            return call(x, i)

    assert info.value.location.file == HERE


def test_a_dynamic_batch_is_permuted_at_its_actual_size():
    @flow.global_function()
    def f(x: tp.ListNumpy.Placeholder((8, 3))) -> tp.ListNumpy:
        return flow.random.generate_random_batch_permutation_indices(x)

    seen = set()
    for n in (8, 3, 0, 5, 5, 5):
        (order,) = f([np.zeros((n, 3), np.float32)])
        assert order.dtype == np.int32 and sorted(order.tolist()) == list(range(n))
        seen.add(tuple(order.tolist()))
    assert len(seen) > 4  # new draws each step


def test_coin_flips_are_int8_with_the_probability():
    @flow.global_function()
    def flips() -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.random.coin_flip(100_000, probability=0.8), flow.random.CoinFlip(3)

    many, few = flips()
    assert many.dtype == np.int8 and many.shape == (100_000,) and set(np.unique(many)) <= {0, 1}
    assert few.shape == (3,) and within_sigmas(many, float(np.float32(0.8)))


def permutation_job(n, seed=None):
    @flow.global_function()
    def perm(x: tp.Numpy.Placeholder((n, 2))) -> Tuple[tp.Numpy, tp.Numpy]:
        indices = flow.random.generate_random_batch_permutation_indices(x, seed=seed)
        return indices, flow.random.shuffle(x, seed=seed)

    return perm


def test_permutations_are_permutations_new_each_step_and_repeat_with_a_seed():
    n = 200
    x = np.stack([np.arange(n), -np.arange(n)], axis=1).astype(np.float32)
    steps = draws(permutation_job(n, seed=11), x)
    for indices, shuffled in steps:
        assert indices.dtype == np.int32 and indices.shape == (n,)
        np.testing.assert_array_equal(np.sort(indices), np.arange(n))
        np.testing.assert_array_equal(shuffled, x[indices])  # one seed: shuffle's permutation is this one
    assert (steps[0][0] != steps[1][0]).any() and (steps[1][0] != steps[2][0]).any()
    for (a, _), (b, _) in zip(steps, draws(permutation_job(n, seed=11), x)):  # another job, the same seed
        np.testing.assert_array_equal(a, b)
    unseeded = draws(permutation_job(n), x, 1)[0]
    np.testing.assert_array_equal(np.sort(unseeded[1], axis=0), np.sort(x, axis=0))
    assert (unseeded[1] != x[unseeded[0]]).any()  # two ops, two derived seeds


def shuffle_train(shape, lr):
    @flow.global_function(type="train")
    def train(upstream: tp.Numpy.Placeholder(shape, dtype=flow.float64)) -> Tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=shape, dtype=flow.float64, initializer=flow.random_normal_initializer())
        shuffled = flow.random.shuffle(w, seed=5)
        loss = flow.math.reduce_sum(shuffled * upstream)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [lr]), momentum=0).minimize(loss)
        return flow.random.generate_random_batch_permutation_indices(w, seed=5), shuffled

    return train


def test_the_gradient_of_shuffle_is_the_upstream_gradient_put_back_through_the_permutation():
    """loss = sum(shuffle(w) * upstream): d loss / d w[perm[i]] = upstream[i], so SGD moves row perm[i] of w
    by -lr * upstream[i]; the permutation is read from a generator of the same seed in the job."""
    shape, lr = (7, 3), 0.5
    train = shuffle_train(shape, lr)
    rng = np.random.default_rng(1)
    w = flow.get_all_variables()["w"].numpy()
    perms = []
    for _ in range(3):
        upstream = rng.normal(size=shape)
        perm, shuffled = train(upstream)
        np.testing.assert_array_equal(shuffled, w[perm])
        grad = np.empty(shape)
        grad[perm] = upstream  # the inverse permutation of the upstream gradient
        w = w - lr * grad
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12, atol=1e-12)
        perms.append(perm)
    assert any((a != b).any() for a, b in zip(perms, perms[1:]))


def test_no_gradient_flows_through_bernoulli_samples():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4,), initializer=flow.constant_initializer(0.5))
        samples = flow.random.bernoulli(flow.math.sigmoid(w))  # the samples do not depend smoothly on w
        loss = flow.math.reduce_sum(samples * x + w * w)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    train(np.ones((4,), np.float32))
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), 0.5 - 0.1 * 2 * 0.5, rtol=1e-6)
