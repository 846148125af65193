"""Vectorized lgamma and digamma for numpy and cupy, which have neither.

lgamma(x) = log|Gamma(x)| (C's lgamma, torch.lgamma): from x = 10 on, Stirling's
series with 8 Bernoulli terms; on [1.5, 2.5] the Taylor series about 2, whose
coefficients (-1)**k (zeta(k) - 1) / k are computed below and which keeps the
root at 2 (and, through log(x), the one at 1) accurate to the last digits; in
between, Gamma(x + 1) = x Gamma(x) moves x into [1.5, 2.5] with logs of exact
factors; below 0 the reflection Gamma(x) Gamma(1 - x) = pi / sin(pi x), with the
sine taken at x - rint(x). digamma, lgamma's derivative (its gradient): from 10
the asymptotic series, below psi(x) = psi(x + 1) - 1/x, below 0 the reflection
psi(x) = psi(1 - x) - pi / tan(pi x); near its root at 1.4616... the recurrence
gives it absolute, not relative, accuracy, as Cephes' psi (PyTorch's) has.
At the poles lgamma is +inf (0, the negative integers, -inf), and digamma -inf at
+0, +inf at -0 and NaN at the negative integers and -inf, as PyTorch gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from types import ModuleType

import numpy as np
from numpy.typing import DTypeLike

from .erf import horner
from .registry import Array
from .workspace import scratch

_LARGE = 10.0  # the asymptotic series from here on
_BERNOULLI = tuple(Fraction(b) for b in ("1/6", "-1/30", "1/42", "-1/30", "5/66", "-691/2730", "7/6", "-3617/510"))
"""B_2, B_4, ..., B_16."""
_EULER_GAMMA = 0.57721566490153286061


def _zeta_minus_one(s: int) -> float:
    """zeta(s) - 1, the sum of n**-s over n >= 2: the terms below 16, then Euler-Maclaurin's integral, half
    term and Bernoulli corrections at 16, whose remainder is below 1e-21 for every s >= 2."""
    n = 16
    terms = [k ** -float(s) for k in range(2, n)] + [n ** (1.0 - s) / (s - 1), n ** -float(s) / 2]
    rising = Fraction(s)  # s (s + 1) ... (s + 2j - 2)
    for j, b in enumerate(_BERNOULLI, 1):
        terms.append(float(b / math.factorial(2 * j) * rising) * n ** (1.0 - s - 2 * j))
        rising *= (s + 2 * j - 1) * (s + 2 * j)
    return math.fsum(terms)


# Coefficients, highest degree first (erf.horner's order).
_ABOUT_TWO = tuple((-1) ** k * _zeta_minus_one(k) / k for k in range(30, 1, -1)) + (1 - _EULER_GAMMA,)
"""lgamma(2 + t) = t * sum(c t**j): |t| <= 1/2 leaves the 30th power below 4**-30."""
_STIRLING = tuple(float(b / (2 * k * (2 * k - 1))) for k, b in reversed(list(enumerate(_BERNOULLI, 1))))
"""lgamma(x) - (x - 1/2)(log x - 1) - (log(2 pi) - 1)/2 = r * sum(c (r*r)**j), r = 1/x."""
_PSI_TAIL = tuple(float(b / (2 * k)) for k, b in reversed(list(enumerate(_BERNOULLI, 1))))
"""log x - 1/(2x) - psi(x) = r*r * sum(c (r*r)**j), r = 1/x."""


class Gamma:
    """lgamma/digamma over arrays of one shape, with float64 scratch from the shared workspace (each call writes
    it before reading it: kernels/workspace.py).

    `out` may be the same memory as `x`: x is read completely before out is written.
    """

    def __init__(self, xp: ModuleType, shape: Sequence[int], dtype: DTypeLike):
        # in float64 whatever the dtype: a float32 result is then rounded once, where float32 steps lose
        # several digits (and overflow on the way to a finite result)
        dt = np.dtype(np.float64)
        self._xp = xp
        self._z, self._u, self._acc, self._c, self._d, self._e, self._s = (scratch(xp, shape, dt) for _ in range(7))
        self._pole, self._reflect, self._mask = (scratch(xp, shape, bool) for _ in range(3))

    def lgamma(self, x: Array, out: Array) -> None:
        xp, u, acc, t = self._xp, self._u, self._acc, self._e
        self._split(x, pole_at_zero=True)
        # log(pi / |sin(pi x)|) = -log|r| - log(sin(pi r) / (pi r)), r = x - rint(x): pi r would lose digits
        # of a subnormal r, and the quotient is 1 to the last digit below |r| = 2**-30
        c, d = self._c, self._d
        self._reduced(x, -0.5)
        xp.absolute(u, out=u)
        xp.maximum(u, 2.0**-30, out=c)
        xp.multiply(c, math.pi, out=c)
        xp.sin(c, out=d)
        xp.divide(d, c, out=d)
        xp.log(d, out=d)
        xp.log(u, out=u)
        xp.add(u, d, out=u)
        xp.negative(u, out=u)
        self._positive_lgamma(self._z, acc)
        xp.subtract(u, acc, out=t)
        xp.copyto(acc, t, where=self._reflect)
        xp.copyto(acc, math.inf, where=self._pole)
        xp.copyto(out, acc)

    def digamma(self, x: Array, out: Array) -> None:
        xp, u, acc, t, zero = self._xp, self._u, self._acc, self._e, self._mask
        self._split(x, pole_at_zero=False)
        self._reduced(x, -0.25)  # pi / tan(pi x), at -1/4 (a finite -pi) where it is not used
        xp.multiply(u, math.pi, out=u)
        xp.tan(u, out=u)
        xp.divide(math.pi, u, out=u)
        self._positive_digamma(self._z, acc)
        xp.subtract(acc, u, out=t)
        xp.copyto(acc, t, where=self._reflect)
        xp.copyto(acc, math.nan, where=self._pole)
        xp.equal(x, 0, out=zero)  # -inf at +0, +inf at -0: the limits from each side
        xp.copyto(acc, -math.inf, where=zero)
        xp.signbit(x, out=self._pole)
        xp.logical_and(zero, self._pole, out=zero)
        xp.copyto(acc, math.inf, where=zero)
        xp.copyto(out, acc)

    def _split(self, x: Array, pole_at_zero: bool) -> None:
        """The poles (integers <= 0, or < 0, and -inf), the x < 0 that reflect, and z: the argument at which
        the positive branch is taken (x, 1 - x where it reflects, 1 at a pole, whose value is set after)."""
        xp, z, u, pole, reflect, m = self._xp, self._z, self._u, self._pole, self._reflect, self._mask
        xp.copyto(z, x)  # in float64 from here: a ufunc computes in its inputs' dtype, whatever its out's
        xp.rint(z, out=u)
        xp.equal(u, z, out=pole)
        (xp.less_equal if pole_at_zero else xp.less)(z, 0, out=m)
        xp.logical_and(pole, m, out=pole)
        xp.less(z, 0, out=reflect)
        xp.logical_not(pole, out=m)
        xp.logical_and(reflect, m, out=reflect)
        xp.subtract(1.0, z, out=u)
        xp.copyto(z, u, where=reflect)
        xp.equal(x, 0, out=m)
        xp.logical_or(m, pole, out=m)
        xp.copyto(z, 1.0, where=m)

    def _reduced(self, x: Array, elsewhere: float) -> None:
        """u = x - rint(x) in [-1/2, 1/2] (where sin(pi u) and tan(pi u) are accurate) where x reflects, else
        `elsewhere`, so that no other entry (an infinity, an integer) meets a NaN or a pole."""
        xp, u, t = self._xp, self._u, self._e
        xp.copyto(u, elsewhere)
        xp.copyto(u, x, where=self._reflect)
        xp.rint(u, out=t)
        xp.subtract(u, t, out=u)

    def _positive_lgamma(self, z: Array, out: Array) -> None:
        """lgamma of z > 0 (NaN and +inf pass): Stirling at max(z, 10) into out, replaced where z < 10 by
        the series about 2 after the recurrence (t is the series' argument, computed exactly)."""
        xp, c, d, t, s, m = self._xp, self._c, self._d, self._e, self._s, self._mask
        xp.maximum(z, _LARGE, out=c)
        self._stirling(c, out)

        xp.minimum(z, _LARGE, out=c)
        xp.copyto(d, 1.0)  # the product of the factors the recurrence takes off: lgamma(w) = lgamma(w-1) + log(w-1)
        for _ in range(8):  # w < 10 reaches (1.5, 2.5] in 8 steps; w - 1 is exact
            xp.greater(c, 2.5, out=m)
            xp.subtract(c, 1.0, out=t)
            xp.copyto(c, t, where=m)
            xp.multiply(d, t, out=t)
            xp.copyto(d, t, where=m)
        xp.subtract(c, 2.0, out=t)  # t = w - 2 on [1.5, 2.5]; w - 1 on [0.5, 1.5); w below (all exact)
        xp.subtract(c, 1.0, out=s)
        xp.less(c, 1.5, out=m)
        xp.copyto(t, s, where=m)
        xp.less(c, 0.5, out=m)
        xp.copyto(t, c, where=m)
        horner(xp, t, _ABOUT_TWO, s)
        xp.multiply(s, t, out=s)
        xp.log(d, out=d)
        xp.add(s, d, out=s)
        # lgamma(w) = lgamma(w + 1) - log(w) below 1.5, and - log1p(w) once more below 0.5
        xp.log(c, out=d)
        xp.subtract(s, d, out=t)
        xp.less(c, 1.5, out=m)
        xp.copyto(s, t, where=m)
        xp.log1p(c, out=d)
        xp.subtract(s, d, out=t)
        xp.less(c, 0.5, out=m)
        xp.copyto(s, t, where=m)
        xp.less(z, _LARGE, out=m)
        xp.copyto(out, s, where=m)

    def _stirling(self, c: Array, out: Array) -> None:
        """(c - 1/2)(log c - 1) + (log(2 pi) - 1)/2 + r P(r*r), r = 1/c, for c >= 10; c is left as it was."""
        xp, d, t = self._xp, self._d, self._e
        xp.reciprocal(c, out=d)
        xp.square(d, out=t)
        horner(xp, t, _STIRLING, out)
        xp.multiply(out, d, out=out)
        xp.log(c, out=d)
        xp.subtract(d, 1.0, out=d)
        xp.subtract(c, 0.5, out=t)
        xp.multiply(d, t, out=d)
        xp.add(out, d, out=out)
        xp.add(out, (math.log(2 * math.pi) - 1) / 2, out=out)

    def _positive_digamma(self, z: Array, out: Array) -> None:
        """psi of z > 0 (NaN and +inf pass): psi(w) = psi(w + 1) - 1/w up to w >= 10, then the asymptotic
        series log w - 1/(2w) - r*r P(r*r)."""
        xp, c, d, t, s, m = self._xp, self._c, self._d, self._e, self._s, self._mask
        xp.copyto(c, z)
        xp.copyto(s, 0.0)
        for _ in range(10):  # z > 0 reaches 10 in 10 steps
            xp.less(c, _LARGE, out=m)
            xp.reciprocal(c, out=d)
            xp.add(s, d, out=d)
            xp.copyto(s, d, where=m)
            xp.add(c, 1.0, out=d)
            xp.copyto(c, d, where=m)
        xp.reciprocal(c, out=d)
        xp.square(d, out=t)
        horner(xp, t, _PSI_TAIL, out)
        xp.multiply(out, t, out=out)
        xp.multiply(d, 0.5, out=d)
        xp.add(out, d, out=out)
        xp.add(out, s, out=out)
        xp.log(c, out=d)
        xp.subtract(d, out, out=out)
