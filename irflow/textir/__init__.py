"""irflow's text IR: `print_module` (xDSL's Printer) and `parse_module` (a lark LALR grammar)."""

from irflow.textir.parser import parse_module
from irflow.textir.printer import print_module

__all__ = ["parse_module", "print_module"]
