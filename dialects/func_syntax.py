"""func.func's custom form for a dialect's function-like op, defined once for every such op.

`d.op @f(%x: t) -> t attributes {extra = v, ...} {...}`: the op's properties are
`sym_name`, `function_type` and one more, `SYNTAX_PROPERTY`, which the form
writes in the attribute dictionary and which takes `SYNTAX_DEFAULT` when left
out. `from_syntax` gives the form its meaning; xDSL's parse hook and irflow's
lark parser (`irflow/textir/ops.py`, `FunctionLike`) both build the op through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from xdsl.dialects.builtin import FunctionType, StringAttr
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Region
from xdsl.irdl import IRDLOperation
from xdsl.parser import Parser
from xdsl.printer import Printer

_RESERVED = ("sym_name", "function_type")


class FuncSyntax(IRDLOperation):
    """Mixin for an op with a single-block `body`, `sym_name`, `function_type` and the property `SYNTAX_PROPERTY`."""

    SYNTAX_PROPERTY: ClassVar[str]
    SYNTAX_DEFAULT: ClassVar[Attribute]

    @classmethod
    def from_syntax(
        cls, name: str | StringAttr, function_type: FunctionType, region: Region, attributes: Mapping[str, Attribute]
    ) -> Self:
        attrs = dict(attributes)
        extra = attrs.pop(cls.SYNTAX_PROPERTY, cls.SYNTAX_DEFAULT)
        sym_name = StringAttr(name) if isinstance(name, str) else name
        return cls.create(
            regions=[region],
            properties={"sym_name": sym_name, "function_type": function_type, cls.SYNTAX_PROPERTY: extra},
            attributes=attrs,
        )

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        name, inputs, outputs, region, extra, _, _ = parse_func_op_like(parser, reserved_attr_names=_RESERVED)
        attrs = dict(extra.data) if extra is not None else {}
        return cls.from_syntax(name, FunctionType.from_lists(inputs, outputs), region, attrs)

    def print(self, printer: Printer) -> None:
        print_func_op_like(
            printer,
            self.properties["sym_name"],
            self.properties["function_type"],
            self.regions[0],
            {self.SYNTAX_PROPERTY: self.properties[self.SYNTAX_PROPERTY], **self.attributes},
            reserved_attr_names=_RESERVED,
        )
