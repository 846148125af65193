"""Reverse-mode gradient rules of the job dialect, one per op class.

The table mirrors TensorFlow's `RegisterGradient` / OneFlow's
`REGISTER_USER_OP_GRAD`: a rule receives the forward op and the gradient of
its result, and returns one gradient per operand (None where none is wanted or
none flows).  Rules only build ordinary job ops, through a `GradientBuilder`
that inserts them at the autodiff pass's insertion point and stamps each with
the forward op's location.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from irflow.dialects import job
from irflow.dialects.bounds import dynamic_axes
from irflow.dialects.job import FLOAT_TYPES, dtype_of, flag, integer, ints, shape_of, tensor
from irflow.passes.op_tables import registrar

Needs = tuple[bool, ...]
Grads = Sequence[SSAValue | None]
Rule = Callable[["GradientBuilder", Operation, SSAValue, Needs], Grads]

GRADIENTS: dict[type[Operation], Rule] = {}
"""Op class -> its gradient rule."""

NO_GRADIENT: frozenset[type[Operation]] = frozenset(
    {
        job.VariableOp,  # a leaf: its gradient is collected, not propagated
        job.DiffOp,  # reads a gradient; autodiff replaces it
        job.ConstantOp,
        job.FillOp,
        job.DropoutMaskOp,
        job.RandomUniformOp,
        job.RandomPermutationOp,
        job.OFRecordDecodeOp,  # data from the host (lift-host-inputs makes it an argument)
        job.BernoulliOp,  # samples: piecewise constant in p
        job.ArgmaxOp,
        job.TopKOp,
        job.ArgSortOp,
        job.CtcGreedyDecodeOp,
        job.SizeOfOp,  # counts elements: piecewise constant
        job.GenTensorBufferOp,
        job.EqualOp,
        job.NotEqualOp,
        job.LessOp,
        job.LessEqualOp,
        job.GreaterOp,
        job.GreaterEqualOp,
        job.LearningRateOp,
        job.FloorOp,  # piecewise constant: OneFlow's and PyTorch's gradient is 0
        job.CeilOp,
        job.RoundOp,
        job.SignOp,
    }
)
"""Ops whose results carry no gradient: sources, integer-valued and piecewise-constant ops."""


def is_float(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and dtype_of(value.type) in FLOAT_TYPES


gradient = registrar(GRADIENTS, "gradient rules")
"""`@gradient(job.AddOp, ...)` registers a rule as the gradient of each class."""


class GradientBuilder:
    """Builds backward ops before one insertion point, located at the op being differentiated."""

    def __init__(self, point: InsertPoint):
        self.point = point
        self.location: Attribute | None = None
        self.placement: Attribute | None = None

    def at(self, op: Operation) -> None:
        """Build the next ops for `op`: at its user's line and on its devices."""
        self.location = op.location
        self.placement = op.properties.get("placement")

    def place(self, op: Operation) -> None:
        """Give a built op the current location and placement, and insert it."""
        if self.location is not None:
            op.location = self.location
        if self.placement is not None:
            op.properties["placement"] = self.placement
        Rewriter.insert_op(op, self.point)

    def emit(self, cls: type[job.JobOp], operands: Sequence[SSAValue], result_type: Attribute | None = None,
             **props: object) -> SSAValue:
        op = cls.make(operands, result_type, **props)
        self.place(op)
        return op.results[0]

    # ---------------------------------------------------------------- helpers

    def fill(self, value: float, type: Attribute) -> SSAValue:
        return self.emit(job.FillOp, [], type, value=float(value))

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A rank-0 fill of `like`'s element type; binary ops broadcast it."""
        return self.fill(value, tensor((), dtype_of(like.type)))

    def scale(self, g: SSAValue, factor: float) -> SSAValue:
        return self.emit(job.MulOp, [g, self.scalar(factor, g)])

    def mask(self, compare: type[job.JobOp], a: SSAValue, b: SSAValue, like: SSAValue) -> SSAValue:
        """`compare(a, b)` as 0/1 of `like`'s element type (the broadcast shape of a and b)."""
        bits = self.emit(compare, [a, b])
        return self.emit(job.CastOp, [bits], tensor(shape_of(bits.type), dtype_of(like.type)))

    def unbroadcast(self, g: SSAValue, target: Attribute) -> SSAValue:
        """Sum `g` over the axes numpy broadcasting added to reach `target`'s shape."""
        out, want = shape_of(g.type), shape_of(target)
        if out == want:
            return g
        lead = len(out) - len(want)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(want) if d == 1 and out[lead + i] != 1]
        if axes:
            g = self.emit(job.ReduceSumOp, [g], axes=axes, keepdims=False)
        if shape_of(g.type) != want:
            g = self.emit(job.ReshapeOp, [g], target)
        return g

    def expand(self, g: SSAValue, axes: Sequence[int], keepdims: bool, like: SSAValue) -> SSAValue:
        """Broadcast a reduction's gradient back over the reduced axes of `like` (the reduction's input)."""
        shape = shape_of(like.type)
        norm = sorted({a % len(shape) for a in axes}) if shape else []
        if dynamic_axes(like.type):  # to the actual sizes, which only the run knows
            # the reduced axes go back as size 1 in the op (a reshape keeps no dynamic axis but 0)
            return self.emit(job.BroadcastLikeOp, [g, like], axes=None if keepdims or not norm else norm)
        if not keepdims:
            kept = tuple(1 if i in norm else d for i, d in enumerate(shape))
            g = self.emit(job.ReshapeOp, [g], tensor(kept, dtype_of(g.type)))
        if shape_of(g.type) != shape:
            g = self.emit(job.BroadcastToOp, [g], like.type)
        return g

    def count(self, x: SSAValue, axes: Sequence[int], like: SSAValue) -> SSAValue:
        """The number of elements of `x` over `axes`, at run time, as a rank-0 tensor of `like`'s element type."""
        return self.emit(job.SizeOfOp, [x], tensor((), dtype_of(like.type)), axes=list(axes))

    def mean_seed(self, loss: SSAValue) -> SSAValue:
        """d mean(loss) / d loss: 1/numel everywhere (numel counted at run time when the loss is dynamic; a loss
        with no elements takes its seed nowhere, so a count of 0 divides as 1, without numpy's warning)."""
        if not dynamic_axes(loss.type):
            return self.fill(1.0 / math.prod(shape_of(loss.type)), loss.type)
        count = self.count(loss, range(len(shape_of(loss.type))), loss)
        one = self.scalar(1.0, loss)
        share = self.emit(job.DivOp, [one, self.emit(job.MaximumOp, [count, one])])
        return self.emit(job.BroadcastLikeOp, [share, loss])


def _props(op: Operation, *names: str) -> dict[str, Attribute]:
    return {n: op.properties[n] for n in names if n in op.properties}


def _operands(op: Operation) -> tuple[SSAValue, ...]:
    return tuple(op.operands)


def _result(op: Operation) -> SSAValue:
    return op.results[0]


# ----------------------------------------------------------------- elementwise unary


@gradient(job.NegOp)
def _neg(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.NegOp, [dy])]


@gradient(job.ExpOp)
def _exp(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.MulOp, [dy, _result(op)])]


@gradient(job.LogOp)
def _log(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.DivOp, [dy, op.operands[0]])]


@gradient(job.SqrtOp)
def _sqrt(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # d sqrt(x) = 0.5 / y
    return [b.emit(job.DivOp, [b.scale(dy, 0.5), _result(op)])]


@gradient(job.RsqrtOp)
def _rsqrt(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # d x**-0.5 = -0.5 * y**3
    y = _result(op)
    cube = b.emit(job.MulOp, [b.emit(job.SquareOp, [y]), y])
    return [b.scale(b.emit(job.MulOp, [dy, cube]), -0.5)]


@gradient(job.SquareOp)
def _square(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.scale(b.emit(job.MulOp, [dy, op.operands[0]]), 2.0)]


@gradient(job.AbsOp)
def _abs(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x = op.operands[0]
    zero = b.scalar(0.0, x)
    sign = b.emit(job.SubOp, [b.mask(job.GreaterOp, x, zero, x), b.mask(job.LessOp, x, zero, x)])
    return [b.emit(job.MulOp, [dy, sign])]


@gradient(job.SinOp)
def _sin(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.MulOp, [dy, b.emit(job.CosOp, [op.operands[0]])])]


@gradient(job.CosOp)
def _cos(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.NegOp, [b.emit(job.MulOp, [dy, b.emit(job.SinOp, [op.operands[0]])])])]


@gradient(job.Log1pOp)
def _log1p(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x = op.operands[0]
    return [b.emit(job.DivOp, [dy, b.emit(job.AddOp, [x, b.scalar(1.0, x)])])]


@gradient(job.Expm1Op)
def _expm1(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # e**x, not y + 1 (PyTorch's): y + 1 keeps no digit of e**x where y rounds to -1
    return [b.emit(job.MulOp, [dy, b.emit(job.ExpOp, [op.operands[0]])])]


def _gaussian(factor: float) -> Rule:
    """erf and erfc: the derivative is factor * e**(-x*x), factor = 2/sqrt(pi) or its negative."""

    def rule(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
        x = op.operands[0]
        density = b.emit(job.ExpOp, [b.emit(job.NegOp, [b.emit(job.SquareOp, [x])])])
        return [b.scale(b.emit(job.MulOp, [dy, density]), factor)]

    return rule


gradient(job.ErfOp)(_gaussian(2.0 / math.sqrt(math.pi)))
gradient(job.ErfcOp)(_gaussian(-2.0 / math.sqrt(math.pi)))


@gradient(job.LgammaOp)
def _lgamma(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # digamma, as PyTorch's; OneFlow 0.x's lgamma kernel has no backward (an assert where digamma would be)
    return [b.emit(job.MulOp, [dy, b.emit(job.DigammaOp, [op.operands[0]])])]


@gradient(job.TanOp)
def _tan(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # 1 + y*y, PyTorch's form: OneFlow's 1 / cos(x)**2 recomputes the cosine
    y = _result(op)
    return [b.emit(job.MulOp, [dy, b.emit(job.AddOp, [b.emit(job.SquareOp, [y]), b.scalar(1.0, y)])])]


@gradient(job.SinhOp)
def _sinh(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.MulOp, [dy, b.emit(job.CoshOp, [op.operands[0]])])]


@gradient(job.CoshOp)
def _cosh(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.MulOp, [dy, b.emit(job.SinhOp, [op.operands[0]])])]


def _unit_gap(b: GradientBuilder, x: SSAValue, above: bool) -> SSAValue:
    """(1 - x)(1 + x), or (x - 1)(x + 1) when `above`: exact near |x| = 1, where 1 - x*x loses the
    digits x*x rounded away (asin's gradient at 1 - 1e-8 in float64)."""
    one = b.scalar(1.0, x)
    gap = b.emit(job.SubOp, [x, one] if above else [one, x])
    return b.emit(job.MulOp, [gap, b.emit(job.AddOp, [x, one])])


def _inverse_root(above: bool, negate: bool) -> Rule:
    """asin: 1 / sqrt(1 - x*x); acos: its negative; acosh (`above`): 1 / sqrt(x*x - 1)."""

    def rule(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
        g = b.emit(job.MulOp, [dy, b.emit(job.RsqrtOp, [_unit_gap(b, op.operands[0], above)])])
        return [b.emit(job.NegOp, [g]) if negate else g]

    return rule


gradient(job.AsinOp)(_inverse_root(above=False, negate=False))
gradient(job.AcosOp)(_inverse_root(above=False, negate=True))
gradient(job.AcoshOp)(_inverse_root(above=True, negate=False))


@gradient(job.AsinhOp)
def _asinh(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x = op.operands[0]
    root = b.emit(job.RsqrtOp, [b.emit(job.AddOp, [b.emit(job.SquareOp, [x]), b.scalar(1.0, x)])])
    return [b.emit(job.MulOp, [dy, root])]


@gradient(job.AtanOp)
def _atan(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x = op.operands[0]
    return [b.emit(job.DivOp, [dy, b.emit(job.AddOp, [b.emit(job.SquareOp, [x]), b.scalar(1.0, x)])])]


@gradient(job.AtanhOp)
def _atanh(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.DivOp, [dy, _unit_gap(b, op.operands[0], above=False)])]


def _activation(grad_op: type[job.JobOp], saves_input: bool) -> Rule:
    """relu/sigmoid/tanh keep their output for the backward op; gelu keeps its input."""

    def rule(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
        return [b.emit(grad_op, [dy, op.operands[0] if saves_input else _result(op)])]

    return rule


gradient(job.ReluOp)(_activation(job.ReluGradOp, saves_input=False))
gradient(job.SigmoidOp)(_activation(job.SigmoidGradOp, saves_input=False))
gradient(job.TanhOp)(_activation(job.TanhGradOp, saves_input=False))
gradient(job.GeluOp)(_activation(job.GeluGradOp, saves_input=True))


@gradient(job.CastOp)
def _cast(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.CastOp, [dy], op.operands[0].type)]


# ----------------------------------------------------------------- elementwise binary


@gradient(job.AddOp)
def _add(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, y = _operands(op)
    return [b.unbroadcast(dy, x.type) if needs[0] else None, b.unbroadcast(dy, y.type) if needs[1] else None]


@gradient(job.SubOp)
def _sub(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, y = _operands(op)
    return [
        b.unbroadcast(dy, x.type) if needs[0] else None,
        b.emit(job.NegOp, [b.unbroadcast(dy, y.type)]) if needs[1] else None,
    ]


@gradient(job.MulOp)
def _mul(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, y = _operands(op)
    return [
        b.unbroadcast(b.emit(job.MulOp, [dy, y]), x.type) if needs[0] else None,
        b.unbroadcast(b.emit(job.MulOp, [dy, x]), y.type) if needs[1] else None,
    ]


@gradient(job.DivOp)
def _div(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # z = x / y: dx = dy / y, dy_ = -dy * z / y
    x, y = _operands(op)
    dx = b.unbroadcast(b.emit(job.DivOp, [dy, y]), x.type) if needs[0] else None
    dyy = None
    if needs[1]:
        t = b.emit(job.DivOp, [b.emit(job.MulOp, [dy, _result(op)]), y])
        dyy = b.emit(job.NegOp, [b.unbroadcast(t, y.type)])
    return [dx, dyy]


def _select(first: type[job.JobOp], second: type[job.JobOp]) -> Rule:
    """maximum/minimum: the gradient goes to the operand that won (ties to the first, as OneFlow)."""

    def rule(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
        x, y = _operands(op)
        grads: list[SSAValue | None] = [None, None]
        for i, (cmp, target) in enumerate(((first, x), (second, y))):
            if needs[i]:
                picked = b.emit(job.MulOp, [dy, b.mask(cmp, x, y, dy)])
                grads[i] = b.unbroadcast(picked, target.type)
        return grads

    return rule


gradient(job.MaximumOp)(_select(job.GreaterEqualOp, job.LessOp))
gradient(job.MinimumOp)(_select(job.LessEqualOp, job.GreaterOp))


@gradient(job.WhereOp)
def _where(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # Selects again, never dy * mask: dy reaches x where the condition held and y elsewhere.
    condition, x, y = _operands(op)
    zero = b.scalar(0.0, dy)
    return [
        None,
        b.unbroadcast(b.emit(job.WhereOp, [condition, dy, zero]), x.type) if needs[1] else None,
        b.unbroadcast(b.emit(job.WhereOp, [condition, zero, dy]), y.type) if needs[2] else None,
    ]


@gradient(job.PowOp)
def _pow(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # z = x ** y: dx = dy * y * x ** (y - 1), dy_ = dy * z * log(x)
    x, y = _operands(op)
    dx = dyy = None
    if needs[0]:
        lowered = b.emit(job.PowOp, [x, b.emit(job.SubOp, [y, b.scalar(1.0, y)])])
        dx = b.unbroadcast(b.emit(job.MulOp, [b.emit(job.MulOp, [dy, y]), lowered]), x.type)
    if needs[1]:
        t = b.emit(job.MulOp, [b.emit(job.MulOp, [dy, _result(op)]), b.emit(job.LogOp, [x])])
        dyy = b.unbroadcast(t, y.type)
    return [dx, dyy]


@gradient(job.FloorModOp)
def _floor_mod(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # z = x - floor(x / y) * y: dx = dy, dy_ = -dy * floor(x / y), as PyTorch's remainder
    # (OneFlow's passes none to y)
    x, y = _operands(op)
    dx = b.unbroadcast(dy, x.type) if needs[0] else None
    dyy = None
    if needs[1]:
        quotient = b.emit(job.FloorOp, [b.emit(job.DivOp, [x, y])])
        dyy = b.emit(job.NegOp, [b.unbroadcast(b.emit(job.MulOp, [dy, quotient]), y.type)])
    return [dx, dyy]


@gradient(job.Atan2Op)
def _atan2(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # z = atan2(x, y): dx = dy * y / (x*x + y*y), dy_ = -dy * x / (x*x + y*y)
    x, y = _operands(op)
    share = b.emit(job.DivOp, [dy, b.emit(job.AddOp, [b.emit(job.SquareOp, [x]), b.emit(job.SquareOp, [y])])])
    dx = b.unbroadcast(b.emit(job.MulOp, [share, y]), x.type) if needs[0] else None
    dyy = b.emit(job.NegOp, [b.unbroadcast(b.emit(job.MulOp, [share, x]), y.type)]) if needs[1] else None
    return [dx, dyy]


@gradient(job.BiasAddOp)
def _bias_add(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, bias = _operands(op)
    rank = len(shape_of(x.type))
    axis = integer(op.properties, "axis", 1) % rank
    dbias = None
    if needs[1]:
        axes = [i for i in range(rank) if i != axis]
        dbias = b.emit(job.ReduceSumOp, [dy], axes=axes, keepdims=False) if axes else dy
    return [dy if needs[0] else None, dbias]


@gradient(job.CtcLossOp)
def _ctc_loss(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    """log_probs' only: the integer targets and lengths take none."""
    if not needs[0]:
        return [None] * 4
    return [b.emit(job.CtcLossGradOp, [dy, *op.operands], op.operands[0].type, **_props(op, "blank", "zero_infinity")),
            None, None, None]  # fmt: skip


@gradient(job.FakeQuantizationOp)
def _fake_quantization(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    """The straight-through estimator, as OneFlow's: dy to x as it is; scale and zero_point get none."""
    return [dy if needs[0] else None, None, None]


# ----------------------------------------------------------------- shape ops


@gradient(job.ReshapeOp)
def _reshape(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.ReshapeOp, [dy], op.operands[0].type)]


@gradient(job.TransposeOp)
def _transpose(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    perm = ints(op.properties, "perm")
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return [b.emit(job.TransposeOp, [dy], perm=inverse)]


@gradient(job.BroadcastToOp)
def _broadcast_to(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.unbroadcast(dy, op.operands[0].type)]


@gradient(job.BroadcastLikeOp)
def _broadcast_like(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    inserted = ints(op.properties, "axes")
    if inserted:  # the axes x lacked: summed away first, then numpy's broadcasting undone
        dy = b.emit(job.ReduceSumOp, [dy], axes=list(inserted), keepdims=False)
    return [b.unbroadcast(dy, op.operands[0].type), None]


@gradient(job.PinSizeOp)
def _pin_size(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # The pin checked that the actual sizes are the bound: its gradient is dy at the operand's sizes.
    return [b.emit(job.UnpinSizeOp, [dy, op.operands[0]], **_props(op, "axes"))]


@gradient(job.UnpinSizeOp)
def _unpin_size(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.PinSizeOp, [dy], **_props(op, "axes")), None]


@gradient(job.ConcatOp)
def _concat(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    """Each input's slice of dy; where the axis is dynamic, dy's part at the inputs' actual sizes."""
    out = shape_of(dy.type)
    axis = integer(op.properties, "axis") % len(out)
    if axis in dynamic_axes(dy.type):
        return [b.emit(job.ConcatGradOp, [dy, *op.operands], axis=axis, index=k) if wanted else None
                for k, wanted in enumerate(needs)]  # fmt: skip
    grads: list[SSAValue | None] = []
    offset = 0
    for x, wanted in zip(op.operands, needs):
        size = shape_of(x.type)[axis]
        if wanted:
            start = [offset if i == axis else 0 for i in range(len(out))]
            stop = [offset + size if i == axis else d for i, d in enumerate(out)]
            grads.append(b.emit(job.SliceOp, [dy], start=start, stop=stop, step=[1] * len(out)))
        else:
            grads.append(None)
        offset += size
    return grads


_SLICE = ("start", "stop", "step")


@gradient(job.SliceOp)
def _slice(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x = op.operands[0]
    cut = {a for _, (_, a), _ in job.SliceOp.sliced_axes([x.type], op.properties)} & set(dynamic_axes(x.type))
    like = [x] if cut else []  # where the slice cut a dynamic axis, x's actual sizes place dy
    return [b.emit(job.SliceGradOp, [dy, *like], x.type, **_props(op, *_SLICE))]


@gradient(job.SliceGradOp)
def _slice_grad(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # slice_grad is the adjoint of slice, so slice is the adjoint of slice_grad; `like` gives sizes only.
    return [b.emit(job.SliceOp, [dy], **_props(op, *_SLICE)), *[None] * (len(op.operands) - 1)]


@gradient(job.GatherOp)
def _gather(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    params, indices = _operands(op)
    like = [params] if dynamic_axes(params.type) else []  # its actual sizes shape the gradient
    return [b.emit(job.GatherGradOp, [dy, indices, *like], params.type, **_props(op, "axis", "batch_dims")), None]


@gradient(job.GatherGradOp)
def _gather_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # gather_grad is the adjoint of gather (for fixed indices), so gather is the adjoint of gather_grad.
    return [b.emit(job.GatherOp, [g, op.operands[1]], **_props(op, "axis", "batch_dims")), *[None] * (len(op.operands) - 1)]


@gradient(job.DimGatherOp)
def _dim_gather(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, index = _operands(op)
    like = [x] if dynamic_axes(x.type) else []  # its actual sizes shape the gradient
    return [b.emit(job.DimGatherGradOp, [dy, index, *like], x.type, **_props(op, "dim")), None]


@gradient(job.DimGatherGradOp)
def _dim_gather_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # as for gather: each is the other's adjoint for fixed indices
    return [b.emit(job.DimGatherOp, [g, op.operands[1]], **_props(op, "dim")), *[None] * (len(op.operands) - 1)]


@gradient(job.GatherNdOp)
def _gather_nd(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    params, indices = _operands(op)
    return [b.emit(job.ScatterNdOp, [dy, indices], params.type), None]


@gradient(job.ScatterNdOp)
def _scatter_nd(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.GatherNdOp, [g, op.operands[1]]), None]


@gradient(job.TensorScatterNdAddOp, job.TensorScatterNdUpdateOp)
def _tensor_scatter_nd(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    """OneFlow's rules: the updates get gather_nd of dy (every repeat all of it, since update adds repeats up);
    params get dy, where update wrote with dy's slices there zeroed (update of dy with zeros)."""
    params, indices, updates = _operands(op)
    dparams: SSAValue | None = dy
    if needs[0] and isinstance(op, job.TensorScatterNdUpdateOp):
        zeros = b.emit(job.BroadcastLikeOp, [b.scalar(0.0, updates), updates]) if dynamic_axes(updates.type) else (
            b.fill(0.0, updates.type))  # fmt: skip
        dparams = b.emit(job.TensorScatterNdUpdateOp, [dy, indices, zeros])
    dupdates = b.emit(job.GatherNdOp, [dy, indices]) if needs[2] else None
    return [dparams if needs[0] else None, None, dupdates]


# ----------------------------------------------------------------- linear algebra and reductions


@gradient(job.MatmulOp)
def _matmul(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, y = _operands(op)
    ta, tb = flag(op.properties, "transpose_a"), flag(op.properties, "transpose_b")
    # (lhs, rhs, transpose_a, transpose_b) of each gradient, for C = op(A) op(B).
    if not ta and not tb:
        da, db = (dy, y, False, True), (x, dy, True, False)
    elif ta and not tb:
        da, db = (y, dy, False, True), (x, dy, False, False)
    elif not ta and tb:
        da, db = (dy, y, False, False), (dy, x, True, False)
    else:
        da, db = (y, dy, True, True), (dy, x, True, True)
    grads: list[SSAValue | None] = []
    for (lhs, rhs, t_a, t_b), wanted in zip((da, db), needs):
        grads.append(b.emit(job.MatmulOp, [lhs, rhs], transpose_a=t_a, transpose_b=t_b) if wanted else None)
    return grads


def _reduction_axes(op: Operation) -> tuple[list[int], bool]:
    rank = len(shape_of(op.operands[0].type))
    return [a % rank for a in ints(op.properties, "axes")], flag(op.properties, "keepdims")


@gradient(job.ReduceSumOp)
def _reduce_sum(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    axes, keepdims = _reduction_axes(op)
    return [b.expand(dy, axes, keepdims, op.operands[0])]


@gradient(job.ReduceMeanOp)
def _reduce_mean(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    axes, keepdims = _reduction_axes(op)
    x = op.operands[0]
    if set(axes) & set(dynamic_axes(x.type)):  # the mean divides by the actual count
        return [b.expand(b.emit(job.DivOp, [dy, b.count(x, axes, dy)]), axes, keepdims, x)]
    count = math.prod(shape_of(x.type)[a] for a in set(axes))
    return [b.expand(b.scale(dy, 1.0 / count), axes, keepdims, x)]


@gradient(job.ReduceMaxOp, job.ReduceMinOp)
def _reduce_extremum(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    """dy shared among the entries equal to the max (min): reduce_max_grad (reduce_min_grad)."""
    grad = job.ReduceMaxGradOp if isinstance(op, job.ReduceMaxOp) else job.ReduceMinGradOp
    return [b.emit(grad, [dy, op.operands[0], _result(op)], **_props(op, "axes", "keepdims"))]


@gradient(job.ReduceProdOp)
def _reduce_prod(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.ReduceProdGradOp, [dy, op.operands[0]], **_props(op, "axes", "keepdims"))]


# ----------------------------------------------------------------- nn


@gradient(job.SoftmaxOp)
def _softmax(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.SoftmaxGradOp, [dy, _result(op)], **_props(op, "axis"))]


@gradient(job.LogSoftmaxOp)
def _log_softmax(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.LogSoftmaxGradOp, [dy, _result(op)], **_props(op, "axis"))]


@gradient(job.SparseSoftmaxCrossEntropyOp)
def _sparse_ce(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    logits, labels = _operands(op)
    return [b.emit(job.SparseSoftmaxCrossEntropyGradOp, [dy, logits, labels]), None]


@gradient(job.SoftmaxCrossEntropyOp)
def _ce(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    logits, labels = _operands(op)
    dlogits = b.emit(job.SoftmaxCrossEntropyGradOp, [dy, logits, labels]) if needs[0] else None
    dlabels = None
    if needs[1]:
        # loss[n] = -sum_c labels[n, c] * log_softmax(logits)[n, c]
        n = shape_of(logits.type)[0]
        column = b.emit(job.ReshapeOp, [dy], tensor((n, 1), dtype_of(dy.type)))
        log_probs = b.emit(job.LogSoftmaxOp, [logits], axis=1)
        dlabels = b.emit(job.NegOp, [b.emit(job.MulOp, [log_probs, column])])
    return [dlogits, dlabels]


_CONV = ("strides", "pads", "dilations", "groups")
_POOL = ("kernel", "strides", "pads")


@gradient(job.Conv2DOp)
def _conv2d(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    x, w = _operands(op)
    props = _props(op, *_CONV)
    return [
        b.emit(job.Conv2DGradInputOp, [dy, w], x.type, **props) if needs[0] else None,
        b.emit(job.Conv2DGradFilterOp, [dy, x], w.type, **props) if needs[1] else None,
    ]


@gradient(job.Conv2DGradInputOp)
def _conv2d_grad_input(b: GradientBuilder, op: Operation, dg: SSAValue, needs: Needs) -> Grads:
    # conv2d_grad_input(dy, w) = C(w)^T dy is bilinear: <G, C(w)^T dy> = <conv2d(G, w), dy>.
    dy, w = _operands(op)
    props = _props(op, *_CONV)
    return [
        b.emit(job.Conv2DOp, [dg, w], **props) if needs[0] else None,
        b.emit(job.Conv2DGradFilterOp, [dy, dg], w.type, **props) if needs[1] else None,
    ]


@gradient(job.Conv2DGradFilterOp)
def _conv2d_grad_filter(b: GradientBuilder, op: Operation, dg: SSAValue, needs: Needs) -> Grads:
    # <G, conv2d_grad_filter(dy, x)> = <dy, conv2d(x, G)>.
    dy, x = _operands(op)
    props = _props(op, *_CONV)
    return [
        b.emit(job.Conv2DOp, [x, dg], **props) if needs[0] else None,
        b.emit(job.Conv2DGradInputOp, [dy, dg], x.type, **props) if needs[1] else None,
    ]


@gradient(job.MaxPool2DOp)
def _max_pool2d(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.MaxPool2DGradOp, [dy, op.operands[0], _result(op)], **_props(op, *_POOL))]


@gradient(job.AvgPool2DOp)
def _avg_pool2d(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    return [b.emit(job.AvgPool2DGradOp, [dy], op.operands[0].type, **_props(op, *_POOL))]


@gradient(job.AvgPool2DGradOp)
def _avg_pool2d_grad(b: GradientBuilder, op: Operation, dg: SSAValue, needs: Needs) -> Grads:
    # avg_pool2d_grad is the adjoint of avg_pool2d (a fixed linear map).
    return [b.emit(job.AvgPool2DOp, [dg], **_props(op, *_POOL))]


# ----------------------------------------------------------------- second order: gradients of backward ops
# Each backward op is linear in its incoming gradient, so its gradient with respect to
# that operand is the same backward op (or its adjoint) applied to the new gradient.


def _keep_sum(b: GradientBuilder, x: SSAValue, axis: int) -> SSAValue:
    return b.emit(job.ReduceSumOp, [x], axes=[axis], keepdims=True)


def _axis_of(op: Operation) -> int:
    return integer(op.properties, "axis", -1) % len(shape_of(op.operands[0].type))


@gradient(job.ReluGradOp)
def _relu_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # dy * (y > 0): piecewise constant in y
    return [b.emit(job.ReluGradOp, [g, op.operands[1]]) if needs[0] else None, None]


@gradient(job.SigmoidGradOp)
def _sigmoid_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # dy * y * (1 - y): d/dy = dy * (1 - 2y)
    dy, y = _operands(op)
    dsaved = None
    if needs[1]:
        slope = b.emit(job.SubOp, [b.scalar(1.0, y), b.scale(y, 2.0)])
        dsaved = b.emit(job.MulOp, [b.emit(job.MulOp, [g, dy]), slope])
    return [b.emit(job.SigmoidGradOp, [g, y]) if needs[0] else None, dsaved]


@gradient(job.TanhGradOp)
def _tanh_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # dy * (1 - y*y): d/dy = -2 * dy * y
    dy, y = _operands(op)
    dsaved = b.scale(b.emit(job.MulOp, [b.emit(job.MulOp, [g, dy]), y]), -2.0) if needs[1] else None
    return [b.emit(job.TanhGradOp, [g, y]) if needs[0] else None, dsaved]


@gradient(job.GeluGradOp)
def _gelu_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # dy * (Phi(x) + x phi(x)): d/dx = dy * phi(x) * (2 - x*x), phi the standard normal density
    dy, x = _operands(op)
    dsaved = None
    if needs[1]:
        square = b.emit(job.SquareOp, [x])
        density = b.scale(b.emit(job.ExpOp, [b.scale(square, -0.5)]), 1.0 / math.sqrt(2.0 * math.pi))
        slope = b.emit(job.MulOp, [density, b.emit(job.SubOp, [b.scalar(2.0, x), square])])
        dsaved = b.emit(job.MulOp, [b.emit(job.MulOp, [g, dy]), slope])
    return [b.emit(job.GeluGradOp, [g, x]) if needs[0] else None, dsaved]


@gradient(job.SoftmaxGradOp)
def _softmax_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # y * (dy - sum(dy * y)): symmetric in dy; d/dy = g * (dy - sum(dy * y)) - dy * sum(g * y)
    dy, y = _operands(op)
    axis = _axis_of(op)
    dsaved = None
    if needs[1]:
        centered = b.emit(job.SubOp, [dy, _keep_sum(b, b.emit(job.MulOp, [dy, y]), axis)])
        cross = b.emit(job.MulOp, [dy, _keep_sum(b, b.emit(job.MulOp, [g, y]), axis)])
        dsaved = b.emit(job.SubOp, [b.emit(job.MulOp, [g, centered]), cross])
    return [b.emit(job.SoftmaxGradOp, [g, y], **_props(op, "axis")) if needs[0] else None, dsaved]


@gradient(job.LogSoftmaxGradOp)
def _log_softmax_grad(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
    # dy - exp(y) * sum(dy): d/ddy = g - sum(g * exp(y)); d/dy = -g * exp(y) * sum(dy)
    dy, y = _operands(op)
    axis = _axis_of(op)
    probs = b.emit(job.ExpOp, [y])
    ddy = None
    if needs[0]:
        ddy = b.emit(job.SubOp, [g, _keep_sum(b, b.emit(job.MulOp, [g, probs]), axis)])
    dsaved = None
    if needs[1]:
        dsaved = b.emit(job.NegOp, [b.emit(job.MulOp, [b.emit(job.MulOp, [g, probs]), _keep_sum(b, dy, axis)])])
    return [ddy, dsaved]


def _cross_entropy_grad(grad_op: type[job.JobOp]) -> Rule:
    """dlogits = (softmax(logits) * mass - labels) * dloss[:, None], mass = sum(labels) (1 when sparse)."""

    def rule(b: GradientBuilder, op: Operation, g: SSAValue, needs: Needs) -> Grads:
        dloss, logits, labels = _operands(op)
        n = shape_of(logits.type)[0]
        column = b.emit(job.ReshapeOp, [dloss], tensor((n, 1), dtype_of(dloss.type)))
        grads: list[SSAValue | None] = [None, None, None]
        if needs[0]:
            unit = b.emit(grad_op, [b.fill(1.0, dloss.type), logits, labels])
            grads[0] = b.emit(job.ReduceSumOp, [b.emit(job.MulOp, [g, unit])], axes=[1])
        if needs[1] or needs[2]:
            probs = b.emit(job.SoftmaxOp, [logits], axis=1)
            scaled = b.emit(job.MulOp, [g, column])
            if needs[1]:
                if grad_op is job.SoftmaxCrossEntropyGradOp:
                    scaled_mass = b.emit(job.MulOp, [scaled, _keep_sum(b, labels, 1)])
                else:
                    scaled_mass = scaled
                grads[1] = b.emit(job.SoftmaxGradOp, [scaled_mass, probs], axis=1)
            if needs[2]:  # dense labels only: integer labels never need a gradient
                expected = _keep_sum(b, b.emit(job.MulOp, [g, probs]), 1)
                grads[2] = b.emit(job.MulOp, [b.emit(job.SubOp, [expected, g]), column])
        return grads

    return rule


gradient(job.SparseSoftmaxCrossEntropyGradOp)(_cross_entropy_grad(job.SparseSoftmaxCrossEntropyGradOp))
gradient(job.SoftmaxCrossEntropyGradOp)(_cross_entropy_grad(job.SoftmaxCrossEntropyGradOp))


# ----------------------------------------------------------------- distribution


@gradient(job.BoxingOp)
def _boxing(b: GradientBuilder, op: Operation, dy: SSAValue, needs: Needs) -> Grads:
    # Logically the identity: sbp-infer then picks how the gradient is distributed, so the
    # backward of an all_gather comes out as a reduce_scatter where that is cheapest.
    return [dy]
