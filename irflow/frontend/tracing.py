"""The trace being built while a job function is defined, and how ops join it.

Every op the user calls appends one job-dialect op at the end of the job's
block, located at the user's own `loc("file.py":line:col)`: the first stack
frame outside irflow. A shape error from an op's `infer` becomes a
`TraceError` at that line, so the message points at the user's code and not at
ours (MLIR's diagnostics do the same with the op's location).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

import irflow
import irflow.dialects
import irflow.passes
from irflow.dialects.job import FuncOp, JobOp
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr
from irflow.errors import SourceLocation, TraceError

if TYPE_CHECKING:
    from irflow.frontend.blob import Blob
    from irflow.frontend.config import FunctionConfig
    from irflow.frontend.session import VariableDecl

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


class Trace:
    """One job function being defined: its module, its block and the state of its scopes."""

    def __init__(
        self, name: str, job_type: str, config: FunctionConfig, inputs: Sequence[Attribute], placement: PlacementAttr
    ):
        self.name = name
        self.job_type = job_type
        self.config = config
        self.func = FuncOp(name, job_type, list(inputs), [])
        self.module = ModuleOp([self.func])
        self.block: Block = self.func.body.block
        self.variables: dict[str, Blob] = {}
        self.declared: dict[str, VariableDecl] = {}  # joins the session's only if the trace succeeds
        self.watches: list[tuple[Blob, Any]] = []
        self.minimized = False
        self.arg_placement = placement  # where the placeholders live: the placement when the job was defined
        self.arg_sbp: dict[int, NdSbpAttr] = {}
        self._counters: dict[str, int] = {}

    def unique_name(self, prefix: str) -> str:
        """OneFlow's default op and layer names ("Dense_0", "Dense_1", ...), counted per job."""
        n = self._counters.get(prefix, 0)
        self._counters[prefix] = n + 1
        return f"{prefix}_{n}"

    def append(self, op: Operation, location: SourceLocation | None) -> Operation:
        loc = to_loc(location)
        if loc is not None:
            op.location = loc
        self.block.add_op(op)
        return op


_active: list[Trace] = []
# `with flow.scope.placement(...)` scopes, innermost last; they may enclose a job's definition too.
placements: list[PlacementAttr] = []


def current(what: str) -> Trace:
    """The trace ops are added to; outside a job function's definition, a TraceError."""
    if not _active:
        fail(
            f"{what} can only be used inside a job function while it is defined "
            "(a Python function decorated with @flow.global_function)"
        )
    return _active[-1]


def active() -> Trace | None:
    return _active[-1] if _active else None


@contextlib.contextmanager
def tracing(trace: Trace) -> Iterator[Trace]:
    _active.append(trace)
    try:
        yield trace
    finally:
        _active.pop()


def build(
    op_class: type[JobOp],
    operands: Sequence[Blob],
    result_type: Attribute | None = None,
    blob_name: str | None = None,
    what: str | None = None,
    **props: object,
) -> Blob:
    """Append one op with its result type inferred (or checked); return its result as a Blob.

    `what` names the API for messages ("flow.matmul"); `props` are the op's properties.
    """
    from irflow.frontend.blob import Blob

    what = what or f"flow.{op_class.name.removeprefix('job.')}"
    trace = current(what)
    location = user_location()
    values = [own_value(trace, b, what, location) for b in operands]
    if placements:
        props.setdefault("placement", placements[-1])
    try:
        op = op_class.make(values, result_type, **props)
    except VerifyException as err:
        raise TraceError(f"{what}: {err}", location) from None
    trace.append(op, location)
    return Blob(op.results[0], trace, blob_name or trace.unique_name(op_class.name.removeprefix("job.")))


_Function = TypeVar("_Function", bound=Callable[..., Any])


def published(function: _Function, what: str, doc: str) -> _Function:
    """A function made by a factory (`flow.math.add`, `flow.nn.max_pool2d`), named as its API (`what`) calls it."""
    function.__name__ = what.rsplit(".", 1)[-1]
    function.__doc__ = doc
    return function


def append_op(op: Operation, what: str) -> None:
    """Append an op built by hand (ops without a result, such as job.minimize)."""
    trace = current(what)
    location = user_location()
    try:
        op.verify()
    except VerifyException as err:
        raise TraceError(f"{what}: {err}", location) from None
    trace.append(op, location)


def own_value(trace: Trace, blob: object, what: str, location: SourceLocation | None = None) -> SSAValue:
    """The SSA value of a Blob of this job; Blobs of other jobs (or non-Blobs) are errors."""
    from irflow.frontend.blob import Blob

    if not isinstance(blob, Blob):
        fail(f"{what} expects a Blob, got {type(blob).__name__} {blob!r}", location)
    if blob.trace is not trace:
        fail(
            f"{what}: Blob '{blob.name}' belongs to job '{blob.trace.name}', not to '{trace.name}'; "
            "each job function must compute its own values",
            location,
        )
    return blob.value
