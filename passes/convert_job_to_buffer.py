"""convert-job-to-buffer: tensors become buffers, job ops become kernels with explicit outputs.

The one-shot bufferization of irflow (MLIR's `one-shot-bufferize` without the
analysis: every tensor gets a fresh buffer, and `plan-memory` later decides
which of them share bytes).  The job's op order is the schedule.

A per-device job (after `lower-to-physical`, marked by its `mesh` attribute)
lowers the same way: its collectives become buffer collectives over the same
mesh axis, and the program, its inputs, outputs and variables keep what the
runtime needs to cut and join logical values (`mesh`, `view`, `placement`,
`logical_shape`, `sbp`). An op placed on part of the job's devices keeps its
`placement` as an attribute: the other devices skip it.

A dynamic tensor (`#job.bounded`, docs/dynamic.md) gets a buffer at its bound
and a `buffer.cut` of it at the actual sizes, which are `index` values: read
from the inputs (`buffer.input_dim`), passed on by each op's size groups, and
checked where two of them must agree (`buffer.assert_same_size`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DYNAMIC_INDEX, ArrayAttr, IndexType, MemRefType, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from irflow.dialects import buffer, job
from irflow.dialects.bounds import buffer_rank, dynamic_axes, element_shapes
from irflow.errors import CompileError, source_location

# Properties that describe distribution, not the computation.
_NON_KERNEL_PROPS = ("sbp", "placement")

# Per-device job ops that communicate, and the buffer collectives they become.
_COLLECTIVES: dict[type[Operation], type[buffer.CollectiveOp]] = {
    job.AllReduceOp: buffer.AllReduceOp,
    job.AllGatherOp: buffer.AllGatherOp,
    job.ReduceScatterOp: buffer.ReduceScatterOp,
    job.AllToAllOp: buffer.AllToAllOp,
}


@functools.cache
def memref_of(t: Attribute) -> MemRefType:
    """The buffer a tensor needs: at its bound when it is dynamic (one per tensor type: making a
    MemRefType took a quarter of bufferizing the train benchmark's jobs)."""
    assert isinstance(t, TensorType)
    return MemRefType(t.element_type, t.get_shape())


def cut_type(t: Attribute) -> MemRefType:
    """A dynamic tensor's value as a memref: `?` on its dynamic axes."""
    assert isinstance(t, TensorType)
    dynamic = dynamic_axes(t)
    return MemRefType(t.element_type, [DYNAMIC_INDEX if a in dynamic else d for a, d in enumerate(t.get_shape())])


def kernel_attributes(op: Operation) -> dict[str, Attribute]:
    return {k: v for k, v in op.properties.items() if k not in _NON_KERNEL_PROPS}


@dataclass
class _Lowering:
    """Lowers one job.func into one buffer.program, op by op, in program order."""

    func: job.FuncOp
    device: str

    def __post_init__(self) -> None:
        self.buffers: dict[SSAValue, SSAValue] = {}
        # A variable's value as read before an update overwrote it, for reads after the update.
        self.snapshots: dict[SSAValue, SSAValue] = {}
        self.position = {op: i for i, op in enumerate(self.func.body.block.ops)}
        self.ops: list[Operation] = []
        self.distributed = "mesh" in self.func.attributes
        # The actual size of each dynamic axis of each dynamic tensor, an `index` value.
        self.sizes: dict[SSAValue, dict[int, SSAValue]] = {}

    def emit(self, op: Operation, origin: Operation | None = None) -> Operation:
        if origin is not None:
            op.location = origin.location
            place = origin.properties.get("placement")
            if self.distributed and place not in (None, self.func.attributes.get("placement")) and not isinstance(
                op, (buffer.AllocOp, buffer.TransferOp)
            ):
                op.attributes["placement"] = place  # runs on part of the program's devices (docs/distributed.md)
        self.ops.append(op)
        return op

    def alloc(self, value: SSAValue, origin: Operation | None) -> SSAValue:
        res = self.emit(buffer.AllocOp(memref_of(value.type)), origin).results[0]
        res.name_hint = value.name_hint
        if dynamic_axes(value.type) and element_shapes(value.type) is None:  # a TensorBuffer keeps its slots
            sizes = [self.sizes[value][a] for a in dynamic_axes(value.type)]
            res = self.emit(buffer.CutOp.create(operands=[res, *sizes], result_types=[cut_type(value.type)]), origin).results[0]
            res.name_hint = value.name_hint
        self.buffers[value] = res
        return res

    def leading_part(self, value: SSAValue, buf: SSAValue, origin: Operation) -> SSAValue:
        """The first elements of `buf`'s storage at `value`'s actual sizes, as `value` holds them: where `buf`
        is at those sizes already (a pinned axis checked equal to its bound), the same elements."""
        sizes = [self.sizes[value][a] for a in dynamic_axes(value.type)]
        cut = buffer.CutOp.create(operands=[buffer.storage_of(buf), *sizes], result_types=[cut_type(value.type)])
        return self.emit(cut, origin).results[0]

    def const_size(self, value: int, origin: Operation) -> SSAValue:
        make = buffer.ConstSizeOp.create(properties={"value": job.to_attr(value)}, result_types=[IndexType()])
        return self.emit(make, origin).results[0]

    def size_result(self, op: job.JobOp) -> None:
        """The actual sizes of `op`'s result from its operands', with a check wherever two must agree."""
        types = [o.type for o in op.operands]
        if not any(dynamic_axes(t) for t in types):
            return
        groups = op.size_groups(types, op.properties)
        assert groups is not None, f"{op.name} was verified to accept dynamic operands"
        pinned = set(job.ints(op.properties, "axes")) if isinstance(op, job.PinSizeOp) else set()
        result: dict[int, SSAValue] = {}
        for axis, members in groups:
            known = [(i, a, self.sizes[op.operands[i]][a]) for i, a in members if a in dynamic_axes(types[i])]
            # A static member fixes the size; so does a pinned axis, at its bound.
            fixed = [(i, a) for i, a in members if a not in dynamic_axes(types[i]) or a in pinned]
            distinct = list(dict.fromkeys(size for _, _, size in known))
            if distinct and fixed:
                i, a = fixed[0]
                distinct.append(self.const_size(job.shape_of(types[i])[a], op))
            if len(distinct) > 1:
                parts = [self.describe_size(op, i, a) for i, a, _ in known]
                if fixed:
                    i, a = fixed[0]
                    size = job.shape_of(types[i])[a]
                    parts.append(f"its bound {size}" if a in pinned else f"operand #{i} axis {a} (static {size})")
                what = f"{op.name}: {' and '.join(parts)}"
                users = [use.operation.name for use in op.results[0].uses]
                if isinstance(reason := op.attributes.get("reason"), StringAttr):  # the frontend's words for the pin
                    what = f"{reason.data}: {what}"
                elif pinned and users:  # name the op that takes these axes only at their bound
                    what = f"{users[0]} takes axes {sorted(pinned)} of operand #0 at their bound: {what}"
                check = buffer.AssertSameSizeOp.create(operands=distinct, properties={"what": StringAttr(what)})
                self.emit(check, op)
            if distinct and axis is not None and not fixed:
                result[axis] = distinct[0]
        for axis, members in op.summed_axes(types, op.properties):
            if any(a in dynamic_axes(types[i]) for i, a in members):
                result[axis] = self.sum_of(op, [(op.operands[i], a) for i, a in members])
        for axis, (i, a), (start, stop, step) in op.sliced_axes(types, op.properties):
            if a in dynamic_axes(types[i]):
                sliced = buffer.SliceSizeOp.create(
                    operands=[self.sizes[op.operands[i]][a]], result_types=[IndexType()],
                    properties={"start": job.to_attr(start), "stop": job.to_attr(stop), "step": job.to_attr(step)},
                )  # fmt: skip
                result[axis] = self.emit(sliced, op).results[0]
        if op.results:
            for axis, size in result.items():
                multiplier, divisor = op.size_scale(types, op.properties, op.results[0].type, axis)
                if (multiplier, divisor) != (1, 1):
                    result[axis] = self.scaled(op, axis, size, multiplier, divisor)
            self.sizes[op.results[0]] = result

    def scaled(self, op: job.JobOp, axis: int, size: SSAValue, multiplier: int, divisor: int) -> SSAValue:
        """`size * multiplier / divisor` for result axis `axis` of `op`, checked to be whole when the step starts."""
        (i, a), = [m for r, members in op.size_groups([o.type for o in op.operands], op.properties) or () if r == axis
                   for m in members]  # fmt: skip
        row, out_row = (math.prod(job.shape_of(v.type)[k + 1 :]) for v, k in ((op.operands[i], a), (op.results[0], axis)))
        what = f"{op.name}: {self.describe_size(op, i, a)}, rows of {row} regrouped into rows of {out_row}"
        scale = buffer.ScaleSizeOp.create(
            operands=[size], result_types=[IndexType()],
            properties={"multiplier": job.to_attr(multiplier), "divisor": job.to_attr(divisor), "what": StringAttr(what)},
        )  # fmt: skip
        return self.emit(scale, op).results[0]

    def sum_of(self, op: job.JobOp, axes: Sequence[tuple[SSAValue, int]]) -> SSAValue:
        """The actual sizes of these value axes summed: a constant where all are static, else `buffer.add_sizes`."""
        dynamic = [self.sizes[v][a] for v, a in axes if a in dynamic_axes(v.type)]
        static = sum(job.shape_of(v.type)[a] for v, a in axes if a not in dynamic_axes(v.type))
        if not dynamic:
            return self.const_size(static, op)
        if len(dynamic) == 1 and not static:
            return dynamic[0]
        add = buffer.AddSizesOp.create(operands=dynamic, properties={"constant": job.to_attr(static)}, result_types=[IndexType()])
        return self.emit(add, op).results[0]

    def concat_part(self, op: job.ConcatGradOp, dy: SSAValue) -> SSAValue:
        """The part of `dy` (a cut) that input `index` gave: a subview from the inputs' sizes before it."""
        rank = len(job.shape_of(op.dy.type))
        axis, index = job.normalize_axis(op.axis.value.data, rank, "concat_grad axis"), op.index.value.data
        offset = self.sum_of(op, [(x, axis) for x in op.inputs[:index]])  # 0 for the first
        size = self.sum_of(op, [(op.inputs[index], axis)])
        assert isinstance(dy.type, MemRefType)
        shape = [DYNAMIC_INDEX if a == axis else d for a, d in enumerate(dy.type.get_shape())]
        part = buffer.SubviewOp.create(
            operands=[dy, offset, size], properties={"axis": job.to_attr(axis)},
            result_types=[MemRefType(dy.type.element_type, shape)],
        )  # fmt: skip
        return self.emit(part, op).results[0]

    def element_sizes(self, op: job.TensorBufferGetOp | job.TensorBufferToTensorOp) -> None:
        """A TensorBuffer's elements taken out: at their own sizes (`dynamic_out`), or checked to be the
        static shape asked for where they are known only at run time; a buffer whose element count is
        known only then must be full to be split into a list."""
        x = op.operands[0]
        rank, dynamic = buffer_rank(x.type), dynamic_axes(x.type)
        if isinstance(op, job.TensorBufferGetOp):
            shape = job.check_tensor_buffer(x.type, "tensor_buffer_get's input")[op.index.value.data]
            wanted = job.ints(op.properties, "out_shape")
            for a in (a for a in dynamic if a < rank):
                what = (f"{op.name} takes every element of the TensorBuffer's bound (OneFlow's, a static "
                        f"TensorBuffer): {self.describe_size(op, 0, a)}")  # fmt: skip
                self.check_size(op, self.sizes[x][a], job.shape_of(x.type)[a], what, "its bound")
            label = "out_shape's"
        else:
            shape = wanted = job.ints(op.properties, "instance_shape")
            label = "instance_shape's"
        sizes = {r: self.sizes[x][rank + r] if rank + r in dynamic else None for r in range(len(shape))}
        if isinstance(op, job.TensorBufferGetOp) and op.dynamic_out.value.data:
            self.sizes[op.res] = {r: self.const_size(shape[r], op) if size is None else size for r, size in sizes.items()}
            return
        for r, size in sizes.items():
            if size is not None:
                what = f"{op.name}: element axis {r}, {self.describe_size(op, 0, rank + r)},"
                self.check_size(op, size, wanted[r], what, label)

    def check_size(self, op: job.JobOp, size: SSAValue, static: int, what: str, label: str) -> None:
        """A run-time size must be `static`: `what` names the size, `label` the static one."""
        check = buffer.AssertSameSizeOp.create(
            operands=[size, self.const_size(static, op)], properties={"what": StringAttr(f"{what} and {label} {static}")}
        )
        self.emit(check, op)

    def describe_size(self, op: job.JobOp, i: int, a: int) -> str:
        """Dynamic axis `a` of operand `i` in a size check, naming the job's argument whose size it is, if any."""
        source = self.sizes[op.operands[i]][a].owner
        if isinstance(source, buffer.InputDimOp):
            arg = self.func.body.block.args[source.index.value.data]
            name = f"argument '{arg.name_hint}'" if arg.name_hint else f"argument #{source.index.value.data}"
            return f"operand #{i} axis {a} ({name} axis {source.axis.value.data})"
        return f"operand #{i} axis {a}"

    def run(self) -> buffer.ProgramOp:
        for index, arg in enumerate(self.func.body.block.args):
            self.sizes[arg] = {
                a: self.emit(buffer.InputDimOp.create(
                    properties={"index": job.to_attr(index), "axis": job.to_attr(a)}, result_types=[IndexType()]
                )).results[0]  # fmt: skip
                for a in dynamic_axes(arg.type)
            }
            dst = self.alloc(arg, None)
            self.emit(buffer.InputOp.create(
                operands=[dst], properties={"index": job.to_attr(index)}, attributes=self.layout("arg", index)
            ))  # fmt: skip
        for op in self.func.body.block.ops:
            self.lower(op)
        program = buffer.ProgramOp(self.func.sym_name.data, self.device, self.ops)
        program.attributes["job_type"] = self.func.job_type
        for key in ("mesh", "view", *(("placement",) if self.distributed else ())):
            if key in self.func.attributes:
                program.attributes[key] = self.func.attributes[key]
        program.location = self.func.location
        return program

    def layout(self, kind: str, index: int) -> dict[str, Attribute]:
        """A per-device job's logical shape and sbp of argument or result `index`, for the runtime."""
        shapes, sbps = self.func.attributes.get(f"{kind}_shapes"), self.func.attributes.get(f"{kind}_sbp")
        if not isinstance(shapes, ArrayAttr) or not isinstance(sbps, ArrayAttr):
            return {}
        return {"logical_shape": shapes.data[index], "sbp": sbps.data[index]}

    def operand_buffers(self, op: Operation) -> list[SSAValue]:
        written = op.WRITTEN_OPERANDS if isinstance(op, job.UpdateOp) else ()
        return [
            self.buffers[v] if i in written else self.snapshots.get(v, self.buffers[v])
            for i, v in enumerate(op.operands)
        ]

    def snapshot_before_update(self, op: job.UpdateOp) -> None:
        """SSA says a variable's value is the one it had when read: keep it for reads after the update."""
        here = self.position[op]
        for i in op.WRITTEN_OPERANDS:
            v = op.operands[i]
            later_reads = any(
                self.position[use.operation] > here
                and not (isinstance(use.operation, job.UpdateOp) and use.index in use.operation.WRITTEN_OPERANDS)
                for use in v.uses
            )
            if later_reads and v not in self.snapshots:
                copy = self.emit(buffer.AllocOp(memref_of(v.type)), op).results[0]
                copy.name_hint = f"{v.name_hint}_before_update" if v.name_hint else None
                self.emit(buffer.CopyOp.create(operands=[self.buffers[v], copy]), op)
                self.snapshots[v] = copy

    def lower(self, op: Operation) -> None:
        if isinstance(op, job.UpdateOp):
            self.snapshot_before_update(op)
        ins = self.operand_buffers(op)
        if isinstance(op, job.VariableOp):
            var = buffer.VariableOp(op.var_name.data, memref_of(op.res.type))
            var.attributes["initializer"] = op.initializer
            var.attributes["trainable"] = op.trainable
            if "logical_shape" in op.attributes and op.sbp is not None:  # a piece of a distributed variable
                var.attributes["logical_shape"] = op.attributes["logical_shape"]
                var.attributes["sbp"] = op.sbp
            self.buffers[op.res] = self.emit(var, op).results[0]
            self.buffers[op.res].name_hint = op.res.name_hint
        elif isinstance(op, job.ConstantOp):
            const = buffer.ConstantOp.create(
                properties={"value": op.value}, result_types=[memref_of(op.res.type)]
            )
            self.buffers[op.res] = self.emit(const, op).results[0]
        elif isinstance(op, job.ReturnOp):
            for index, buf in enumerate(ins):
                out = buffer.OutputOp.create(
                    operands=[buf], properties={"index": job.to_attr(index)}, attributes=self.layout("result", index)
                )
                self.emit(out, op)
        elif isinstance(op, job.AssignOp):
            self.emit(buffer.CopyOp.create(operands=[ins[1], ins[0]]), op)
        elif isinstance(op, job.UpdateOp):
            outs = [ins[i] for i in op.WRITTEN_OPERANDS]
            self.emit(buffer.KernelOp(_kernel_name(op), ins, outs, kernel_attributes(op)), op)
        elif isinstance(op, (job.MinimizeOp, job.ApplyGradientsOp)):
            raise CompileError(
                f"'{op.name}' must be lowered by the autodiff and optimizer passes before convert-job-to-buffer",
                source_location(op),
            )
        elif isinstance(op, job.TransferOp):
            props = {name: op.properties[name] for name in buffer.TransferOp.get_irdl_definition().properties}
            self.emit(buffer.TransferOp.create(operands=[ins[0], self.alloc(op.res, op)], properties=props), op)
        elif isinstance(op, job.SizeOfOp):
            self.size_result(op)
            x = op.x.type
            rank = len(job.shape_of(x))
            axes = sorted({job.normalize_axis(a, rank, "size_of axis") for a in job.ints(op.properties, "axes")})
            dynamic = [a for a in axes if a in dynamic_axes(x)]
            factor = 1
            for a in axes:
                factor *= 1 if a in dynamic else job.shape_of(x)[a]
            out = self.alloc(op.res, op)
            sizes = [self.sizes[op.x][a] for a in dynamic]
            self.emit(buffer.StoreSizeOp.create(operands=[out, *sizes], properties={"factor": job.to_attr(factor)}), op)
        elif type(op) in _COLLECTIVES:
            self.size_result(op)
            if isinstance(op, job.AllGatherOp) and dynamic_axes(op.x.type):  # each device's own rows, summed
                gathered = buffer.SumSizesOp.create(
                    operands=[self.sizes[op.x][0]],
                    properties={"mesh": op.mesh, "mesh_axis": op.mesh_axis},
                    result_types=[IndexType()],
                )
                self.sizes[op.res][0] = self.emit(gathered, op).results[0]
            kind = _COLLECTIVES[type(op)]
            names = kind.get_irdl_definition().properties
            props = {name: getattr(op, name) for name in names}
            self.emit(kind.create(operands=[ins[0], self.alloc(op.results[0], op)], properties=props), op)
        elif isinstance(op, job.ConcatGradOp):  # dy's part at the inputs' actual sizes, copied out
            self.size_result(op)
            part = self.concat_part(op, ins[0])
            self.emit(buffer.KernelOp("identity", [part], [self.alloc(op.res, op)], {}), op)
        elif isinstance(op, job.JobOp):
            self.size_result(op)
            params = kernel_attributes(op)
            if isinstance(op, (job.TensorBufferGetOp, job.TensorBufferToTensorOp)):
                self.element_sizes(op)
            if isinstance(op, job.GenTensorBufferOp):  # the kernel fills each element at its own shape
                shapes = job.check_tensor_buffer(op.res.type, "gen_tensor_buffer's result")
                params["shapes"] = job.i64_array([d for s in shapes for d in s])
                params["rank"] = job.to_attr(len(shapes[0]))
            out = self.alloc(op.results[0], op)
            if isinstance(op, _SIZED_BY_LIKE) and op.like is not None:  # sizes only: its buffer need not live on
                ins = ins[:-1]
            if isinstance(op, job.UnpinSizeOp):  # x's leading elements at like's sizes: all of them after a pin
                ins = [self.leading_part(op.res, ins[0], op)]
            kernel = self.emit(buffer.KernelOp(_kernel_name(op), ins, [out], params), op)
            if "logical_shape" in op.attributes and op.sbp is not None:  # a piece that ends in padding
                kernel.attributes.update(logical_shape=op.attributes["logical_shape"], sbp=op.sbp)
        else:
            raise CompileError(f"convert-job-to-buffer cannot lower '{op.name}'", source_location(op))


# Ops whose last operand `like` gives the result's actual sizes, never values: their kernels do not read it.
_SIZED_BY_LIKE = (job.UnpinSizeOp, job.SliceGradOp, job.GatherGradOp, job.DimGatherGradOp, job.BroadcastLikeOp)


def _kernel_name(op: Operation) -> str:
    if isinstance(op, (job.PinSizeOp, job.UnpinSizeOp)):  # its sizes are the op; the values pass through
        return "identity"
    return op.name.removeprefix("job.")


@dataclass(frozen=True)
class ConvertJobToBufferPass(ModulePass):
    """Lower every job.func to a buffer.program: allocs, kernels with explicit outputs, host transfers."""

    name = "convert-job-to-buffer"

    device: str = "cpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        funcs = [o for o in op.body.block.ops if isinstance(o, job.FuncOp)]
        if not funcs:
            raise CompileError("convert-job-to-buffer found no job.func to lower")
        for func in funcs:
            program = _Lowering(func, self.device).run()
            op.body.block.insert_op_before(program, func)
            func.detach()
            func.erase()
