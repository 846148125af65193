"""irflow's exceptions: one small hierarchy, each error carrying where it happened.

`str(error)` is the `file:line:col: error: message` line that compilers print,
so the CLI and the Python API report problems the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class IrflowError(Exception):
    """Base of every error irflow raises on purpose."""

    def __init__(self, message: str, location: SourceLocation | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        if self.location is None:
            return self.message
        return f"{self.location}: error: {self.message}"


class TraceError(IrflowError, TypeError):
    """A job function could not be traced: bad annotation, bad op use, shape error."""


class CompileError(IrflowError):
    """A pass or the backend rejected a traced job."""


class IRParseError(IrflowError, ValueError):
    """IR text that does not parse or verify; the location is line and column in the text."""

    def __init__(self, message: str, location: SourceLocation | None = None, source_line: str | None = None):
        super().__init__(message, location)
        self.source_line = source_line

    SHOWN = 160  # characters of a long source line shown around the column

    def __str__(self) -> str:
        text = super().__str__()
        if self.source_line is not None and self.location is not None:
            line, col = self.source_line, max(self.location.col - 1, 0)
            if len(line) > self.SHOWN:  # a 50 MB one-line attribute must not print 50 MB
                start = max(0, min(col - self.SHOWN // 2, len(line) - self.SHOWN))
                head = "..." if start else ""
                line = head + line[start : start + self.SHOWN] + ("..." if start + self.SHOWN < len(line) else "")
                col = col - start + len(head)
            text += f"\n{line}\n{' ' * col}^"
        return text


class ExecutionError(IrflowError, RuntimeError):
    """Calling a compiled job failed: bad inputs, a failing kernel or callback."""


def source_location(op: Operation) -> SourceLocation | None:
    """The user's file:line:col that produced `op`, if it was traced from Python or parsed with a loc."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
    return None
