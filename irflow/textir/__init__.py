"""irflow's text IR: `print_module` (xDSL's Printer) and `parse_module` (a lark LALR grammar)."""

from irflow.textir.parser import decode_source, parse_module
from irflow.textir.printer import print_module

__all__ = ["decode_source", "parse_module", "print_module"]
