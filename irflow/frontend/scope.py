"""flow.scope: placement scopes, name scopes and logical views.

`with flow.scope.placement("gpu", "0:0"):` records `placement` on every op
traced inside (it may also enclose a job's definition, or be a job's
`default_placement_scope`). A "gpu" placement on a machine without a usable
GPU runs on the CPU after one warning per session, as OneFlow falls back.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from xdsl.utils.exceptions import VerifyException

from irflow.dialects.sbp import PlacementAttr
from irflow.frontend import tracing
from irflow.frontend.locations import fail

if TYPE_CHECKING:
    from irflow.frontend.config import FunctionConfig


class PlacementScope:
    """The devices of the ops traced inside: `#job.placement<gpu, ["0:0"]>`."""

    def __init__(self, attr: PlacementAttr):
        self.attr = attr

    def __enter__(self) -> PlacementScope:
        tracing.placements.append(self.attr)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        tracing.placements.pop()

    def __repr__(self) -> str:
        return f"flow.scope.placement({self.attr.device_tag.data!r}, {[r.data for r in self.attr.ranges]})"


def placement(
    device_tag: str, machine_device_ids: str | Sequence[str], hierarchy: Sequence[int] | None = None
) -> PlacementScope:
    """OneFlow's placement scope: device_tag "cpu" | "gpu", ids "machine:first-last" (one or a list)."""
    ranges = [machine_device_ids] if isinstance(machine_device_ids, str) else list(machine_device_ids)
    if not all(isinstance(r, str) for r in ranges):
        fail(f"flow.scope.placement: machine_device_ids must be strings like '0:0-3', got {machine_device_ids!r}")
    try:
        attr = PlacementAttr(device_tag, ranges, list(hierarchy or ()))
    except VerifyException as err:
        fail(f"flow.scope.placement: {err}")
    return PlacementScope(attr)


class NameScope:
    """`with flow.scope.namespace("encoder"):` names the variables created inside "encoder-<name>"."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> NameScope:
        tracing.namespaces.append(self.name)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        tracing.namespaces.pop()


def namespace(name: str) -> NameScope:
    """OneFlow's name scope; scopes nest ("outer-inner-fc-weight")."""
    if not isinstance(name, str) or not name:
        fail(f"flow.scope.namespace: name must be a non-empty string, got {name!r}")
    return NameScope(name)


def name_scope(name: str) -> NameScope:
    """OneFlow's deprecated `flow.name_scope` (also `flow.experimental.name_scope` and
    `flow.deprecated.variable_scope`): `namespace` under its older names,
    which OneFlow-era models and BERT's documentation page write."""
    warnings.warn("flow.name_scope / flow.experimental.name_scope / flow.deprecated.variable_scope are deprecated; "
                  "write flow.scope.namespace(name)", DeprecationWarning, stacklevel=2)
    return namespace(name)


class LogicalView:
    """OneFlow's logical view: a job's default (`default_logical_view`) or a `with` scope.

    The tracer reads the view in force with `current_view()`; on one
    device both views run alike, on many the mirrored view hands each device
    its own piece of every input and output (docs/distributed.md).
    """

    def __init__(self, name: str):
        self.name = name

    @property
    def mirrored(self) -> bool:
        return self.name == "mirrored_view"

    def __enter__(self) -> LogicalView:
        tracing.views.append(self)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        tracing.views.pop()

    def __repr__(self) -> str:
        return f"flow.scope.{self.name}()"


def consistent_view() -> LogicalView:
    """One logical tensor over all devices (OneFlow's default)."""
    return LogicalView("consistent_view")


def mirrored_view() -> LogicalView:
    """One tensor per device, as in data-parallel frameworks."""
    return LogicalView("mirrored_view")


def view_here(config: FunctionConfig | None) -> LogicalView:
    """The innermost `with` view scope, else `config`'s default view, else consistent."""
    if tracing.views:
        return tracing.views[-1]
    if config is not None and config.logical_view is not None:
        return config.logical_view
    return consistent_view()


def current_view() -> LogicalView:
    """The view in force here: the innermost `with` view scope, else the job's default, else consistent.

    A job takes the view in force where it is defined: in the mirrored view its
    inputs and outputs are lists of one array per device.
    """
    trace = tracing.active()
    return view_here(trace.config if trace is not None else None)


def mirrored_view_enabled() -> bool:
    return current_view().mirrored


def consistent_view_enabled() -> bool:
    return not current_view().mirrored
