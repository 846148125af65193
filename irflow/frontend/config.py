"""flow.function_config(): per-job options given to @flow.global_function.

Only the options irflow acts on exist; any other name is an error that lists
them, rather than a silently ignored OneFlow option.
"""

from __future__ import annotations

from typing import Any

from irflow.frontend import dtypes
from irflow.frontend.scope import LogicalView, PlacementScope
from irflow.runtime import threads


class FunctionConfig:
    """OneFlow's FunctionConfig: `config.default_data_type(flow.float)` and friends."""

    OPTIONS = ("default_data_type", "default_logical_view", "default_placement_scope")

    def __init__(self) -> None:
        self.data_type: dtypes.DType = dtypes.float32
        self.logical_view: LogicalView | None = None
        self.placement_scope: PlacementScope | None = None

    def default_data_type(self, value: object) -> None:
        """The dtype of variables and constants that give none (flow.float by default)."""
        self.data_type = dtypes.as_dtype(value, "default_data_type")

    def default_logical_view(self, value: LogicalView) -> None:
        """flow.scope.consistent_view() or flow.scope.mirrored_view(); one device makes them equal here."""
        if not isinstance(value, LogicalView):
            raise TypeError(
                f"default_logical_view expects flow.scope.consistent_view() or flow.scope.mirrored_view(), got {value!r}"
            )
        self.logical_view = value

    def default_placement_scope(self, value: PlacementScope) -> None:
        """A flow.scope.placement(...) that encloses the whole job."""
        if not isinstance(value, PlacementScope):
            raise TypeError(f"default_placement_scope expects flow.scope.placement(...), got {value!r}")
        self.placement_scope = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"function_config has no option {name!r}; irflow knows {', '.join(self.OPTIONS)}"
        )


def function_config() -> FunctionConfig:
    return FunctionConfig()


def cpu_thread_num(value: int | None) -> None:
    """flow.config.cpu_thread_num(n): CPU steps run numpy's BLAS on n threads (None: the default, 1).

    Process-wide and effective at once; docs/runtime.md says why irflow sets it.
    """
    threads.set_cpu_thread_num(value)
