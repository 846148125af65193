"""Bounded dynamic dimensions: `tensor<100x784xf32, #job.bounded<[0]>>`.

A dynamic tensor's shape is its *bound*, and its `#job.bounded` encoding lists
the axes whose actual size is only known when the job runs (at most the bound).
Everything static about it (shape checks, memory planning, the buffer it gets)
is done at the bound; the actual sizes flow through the buffer program as
`index` values (docs/dynamic.md).  This is StableHLO's bounded dynamism
(`tensor<?x784xf32, #stablehlo.bounds<100, ?>>`) spelled with the bound in the
shape, so every shape rule of the job dialect reads the bound unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, TensorType
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


@irdl_attr_definition
class BoundedAttr(ParametrizedAttribute):
    """The dynamic axes of a tensor whose shape is their bound: `#job.bounded<[0]>`."""

    name = "job.bounded"

    axes: ArrayAttr[IntAttr]

    def __init__(self, axes: Sequence[int]):
        super().__init__(ArrayAttr([IntAttr(a) for a in axes]))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            axes = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False)
            )
        return (ArrayAttr([IntAttr(a) for a in axes]),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<[{', '.join(str(a) for a in self.values())}]>")

    def values(self) -> tuple[int, ...]:
        return tuple(a.data for a in self.axes.data)

    def verify(self) -> None:
        axes = self.values()
        if not axes or list(axes) != sorted(set(axes)):
            raise VerifyException(f"#job.bounded needs at least one axis, ascending and distinct, got {list(axes)}")


def dynamic_axes(t: Attribute) -> tuple[int, ...]:
    """The axes of `t` whose size is known only at run time (empty for a static tensor).

    A TensorBuffer's are in its own encoding: its element count, or its elements' shape.
    """
    if isinstance(t, TensorType) and isinstance(t.encoding, BoundedAttr):
        return t.encoding.values()
    if isinstance(t, TensorType) and isinstance(t.encoding, TensorBufferAttr):
        return t.encoding.dynamic_axes()
    return ()


def with_dynamic(t: TensorType, axes: Sequence[int]) -> TensorType:
    """`t` with exactly `axes` dynamic (bounded by its shape); no axes gives the static tensor."""
    axes = tuple(sorted(set(axes)))
    if dynamic_axes(t) == axes:
        return t
    shape = t.get_shape()
    for a in axes:
        if not 0 <= a < len(shape):
            raise VerifyException(f"dynamic axis {a} out of range for rank {len(shape)}")
    if isinstance(t.encoding, TensorBufferAttr):
        return TensorType(t.element_type, list(shape), TensorBufferAttr(t.encoding.values(), axes))
    return TensorType(t.element_type, list(shape), BoundedAttr(axes)) if axes else TensorType(t.element_type, list(shape))


def describe(t: Attribute) -> str:
    """`(<=100, 784)`: the shape as users read it, each dynamic axis with its bound."""
    assert isinstance(t, TensorType)
    dyn = dynamic_axes(t)
    dims = [f"<={d}" if i in dyn else str(d) for i, d in enumerate(t.get_shape())]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


@irdl_attr_definition
class TensorBufferAttr(ParametrizedAttribute):
    """A TensorBuffer: each element of the leading axes is a tensor of its own shape (OneFlow's TensorBuffer).

    `tensor<2x2x2xf32, #job.tensor_buffer<[2, 1], [1, 2]>>` is a buffer of 2 elements
    whose tensors are (2, 1) and (1, 2); the trailing axes (2x2) are the bound of every
    element, where its values lie dense at its own shape. One shape alone is every
    element's. `dynamic` lists the tensor's axes whose sizes are known only at run time
    (`#job.tensor_buffer<[6] dynamic [0, 1]>`: up to 8 elements of up to 6 values each
    for a `tensor<8x6xf32>`): there the listed shape is the bound, and every element has
    the same run-time size on a dynamic element axis (the sizes are `index` values of the
    buffer program, docs/dynamic.md).
    """

    name = "job.tensor_buffer"

    shapes: ArrayAttr[ArrayAttr[IntAttr]]
    dynamic: ArrayAttr[IntAttr]

    def __init__(self, shapes: Sequence[Sequence[int]], dynamic: Sequence[int] = ()):
        super().__init__(
            ArrayAttr([ArrayAttr([IntAttr(d) for d in s]) for s in shapes]), ArrayAttr([IntAttr(a) for a in dynamic])
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def ints() -> ArrayAttr[IntAttr]:
            dims = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False)
            )
            return ArrayAttr([IntAttr(d) for d in dims])

        with parser.in_angle_brackets():
            shapes = parser.parse_comma_separated_list(parser.Delimiter.NONE, ints)
            dynamic = ints() if parser.parse_optional_keyword("dynamic") else ArrayAttr([])
        return (ArrayAttr(shapes), dynamic)

    def print_parameters(self, printer: Printer) -> None:
        dynamic = f" dynamic [{', '.join(map(str, self.dynamic_axes()))}]" if self.dynamic_axes() else ""
        printer.print_string(f"<{', '.join('[' + ', '.join(map(str, s)) + ']' for s in self.values())}{dynamic}>")

    def values(self) -> list[tuple[int, ...]]:
        return [tuple(d.data for d in s.data) for s in self.shapes.data]

    def dynamic_axes(self) -> tuple[int, ...]:
        return tuple(a.data for a in self.dynamic.data)

    def verify(self) -> None:
        shapes, dynamic = self.values(), self.dynamic_axes()
        if not shapes or len({len(s) for s in shapes}) != 1:
            raise VerifyException(f"#job.tensor_buffer needs element shapes of one rank, got {shapes}")
        if list(dynamic) != sorted(set(dynamic)) or (dynamic and len(shapes) != 1):
            raise VerifyException(
                f"#job.tensor_buffer's dynamic axes must be ascending and distinct, with one element shape, got {shapes} "
                f"dynamic {list(dynamic)}"
            )


def element_shapes(t: Attribute) -> list[tuple[int, ...]] | None:
    """A TensorBuffer's element shapes, one per element in row-major order (None: not a TensorBuffer)."""
    if not (isinstance(t, TensorType) and isinstance(t.encoding, TensorBufferAttr)):
        return None
    shapes = t.encoding.values()
    rank = len(shapes[0])
    count = 1
    for d in t.get_shape()[: len(t.get_shape()) - rank]:
        count *= d
    return shapes * count if len(shapes) == 1 else shapes


def tensor_buffer(buffer_shape: Sequence[int], shapes: Sequence[Sequence[int]], element_type: Attribute) -> TensorType:
    """The TensorBuffer of `buffer_shape` elements of `shapes` (one per element, or one for all), at their bound."""
    rank = len(shapes[0])
    bound = [max(s[a] for s in shapes) for a in range(rank)]
    return TensorType(element_type, [*buffer_shape, *bound], TensorBufferAttr(shapes))


def buffer_rank(t: Attribute) -> int:
    """The number of a TensorBuffer's own (leading) axes."""
    assert isinstance(t, TensorType) and isinstance(t.encoding, TensorBufferAttr)
    return len(t.get_shape()) - len(t.encoding.values()[0])
