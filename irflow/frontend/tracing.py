"""The trace being built while a job function is defined, and how ops join it.

Every op the user calls appends one job-dialect op at the end of the job's
block, located at the user's own `loc("file.py":line:col)`: the first stack
frame outside irflow. A shape error from an op's `infer` becomes a
`TraceError` at that line, so the message points at the user's code and not at
ours (MLIR's diagnostics do the same with the op's location).
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from irflow.dialects.bounds import dynamic_axes
from irflow.dialects.job import FuncOp, JobOp, PinSizeOp, to_attr
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr
from irflow.errors import SourceLocation, TraceError
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail, to_loc, user_location
from irflow.textir.regions import is_value_name

if TYPE_CHECKING:
    from irflow.frontend.config import FunctionConfig
    from irflow.frontend.records import Feed
    from irflow.frontend.regularizers import Regularizer
    from irflow.frontend.scope import LogicalView
    from irflow.frontend.session import VariableDecl


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
        self.regularizers: dict[str, tuple[Blob, Regularizer]] = {}  # variable name -> (its Blob, penalty)
        self.minimized = False
        self.feeds: list[Feed] = []  # fields decoded from OFRecord readers, in the order they become arguments
        self.arg_placement = placement  # where the placeholders live: the placement when the job was defined
        # Each placeholder hint: its SBP on arg_placement (a second hint must agree), and as given (distribute,
        # API, line), fitted again to the job's placement, which differs when every op runs in placement scopes.
        self.arg_hints: dict[int, tuple[NdSbpAttr, object, str, SourceLocation | None]] = {}
        # Mirrored on several devices: each device's sizes are its own, so a dynamic axis past 0 that meets
        # a static one is pinned there (docs/dynamic.md); what follows is static on every device alike.
        self.own_sizes: bool = False
        self._counters: dict[str, int] = {}
        self._seeded: dict[str, int] = {}  # random op name -> seeds derived from it so far

    def unique_name(self, prefix: str) -> str:
        """OneFlow's default op and layer names ("Dense_0", "Dense_1", ...), counted per job."""
        n = self._counters.get(prefix, 0)
        self._counters[prefix] = n + 1
        return f"{prefix}_{n}"

    def op_seed(self, name: str) -> int:
        """The seed of random op `name` given none: fixed by the job's and the op's names, so a program
        draws the same values on every run; a name met again in this job gets a seed of its own."""
        uses = self._seeded.get(name, 0)
        self._seeded[name] = uses + 1
        key = f"{self.name}/{name}" + (f"#{uses}" if uses else "")
        return zlib.crc32(key.encode()) & 0x7FFFFFFF

    def append(self, op: Operation, location: SourceLocation | None) -> Operation:
        loc = to_loc(location)
        if loc is not None:
            op.location = loc
        self.block.add_op(op)
        return op


_active: list[Trace] = []
# `with flow.scope.placement(...)` scopes, innermost last; they may enclose a job's definition too.
placements: list[PlacementAttr] = []
# `with flow.scope.namespace(...)` scopes, outermost first: variable names are prefixed "outer-inner-".
namespaces: list[str] = []
# `with flow.scope.consistent_view()` / `mirrored_view()` scopes, innermost last (flow.scope.current_view reads them).
views: list[LogicalView] = []


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
    what = what or f"flow.{op_class.name.removeprefix('job.')}"
    trace = current(what)
    location = user_location()
    values = [own_value(trace, b, what, location) for b in operands]
    if placements:
        props.setdefault("placement", placements[-1])
    pins: list[PinSizeOp] = []
    try:  # an op that takes only axis 0 dynamic gets its other dynamic axes pinned at their bound (docs/dynamic.md)
        for i, axes in unaccepted_axes(op_class, [v.type for v in values], props, trace.own_sizes).items():
            pins.append(PinSizeOp.make([values[i]], axes=axes, placement=props.get("placement")))
            pins[-1].res.name_hint = values[i].name_hint  # the same data, at its bound: %x, %x_1
            values[i] = pins[-1].res
        op = op_class.make(values, result_type, **props)
    except VerifyException as err:
        for pin in reversed(pins):
            pin.erase()  # drops its use of the operand
        raise TraceError(f"{what}: {err}", location) from None
    for pin in pins:
        trace.append(pin, location)
    trace.append(op, location)
    if blob_name is not None and is_value_name(blob_name):
        op.results[0].name_hint = blob_name  # the user's name reads in the IR: %dense1-weight, %softmax_loss
    return Blob(op.results[0], trace, blob_name or trace.unique_name(op_class.name.removeprefix("job.")))


def unaccepted_axes(
    op_class: type[JobOp], types: Sequence[Attribute], props: dict[str, object], own_sizes: bool = False
) -> dict[int, list[int]]:
    """Per operand, its dynamic axes past 0 that `op_class` does not take dynamic, as its size groups declare.

    With `own_sizes` (mirrored on several devices) also those that meet a static axis in a group (a
    contracting axis against a weight), and those of an operand reduced or contracted over its rows:
    pinned (checked per device at run time), they stay static downstream, so no collective (a gather
    of rows, a weight's gradient all-reduced) moves sizes that differ per device. Nothing when the op
    refuses a dynamic axis 0 too: no pin can help, and its verifier names that axis.
    """
    if not any(a > 0 for t in types for a in dynamic_axes(t)):
        return {}
    attrs = {k: to_attr(v) for k, v in props.items() if v is not None}
    groups = op_class.size_groups(types, attrs)
    taken = op_class.accepted_axes(types, attrs) or set()
    if own_sizes:
        dynamic = {(i, a) for i, t in enumerate(types) for a in dynamic_axes(t)}
        meets_static = {m for _, members in groups or () if any(m not in dynamic for m in members) for m in members}
        # reduced or contracted over the devices' rows, the result moves between them (a gather, an all-reduce)
        over_rows = {i for result, members in groups or () if result is None for i, a in members if a == 0}
        # concatenated or sliced along the devices' rows, the inputs are gathered first
        over_rows |= {i for _, members in op_class.summed_axes(types, attrs) for i, a in members if a == 0}
        over_rows |= {i for _, (i, a), _ in op_class.sliced_axes(types, attrs) if a == 0}
        over_rows &= {i for i, a in dynamic if a == 0}
        # unless the op is linear in it and reduces all its dynamic axes (a sum or a mean of every element):
        # its partial sums are static, and nothing dynamic moves (the rows of a transposed value included)
        reduced = {m for result, members in groups or () if result is None for m in members}
        linear = {i for group in op_class.LINEAR_OPERANDS if len(group) == 1 for i in group}
        over_rows -= {i for i in over_rows & linear if all((i, a) in reduced for a in dynamic_axes(types[i]))}
        taken -= {(i, a) for i, a in meets_static if a > 0} | {(i, a) for i, a in dynamic if i in over_rows and a > 0}
    refused = [(i, a) for i, t in enumerate(types) for a in dynamic_axes(t) if (i, a) not in taken]
    if any(a == 0 for _, a in refused):
        return {}
    pins: dict[int, list[int]] = {}
    for i, a in refused:
        pins.setdefault(i, []).append(a)
    return pins


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
    if placements and isinstance(op, JobOp) and op.placement is None:
        op.properties["placement"] = placements[-1]
    try:
        op.verify()
    except VerifyException as err:
        raise TraceError(f"{what}: {err}", location) from None
    trace.append(op, location)


def own_value(trace: Trace, blob: object, what: str, location: SourceLocation | None = None) -> SSAValue:
    """The SSA value of a Blob of this job; Blobs of other jobs (or non-Blobs) are errors."""
    if not isinstance(blob, Blob):
        fail(f"{what} expects a Blob, got {type(blob).__name__} {blob!r}", location)
    if blob.trace is not trace:
        fail(
            f"{what}: Blob '{blob.name}' belongs to job '{blob.trace.name}', not to '{trace.name}'; "
            "each job function must compute its own values",
            location,
        )
    return blob.value
