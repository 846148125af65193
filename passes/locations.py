"""Source locations of ops as irflow errors carry them."""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation

from irflow.errors import SourceLocation


def source_location(op: Operation) -> SourceLocation | None:
    """The user's file:line:col that produced `op`, if it was traced from Python or parsed with a loc."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
    return None
