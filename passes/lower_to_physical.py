"""lower-to-physical: the logical, distributed job becomes the program every device runs (SPMD).

After `sbp-infer` and `insert-boxing` every value has an SBP and a placement.
This pass rewrites each job.func in place (compare Shardy's partitioner and
MLIR's `shard-partition`):

- every tensor type becomes the per-device (padded) type of its SBP on the
  mesh (`irflow.dialects.mesh.local_shape`); ops compute on their pieces;
- every job.boxing becomes per-device ops, one mesh axis at a time:
  P->B all_reduce, P->S reduce_scatter, S->B all_gather, S(i)->S(j)
  all_to_all, B->S shard_slice and S->P shard_embed and B->P
  broadcast_to_partial (local, no communication), equal SBP nothing. Uneven
  splits are padded to the chunk size before a collective (`job.pad`) and cut
  back after it (`job.slice`), so every device runs the same program;
- the few ops whose per-device form differs from the logical one are
  rewritten (a mean over a split axis divides by the logical count; a source
  that starts partial is kept on one device; a sparse cross-entropy with its
  classes split runs in stages with all_reduces between; a split variable's LAMB or LARS update
  reads its norms summed over the devices), and what cannot be lowered
  exactly is a located error, never a silently wrong program.

The func keeps `placement`, `arg_sbp` and `view`, and gains `mesh` (which marks
it per-device), `arg_shapes`, `result_shapes` and `result_sbp`: what the runtime
needs to cut inputs and join outputs. The IR does not grow with the device
count: the device's coordinate is read at run time. On one device the pass
only drops the (identity) boxing ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, FunctionType, ModuleOp, TensorType, f64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from irflow.dialects import job
from irflow.dialects.bounds import describe, dynamic_axes, with_dynamic
from irflow.dialects.mesh import local_shape
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr, code_attr, hierarchy_of, nd_codes, nd_text, sbp_code
from irflow.errors import CompileError, source_location
from irflow.passes.sbp_rules import CLASS_SPLIT_OPS, carried, gathers_own_rows, logits_index, splits_classes

B = SbpAttr("broadcast")
ONE_DEVICE = PlacementAttr("cpu", ["0:0"])

# What a split variable's LAMB or LARS update takes the norms of its piece with: the op, the update's
# operands it reads (w, g and for LAMB the moments and step) and the properties it shares.
_NORMS: dict[type[job.NormUpdateOp], tuple[type[job.PieceNormsOp], tuple[int, ...], tuple[str, ...]]] = {
    job.LambUpdateOp: (job.LambNormsOp, (0, 1, 2, 3, 5), ("beta1", "beta2", "epsilon")),
    job.LarsUpdateOp: (job.LarsNormsOp, (0, 1), ()),
}


def default_arg_sbp(rank: int, mesh: Sequence[int]) -> NdSbpAttr:
    """Inputs without a hint are split along their first axis on every mesh axis (whole if scalar)."""
    return NdSbpAttr([SbpAttr("split", 0) if rank else B] * len(mesh))


def _prod(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _operands_text(sbps: Sequence[NdSbpAttr]) -> str:
    return "(" + ", ".join(nd_text(nd) for nd in sbps) + ")"


def _split_axes(*parts: SbpAttr) -> set[int]:
    return {c.axis.data for c in parts if c.kind.data == "split"}


def _padded(shape: Sequence[int], sbp: NdSbpAttr, mesh: Sequence[int]) -> bool:
    """Whether a device's piece of `shape` laid out as `sbp` ends in padding (a split that does not divide)."""
    sizes = list(shape)
    for c, p in zip(sbp.components, mesh):
        if c.kind.data == "split":
            if sizes[c.axis.data] % p:
                return True
            sizes[c.axis.data] //= p
    return False


@dataclass
class _Physical:
    """Rewrites one job.func into its per-device form."""

    func: job.FuncOp

    def __post_init__(self) -> None:
        placement = self.func.attributes.get("placement", ONE_DEVICE)
        assert isinstance(placement, PlacementAttr)
        self.home = placement
        self.home_devices = set(placement.devices)
        self.at(placement)

    def at(self, placement: PlacementAttr, where: Operation | None = None) -> None:
        """Lower what follows on `placement`'s devices (the func's, or a part of them)."""
        if placement != self.home and not set(placement.devices) <= self.home_devices:
            raise CompileError(
                f"'{where.name if where else self.func.name}' is placed on {placement}, outside the job's devices {self.home}",
                source_location(where or self.func),
            )
        self.placement = placement
        self.mesh = hierarchy_of(placement)

    def run(self) -> None:
        block = self.func.body.block
        if all(p == 1 for p in self.mesh):
            for op in [o for o in block.ops if isinstance(o, job.BoxingOp)]:
                op.res.replace_all_uses_with(op.x)
                Rewriter.erase_op(op)
            return
        # Logical operand shapes, read before any value gets its per-device type.
        self.logical_in = {op: [job.shape_of(v.type) for v in op.operands] for op in block.ops}
        self.arg_sbp = arg_sbp = self.argument_sbp()
        logical_args = [job.shape_of(a.type) for a in block.args]
        logical_results = [job.shape_of(t) for t in self.func.function_type.outputs]
        for arg, sbp in zip(list(block.args), arg_sbp):
            self.retype(arg, sbp)
        for op in list(block.ops):
            self.lower(op)
        self.at(self.home)
        ret = block.last_op
        assert isinstance(ret, job.ReturnOp)
        attrs = self.func.attributes
        attrs["mesh"] = job.i64_array(self.mesh)  # the job's: `at(self.home)` above
        attrs["arg_sbp"] = ArrayAttr(arg_sbp)
        attrs["arg_shapes"] = ArrayAttr([job.i64_array(s) for s in logical_args])
        attrs["result_sbp"] = ArrayAttr([self.sbp_of(v) for v in ret.operands])
        attrs["result_shapes"] = ArrayAttr([job.i64_array(s) for s in logical_results])
        self.func.properties["function_type"] = FunctionType.from_lists(
            [a.type for a in block.args], [v.type for v in ret.operands]
        )

    # ------------------------------------------------------------- values

    def argument_sbp(self) -> list[NdSbpAttr]:
        given = self.func.attributes.get("arg_sbp")
        args = self.func.body.block.args
        if isinstance(given, ArrayAttr):
            if len(given.data) != len(args):
                raise CompileError(
                    f"arg_sbp has {len(given.data)} entries for {len(args)} arguments", source_location(self.func)
                )
            return list(given.data)  # type: ignore[arg-type]
        return [default_arg_sbp(len(job.shape_of(a.type)), self.mesh) for a in args]

    def sbp_of(self, value: SSAValue) -> NdSbpAttr:
        owner = value.owner
        if isinstance(owner, Operation):
            sbp = owner.properties.get("sbp")
            if not isinstance(sbp, NdSbpAttr):
                raise CompileError(f"'{owner.name}' has no sbp: run sbp-infer before lower-to-physical", source_location(owner))
            return sbp
        return self.arg_sbp[value.index]  # type: ignore[union-attr]

    def local(self, logical: Sequence[int], sbp: NdSbpAttr | Sequence[SbpAttr], where: Operation) -> tuple[int, ...]:
        try:
            return local_shape(logical, sbp, self.mesh)
        except ValueError as e:
            raise CompileError(f"'{where.name}': {e}", source_location(where)) from e

    def retype(self, value: SSAValue, sbp: NdSbpAttr, where: Operation | None = None) -> SSAValue:
        t = value.type
        assert isinstance(t, TensorType)
        shape = self.local(job.shape_of(t), sbp, where or self.func)
        if shape == job.shape_of(t):
            return value
        # A dynamic axis split over the devices holds each device's own size, within the piece's bound.
        return Rewriter.replace_value_with_new_type(value, with_dynamic(job.tensor(shape, t.element_type), dynamic_axes(t)))

    # ------------------------------------------------------------- ops

    def lower(self, op: Operation) -> None:
        if isinstance(op, job.BoxingOp):
            self.lower_boxing(op)
            return
        if isinstance(op, job.NormUpdateOp):
            self.whole_norms(op)
            return
        if not isinstance(op, job.JobOp) or not op.results:
            return
        self.at(op.placement or self.home, op)
        sbp = self.sbp_of(op.results[0])
        if self.class_axes(op):
            self.class_split(op, sbp)
            return
        self.check_exact(op, sbp)
        if isinstance(op, job.VariableOp):
            op.attributes["logical_shape"] = job.i64_array(job.shape_of(op.res.type))
        if isinstance(op, job.NullaryOp) and any(c.kind.data == "partial_sum" for c in sbp.components):
            self.partial_source(op, sbp)
            return
        logical = job.shape_of(op.results[0].type)
        self.retype(op.results[0], sbp, op)
        if _padded(logical, sbp, self.mesh):
            op.attributes["logical_shape"] = job.i64_array(logical)  # detect_anomaly's check skips the padding
        if isinstance(op, (job.SliceOp, job.SliceGradOp)):
            self.slice_whole_pieces(op, sbp)
        self.pin_sized_by_one_row(op)
        try:
            op.verify_()
        except VerifyException as e:
            raise CompileError(
                f"'{op.name}' with sbp {_operands_text(self.sbp_in(op))} -> {nd_text(sbp)} does not fit per-device pieces: {e}",
                source_location(op),
            ) from e
        if isinstance(op, job.ReduceMeanOp) and self.reduced_axes(op) & _split_axes(*self.sbp_in(op)[0].components):
            if self.reduced_axes(op) & set(dynamic_axes(op.x.type)):
                self.mean_over_dynamic_split_axis(op)
            else:
                self.mean_over_split_axis(op)

    def pin_sized_by_one_row(self, op: job.JobOp) -> None:
        """Pin the dynamic operand axes whose size a static operand fixed in the logical op, where that operand's
        piece has one row: numpy's broadcasting would take it for a broadcast axis, and a device with no rows of
        its own would give no rows instead of the logical op's error. The pin makes the same check per device."""
        types = [o.type for o in op.operands]
        if not any(dynamic_axes(t) for t in types):
            return
        groups = op.size_groups(types, op.properties)
        if not groups:
            return
        inferred = type(op).dynamic_result(types, op.properties, op.results[0].type)
        lost = set(dynamic_axes(inferred)) - set(dynamic_axes(op.results[0].type))
        pins: dict[int, list[int]] = {}
        for r, members in groups:
            if r in lost:
                for i, a in members:
                    if a in dynamic_axes(types[i]):
                        pins.setdefault(i, []).append(a)
        for i, axes in pins.items():
            sbp = self.sbp_in(op)[i]
            op.operands[i] = self.emit(job.PinSizeOp, op.operands[i], list(sbp.components), op, axes=job.i64_array(axes))

    def sbp_in(self, op: Operation) -> list[NdSbpAttr]:
        given = op.attributes.get("sbp_in")
        if isinstance(given, ArrayAttr):
            return list(given.data)  # type: ignore[arg-type]
        return [self.sbp_of(v) for v in op.operands]

    def check_exact(self, op: job.JobOp, sbp: NdSbpAttr) -> None:
        """Refuse the few signatures whose per-device op would not compute the logical result."""
        ins, shapes = self.sbp_in(op), self.logical_in[op]
        split_in = _split_axes(*ins[0].components) if ins else set()
        if isinstance(op, (job.SliceOp, job.SliceGradOp)):
            full = shapes[0] if isinstance(op, job.SliceOp) else job.shape_of(op.results[0].type)
            start, stop, step = (job.ints(op.properties, k) for k in ("start", "stop", "step"))
            for axis in split_in if isinstance(op, job.SliceOp) else _split_axes(*sbp.components):
                if (start[axis], stop[axis], step[axis]) != (0, full[axis], 1):
                    raise CompileError(
                        f"'{op.name}' slices axis {axis}, which is split: per-device slices would differ", source_location(op)
                    )
        if isinstance(op, job.ReshapeOp):
            out = job.shape_of(op.res.type)
            for c_in, c_out in zip(ins[0].components, sbp.components):
                i, j = c_in.axis.data, c_out.axis.data
                if c_in.kind.data == "split" and c_out.kind.data == "split" and _prod(shapes[0][:i]) != _prod(out[:j]):
                    raise CompileError(
                        f"'{op.name}' of {shapes[0]} to {out}: {c_in} does not map to {c_out}, the pieces would differ",
                        source_location(op),
                    )
        if isinstance(op, job.CrossEntropyOp | job.SoftmaxLikeOp) and self.normalized_axis(op) in split_in:
            raise CompileError(
                f"'{op.name}' normalizes over axis {self.normalized_axis(op)}, which is split: not supported on many devices",
                source_location(op),
            )
        for axis in self.reduced_axes(op) & split_in:
            parts = [p for c, p in zip(ins[0].components, self.mesh) if c.kind.data == "split" and c.axis.data == axis]
            size = shapes[0][axis]
            for p in parts:
                if size % p:
                    raise CompileError(
                        f"'{op.name}' reduces over axis {axis} of size {size}, split unevenly over {p} devices: "
                        "the padding would join the result",
                        source_location(op),
                    )
                size //= p

    def normalized_axis(self, op: job.CrossEntropyOp | job.SoftmaxLikeOp) -> int:
        """The axis a softmax (its `axis`) or a cross-entropy (the classes, last) normalizes over: other axes may split."""
        rank = len(self.logical_in[op][0])
        if isinstance(op, job.SoftmaxLikeOp):
            return job.normalize_axis(job.integer(op.properties, "axis", -1), rank, "softmax axis")
        return rank - 1

    def slice_whole_pieces(self, op: job.SliceOp | job.SliceGradOp, sbp: NdSbpAttr) -> None:
        """A slice keeps its split axes whole (check_exact): on each device they end at the piece's end.

        The frontend wrote the logical extent as `stop`; a piece is shorter, so
        the per-device slice would be out of range.
        """
        if isinstance(op, job.SliceOp):
            cut, split = op.operands[0], _split_axes(*self.sbp_in(op)[0].components)
        else:
            cut, split = op.results[0], _split_axes(*sbp.components)
        stop = list(job.ints(op.properties, "stop"))
        for axis in split:
            stop[axis] = job.shape_of(cut.type)[axis]
        op.properties["stop"] = job.i64_array(stop)

    def reduced_axes(self, op: job.JobOp) -> set[int]:
        """Operand 0's axes that `op` sums or compares over (where padding would leak into the result)."""
        rank = len(self.logical_in[op][0]) if self.logical_in[op] else 0
        if isinstance(op, job.ReduceOp):
            return {job.normalize_axis(a, rank, "axis") for a in job.ints(op.properties, "axes")}
        if isinstance(op, job.MatmulOp):
            return {rank - 2 if job.flag(op.properties, "transpose_a") else rank - 1}
        return set()

    def partial_source(self, op: job.JobOp, sbp: NdSbpAttr) -> None:
        """A source produced as partial_sum: make it whole, then keep it on coordinate 0 of those mesh axes."""
        whole = [B if c.kind.data == "partial_sum" else c for c in sbp.components]
        op.properties["sbp"] = NdSbpAttr(whole)
        value = self.retype(op.results[0], NdSbpAttr(whole), op)
        uses = list(value.uses)
        current = list(whole)
        for axis, c in enumerate(sbp.components):
            if c.kind.data == "partial_sum":
                current[axis] = c
                value = self.emit(job.BroadcastToPartialOp, value, current, op, after=value, mesh_axis=axis)
        for use in uses:
            use.operation.operands[use.index] = value

    def class_axes(self, op: job.JobOp) -> list[int]:
        """The mesh axes that split a cross-entropy's logits (or a softmax's input) over its classes."""
        if not isinstance(op, CLASS_SPLIT_OPS):
            return []
        logits = self.sbp_in(op)[logits_index(op)]
        return [k for k, c in enumerate(logits.components) if splits_classes(op, [sbp_code(c)] * len(op.operands))]

    def class_split(self, op: job.JobOp, sbp: NdSbpAttr) -> None:
        """Sparse cross-entropy or softmax (or their gradients) with the classes split on a mesh axis, in stages.

        Each row's max over the device's classes, all-reduced (max); its sum of
        exp(x - max), all-reduced (sum); then each device's part of the loss
        (partial_sum: lse on coordinate 0, minus the label's logit where it
        lives), its chunk of the gradient or of the softmax. Softmax's backward
        all-reduces each row's sum of dy * y instead. Padding classes are ignored.
        """
        axes = self.class_axes(op)
        if len(axes) > 1:
            raise CompileError(
                f"'{op.name}' splits the classes on mesh axes {axes}: split them on one mesh axis", source_location(op)
            )
        k, at = axes[0], logits_index(op)
        logits, labels = op.operands[at], op.operands[at + 1] if at + 1 < len(op.operands) else None
        classes = self.logical_in[op][at][1]
        rows = [c if j != k else B for j, c in enumerate(self.sbp_in(op)[at].components)]
        partial = list(rows)
        props: dict[str, object] = {"mesh": job.i64_array(self.mesh), "mesh_axis": k, "classes": classes}

        def stage(cls: type[job.JobOp], operands: list[SSAValue], kind: SbpAttr, **more: object) -> SSAValue:
            partial[k] = kind
            return self.emit(cls, operands, list(partial), op, **props, **more)

        if isinstance(op, job.SoftmaxGradOp):
            dot = stage(job.ClassSplitDotOp, [op.operands[0], logits], SbpAttr("partial_sum"))
            dot = self.emit(job.AllReduceOp, [dot], rows, op, mesh_axis=k, reduction="sum")
            value = stage(job.ClassSplitSoftmaxGradOp, [op.operands[0], logits, dot], sbp.components.data[k])
            op.results[0].replace_all_uses_with(value)
            Rewriter.erase_op(op)
            return
        peak = stage(job.ClassSplitMaxOp, [logits], SbpAttr("partial_sum", reduction="max"))
        peak = self.emit(job.AllReduceOp, [peak], rows, op, mesh_axis=k, reduction="max")
        total = stage(job.ClassSplitSumExpOp, [logits, peak], SbpAttr("partial_sum"))
        total = self.emit(job.AllReduceOp, [total], rows, op, mesh_axis=k, reduction="sum")
        if isinstance(op, job.SoftmaxOp):
            value = stage(job.ClassSplitSoftmaxOp, [logits, peak, total], sbp.components.data[k])
        elif isinstance(op, job.CrossEntropyGradOp):
            value = stage(job.ClassSplitCrossEntropyGradOp, [op.operands[0], logits, peak, total, labels], sbp.components.data[k])  # type: ignore[list-item]
        else:
            value = stage(job.ClassSplitCrossEntropyOp, [logits, peak, total, labels], sbp.components.data[k])  # type: ignore[list-item]
        op.results[0].replace_all_uses_with(value)
        Rewriter.erase_op(op)

    def whole_norms(self, op: job.NormUpdateOp) -> None:
        """LAMB and LARS scale a variable's step by norms of all of it. On a split variable each device
        takes the squared norms of its piece's real entries (a partial sum), all-reduced over the mesh axes
        that split it, and the update reads them as its `norms` instead of taking its piece's."""
        self.at(op.placement or self.home, op)
        layout = self.sbp_in(op)[0]
        split = [k for k, c in enumerate(layout.components) if c.kind.data == "split" and self.mesh[k] > 1]
        if not split:
            return
        kind, reads, props = _NORMS[type(op)]
        current = [SbpAttr("partial_sum") if k in split else B for k in range(len(self.mesh))]
        norms = self.emit(
            kind, [op.operands[i] for i in reads], current, op, mesh=job.i64_array(self.mesh), layout=layout,
            logical_shape=job.i64_array(self.logical_in[op][0]), **{name: op.properties[name] for name in props},
        )  # fmt: skip
        for k in split:
            current[k] = B
            norms = self.emit(job.AllReduceOp, norms, current, op, mesh_axis=k, reduction="sum")
        attributes = dict(op.attributes)
        attributes["sbp_in"] = ArrayAttr([*self.sbp_in(op), NdSbpAttr(current)])
        update = type(op).create(operands=[*op.operands, norms], properties=dict(op.properties), attributes=attributes)
        update.location = op.location
        op.parent_block().insert_op_before(update, op)  # type: ignore[union-attr]
        Rewriter.erase_op(op)

    def mean_over_split_axis(self, op: job.ReduceMeanOp) -> None:
        """A mean over split axes: each device sums its piece and divides by the logical count, not the piece's."""
        count = 1
        for axis in self.reduced_axes(op):
            count *= self.logical_in[op][0][axis]
        total = job.ReduceSumOp.create(
            operands=[op.x], result_types=[op.res.type], properties=dict(op.properties), attributes=dict(op.attributes)
        )
        element = job.dtype_of(op.res.type)
        scale = job.FillOp.create(
            result_types=[job.tensor((), element)],
            properties={"value": FloatAttr(1.0 / count, f64), "sbp": NdSbpAttr([B] * len(self.mesh)), "placement": self.placement},
        )
        mean = job.MulOp.make([total.res, scale.res], sbp=op.sbp, placement=self.placement)
        for new in (total, scale, mean):
            new.location = op.location
            op.parent_block().insert_op_before(new, op)  # type: ignore[union-attr]
        op.res.replace_all_uses_with(mean.res)
        Rewriter.erase_op(op)

    def mean_over_dynamic_split_axis(self, op: job.ReduceMeanOp) -> None:
        """A mean over a split axis whose size is each device's own: each device sums its piece
        and counts its elements (partial sums both), and divides by the count all-reduced."""
        axes = sorted(self.reduced_axes(op))
        ins = self.sbp_in(op)[0].components
        split = [k for k, c in enumerate(ins) if c.kind.data == "split" and c.axis.data in axes]
        total = job.ReduceSumOp.create(
            operands=[op.x], result_types=[op.res.type], properties=dict(op.properties), attributes=dict(op.attributes)
        )
        total.location = op.location
        op.parent_block().insert_op_before(total, op)  # type: ignore[union-attr]
        counted = [SbpAttr("partial_sum") if k in split else B for k in range(len(self.mesh))]
        count = self.emit(job.SizeOfOp, op.x, counted, op, result=job.tensor((), job.dtype_of(op.res.type)), axes=axes)
        for k in split:
            counted[k] = B
            count = self.emit(job.AllReduceOp, count, counted, op, mesh_axis=k, reduction="sum")
        mean = self.emit(job.DivOp, [total.res, count], list(op.sbp.components), op)  # type: ignore[union-attr]
        op.res.replace_all_uses_with(mean)
        Rewriter.erase_op(op)

    # ------------------------------------------------------------- boxing

    def lower_boxing(self, op: job.BoxingOp) -> None:
        """A boxing on one placement becomes per-axis conversions; one between placements a transfer."""
        if op.src_sbp is None or op.sbp is None:
            raise CompileError("job.boxing without src_sbp and sbp: run sbp-infer first", source_location(op))
        src_place, dst_place = op.src_placement or op.placement or self.home, op.placement or self.home
        logical = job.shape_of(op.res.type)
        src, dst = list(op.src_sbp.components), list(op.sbp.components)
        if src != dst or src_place != dst_place:
            self.check_static_boxing(op, src, dst, src_place == dst_place)
        self.at(src_place, op)
        if src_place.devices == dst_place.devices and self.mesh == hierarchy_of(dst_place):
            value = self.convert(op.x, logical, src, dst, op)
        else:
            value = self.transfer(op.x, logical, src, dst, dst_place, op)
        op.res.replace_all_uses_with(value)
        Rewriter.erase_op(op)

    def check_static_boxing(self, op: job.BoxingOp, src: list[SbpAttr], dst: list[SbpAttr], same_place: bool) -> None:
        """Collectives move static pieces, and one dynamic move: each device's own rows gathered (split(0) to
        broadcast on the mesh axes that split them, every other axis static), as `sbp_rules.gathers_own_rows`
        allows."""
        dynamic = dynamic_axes(op.x.type)
        if not dynamic or same_place and gathers_own_rows(dynamic, tuple(map(sbp_code, src)), tuple(map(sbp_code, dst))):
            return
        users = [use.operation.name for use in op.res.uses]
        raise CompileError(
            f"'{users[0] if users else op.name}' needs {nd_text(NdSbpAttr(dst))} of a value that is {nd_text(NdSbpAttr(src))} "
            f"with dynamic axes {list(dynamic)} {describe(op.res.type)}: each device holds its own sizes there, "
            "and irflow gathers only the rows of a value split along axis 0 to broadcast, scattering, reducing "
            "or transferring none (reduce them over their dynamic axes first)",
            source_location(op),
        )

    def transfer(
        self, value: SSAValue, logical: tuple[int, ...], src: list[SbpAttr], dst: list[SbpAttr],
        dst_place: PlacementAttr, op: job.BoxingOp,
    ) -> SSAValue:  # fmt: skip
        """n -> m devices: partial sums are reduced where they are, the value moves as whole or split
        pieces (only the boxes each destination needs), and becomes partial again where it arrives."""
        src_place = self.placement
        target = nd_codes(NdSbpAttr(dst))
        sent = [code_attr(c) for c in carried(nd_codes(NdSbpAttr(src)), len(logical), target)]
        value = self.convert(value, logical, src, sent, op)
        self.at(dst_place, op)
        arrived = [code_attr(c) for c in carried(target, len(logical), target)]
        new = job.TransferOp.make(
            [value], src_sbp=NdSbpAttr(sent), src_placement=src_place, logical_shape=job.i64_array(logical),
            sbp=NdSbpAttr(arrived), placement=dst_place,
        )  # fmt: skip
        new.location = op.location
        if "reason" in op.attributes:
            new.attributes["reason"] = op.attributes["reason"]
        op.parent_block().insert_op_before(new, op)  # type: ignore[union-attr]
        return self.convert(new.res, logical, arrived, dst, op)

    def convert(
        self, value: SSAValue, logical: tuple[int, ...], src: list[SbpAttr], dst: list[SbpAttr], op: job.BoxingOp
    ) -> SSAValue:
        """The per-device ops turning `src` into `dst`, one mesh axis at a time.

        Components before the first difference stay as they are (they are the
        outer cut). If the remaining axes touch disjoint tensor axes, each is
        converted directly; otherwise every remaining axis goes through
        broadcast (last axis first, then back first axis first), so that a
        conversion on mesh axis k never meets a later axis cutting the same
        tensor axis.
        """
        differ = [k for k in range(len(src)) if src[k] != dst[k]]
        if not differ:
            return value
        k0 = differ[0]
        touched = [_split_axes(src[k], dst[k]) for k in range(len(src))]
        direct = all(
            not (touched[j] & touched[k])
            for j in range(k0, len(src))
            for k in range(k0, len(src))
            if j != k and (j in differ or k in differ)
        )
        current = list(src)
        steps = [(k, dst[k]) for k in reversed(differ)] if direct else (
            [(k, B) for k in reversed(range(k0, len(src)))] + [(k, dst[k]) for k in range(k0, len(src))]
        )  # fmt: skip
        for k, target in steps:
            value = self.convert_axis(value, logical, current, k, target, op)
        return value

    def convert_axis(
        self, value: SSAValue, logical: tuple[int, ...], current: list[SbpAttr], k: int, target: SbpAttr, op: job.BoxingOp
    ) -> SSAValue:
        """Turn component `k` of `current` into `target` (updating `current`)."""
        source = current[k]
        if source == target:
            return value
        p = self.mesh[k]
        outer = self.local(logical, list(current[:k]) + [B] * (len(current) - k), op)  # the group's view
        kind, to = source.kind.data, target.kind.data
        after = list(current)
        after[k] = target

        def emit(cls: type[job.JobOp], x: SSAValue, sbp: list[SbpAttr], **props: object) -> SSAValue:
            return self.emit(cls, x, sbp, op, mesh_axis=k, **props)

        if p == 1:
            pass
        elif kind == "partial_sum" and to == "partial_sum":
            value = self.convert_axis(value, logical, current, k, B, op)
            return self.convert_axis(value, logical, current, k, target, op)
        elif kind == "split" and to == "broadcast":
            i = source.axis.data
            value = emit(job.AllGatherOp, value, after, axis=i)
            value = self.unpad(value, i, outer[i], after, op)
        elif kind == "partial_sum" and to == "broadcast":
            value = emit(job.AllReduceOp, value, after, reduction=source.reduction.data)
        elif kind == "partial_sum" and to == "split":
            i = target.axis.data
            value = self.pad(value, i, p * -(-outer[i] // p), current, op)
            value = emit(job.ReduceScatterOp, value, after, axis=i, reduction=source.reduction.data)
        elif kind == "split" and to == "split":
            i, j = source.axis.data, target.axis.data
            value = self.pad(value, j, p * -(-outer[j] // p), current, op)
            value = emit(job.AllToAllOp, value, after, split_axis=j, concat_axis=i)
            value = self.unpad(value, i, outer[i], after, op)
        elif kind == "broadcast" and to == "split":
            value = emit(job.ShardSliceOp, value, after, axis=target.axis.data)
        elif kind == "broadcast" and to == "partial_sum":
            value = emit(job.BroadcastToPartialOp, value, after)
        elif kind == "split" and to == "partial_sum":
            i = source.axis.data
            whole = self.retype_like(value, i, outer[i])
            value = self.emit(job.ShardEmbedOp, value, after, op, result=whole, mesh_axis=k, axis=i)
        current[k] = target
        return value

    def retype_like(self, value: SSAValue, axis: int, size: int) -> TensorType:
        t = value.type
        assert isinstance(t, TensorType)
        shape = list(job.shape_of(t))
        shape[axis] = size
        return job.tensor(shape, t.element_type)

    def pad(self, value: SSAValue, axis: int, size: int, sbp: list[SbpAttr], op: Operation) -> SSAValue:
        """Zeros after the end of `axis` up to `size` (a collective cuts it into equal chunks)."""
        if job.shape_of(value.type)[axis] == size:
            return value
        return self.emit(job.PadOp, value, sbp, op, result=self.retype_like(value, axis, size))

    def unpad(self, value: SSAValue, axis: int, size: int, sbp: list[SbpAttr], op: Operation) -> SSAValue:
        """Cut the padding after the first `size` entries of `axis` (what a gather of padded chunks leaves)."""
        shape = job.shape_of(value.type)
        if shape[axis] == size:
            return value
        stop = list(shape)
        stop[axis] = size
        return self.emit(job.SliceOp, value, sbp, op, start=[0] * len(shape), stop=stop, step=[1] * len(shape))

    def emit(
        self,
        cls: type[job.JobOp],
        x: SSAValue | list[SSAValue],
        sbp: list[SbpAttr],
        origin: Operation,
        after: SSAValue | None = None,
        result: Attribute | None = None,
        **props: object,
    ) -> SSAValue:
        """Insert a per-device op (before `origin`, or right after `after`'s definition) with the origin's location."""
        mesh_props = {"mesh": job.i64_array(self.mesh)} if issubclass(cls, job.MeshOp) else {}
        new = cls.make(x if isinstance(x, list) else [x], result, **mesh_props, **props)
        new.properties["sbp"] = NdSbpAttr(list(sbp))
        new.properties["placement"] = self.placement
        new.location = origin.location
        if "reason" in origin.attributes:
            new.attributes["reason"] = origin.attributes["reason"]
        owner = after.owner if after is not None else None
        if isinstance(owner, Operation):
            owner.parent_block().insert_op_after(new, owner)  # type: ignore[union-attr]
        else:
            origin.parent_block().insert_op_before(new, origin)  # type: ignore[union-attr]
        return new.results[0]


@dataclass(frozen=True)
class LowerToPhysicalPass(ModulePass):
    """Rewrite each distributed job.func into the one per-device program every device of its placement runs.

    A func that has `mesh` is per-device already and is left as it is: lowering
    it again would split its pieces once more (and record them as its logical
    shapes), so running the pass twice changes nothing.
    """

    name = "lower-to-physical"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.body.block.ops if isinstance(o, job.FuncOp) and "mesh" not in o.attributes]:
            _Physical(func).run()
