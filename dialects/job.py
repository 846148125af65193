"""The job dialect: OneFlow job functions as tensor SSA at the logical level.

Every compute op has one result and one textual form,
`%r = job.name %a, %b {props} : (types) -> type`, so that readers (and the lark
grammar) meet a single shape.  Each op's shape rule lives in `infer`, which the
verifier and the tracing frontend share: a shape error raised while tracing is
the same message `irflow-opt` prints for bad IR.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Self

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    MemoryWriteEffect,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from irflow.dialects.func_syntax import FuncSyntax
from irflow.dialects.mesh import local_shape
from irflow.dialects.bounds import (
    BoundedAttr,
    TensorBufferAttr,
    buffer_rank,
    describe,
    dynamic_axes,
    element_shapes,
    tensor_buffer,
    with_dynamic,
)
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr, check_fits, hierarchy_of
from irflow.textir.verification import signature_verifier

ui8 = IntegerType(8, Signedness.UNSIGNED)
FLOAT_TYPES = (f16, f32, f64)
INT_TYPES = (i8, i32, i64, ui8)

Props = Mapping[str, Attribute]
Shape = tuple[int, ...]

# ----------------------------------------------------------------- helpers


def tensor(shape: Sequence[int], element_type: Attribute) -> TensorType:
    return _tensor(tuple(shape), element_type)


# Attributes are immutable values: the builders below make each distinct one once and share it. Making
# one verifies its parameters, which took a large part of tracing and lowering a big job (thousands of
# ops, a few dozen distinct shapes and properties).
@functools.cache
def _tensor(shape: tuple[int, ...], element_type: Attribute) -> TensorType:
    return TensorType(element_type, shape)


def shape_of(t: Attribute) -> Shape:
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def dtype_of(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType)
    return t.element_type


def fmt(t: Attribute) -> str:
    if isinstance(t, TensorType):
        dims = "x".join("?" if d < 0 else str(d) for d in t.get_shape())
        bounded = f", {t.encoding}" if dynamic_axes(t) else ""
        return f"tensor<{dims + 'x' if dims else ''}{t.element_type}{bounded}>"
    return str(t)


def ints(props: Props, key: str, default: Sequence[int] = ()) -> tuple[int, ...]:
    attr = props.get(key)
    if attr is None:
        return tuple(default)
    assert isinstance(attr, DenseArrayBase)
    return tuple(int(v) for v in attr.get_values())


def flag(props: Props, key: str) -> bool:
    attr = props.get(key)
    return isinstance(attr, IntegerAttr) and bool(attr.value.data)


def integer(props: Props, key: str, default: int = 0) -> int:
    attr = props.get(key)
    return default if attr is None else int(attr.value.data)  # type: ignore[union-attr]


def number(props: Props, key: str, default: float = 0.0) -> float:
    attr = props.get(key)
    return default if attr is None else float(attr.value.data)  # type: ignore[union-attr]


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return _i64_array(tuple(int(v) for v in values))


@functools.cache
def _i64_array(values: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, values)


def f64_array(values: Sequence[float]) -> DenseArrayBase:
    return DenseArrayBase.from_list(f64, [float(v) for v in values])


def to_attr(value: object) -> Attribute:
    """Python value -> property attribute, so builders read like the IR."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        return BoolAttr.from_bool(value)
    if isinstance(value, int):
        return _i64(value)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (tuple, list)):
        if value and all(isinstance(v, str) for v in value):
            return ArrayAttr([StringAttr(v) for v in value])
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return i64_array(value)
        return f64_array(value)
    if isinstance(value, dict):
        return DictionaryAttr({k: to_attr(v) for k, v in value.items()})
    raise TypeError(f"cannot express {value!r} as an IR attribute")


@functools.cache
def _i64(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@functools.cache
def _string(value: str) -> StringAttr:
    return StringAttr(value)


def normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < max(rank, 1):
        raise VerifyException(f"{what} {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def broadcast_shapes(a: Shape, b: Shape) -> Shape:
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise VerifyException(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(reversed(out))


def require_float(t: Attribute, what: str) -> None:
    if dtype_of(t) not in FLOAT_TYPES:
        raise VerifyException(f"{what} must be a floating-point tensor, got {fmt(t)}")


def same_dtype(types: Sequence[Attribute], what: str = "operands") -> Attribute:
    dtypes = {dtype_of(t) for t in types}
    if len(dtypes) != 1:
        raise VerifyException(f"{what} must share one element type, got {', '.join(fmt(t) for t in types)}")
    return dtypes.pop()


def window_out(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int, dilation: int = 1) -> int:
    return (size + pad_lo + pad_hi - dilation * (kernel - 1) - 1) // stride + 1


# ----------------------------------------------------------------- dynamic sizes

OperandAxis = tuple[int, int]
"""(operand index, axis)."""
SizeGroup = tuple[int | None, tuple[OperandAxis, ...]]
"""A result axis (None: none, the axis is contracted or reduced) and the operand axes of the same actual size."""


def aligned_groups(types: Sequence[Attribute]) -> list[SizeGroup]:
    """Elementwise with numpy broadcasting: result axis r and every operand axis aligned to it from the right.

    A static axis of size 1 is broadcast, so it is not in the group.
    """
    ranks = [len(shape_of(t)) for t in types]
    rank = max(ranks, default=0)
    groups: list[SizeGroup] = []
    for r in range(rank):
        members = []
        for i, t in enumerate(types):
            a = r - (rank - ranks[i])
            if a >= 0 and (a in dynamic_axes(t) or shape_of(t)[a] != 1):
                members.append((i, a))
        groups.append((r, tuple(members)))
    return groups


# ----------------------------------------------------------------- base ops


class JobOp(IRDLOperation):
    """A compute op: tensors in, at most one tensor out, optional SBP and placement."""

    irdl_options = (ParsePropInAttrDict(),)
    sbp = opt_prop_def(NdSbpAttr)
    placement = opt_prop_def(PlacementAttr)

    assembly_format = "operands attr-dict `:` functional-type(operands, results)"

    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ()
    """Groups of operands the op is linear in, together: f(x1 + x2) = f(x1) + f(x2) when the
    group's operands are split into sums and the other operands are fixed.  A partial_sum value
    may feed exactly one whole group at a time and nothing else (checked on `sbp_in`)."""

    def linear_groups(self) -> tuple[tuple[int, ...], ...]:
        return self.LINEAR_OPERANDS

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        raise VerifyException(f"{cls.name} needs its result type given")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """Which operand axes have equal actual sizes, and which result axis takes it (docs/dynamic.md).

        None (the default): the op needs static shapes.  An op that accepts
        dynamic shapes lists every operand axis in some group; its kernel runs
        on views cut to the actual sizes.
        """
        return None

    @classmethod
    def summed_axes(cls, types: Sequence[Attribute], props: Props) -> list[tuple[int, tuple[OperandAxis, ...]]]:
        """Result axes whose actual size is the sum of operand axes' (a concatenation's), each with those axes.

        An axis listed here needs no size group: any of its members may be dynamic, and the result
        axis is then dynamic at their sum (`buffer.add_sizes` at run time)."""
        return []

    @classmethod
    def size_scale(cls, types: Sequence[Attribute], props: Props, result: Attribute, axis: int) -> tuple[int, int]:
        """Result axis `axis`'s actual size over its size group's, as (multiplier, divisor): 1 but for a reshape
        that moves elements between the rows ((<=8, 6) to (<=48,) is 6 / 1)."""
        return 1, 1

    @classmethod
    def sliced_axes(cls, types: Sequence[Attribute], props: Props) -> list[tuple[int, OperandAxis, tuple[int, int, int]]]:
        """Result axes whose actual size is a strided range of one operand axis's (a slice's), each as (result axis,
        operand axis, (start, stop, step)).

        An axis listed here needs no size group: where its operand axis is dynamic, the result axis is dynamic at
        `len(range(start, min(stop, actual), step))` (`buffer.slice_size` at run time)."""
        return []

    @classmethod
    def accepted_axes(cls, types: Sequence[Attribute], props: Props) -> set[OperandAxis] | None:
        """The operand axes whose actual sizes the op relates to its result: its size groups', summed axes' and
        sliced axes' members (None where it needs static shapes)."""
        groups = cls.size_groups(types, props)
        if groups is None:
            return None
        summed = {m for _, ms in cls.summed_axes(types, props) for m in ms}
        return {m for _, members in groups for m in members} | summed | {m for _, m, _ in cls.sliced_axes(types, props)}

    TAKES_TENSOR_BUFFERS: ClassVar[bool] = False
    """Only the TensorBuffer ops read a TensorBuffer: others would read its padding as values."""

    @classmethod
    def dynamic_result(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> Attribute:
        """`result` (typed at the bound) with the dynamic axes the operands give it."""
        if not cls.TAKES_TENSOR_BUFFERS:
            for i, t in enumerate(types):
                if element_shapes(t) is not None:
                    raise VerifyException(
                        f"{cls.name} does not take a TensorBuffer (operand #{i}); convert it with "
                        "flow.tensor_buffer_to_tensor or flow.tensor_buffer_to_list_of_tensors first"
                    )
        dynamic = [(i, a) for i, t in enumerate(types) for a in dynamic_axes(t)]
        if not isinstance(result, TensorType):
            return result
        if not dynamic:
            return with_dynamic(result, ())
        groups = cls.size_groups(types, props)
        if groups is None:
            i, a = dynamic[0]
            raise VerifyException(
                f"{cls.name} needs static shapes, but operand #{i} {describe(types[i])} has a dynamic axis {a} "
                "(see the ops that accept dynamic shapes in docs/dynamic.md)"
            )
        covered = cls.accepted_axes(types, props) or set()
        for i, a in dynamic:
            if (i, a) not in covered:
                raise VerifyException(f"{cls.name} cannot relate dynamic axis {a} of operand #{i} to its result")
        axes = []
        for r, members in groups:
            dyn = [(i, a) for i, a in members if a in dynamic_axes(types[i])]
            static = [(i, a) for i, a in members if a not in dynamic_axes(types[i])]
            if dyn and r is not None and not static:  # a static member fixes the size: checked at run time
                axes.append(r)
        for r, members in cls.summed_axes(types, props):
            if any(a in dynamic_axes(types[i]) for i, a in members):  # a sum with a dynamic part
                axes.append(r)
        axes += [r for r, (i, a), _ in cls.sliced_axes(types, props) if a in dynamic_axes(types[i])]
        return with_dynamic(result, sorted(axes))

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        expected = cls.dynamic_result(types, props, cls.infer(types, props))
        if expected != result:
            raise VerifyException(f"result type {fmt(result)} does not match the inferred {fmt(expected)}")

    @classmethod
    def make(cls, operands: Sequence[SSAValue], result_type: Attribute | None = None, **props: object) -> Self:
        """Build with the result type inferred (or checked when given)."""
        properties = {k: to_attr(v) for k, v in props.items() if v is not None}
        types = [o.type for o in operands]
        if result_type is None:
            result_type = cls.dynamic_result(types, properties, cls.infer(types, properties))
        else:  # given at the bound: the operands decide its dynamic axes
            result_type = cls.dynamic_result(types, properties, result_type)
            cls.check(types, properties, result_type)
        return cls.create(operands=list(operands), result_types=[result_type], properties=properties)

    @classmethod
    def check_dynamic(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        expected = cls.dynamic_result(types, props, result)
        if expected != result:
            raise VerifyException(f"result type {fmt(result)} should be {fmt(expected)}: its dynamic axes follow the operands'")

    @signature_verifier
    def verify_(self) -> None:
        types = [o.type for o in self.operands]
        self.check(types, self.properties, self.results[0].type)
        self.check_dynamic(types, self.properties, self.results[0].type)
        verify_distribution(self)


def verify_distribution(op: JobOp) -> None:
    """SBPs fit their values and placement; partial_sum only enters operands the op is linear in.

    `sbp_in` (written by sbp-infer) is what the op's signature needs of each operand.
    """
    hierarchy = hierarchy_of(op.placement) if op.placement is not None else None
    if op.sbp is not None and op.results:
        check_fits(op.sbp, len(shape_of(op.results[0].type)), hierarchy, "sbp")
    sbp_in = op.attributes.get("sbp_in")
    if sbp_in is None:
        return
    if not isinstance(sbp_in, ArrayAttr) or len(sbp_in.data) != len(op.operands):
        raise VerifyException(f"sbp_in needs one #job.nd_sbp per operand ({len(op.operands)}), got {sbp_in}")
    if isinstance(op, BoxingOp) and op.src_placement is not None:
        hierarchy = hierarchy_of(op.src_placement)  # a boxing takes its input where it was made
    for i, (nd, operand) in enumerate(zip(sbp_in.data, op.operands)):
        if not isinstance(nd, NdSbpAttr):
            raise VerifyException(f"sbp_in #{i} must be a #job.nd_sbp, got {nd}")
        check_fits(nd, len(shape_of(operand.type)), hierarchy, f"sbp_in #{i}")
    if len({len(nd.components) for nd in sbp_in.data}) > 1:  # type: ignore[union-attr]
        raise VerifyException(f"sbp_in entries have different numbers of components: {sbp_in}")
    if isinstance(op, BoxingOp):
        return  # boxing is the conversion: it takes any SBP
    for axis in range(len(sbp_in.data[0].components) if sbp_in.data else 0):  # type: ignore[union-attr]
        partial = tuple(
            i for i, nd in enumerate(sbp_in.data) if nd.components.data[axis].kind.data == "partial_sum"  # type: ignore[union-attr]
        )
        if partial and partial not in op.linear_groups():
            raise VerifyException(_partial_error(op, partial))


def _partial_error(op: JobOp, partial: tuple[int, ...]) -> str:
    names = " and ".join(str(i) for i in partial)
    groups = [g for g in op.linear_groups() if set(partial) & set(g)]
    if groups:
        need = " and ".join(str(i) for i in groups[0])
        return (
            f"{op.name} is linear in operands {need} only together: partial_sum input in operand {names} "
            "alone is not allowed; insert a boxing to broadcast or split"
        )
    return (
        f"{op.name} is not linear in operand {names}: partial_sum input is not allowed; "
        "insert a boxing to broadcast or split"
    )


class NullaryOp(JobOp):
    """Ops that create a tensor from properties alone (variables, constants)."""

    res = result_def(TensorType)
    assembly_format = "attr-dict `:` type($res)"

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if not isinstance(result, TensorType) or any(d <= 0 for d in result.get_shape()):
            raise VerifyException(f"result must be a statically shaped tensor without empty dimensions, got {fmt(result)}")


class UnaryOp(JobOp):
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        require_float(types[0], "operand")
        return types[0]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return aligned_groups(types)


class BinaryOp(JobOp):
    """Elementwise with numpy broadcasting."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    RESULT_DTYPE: ClassVar[Attribute | None] = None

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        dtype = same_dtype(types)
        return tensor(broadcast_shapes(shape_of(types[0]), shape_of(types[1])), cls.RESULT_DTYPE or dtype)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return aligned_groups(types)


class GradOp(JobOp):
    """Elementwise backward `(dy, y_or_x) -> dx` of an activation."""

    dy = operand_def(TensorType)
    saved = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        if types[0] != types[1]:
            raise VerifyException(f"gradient and saved value differ: {fmt(types[0])} vs {fmt(types[1])}")
        return types[0]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return aligned_groups(types)


# ----------------------------------------------------------------- sources


@irdl_op_definition
class VariableOp(NullaryOp):
    """Model state, persistent across calls and addressed by name (OneFlow get_variable)."""

    name = "job.variable"
    var_name = prop_def(StringAttr, prop_name="name")
    initializer = prop_def(DictionaryAttr)
    trainable = prop_def(BoolAttr, default_value=BoolAttr.from_bool(True))


@irdl_op_definition
class ConstantOp(NullaryOp):
    name = "job.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        value = props["value"]
        assert isinstance(value, DenseIntOrFPElementsAttr)
        if value.type != result:
            raise VerifyException(f"constant of type {fmt(value.type)} cannot produce {fmt(result)}")


@irdl_op_definition
class FillOp(NullaryOp):
    """A tensor of one value (zeros, ones, the initial loss gradient)."""

    name = "job.fill"
    value = prop_def(FloatAttr)
    traits = traits_def(Pure())


@irdl_op_definition
class DropoutMaskOp(NullaryOp):
    """Seeded keep-mask scaled by 1/(1-rate); dropout is `mul(x, mask)`, so autodiff needs nothing special."""

    name = "job.dropout_mask"
    rate = prop_def(FloatAttr)
    seed = prop_def(IntegerAttr)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        super().check(types, props, result)
        require_float(result, "dropout mask")
        if not 0.0 <= number(props, "rate") < 1.0:
            raise VerifyException(f"dropout rate must be in [0, 1), got {number(props, 'rate')}")


@irdl_op_definition
class RandomUniformOp(NullaryOp):
    """Seeded draws uniform in [0, 1), new ones each step: the randomness of flow.random.bernoulli.

    A source (as dropout_mask), so every device draws the same whole tensor and a split consumer
    slices it: samples do not depend on the device count.  float32 or float64, what generators draw.
    """

    name = "job.random_uniform"
    seed = prop_def(IntegerAttr)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        super().check(types, props, result)
        if dtype_of(result) not in (f32, f64):
            raise VerifyException(f"uniform draws are float32 or float64, got {fmt(result)}")


@irdl_op_definition
class RandomPermutationOp(NullaryOp):
    """A seeded random permutation of 0..n-1 (int32), a new one each step (OneFlow's
    generate_random_batch_permutation_indices); a source, whole on every device."""

    name = "job.random_permutation"
    seed = prop_def(IntegerAttr)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        super().check(types, props, result)
        if len(shape_of(result)) != 1 or dtype_of(result) != i32:
            raise VerifyException(f"a permutation is a rank-1 int32 tensor, got {fmt(result)}")


@irdl_op_definition
class OFRecordDecodeOp(NullaryOp):
    """One field of the records an OFRecord reader on the host gives each step (flow.data.ofrecord_reader,
    then OFRecordRawDecoder), as a (batch_size, *shape) tensor.

    The reader's arguments are properties; decoders naming the same `reader` read the same
    records. `lift-host-inputs` makes the op an argument of its job.func, which the caller
    feeds from the reader at every call (irflow/frontend/records.py).
    """

    name = "job.ofrecord_decode"
    reader = prop_def(StringAttr)
    data_dir = prop_def(StringAttr)
    data_part_num = prop_def(IntegerAttr)
    part_name_prefix = prop_def(StringAttr)
    part_name_suffix_length = prop_def(IntegerAttr)
    random_shuffle = prop_def(BoolAttr)
    shuffle_buffer_size = prop_def(IntegerAttr)
    shuffle_after_epoch = prop_def(BoolAttr)
    field = prop_def(StringAttr)
    truncate = prop_def(BoolAttr)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        super().check(types, props, result)
        if dtype_of(result) not in (f32, f64, i8, i32, i64, ui8):
            raise VerifyException(f"ofrecord_decode gives float32, float64, int8, int32, int64 or uint8, got {fmt(result)}")
        if integer(props, "data_part_num") < 1 or integer(props, "shuffle_buffer_size") < 1:
            raise VerifyException(
                f"ofrecord_decode needs data_part_num >= 1 and shuffle_buffer_size >= 1, got "
                f"{integer(props, 'data_part_num')} and {integer(props, 'shuffle_buffer_size')}"
            )


# ----------------------------------------------------------------- elementwise


def _define(op_name: str, doc: str, base: type[JobOp], linear: tuple[tuple[int, ...], ...] = ()) -> type[JobOp]:
    """Define a field-less op on a shared base (the elementwise families)."""
    camel = "".join(p.title() for p in op_name.split("_")) + "Op"
    fields: dict[str, object] = {"name": f"job.{op_name}", "__doc__": doc}
    if linear:
        fields["LINEAR_OPERANDS"] = linear
        fields["__annotations__"] = {"LINEAR_OPERANDS": "ClassVar[tuple[tuple[int, ...], ...]]"}
    return irdl_op_definition(type(camel, (base,), fields))


NegOp = _define("neg", "-x", UnaryOp, linear=((0,),))
ExpOp = _define("exp", "e**x", UnaryOp)
LogOp = _define("log", "natural logarithm", UnaryOp)
SqrtOp = _define("sqrt", "square root", UnaryOp)
RsqrtOp = _define("rsqrt", "1/sqrt(x)", UnaryOp)
SquareOp = _define("square", "x*x", UnaryOp)
ReluOp = _define("relu", "max(x, 0)", UnaryOp)
SigmoidOp = _define("sigmoid", "1/(1+e**-x)", UnaryOp)
TanhOp = _define("tanh", "hyperbolic tangent", UnaryOp)
GeluOp = _define("gelu", "x*Phi(x), the exact erf form", UnaryOp)
AbsOp = _define("abs", "|x|", UnaryOp)
SinOp = _define("sin", "sine", UnaryOp)
CosOp = _define("cos", "cosine", UnaryOp)
FloorOp = _define("floor", "the largest integer <= x", UnaryOp)
CeilOp = _define("ceil", "the smallest integer >= x", UnaryOp)
RoundOp = _define("round", "the nearest integer, halves to even (C's nearbyint, as OneFlow's round and rint)", UnaryOp)
SignOp = _define("sign", "-1, 0 or 1 as x is negative, zero or positive; NaN stays NaN (OneFlow's and PyTorch's kernels give 0)", UnaryOp)
Log1pOp = _define("log1p", "log(1 + x), accurate for small x", UnaryOp)
Expm1Op = _define("expm1", "e**x - 1, accurate for small x", UnaryOp)
ErfOp = _define("erf", "the error function", UnaryOp)
ErfcOp = _define("erfc", "1 - erf(x), accurate where erf(x) is near 1", UnaryOp)
TanOp = _define("tan", "tangent", UnaryOp)
AsinOp = _define("asin", "arcsine, in [-pi/2, pi/2]; NaN outside [-1, 1]", UnaryOp)
AcosOp = _define("acos", "arccosine, in [0, pi]; NaN outside [-1, 1]", UnaryOp)
AtanOp = _define("atan", "arctangent, in (-pi/2, pi/2)", UnaryOp)
SinhOp = _define("sinh", "hyperbolic sine", UnaryOp)
CoshOp = _define("cosh", "hyperbolic cosine", UnaryOp)
AsinhOp = _define("asinh", "inverse hyperbolic sine", UnaryOp)
AcoshOp = _define("acosh", "inverse hyperbolic cosine, >= 0; NaN below 1", UnaryOp)
AtanhOp = _define("atanh", "inverse hyperbolic tangent; +-inf at +-1, NaN outside [-1, 1]", UnaryOp)
LgammaOp = _define("lgamma", "log|Gamma(x)|; +inf at 0, the negative integers and -inf", UnaryOp)
DigammaOp = _define("digamma", "Gamma'(x)/Gamma(x), lgamma's derivative; NaN at the negative integers", UnaryOp)


class CompareOp(BinaryOp):
    RESULT_DTYPE: ClassVar[Attribute | None] = i8


class FloatBinaryOp(BinaryOp):
    """A broadcasting binary op of real analysis (atan2): float operands only."""

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        require_float(types[0], "operand")
        return super().infer(types, props)




AddOp = _define("add", "a + b", BinaryOp, linear=((0, 1),))
SubOp = _define("sub", "a - b", BinaryOp, linear=((0, 1),))
MulOp = _define("mul", "a * b", BinaryOp, linear=((0,), (1,)))
DivOp = _define("div", "a / b", BinaryOp, linear=((0,),))
MaximumOp = _define("maximum", "elementwise max", BinaryOp)
MinimumOp = _define("minimum", "elementwise min", BinaryOp)
PowOp = _define("pow", "a ** b", BinaryOp)
FloorModOp = _define(
    "floor_mod", "a - floor(a / b) * b, with b's sign, exact (C's fmod corrected by b, as OneFlow's); NaN for a "
    "float b of 0, an error for an integer one", BinaryOp)
Atan2Op = _define("atan2", "the angle of the point (b, a), in [-pi, pi] (C's atan2(a, b))", FloatBinaryOp)
EqualOp = _define("equal", "a == b as int8", CompareOp)
NotEqualOp = _define("not_equal", "a != b as int8", CompareOp)
LessOp = _define("less", "a < b as int8", CompareOp)
LessEqualOp = _define("less_equal", "a <= b as int8", CompareOp)
GreaterOp = _define("greater", "a > b as int8", CompareOp)
GreaterEqualOp = _define("greater_equal", "a >= b as int8", CompareOp)


@irdl_op_definition
class WhereOp(JobOp):
    """x where `condition` is nonzero, else y, the three broadcast numpy-style (OneFlow's flow.where).

    A select, not arithmetic: the branch not taken never reaches the result, so an inf
    or NaN there gives neither a NaN result nor (through its gradient, two selects) a
    NaN gradient, as a mask multiplied in would (inf * 0).
    """

    name = "job.where"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((1, 2),)
    condition = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        if dtype_of(types[0]) not in INT_TYPES:
            raise VerifyException(
                f"where's condition must be an integer tensor (nonzero selects x), got {fmt(types[0])}"
            )
        dtype = same_dtype(types[1:], "where's x and y")
        shape = broadcast_shapes(broadcast_shapes(shape_of(types[0]), shape_of(types[1])), shape_of(types[2]))
        return tensor(shape, dtype)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return aligned_groups(types)


ReluGradOp = _define("relu_grad", "dy * (y > 0)", GradOp)
SigmoidGradOp = _define("sigmoid_grad", "dy * y * (1 - y)", GradOp)
TanhGradOp = _define("tanh_grad", "dy * (1 - y*y)", GradOp)
GeluGradOp = _define("gelu_grad", "dy * gelu'(x)", GradOp)


@irdl_op_definition
class CastOp(JobOp):
    name = "job.cast"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)

    def linear_groups(self) -> tuple[tuple[int, ...], ...]:
        """Linear up to rounding, but not from floats to integers: the truncated partial sums would not add up
        to the truncated sum (OneFlow's cast passes partial sums through whatever the dtypes)."""
        if dtype_of(self.x.type) in FLOAT_TYPES and dtype_of(self.res.type) not in FLOAT_TYPES:
            return ()
        return self.LINEAR_OPERANDS

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if shape_of(types[0]) != shape_of(result):
            raise VerifyException(f"cast keeps the shape: {fmt(types[0])} -> {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return aligned_groups(types)


@irdl_op_definition
class BernoulliOp(JobOp):
    """1 where the uniform draw u < p, else 0, in the result's dtype: Bernoulli(p) samples, p per element.

    The draws are an operand (a job.random_uniform) rather than state of this op, so the op is
    elementwise and splits like one while its samples stay those of the whole tensor.
    """

    name = "job.bernoulli"
    u = operand_def(TensorType)
    p = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        u, p = types
        if dtype_of(u) not in (f32, f64):
            raise VerifyException(f"uniform draws are float32 or float64, got {fmt(u)}")
        require_float(p, "probability")
        if not shape_of(u) == shape_of(p) == shape_of(result):
            raise VerifyException(f"draws, probabilities and samples differ in shape: {fmt(u)}, {fmt(p)} -> {fmt(result)}")
        if dtype_of(result) not in FLOAT_TYPES + INT_TYPES:
            raise VerifyException(f"samples must be a number tensor, got {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """Elementwise: the draws are taken at the probabilities' sizes."""
        return [(a, ((0, a), (1, a))) for a in range(len(shape_of(types[1])))]


@irdl_op_definition
class BiasAddOp(JobOp):
    name = "job.bias_add"
    x = operand_def(TensorType)
    bias = operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(1, i64))
    traits = traits_def(Pure())
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0, 1),)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        x, b = shape_of(types[0]), shape_of(types[1])
        same_dtype(types)
        axis = normalize_axis(integer(props, "axis", 1), len(x), "bias_add axis")
        if len(b) != 1 or b[0] != x[axis]:
            raise VerifyException(f"bias of shape {b} does not match dimension {axis} of input {x}")
        return types[0]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        axis = normalize_axis(integer(props, "axis", 1), len(shape_of(types[0])), "bias_add axis")
        return [(r, ((0, r), (1, 0)) if r == axis else ((0, r),)) for r in range(len(shape_of(types[0])))]


def _ctc_shapes(types: Sequence[Attribute], lengths: int, what: str) -> tuple[int, int, int]:
    """(T, N, C) of log_probs (types[0]), with `lengths` int (N,) operands after it (input and target lengths
    past the targets) checked: CTC's operands."""
    log_probs = shape_of(types[0])
    require_float(types[0], f"{what}'s log_probs")
    if len(log_probs) != 3:
        raise VerifyException(f"{what}'s log_probs must be (frames, batch, classes), got {fmt(types[0])}")
    frames, batch, classes = log_probs
    for t in types[len(types) - lengths :]:
        if shape_of(t) != (batch,) or dtype_of(t) not in (i32, i64):
            raise VerifyException(f"{what}'s lengths must be int32 or int64 of shape ({batch},), got {fmt(t)}")
    return frames, batch, classes


class CtcLossBase(JobOp):
    """(log_probs (T, N, C), targets (N, S), input_lengths (N,), target_lengths (N,)), after dloss for the gradient."""

    blank = prop_def(IntegerAttr, default_value=IntegerAttr(0, i64))
    zero_infinity = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def check_ctc(cls, types: Sequence[Attribute], props: Props) -> tuple[int, int, int]:
        frames, batch, classes = _ctc_shapes(types, 2, cls.name)
        targets = types[-3]
        if len(shape_of(targets)) != 2 or shape_of(targets)[0] != batch or dtype_of(targets) not in (i32, i64):
            raise VerifyException(f"{cls.name}'s targets must be int32 or int64 of shape ({batch}, S), got {fmt(targets)}")
        if not 0 <= integer(props, "blank", 0) < classes:
            raise VerifyException(f"{cls.name}'s blank {integer(props, 'blank', 0)} is not one of the {classes} classes")
        return frames, batch, classes


@irdl_op_definition
class CtcLossOp(CtcLossBase):
    """Connectionist temporal classification's negative log likelihood per sequence (OneFlow's and PyTorch's
    ctc_loss before its reduction): inf where no alignment fits, or 0 with `zero_infinity`."""

    name = "job.ctc_loss"
    log_probs = operand_def(TensorType)
    targets = operand_def(TensorType)
    input_lengths = operand_def(TensorType)
    target_lengths = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        _, batch, _ = cls.check_ctc(types, props)
        return tensor((batch,), dtype_of(types[0]))


@irdl_op_definition
class CtcLossGradOp(CtcLossBase):
    """The gradient of ctc_loss with respect to log_probs, OneFlow's and PyTorch's: dloss (exp(lp) - the
    alignments' occupancy of each class over exp(lp)), 0 past each sequence's frames."""

    name = "job.ctc_loss_grad"
    dloss = operand_def(TensorType)
    log_probs = operand_def(TensorType)
    targets = operand_def(TensorType)
    input_lengths = operand_def(TensorType)
    target_lengths = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        _, batch, _ = cls.check_ctc(types[1:], props)
        if types[0] != tensor((batch,), dtype_of(types[1])):
            raise VerifyException(f"job.ctc_loss_grad's dloss must be one value per sequence, got {fmt(types[0])}")
        return types[1]


@irdl_op_definition
class CtcGreedyDecodeOp(JobOp):
    """(log_probs (T, N, C), input_lengths (N,)) -> (N, T) int64: each sequence's most likely class per frame
    without the blank, which OneFlow's decoder takes to be the last class, and with `merge_repeated` a run of
    one class given once; 0 past the decoded length."""

    name = "job.ctc_greedy_decode"
    log_probs = operand_def(TensorType)
    input_lengths = operand_def(TensorType)
    res = result_def(TensorType)
    merge_repeated = prop_def(BoolAttr, default_value=BoolAttr.from_bool(True))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        frames, batch, _ = _ctc_shapes(types, 1, cls.name)
        return tensor((batch, frames), i64)


@irdl_op_definition
class FakeQuantizationOp(JobOp):
    """x quantized to `quantization_bit` bits and back (OneFlow's fake_quantization, for quantization-aware
    training): round(x / scale) clipped to +-(2**(bits-1) - 1), times scale; with `affine`, round(x / scale +
    zero_point) clipped to [0, 2**bits - 1], less zero_point, times scale. Halves round away from zero (C's
    round). `scale` and `zero_point` hold one value (per layer) or one per entry of x's axis 0 (per channel).
    Its gradient passes dy to x as it is (the straight-through estimator), none to scale and zero_point."""

    name = "job.fake_quantization"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    zero_point = operand_def(TensorType)
    res = result_def(TensorType)
    quantization_bit = prop_def(IntegerAttr, default_value=IntegerAttr(8, i64))
    affine = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        x = shape_of(types[0])
        same_dtype(types)
        require_float(types[0], "fake_quantization's x")
        if not 2 <= integer(props, "quantization_bit", 8) <= 8:
            raise VerifyException(f"fake_quantization takes 2 to 8 bits, got {integer(props, 'quantization_bit', 8)}")
        per = shape_of(types[1])
        if per != shape_of(types[2]) or per not in ((1,), x[:1]):
            raise VerifyException(f"fake_quantization's scale {fmt(types[1])} and zero_point {fmt(types[2])} must both "
                                  f"hold one value or one per entry of axis 0 of x {fmt(types[0])}")  # fmt: skip
        return types[0]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        per_channel = shape_of(types[1]) != (1,)  # then one per entry of x's axis 0, which sizes them
        return [(r, ((0, r), (1, 0), (2, 0)) if r == 0 and per_channel else ((0, r),))
                for r in range(len(shape_of(types[0])))]  # fmt: skip


# ----------------------------------------------------------------- shape ops


@irdl_op_definition
class ReshapeOp(JobOp):
    name = "job.reshape"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        a, b = shape_of(types[0]), shape_of(result)
        if _numel(a) != _numel(b) or dtype_of(types[0]) != dtype_of(result):
            raise VerifyException(f"cannot reshape {fmt(types[0])} to {fmt(result)}")


    @classmethod
    def dynamic_result(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> Attribute:
        """A dynamic axis 0 stays axis 0, its rows regrouped (the value is dense at its actual shape, so n rows
        of p elements are n p / q rows of q); the other axes must be static."""
        x, dynamic = shape_of(types[0]), dynamic_axes(types[0])
        assert isinstance(result, TensorType)
        out = shape_of(result)
        if dynamic and (dynamic != (0,) or not out or out[0] != x[0] and not _regroups(x, out)):
            raise VerifyException(
                f"job.reshape keeps a dynamic axis only as axis 0, with static axes after it, each row split into "
                f"whole rows or joined whole with others, and {describe(types[0])} cannot become {describe(result)}"
            )
        return with_dynamic(result, dynamic)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(0, ((0, 0),))]  # the rows, regrouped by `size_scale`: the other axes are static

    @classmethod
    def size_scale(cls, types: Sequence[Attribute], props: Props, result: Attribute, axis: int) -> tuple[int, int]:
        row, out_row = _numel(shape_of(types[0])[1:]), _numel(shape_of(result)[1:])
        if axis or shape_of(result)[0] == shape_of(types[0])[0]:
            return 1, 1
        common = math.gcd(row, out_row)
        return row // common, out_row // common


def _regroups(x: Shape, out: Shape) -> bool:
    """Whether rows of x[1:] become whole rows of out[1:] (one split into several), or several of them one."""
    row, out_row = _numel(x[1:]), _numel(out[1:])
    return bool(row and out_row) and (row % out_row == 0 or out_row % row == 0)


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@irdl_op_definition
class TransposeOp(JobOp):
    name = "job.transpose"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    x = operand_def(TensorType)
    res = result_def(TensorType)
    perm = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape, perm = shape_of(types[0]), ints(props, "perm")
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(f"perm {list(perm)} is not a permutation of the {len(shape)} axes of {shape}")
        return tensor([shape[p] for p in perm], dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(r, ((0, p),)) for r, p in enumerate(ints(props, "perm"))]


@irdl_op_definition
class BroadcastToOp(JobOp):
    name = "job.broadcast_to"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if broadcast_shapes(shape_of(types[0]), shape_of(result)) != shape_of(result):
            raise VerifyException(f"cannot broadcast {fmt(types[0])} to {fmt(result)}")
        if dynamic_axes(types[0]) and len(shape_of(types[0])) != len(shape_of(result)):
            raise VerifyException(f"broadcast_to of {describe(types[0])} keeps its rank, got {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """An axis not broadcast (of more than one entry; a dynamic value keeps its rank) passes its size on; a
        dynamic axis of one entry is refused: its actual size could be 0."""
        return [(a, ((0, a),)) for a, d in enumerate(shape_of(types[0])) if d != 1]


@irdl_op_definition
class BroadcastLikeOp(JobOp):
    """x broadcast to the shape of `like`, dynamic axes included (how gradients expand over a dynamic batch).

    `axes` (optional) are axes of `like` that x lacks, put back as size 1 before numpy's
    broadcasting aligns the axes from the right: a reduction's gradient over middle axes,
    which a reshape could not give when x has dynamic axes past axis 0.
    """

    name = "job.broadcast_like"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    x = operand_def(TensorType)
    like = operand_def(TensorType)
    res = result_def(TensorType)
    axes = opt_prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def kept_axes(cls, types: Sequence[Attribute], props: Props) -> list[int] | None:
        """The axes of `like` that x's axes stand for, in order (None: aligned from the right)."""
        if "axes" not in props:
            return None
        rank, inserted = len(shape_of(types[1])), ints(props, "axes")
        if list(inserted) != sorted(set(inserted)) or any(not 0 <= a < rank for a in inserted) or (
            len(shape_of(types[0])) != rank - len(inserted)
        ):
            raise VerifyException(f"broadcast_like axes {list(inserted)} must be ascending axes of {fmt(types[1])} "
                                  f"that {fmt(types[0])} lacks")  # fmt: skip
        return [a for a in range(rank) if a not in inserted]

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        x, like = shape_of(types[0]), shape_of(types[1])
        kept = cls.kept_axes(types, props)
        if kept is not None:
            x = tuple(x[kept.index(a)] if a in kept else 1 for a in range(len(like)))
        if len(x) > len(like) or broadcast_shapes(x, like) != like:
            raise VerifyException(f"cannot broadcast {fmt(types[0])} to the shape of {fmt(types[1])}")
        return tensor(like, dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        kept = cls.kept_axes(types, props)
        if kept is None:
            return aligned_groups(types)
        x = types[0]
        groups: list[SizeGroup] = []
        for r in range(len(shape_of(types[1]))):
            j = kept.index(r) if r in kept else None
            own = j is not None and (j in dynamic_axes(x) or shape_of(x)[j] != 1)
            groups.append((r, ((0, j), (1, r)) if own else ((1, r),)))
        return groups


@irdl_op_definition
class PinSizeOp(JobOp):
    """x with `axes` static at their bound, checked at run time: how an op that cannot take those axes dynamic gets them.

    The frontend inserts it before such an op (a convolution's spatial axes, a reshape of
    a feature axis), so a mirrored input may be smaller than its placeholder on every axis
    that the ops using it accept dynamic, and must fill it on the others (docs/dynamic.md).
    """

    name = "job.pin_size"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        x = types[0]
        pinned = set(ints(props, "axes"))
        if not pinned or not pinned <= set(dynamic_axes(x)):
            raise VerifyException(f"pin_size pins dynamic axes of {describe(x)}, got {sorted(pinned)}")
        return tensor(shape_of(x), dtype_of(x))

    @classmethod
    def dynamic_result(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> Attribute:
        assert isinstance(result, TensorType)
        return with_dynamic(result, set(dynamic_axes(types[0])) - set(ints(props, "axes")))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        pinned = set(ints(props, "axes"))
        return [(None if a in pinned else a, ((0, a),)) for a in range(len(shape_of(types[0])))]


@irdl_op_definition
class UnpinSizeOp(JobOp):
    """x with `axes` dynamic again, at the actual sizes of `like`'s: the gradient of a job.pin_size.

    Autodiff puts it where a gradient is static on axes that its operand has dynamic (after a
    pin, or an op whose size group met a static axis). There the forward program checked at
    run time that the actual size equals the static one, so the values are already at the
    actual size and pass through; `like` gives only the sizes, never its values.
    """

    name = "job.unpin_size"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    x = operand_def(TensorType)
    like = operand_def(TensorType)
    res = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        x, like = types
        unpinned = set(ints(props, "axes"))
        if shape_of(x) != shape_of(like) or not unpinned or not unpinned <= set(dynamic_axes(like)) - set(dynamic_axes(x)):
            raise VerifyException(
                f"unpin_size makes axes static in {describe(x)} dynamic as in {describe(like)} (same bound), "
                f"got {sorted(unpinned)}"
            )
        return tensor(shape_of(x), dtype_of(x))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        unpinned = set(ints(props, "axes"))
        return [(a, ((1, a),) if a in unpinned else ((0, a), (1, a))) for a in range(len(shape_of(types[0])))]


@irdl_op_definition
class SizeOfOp(JobOp):
    """The number of elements of `x` over `axes` at run time, as a rank-0 tensor (a reduce_mean's divisor).

    For a static `x` it is a constant; for a dynamic one it is the shape computation
    that reads the actual sizes, so the executor never computes one on the side.
    """

    name = "job.size_of"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        rank = len(shape_of(types[0]))
        for a in ints(props, "axes"):
            normalize_axis(a, rank, "size_of axis")
        if not isinstance(result, TensorType) or shape_of(result) != () or dynamic_axes(result):
            raise VerifyException(f"size_of gives a rank-0 tensor, got {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(None, ((0, a),)) for a in range(len(shape_of(types[0])))]

    def static_count(self) -> int | None:
        """The count when every counted axis is static, else None."""
        shape, rank = shape_of(self.x.type), len(shape_of(self.x.type))
        axes = {normalize_axis(a, rank, "size_of axis") for a in ints(self.properties, "axes")}
        if axes & set(dynamic_axes(self.x.type)):
            return None
        return _numel(tuple(shape[a] for a in axes))


# ----------------------------------------------------------------- TensorBuffer (OneFlow's, docs/dynamic.md)


def _element_count(t: Attribute) -> int:
    return _numel(shape_of(t)[: buffer_rank(t)])


def check_tensor_buffer(t: Attribute, what: str) -> list[tuple[int, ...]]:
    """The element shapes of a TensorBuffer `t`, each within its bound; anything else is an error."""
    shapes = element_shapes(t)
    if shapes is None:
        raise VerifyException(f"{what} must be a TensorBuffer, got {fmt(t)}")
    if len(shapes) != _element_count(t):
        raise VerifyException(f"{what} lists {len(shapes)} element shapes for {_element_count(t)} elements: {fmt(t)}")
    bound = shape_of(t)[buffer_rank(t) :]
    if any(d > b for s in shapes for d, b in zip(s, bound)):
        raise VerifyException(f"{what}: an element shape exceeds the bound {bound}: {fmt(t)}")
    return shapes


@irdl_op_definition
class TensorToTensorBufferOp(JobOp):
    """x as a TensorBuffer whose elements are its last `instance_dims` axes (flow.tensor_to_tensor_buffer)."""

    name = "job.tensor_to_tensor_buffer"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    instance_dims = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape, k = shape_of(types[0]), integer(props, "instance_dims")
        if not 0 < k < len(shape):
            raise VerifyException(f"instance_dims must be in [1, {len(shape) - 1}] for {fmt(types[0])}, got {k}")
        return tensor_buffer(shape[: len(shape) - k], [shape[len(shape) - k :]], dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """A dynamic x gives a TensorBuffer of as many elements as its leading axes have, each of its
        trailing axes' run-time sizes (OneFlow's is dynamic when its input is)."""
        return [(a, ((0, a),)) for a in range(len(shape_of(types[0])))]


@irdl_op_definition
class TensorBufferToTensorOp(JobOp):
    """The elements of a TensorBuffer, all of `instance_shape`, as one tensor (flow.tensor_buffer_to_tensor)."""

    name = "job.tensor_buffer_to_tensor"
    TAKES_TENSOR_BUFFERS: ClassVar[bool] = True
    x = operand_def(TensorType)
    res = result_def(TensorType)
    instance_shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        shapes, instance = check_tensor_buffer(types[0], "tensor_buffer_to_tensor's input"), ints(props, "instance_shape")
        odd = next((s for s in shapes if s != instance), None)
        if odd is not None:
            raise VerifyException(f"tensor_buffer_to_tensor: an element has shape {odd}, not the instance shape {instance}")
        expected = shape_of(types[0])[: buffer_rank(types[0])] + instance
        if shape_of(result) != expected or element_shapes(result) is not None:
            raise VerifyException(f"tensor_buffer_to_tensor gives a tensor of shape {expected}, got {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The buffer's own axes pass their sizes on; a dynamic element axis is checked at run time to
        be the instance shape's (convert-job-to-buffer)."""
        rank = buffer_rank(types[0])
        return [(a if a < rank else None, ((0, a),)) for a in range(len(shape_of(types[0])))]


@irdl_op_definition
class GenTensorBufferOp(NullaryOp):
    """A TensorBuffer whose element k is a tensor of `shapes[k]` filled with `values[k]` (flow.gen_tensor_buffer)."""

    name = "job.gen_tensor_buffer"
    values = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        shapes = check_tensor_buffer(result, "gen_tensor_buffer's result")
        if len(ints_or_floats(props, "values")) != len(shapes):
            raise VerifyException(f"gen_tensor_buffer has {len(shapes)} elements but {len(ints_or_floats(props, 'values'))} values")


def ints_or_floats(props: Props, key: str) -> tuple[float, ...]:
    attr = props.get(key)
    assert isinstance(attr, DenseArrayBase)
    return tuple(attr.get_values())


@irdl_op_definition
class TensorBufferGetOp(JobOp):
    """Element `index` (row-major) of a TensorBuffer as a tensor: of its own shape within the bound
    `out_shape` when `dynamic_out` (a dynamic tensor whose sizes are the element's, constants or
    run-time sizes), else of `out_shape`, which must be its shape (checked at run time where the
    element's sizes are known only then).  flow.tensor_buffer_to_list_of_tensors makes one per element."""

    name = "job.tensor_buffer_get"
    TAKES_TENSOR_BUFFERS: ClassVar[bool] = True
    x = operand_def(TensorType)
    res = result_def(TensorType)
    index = prop_def(IntegerAttr)
    out_shape = prop_def(DenseArrayBase)
    dynamic_out = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def element_shape(cls, types: Sequence[Attribute], props: Props) -> tuple[int, ...]:
        shapes, index = check_tensor_buffer(types[0], "tensor_buffer_get's input"), integer(props, "index")
        if not 0 <= index < len(shapes):
            raise VerifyException(f"tensor_buffer_get: index {index} out of range for {len(shapes)} elements")
        shape, bound = shapes[index], ints(props, "out_shape")
        dynamic = flag(props, "dynamic_out")
        if len(shape) != len(bound) or any(d > b for d, b in zip(shape, bound)) or (not dynamic and shape != bound):
            need = "within" if dynamic else "equal to"
            raise VerifyException(f"tensor_buffer_get: element {index} has shape {shape}, not {need} out_shape {bound}")
        return shape

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        cls.element_shape(types, props)
        bound = ints(props, "out_shape")
        axes = range(len(bound)) if flag(props, "dynamic_out") else ()
        if not isinstance(result, TensorType) or result != with_dynamic(tensor(bound, result.element_type), axes):
            raise VerifyException(f"tensor_buffer_get gives {fmt(with_dynamic(tensor(bound, f32), axes))} of any dtype, got {fmt(result)}")

    @classmethod
    def dynamic_result(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> Attribute:
        """Dynamic on every axis with `dynamic_out`: its sizes come from the element's shape, not an operand."""
        assert isinstance(result, TensorType)
        return with_dynamic(result, range(len(shape_of(result))) if flag(props, "dynamic_out") else ())

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """No result axis follows an operand's by a group: convert-job-to-buffer gives the result the
        element's sizes and checks a dynamic buffer is full (OneFlow's needs a static one)."""
        return [(None, ((0, a),)) for a in range(len(shape_of(types[0])))]


@irdl_op_definition
class ConcatOp(JobOp):
    name = "job.concat"
    inputs = var_operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def linear_groups(self) -> tuple[tuple[int, ...], ...]:
        return (tuple(range(len(self.operands))),)  # linear in all inputs together

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        if not types:
            raise VerifyException("concat needs at least one input")
        dtype = same_dtype(types, "concat inputs")
        first = shape_of(types[0])
        axis = normalize_axis(integer(props, "axis"), len(first), "concat axis")
        total = 0
        for t in types:
            s = shape_of(t)
            if len(s) != len(first) or any(s[i] != first[i] for i in range(len(s)) if i != axis):
                raise VerifyException(f"concat along axis {axis}: shapes {first} and {s} differ elsewhere")
            total += s[axis]
        return tensor(first[:axis] + (total,) + first[axis + 1 :], dtype)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """Every axis but the concatenated one, whose size is the inputs' sum (`summed_axes`)."""
        rank = len(shape_of(types[0]))
        axis = normalize_axis(integer(props, "axis"), rank, "concat axis")
        return [(r, tuple((i, r) for i in range(len(types)))) for r in range(rank) if r != axis]

    @classmethod
    def summed_axes(cls, types: Sequence[Attribute], props: Props) -> list[tuple[int, tuple[OperandAxis, ...]]]:
        axis = normalize_axis(integer(props, "axis"), len(shape_of(types[0])), "concat axis")
        return [(axis, tuple((i, axis) for i in range(len(types))))]


@irdl_op_definition
class ConcatGradOp(JobOp):
    """The part of `dy` that input `index` of a concatenation along `axis` gave, where that axis is dynamic:
    `dy` cut at the actual sizes of `inputs` along it (job.slice's static bounds cannot say where).

    The inputs give only their sizes, never their values, so their buffers need not live on to the
    backward pass.
    """

    name = "job.concat_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    inputs = var_operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    index = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        dy, inputs = types[0], types[1:]
        index = integer(props, "index")
        if not 0 <= index < len(inputs):
            raise VerifyException(f"concat_grad index {index} is out of range for {len(inputs)} inputs")
        whole = ConcatOp.infer(inputs, props)
        if shape_of(whole) != shape_of(dy) or dtype_of(dy) != dtype_of(inputs[index]):
            raise VerifyException(f"concat_grad's dy {fmt(dy)} is not the concatenation of its inputs, {fmt(whole)}")
        return tensor(shape_of(inputs[index]), dtype_of(dy))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """dy's other axes are the inputs'; along `axis` the result is input `index`'s, and dy's and the other
        inputs' sizes there only place it (groups of one, which check nothing)."""
        rank, n = len(shape_of(types[0])), len(types) - 1
        axis, index = normalize_axis(integer(props, "axis"), rank, "concat_grad axis"), integer(props, "index")
        groups: list[SizeGroup] = [(r, tuple((i, r) for i in range(n + 1))) for r in range(rank) if r != axis]
        groups.append((axis, ((1 + index, axis),)))
        return groups + [(None, ((i, axis),)) for i in range(n + 1) if i != 1 + index]


def whole_axes(shape: Shape, props: Props) -> list[int]:
    """The axes a slice keeps whole (start 0, step 1, to the end): a dynamic one passes through."""
    start, stop, step = ints(props, "start"), ints(props, "stop"), ints(props, "step")
    return [a for a, d in enumerate(shape) if (start[a:a + 1], step[a:a + 1], stop[a:a + 1]) == ((0,), (1,), (d,))]


def slice_shape(shape: Shape, props: Props) -> Shape:
    start, stop, step = ints(props, "start"), ints(props, "stop"), ints(props, "step")
    if not len(start) == len(stop) == len(step) == len(shape):
        raise VerifyException(f"slice of rank-{len(shape)} tensor needs start/stop/step of that length")
    out = []
    for d, a, b, s in zip(shape, start, stop, step):
        if s <= 0 or not 0 <= a <= b <= d:
            raise VerifyException(f"slice [{a}:{b}:{s}] is out of range for dimension of size {d}")
        out.append(len(range(a, b, s)))
    return tuple(out)


@irdl_op_definition
class SliceOp(JobOp):
    """Static strided slice; start/stop are normalized to [0, dim] by the frontend."""

    name = "job.slice"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    x = operand_def(TensorType)
    res = result_def(TensorType)
    start = prop_def(DenseArrayBase)
    stop = prop_def(DenseArrayBase)
    step = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return tensor(slice_shape(shape_of(types[0]), props), dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """A dynamic axis passes through a slice that keeps all of it."""
        return [(a, ((0, a),)) for a in whole_axes(shape_of(types[0]), props)]

    @classmethod
    def sliced_axes(cls, types: Sequence[Attribute], props: Props) -> list[tuple[int, OperandAxis, tuple[int, int, int]]]:
        """The other axes keep the part of their actual size the slice reaches: x[2:5] of 4 rows is 2 rows."""
        whole = whole_axes(shape_of(types[0]), props)
        bounds = zip(ints(props, "start"), ints(props, "stop"), ints(props, "step"))
        return [(a, (0, a), b) for a, b in enumerate(bounds) if a not in whole]


@irdl_op_definition
class SliceGradOp(JobOp):
    """Scatter `dy` into zeros of the sliced input's shape.

    Where the slice cut a dynamic axis, `like` is the sliced input: it gives the result its actual sizes,
    never its values, so its buffer need not live on to the backward pass.
    """

    name = "job.slice_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    like = opt_operand_def(TensorType)
    res = result_def(TensorType)
    start = prop_def(DenseArrayBase)
    stop = prop_def(DenseArrayBase)
    step = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if slice_shape(shape_of(result), props) != shape_of(types[0]):
            raise VerifyException(f"slice of {fmt(result)} does not have the gradient's shape {fmt(types[0])}")
        if len(types) > 1 and shape_of(types[1]) != shape_of(result):
            raise VerifyException(f"slice_grad's like {fmt(types[1])} does not have its result's shape {fmt(result)}")

    @classmethod
    def dynamic_result(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> Attribute:
        """`like`'s dynamic axes; without it, as job.slice: a dynamic axis of dy is the result's when the slice
        kept all of it."""
        assert isinstance(result, TensorType)
        if len(types) > 1:
            return with_dynamic(result, dynamic_axes(types[1]))
        dynamic = dynamic_axes(types[0])
        if not set(dynamic) <= set(whole_axes(shape_of(result), props)):
            raise VerifyException(
                f"job.slice_grad cannot relate dynamic axes {list(dynamic)} of {describe(types[0])} to its result "
                "(give it the sliced input as `like`)"
            )
        return with_dynamic(result, dynamic)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The result's sizes are `like`'s; dy's only place it (groups of one, which check nothing)."""
        if len(types) > 1:
            rank = len(shape_of(types[1]))
            return [(a, ((1, a),)) for a in range(rank)] + [(None, ((0, a),)) for a in range(rank)]
        return [(a, ((0, a),)) for a in dynamic_axes(types[0])]


def gather_shape(params: Attribute, indices: Attribute, props: Props) -> Shape:
    """params' shape with its axis `axis` replaced by the shape of int32/int64 `indices` past their first
    `batch_dims` axes, which are params' first axes too (one gather per batch entry)."""
    shape, index_shape = shape_of(params), shape_of(indices)
    if not shape:
        raise VerifyException(f"gather needs params of rank 1 or more, got {fmt(params)}")
    if dtype_of(indices) not in (i32, i64):
        raise VerifyException(f"gather indices must be int32/int64, got {fmt(indices)}")
    axis = normalize_axis(integer(props, "axis"), len(shape), "gather axis")
    batch = integer(props, "batch_dims")
    if not 0 <= batch <= min(axis, len(index_shape)) or shape[:batch] != index_shape[:batch]:
        raise VerifyException(
            f"gather with batch_dims {batch} needs that many leading axes of params {fmt(params)} and indices "
            f"{fmt(indices)} equal, before the gathered axis {axis}"
        )
    return shape[:axis] + index_shape[batch:] + shape[axis + 1 :]


def gather_groups(params_rank: int, indices_rank: int, props: Props, params: int | None, out: int) -> list[SizeGroup]:
    """Size groups of a gather's three shapes: the batch axes, the indices' other axes (at `axis` of the gathered
    value) and params' other axes; `params` and `out` are the operand indices of params (None: none) and of the
    gathered value (-1: the result). params' indexed axis relates to nothing: the kernel checks every index
    against its actual size."""
    axis = normalize_axis(integer(props, "axis"), params_rank, "gather axis")
    batch = integer(props, "batch_dims")
    at_out = [(out, r) for r in range(params_rank + indices_rank - batch - 1)] if out >= 0 else None

    def group(r: int, members: list[OperandAxis]) -> SizeGroup:
        return (r, tuple(members)) if at_out is None else (None, (at_out[r], *members))

    mine = [] if params is None else [(params, a) for a in range(params_rank)]
    groups = [group(b, [(1, b), *mine[b : b + 1]]) for b in range(batch)]
    groups += [group(axis + j - batch, [(1, j)]) for j in range(batch, indices_rank)]
    groups += [group(a if a < axis else a + indices_rank - batch - 1, mine[a : a + 1])
               for a in range(batch, params_rank) if a != axis]  # fmt: skip
    return groups + ([(None, (mine[axis],))] if mine else [])


@irdl_op_definition
class GatherOp(JobOp):
    """The slices of params along `axis` at `indices` (OneFlow's flow.gather); with `batch_dims` b, the
    first b axes of params and indices are batch axes, each batch entry gathering with its own indices.

    The kernel checks every index against the axis at run time, as the sparse
    cross-entropy checks its labels.
    """

    name = "job.gather"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    params = operand_def(TensorType)
    indices = operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(0, i64))
    batch_dims = opt_prop_def(IntegerAttr)  # absent: 0, no batch axes
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return tensor(gather_shape(types[0], types[1], props), dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The result's axes are params' and the indices' (a batch axis both); the indexed axis of params relates
        to nothing (its indices are checked against its actual size)."""
        return gather_groups(len(shape_of(types[0])), len(shape_of(types[1])), props, 0, -1)


@irdl_op_definition
class GatherGradOp(JobOp):
    """dparams of job.gather from (dy, indices): zeros of params' type (the result) with every slice of dy
    added at its index along `axis` (in its batch entry), so that a repeated index gathers the sum of its
    slices' gradients."""

    name = "job.gather_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    indices = operand_def(TensorType)
    like = opt_operand_def(TensorType)  # params, where dynamic: its actual sizes, never its values
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(0, i64))
    batch_dims = opt_prop_def(IntegerAttr)  # absent: 0, no batch axes
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if gather_shape(result, types[1], props) != shape_of(types[0]) or dtype_of(types[0]) != dtype_of(result):
            raise VerifyException(
                f"gather of {fmt(result)} at indices {fmt(types[1])} does not have the gradient's type {fmt(types[0])}"
            )
        if len(types) > 2 and shape_of(types[2]) != shape_of(result):
            raise VerifyException(f"gather_grad's like {fmt(types[2])} does not have its result's shape {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """dy's axes are the indices' (checked against them) and params'; the result's are `like`'s where it is
        given (params' indexed axis is known only from it), else dy's."""
        indices_rank, batch = len(shape_of(types[1])), integer(props, "batch_dims")
        rank = len(shape_of(types[0])) - indices_rank + batch + 1  # params'
        checks = gather_groups(rank, indices_rank, props, None, 0)
        if len(types) > 2:
            return [(a, ((2, a),)) for a in range(rank)] + checks
        axis = normalize_axis(integer(props, "axis"), rank, "gather axis")
        return checks + [(a, ((0, a if a < axis else a + indices_rank - batch - 1),)) for a in range(rank) if a != axis]


def dim_gather_check(input: Attribute, index: Attribute, props: Props) -> None:
    """int32/int64 `index` of `input`'s rank and sizes but along `dim`, which it indexes."""
    shape, at = shape_of(input), shape_of(index)
    if dtype_of(index) not in (i32, i64):
        raise VerifyException(f"dim_gather index must be int32/int64, got {fmt(index)}")
    dim = normalize_axis(integer(props, "dim"), len(shape), "dim_gather dim")
    if len(at) != len(shape) or any(a != d for i, (a, d) in enumerate(zip(at, shape)) if i != dim):
        raise VerifyException(f"dim_gather index {fmt(index)} must have the shape of input {fmt(input)} but along dim {dim}")


@irdl_op_definition
class DimGatherOp(JobOp):
    """out[..., i, ...] = input[..., index[..., i, ...], ...] along `dim` (OneFlow's dim_gather, PyTorch's
    gather): index has input's shape but along dim, and the result has index's. The kernel checks every
    index against the axis at run time."""

    name = "job.dim_gather"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    input = operand_def(TensorType)
    index = operand_def(TensorType)
    res = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        dim_gather_check(types[0], types[1], props)
        return tensor(shape_of(types[1]), dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """input and index share every axis but `dim`, where the result has index's and input's relates to nothing
        (each index is checked against its actual size)."""
        rank = len(shape_of(types[0]))
        dim = normalize_axis(integer(props, "dim"), rank, "dim_gather dim")
        return [(a, ((1, a),) if a == dim else ((0, a), (1, a))) for a in range(rank)] + [(None, ((0, dim),))]


@irdl_op_definition
class DimGatherGradOp(JobOp):
    """dinput of job.dim_gather from (dy, index): zeros of input's type (the result) with each element of dy
    added at its index along `dim`, so that a repeated index gathers the sum of its elements' gradients."""

    name = "job.dim_gather_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    index = operand_def(TensorType)
    like = opt_operand_def(TensorType)  # input, where dynamic: its actual sizes, never its values
    res = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        dim_gather_check(result, types[1], props)
        if shape_of(types[0]) != shape_of(types[1]) or dtype_of(types[0]) != dtype_of(result):
            raise VerifyException(
                f"dim_gather of {fmt(result)} at index {fmt(types[1])} does not have the gradient's type {fmt(types[0])}"
            )
        if len(types) > 2 and shape_of(types[2]) != shape_of(result):
            raise VerifyException(f"dim_gather_grad's like {fmt(types[2])} does not have its result's shape {fmt(result)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """dy has index's sizes; the result's are `like`'s where it is given (input's `dim` is known only from
        it), else dy's but along `dim`."""
        rank = len(shape_of(types[0]))
        dim = normalize_axis(integer(props, "dim"), rank, "dim_gather dim")
        if len(types) > 2:
            return [(a, ((2, a),)) for a in range(rank)] + [(None, ((0, a), (1, a))) for a in range(rank)]
        return [(None if a == dim else a, ((0, a), (1, a))) for a in range(rank)]


def gather_nd_shape(params: Attribute, indices: Attribute) -> Shape:
    """The slices of params that int32/int64 `indices` (..., K) pick by their first K coordinates:
    indices.shape[:-1] + params.shape[K:]."""
    shape, at = shape_of(params), shape_of(indices)
    if dtype_of(indices) not in (i32, i64):
        raise VerifyException(f"gather_nd indices must be int32/int64, got {fmt(indices)}")
    if not at or not 1 <= at[-1] <= len(shape):
        raise VerifyException(f"gather_nd indices {fmt(indices)} need a last axis of 1 to {len(shape)} coordinates "
                              f"of params {fmt(params)}")  # fmt: skip
    return at[:-1] + shape[at[-1] :]


@irdl_op_definition
class GatherNdOp(JobOp):
    """out[i...] = params[indices[i..., 0], ..., indices[i..., K-1], ...] (OneFlow's gather_nd); the kernel
    checks every coordinate against its axis at run time."""

    name = "job.gather_nd"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    params = operand_def(TensorType)
    indices = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return tensor(gather_nd_shape(types[0], types[1]), dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The result's axes are the indices' but the last (the K coordinates, static) and params' past K; params'
        axis 0, when indexed, relates to nothing (each coordinate is checked against its actual size)."""
        params, indices = shape_of(types[0]), shape_of(types[1])
        lead, k = len(indices) - 1, indices[-1] if indices else 0
        groups: list[SizeGroup] = [(j, ((1, j),)) for j in range(lead)]
        groups += [(lead + a - k, ((0, a),)) for a in range(k, len(params))]
        # params' other indexed axes are pinned when dynamic: the gradient's rows past them would not be its leading
        # elements (job.unpin_size)
        return groups + ([(None, ((0, 0),))] if k else [])


@irdl_op_definition
class ScatterNdOp(JobOp):
    """Zeros of the result's type with each slice of `updates` added where `indices` (..., K) point (OneFlow's
    scatter_nd, which adds repeated indices up): gather_nd's adjoint, and its gradient."""

    name = "job.scatter_nd"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    updates = operand_def(TensorType)
    indices = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if gather_nd_shape(result, types[1]) != shape_of(types[0]) or dtype_of(types[0]) != dtype_of(result):
            raise VerifyException(
                f"gather_nd of {fmt(result)} at indices {fmt(types[1])} does not have the updates' type {fmt(types[0])}"
            )

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The updates' leading axes are the indices' but the last; their other axes are the result's past K. The
        result's first K axes are its type's: a dynamic one is sized after it (job.unpin_size)."""
        updates, indices = shape_of(types[0]), shape_of(types[1])
        lead, k = len(indices) - 1, indices[-1] if indices else 0
        groups: list[SizeGroup] = [(None, ((0, j), (1, j))) for j in range(lead)]
        return groups + [(k + t, ((0, lead + t),)) for t in range(len(updates) - lead)]


class TensorScatterNdOp(JobOp):
    """params with each slice of `updates` written where `indices` (..., K) point: OneFlow's
    tensor_scatter_nd_update and _add, linear in params and updates together."""

    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0, 2),)
    params = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        params, indices, updates = types
        if gather_nd_shape(params, indices) != shape_of(updates) or dtype_of(updates) != dtype_of(params):
            raise VerifyException(f"gather_nd of params {fmt(params)} at indices {fmt(indices)} does not have the "
                                  f"updates' type {fmt(updates)}")  # fmt: skip
        return params

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The result has params' sizes, the updates' leading axes the indices' but the last and their others
        params' past K; as in gather_nd, of params' indexed axes only axis 0 may stay dynamic (the updates'
        gradient is a gather_nd of dy)."""
        params, indices = shape_of(types[0]), shape_of(types[1])
        lead, k = len(indices) - 1, indices[-1] if indices else 0
        groups: list[SizeGroup] = [(None, ((1, j), (2, j))) for j in range(lead)]
        groups += [(a, ((0, a), (2, lead + a - k))) for a in range(k, len(params))]
        return groups + ([(0, ((0, 0),))] if k else [])


@irdl_op_definition
class TensorScatterNdUpdateOp(TensorScatterNdOp):
    """params with the slices at `indices` replaced by the sum of the updates pointing there, as OneFlow's
    kernel zeroes them and then adds (a repeated index gets the sum of its updates)."""

    name = "job.tensor_scatter_nd_update"


@irdl_op_definition
class TensorScatterNdAddOp(TensorScatterNdOp):
    """params with each slice of `updates` added where `indices` point (repeats add up): params + scatter_nd."""

    name = "job.tensor_scatter_nd_add"


# ----------------------------------------------------------------- linear algebra


@irdl_op_definition
class MatmulOp(JobOp):
    """(..., m, k) x (..., k, n), either side optionally transposed (OneFlow transpose_a/b)."""

    name = "job.matmul"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,), (1,))
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    res = result_def(TensorType)
    transpose_a = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    transpose_b = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        dtype = same_dtype(types, "matmul operands")
        a, b = shape_of(types[0]), shape_of(types[1])
        if len(a) < 2 or len(a) != len(b) or a[:-2] != b[:-2]:
            raise VerifyException(f"matmul needs rank >= 2 operands with equal batch dims, got {a} x {b}")
        m, k = (a[-1], a[-2]) if flag(props, "transpose_a") else (a[-2], a[-1])
        k2, n = (b[-1], b[-2]) if flag(props, "transpose_b") else (b[-2], b[-1])
        if k != k2:
            ta = "^T" if flag(props, "transpose_a") else ""
            tb = "^T" if flag(props, "transpose_b") else ""
            raise VerifyException(f"matmul contraction mismatch: {a}{ta} x {b}{tb} ({k} != {k2})")
        return tensor(a[:-2] + (m, n), dtype)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        rank = len(shape_of(types[0]))
        rows, cols = rank - 2, rank - 1
        ta, tb = flag(props, "transpose_a"), flag(props, "transpose_b")
        groups: list[SizeGroup] = [(r, ((0, r), (1, r))) for r in range(rank - 2)]
        groups.append((rows, ((0, cols if ta else rows),)))
        groups.append((cols, ((1, rows if tb else cols),)))
        groups.append((None, ((0, rows if ta else cols), (1, cols if tb else rows))))
        return groups


# ----------------------------------------------------------------- reductions


def reduction_groups(rank: int, axes: Sequence[int], keepdims: bool) -> list[SizeGroup]:
    """A reduction's kept axes pass their size on; reduced ones end (a kept size-1 axis is static)."""
    norm = {normalize_axis(a, rank, "reduction axis") for a in axes}
    groups: list[SizeGroup] = []
    for a in range(rank):
        if a in norm:
            groups.append((None, ((0, a),)))
        else:
            groups.append((a if keepdims else a - sum(1 for n in norm if n < a), ((0, a),)))
    return groups


def reduced_shape(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    norm = {normalize_axis(a, len(shape), "reduction axis") for a in axes}
    if keepdims:
        return tuple(1 if i in norm else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in norm)


class ReduceOp(JobOp):
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape = shape_of(types[0])
        return tensor(reduced_shape(shape, ints(props, "axes"), flag(props, "keepdims")), dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return reduction_groups(len(shape_of(types[0])), ints(props, "axes"), flag(props, "keepdims"))


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "job.reduce_sum"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    name = "job.reduce_mean"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "job.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "job.reduce_min"


class ReduceExtremumGradOp(JobOp):
    """dx of reduce_max or reduce_min from (dy, x, y): dy split evenly among the entries of x equal to y."""

    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)
    res = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        reduced = reduced_shape(shape_of(types[1]), ints(props, "axes"), flag(props, "keepdims"))
        if shape_of(types[0]) != reduced or shape_of(types[2]) != reduced:
            raise VerifyException(f"{cls.name.removeprefix('job.')}: dy and y must have the reduced shape {reduced}")
        return types[1]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """dx has x's sizes; a kept axis of x is dy's and y's too (a train job's max over a dynamic axis)."""
        kept = reduction_groups(len(shape_of(types[1])), ints(props, "axes"), flag(props, "keepdims"))
        return [(a, ((1, a), *(((0, r), (2, r)) if r is not None else ()))) for a, (r, _) in enumerate(kept)]


@irdl_op_definition
class ReduceMaxGradOp(ReduceExtremumGradOp):
    name = "job.reduce_max_grad"


@irdl_op_definition
class ReduceMinGradOp(ReduceExtremumGradOp):
    name = "job.reduce_min_grad"


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    name = "job.reduce_prod"


@irdl_op_definition
class ReduceProdGradOp(JobOp):
    """dx of reduce_prod from (dy, x): dy times the product of the other entries of each entry's group.

    Never the product divided by the entry, which a zero would make 0/0: with one zero in a
    group that entry gets the product of the rest and the others 0; with two, all get 0.
    """

    name = "job.reduce_prod_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        reduced = reduced_shape(shape_of(types[1]), ints(props, "axes"), flag(props, "keepdims"))
        if shape_of(types[0]) != reduced or dtype_of(types[0]) != dtype_of(types[1]):
            expected = fmt(tensor(reduced, dtype_of(types[1])))
            raise VerifyException(f"reduce_prod_grad: dy must be {expected}, got {fmt(types[0])}")
        return types[1]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """dx has x's sizes; a kept axis of x is dy's too."""
        kept = reduction_groups(len(shape_of(types[1])), ints(props, "axes"), flag(props, "keepdims"))
        return [(a, ((1, a), *(((0, r),) if r is not None else ()))) for a, (r, _) in enumerate(kept)]


@irdl_op_definition
class ArgmaxOp(JobOp):
    name = "job.argmax"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(-1, i64))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape = shape_of(types[0])
        return tensor(reduced_shape(shape, [integer(props, "axis", -1)], False), i64)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return reduction_groups(len(shape_of(types[0])), [integer(props, "axis", -1)], False)


@irdl_op_definition
class TopKOp(JobOp):
    """The int32 indices of the k largest entries along `axis`, largest first (OneFlow's flow.math.top_k).

    Equal entries in index order and NaN above everything, as torch.topk; OneFlow's comparator
    leaves NaN's place undefined. Along a dynamic axis it is the indices of min(k, actual size) entries,
    as OneFlow's kernel clamps k.
    """

    name = "job.top_k"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(-1, i64))
    k = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape = shape_of(types[0])
        axis = normalize_axis(integer(props, "axis", -1), len(shape), "top_k axis")
        k = integer(props, "k")
        if not shape or not 1 <= k <= shape[axis]:
            raise VerifyException(f"top_k needs 1 <= k <= {shape[axis] if shape else 0}, the size of axis {axis}, got k = {k}")
        return tensor(shape[:axis] + (k,) + shape[axis + 1:], i32)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """Every axis but `axis` passes its size on."""
        rank = len(shape_of(types[0]))
        axis = normalize_axis(integer(props, "axis", -1), rank, "top_k axis")
        return [(a, ((0, a),)) for a in range(rank) if a != axis]

    @classmethod
    def sliced_axes(cls, types: Sequence[Attribute], props: Props) -> list[tuple[int, OperandAxis, tuple[int, int, int]]]:
        """`axis` keeps k of its entries, or all of them where fewer are there."""
        axis = normalize_axis(integer(props, "axis", -1), len(shape_of(types[0])), "top_k axis")
        return [(axis, (0, axis), (0, integer(props, "k"), 1))]


@irdl_op_definition
class ArgSortOp(JobOp):
    """The int32 indices that sort `axis`, ascending or `descending` (OneFlow's flow.argsort).

    Equal entries keep their index order either way and NaN counts as the largest (last ascending,
    first descending, as top_k), where OneFlow's comparator leaves both open. Along a dynamic axis
    it sorts the actual entries.
    """

    name = "job.arg_sort"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(-1, i64))
    descending = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape = shape_of(types[0])
        if not shape:
            raise VerifyException("arg_sort needs an operand with at least one axis, got a scalar")
        normalize_axis(integer(props, "axis", -1), len(shape), "arg_sort axis")
        return tensor(shape, i32)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """Every axis passes its size on, the sorted one too."""
        return [(a, ((0, a),)) for a in range(len(shape_of(types[0])))]


# ----------------------------------------------------------------- nn


class SoftmaxLikeOp(JobOp):
    x = operand_def(TensorType)
    res = result_def(TensorType)
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(-1, i64))
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        require_float(types[0], "operand")
        normalize_axis(integer(props, "axis", -1), len(shape_of(types[0])), "softmax axis")
        return types[0]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return aligned_groups(types)


@irdl_op_definition
class SoftmaxOp(SoftmaxLikeOp):
    name = "job.softmax"


@irdl_op_definition
class LogSoftmaxOp(SoftmaxLikeOp):
    name = "job.log_softmax"


class SoftmaxLikeGradOp(GradOp):
    axis = prop_def(IntegerAttr, default_value=IntegerAttr(-1, i64))


@irdl_op_definition
class SoftmaxGradOp(SoftmaxLikeGradOp):
    name = "job.softmax_grad"


@irdl_op_definition
class LogSoftmaxGradOp(SoftmaxLikeGradOp):
    name = "job.log_softmax_grad"


def _check_logits_labels(logits: Attribute, labels: Attribute, sparse: bool) -> Shape:
    require_float(logits, "logits")
    s = shape_of(logits)
    if len(s) != 2:
        raise VerifyException(f"logits must be (batch, classes), got {fmt(logits)}")
    if sparse:
        if shape_of(labels) != s[:1] or dtype_of(labels) not in (i32, i64):
            raise VerifyException(f"sparse labels must be int32/int64 of shape ({s[0]},), got {fmt(labels)}")
    elif shape_of(labels) != s or dtype_of(labels) != dtype_of(logits):  # their actual sizes: the size groups'
        raise VerifyException(f"dense labels must match logits {fmt(logits)}, got {fmt(labels)}")
    return s


class CrossEntropyOp(JobOp):
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    SPARSE: ClassVar[bool]

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        s = _check_logits_labels(types[0], types[1], cls.SPARSE)
        return tensor(s[:1], dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        if cls.SPARSE:  # static classes: the label picker's row offsets are filled from them when its kernel is built
            return [(0, ((0, 0), (1, 0)))]
        return [(0, ((0, 0), (1, 0))), (None, ((0, 1), (1, 1)))]


@irdl_op_definition
class SparseSoftmaxCrossEntropyOp(CrossEntropyOp):
    """Per-sample loss from logits and class indices (OneFlow's sparse_softmax_cross_entropy_with_logits)."""

    name = "job.sparse_softmax_cross_entropy"
    SPARSE: ClassVar[bool] = True


@irdl_op_definition
class SoftmaxCrossEntropyOp(CrossEntropyOp):
    name = "job.softmax_cross_entropy"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((1,),)  # -sum(labels * log_softmax(logits))
    SPARSE: ClassVar[bool] = False


class CrossEntropyGradOp(JobOp):
    dloss = operand_def(TensorType)
    logits = operand_def(TensorType)
    labels = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    SPARSE: ClassVar[bool]

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        s = _check_logits_labels(types[1], types[2], cls.SPARSE)
        if shape_of(types[0]) != s[:1] or dtype_of(types[0]) != dtype_of(types[1]):
            raise VerifyException(f"loss gradient must be {fmt(tensor(s[:1], dtype_of(types[1])))}, got {fmt(types[0])}")
        return types[1]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        if cls.SPARSE:  # static classes, as the loss's
            return [(0, ((0, 0), (1, 0), (2, 0)))]
        return [(0, ((0, 0), (1, 0), (2, 0))), (1, ((1, 1), (2, 1)))]


@irdl_op_definition
class SparseSoftmaxCrossEntropyGradOp(CrossEntropyGradOp):
    name = "job.sparse_softmax_cross_entropy_grad"
    SPARSE: ClassVar[bool] = True


@irdl_op_definition
class SoftmaxCrossEntropyGradOp(CrossEntropyGradOp):
    name = "job.softmax_cross_entropy_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,), (2,))  # (softmax * sum(labels) - labels) * dloss
    SPARSE: ClassVar[bool] = False


class WindowOp(JobOp):
    """Shared NCHW window attributes: strides, explicit pads (top, bottom, left, right)."""

    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)

    @classmethod
    def window(cls, props: Props) -> tuple[Shape, Shape, Shape]:
        strides, pads, dil = ints(props, "strides"), ints(props, "pads"), ints(props, "dilations", (1, 1))
        if len(strides) != 2 or min(strides) < 1:
            raise VerifyException(f"strides must be two positive ints, got {list(strides)}")
        if len(pads) != 4 or min(pads) < 0:
            raise VerifyException(f"pads must be four non-negative ints (top, bottom, left, right), got {list(pads)}")
        if len(dil) != 2 or min(dil) < 1:
            raise VerifyException(f"dilations must be two positive ints, got {list(dil)}")
        return strides, pads, dil


def _nchw(t: Attribute, what: str) -> Shape:
    s = shape_of(t)
    if len(s) != 4:
        raise VerifyException(f"{what} must be NCHW (rank 4), got {fmt(t)}")
    require_float(t, what)
    return s


def conv_output(x: Shape, w: Shape, props: Props) -> Shape:
    strides, pads, dil = WindowOp.window(props)
    groups = integer(props, "groups", 1)
    n, c, h, wd = x
    f, cg, kh, kw = w
    if groups < 1 or c % groups or f % groups or cg * groups != c:
        raise VerifyException(
            f"conv2d: input has {c} channels, weight expects {cg} per group x {groups} groups (weight {w})"
        )
    oh = window_out(h, kh, strides[0], pads[0], pads[1], dil[0])
    ow = window_out(wd, kw, strides[1], pads[2], pads[3], dil[1])
    if oh < 1 or ow < 1:
        raise VerifyException(f"conv2d window {kh}x{kw} does not fit the padded input {h}x{wd}")
    return (n, f, oh, ow)


class ConvBase(WindowOp):
    dilations = prop_def(DenseArrayBase, default_value=i64_array([1, 1]))
    groups = prop_def(IntegerAttr, default_value=IntegerAttr(1, i64))
    traits = traits_def(Pure())


@irdl_op_definition
class Conv2DOp(ConvBase):
    name = "job.conv2d"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,), (1,))
    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        dtype = same_dtype(types, "conv2d operands")
        return tensor(conv_output(_nchw(types[0], "input"), _nchw(types[1], "weight"), props), dtype)

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(0, ((0, 0),))]  # the batch; channels and window axes are static


@irdl_op_definition
class Conv2DGradInputOp(ConvBase):
    """dx from (dy, w); the result type is x's."""

    name = "job.conv2d_grad_input"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,), (1,))
    dy = operand_def(TensorType)
    weight = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        same_dtype([*types, result], "conv2d_grad_input operands and result")
        if conv_output(_nchw(result, "input"), _nchw(types[1], "weight"), props) != shape_of(types[0]):
            raise VerifyException(f"conv2d of {fmt(result)} does not produce the gradient's shape {fmt(types[0])}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(0, ((0, 0),))]


@irdl_op_definition
class Conv2DGradFilterOp(ConvBase):
    """dw from (dy, x); the result type is the weight's."""

    name = "job.conv2d_grad_filter"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,), (1,))
    dy = operand_def(TensorType)
    x = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if conv_output(_nchw(types[1], "input"), _nchw(result, "weight"), props) != shape_of(types[0]):
            raise VerifyException(f"conv2d with weight {fmt(result)} does not produce the gradient's shape {fmt(types[0])}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(None, ((0, 0), (1, 0)))]  # summed over the batch


def pool_output(x: Shape, props: Props) -> Shape:
    strides, pads, _ = WindowOp.window(props)
    kernel = ints(props, "kernel")
    if len(kernel) != 2 or min(kernel) < 1:
        raise VerifyException(f"pool kernel must be two positive ints, got {list(kernel)}")
    n, c, h, w = x
    oh = window_out(h, kernel[0], strides[0], pads[0], pads[1])
    ow = window_out(w, kernel[1], strides[1], pads[2], pads[3])
    if oh < 1 or ow < 1:
        raise VerifyException(f"pool window {kernel[0]}x{kernel[1]} does not fit the padded input {h}x{w}")
    if pads[0] >= kernel[0] or pads[1] >= kernel[0] or pads[2] >= kernel[1] or pads[3] >= kernel[1]:
        raise VerifyException(f"pool padding {list(pads)} must be smaller than the window {list(kernel)}")
    return (n, c, oh, ow)


class PoolBase(WindowOp):
    kernel = prop_def(DenseArrayBase)
    traits = traits_def(Pure())


class PoolOp(PoolBase):
    x = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return tensor(pool_output(_nchw(types[0], "input"), props), dtype_of(types[0]))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(0, ((0, 0),))]


@irdl_op_definition
class MaxPool2DOp(PoolOp):
    name = "job.max_pool2d"


@irdl_op_definition
class AvgPool2DOp(PoolOp):
    """Average over the window's in-bounds elements (padding excluded, as in TF/OneFlow)."""

    name = "job.avg_pool2d"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)


@irdl_op_definition
class MaxPool2DGradOp(PoolBase):
    name = "job.max_pool2d_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        out = pool_output(_nchw(types[1], "input"), props)
        if shape_of(types[0]) != out or shape_of(types[2]) != out:
            raise VerifyException(f"max_pool2d_grad: dy and y must have the pooled shape {out}")
        return types[1]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(0, ((0, 0), (1, 0), (2, 0)))]


@irdl_op_definition
class AvgPool2DGradOp(PoolBase):
    name = "job.avg_pool2d_grad"
    LINEAR_OPERANDS: ClassVar[tuple[tuple[int, ...], ...]] = ((0,),)
    dy = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        if pool_output(_nchw(result, "input"), props) != shape_of(types[0]):
            raise VerifyException(f"avg_pool2d of {fmt(result)} does not produce the gradient's shape {fmt(types[0])}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        return [(0, ((0, 0),))]


# ----------------------------------------------------------------- distribution


@irdl_op_definition
class BoxingOp(JobOp):
    """Logically the identity: turns `src_sbp` on `src_placement` into `sbp` on `placement`.

    Inserted by insert-boxing (with a `reason` and the consumer's location) or traced from
    `flow.parallel_cast` as a user hint, whose `src_sbp` sbp-infer fills in.  Lowering
    makes it the collective (all_reduce, all_gather, ...) of each hierarchy axis.
    """

    name = "job.boxing"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    src_sbp = opt_prop_def(NdSbpAttr)
    src_placement = opt_prop_def(PlacementAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return types[0]

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """The identity's: lower-to-physical decides which boxings of a dynamic value the devices can run."""
        return [(a, ((0, a),)) for a in range(len(shape_of(types[0])))]

    @signature_verifier
    def verify_(self) -> None:
        super().verify_()
        if self.sbp is None:
            raise VerifyException("job.boxing needs the target sbp")
        if self.src_sbp is not None:
            where = self.src_placement or self.placement
            check_fits(
                self.src_sbp, len(shape_of(self.x.type)), hierarchy_of(where) if where else None, "src_sbp"
            )


# ----------------------------------------------------------------- training state


@irdl_op_definition
class LearningRateOp(JobOp):
    """The learning rate at `step` from a schedule dictionary (see passes/optimizer.py)."""

    name = "job.learning_rate"
    step = operand_def(TensorType)
    res = result_def(TensorType)
    schedule = prop_def(DictionaryAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return tensor((), f32)


class EffectOp(JobOp):
    """An op with no result that changes state (variables) or marks the program (the loss)."""

    traits = traits_def(MemoryWriteEffect())
    assembly_format = "operands attr-dict `:` type(operands)"

    @classmethod
    def make(cls, operands: Sequence[SSAValue], result_type: Attribute | None = None, **props: object) -> Self:
        if result_type is not None:
            raise VerifyException(f"{cls.name} has no result")
        properties = {k: to_attr(v) for k, v in props.items() if v is not None}
        op = cls.create(operands=list(operands), properties=properties)
        op.verify_()
        return op

    @signature_verifier
    def verify_(self) -> None:
        verify_distribution(self)


def check_variable_operands(name: str, types: Sequence[Attribute], like: int, what: str) -> None:
    """An update's operands, or those its norms over a piece read: a float variable, `like` operands of
    its type (gradient, optimizer state), then scalars (lr, step)."""
    w = types[0]
    require_float(w, what)
    for t in types[1 : like + 1]:
        if t != w:
            raise VerifyException(f"{name}: {fmt(t)} does not match the variable {fmt(w)}")
    for t in types[like + 1 :]:
        if shape_of(t) != ():
            raise VerifyException(f"{name}: scalar operands must be rank 0, got {fmt(t)}")


class UpdateOp(EffectOp):
    """Writes new values into variables; `variable`-fed operands name what is written."""

    @classmethod
    def check_operands(cls, types: Sequence[Attribute], props: Props) -> None:
        check_variable_operands(cls.name, types, cls.STATE_COUNT, "updated variable")

    STATE_COUNT: ClassVar[int]

    def verify_(self) -> None:
        verify_distribution(self)
        self.check_operands([o.type for o in self.operands], self.properties)
        for i in self.WRITTEN_OPERANDS:
            if not isinstance(self.operands[i].owner, VariableOp):
                raise VerifyException(f"{self.name}: operand #{i} must come from job.variable")

    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]]


class NormUpdateOp(UpdateOp):
    """An update scaled by 2-norms of the whole variable (LAMB, LARS).

    Its kernel takes them of its operands, which on one device (or broadcast)
    hold all of the variable. A split variable's update gets them as a last
    operand `norms`: tensor<2xT>, the two squared norms, which lower-to-physical
    sums over the devices from each piece's (LambNormsOp, LarsNormsOp), as
    OneFlow's norms are reductions whose partial sums are boxed to broadcast.
    """

    OPERANDS: ClassVar[int]
    """The operands without `norms`."""

    @classmethod
    def check_operands(cls, types: Sequence[Attribute], props: Props) -> None:
        super().check_operands(types[: cls.OPERANDS], props)
        for t in types[cls.OPERANDS :]:
            if shape_of(t) != (2,) or dtype_of(t) != dtype_of(types[0]):
                raise VerifyException(f"{cls.name}: norms must be tensor<2x{dtype_of(types[0])}>, got {fmt(t)}")


@irdl_op_definition
class AssignOp(UpdateOp):
    """variable := value (the train-step counter, moving averages)."""

    name = "job.assign"
    variable = operand_def(TensorType)
    value = operand_def(TensorType)
    STATE_COUNT: ClassVar[int] = 1
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0,)

    @classmethod
    def check_operands(cls, types: Sequence[Attribute], props: Props) -> None:
        if types[0] != types[1]:
            raise VerifyException(f"job.assign: value {fmt(types[1])} does not match the variable {fmt(types[0])}")


@irdl_op_definition
class SgdUpdateOp(UpdateOp):
    name = "job.sgd_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    lr = operand_def(TensorType)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    STATE_COUNT: ClassVar[int] = 1
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0,)


@irdl_op_definition
class MomentumUpdateOp(UpdateOp):
    """OneFlow momentum: m = beta*m - lr*(g + wd*w); w += m."""

    name = "job.momentum_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    momentum = operand_def(TensorType)
    lr = operand_def(TensorType)
    beta = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    STATE_COUNT: ClassVar[int] = 2
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 2)


@irdl_op_definition
class AdamUpdateOp(UpdateOp):
    """Adam, or AdamW when weight_decay > 0 (decoupled, as torch.optim.AdamW)."""

    name = "job.adam_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    m = operand_def(TensorType)
    v = operand_def(TensorType)
    lr = operand_def(TensorType)
    step = operand_def(TensorType)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    do_bias_correction = prop_def(BoolAttr, default_value=BoolAttr.from_bool(True))
    STATE_COUNT: ClassVar[int] = 3
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 2, 3)


@irdl_op_definition
class RmsPropUpdateOp(UpdateOp):
    """OneFlow's RMSProp: ms = d*ms + (1-d)*g*g; w -= lr * g / sqrt(ms + epsilon) (epsilon inside the root)."""

    name = "job.rmsprop_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    mean_square = operand_def(TensorType)
    lr = operand_def(TensorType)
    decay_rate = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    STATE_COUNT: ClassVar[int] = 2
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 2)


@irdl_op_definition
class CenteredRmsPropUpdateOp(UpdateOp):
    """Centered RMSProp (OneFlow's): also mg = d*mg + (1-d)*g, and the root is of ms - mg*mg + epsilon."""

    name = "job.centered_rmsprop_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    mean_square = operand_def(TensorType)
    mean_gradient = operand_def(TensorType)
    lr = operand_def(TensorType)
    decay_rate = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    STATE_COUNT: ClassVar[int] = 3
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 2, 3)


@irdl_op_definition
class LambUpdateOp(NormUpdateOp):
    """OneFlow's LAMB: bias-corrected Adam direction u = m_hat / sqrt(v_hat + epsilon), scaled by |w| / |u|;
    with weight_decay, w -= lr * (|w| / |u|) * (u + weight_decay * w), the ratio still of u alone (OneFlow's).

    `norms`, when given, holds |w|**2 and |u|**2 of the whole variable.
    """

    name = "job.lamb_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    m = operand_def(TensorType)
    v = operand_def(TensorType)
    lr = operand_def(TensorType)
    step = operand_def(TensorType)
    norms = opt_operand_def(TensorType)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    STATE_COUNT: ClassVar[int] = 3
    OPERANDS: ClassVar[int] = 6
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 2, 3)


@irdl_op_definition
class LarsUpdateOp(NormUpdateOp):
    """OneFlow's LARS: momentum at a local rate lr * lars_coefficient * |w| / (epsilon + |g| + weight_decay * |w|).

    m = momentum_beta * m - local_lr * (g + weight_decay * w); w += m.  `norms`,
    when given, holds |w|**2 and |g|**2 of the whole variable.
    """

    name = "job.lars_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    momentum = operand_def(TensorType)
    lr = operand_def(TensorType)
    norms = opt_operand_def(TensorType)
    momentum_beta = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    lars_coefficient = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    STATE_COUNT: ClassVar[int] = 2
    OPERANDS: ClassVar[int] = 4
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 2)


class SparseUpdateOp(UpdateOp):
    """An update of only some elements: those where `present` (int8, of the variable's shape, operand #2) is
    nonzero take the dense update's step; the others keep their variable and state (OneFlow's lazy_adam and
    indexed_slices_* model updates; the optimizer pass builds `present` with ordinary job ops)."""

    @classmethod
    def check_operands(cls, types: Sequence[Attribute], props: Props) -> None:
        w, present = types[0], types[2]
        if shape_of(present) != shape_of(w) or dtype_of(present) != i8:
            raise VerifyException(f"{cls.name}: present must be int8 of the variable's shape {fmt(w)}, "
                                  f"got {fmt(present)}")
        super().check_operands([*types[:2], w, *types[3:]], props)


@irdl_op_definition
class LazyAdamUpdateOp(SparseUpdateOp):
    """OneFlow's lazy_adam where `present`: m, v as Adam's; w -= lr * sqrt(1 - beta2**step) / (1 - beta1**step)
    * m / (sqrt(v) + epsilon) (torch.optim.SparseAdam's form: epsilon is not bias-corrected)."""

    name = "job.lazy_adam_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    present = operand_def(TensorType)
    m = operand_def(TensorType)
    v = operand_def(TensorType)
    lr = operand_def(TensorType)
    step = operand_def(TensorType)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    STATE_COUNT: ClassVar[int] = 4
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 3, 4)


@irdl_op_definition
class IndexedSlicesSgdUpdateOp(SparseUpdateOp):
    """job.sgd_update of the rows `present` marks (OneFlow's indexed_slices_sgd_update)."""

    name = "job.indexed_slices_sgd_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    present = operand_def(TensorType)
    lr = operand_def(TensorType)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    STATE_COUNT: ClassVar[int] = 2
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0,)


@irdl_op_definition
class IndexedSlicesMomentumUpdateOp(SparseUpdateOp):
    """job.momentum_update of the rows `present` marks (OneFlow's indexed_slices_momentum_update)."""

    name = "job.indexed_slices_momentum_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    present = operand_def(TensorType)
    momentum = operand_def(TensorType)
    lr = operand_def(TensorType)
    beta = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    STATE_COUNT: ClassVar[int] = 3
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 3)


@irdl_op_definition
class IndexedSlicesAdamUpdateOp(SparseUpdateOp):
    """job.adam_update of the rows `present` marks (OneFlow's indexed_slices_adam_update)."""

    name = "job.indexed_slices_adam_update"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    present = operand_def(TensorType)
    m = operand_def(TensorType)
    v = operand_def(TensorType)
    lr = operand_def(TensorType)
    step = operand_def(TensorType)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr, default_value=FloatAttr(0.0, f64))
    do_bias_correction = prop_def(BoolAttr, default_value=BoolAttr.from_bool(True))
    STATE_COUNT: ClassVar[int] = 4
    WRITTEN_OPERANDS: ClassVar[tuple[int, ...]] = (0, 3, 4)


@irdl_op_definition
class MinimizeOp(EffectOp):
    """Marks the loss of a train job and carries the optimizer; `autodiff` consumes it.

    A non-scalar loss is minimized through its mean, as OneFlow scales the
    gradient by the loss's element count.
    """

    name = "job.minimize"
    loss = operand_def(TensorType)
    optimizer = prop_def(DictionaryAttr)

    @signature_verifier
    def verify_(self) -> None:
        verify_distribution(self)
        require_float(self.loss.type, "loss")


@irdl_op_definition
class ApplyGradientsOp(EffectOp):
    """(variable, gradient) pairs for the optimizer pass to turn into update ops."""

    name = "job.apply_gradients"
    operands_ = var_operand_def(TensorType)
    optimizer = prop_def(DictionaryAttr)

    def pairs(self) -> list[tuple[SSAValue, SSAValue]]:
        ops = list(self.operands)
        return list(zip(ops[0::2], ops[1::2]))

    def verify_(self) -> None:
        verify_distribution(self)
        if len(self.operands) % 2:
            raise VerifyException("apply_gradients takes (variable, gradient) pairs")
        for var, grad in self.pairs():
            if not isinstance(var.owner, VariableOp):
                raise VerifyException("apply_gradients: every first operand of a pair must come from job.variable")
            if var.type != grad.type:
                raise VerifyException(f"gradient {fmt(grad.type)} does not match its variable {fmt(var.type)}")


# ----------------------------------------------------------------- per-device (physical) ops


class MeshOp(JobOp):
    """An op of a per-device program that involves the devices along one axis of the mesh.

    `lower-to-physical` writes these for job.boxing; shapes are per-device
    shapes, and `mesh` / `mesh_axis` name the group exactly as the buffer
    collectives do (the devices sharing this device's other coordinates).
    """

    x = operand_def(TensorType)
    res = result_def(TensorType)
    mesh = prop_def(DenseArrayBase)
    mesh_axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def parts(cls, props: Props) -> int:
        mesh, axis = ints(props, "mesh"), integer(props, "mesh_axis")
        if not mesh or min(mesh) <= 0 or not 0 <= axis < len(mesh):
            raise VerifyException(f"{cls.name}: mesh_axis {axis} of the mesh {list(mesh)} is not a mesh axis")
        return mesh[axis]

    @classmethod
    def scaled(cls, t: Attribute, props: Props, key: str, factor: float) -> TensorType:
        """`t` with its dimension `props[key]` multiplied by `factor` (which must give a whole size)."""
        shape = list(shape_of(t))
        axis = normalize_axis(integer(props, key), len(shape), f"{cls.name} {key}")
        size = shape[axis] * factor
        if size != int(size):
            raise VerifyException(f"{cls.name}: dimension {axis} of {fmt(t)} does not divide into {round(1 / factor)} parts")
        shape[axis] = int(size)
        return tensor(shape, dtype_of(t))


@irdl_op_definition
class AllReduceOp(MeshOp):
    """partial -> broadcast: every device gets the reduction of the group's values."""

    name = "job.all_reduce"
    reduction = prop_def(StringAttr, default_value=StringAttr("sum"))

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        cls.parts(props)
        return types[0]


@irdl_op_definition
class AllGatherOp(MeshOp):
    """split(axis) -> broadcast: the group's chunks concatenated (padding included) along `axis`."""

    name = "job.all_gather"
    axis = prop_def(IntegerAttr)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return cls.scaled(types[0], props, "axis", cls.parts(props))

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        """Each device's own rows (dynamic axis 0 only, gathered along it): the result's rows are theirs one
        after another, a size the devices sum at run time (`buffer.sum_sizes`), so no group gives it."""
        dynamic = dynamic_axes(types[0])
        if dynamic and (tuple(dynamic) != (0,) or integer(props, "axis") != 0):
            raise VerifyException(
                f"{cls.name} gathers each device's own sizes along axis 0 only, with every other axis static; "
                f"given {describe(types[0])} gathered along axis {integer(props, 'axis')}"
            )
        return [(a or None, ((0, a),)) for a in range(len(shape_of(types[0])))]

    @classmethod
    def dynamic_result(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> Attribute:
        result = super().dynamic_result(types, props, result)
        return with_dynamic(result, (0,)) if dynamic_axes(types[0]) else result


@irdl_op_definition
class ReduceScatterOp(MeshOp):
    """partial -> split(axis): this device's chunk of the group's reduction."""

    name = "job.reduce_scatter"
    axis = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr, default_value=StringAttr("sum"))

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return cls.scaled(types[0], props, "axis", 1 / cls.parts(props))


@irdl_op_definition
class AllToAllOp(MeshOp):
    """split(concat_axis) -> split(split_axis): chunk k along `split_axis` goes to coordinate k."""

    name = "job.all_to_all"
    split_axis = prop_def(IntegerAttr)
    concat_axis = prop_def(IntegerAttr)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        p = cls.parts(props)
        return cls.scaled(cls.scaled(types[0], props, "split_axis", 1 / p), props, "concat_axis", p)


@irdl_op_definition
class ShardSliceOp(MeshOp):
    """broadcast -> split(axis), no communication: this device's chunk, zero padded to ceil(size / parts)."""

    name = "job.shard_slice"
    axis = prop_def(IntegerAttr)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        shape = list(shape_of(types[0]))
        axis = normalize_axis(integer(props, "axis"), len(shape), f"{cls.name} axis")
        shape[axis] = -(-shape[axis] // cls.parts(props))
        return tensor(shape, dtype_of(types[0]))


@irdl_op_definition
class ShardEmbedOp(MeshOp):
    """split(axis) -> partial_sum, no communication: this device's chunk in place in zeros of the whole size."""

    name = "job.shard_embed"
    axis = prop_def(IntegerAttr)

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        expected = ShardSliceOp.infer([result], props)
        if expected != types[0]:
            raise VerifyException(f"{cls.name}: the chunk of {fmt(result)} is {fmt(expected)}, not {fmt(types[0])}")


@irdl_op_definition
class BroadcastToPartialOp(MeshOp):
    """broadcast -> partial_sum, no communication: coordinate 0 keeps the value, the others hold zeros."""

    name = "job.broadcast_to_partial"

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        cls.parts(props)
        return types[0]


@irdl_op_definition
class PadOp(JobOp):
    """Zeros after the end of each axis up to the result's size: an uneven chunk padded for a collective."""

    name = "job.pad"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def check(cls, types: Sequence[Attribute], props: Props, result: Attribute) -> None:
        a, b = shape_of(types[0]), shape_of(result)
        if len(a) != len(b) or any(x > y for x, y in zip(a, b)) or dtype_of(types[0]) != dtype_of(result):
            raise VerifyException(f"cannot pad {fmt(types[0])} to {fmt(result)}")


class ClassSplitOp(JobOp):
    """A stage of sparse softmax cross-entropy (or softmax) with the logits split over classes on `mesh_axis`.

    `lower-to-physical` writes these for a cross-entropy whose logits are
    split(1) (a model-parallel classifier head), or a softmax split along its axis. Each device holds the chunk of
    `classes` its coordinate owns (the last chunks padded, the padding ignored);
    the stages between them are all_reduce ops over the same mesh axis.
    """

    mesh = prop_def(DenseArrayBase)
    mesh_axis = prop_def(IntegerAttr)
    classes = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def rows(cls, logits: Attribute, props: Props) -> TensorType:
        MeshOp.parts(props)
        s = shape_of(logits)
        require_float(logits, "logits")
        if len(s) != 2 or s[1] * MeshOp.parts(props) < integer(props, "classes"):
            raise VerifyException(
                f"{cls.name}: logits {fmt(logits)} are not a chunk of {integer(props, 'classes')} classes "
                f"over {MeshOp.parts(props)} devices"
            )
        return tensor(s[:1], dtype_of(logits))

    @classmethod
    def expect(cls, types: Sequence[Attribute], wanted: Sequence[Attribute], names: Sequence[str]) -> None:
        """Shapes (at their bounds) and dtypes: how many rows each device has is `size_groups`' to relate."""
        for t, w, n in zip(types, wanted, names):
            if shape_of(t) != shape_of(w) or dtype_of(t) != dtype_of(w):
                raise VerifyException(f"{cls.name}: {n} must be {fmt(w)}, got {fmt(t)}")

    @classmethod
    def expect_labels(cls, labels: Attribute, rows: TensorType) -> None:
        """One int32/int64 label per row of the logits."""
        if shape_of(labels) != shape_of(rows) or dtype_of(labels) not in (i32, i64):
            raise VerifyException(f"{cls.name}: labels must be int32/int64 of shape {shape_of(rows)}, got {fmt(labels)}")

    @classmethod
    def size_groups(cls, types: Sequence[Attribute], props: Props) -> list[SizeGroup] | None:
        # Every operand's axis 0 is the rows, as the logical cross-entropy's (a mirrored job's labels, dynamic);
        # the classes are static.
        return [(0, tuple((i, 0) for i in range(len(types))))]


@irdl_op_definition
class ClassSplitMaxOp(ClassSplitOp):
    """Each row's largest logit among this device's classes (-inf when it has none)."""

    name = "job.class_split_max"
    logits = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        return cls.rows(types[0], props)


@irdl_op_definition
class ClassSplitSumExpOp(ClassSplitOp):
    """Each row's sum of exp(logit - max) over this device's classes: a partial sum."""

    name = "job.class_split_sum_exp"
    logits = operand_def(TensorType)
    maximum = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        rows = cls.rows(types[0], props)
        cls.expect(types[1:], [rows], ["max"])
        return rows


@irdl_op_definition
class ClassSplitCrossEntropyOp(ClassSplitOp):
    """This device's part of the loss: log(sum_exp) + max on coordinate 0, minus the label's logit where it lives."""

    name = "job.class_split_cross_entropy"
    logits = operand_def(TensorType)
    maximum = operand_def(TensorType)
    sum_exp = operand_def(TensorType)
    labels = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        rows = cls.rows(types[0], props)
        cls.expect(types[1:3], [rows, rows], ["max", "sum_exp"])
        cls.expect_labels(types[3], rows)
        return rows


@irdl_op_definition
class ClassSplitCrossEntropyGradOp(ClassSplitOp):
    """This device's chunk of (softmax - onehot(labels)) * dloss, zero in the padding."""

    name = "job.class_split_cross_entropy_grad"
    dloss = operand_def(TensorType)
    logits = operand_def(TensorType)
    maximum = operand_def(TensorType)
    sum_exp = operand_def(TensorType)
    labels = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        rows = cls.rows(types[1], props)
        cls.expect([types[0], *types[2:4]], [rows, rows, rows], ["dloss", "max", "sum_exp"])
        cls.expect_labels(types[4], rows)
        return types[1]


@irdl_op_definition
class ClassSplitSoftmaxOp(ClassSplitOp):
    """This device's chunk of softmax over split classes: exp(x - max) / sum_exp, zero in the padding."""

    name = "job.class_split_softmax"
    logits = operand_def(TensorType)
    maximum = operand_def(TensorType)
    sum_exp = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        rows = cls.rows(types[0], props)
        cls.expect(types[1:3], [rows, rows], ["max", "sum_exp"])
        return types[0]


@irdl_op_definition
class ClassSplitDotOp(ClassSplitOp):
    """Each row's sum of dy * y over this device's classes: a partial sum (softmax's backward needs the whole)."""

    name = "job.class_split_dot"
    dy = operand_def(TensorType)
    y = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        rows = cls.rows(types[1], props)
        cls.expect(types[:1], [types[1]], ["dy"])
        return rows


@irdl_op_definition
class ClassSplitSoftmaxGradOp(ClassSplitOp):
    """This device's chunk of softmax's backward, y * (dy - dot), zero in the padding."""

    name = "job.class_split_softmax_grad"
    dy = operand_def(TensorType)
    y = operand_def(TensorType)
    dot = operand_def(TensorType)
    res = result_def(TensorType)

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        rows = cls.rows(types[1], props)
        cls.expect([types[0], types[2]], [types[1], rows], ["dy", "dot"])
        return types[1]


class PieceNormsOp(JobOp):
    """The squared 2-norms a NormUpdateOp needs, over this device's piece of a split variable.

    Only the piece's real entries count: the piece is `logical_shape` laid out
    as `layout` on `mesh`, and the padding that ends the piece of an uneven
    split is left out (the executor tells the kernel how much of it is real).
    The result is a partial sum over the mesh axes that split the variable;
    lower-to-physical all-reduces it into the update's `norms`.
    """

    res = result_def(TensorType)
    mesh = prop_def(DenseArrayBase)
    layout = prop_def(NdSbpAttr)
    logical_shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure())
    LIKE: ClassVar[int]
    """Operands after the variable of its type (its gradient, LAMB's moments); scalars follow."""

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        w, layout = types[0], props.get("layout")
        check_variable_operands(cls.name, types, cls.LIKE, "variable")
        if not isinstance(layout, NdSbpAttr):
            raise VerifyException(f"{cls.name} needs the variable's layout, a #job.nd_sbp")
        try:
            piece = local_shape(ints(props, "logical_shape"), layout, ints(props, "mesh"))
        except ValueError as e:
            raise VerifyException(f"{cls.name}: {e}") from e
        if shape_of(w) != piece:
            raise VerifyException(f"{cls.name}: {fmt(w)} is not the piece {piece} of the variable's layout")
        return tensor((2,), dtype_of(w))


@irdl_op_definition
class LambNormsOp(PieceNormsOp):
    """|w|**2 and |u|**2 over this device's piece, u LAMB's direction from this step's moments (not written)."""

    name = "job.lamb_norms"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    m = operand_def(TensorType)
    v = operand_def(TensorType)
    step = operand_def(TensorType)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    epsilon = prop_def(FloatAttr)
    LIKE: ClassVar[int] = 3


@irdl_op_definition
class LarsNormsOp(PieceNormsOp):
    """|w|**2 and |g|**2 over this device's piece."""

    name = "job.lars_norms"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    LIKE: ClassVar[int] = 1


def transfer_types(x: Attribute, props: Props) -> tuple[TensorType, TensorType]:
    """The per-device types a transfer takes and gives: its logical shape laid out at each end."""
    logical = ints(props, "logical_shape")
    ends = []
    for sbp_key, place_key in (("src_sbp", "src_placement"), ("sbp", "placement")):
        sbp, place = props.get(sbp_key), props.get(place_key)
        if not isinstance(sbp, NdSbpAttr) or not isinstance(place, PlacementAttr):
            raise VerifyException(f"a transfer needs {sbp_key} and {place_key}")
        if any(c.kind.data == "partial_sum" for c in sbp.components):
            raise VerifyException(f"a transfer moves whole or split values, not {sbp_key} {sbp}")
        try:
            ends.append(tensor(local_shape(logical, sbp, hierarchy_of(place)), dtype_of(x)))
        except ValueError as e:
            raise VerifyException(f"transfer {sbp_key}: {e}") from e
    return ends[0], ends[1]


@irdl_op_definition
class TransferOp(JobOp):
    """A value moving from the devices of `src_placement` to those of `placement` (n -> m devices).

    Each destination device receives, from one source device, only the boxes
    of the logical value its own piece holds (`irflow.runtime.sharding.transfer_plan`);
    the devices of both placements take part, the program's other devices skip it.
    """

    name = "job.transfer"
    x = operand_def(TensorType)
    res = result_def(TensorType)
    src_sbp = prop_def(NdSbpAttr)
    src_placement = prop_def(PlacementAttr)
    logical_shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer(cls, types: Sequence[Attribute], props: Props) -> Attribute:
        src, dst = transfer_types(types[0], props)
        if types[0] != src:
            raise VerifyException(f"{cls.name}: its operand should be the source piece {fmt(src)}, got {fmt(types[0])}")
        return dst


PHYSICAL_OPS: list[type[Operation]] = [
    AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, ShardSliceOp, ShardEmbedOp, BroadcastToPartialOp, PadOp,
    TransferOp, ClassSplitMaxOp, ClassSplitSumExpOp, ClassSplitCrossEntropyOp, ClassSplitCrossEntropyGradOp,
    ClassSplitSoftmaxOp, ClassSplitDotOp, ClassSplitSoftmaxGradOp, LambNormsOp, LarsNormsOp,
]  # fmt: skip


# ----------------------------------------------------------------- functions


@irdl_op_definition
class FuncOp(FuncSyntax):
    """One job function: placeholders are block arguments, `job.return` gives the outputs.

    Its custom form is func.func's, `job.func @f(%x: t) -> t attributes {job_type = "train"} {...}`
    (dialects/func_syntax.py): `job_type` is written in the attribute dictionary, "predict" when left out.
    """

    name = "job.func"
    body = region_def("single_block")
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    job_type = prop_def(StringAttr)
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    JOB_TYPES: ClassVar[tuple[str, ...]] = ("train", "predict")
    SYNTAX_PROPERTY: ClassVar[str] = "job_type"
    SYNTAX_DEFAULT: ClassVar[Attribute] = StringAttr("predict")

    def __init__(self, sym_name: str, job_type: str, inputs: Sequence[Attribute], outputs: Sequence[Attribute]):
        from xdsl.ir import Block

        super().__init__(
            regions=[Region(Block(arg_types=inputs))],
            properties={
                "sym_name": StringAttr(sym_name),
                "function_type": FunctionType.from_lists(inputs, outputs),
                "job_type": StringAttr(job_type),
            },
        )

    def verify_(self) -> None:
        if self.job_type.data not in self.JOB_TYPES:
            raise VerifyException(f"job_type must be one of {', '.join(self.JOB_TYPES)}, got '{self.job_type.data}'")
        block = self.body.block
        arg_types = tuple(a.type for a in block.args)
        if arg_types != tuple(self.function_type.inputs):
            raise VerifyException("block arguments do not match the function's input types")
        for t in arg_types:
            if any(d <= 0 for d in shape_of(t)):
                raise VerifyException(f"placeholders need static, non-empty shapes, got {fmt(t)}")
        last = block.last_op
        if not isinstance(last, ReturnOp):
            raise VerifyException("a job.func body must end with job.return")
        got = tuple(o.type for o in last.operands)
        if got != tuple(self.function_type.outputs):
            raise VerifyException(
                f"job.return types ({', '.join(fmt(t) for t in got)}) do not match the function's results "
                f"({', '.join(fmt(t) for t in self.function_type.outputs)})"
            )


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "job.return"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(FuncOp), Pure())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class DiffOp(UnaryOp):
    """The gradient of the job's loss with respect to the operand (flow.watch_diff); autodiff replaces it."""

    name = "job.diff"


def variable_of(value: SSAValue) -> VariableOp | None:
    return value.owner if isinstance(value.owner, VariableOp) else None


COMPUTE_OPS: list[type[Operation]] = [
    VariableOp, ConstantOp, FillOp, DropoutMaskOp, RandomUniformOp, RandomPermutationOp, OFRecordDecodeOp,
    NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, SquareOp, ReluOp, SigmoidOp, TanhOp, GeluOp, AbsOp,
    SinOp, CosOp, FloorOp, CeilOp, RoundOp, SignOp, Log1pOp, Expm1Op, ErfOp, ErfcOp,
    TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, AsinhOp, AcoshOp, AtanhOp, LgammaOp, DigammaOp,
    AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, PowOp, FloorModOp, Atan2Op,
    EqualOp, NotEqualOp, LessOp, LessEqualOp, GreaterOp, GreaterEqualOp, WhereOp,
    ReluGradOp, SigmoidGradOp, TanhGradOp, GeluGradOp,
    CastOp, BernoulliOp, BiasAddOp, ReshapeOp, TransposeOp, BroadcastToOp, BroadcastLikeOp, SizeOfOp, PinSizeOp, UnpinSizeOp,
    ConcatOp, ConcatGradOp,
    TensorToTensorBufferOp, TensorBufferToTensorOp, GenTensorBufferOp, TensorBufferGetOp, SliceOp, SliceGradOp,
    GatherOp, GatherGradOp, DimGatherOp, DimGatherGradOp, GatherNdOp, ScatterNdOp, TensorScatterNdUpdateOp,
    TensorScatterNdAddOp,
    MatmulOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMaxGradOp, ReduceMinOp, ReduceMinGradOp, ReduceProdOp,
    ReduceProdGradOp, ArgmaxOp, TopKOp, ArgSortOp, FakeQuantizationOp, CtcLossOp, CtcLossGradOp, CtcGreedyDecodeOp,
    SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LogSoftmaxGradOp,
    SparseSoftmaxCrossEntropyOp, SoftmaxCrossEntropyOp,
    SparseSoftmaxCrossEntropyGradOp, SoftmaxCrossEntropyGradOp,
    Conv2DOp, Conv2DGradInputOp, Conv2DGradFilterOp,
    MaxPool2DOp, AvgPool2DOp, MaxPool2DGradOp, AvgPool2DGradOp,
    BoxingOp, LearningRateOp, AssignOp, SgdUpdateOp, MomentumUpdateOp, AdamUpdateOp, RmsPropUpdateOp,
    CenteredRmsPropUpdateOp, LambUpdateOp, LarsUpdateOp, LazyAdamUpdateOp, IndexedSlicesSgdUpdateOp,
    IndexedSlicesMomentumUpdateOp, IndexedSlicesAdamUpdateOp, MinimizeOp, ApplyGradientsOp, DiffOp,
]  # fmt: skip

Job = Dialect("job", [FuncOp, ReturnOp, *COMPUTE_OPS, *PHYSICAL_OPS], [SbpAttr, NdSbpAttr, PlacementAttr, BoundedAttr, TensorBufferAttr])
