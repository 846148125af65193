"""Vectorized erf and erfc for numpy and cupy, which have none of their own.

W. J. Cody's rational approximations (Math. Comp. 1969; SPECFUN's CALERF) on
three intervals of |x|, evaluated on whole arrays and merged with masks, with
Cody's split exp(-x*x) = exp(-r*r) exp(-(x-r)(x+r)) that keeps erfc's tail
accurate. float64 results agree with `math.erf`/`math.erfc` to ~1e-15.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from numpy.typing import DTypeLike

from .registry import Array
from .shapes import compute_dtype
from .workspace import scratch

_THRESH = 0.46875  # erf(x) = x R(x^2) below, erfc(x) = exp(-x^2) R(x) above
_MID = 4.0  # erfc switches to an expansion in 1/x^2 above
_BIG = 27.3  # erfc(x) rounds to 0.0 in double precision beyond
_RSQRT_PI = 0.56418958354775628695

# Coefficients, highest degree first; each denominator is monic.
_A = (1.85777706184603153e-1, 3.16112374387056560, 1.13864154151050156e2, 3.77485237685302021e2, 3.20937758913846947e3)
_B = (1.0, 2.36012909523441209e1, 2.44024637934444173e2, 1.28261652607737228e3, 2.84423683343917062e3)
_C = (
    2.15311535474403846e-8,
    5.64188496988670089e-1,
    8.88314979438837594,
    6.61191906371416295e1,
    2.98635138197400131e2,
    8.81952221241769090e2,
    1.71204761263407058e3,
    2.05107837782607147e3,
    1.23033935479799725e3,
)
_D = (
    1.0,
    1.57449261107098347e1,
    1.17693950891312499e2,
    5.37181101862009858e2,
    1.62138957456669019e3,
    3.29079923573345963e3,
    4.36261909014324716e3,
    3.43936767414372164e3,
    1.23033935480374942e3,
)
_P = (
    1.63153871373020978e-2,
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
)
_Q = (
    1.0,
    2.56852019228982242,
    1.87295284992346047,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)


class ErrorFunction:
    """erf/erfc over arrays of one shape, with scratch made at kernel build time (`workspace.scratch`).

    `out` may be the same memory as `x`: x is read completely before out is written.
    """

    def __init__(self, xp: ModuleType, shape: Sequence[int], dtype: DTypeLike):
        dt = compute_dtype(dtype)
        self._xp = xp
        self._y, self._clipped, self._z, self._num, self._den, self._head, self._tail = (
            scratch(xp, shape, dt) for _ in range(7)
        )
        self._neg, self._small, self._large = (scratch(xp, shape, bool) for _ in range(3))

    def erf(self, x: Array, out: Array) -> None:
        xp, head, tail = self._xp, self._head, self._tail
        self._evaluate(x)
        xp.subtract(0.5, tail, out=tail)  # Cody's (0.5 - erfc) + 0.5 rounds better than 1 - erfc
        xp.add(tail, 0.5, out=tail)
        xp.copyto(tail, head, where=self._small)
        xp.copyto(out, tail)
        xp.negative(tail, out=tail)
        xp.copyto(out, tail, where=self._neg)

    def erfc(self, x: Array, out: Array) -> None:
        xp, head, tail = self._xp, self._head, self._tail
        self._evaluate(x)
        xp.subtract(1.0, head, out=head)
        xp.copyto(tail, head, where=self._small)
        xp.copyto(out, tail)
        xp.subtract(2.0, tail, out=tail)
        xp.copyto(out, tail, where=self._neg)

    def _evaluate(self, x: Array) -> None:
        """Leave erf(|x|) in head where |x| is small, erfc(|x|) in tail elsewhere, and the masks."""
        xp, y, clipped, z, num, head, tail = (
            self._xp,
            self._y,
            self._clipped,
            self._z,
            self._num,
            self._head,
            self._tail,
        )
        xp.less(x, 0, out=self._neg)
        xp.absolute(x, out=y)
        xp.less_equal(y, _THRESH, out=self._small)
        # Each interval sees |x| clipped into its own range, so no branch overflows or warns.
        xp.minimum(y, _THRESH, out=head)
        xp.square(head, out=z)
        self._ratio(z, _A, _B, out=z)
        xp.multiply(head, z, out=head)

        xp.clip(y, _THRESH, _BIG, out=clipped)
        xp.greater(clipped, _MID, out=self._large)
        self._ratio(clipped, _C, _D, out=tail)
        xp.maximum(clipped, _MID, out=z)  # the expansion in 1/x^2; y is free from here on
        xp.square(z, out=y)
        xp.reciprocal(y, out=y)
        self._ratio(y, _P, _Q, out=num)
        xp.multiply(num, y, out=num)
        xp.subtract(_RSQRT_PI, num, out=num)
        xp.divide(num, z, out=num)
        xp.copyto(tail, num, where=self._large)

        xp.multiply(clipped, 16.0, out=z)  # z: |x| rounded down to 1/16, so z*z is exact
        xp.trunc(z, out=z)
        xp.divide(z, 16.0, out=z)
        xp.subtract(clipped, z, out=y)
        xp.add(clipped, z, out=clipped)
        xp.multiply(y, clipped, out=y)
        xp.negative(y, out=y)
        xp.exp(y, out=y)
        xp.square(z, out=z)
        xp.negative(z, out=z)
        xp.exp(z, out=z)
        xp.multiply(tail, z, out=tail)
        xp.multiply(tail, y, out=tail)

    def _ratio(self, z: Array, num: Sequence[float], den: Sequence[float], out: Array) -> None:
        """out = num(z) / den(z); `out` may be `z`."""
        horner(self._xp, z, den, self._den)
        horner(self._xp, z, num, self._num)
        self._xp.divide(self._num, self._den, out=out)


def horner(xp: ModuleType, z: Array, coeffs: Sequence[float], out: Array) -> None:
    """out = the polynomial with `coeffs` (highest degree first) at z; `out` must not be `z`."""
    xp.multiply(z, coeffs[0], out=out)
    for c in coeffs[1:-1]:
        xp.add(out, c, out=out)
        xp.multiply(out, z, out=out)
    xp.add(out, coeffs[-1], out=out)
