"""flow.distribute and the SBP hints a user gives while a job is traced.

`flow.distribute.split(axis)`, `broadcast()` and `partial_sum()` name how a
logical value lies over the devices of its placement. A hint is written on the
op that produces the value (its `sbp` property, with `sbp_origin = "hint"`), or
on the job's `arg_sbp` for a placeholder; `sbp-infer` never changes a hint
(one the op cannot produce moves to a boxing after it, docs/distributed.md).
One distribute on a placement with a 2-D hierarchy applies to every hierarchy
axis (split(0) then splits axis 0 over all devices); a list gives one
distribute per hierarchy axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument

from irflow.dialects import job
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr, hierarchy_of, nd_text
from irflow.errors import SourceLocation
from irflow.frontend import tracing
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail, user_location
from irflow.frontend.session import default_session
from irflow.frontend.tracing import build

HINT = StringAttr("hint")


@dataclass(frozen=True)
class Distribute:
    """One SBP component, as OneFlow's distribute objects."""

    sbp: SbpAttr

    def __repr__(self) -> str:
        if self.sbp.kind.data == "split":
            return f"flow.distribute.split({self.sbp.axis.data})"
        return f"flow.distribute.{self.sbp.kind.data}()"


def split(axis: int) -> Distribute:
    """Each device holds one slice of the value along `axis` (ceil-sized; the last ones padded)."""
    if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
        fail(f"flow.distribute.split: axis must be a non-negative int, got {axis!r}")
    return Distribute(SbpAttr("split", axis))


def broadcast() -> Distribute:
    """Every device holds the whole value."""
    return Distribute(SbpAttr("broadcast"))


def partial_sum() -> Distribute:
    """Every device holds a whole-shaped addend; the value is their sum."""
    return Distribute(SbpAttr("partial_sum"))


def nd_sbp(
    distribute: object, shape: Sequence[int], placement: PlacementAttr, what: str, location: SourceLocation | None = None
) -> NdSbpAttr:
    """The `#job.nd_sbp` that `distribute` asks of a value of `shape` on `placement`, checked (errors at
    `location`, else at the user's current line)."""
    axes = len(hierarchy_of(placement))
    parts = list(distribute) if isinstance(distribute, (list, tuple)) else [distribute] * axes
    if not parts or not all(isinstance(d, Distribute) for d in parts):
        fail(
            f"{what}: distribute must be flow.distribute.split(axis), broadcast() or partial_sum() "
            f"(or a list of them, one per hierarchy axis), got {distribute!r}",
            location,
        )
    if len(parts) != axes:
        fail(f"{what}: {len(parts)} distributes given for a placement with {axes} hierarchy axes {placement}", location)
    for d in parts:
        if d.sbp.kind.data == "split" and d.sbp.axis.data >= len(shape):
            fail(f"{what}: cannot split axis {d.sbp.axis.data} of a value of shape {tuple(shape)}", location)
    return NdSbpAttr([d.sbp for d in parts])


def placement_here() -> PlacementAttr:
    """The placement of an op traced now: the innermost scope's, or the configured devices'."""
    return tracing.placements[-1] if tracing.placements else default_session().resource.placement()


def job_placement(trace: tracing.Trace) -> PlacementAttr:
    """The devices a job runs on: its ops' placements together, or where it was defined if no op names one.

    Ops without a placement run on the whole job's. Equal placements keep their
    hierarchy; different ones join into one axis over all their devices ("gpu"
    if any is, as the device falls back together).
    """
    seen: list[PlacementAttr] = []
    for op in trace.block.ops:
        placement = op.properties.get("placement")
        if isinstance(placement, PlacementAttr) and placement not in seen:
            seen.append(placement)
    if not seen:
        return trace.arg_placement
    if len(seen) == 1:
        return seen[0]
    devices = list(dict.fromkeys(d for p in seen for d in p.devices))
    tag = "gpu" if any(p.device_tag.data == "gpu" for p in seen) else "cpu"
    # one scope covers every device (in whichever order the scopes came): the job is on it, the others on parts
    widest = next((p for p in seen if set(p.devices) == set(devices) and p.device_tag.data == tag), None)
    if widest is not None:
        return widest
    return PlacementAttr(tag, [f"{machine}:{device}" for machine, device in devices])


def hint(blob: object, distribute: object, what: str) -> None:
    """Fix the SBP of `blob`'s value: on its producer op, or on the job's `arg_sbp` for a placeholder."""
    trace = tracing.current(what)
    value = tracing.own_value(trace, blob, what)
    assert isinstance(blob, Blob)
    if isinstance(value, BlockArgument):
        sbp = nd_sbp(distribute, blob.shape, trace.arg_placement, what)
        if value.index in trace.arg_hints:
            _agree(trace.arg_hints[value.index][0], sbp, blob, what)
        trace.arg_hints[value.index] = (sbp, distribute, what, user_location())
        return
    op = value.owner
    placement = op.properties.get("placement") or placement_here()
    assert isinstance(placement, PlacementAttr)
    sbp = nd_sbp(distribute, blob.shape, placement, what)
    if op.attributes.get("sbp_origin") == HINT:
        _agree(op.properties.get("sbp"), sbp, blob, what)  # type: ignore[arg-type]
    op.properties["sbp"] = sbp
    op.attributes["sbp_origin"] = HINT


def _agree(known: NdSbpAttr | None, sbp: NdSbpAttr, blob: object, what: str) -> None:
    if known is not None and known != sbp:
        fail(
            f"{what}: {blob} already has the distribute {nd_text(known)}; one value has one SBP: "
            f"use flow.parallel_cast to convert it to {nd_text(sbp)}"
        )


def parallel_cast(blob: Blob, name: str | None = None, distribute: object = None, gradient_distribute: object = None) -> Blob:
    """`blob` converted to `distribute`: a job.boxing the user asks for (its `sbp` a hint), whatever sbp-infer chose.

    `gradient_distribute` is checked (a distribute that fits the blob) and otherwise left to
    sbp-infer, which decides the gradient's SBP by cost: an SBP changes where the gradient's
    pieces lie, never its value, so the model zoo's hints (Wide&Deep's) run as they are.
    With a `gradient_distribute` alone (OneFlow's `blob.with_gradient_distribute`) `blob` is returned.
    """
    return _parallel_cast(blob, name, distribute, gradient_distribute, "flow.parallel_cast")


def _parallel_cast(blob: Blob, name: str | None, distribute: object, gradient_distribute: object, what: str) -> Blob:
    if distribute is None and gradient_distribute is None:
        fail(
            f"{what}: distribute or gradient_distribute is required, "
            "e.g. flow.parallel_cast(x, distribute=flow.distribute.broadcast())"
        )
    tracing.own_value(tracing.current(what), blob, what)
    if gradient_distribute is not None:
        nd_sbp(gradient_distribute, blob.shape, placement_here(), f"{what}: gradient_distribute")
    if distribute is None:  # the value as it is; where its gradient lies is sbp-infer's choice
        return blob
    sbp = nd_sbp(distribute, blob.shape, placement_here(), what)
    out = build(job.BoxingOp, [blob], None, name, what, sbp=sbp)
    out.value.owner.attributes["sbp_origin"] = HINT
    return out


def _install_methods() -> None:
    """OneFlow's `blob.with_distribute(d)` and its two shorthands: a hint on the Blob, which is returned."""

    def with_distribute(self: Blob, distribute: object) -> Blob:
        hint(self, distribute, "Blob.with_distribute")
        return self

    def with_gradient_distribute(self: Blob, distribute: object) -> Blob:
        return _parallel_cast(self, None, None, distribute, "Blob.with_gradient_distribute")

    Blob.with_distribute = with_distribute  # type: ignore[attr-defined]
    Blob.with_gradient_distribute = with_gradient_distribute  # type: ignore[attr-defined]
    Blob.with_split_distribute = lambda self, axis: with_distribute(self, split(axis))  # type: ignore[attr-defined]
    Blob.with_broadcast_distribute = lambda self: with_distribute(self, broadcast())  # type: ignore[attr-defined]


_install_methods()


__all__ = ["Distribute", "broadcast", "parallel_cast", "partial_sum", "split"]
