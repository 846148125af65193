"""flow.quantization: observers and fake quantization against OneFlow's formulas, computed here with exact
decimal rounding (halves away from zero, as C's round in OneFlow's kernels)."""

from decimal import ROUND_HALF_UP, Decimal
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from predict_jobs import on_one_device_and, run

OUTS = Tuple[tp.Numpy, ...]


def c_round(v: np.ndarray) -> np.ndarray:
    """C's round of each value, exactly: Decimal holds a float as it is, and ROUND_HALF_UP takes halves away from 0."""
    return np.array([float(Decimal(float(e)).quantize(Decimal(1), rounding=ROUND_HALF_UP)) for e in v.ravel()]).reshape(v.shape)


def fake_quantized(x, scale, zero_point, bits, affine):
    column = scale.reshape((-1,) + (1,) * (x.ndim - 1)) if scale.size > 1 else scale
    zero = zero_point.reshape(column.shape)
    if affine:
        levels = np.clip(c_round(x / column + zero), 0, 2**bits - 1)
        return (levels - zero) * column
    top = 2 ** (bits - 1) - 1
    return np.clip(c_round(x / column), -top, top) * column


def observed(x, bits, affine, axes=None):
    high, low = x.max(axis=axes), x.min(axis=axes)
    if affine:
        scale = (high - low) / (2**bits - 1)
        return scale, -low / scale
    scale = np.maximum(np.abs(high), np.abs(low)) / (2 ** (bits - 1) - 1)
    return scale, np.zeros_like(scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("per_layer", [True, False])
def test_fake_quantization_of_an_observers_levels_is_oneflows(dtype, bits, affine, per_layer):
    rng = np.random.default_rng(bits)
    x = (rng.normal(size=(3, 4, 5)) * 2).astype(dtype)
    scheme = "affine" if affine else "symmetric"
    out, got_scale, got_zero = run(lambda b: (flow.quantization.fake_quantization(b, *flow.quantization.min_max_observer(
        b, bits, scheme, per_layer_quantization=per_layer), bits, scheme),
        *flow.quantization.min_max_observer(b, bits, scheme, per_layer_quantization=per_layer)), x, returns=OUTS)  # fmt: skip
    want_scale, want_zero = observed(x, bits, affine, None if per_layer else (1, 2))
    np.testing.assert_allclose(got_scale, np.atleast_1d(want_scale), rtol=1e-6)
    np.testing.assert_allclose(got_zero, np.atleast_1d(want_zero), rtol=1e-5, atol=1e-6)
    want = fake_quantized(x.astype(np.float64), got_scale.astype(np.float64), got_zero.astype(np.float64), bits, affine)
    np.testing.assert_allclose(out, want, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_halves_round_away_from_zero_as_c_does():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 126.5, -127.5], np.float32)  # the last two clipped
    (out,) = run(lambda b, s, z: (flow.quantization.fake_quantization(b, s, z),), x, np.ones(1, np.float32),
                 np.zeros(1, np.float32), returns=OUTS)  # fmt: skip
    np.testing.assert_array_equal(out, [1, 2, 3, -1, -2, -3, 0, 127, -127])


def test_the_gradient_passes_straight_through():
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    cotangent = np.random.default_rng(1).normal(size=(3, 4))
    got = {}

    def record(diff: tp.Numpy):
        got["dx"] = diff

    @flow.global_function(type="train")
    def step(a: tp.Numpy.Placeholder((3, 4), dtype=flow.double), c: tp.Numpy.Placeholder((3, 4), dtype=flow.double)
             ) -> tp.Numpy:  # fmt: skip
        v = a + flow.get_variable("zero", shape=(3, 4), dtype=flow.double)
        flow.watch_diff(v, record)
        scale, zero = flow.quantization.min_max_observer(v, 4)
        loss = flow.math.reduce_sum(flow.quantization.fake_quantization(v, scale, zero, 4) * c)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    step(x, cotangent)
    np.testing.assert_array_equal(got["dx"], cotangent)


@pytest.mark.parametrize("affine", [False, True])
def test_moving_averages_update_in_train_jobs_only(affine):
    scheme = "affine" if affine else "symmetric"
    xs = np.random.default_rng(2).normal(size=(3, 2, 5)).astype(np.float32)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 5))) -> Tuple[tp.Numpy, tp.Numpy]:
        scale, zero = flow.quantization.moving_average_min_max_observer(x, 8, scheme, momentum=0.9, name="obs")
        w = flow.get_variable("w", shape=(5,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_sum(flow.quantization.fake_quantization(x * w, scale, zero, 8, scheme))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.0]), momentum=0).minimize(loss)
        return scale, zero

    @flow.global_function()
    def read(x: tp.Numpy.Placeholder((2, 5))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.quantization.moving_average_min_maxObserver(x, 8, scheme, momentum=0.9, name="obs")

    high = low = 0.0
    for x in xs:
        scale, zero = train(x)
        top, bottom = (x.max(), x.min()) if affine else (max(abs(x.max()), abs(x.min())),) * 2
        high = top if high == 0 else high * 0.9 + top * 0.1
        low = (bottom if low == 0 else low * 0.9 + bottom * 0.1) if affine else high
        want_scale = (high - low) / 255 if affine else high / 127
        np.testing.assert_allclose(scale, [want_scale], rtol=1e-5)
        np.testing.assert_allclose(zero, [-low / want_scale if affine else 0.0], rtol=1e-5, atol=1e-6)
    before = flow.get_all_variables()["obs-moving_max"].numpy().copy()
    np.testing.assert_allclose(read(xs[0] * 100)[0], scale, rtol=1e-6)  # read only: the averages stay
    np.testing.assert_array_equal(flow.get_all_variables()["obs-moving_max"].numpy(), before)


def test_dynamic_rows_are_quantized_by_the_levels_of_the_rows_there_are():
    @flow.global_function()
    def quantized(x: tp.ListNumpy.Placeholder((6, 4))) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        scale, zero = flow.quantization.min_max_observer(x, 4, "affine")
        return flow.quantization.fake_quantization(x, scale, zero, 4, "affine"), scale

    for n in (6, 3, 1):
        x = np.random.default_rng(n).normal(size=(n, 4)).astype(np.float32)
        (out,), (scale,) = quantized([x])
        want_scale, want_zero = observed(x, 4, True)
        np.testing.assert_allclose(scale, [want_scale], rtol=1e-6)
        np.testing.assert_allclose(out, fake_quantized(x.astype(np.float64), scale.astype(np.float64),
                                                       np.atleast_1d(want_zero), 4, True), rtol=1e-5, atol=1e-6)  # fmt: skip


def test_a_per_channel_weight_split_over_two_devices_is_one_devices():
    w0 = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)
    x = np.random.default_rng(4).normal(size=(2, 3)).astype(np.float32)

    def train():
        @flow.global_function(type="train")
        def step(a: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            w = flow.get_variable("w", shape=(4, 3), initializer=flow.zeros_initializer(),
                                  distribute=flow.distribute.split(0))  # fmt: skip
            scale, zero = flow.quantization.min_max_observer(w, 4, per_layer_quantization=False)
            out = flow.matmul(a, flow.quantization.fake_quantization(w, scale, zero, 4), transpose_b=True)
            loss = flow.math.reduce_sum(out * out)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), momentum=0).minimize(loss)
            return loss

        flow.load_variables({"w": w0})
        return [step(x) for _ in range(3)], flow.get_all_variables()["w"].numpy()

    one, two = on_one_device_and(2, train)
    np.testing.assert_allclose(two[0], one[0], rtol=1e-5)
    np.testing.assert_allclose(two[1], one[1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("call, match", [
    (lambda b: flow.quantization.min_max_observer(b, 9), "quantization_bit must be an int from 2 to 8, got 9"),
    (lambda b: flow.quantization.min_max_observer(b, 8, "asymmetric"), "quantization_scheme must be 'symmetric' or"),
    (lambda b: flow.quantization.fake_quantization(flow.cast(b, flow.int32), b, b), "input must be a floating-point"),
    (lambda b: flow.quantization.moving_average_min_max_observer(b, momentum=2), "momentum must be a number in"),
])  # fmt: skip
def test_bad_arguments_are_trace_errors_at_the_users_line(call, match):
    with pytest.raises(flow.TraceError, match=r"test_quantization.py:\d+.*" + match):
        run(call, np.zeros((2, 3), np.float32), returns=OUTS)
