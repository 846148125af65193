"""flow.math: elementwise arithmetic, activations and reductions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from irflow.dialects import job
from irflow.frontend.blob import Blob
from irflow.frontend.ops import operands
from irflow.frontend.locations import fail
from irflow.frontend.tracing import build, published


def _binary(op: type[job.JobOp], what: str) -> Any:
    def apply(x: Any, y: Any, name: str | None = None) -> Blob:
        a, b = operands(x, y, what)
        return build(op, [a, b], None, name, what)

    return published(
        apply, what, f"{what}(x, y): {op.__doc__}; numpy broadcasting, Python numbers take the Blob's dtype."
    )


def _unary(op: type[job.JobOp], what: str) -> Any:
    def apply(x: Blob, name: str | None = None) -> Blob:
        return build(op, [x], None, name, what)

    return published(apply, what, f"{what}(x): {op.__doc__}, elementwise.")


add = _binary(job.AddOp, "flow.math.add")
subtract = _binary(job.SubOp, "flow.math.subtract")
multiply = _binary(job.MulOp, "flow.math.multiply")
divide = _binary(job.DivOp, "flow.math.divide")
maximum = _binary(job.MaximumOp, "flow.math.maximum")
minimum = _binary(job.MinimumOp, "flow.math.minimum")
pow = _binary(job.PowOp, "flow.math.pow")  # noqa: A001
equal = _binary(job.EqualOp, "flow.math.equal")
not_equal = _binary(job.NotEqualOp, "flow.math.not_equal")
less = _binary(job.LessOp, "flow.math.less")
less_equal = _binary(job.LessEqualOp, "flow.math.less_equal")
greater = _binary(job.GreaterOp, "flow.math.greater")
greater_equal = _binary(job.GreaterEqualOp, "flow.math.greater_equal")

negative = _unary(job.NegOp, "flow.math.negative")
exp = _unary(job.ExpOp, "flow.math.exp")
log = _unary(job.LogOp, "flow.math.log")
sqrt = _unary(job.SqrtOp, "flow.math.sqrt")
rsqrt = _unary(job.RsqrtOp, "flow.math.rsqrt")
square = _unary(job.SquareOp, "flow.math.square")
relu = _unary(job.ReluOp, "flow.math.relu")
sigmoid = _unary(job.SigmoidOp, "flow.math.sigmoid")
tanh = _unary(job.TanhOp, "flow.math.tanh")
gelu = _unary(job.GeluOp, "flow.math.gelu")
abs = _unary(job.AbsOp, "flow.math.abs")  # noqa: A001


def reciprocal(x: Blob, name: str | None = None) -> Blob:
    return divide(1.0, x, name)


def add_n(inputs: Sequence[Blob], name: str | None = None) -> Blob:
    if not inputs:
        fail("flow.math.add_n needs at least one Blob")
    out = inputs[0]
    for x in inputs[1:]:
        out = add(out, x)
    return out


def _axes(x: Blob, axis: int | Sequence[int] | None, what: str) -> list[int] | None:
    """OneFlow's reduction axes: None reduces every axis, [] none at all."""
    if axis is None:
        return list(range(x.ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    for a in axes:
        if not isinstance(a, int) or not -x.ndim <= a < max(x.ndim, 1):
            fail(f"{what}: axis {a!r} is out of range for a Blob of shape {x.shape}")
    return [a % max(x.ndim, 1) for a in axes]


def _reduce(op: type[job.JobOp], what: str) -> Any:
    def apply(
        input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
    ) -> Blob:
        axes = _axes(input_tensor, axis, what)
        if not axes:
            return input_tensor
        return build(op, [input_tensor], None, name, what, axes=sorted(set(axes)), keepdims=bool(keepdims))

    return published(apply, what, f"{what}(input_tensor, axis=None, keepdims=False): axis None reduces all axes.")


reduce_sum = _reduce(job.ReduceSumOp, "flow.math.reduce_sum")
reduce_mean = _reduce(job.ReduceMeanOp, "flow.math.reduce_mean")
reduce_max = _reduce(job.ReduceMaxOp, "flow.math.reduce_max")


def reduce_min(
    input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """min as -max(-x): the job dialect has one max reduction."""
    return negative(reduce_max(negative(input_tensor), axis, keepdims), name)


def argmax(input: Blob, axis: int = -1, name: str | None = None) -> Blob:  # noqa: A002
    """Index of the largest value along `axis` (int64; OneFlow returns int32)."""
    return build(job.ArgmaxOp, [input], None, name, "flow.math.argmax", axis=int(axis))


def _install_operators() -> None:
    """Python's operators on Blobs are these functions; comparisons give int8 Blobs of 0/1, as OneFlow's."""
    binary = {"add": add, "sub": subtract, "mul": multiply, "truediv": divide, "pow": pow}
    for dunder, function in binary.items():
        setattr(Blob, f"__{dunder}__", lambda self, other, f=function: f(self, other))
        setattr(Blob, f"__r{dunder}__", lambda self, other, f=function: f(other, self))
    comparisons = {"eq": equal, "ne": not_equal, "lt": less, "le": less_equal, "gt": greater, "ge": greater_equal}
    for dunder, function in comparisons.items():
        setattr(Blob, f"__{dunder}__", lambda self, other, f=function: f(self, other))
    Blob.__neg__ = lambda self: negative(self)  # type: ignore[method-assign]
    Blob.__pos__ = lambda self: self  # type: ignore[method-assign]
    Blob.__abs__ = lambda self: abs(self)  # type: ignore[method-assign]


_install_operators()
