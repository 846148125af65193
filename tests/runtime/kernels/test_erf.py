import math

import numpy as np
import pytest

from irflow.runtime.kernels.erf import ErrorFunction

X = np.concatenate([np.linspace(-30, 30, 6001), [0.0, -0.0, 1e-300, -1e-9, 0.46875, -4.0, 26.5, np.inf, -np.inf]])


def evaluate(fn: str, x: np.ndarray) -> np.ndarray:
    out = np.full_like(x, np.nan)
    getattr(ErrorFunction(np, x.shape, x.dtype), fn)(x, out)
    return out


def test_erf_matches_math_erf() -> None:
    ref = np.array([math.erf(v) for v in X])
    np.testing.assert_allclose(evaluate("erf", X), ref, rtol=1e-14, atol=1e-300)


def test_erfc_keeps_relative_accuracy_in_the_tail() -> None:
    ref = np.array([math.erfc(v) for v in X])
    normal = ref > 1e-300  # below that math.erfc is subnormal, with few digits left to compare
    np.testing.assert_allclose(evaluate("erfc", X)[normal], ref[normal], rtol=1e-13)
    assert evaluate("erfc", np.array([28.0, np.inf]))[0] == 0.0


def test_nan_propagates() -> None:
    assert np.isnan(evaluate("erf", np.array([np.nan]))).all()
    assert np.isnan(evaluate("erfc", np.array([np.nan]))).all()


@pytest.mark.parametrize("dtype, tol", [(np.float32, 3e-7), (np.float16, 1e-3)])
def test_low_precision(dtype: type, tol: float) -> None:
    x = np.linspace(-6, 6, 1001).astype(dtype)
    ref = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = evaluate("erf", x)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, atol=tol)


def test_output_may_be_the_input() -> None:
    x = np.linspace(-3, 3, 101)
    ref = evaluate("erfc", x)
    ErrorFunction(np, x.shape, x.dtype).erfc(x, x)
    np.testing.assert_array_equal(x, ref)
