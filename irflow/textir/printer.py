"""Module -> text with xDSL's Printer (custom or generic form, optionally with locations)."""

from __future__ import annotations

from collections.abc import Mapping
from io import StringIO

from xdsl.ir import Attribute, Operation
from xdsl.printer import Printer


class SortedPrinter(Printer):
    """xDSL's Printer with every dictionary printed in key order, as MLIR's sorted DictionaryAttr.

    The order an op's properties and attributes were set in (by a pass, a
    frontend or a parse) then never shows in the text, so diffs stay clean.
    """

    def print_attr_dict(self, attr_dict: Mapping[str, Attribute]) -> None:
        super().print_attr_dict(dict(sorted(attr_dict.items())))


def print_module(op: Operation, *, generic: bool = False, debuginfo: bool = False) -> str:
    """The text `parse_module` reads back to an equal module, with a trailing newline."""
    stream = StringIO()
    SortedPrinter(stream=stream, print_generic_format=generic, print_debuginfo=debuginfo).print_op(op)
    stream.write("\n")
    return stream.getvalue()
