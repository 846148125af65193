"""Where the user is: the first stack frame outside irflow, as a SourceLocation or an MLIR loc.

Every frontend error names the user's own `file:line:col`; every traced op
carries it as `loc("file.py":line:col)`.
"""

from __future__ import annotations

import itertools
import os
import sys
from types import FrameType
from typing import NoReturn

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr
from xdsl.ir import Attribute

import irflow
import irflow.dialects
import irflow.passes
from irflow.errors import SourceLocation, TraceError

# Frames in these directories are irflow's own; the user's location is the first frame outside them.
_OWN_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep  # type: ignore[arg-type]
    for m in (irflow, irflow.dialects, irflow.passes)
)


def _is_own(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith(_OWN_DIRS) or filename.startswith("<frozen ")


def frame_location(frame: FrameType) -> SourceLocation:
    """file:line:col of the instruction `frame` is executing; columns are 1-based as in MLIR."""
    line, col = frame.f_lineno, 0
    position = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None), None)
    if position is not None:
        start_line, _, start_col, _ = position
        if start_line is not None:
            line = start_line
        if start_col is not None:
            col = start_col + 1
    return SourceLocation(frame.f_code.co_filename, line, col)


def user_location() -> SourceLocation | None:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _is_own(frame):
        frame = frame.f_back
    return None if frame is None else frame_location(frame)


def fail(message: str, location: SourceLocation | None = None) -> NoReturn:
    """Raise a TraceError at the user's current line (or at `location`)."""
    raise TraceError(message, location or user_location())


def to_loc(location: SourceLocation | None) -> Attribute | None:
    if location is None:
        return None
    return FileLineColLoc(StringAttr(location.file), IntAttr(location.line), IntAttr(location.col))
