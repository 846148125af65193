"""The buffer dialect: per-device programs over memrefs, ready to execute.

A `buffer.program` is a flat schedule.  Storage comes from `buffer.alloc`
until `plan-memory` replaces every alloc with a `buffer.view` at a fixed byte
offset of the device's single `buffer.arena` (MLIR's `memref.view` idiom).
Each op declares which operands it reads and writes (`OperandEffects`), so
liveness is a property of the IR alone.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import (
    EffectInstance,
    HasParent,
    IsolatedFromAbove,
    MemoryAllocEffect,
    MemoryEffect,
    MemoryEffectKind,
    NoMemoryEffect,
    NoTerminator,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from irflow.dialects.job import to_attr
from irflow.dialects.mesh import local_shape
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, hierarchy_of
from irflow.textir.verification import signature_verifier

REDUCTIONS = ("sum", "max", "min")


def nbytes(t: Attribute) -> int:
    """Bytes a statically shaped memref occupies (dense, row-major)."""
    assert isinstance(t, MemRefType)
    n = 1
    for d in t.get_shape():
        n *= d
    width = t.element_type.bitwidth if isinstance(t.element_type, IntegerType) else t.element_type.bitwidth  # type: ignore[union-attr]
    return n * max(1, width // 8)


class OperandEffects(MemoryEffect):
    """Reads and writes tied to operands, from the op's `reads()` / `writes()`."""

    @classmethod
    def get_effects(cls, op: Operation) -> set[EffectInstance]:
        assert isinstance(op, BufferOp)
        return {EffectInstance(MemoryEffectKind.READ, v) for v in op.reads()} | {
            EffectInstance(MemoryEffectKind.WRITE, v) for v in op.writes()
        }


class BufferOp(IRDLOperation):
    """An op of a schedule: reads some operands, writes others, in program order."""

    irdl_options = (ParsePropInAttrDict(),)

    def reads(self) -> Sequence[SSAValue]:
        return ()

    def writes(self) -> Sequence[SSAValue]:
        return ()

    def reads_operand(self, index: int) -> bool:
        """Whether the op reads the buffer it takes as operand `index` (asked of each use of a buffer)."""
        return self.operands[index] in self.reads()

    def writes_operand(self, index: int) -> bool:
        """Whether the op writes the buffer it takes as operand `index`."""
        return self.operands[index] in self.writes()


def _static_memref(t: Attribute, what: str) -> MemRefType:
    if not isinstance(t, MemRefType) or any(d < 0 for d in t.get_shape()):
        raise VerifyException(f"{what} must be a statically shaped memref, got {t}")
    return t


# ----------------------------------------------------------------- storage


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """One device's program for one job; the same program runs on every device of a placement (SPMD)."""

    name = "buffer.program"
    sym_name = prop_def(SymbolNameConstraint())
    device = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface(), NoTerminator())
    assembly_format = "$sym_name `on` $device attr-dict-with-keyword $body"

    def __init__(self, sym_name: str, device: str, ops: Sequence[Operation] = ()):
        super().__init__(
            properties={"sym_name": StringAttr(sym_name), "device": StringAttr(device)},
            regions=[Region(Block(ops))],
        )

    def verify_(self) -> None:
        arenas = [op for op in self.body.block.ops if isinstance(op, ArenaOp)]
        if len(arenas) > 1:
            raise VerifyException(f"a program has one arena per device, found {len(arenas)}")


@irdl_op_definition
class ArenaOp(BufferOp):
    """The device's one block of memory; every planned buffer is a view into it."""

    name = "buffer.arena"
    size = prop_def(IntegerAttr)
    alignment = prop_def(IntegerAttr)
    res = result_def(MemRefType)
    traits = traits_def(MemoryAllocEffect(), HasParent(ProgramOp))
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, size: int, alignment: int):
        super().__init__(
            properties={"size": IntegerAttr(size, i64), "alignment": IntegerAttr(alignment, i64)},
            result_types=[MemRefType(i8, [size])],
        )

    def verify_(self) -> None:
        align = self.alignment.value.data
        if align <= 0 or align & (align - 1):
            raise VerifyException(f"arena alignment must be a power of two, got {align}")
        if self.res.type != MemRefType(i8, [self.size.value.data]):
            raise VerifyException(f"arena of {self.size.value.data} bytes must have type memref<{self.size.value.data}xi8>")


@irdl_op_definition
class ViewOp(BufferOp):
    """A typed buffer at a static byte offset of the arena."""

    name = "buffer.view"
    arena = operand_def(MemRefType)
    offset = prop_def(IntegerAttr)
    res = result_def(MemRefType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$arena attr-dict `:` type($arena) `->` type($res)"

    def __init__(self, arena: SSAValue, offset: int, result_type: MemRefType):
        # Built directly, with the offsets' attributes shared, for KernelOp's reason (plan-memory makes thousands).
        Operation.__init__(self, operands=[arena], properties={"offset": to_attr(offset)}, result_types=[result_type])

    def verify_(self) -> None:
        owner = self.arena.owner
        offset = self.offset.value.data
        size = nbytes(_static_memref(self.res.type, "view"))
        if not isinstance(owner, ArenaOp):
            raise VerifyException("buffer.view must view a buffer.arena")
        arena_size, align = owner.size.value.data, owner.alignment.value.data
        if offset < 0 or offset + size > arena_size:
            raise VerifyException(f"view [{offset}, {offset + size}) is out of the arena's {arena_size} bytes")
        if offset % align:
            raise VerifyException(f"view offset {offset} is not a multiple of the arena alignment {align}")


@irdl_op_definition
class AllocOp(BufferOp):
    """A buffer not yet placed; `plan-memory` turns it into a view."""

    name = "buffer.alloc"
    res = result_def(MemRefType)
    traits = traits_def(MemoryAllocEffect())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, result_type: MemRefType):
        Operation.__init__(self, result_types=[result_type])  # built directly, for KernelOp's reason

    def verify_(self) -> None:
        _static_memref(self.res.type, "alloc")


@irdl_op_definition
class VariableOp(BufferOp):
    """A model variable, stored by name in the device's variable store outside the arena."""

    name = "buffer.variable"
    var_name = prop_def(StringAttr, prop_name="name")
    res = result_def(MemRefType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, name: str, result_type: MemRefType):
        super().__init__(properties={"name": StringAttr(name)}, result_types=[result_type])


@irdl_op_definition
class ConstantOp(BufferOp):
    """Read-only data baked into the executable (kept outside the arena)."""

    name = "buffer.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    res = result_def(MemRefType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "attr-dict `:` type($res)"

    def verify_(self) -> None:
        vt, rt = self.value.type, self.res.type
        assert isinstance(rt, MemRefType)
        if tuple(vt.get_shape()) != tuple(rt.get_shape()) or vt.element_type != rt.element_type:
            raise VerifyException(f"constant of type {vt} cannot fill {rt}")


# ----------------------------------------------------------------- one-buffer ops


class OneBufferOp(BufferOp):
    """An op that either fills one buffer (`WRITES`) or reads it: host transfers, send/recv."""

    buf = operand_def(MemRefType)
    traits = traits_def(OperandEffects())
    assembly_format = "$buf attr-dict `:` type($buf)"
    WRITES: ClassVar[bool]

    def reads(self) -> Sequence[SSAValue]:
        return () if self.WRITES else (self.buf,)

    def writes(self) -> Sequence[SSAValue]:
        return (self.buf,) if self.WRITES else ()


@irdl_op_definition
class InputOp(OneBufferOp):
    """Copies the call's argument `index` from the host into the buffer."""

    name = "buffer.input"
    index = prop_def(IntegerAttr)
    WRITES: ClassVar[bool] = True


@irdl_op_definition
class OutputOp(OneBufferOp):
    """Copies the buffer to the host as the call's result `index`."""

    name = "buffer.output"
    index = prop_def(IntegerAttr)
    WRITES: ClassVar[bool] = False


# ----------------------------------------------------------------- compute


@irdl_op_definition
class KernelOp(BufferOp):
    """Runs a named kernel with the parameters in `params` (see docs/kernels.md).

    The parameters have a dictionary of their own, so a parameter may take any
    name (pooling's `kernel`, say) without meeting the op's own properties;
    discardable attributes follow the `attributes` keyword.
    """

    name = "buffer.kernel"
    kernel = prop_def(StringAttr)
    params = opt_prop_def(DictionaryAttr)
    ins = var_operand_def(MemRefType)
    outs = var_operand_def(MemRefType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(OperandEffects())
    assembly_format = (
        "$kernel (`ins` `(` $ins^ `:` type($ins) `)`)? `outs` `(` $outs `:` type($outs) `)` ($params^)? "
        "attr-dict-with-keyword"
    )

    def __init__(
        self,
        kernel: str,
        ins: Sequence[SSAValue],
        outs: Sequence[SSAValue],
        params: Mapping[str, Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ):
        """The op IRDL's builder would make, built directly: the builder checks the operand groups
        this signature already fixes and packs a new segment-size array for every kernel, which
        took most of a kernel's construction (a big train job makes thousands)."""
        properties: dict[str, Attribute] = {"kernel": to_attr(kernel)}
        if params:
            properties["params"] = DictionaryAttr(dict(params))
        properties[AttrSizedOperandSegments.attribute_name] = _segment_sizes(len(ins), len(outs))
        Operation.__init__(self, operands=[*ins, *outs], properties=properties, attributes=dict(attributes or {}))

    def parameters(self) -> Mapping[str, Attribute]:
        """The kernel's parameters by name (empty when it has none)."""
        return self.params.data if self.params is not None else {}

    def reads(self) -> Sequence[SSAValue]:
        return tuple(self.ins)

    def writes(self) -> Sequence[SSAValue]:
        return tuple(self.outs)

    def reads_operand(self, index: int) -> bool:
        return index < len(self.ins)

    def writes_operand(self, index: int) -> bool:
        return index >= len(self.ins)

    @signature_verifier
    def verify_(self) -> None:
        if not self.outs:
            raise VerifyException(f"kernel '{self.kernel.data}' writes no output")


@functools.cache
def _segment_sizes(ins: int, outs: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, [ins, outs])


# operandSegmentSizes (an i32 array) by its packed bytes: hashing the bytes is cheap, unpacking is not.
_UNPACKED: dict[bytes, tuple[int, ...]] = {}


@dataclass(frozen=True)
class _KernelOperands:
    """`KernelOp.ins` and `.outs` as IRDL's accessors give them, with the segment sizes unpacked once per
    distinct array instead of at every access: passes and the executor read them thousands of times,
    and unpacking was the larger part of each read."""

    group: int  # 0: ins, 1: outs

    def __get__(self, op: Operation, owner: type | None = None) -> Sequence[SSAValue]:
        packed = op.properties[AttrSizedOperandSegments.attribute_name]
        assert isinstance(packed, DenseArrayBase)
        sizes = _UNPACKED.get(packed.data.data)
        if sizes is None:
            sizes = _UNPACKED[packed.data.data] = packed.get_values()
        start = sum(sizes[: self.group])
        return op.operands[start : start + sizes[self.group]]


KernelOp.ins = _KernelOperands(0)  # type: ignore[assignment]
KernelOp.outs = _KernelOperands(1)  # type: ignore[assignment]


class SrcToDstOp(BufferOp):
    """An op that reads buffer `src` and writes buffer `dst` (`buffer.copy %a, %b : t, u`)."""

    src = operand_def(MemRefType)
    dst = operand_def(MemRefType)
    traits = traits_def(OperandEffects())
    assembly_format = "$src `,` $dst attr-dict `:` type($src) `,` type($dst)"

    def reads(self) -> Sequence[SSAValue]:
        return (self.src,)

    def writes(self) -> Sequence[SSAValue]:
        return (self.dst,)


@irdl_op_definition
class CopyOp(SrcToDstOp):
    name = "buffer.copy"

    def verify_(self) -> None:
        if nbytes(self.src.type) != nbytes(self.dst.type):
            raise VerifyException(f"copy between buffers of different sizes: {self.src.type} -> {self.dst.type}")


# ----------------------------------------------------------------- collectives


class CollectiveOp(SrcToDstOp):
    """Communication within this device's group along one axis of the device mesh.

    `mesh` is the placement's hierarchy and `mesh_axis` one of its axes: the
    group is every device that shares this device's other coordinates (on a
    2x2 mesh, axis 0 pairs ranks {0, 2} and {1, 3}). The group depends on the
    rank, so one program serves every device (SPMD).
    """

    mesh = prop_def(DenseArrayBase)
    mesh_axis = prop_def(IntegerAttr)

    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.mesh.get_values())

    def group_size(self) -> int:
        return self.mesh_shape()[self.mesh_axis.value.data]

    def verify_(self) -> None:
        mesh, axis = self.mesh_shape(), self.mesh_axis.value.data
        if not mesh or min(mesh) <= 0:
            raise VerifyException(f"mesh must list positive extents, got {list(mesh)}")
        if not 0 <= axis < len(mesh):
            raise VerifyException(f"mesh_axis {axis} out of range for the {len(mesh)}-d mesh {list(mesh)}")
        reduction = self.properties.get("reduction")
        if isinstance(reduction, StringAttr) and reduction.data not in REDUCTIONS:
            raise VerifyException(f"unknown reduction '{reduction.data}', expected one of {', '.join(REDUCTIONS)}")
        root = self.properties.get("root")
        if isinstance(root, IntegerAttr) and not 0 <= root.value.data < mesh[axis]:
            raise VerifyException(f"root {root.value.data} is not a coordinate of mesh axis {axis} (size {mesh[axis]})")
        self.verify_shapes(mesh[axis])

    def verify_shapes(self, n: int) -> None:
        if self.src.type != self.dst.type:
            raise VerifyException(f"{self.name} keeps the buffer type: {self.src.type} vs {self.dst.type}")


def _shape(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, MemRefType)
    return tuple(t.get_shape())


def _scaled(shape: tuple[int, ...], axis: int, factor: int) -> tuple[int, ...]:
    if not 0 <= axis < len(shape):
        raise VerifyException(f"axis {axis} out of range for shape {shape}")
    return shape[:axis] + (shape[axis] * factor,) + shape[axis + 1 :]


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    """dst = the reduction of every src of the group (sums in coordinate order)."""

    name = "buffer.all_reduce"
    reduction = prop_def(StringAttr)


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    """dst = concat of every rank's src along `axis`."""

    name = "buffer.all_gather"
    axis = prop_def(IntegerAttr)

    def verify_shapes(self, n: int) -> None:
        src, axis = _shape(self.src.type), self.axis.value.data
        # Each device's own rows (a dynamic axis 0): the result holds theirs one after another (docs/dynamic.md).
        uneven = axis == 0 and src[:1] == (DYNAMIC_INDEX,) and DYNAMIC_INDEX not in src[1:]
        if (src if uneven else _scaled(src, axis, n)) != _shape(self.dst.type):
            raise VerifyException(f"all_gather of {self.src.type} over {n} ranks cannot produce {self.dst.type}")


@irdl_op_definition
class ReduceScatterOp(CollectiveOp):
    """dst = this rank's slice along `axis` of the reduction of every src."""

    name = "buffer.reduce_scatter"
    axis = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr)

    def verify_shapes(self, n: int) -> None:
        if _scaled(_shape(self.dst.type), self.axis.value.data, n) != _shape(self.src.type):
            raise VerifyException(f"reduce_scatter of {self.src.type} over {n} ranks cannot produce {self.dst.type}")


@irdl_op_definition
class AllToAllOp(CollectiveOp):
    """Split src along `split_axis`, exchange, concatenate along `concat_axis`."""

    name = "buffer.all_to_all"
    split_axis = prop_def(IntegerAttr)
    concat_axis = prop_def(IntegerAttr)

    def verify_shapes(self, n: int) -> None:
        src, split, cat = _shape(self.src.type), self.split_axis.value.data, self.concat_axis.value.data
        if not 0 <= split < len(src) or src[split] % n:
            raise VerifyException(f"all_to_all cannot split {self.src.type} along {split} into {n} parts")
        expected = list(src)
        expected[split] //= n
        expected = list(_scaled(tuple(expected), cat, n))
        if tuple(expected) != _shape(self.dst.type):
            raise VerifyException(f"all_to_all of {self.src.type} over {n} ranks cannot produce {self.dst.type}")


@irdl_op_definition
class BroadcastOp(CollectiveOp):
    """Every device of the group gets the src of the device at coordinate `root`."""

    name = "buffer.broadcast"
    root = prop_def(IntegerAttr)


@irdl_op_definition
class ReduceOp(CollectiveOp):
    """The device at coordinate `root` gets the reduction of every src; the others' dst is untouched."""

    name = "buffer.reduce"
    root = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr)


@irdl_op_definition
class TransferOp(SrcToDstOp):
    """dst (this device's piece on `placement`) = the boxes of src (pieces on `src_placement`) it holds.

    The placements are parts of the program's devices; every device of either
    takes part and works out from its rank what it sends and receives, so one
    op serves every device (see `job.transfer`).
    """

    name = "buffer.transfer"
    src_sbp = prop_def(NdSbpAttr)
    src_placement = prop_def(PlacementAttr)
    sbp = prop_def(NdSbpAttr)
    placement = prop_def(PlacementAttr)
    logical_shape = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        logical = tuple(int(d) for d in self.logical_shape.get_values())
        for what, sbp, place, buf in (
            ("src", self.src_sbp, self.src_placement, self.src),
            ("dst", self.sbp, self.placement, self.dst),
        ):
            if any(c.kind.data == "partial_sum" for c in sbp.components):
                raise VerifyException(f"buffer.transfer moves whole or split values, not {what} {sbp}")
            try:
                expected = local_shape(logical, sbp, hierarchy_of(place))
            except ValueError as e:
                raise VerifyException(f"buffer.transfer {what}: {e}") from e
            if expected != _shape(buf.type):
                raise VerifyException(
                    f"buffer.transfer {what} should be the piece {list(expected)} of {list(logical)}, got {buf.type}"
                )


class PointToPointOp(OneBufferOp):
    peer = prop_def(IntegerAttr)


@irdl_op_definition
class SendOp(PointToPointOp):
    name = "buffer.send"
    WRITES: ClassVar[bool] = False


@irdl_op_definition
class RecvOp(PointToPointOp):
    name = "buffer.recv"
    WRITES: ClassVar[bool] = True


# ----------------------------------------------------------------- dynamic sizes (docs/dynamic.md)


@irdl_op_definition
class InputDimOp(BufferOp):
    """The actual size of `axis` of the call's argument `index`, read when the step's inputs arrive."""

    name = "buffer.input_dim"
    index = prop_def(IntegerAttr)
    axis = prop_def(IntegerAttr)
    res = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "attr-dict `:` type($res)"


@irdl_op_definition
class ConstSizeOp(BufferOp):
    """An actual size known when the program is made (an element shape of a TensorBuffer)."""

    name = "buffer.const_size"
    value = prop_def(IntegerAttr)
    res = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "attr-dict `:` type($res)"


@irdl_op_definition
class SumSizesOp(BufferOp):
    """`size` summed over the devices of `mesh_axis`: the rows of an all_gather of each device's own rows.

    The executor learns every device's sizes when the step's inputs arrive, so this
    is known before the step runs, as an input's size is.
    """

    name = "buffer.sum_sizes"
    size = operand_def(IndexType)
    mesh = prop_def(DenseArrayBase)
    mesh_axis = prop_def(IntegerAttr)
    res = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$size attr-dict `:` type($size) `->` type($res)"

    def verify_(self) -> None:
        mesh = [int(d) for d in self.mesh.get_values()]
        if not 0 <= self.mesh_axis.value.data < len(mesh):
            raise VerifyException(f"mesh_axis {self.mesh_axis.value.data} out of range for the mesh {mesh}")


@irdl_op_definition
class AddSizesOp(BufferOp):
    """`constant` plus the sum of `sizes`: a concatenation's size along its axis where an input's is dynamic."""

    name = "buffer.add_sizes"
    sizes = var_operand_def(IndexType)
    constant = prop_def(IntegerAttr)
    res = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$sizes attr-dict `:` type($sizes) `->` type($res)"

    def verify_(self) -> None:
        if not self.sizes:
            raise VerifyException("add_sizes needs a size to add")
        if self.constant.value.data < 0:
            raise VerifyException(f"add_sizes' constant must be non-negative, got {self.constant.value.data}")


@irdl_op_definition
class ScaleSizeOp(BufferOp):
    """`size * multiplier / divisor`, checked to be whole at run time (`what` names the sizes): the rows of a
    reshape that regroups them, (<=8, 6) to (<=48,) or back."""

    name = "buffer.scale_size"
    size = operand_def(IndexType)
    multiplier = prop_def(IntegerAttr)
    divisor = prop_def(IntegerAttr)
    what = prop_def(StringAttr)
    res = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$size attr-dict `:` type($size) `->` type($res)"

    def verify_(self) -> None:
        if self.multiplier.value.data <= 0 or self.divisor.value.data <= 0:
            raise VerifyException(
                f"scale_size needs a positive multiplier and divisor, got {self.multiplier.value.data} / {self.divisor.value.data}"
            )


@irdl_op_definition
class SliceSizeOp(BufferOp):
    """The length of `range(start, min(stop, size), step)`: the rows a slice of a dynamic axis keeps of `size`,
    clamped as Python's and numpy's slices are (none where `size` <= `start`)."""

    name = "buffer.slice_size"
    size = operand_def(IndexType)
    start = prop_def(IntegerAttr)
    stop = prop_def(IntegerAttr)
    step = prop_def(IntegerAttr)
    res = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$size attr-dict `:` type($size) `->` type($res)"

    def verify_(self) -> None:
        start, stop, step = (p.value.data for p in (self.start, self.stop, self.step))
        if step <= 0 or not 0 <= start <= stop:
            raise VerifyException(f"slice_size needs 0 <= start <= stop and a positive step, got [{start}:{stop}:{step}]")

    def of(self, size: int) -> int:
        """The sliced length of an actual `size`."""
        return len(range(self.start.value.data, min(self.stop.value.data, size), self.step.value.data))


@irdl_op_definition
class CutOp(BufferOp):
    """The dynamic value held in a buffer planned at its bound: its first elements, at the actual sizes.

    As OneFlow's dynamic blobs, the value is dense at its actual shape, so the cut
    is a contiguous prefix of `buf` (one `?` of the result per size operand, in order).
    It aliases `buf`: liveness and the schedule see its uses as uses of `buf`.
    """

    name = "buffer.cut"
    buf = operand_def(MemRefType)
    sizes = var_operand_def(IndexType)
    res = result_def(MemRefType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$buf `,` $sizes attr-dict `:` functional-type(operands, results)"

    def verify_(self) -> None:
        bound = _static_memref(self.buf.type, "a cut's buffer")
        res = self.res.type
        assert isinstance(res, MemRefType)
        dims, limit = res.get_shape(), bound.get_shape()
        if len(dims) != len(limit) or res.element_type != bound.element_type:
            raise VerifyException(f"a cut keeps the buffer's rank and element type: {bound} -> {res}")
        if any(d >= 0 and d != b for d, b in zip(dims, limit)):
            raise VerifyException(f"a cut's static sizes must be the buffer's: {bound} -> {res}")
        if sum(1 for d in dims if d < 0) != len(self.sizes):
            raise VerifyException(f"a cut to {res} needs one size per '?', got {len(self.sizes)}")


@irdl_op_definition
class SubviewOp(BufferOp):
    """`src` (a cut, dense at its actual shape) narrowed along `axis` to [offset, offset + size): the part of a
    concatenation's gradient that one input gave, where the concatenated sizes are known only at run time.

    It aliases `src`, as a cut aliases its buffer; the result's `axis` is `?`, its other sizes `src`'s.
    """

    name = "buffer.subview"
    src = operand_def(MemRefType)
    offset = operand_def(IndexType)
    size = operand_def(IndexType)
    res = result_def(MemRefType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$src `,` $offset `,` $size attr-dict `:` functional-type(operands, results)"

    def verify_(self) -> None:
        src, res, axis = self.src.type, self.res.type, self.axis.value.data
        assert isinstance(src, MemRefType) and isinstance(res, MemRefType)
        shape, narrowed = src.get_shape(), res.get_shape()
        if not 0 <= axis < len(shape):
            raise VerifyException(f"subview axis {axis} out of range for {src}")
        expected = ["?" if a == axis or d < 0 else str(d) for a, d in enumerate(shape)]
        if ["?" if d < 0 else str(d) for d in narrowed] != expected or res.element_type != src.element_type:
            raise VerifyException(f"a subview along axis {axis} of {src} is {'x'.join(expected)}, got {res}")


def storage_of(v: SSAValue) -> SSAValue:
    """The buffer a value's bytes belong to: through any cut or subview to the buffer planned at the bound."""
    while isinstance(v.owner, (CutOp, SubviewOp)):
        v = v.owner.buf if isinstance(v.owner, CutOp) else v.owner.src
    return v


@irdl_op_definition
class AssertSameSizeOp(BufferOp):
    """A run-time check that actual sizes the op's shapes need equal (two dynamic inputs' batches)."""

    name = "buffer.assert_same_size"
    sizes = var_operand_def(IndexType)
    what = prop_def(StringAttr)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "$sizes attr-dict `:` type($sizes)"


@irdl_op_definition
class StoreSizeOp(BufferOp):
    """out = factor * the product of `sizes`: the element count a mean divides by (job.size_of)."""

    name = "buffer.store_size"
    out = operand_def(MemRefType)
    sizes = var_operand_def(IndexType)
    factor = prop_def(IntegerAttr)
    traits = traits_def(OperandEffects())
    assembly_format = "$out `,` $sizes attr-dict `:` type(operands)"

    def writes(self) -> Sequence[SSAValue]:
        return (self.out,)

    def verify_(self) -> None:
        out = _static_memref(self.out.type, "store_size's output")
        if out.get_shape():
            raise VerifyException(f"store_size writes a rank-0 buffer, got {out}")


Buffer = Dialect(
    "buffer",
    [
        ProgramOp, ArenaOp, ViewOp, AllocOp, VariableOp, ConstantOp, InputOp, OutputOp, KernelOp, CopyOp,
        InputDimOp, ConstSizeOp, AddSizesOp, ScaleSizeOp, SliceSizeOp, CutOp, SubviewOp, AssertSameSizeOp, StoreSizeOp,
        AllReduceOp, AllGatherOp, ReduceScatterOp, SumSizesOp, AllToAllOp, BroadcastOp, ReduceOp, SendOp, RecvOp,
        TransferOp,
    ],
    [],
)  # fmt: skip
