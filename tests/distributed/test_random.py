"""flow.random's ops on 2 simulated devices draw what one device draws: their random sources are whole on
every device (one seed, one stream) and a split consumer takes its piece locally."""

from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp


def on(devices: int, define, *inputs, steps: int = 3):
    """Each step's outputs of the job `define()` makes on `devices` devices, in a fresh session."""
    flow.clear_default_session()
    if devices > 1:
        flow.config.cpu_device_num(devices)
    f = define()
    outs = [f(*inputs) for _ in range(steps)]
    return outs, f


@pytest.mark.parametrize("rows, cast", [(8, None), (7, None), (8, 1)])
def test_bernoulli_samples_do_not_depend_on_the_device_count(rows, cast):
    """Split along axis 0 (an even and an uneven split) and along axis 1 (a parallel_cast): the samples
    of every step are the one-device ones, and the uniform draws reach the split bernoulli by a local slice."""
    p = np.random.default_rng(0).uniform(size=(rows, 50)).astype(np.float32)

    def define():
        @flow.global_function()
        def sample(x: tp.Numpy.Placeholder((rows, 50))) -> Tuple[tp.Numpy, tp.Numpy]:
            if cast is not None:
                x = flow.parallel_cast(x, distribute=flow.distribute.split(cast))
            return flow.random.bernoulli(x), flow.random.bernoulli(x, dtype=flow.int8)

        return sample

    one, _ = on(1, define, p)
    two, f = on(2, define, p)
    for (a, b), (c, d) in zip(one, two):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    assert (one[0][0] != one[1][0]).any()
    physical = f.ir("lower-to-physical")
    assert "job.shard_slice" in physical and "job.bernoulli" in physical
    assert physical.count("job.all_gather") == 2  # the two results, gathered for the return; never the input


def test_permutations_and_shuffles_do_not_depend_on_the_device_count():
    x = np.arange(30, dtype=np.float32).reshape(10, 3)

    def define():
        @flow.global_function()
        def perm(x: tp.Numpy.Placeholder((10, 3))) -> Tuple[tp.Numpy, tp.Numpy]:
            return flow.random.generate_random_batch_permutation_indices(x), flow.random.shuffle(x * 2.0)

        return perm

    one, _ = on(1, define, x)
    two, _ = on(2, define, x)
    for (a, b), (c, d) in zip(one, two):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
        np.testing.assert_array_equal(np.sort(b[:, 0]), np.sort(2 * x[:, 0]))


def test_a_shuffled_variable_trains_alike_on_two_devices():
    """A split batch of upstream gradients meets a shuffled weight: its gradient, the upstream one put back
    through the permutation, and so the trained weight, are the one-device ones."""
    upstream = np.random.default_rng(2).normal(size=(6, 4))

    def define():
        @flow.global_function(type="train")
        def train(up: tp.Numpy.Placeholder((6, 4), dtype=flow.float64)) -> tp.Numpy:
            w = flow.get_variable("w", shape=(6, 4), dtype=flow.float64, initializer=flow.random_normal_initializer())
            loss = flow.math.reduce_sum(flow.random.shuffle(w) * up)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.3]), momentum=0).minimize(loss)
            return loss

        return train

    one, _ = on(1, define, upstream)
    w_one = flow.get_all_variables()["w"].numpy()
    two, _ = on(2, define, upstream)
    np.testing.assert_allclose(np.array(two), np.array(one), rtol=1e-12)
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w_one, rtol=1e-12)
