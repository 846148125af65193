"""lift-host-inputs: data a job reads on the host becomes arguments of its job.func, fed at every call.

`flow.data.ofrecord_reader` and its decoders trace as `job.ofrecord_decode`
ops with no operands (the reader's arguments are their properties). This pass
turns each into a new argument of its job.func, after the placeholders and in
the ops' order, with the op's result name: from here on a decoded field is an
input like any placeholder, so sbp-infer splits its batch over the job's
devices, lower-to-physical gives it per-device shapes and convert-job-to-buffer
a `buffer.input`. The func keeps what feeds each new argument in
`host_inputs` (the argument's index and the op's properties), so the lowered
IR still says where those inputs come from; the frontend feeds them in the
same order from its readers (irflow/frontend/records.py). A job without such
ops is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irflow.dialects import job
from irflow.dialects.sbp import NdSbpAttr, SbpAttr, hierarchy_of


def lift(func: job.FuncOp) -> None:
    block = func.body.block
    decoders = [op for op in block.ops if isinstance(op, job.OFRecordDecodeOp)]
    if not decoders:
        return
    fed = list(func.attributes["host_inputs"].data) if isinstance(func.attributes.get("host_inputs"), ArrayAttr) else []
    arg_sbp = func.attributes.get("arg_sbp")
    for op in decoders:
        arg = block.insert_arg(op.res.type, len(block.args))
        arg.name_hint = op.res.name_hint
        arg.location = op.location  # the decoder's line, as a placeholder's is its def
        op.res.replace_all_uses_with(arg)
        fed.append(DictionaryAttr({"index": job.to_attr(arg.index), **op.properties}))
        if isinstance(arg_sbp, ArrayAttr):  # a distributed job's arguments say their SBP: the batch is split
            axes = len(hierarchy_of(func.attributes["placement"])) if "placement" in func.attributes else 1
            arg_sbp = ArrayAttr([*arg_sbp.data, NdSbpAttr([SbpAttr("split", 0)] * axes)])
        Rewriter.erase_op(op)
    func.attributes["host_inputs"] = ArrayAttr(fed)
    if isinstance(arg_sbp, ArrayAttr):
        func.attributes["arg_sbp"] = arg_sbp
    func.properties["function_type"] = FunctionType.from_lists(
        [a.type for a in block.args], list(func.function_type.outputs)
    )


@dataclass(frozen=True)
class LiftHostInputsPass(ModulePass):
    """Make each job.ofrecord_decode an argument of its job.func, fed by the caller from the reader."""

    name = "lift-host-inputs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.walk() if isinstance(f, job.FuncOp)]:
            lift(func)
