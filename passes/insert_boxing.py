"""The `insert-boxing` pass and the per-job SBP report.

After sbp-infer every op says what it needs of each operand (`sbp_in`, on its
`placement`); where the producer made the value otherwise, a job.boxing
converts it, as OneFlow's boxing sub-graphs do.  One boxing per (value, target
SBP, target placement) serves all consumers that need that form; it carries
the reason and the location of the consumer that first asked for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from irflow.dialects import job
from irflow.dialects.job import BoxingOp
from irflow.dialects.sbp import (
    NdSbpAttr,
    PlacementAttr,
    check_fits,
    hierarchy_of,
    nd_attr,
    nd_codes,
    nd_text,
    transition,
)
from irflow.errors import CompileError, source_location
from irflow.passes.sbp_infer import chosen_return_needs, func_placement
from irflow.passes.sbp_rules import moved_bytes, nbytes, placement_bytes

Form = tuple[NdSbpAttr, PlacementAttr]


def _made(value: SSAValue, func: job.FuncOp) -> Form:
    """The SBP and placement a value is produced with, as sbp-infer recorded them."""
    owner = value.owner
    if isinstance(owner, job.JobOp):
        if owner.sbp is None or owner.placement is None:
            raise CompileError(f"{owner.name} has no sbp or placement: run sbp-infer first", source_location(owner))
        return owner.sbp, owner.placement
    given = func.attributes.get("arg_sbp")
    if not isinstance(given, ArrayAttr):
        raise CompileError(f"job '{func.sym_name.data}' has no arg_sbp: run sbp-infer first")
    index = func.body.block.args.index(value)  # type: ignore[arg-type]
    what = f"arg_sbp #{index} of job '{func.sym_name.data}'"
    home = func_placement(func)
    sbp = given.data[index] if index < len(given.data) else None
    if not isinstance(sbp, NdSbpAttr):
        raise CompileError(f"{what} is missing or not a #job.nd_sbp: run sbp-infer first")
    try:  # arg_sbp may come from a hand-written func, which no verifier checks against its placement
        check_fits(sbp, len(job.shape_of(value.type)), hierarchy_of(home), what)
    except VerifyException as e:
        raise CompileError(str(e)) from None
    return sbp, home


def _needed(op: Operation, func: job.FuncOp) -> list[Form] | None:
    """What `op` needs of each operand, or None for ops sbp-infer left alone."""
    if isinstance(op, job.ReturnOp):
        home = func_placement(func)
        return [(nd_attr(need), home) for need in chosen_return_needs(func, op)]
    sbp_in = op.attributes.get("sbp_in")
    if not isinstance(sbp_in, ArrayAttr) or not isinstance(op, job.JobOp):
        return None
    place = op.placement or func_placement(func)
    if isinstance(op, BoxingOp) and op.src_placement is not None:
        place = op.src_placement
    return [(nd, place) for nd in sbp_in.data]  # type: ignore[misc]


def _reason(op: Operation, k: int, form: Form, func: job.FuncOp) -> str:
    if isinstance(op, job.ReturnOp):
        view = func.attributes.get("view")
        name = view.data if isinstance(view, StringAttr) else "consistent"
        return f"job.return needs {nd_text(form[0])} in the {name} view"
    return f"{op.name} needs {nd_text(form[0])} for operand {k}"


def insert_boxing(func: job.FuncOp) -> int:
    """Insert the conversions `func` needs; return how many boxing ops were added."""
    made: dict[SSAValue, Form] = {}
    boxes: dict[tuple[SSAValue, NdSbpAttr, PlacementAttr], SSAValue] = {}
    for op in list(func.body.block.ops):
        needs = _needed(op, func)
        if needs is None:
            continue
        for k, (operand, need) in enumerate(zip(op.operands, needs, strict=True)):
            have = made.get(operand) or made.setdefault(operand, _made(operand, func))
            if have == need:
                continue
            key = (operand, *need)
            if key not in boxes:
                boxes[key] = _boxing(operand, have, need, _reason(op, k, need, func), op)
            op.operands[k] = boxes[key]
    return len(boxes)


def _boxing(value: SSAValue, have: Form, need: Form, reason: str, consumer: Operation) -> SSAValue:
    props: dict[str, object] = {"sbp": need[0], "src_sbp": have[0], "placement": need[1]}
    if have[1] != need[1]:
        props["src_placement"] = have[1]
    box = BoxingOp.make([value], **props)
    box.attributes["sbp_in"] = ArrayAttr([have[0]])
    box.attributes["sbp_origin"] = StringAttr("rule")
    box.attributes["reason"] = StringAttr(reason)
    box.location = consumer.location
    if value.name_hint is not None:
        kinds = [k for k in _kind(box).split(", ") if k != "none"]
        box.res.name_hint = "_".join([value.name_hint, *kinds])
    owner = value.owner
    point = InsertPoint.after(owner) if isinstance(owner, Operation) else InsertPoint.at_start(owner)  # type: ignore[arg-type]
    Rewriter.insert_op(box, point)
    return box.res


def _kind(box: BoxingOp) -> str:
    """The collective of each hierarchy axis ("all_reduce", "all_gather, none", ...), or a placement transfer."""
    assert box.src_sbp is not None and box.sbp is not None
    if box.src_placement is not None and box.src_placement != box.placement:
        return "transfer"
    return ", ".join(transition(s, d) for s, d in zip(nd_codes(box.src_sbp), nd_codes(box.sbp), strict=True))


def boxing_bytes(box: BoxingOp) -> float:
    """Bytes the boxing moves per step under sbp-infer's model (between placements: what the transfer moves)."""
    assert box.src_sbp is not None and box.sbp is not None
    size = nbytes(box.x.type)  # type: ignore[arg-type]
    if box.src_placement is not None and box.src_placement != box.placement and box.placement is not None:
        shape = job.shape_of(box.x.type)
        ends = [(hierarchy_of(p), tuple(p.devices)) for p in (box.src_placement, box.placement)]
        itemsize = size // max(1, math.prod(shape))
        return placement_bytes(nd_codes(box.src_sbp), nd_codes(box.sbp), shape, itemsize, ends[0], ends[1])
    hierarchy = hierarchy_of(box.placement) if box.placement is not None else (1,)
    return moved_bytes(nd_codes(box.src_sbp), nd_codes(box.sbp), size, hierarchy)


def sbp_report(module: ModuleOp) -> str:
    """Per job: each boxing (collective, bytes per step, reason, location) and where each op's SBP came from."""
    lines: list[str] = []
    for func in module.walk():
        if not isinstance(func, job.FuncOp):
            continue
        placement = func_placement(func)
        lines.append(f"job @{func.sym_name.data} on {placement} ({len(placement.devices)} devices)")
        boxes = [op for op in func.body.block.ops if isinstance(op, BoxingOp) and op.src_sbp is not None]
        total = 0.0
        for box in boxes:
            moved = boxing_bytes(box)
            total += moved
            reason = box.attributes.get("reason")
            why = reason.data if isinstance(reason, StringAttr) else "user hint (parallel_cast)"
            lines.append(
                f"  boxing{_name(box.res)} {nd_text(box.src_sbp)} -> {nd_text(box.sbp)}: "  # type: ignore[arg-type]
                f"{_kind(box)}, {moved:.0f} bytes/step; {why}{_at(box)}"
            )
        lines.append(f"  {len(boxes)} boxing ops, {total:.0f} bytes/step")
        origins: dict[str, int] = {}
        for op in func.body.block.ops:
            origin = op.attributes.get("sbp_origin")
            if not isinstance(origin, StringAttr):
                continue
            origins[origin.data] = origins.get(origin.data, 0) + 1
            if origin.data == "hint" and isinstance(op, job.JobOp) and op.sbp is not None and op.results:
                lines.append(f"  hint {op.name}{_name(op.results[0])} {nd_text(op.sbp)}{_at(op)}")
        lines.append("  sbp origins: " + ", ".join(f"{k} {v}" for k, v in sorted(origins.items())))
    return "\n".join(lines)


def _name(value: SSAValue) -> str:
    return f" %{value.name_hint}" if value.name_hint else ""


def _at(op: Operation) -> str:
    where = source_location(op)
    return f" at {where}" if where else ""


@dataclass(frozen=True)
class InsertBoxingPass(ModulePass):
    """Inserts a job.boxing wherever a value's SBP or placement differs from what its consumer needs.

    Runs after sbp-infer. One boxing per (value, target SBP, target placement)
    serves every consumer needing that form; each records its `reason` and the
    location of the consumer it was made for.
    """

    name = "insert-boxing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in op.walk():
            if isinstance(func, job.FuncOp):
                insert_boxing(func)
