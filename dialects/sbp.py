"""Distribution attributes of the job dialect: SBP signatures and placements.

SBP mirrors OneFlow's Split/Broadcast/Partial (compare MLIR's `shard.sharding`
and PyTorch DTensor's Shard/Replicate/Partial); a placement names the devices a
value lives on, in OneFlow's "machine:first-last" form.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

SBP_KINDS = ("split", "broadcast", "partial_sum")
REDUCTIONS = ("sum", "max", "min")
DEVICE_TAGS = ("cpu", "gpu")
MAX_DEVICES = 1 << 16  # far beyond any cluster, small enough to list
_RANGE = re.compile(r"^(\d+):(\d+)(?:-(\d+))?$")


def _parse_sbp_body(parser: AttrParser) -> tuple[str, int, str]:
    pos = parser.pos
    kind = parser.parse_identifier()
    if kind not in SBP_KINDS:
        parser.raise_error(f"unknown SBP kind '{kind}', expected one of {', '.join(SBP_KINDS)}", pos)
    axis, reduction = -1, "sum"
    if kind == "split":
        with parser.in_parens():
            axis = parser.parse_integer(allow_boolean=False, allow_negative=False)
    elif kind == "partial_sum" and parser.parse_optional_punctuation("("):
        reduction = parser.parse_identifier()
        parser.parse_punctuation(")")
    return kind, axis, reduction


@irdl_attr_definition
class SbpAttr(ParametrizedAttribute):
    """One SBP component: `split(axis)`, `broadcast` or `partial_sum[(max|min)]`."""

    name = "job.sbp"

    kind: StringAttr
    axis: IntAttr
    reduction: StringAttr

    def __init__(self, kind: str, axis: int = -1, reduction: str = "sum"):
        super().__init__(StringAttr(kind), IntAttr(axis), StringAttr(reduction))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            kind, axis, reduction = _parse_sbp_body(parser)
        return StringAttr(kind), IntAttr(axis), StringAttr(reduction)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self}>")

    def __str__(self) -> str:
        if self.kind.data == "split":
            return f"split({self.axis.data})"
        if self.kind.data == "partial_sum" and self.reduction.data != "sum":
            return f"partial_sum({self.reduction.data})"
        return self.kind.data

    def verify(self) -> None:
        kind = self.kind.data
        if kind not in SBP_KINDS:
            raise VerifyException(f"unknown SBP kind '{kind}', expected one of {', '.join(SBP_KINDS)}")
        if (kind == "split") != (self.axis.data >= 0):
            raise VerifyException(f"SBP '{kind}': only split takes an axis, and it must be >= 0")
        if self.reduction.data not in REDUCTIONS:
            raise VerifyException(
                f"unknown partial reduction '{self.reduction.data}', expected one of {', '.join(REDUCTIONS)}"
            )
        if kind != "partial_sum" and self.reduction.data != "sum":
            raise VerifyException(f"SBP '{kind}' takes no reduction kind")


@irdl_attr_definition
class NdSbpAttr(ParametrizedAttribute):
    """An SBP signature per hierarchy axis: `#job.nd_sbp<[split(0), broadcast]>`."""

    name = "job.nd_sbp"

    components: ArrayAttr[SbpAttr]

    def __init__(self, components: Sequence[SbpAttr]):
        super().__init__(ArrayAttr(components))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            parts = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: SbpAttr(*_parse_sbp_body(parser))
            )
        return (ArrayAttr(parts),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<[{', '.join(str(c) for c in self.components)}]>")

    def verify(self) -> None:
        if not self.components.data:
            raise VerifyException("nd_sbp needs at least one component")


def parse_device_ranges(ranges: Sequence[str]) -> list[tuple[int, int]]:
    """Expand OneFlow device strings ("0:0-3", "1:2") into (machine, device) pairs."""
    devices: list[tuple[int, int]] = []
    for text in ranges:
        m = _RANGE.match(text)
        if m is None:
            raise VerifyException(f"bad device range '{text}', expected 'machine:first-last' such as '0:0-3'")
        machine, first = int(m[1]), int(m[2])
        last = int(m[3]) if m[3] is not None else first
        if last < first:
            raise VerifyException(f"bad device range '{text}': last device {last} < first {first}")
        if last - first + 1 + len(devices) > MAX_DEVICES:
            raise VerifyException(f"device ranges {list(ranges)} name more than {MAX_DEVICES} devices")
        devices.extend((machine, d) for d in range(first, last + 1))
    if len(set(devices)) != len(devices):
        raise VerifyException(f"device ranges {list(ranges)} name a device twice")
    return devices


@irdl_attr_definition
class PlacementAttr(ParametrizedAttribute):
    """Devices a value lives on: `#job.placement<cpu, ["0:0-3"], hierarchy = [2, 2]>`."""

    name = "job.placement"

    device_tag: StringAttr
    ranges: ArrayAttr[StringAttr]
    hierarchy: ArrayAttr[IntAttr]

    def __init__(self, device_tag: str, ranges: Sequence[str] | str, hierarchy: Sequence[int] = ()):
        if isinstance(ranges, str):
            ranges = [ranges]
        super().__init__(
            StringAttr(device_tag),
            ArrayAttr(StringAttr(r) for r in ranges),
            ArrayAttr(IntAttr(h) for h in hierarchy),
        )

    @property
    def devices(self) -> list[tuple[int, int]]:
        return parse_device_ranges([r.data for r in self.ranges])

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            tag = parser.parse_identifier()
            parser.parse_punctuation(",")
            ranges = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: StringAttr(parser.parse_str_literal())
            )
            hierarchy: list[IntAttr] = []
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("hierarchy")
                parser.parse_punctuation("=")
                hierarchy = parser.parse_comma_separated_list(
                    parser.Delimiter.SQUARE, lambda: IntAttr(parser.parse_integer(allow_boolean=False))
                )
        return StringAttr(tag), ArrayAttr(ranges), ArrayAttr(hierarchy)

    def print_parameters(self, printer: Printer) -> None:
        ranges = ", ".join(f'"{r.data}"' for r in self.ranges)
        text = f"<{self.device_tag.data}, [{ranges}]"
        if self.hierarchy.data:
            text += f", hierarchy = [{', '.join(str(h.data) for h in self.hierarchy)}]"
        printer.print_string(text + ">")

    def verify(self) -> None:
        if self.device_tag.data not in DEVICE_TAGS:
            raise VerifyException(
                f"unknown device tag '{self.device_tag.data}', expected one of {', '.join(DEVICE_TAGS)}"
            )
        if not self.ranges.data:
            raise VerifyException("placement needs at least one device range")
        count = len(self.devices)
        if self.hierarchy.data:
            product = 1
            for h in self.hierarchy:
                if h.data <= 0:
                    raise VerifyException(f"placement hierarchy {self._hierarchy()} has a non-positive axis")
                product *= h.data
            if product != count:
                raise VerifyException(
                    f"placement hierarchy {self._hierarchy()} covers {product} devices, but the ranges name {count}"
                )

    def _hierarchy(self) -> list[int]:
        return [h.data for h in self.hierarchy]


# ----------------------------------------------------------------- compact codes
# Passes search over thousands of SBP choices; they work on small ints and turn
# them back into attributes once: split(i) is i >= 0, the rest are negative.

BROADCAST = -1
PARTIAL = -2  # partial_sum (sum)
PARTIAL_MAX = -3
PARTIAL_MIN = -4
_PARTIAL_CODES = {"sum": PARTIAL, "max": PARTIAL_MAX, "min": PARTIAL_MIN}

Code = int
NdCode = tuple[int, ...]


def sbp_code(c: SbpAttr) -> Code:
    kind = c.kind.data
    if kind == "split":
        return c.axis.data
    if kind == "broadcast":
        return BROADCAST
    return _PARTIAL_CODES[c.reduction.data]


def code_attr(code: Code) -> SbpAttr:
    if code >= 0:
        return SbpAttr("split", code)
    if code == BROADCAST:
        return SbpAttr("broadcast")
    reduction = next(r for r, c in _PARTIAL_CODES.items() if c == code)
    return SbpAttr("partial_sum", reduction=reduction)


def nd_codes(nd: NdSbpAttr) -> NdCode:
    return tuple(sbp_code(c) for c in nd.components)


_ND_CACHE: dict[NdCode, NdSbpAttr] = {}


def nd_attr(codes: Sequence[Code]) -> NdSbpAttr:
    key = tuple(codes)
    attr = _ND_CACHE.get(key)
    if attr is None:
        attr = _ND_CACHE[key] = NdSbpAttr([code_attr(c) for c in key])
    return attr


def code_text(codes: Sequence[Code]) -> str:
    """`[split(0), broadcast]`, as the IR prints it, for messages."""
    return f"[{', '.join(str(code_attr(c)) for c in codes)}]"


def is_partial(code: Code) -> bool:
    return code <= PARTIAL


def hierarchy_of(placement: PlacementAttr) -> tuple[int, ...]:
    """Devices per hierarchy axis: the declared hierarchy, or one axis over all devices."""
    return tuple(h.data for h in placement.hierarchy) or (len(placement.devices),)


def broadcast_codes(hierarchy: Sequence[int]) -> NdCode:
    return (BROADCAST,) * len(hierarchy)


def normalize(codes: Sequence[Code], hierarchy: Sequence[int]) -> NdCode:
    """On a hierarchy axis of one device every SBP is the whole value: write it as broadcast."""
    return tuple(BROADCAST if h == 1 else c for c, h in zip(codes, hierarchy, strict=True))


def check_fits(nd: NdSbpAttr, rank: int, hierarchy: Sequence[int] | None, what: str) -> None:
    """A split names an axis of the value, and there is one component per hierarchy axis."""
    for c in nd.components:
        if c.kind.data == "split" and c.axis.data >= rank:
            raise VerifyException(f"{what} {nd_text(nd)} splits axis {c.axis.data} of a rank-{rank} value")
    if hierarchy is not None and len(nd.components) != len(hierarchy):
        raise VerifyException(
            f"{what} {nd_text(nd)} has {len(nd.components)} components for a placement hierarchy of "
            f"{len(hierarchy)} axes {list(hierarchy)}"
        )


def nd_text(nd: NdSbpAttr) -> str:
    return f"[{', '.join(str(c) for c in nd.components)}]"


def transition(src: Code, dst: Code) -> str:
    """The collective that turns `src` into `dst` on one hierarchy axis (OneFlow's boxing kinds)."""
    if src == dst:
        return "none"
    if dst == BROADCAST:
        return "all_gather" if src >= 0 else "all_reduce"
    if dst >= 0:
        return "all_to_all" if src >= 0 else ("slice" if src == BROADCAST else "reduce_scatter")
    return "zero_fill" if src == BROADCAST else "unsupported"
