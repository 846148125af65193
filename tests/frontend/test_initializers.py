"""Initializers: OneFlow's constructors give plain dicts; `sample` draws what they describe."""

import math

import numpy as np
import pytest

import irflow as flow
from irflow.runtime.initializers import fan, sample
from irflow.frontend.session import default_session


def draw(init, shape, dtype=np.float32, seed=0):
    return sample(init, shape, dtype, np.random.default_rng(seed))


def test_constructors_give_the_documented_dicts():
    assert flow.truncated_normal(0.1) == {"kind": "truncated_normal", "mean": 0.0, "stddev": 0.1}
    assert flow.truncated_normal_initializer(1.0, 2.0) == {"kind": "truncated_normal", "mean": 1.0, "stddev": 2.0}
    assert flow.constant_initializer(3) == {"kind": "constant", "value": 3.0}
    assert flow.zeros_initializer() == {"kind": "constant", "value": 0.0}
    assert flow.ones_initializer() == {"kind": "constant", "value": 1.0}
    assert flow.random_uniform_initializer(-1, 1) == {"kind": "random_uniform", "minval": -1.0, "maxval": 1.0}
    assert flow.random_normal_initializer(0, 2, seed=5) == {"kind": "random_normal", "mean": 0.0, "stddev": 2.0, "seed": 5}
    assert flow.xavier_uniform_initializer("NCHW") == {
        "kind": "variance_scaling", "scale": 1.0, "mode": "fan_avg", "distribution": "random_uniform",
        "data_format": "channels_first",
    }  # fmt: skip
    assert flow.glorot_uniform_initializer is flow.xavier_uniform_initializer


def test_constructor_errors():
    with pytest.raises(ValueError, match="positive"):
        flow.random_normal_initializer(stddev=0)
    with pytest.raises(ValueError, match="mode must be one of"):
        flow.variance_scaling_initializer(mode="fan")
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        flow.kaiming_initializer((3, 4), nonlinearity="swish")
    with pytest.raises(ValueError, match="unknown data_format"):
        flow.xavier_uniform_initializer("HWCN")


def test_constant_and_dtypes():
    np.testing.assert_array_equal(draw(flow.constant_initializer(2.5), (2, 3), np.float64), np.full((2, 3), 2.5))
    out = draw(flow.constant_initializer(7), (), np.int64)
    assert out.shape == () and out.dtype == np.int64 and out == 7
    ints = draw(flow.random_uniform_initializer(0, 10), (1000,), np.int32)
    assert ints.dtype == np.int32 and ints.min() >= 0 and ints.max() < 10


def test_distributions():
    n = (200, 300)
    u = draw(flow.random_uniform_initializer(-2, 3), n)
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    g = draw(flow.random_normal_initializer(1.0, 0.5), n, np.float64)
    assert abs(g.mean() - 1.0) < 0.01 and abs(g.std() - 0.5) < 0.01
    t = draw(flow.truncated_normal_initializer(0.0, 0.1), n, np.float64)
    assert np.abs(t).max() <= 0.2 and abs(t.std() - 0.1 * 0.8796) < 0.003


def test_variance_scaling_uses_the_variables_fan():
    conv = (64, 32, 5, 5)
    assert fan(conv, "fan_in") == 32 * 25 and fan(conv, "fan_out") == 64 * 25
    assert fan((64, 5, 5, 32), "fan_out", "channels_last") == 64 * 25
    assert fan((10, 784), "fan_avg") == (784 + 10) / 2
    w = draw(flow.xavier_uniform_initializer(), (400, 600), np.float64)
    limit = math.sqrt(6 / 1000)
    assert np.abs(w).max() <= limit and abs(w.std() - limit / math.sqrt(3)) < 1e-3
    v = draw(flow.variance_scaling_initializer(2.0, "fan_in", "truncated_normal"), (300, 500), np.float64)
    assert abs(v.std() - math.sqrt(2.0 / 500)) < 2e-3


def test_kaiming_is_computed_from_the_given_shape():
    init = flow.kaiming_initializer((64, 32, 3, 3), nonlinearity="relu")
    assert init["kind"] == "random_normal" and math.isclose(init["stddev"], math.sqrt(2) / math.sqrt(32 * 9))
    init = flow.kaiming_initializer((10, 20), distribution="random_uniform", mode="fan_out", nonlinearity="tanh")
    bound = math.sqrt(3) * (5 / 3) / math.sqrt(10)
    assert math.isclose(init["maxval"], bound) and math.isclose(init["minval"], -bound)


def test_sample_reads_the_irs_dictionary_and_a_seed():
    from irflow.dialects.job import to_attr

    init = flow.random_normal_initializer(0.0, 1.0, seed=3)
    attr_entries = to_attr(init).data
    np.testing.assert_array_equal(draw(attr_entries, (4,), seed=0), draw(init, (4,), seed=99))


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown initializer kind 'orthogonal'"):
        draw({"kind": "orthogonal"}, (2, 2))


def test_get_variable_rejects_a_foreign_initializer():
    with pytest.raises(flow.TraceError, match="initializer must come from flow"):

        @flow.global_function()
        def f() -> None:
            flow.get_variable("v", shape=(2,), initializer=0.5)

    assert "v" not in default_session().variables
