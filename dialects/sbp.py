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
