"""lgamma and digamma (kernels/gamma.py) against Python's math.lgamma, mpmath's digamma at 40 digits, and
central differences of math.lgamma: over the positive and negative axis, near lgamma's roots at 1 and 2,
at the poles and the infinities, in float32 (rounded once) and float64, and in place."""

import math

import numpy as np
import pytest

from irflow.runtime.kernels.gamma import Gamma

rng = np.random.default_rng(5)
AXIS = np.concatenate([np.linspace(-30.0, 40.0, 7001), rng.uniform(-1e3, 1e3, 500), 10 ** rng.uniform(-300, 300, 300),
                       -(10 ** rng.uniform(-300, 15, 300))])  # fmt: skip
AXIS = AXIS[~((AXIS <= 0) & (AXIS == np.rint(AXIS)))]  # the poles: test_poles_...
SPECIAL = np.array([0.0, -0.0, -1.0, -2.0, -7.0, -1e20, 1.0, 2.0, np.inf, -np.inf, np.nan])


def run(fn: str, x: np.ndarray) -> np.ndarray:
    out = np.full_like(x, np.nan)
    getattr(Gamma(np, x.shape, x.dtype), fn)(x, out)
    return out


def not_poles(x: np.ndarray) -> np.ndarray:
    return x[~((x <= 0) & (x == np.rint(x)))]


def mp(fn: str, x: np.ndarray) -> np.ndarray:
    """mpmath's log|Gamma| or digamma at 40 digits, rounded to float64."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    f = (lambda v: mpmath.log(abs(mpmath.gamma(v)))) if fn == "lgamma" else mpmath.digamma
    return np.array([float(f(mpmath.mpf(float(v)))) for v in x])


def scaled_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Absolute error over max(|want|, 1): relative for large values, absolute near the roots."""
    return np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1.0)


def test_lgamma_matches_math_lgamma():
    """Python's math.lgamma (its own Lanczos sum, a few units of 1e-16 off itself): always there."""
    np.testing.assert_array_less(scaled_error(run("lgamma", AXIS), np.array([math.lgamma(v) for v in AXIS])), 5e-15)


@pytest.mark.parametrize("fn, bound", [("lgamma", 1e-15), ("digamma", 2e-15)])
def test_float64_against_mpmath(fn, bound):
    """Below 0 lgamma's reflection, and near digamma's root at 1.4616... its recurrence, subtract: their
    error is a few units of 1e-16 absolute there, relative elsewhere."""
    x = AXIS[np.abs(AXIS) < 1e250]
    want = mp(fn, x)
    np.testing.assert_array_less(scaled_error(run(fn, x), want), bound)
    positive = (x > 0) & (x < 1) if fn == "digamma" else x > 0
    np.testing.assert_allclose(run(fn, x[positive]), want[positive], rtol=6e-16 if fn == "lgamma" else 2e-15, atol=0)


def test_lgamma_keeps_relative_accuracy_next_to_its_roots():
    """lgamma(1 + d) ~ -0.5772 d and lgamma(2 + d) ~ 0.4228 d: the series about 2 keeps every digit
    (math.lgamma has none left at d = 2**-52)."""
    x = np.array([1 + 2**-52, 1 - 2**-53, 2 - 2**-52, 2 + 2**-51, 1 + 1e-9, 2 - 1e-7, 1.0 + 2**-30])
    np.testing.assert_allclose(run("lgamma", x), mp("lgamma", x), rtol=3e-16, atol=0)


@pytest.mark.parametrize("fn", ["lgamma", "digamma"])
def test_float32_is_rounded_once(fn):
    """Computed in float64: within half a float32 ulp of the exact value, plus float64's few units."""
    x = not_poles(AXIS[np.abs(AXIS) < 1e30].astype(np.float32))
    want = mp(fn, x)
    got = run(fn, x)
    assert got.dtype == np.float32
    finite = np.abs(want) < np.finfo(np.float32).max  # digamma(x) ~ -1/x beyond it for the tiniest |x|
    np.testing.assert_array_less(scaled_error(got[finite], want[finite]), 2**-24 * 1.001)
    np.testing.assert_array_equal(got[~finite], np.sign(want[~finite]) * np.inf)


def test_digamma_is_the_slope_of_math_lgamma():
    """Independent of mpmath: central differences of math.lgamma, h = 1e-5 (error ~ h**2 psi'')."""
    x = np.concatenate([np.linspace(-6.9, 12.0, 400), [0.3, 1.4616321449683622, 25.0, 1e3]])
    x = x[np.abs(x - np.rint(x)) > 0.05]
    h = 1e-5
    slope = np.array([(math.lgamma(v + h) - math.lgamma(v - h)) / (2 * h) for v in x])
    np.testing.assert_allclose(run("digamma", x), slope, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_poles_infinities_and_nan_as_pytorch_gives_them(dtype):
    """lgamma: +inf at 0, -0, the negative integers and both infinities. digamma: -inf at +0, +inf at -0,
    NaN at the negative integers and -inf, +inf at +inf. NaN stays NaN. Nothing warns on the way."""
    x = SPECIAL.astype(dtype)
    with np.errstate(all="raise"):
        lgamma, digamma = run("lgamma", x), run("digamma", x)
    inf, nan = np.inf, np.nan
    np.testing.assert_array_equal(lgamma, np.array([inf, inf, inf, inf, inf, inf, 0, 0, inf, inf, nan], dtype))
    np.testing.assert_array_equal(digamma[[0, 1, 2, 3, 4, 5, 8, 9, 10]], [-inf, inf, nan, nan, nan, nan, inf, nan, nan])
    np.testing.assert_allclose(digamma[[6, 7]], [-0.5772156649015329, 0.42278433509846713], rtol=1e-7 if dtype == np.float32 else 1e-15)


def test_tiny_and_huge_arguments():
    """lgamma(x) ~ -log|x| as x -> 0 (also subnormal, where pi/sin(pi x) would overflow); digamma ~ -1/x."""
    x = np.array([1e-300, -1e-300, 5e-324, -5e-324, 1e-320, -3e-320])
    np.testing.assert_allclose(run("lgamma", x), [-math.log(abs(v)) for v in x], rtol=1e-15)
    np.testing.assert_allclose(run("digamma", np.array([1e-300, -1e-300])), [-1e300, 1e300], rtol=1e-15)
    big = np.array([1e300, 2.5e305])
    np.testing.assert_allclose(run("lgamma", big), [math.lgamma(v) for v in big], rtol=1e-15)


@pytest.mark.parametrize("fn", ["lgamma", "digamma"])
def test_in_place(fn):
    x = AXIS[np.abs(AXIS) < 1e30].copy()
    want = run(fn, x)
    getattr(Gamma(np, x.shape, x.dtype), fn)(x, x)
    np.testing.assert_array_equal(x, want)
