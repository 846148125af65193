"""Elementwise kernels: broadcasting binaries, floor_mod, comparisons, where, unary math, erf, erfc, lgamma and digamma, cast,
bias_add.

Most are a single ufunc call with `out=`, which numpy and cupy both make safe
when the memory planner gives the output the same memory as an input; the
multi-step ones read their inputs completely before writing the output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from .activation import relu_into
from .erf import ErrorFunction
from .gamma import Gamma
from .registry import Array, DataError, KernelFactory, Run, first_position, register
from .shapes import expect_shape, normalize_axes
from .workspace import scratch

_BINARY = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
    "maximum": "maximum",
    "minimum": "minimum",
    "pow": "power",
    "atan2": "arctan2",
    # Comparisons write int8 0/1: numpy casts the ufunc's bool result into the int8 out.
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "less",
    "less_equal": "less_equal",
    "greater": "greater",
    "greater_equal": "greater_equal",
}

_UNARY = {
    "neg": "negative",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "square": "square",
    "abs": "absolute",
    "tanh": "tanh",
    "sin": "sin",
    "cos": "cos",
    "floor": "floor",
    "ceil": "ceil",
    "round": "rint",  # halves to even, as OneFlow's round (nearbyint) and rint
    "sign": "sign",
    "log1p": "log1p",
    "expm1": "expm1",
    "tan": "tan",
    "asin": "arcsin",
    "acos": "arccos",
    "atan": "arctan",
    "sinh": "sinh",
    "cosh": "cosh",
    "asinh": "arcsinh",
    "acosh": "arccosh",
    "atanh": "arctanh",
}


def _ufunc_kernel(ufunc: str) -> KernelFactory:
    def build(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
        (y,) = outs
        if ufunc == "divide" and _integer(np.dtype(y.dtype)):
            return partial(_truncating_divide, xp, *ins, y)
        return partial(getattr(xp, ufunc), *ins, out=y)

    return build


def _check_divisor(xp: ModuleType, b: Array) -> None:
    """A zero integer divisor is a DataError before anything is written: C's `/` and `%` have no value
    for it (OneFlow's CPU kernel traps, torch raises), and numpy's silent 0 is no answer either."""
    zero = xp.equal(b, 0)
    if zero.any():
        _, position = first_position(xp, zero)
        raise DataError(f"integer division by zero: divisor 0 at position [{position}] of the divisor {tuple(b.shape)}")


def _truncating_divide(xp: ModuleType, a: Array, b: Array, out: Array) -> None:
    """Integer division rounding toward zero, as OneFlow's kernels divide (C's `/`), where numpy's // rounds
    down: -7 / 2 is -3. `out` is written last: it may be `a` or `b` (an in-place partner).

    A zero divisor is refused (`_check_divisor`): numpy's 0 with the correction below made -7 / 0 come out as 1.
    """
    _check_divisor(xp, b)
    quotient = xp.floor_divide(a, b)
    inexact = xp.not_equal(xp.multiply(quotient, b), a)
    inexact &= xp.less(a, 0) != xp.less(b, 0)
    xp.add(quotient, inexact, out=out, casting="unsafe")


def _integer(dtype: np.dtype) -> bool:
    """An integer output: division truncates, and division and floor_mod check their divisor for zeros
    (float ones give inf or NaN)."""
    return dtype.kind in "iu"


for _name, _ufunc in {**_BINARY, **_UNARY}.items():
    register(_name, checks_data=_integer if _name == "div" else False)(_ufunc_kernel(_ufunc))


@register("floor_mod", checks_data=_integer)  # an integer divisor of 0
def floor_mod(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """a mod b with b's sign, as OneFlow's floor_mod (and Python's %).

    Floats: C's fmod, exact, plus b where it is nonzero and its sign is not b's (a float b of 0
    gives NaN); never a - floor(a / b) * b, cupy's remainder, which loses 1e30 mod 7 entirely.
    Integers: the remainder numpy and cupy compute exactly, once a zero divisor is refused.
    `out` is written last: it may be `a` or `b`.
    """
    (a, b), (out,) = ins, outs
    if _integer(np.dtype(out.dtype)):
        return partial(_integer_floor_mod, xp, a, b, out)
    rest, moved = scratch(xp, out.shape, out.dtype), scratch(xp, out.shape, out.dtype)
    flip, nonzero = scratch(xp, out.shape, bool), scratch(xp, out.shape, bool)

    def run() -> None:
        xp.fmod(a, b, out=rest)
        xp.less(rest, 0, out=flip)
        xp.not_equal(flip, xp.less(b, 0), out=flip)
        xp.not_equal(rest, 0, out=nonzero)
        xp.logical_and(flip, nonzero, out=flip)
        xp.add(rest, b, out=moved)
        xp.copyto(rest, moved, where=flip)
        xp.copyto(out, rest)

    return run


def _integer_floor_mod(xp: ModuleType, a: Array, b: Array, out: Array) -> None:
    _check_divisor(xp, b)
    xp.remainder(a, b, out=out)


@register("rsqrt")
def rsqrt(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    (x,), (y,) = ins, outs

    def run() -> None:
        xp.sqrt(x, out=y)
        xp.reciprocal(y, out=y)

    return run


@register("where")
def where(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """out = x where condition is nonzero, else y, all three broadcast: two copies, the second masked.

    No arithmetic touches the branch not taken, so its inf or NaN stays out of the result.
    Not in place: out is filled from y before x is read.
    """
    (condition, x, y), (out,) = ins, outs
    chosen = scratch(xp, condition.shape, bool)

    def run() -> None:
        xp.not_equal(condition, 0, out=chosen)
        xp.copyto(out, y)
        xp.copyto(out, x, where=chosen)

    return run


@register("identity", "cast")
def cast(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """Copy into the out's dtype; float -> int truncates toward zero, as C and OneFlow do."""
    (x,), (y,) = ins, outs
    expect_shape("cast", "output", y.shape, x.shape)
    return partial(xp.copyto, y, x, casting="unsafe")


def _special_function_kernel(cls: type[ErrorFunction | Gamma], method: str) -> KernelFactory:
    """erf, erfc, lgamma or digamma: the method of that name of `cls`, with its scratch made at build time."""

    def build(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
        (x,), (y,) = ins, outs
        return partial(getattr(cls(xp, y.shape, y.dtype), method), x, y)

    return build


for _cls, _name in ((ErrorFunction, "erf"), (ErrorFunction, "erfc"), (Gamma, "lgamma"), (Gamma, "digamma")):
    register(_name)(_special_function_kernel(_cls, _name))


def bias_column(kernel: str, attrs: Mapping[str, Any], x: Array, bias: Array) -> Array:
    """`bias` shaped to broadcast along `axis` of x (default 1, the channel of NCHW and the feature of NC).

    Inserting size-1 axes into a 1-D array is always a view, so the column still reads the arena.
    """
    (axis,) = normalize_axes(attrs.get("axis", 1), x.ndim)
    expect_shape(kernel, "bias", bias.shape, (x.shape[axis],))
    return bias.reshape([-1 if i == axis else 1 for i in range(x.ndim)])


@register("bias_add")
def bias_add(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = x + bias along `axis`."""
    (x, bias), (y,) = ins, outs
    return partial(xp.add, x, bias_column("bias_add", attrs, x, bias), out=y)


@register("fake_quantization")
def fake_quantization(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = (clip(round(x / scale [+ zero_point])) [- zero_point]) * scale, halves away from zero as C's round:
    rint takes them to the even neighbour, so there the truncation moved one away from zero replaces it."""
    (x, scale, zero_point), (y,) = ins, outs
    bits, affine = int(attrs.get("quantization_bit", 8)), bool(attrs.get("affine", False))
    low, high = (0, 2**bits - 1) if affine else (1 - 2 ** (bits - 1), 2 ** (bits - 1) - 1)
    column = (-1, *(1,) * (x.ndim - 1)) if scale.size > 1 else (1,) * x.ndim
    s, z = scale.reshape(column), zero_point.reshape(column)
    away, part, half = scratch(xp, x.shape, x.dtype), scratch(xp, x.shape, x.dtype), scratch(xp, x.shape, bool)

    def run() -> None:
        xp.divide(x, s, out=y)
        if affine:
            xp.add(y, z, out=y)
        xp.trunc(y, out=away)
        xp.abs(xp.subtract(y, away, out=part), out=part)
        xp.equal(part, 0.5, out=half)
        xp.add(away, xp.sign(y, out=part), out=away)
        xp.rint(y, out=y)
        xp.copyto(y, away, where=half)
        xp.clip(y, low, high, out=y)
        if affine:
            xp.subtract(y, z, out=y)
        xp.multiply(y, s, out=y)

    return run


@register("bias_add_relu")
def bias_add_relu(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """y = relu(x + bias along `axis`): bias_add then relu, fused by the fuse-elementwise pass.

    The relu runs in place on y (`relu_into`).
    """
    (x, bias), (y,) = ins, outs
    column = bias_column("bias_add_relu", attrs, x, bias)
    relu = relu_into(xp, y, y)

    def run() -> None:
        xp.add(x, column, out=y)
        relu()

    return run
