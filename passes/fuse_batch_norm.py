"""fuse-batch-norm: a train step's batch normalization, traced as ordinary ops, becomes three kernels.

`flow.layers.batch_normalization` traces training-mode normalization as
elementwise ops and reductions, and autodiff differentiates them one by one:
about eight passes over the tensor forward and fourteen backward, each a
kernel of its own. On a buffer program before plan-memory this pass finds

    m = reduce_mean(x); c = sub(x, m); v = reduce_mean(square(c))
    r = rsqrt(add(v, fill epsilon)); y = add(mul(mul(c, r), gamma), beta)   [; relu(y)]

and autodiff's gradient of exactly these ops from dy (with the relu_grad
that makes dy, when the relu is fused), and puts in their place

    batch_norm_stats(x) -> (m, v)                                    where the first reduce_mean stood
    batch_norm(x, m, v, gamma, beta) {axis, epsilon, relu} -> y      where the last forward op stood
    batch_norm_grad(dy, x, m, v, gamma[, y]) {axis, epsilon, relu}
        -> (dx, dgamma, dbeta)                                       where the first backward op stood

(kernels/normalization.py). m and v stay buffers: the moving averages read
them. Without the gradient (nothing differentiates the ops) the forward fuses
alone. The match is exact, fill values included: any other reader of an
intermediate, or any other op, leaves the ops as they are. On several
devices a data-parallel batch norm has collectives between its reductions
and their readers and is left unfused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue, Use
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from irflow.dialects import buffer
from irflow.runtime.attributes import python_value


class _NoMatch(Exception):
    """The ops around a reduce_mean are not batch normalization's."""


def _readers(value: SSAValue) -> list[buffer.BufferOp]:
    """The ops that read `value`, in the order of its uses (asked per use: the fills batch norms share
    have uses in every one of them)."""
    ops = (use.operation for use in value.uses if _reads_use(use))
    return list(dict.fromkeys(ops))  # type: ignore[arg-type]


def _writers(value: SSAValue) -> list[buffer.BufferOp]:
    ops = (use.operation for use in value.uses if _writes_use(use))
    return list(dict.fromkeys(ops))  # type: ignore[arg-type]


def _reads_use(use: Use) -> bool:
    return isinstance(use.operation, buffer.BufferOp) and use.operation.reads_operand(use.index)


def _writes_use(use: Use) -> bool:
    return isinstance(use.operation, buffer.BufferOp) and use.operation.writes_operand(use.index)


def _written_once(value: SSAValue) -> bool:
    """An alloc'd buffer written by one op alone (so it holds one value all step)."""
    return isinstance(value.owner, buffer.AllocOp) and len(_writers(value)) == 1


def _params(op: buffer.KernelOp) -> dict[str, object]:
    return {k: python_value(v) for k, v in op.parameters().items()}


def _fill(value: SSAValue) -> float | None:
    """The value a rank-0 `fill` kernel writes into `value`, if that is where it comes from."""
    writers = _writers(value)
    if len(writers) != 1 or not isinstance(writers[0], buffer.KernelOp) or writers[0].kernel.data != "fill":
        return None
    return float(_params(writers[0])["value"])  # type: ignore[arg-type]


def _close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-9)


def _kernel_is(op: Operation | None, name: str, operands: tuple[SSAValue | None, ...] = ()) -> buffer.KernelOp:
    """`op`, checked to be kernel `name` with one output buffer and inputs `operands` in any order (None: any one)."""
    if not isinstance(op, buffer.KernelOp) or op.kernel.data != name or len(op.outs) != 1:
        raise _NoMatch
    ins = list(op.ins)
    if operands and (len(ins) != len(operands) or len(set(ins)) != len(ins)):
        raise _NoMatch
    if any(v not in ins for v in operands if v is not None):
        raise _NoMatch
    if not _written_once(op.outs[0]):
        raise _NoMatch
    return op


def _only(value: SSAValue, name: str, *operands: SSAValue | None) -> buffer.KernelOp:
    """The one reader of `value`, kernel `name` over `value` and `operands`."""
    readers = _readers(value)
    if len(readers) != 1:
        raise _NoMatch
    return _kernel_is(readers[0], name, (value, *operands))


def _among(value: SSAValue, name: str, *operands: SSAValue | None, besides: Operation | None = None) -> buffer.KernelOp:
    """The one reader of `value` (other than `besides`) that is kernel `name` over `value` and `operands`."""
    found = []
    for op in _readers(value):
        try:
            found.append(_kernel_is(op, name, (value, *operands)))
        except _NoMatch:
            pass
    found = [op for op in found if op is not besides]
    if len(found) != 1:
        raise _NoMatch
    return found[0]


def _other(op: buffer.KernelOp, value: SSAValue) -> SSAValue:
    """The input of a two-input kernel that is not `value`."""
    (rest,) = [v for v in op.ins if v is not value]
    return rest


def _readers_are(value: SSAValue, ops: list[Operation]) -> None:
    if set(_readers(value)) != set(ops):
        raise _NoMatch


def _reduction(op: buffer.KernelOp, name: str, axes: tuple[int, ...], keepdims: bool) -> None:
    params = _params(op)
    if op.kernel.data != name or tuple(params.get("axes", ())) != axes or bool(params.get("keepdims")) != keepdims:
        raise _NoMatch


@dataclass
class _BatchNorm:
    x: SSAValue
    mean: SSAValue
    variance: SSAValue
    gamma: SSAValue
    beta: SSAValue
    y: SSAValue
    axis: int
    epsilon: float
    relu: bool
    forward: list[buffer.KernelOp]
    centered: SSAValue
    rstd: SSAValue
    normalized: SSAValue
    scale_op: buffer.KernelOp
    count: int


def _affine(normalized: SSAValue, channel_type: Attribute) -> tuple[buffer.KernelOp, buffer.KernelOp]:
    """The forward's mul by gamma and add of beta (per-channel buffers) after the normalized values.

    The normalized values have one more mul reader, the backward's: it is the one not followed by an add.
    """
    found = []
    for op in _readers(normalized):
        try:
            scale_op = _kernel_is(op, "mul", (normalized, None))
            shift_op = _only(scale_op.outs[0], "add", None)
        except _NoMatch:
            continue
        gamma, beta = _other(scale_op, normalized), _other(shift_op, scale_op.outs[0])
        if all(v.type == channel_type and _written_once(v) for v in (gamma, beta)):
            found.append((scale_op, shift_op))
    if len(found) != 1:
        raise _NoMatch
    return found[0]


def _forward(first: buffer.KernelOp) -> _BatchNorm:
    x, mean = first.ins[0], first.outs[0]
    shape = tuple(x.type.get_shape()) if isinstance(x.type, MemRefType) else ()
    axes = tuple(_params(first).get("axes", ()))  # type: ignore[arg-type]
    kept = [a for a in range(len(shape)) if a not in axes]
    if len(kept) != 1 or not _written_once(x) or not _written_once(mean):
        raise _NoMatch
    _reduction(first, "reduce_mean", axes, True)
    axis = kept[0]
    sub = _among(mean, "sub", x)
    if sub.ins[0] is not x:
        raise _NoMatch
    centered = sub.outs[0]
    square = _among(centered, "square")
    var_op = _only(square.outs[0], "reduce_mean")
    _reduction(var_op, "reduce_mean", axes, True)
    variance = var_op.outs[0]
    shifted = _among(variance, "add", None)
    epsilon = _fill(_other(shifted, variance))
    if epsilon is None:
        raise _NoMatch
    rsqrt = _only(shifted.outs[0], "rsqrt")
    rstd = rsqrt.outs[0]
    normalize = _among(centered, "mul", rstd)
    normalized = normalize.outs[0]
    scale_op, shift_op = _affine(normalized, mean.type)
    gamma, beta = _other(scale_op, normalized), _other(shift_op, scale_op.outs[0])
    forward = [first, sub, square, var_op, shifted, rsqrt, normalize, scale_op, shift_op]
    y, relu = shift_op.outs[0], False
    try:
        act = _only(y, "relu")
    except _NoMatch:
        pass
    else:
        forward.append(act)
        y, relu = act.outs[0], True
    count = math.prod(shape) // shape[axis]
    return _BatchNorm(
        x, mean, variance, gamma, beta, y, axis, epsilon, relu, forward, centered, rstd, normalized, scale_op, count
    )


def _backward(
    bn: _BatchNorm, axes: tuple[int, ...]
) -> tuple[list[buffer.KernelOp], SSAValue, tuple[SSAValue, ...], bool]:
    """Autodiff's ops for the gradient of the forward's; returns them, dy, (dx, dgamma, dbeta) and whether
    the relu_grad making dy is among them (dy is then the relu_grad's input)."""
    grad_normalized = _among(bn.normalized, "mul", None, besides=bn.scale_op)
    dy = _other(grad_normalized, bn.normalized)
    d_gamma_op = _only(grad_normalized.outs[0], "reduce_sum")
    _reduction(d_gamma_op, "reduce_sum", axes, False)
    d_beta_op = _among(dy, "reduce_sum")
    _reduction(d_beta_op, "reduce_sum", axes, False)
    d_norm_op = _among(bn.gamma, "mul", dy)
    d_norm = d_norm_op.outs[0]
    d_c1 = _among(d_norm, "mul", bn.rstd)
    d_r_sum = _among(d_norm, "mul", bn.centered)
    _readers_are(d_norm, [d_c1, d_r_sum])
    d_r_reduce = _only(d_r_sum.outs[0], "reduce_sum")
    _reduction(d_r_reduce, "reduce_sum", axes, False)
    d_r_shape = _only(d_r_reduce.outs[0], "reshape")
    d_r = d_r_shape.outs[0]
    r2 = _among(bn.rstd, "square")
    r3 = _only(r2.outs[0], "mul", bn.rstd)
    d_v0 = _only(r3.outs[0], "mul", d_r)
    _readers_are(d_r, [d_v0])
    d_v1 = _only(d_v0.outs[0], "mul", None)
    d_v2 = _only(d_v1.outs[0], "mul", None)
    d_s = _only(d_v2.outs[0], "broadcast_to")
    d_c2a = _only(d_s.outs[0], "mul", bn.centered)
    d_c2 = _only(d_c2a.outs[0], "mul", None)
    d_c = _only(d_c2.outs[0], "add", d_c1.outs[0])
    _readers_are(d_c1.outs[0], [d_c])
    factors = ((d_v1, d_v0, -0.5), (d_v2, d_v1, 1 / bn.count), (d_c2, d_c2a, 2.0))  # d rsqrt, d mean, d square
    if not all(_close(_fill(_other(op, before.outs[0])), want) for op, before, want in factors):
        raise _NoMatch
    d_m_reduce = _among(d_c.outs[0], "reduce_sum")
    _reduction(d_m_reduce, "reduce_sum", axes, False)
    d_m = _only(d_m_reduce.outs[0], "reshape")
    d_m_neg = _only(d_m.outs[0], "neg")
    d_m_mean = _only(d_m_neg.outs[0], "mul", None)
    if not _close(_fill(_other(d_m_mean, d_m_neg.outs[0])), 1 / bn.count):
        raise _NoMatch
    d_xm = _only(d_m_mean.outs[0], "broadcast_to")
    d_x = _only(d_xm.outs[0], "add", d_c.outs[0])
    _readers_are(d_c.outs[0], [d_m_reduce, d_x])
    _readers_are(bn.centered, [bn.forward[2], bn.forward[6], d_r_sum, d_c2a])
    _readers_are(bn.rstd, [bn.forward[6], d_c1, r2, r3])
    _readers_are(bn.normalized, [bn.scale_op, grad_normalized])
    ops = [grad_normalized, d_gamma_op, d_beta_op, d_norm_op, d_c1, d_r_sum, d_r_reduce, d_r_shape, r2, r3, d_v0, d_v1,
           d_v2, d_s, d_c2a, d_c2, d_c, d_m_reduce, d_m, d_m_neg, d_m_mean, d_xm, d_x]  # fmt: skip
    if not _written_once(dy):
        raise _NoMatch
    relu = False
    (grad,) = _writers(dy)
    if bn.relu and set(_readers(dy)) == {grad_normalized, d_beta_op, d_norm_op}:
        if isinstance(grad, buffer.KernelOp) and grad.kernel.data == "relu_grad" and list(grad.ins[1:]) == [bn.y]:
            ops.insert(0, grad)
            dy, relu = grad.ins[0], True
    return ops, dy, (d_x.outs[0], d_gamma_op.outs[0], d_beta_op.outs[0]), relu  # type: ignore[list-item]


def _kernel(
    name: str,
    ins: list[SSAValue],
    outs: list[SSAValue],
    params: dict[str, Attribute],
    at: Operation,
    like: Operation,
    order: dict[Operation, int],
) -> None:
    """Insert the kernel before `at`, with the allocs of outputs that stood later moved before it.

    It takes the location (the user's batch_normalization line) and attributes (a placement) of `like`.
    """
    op = buffer.KernelOp(name, ins, outs, params, like.attributes)
    op.location = like.location
    Rewriter.insert_op(op, InsertPoint.before(at))
    for alloc in (v.owner for v in outs):
        if order[alloc] > order[at]:
            alloc.detach()
            Rewriter.insert_op(alloc, InsertPoint.before(op))


def _erase(ops: list[buffer.KernelOp], kept: set[SSAValue]) -> None:
    """Erase `ops`, then the allocs of their outputs that are not kept, then fills and allocs nothing reads any more."""
    outs = [v for op in ops for v in op.outs if v not in kept]
    inputs = [v for op in ops for v in op.ins]
    for op in ops:
        Rewriter.erase_op(op)
    for v in outs:
        Rewriter.erase_op(v.owner)
    for v in dict.fromkeys(inputs):
        if v.owner.parent is not None and _fill(v) is not None and not _readers(v):
            (fill,) = [u.operation for u in v.uses]
            Rewriter.erase_op(fill)
            if isinstance(v.owner, buffer.AllocOp) and not list(v.uses):
                Rewriter.erase_op(v.owner)


def _fuse(first: buffer.KernelOp, order: dict[Operation, int]) -> None:
    """Fuse the batch normalization whose first op is `first`, if it is one."""
    try:
        bn = _forward(first)
    except _NoMatch:
        return
    axes = tuple(a for a in range(len(bn.x.type.get_shape())) if a != bn.axis)  # type: ignore[attr-defined]
    try:
        backward, dy, (dx, dgamma, dbeta), relu_grad = _backward(bn, axes)
    except _NoMatch:
        backward = []
        alone = {bn.centered: {bn.forward[2], bn.forward[6]}, bn.rstd: {bn.forward[6]}, bn.normalized: {bn.scale_op}}
        if any(set(_readers(v)) != ops for v, ops in alone.items()):
            return
    if any(op.attributes != first.attributes for op in bn.forward + backward):
        return  # ops on different devices (placement attributes): not one kernel's work
    params: dict[str, Attribute] = {"axis": IntegerAttr(bn.axis, 64)}
    norm = {**params, "epsilon": FloatAttr(bn.epsilon, 64), "relu": IntegerAttr.from_bool(bn.relu)}
    _kernel("batch_norm_stats", [bn.x], [bn.mean, bn.variance], params, first, first, order)
    _kernel("batch_norm", [bn.x, bn.mean, bn.variance, bn.gamma, bn.beta], [bn.y], norm, bn.forward[-1], first, order)
    kept = {bn.mean, bn.variance, bn.y}
    if backward:
        grad = {**params, "epsilon": FloatAttr(bn.epsilon, 64), "relu": IntegerAttr.from_bool(relu_grad)}
        ins = [dy, bn.x, bn.mean, bn.variance, bn.gamma] + ([bn.y] if relu_grad else [])
        _kernel("batch_norm_grad", ins, [dx, dgamma, dbeta], grad, min(backward, key=order.__getitem__), first, order)
        kept |= {dx, dgamma, dbeta}
    _erase(bn.forward + backward, kept)


@dataclass(frozen=True)
class FuseBatchNormPass(ModulePass):
    """Replace each train-mode batch normalization's traced ops, forward and backward, by fused kernels (module doc)."""

    name = "fuse-batch-norm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [o for o in op.body.block.ops if isinstance(o, buffer.ProgramOp)]:
            order = {o: i for i, o in enumerate(program.body.block.ops)}
            for first in list(program.body.block.ops):
                erased = first.parent is None  # by an earlier fusion
                if not erased and isinstance(first, buffer.KernelOp) and first.kernel.data == "reduce_mean":
                    _fuse(first, order)


__all__ = ["FuseBatchNormPass"]
