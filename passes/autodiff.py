"""The `autodiff` pass: reverse-mode differentiation of train jobs on the job IR."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from irflow.dialects import job
from irflow.dialects.bounds import dynamic_axes
from irflow.errors import CompileError, source_location
from irflow.passes.gradients import GRADIENTS, NO_GRADIENT, GradientBuilder, is_float


@dataclass(frozen=True)
class AutodiffPass(ModulePass):
    """Builds the backward program of every job.func that has a job.minimize.

    Reverse-mode differentiation on the job IR (as OneFlow's autograd job pass
    and MLIR's Enzyme-style source transformation): gradients are ordinary
    job ops placed after the forward ops, fan-out gradients are summed with
    job.add, and each gradient op carries its forward op's location.  A
    non-scalar loss is minimized through its mean.  job.minimize becomes
    job.apply_gradients over (variable, gradient) pairs of every trainable
    variable the loss depends on. Each job.diff becomes the gradient of its
    operand (zeros when the loss does not depend on it).
    """

    name = "autodiff"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in op.walk():
            if isinstance(func, job.FuncOp):
                minimizes = [o for o in func.body.block.ops if isinstance(o, job.MinimizeOp)]
                if len(minimizes) > 1:
                    raise CompileError(
                        f"job '{func.sym_name.data}' minimizes {len(minimizes)} losses; a train job has one",
                        source_location(minimizes[1]),
                    )
                if minimizes:
                    differentiate(func, minimizes[0])
                else:
                    diffs = [o for o in func.body.block.ops if isinstance(o, job.DiffOp)]
                    if diffs:
                        raise CompileError(
                            f"job '{func.sym_name.data}' reads a gradient (job.diff) but minimizes no loss",
                            source_location(diffs[0]),
                        )


def _trainable(op: job.VariableOp) -> bool:
    return bool(op.trainable.value.data) and is_float(op.results[0])


def _requiring_gradients(forward: list[Operation]) -> set[SSAValue]:
    """Float values that depend on a trainable variable through ops gradients flow through."""
    live: set[SSAValue] = set()
    for op in forward:
        if isinstance(op, job.VariableOp):
            if _trainable(op):
                live.add(op.results[0])
        elif type(op) not in NO_GRADIENT and any(o in live for o in op.operands):
            live.update(r for r in op.results if is_float(r))
    return live


def fit_dynamic_axes(b: GradientBuilder, g: SSAValue, operand: SSAValue) -> SSAValue:
    """`g` with `operand`'s dynamic axes (docs/dynamic.md).

    A gradient may be dynamic where its operand is static (a weight's gradient over a
    feature axis the forward op checked equal to the weight's): it is pinned at its bound.
    It may be static where its operand is dynamic (an input's features after a matmul
    against a weight, or past a pin): the forward op checked that the actual size is the
    static one, so it is unpinned to the operand's actual sizes.
    """
    extra = sorted(set(dynamic_axes(g.type)) - set(dynamic_axes(operand.type)))
    if extra:
        g = b.emit(job.PinSizeOp, [g], axes=extra)
    missing = sorted(set(dynamic_axes(operand.type)) - set(dynamic_axes(g.type)))
    if missing:
        g = b.emit(job.UnpinSizeOp, [g, operand], axes=missing)
    return g


def differentiate(func: job.FuncOp, minimize: job.MinimizeOp) -> job.ApplyGradientsOp:
    """Insert the backward program of `minimize`'s loss before `func`'s job.return."""
    block = func.body.block
    forward: list[Operation] = []
    for op in block.ops:
        if op is minimize:
            break
        forward.append(op)
    ret = block.last_op
    assert isinstance(ret, job.ReturnOp)
    live = _requiring_gradients(forward)
    loss = minimize.loss
    if loss not in live:
        raise CompileError(
            f"job '{func.sym_name.data}': the loss does not depend on any trainable variable",
            source_location(minimize),
        )

    b = GradientBuilder(InsertPoint.before(ret))
    grads: dict[SSAValue, SSAValue] = {}

    def accumulate(value: SSAValue, g: SSAValue) -> None:
        if value in grads:
            g = b.emit(job.AddOp, [grads[value], g])
        if g.name_hint is None and value.name_hint is not None:
            g.name_hint = f"{value.name_hint}_grad"
        grads[value] = g

    # OneFlow minimizes a non-scalar loss through its mean: every element's seed is 1/numel.
    b.at(minimize)
    accumulate(loss, b.mean_seed(loss))

    for op in reversed(forward):
        if isinstance(op, job.VariableOp) or not op.results or op.results[0] not in grads:
            continue
        needs = tuple(o in live for o in op.operands)
        if not any(needs):
            continue
        rule = GRADIENTS.get(type(op))
        if rule is None:
            raise CompileError(f"no gradient is defined for '{op.name}'", source_location(op))
        b.at(op)
        try:
            op_grads = rule(b, op, grads[op.results[0]], needs)
        except VerifyException as err:  # e.g. a backward op that needs static shapes, given dynamic ones
            raise CompileError(f"the gradient of '{op.name}' cannot be built: {err}", source_location(op)) from None
        for operand, wanted, g in zip(op.operands, needs, op_grads, strict=True):
            if wanted and g is not None:
                g = fit_dynamic_axes(b, g, operand)
                assert g.type == operand.type, f"{op.name} gradient {g.type} for an operand of type {operand.type}"
                accumulate(operand, g)

    # One pair per variable name: two ops reading the same variable share one update.
    pairs: dict[str, tuple[SSAValue, SSAValue]] = {}
    b.at(minimize)
    for op in forward:
        if isinstance(op, job.VariableOp) and op.results[0] in grads:
            name = op.var_name.data
            g = grads[op.results[0]]
            if name in pairs:
                var, total = pairs[name]
                pairs[name] = (var, b.emit(job.AddOp, [total, g]))
            else:
                pairs[name] = (op.results[0], g)

    # job.diff %x reads the gradient of %x: zeros where the loss does not depend on it.
    for op in [o for o in block.ops if isinstance(o, job.DiffOp)]:
        b.at(op)
        g = grads.get(op.x) or b.fill(0.0, op.x.type)
        op.res.replace_all_uses_with(g)
        Rewriter.erase_op(op)

    apply = job.ApplyGradientsOp.create(
        operands=[v for pair in pairs.values() for v in pair],
        properties={"optimizer": minimize.optimizer},
    )
    apply.location = minimize.location
    if minimize.placement is not None:
        apply.properties["placement"] = minimize.placement
    Rewriter.insert_op(apply, InsertPoint.before(ret))
    Rewriter.erase_op(minimize)
    return apply
