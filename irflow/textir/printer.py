"""Module -> text with xDSL's Printer (custom or generic form, optionally with locations)."""

from __future__ import annotations

from io import StringIO

from xdsl.ir import Operation
from xdsl.printer import Printer


def print_module(op: Operation, *, generic: bool = False, debuginfo: bool = False) -> str:
    """The text `parse_module` reads back to an equal module, with a trailing newline."""
    stream = StringIO()
    Printer(stream=stream, print_generic_format=generic, print_debuginfo=debuginfo).print_op(op)
    stream.write("\n")
    return stream.getvalue()
