"""flow.function_config(): per-job options given to @flow.global_function.

Only the options irflow acts on exist; any other name is an error that lists
them, rather than a silently ignored OneFlow option.
"""

from __future__ import annotations

from typing import Any

from irflow.dialects.sbp import PlacementAttr
from irflow.frontend import dtypes
from irflow.frontend.scope import LogicalView, PlacementScope


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
        """flow.scope.consistent_view() (logical inputs and outputs) or flow.scope.mirrored_view() (one per device)."""
        if not isinstance(value, LogicalView):
            raise TypeError(
                f"default_logical_view expects flow.scope.consistent_view() or flow.scope.mirrored_view(), got {value!r}"
            )
        self.logical_view = value

    @property
    def mirrored(self) -> bool:
        """Whether jobs take and give one array per device (the mirrored view) instead of logical ones."""
        return self.logical_view is not None and self.logical_view.name == "mirrored_view"

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


# ----------------------------------------------------------------- devices (flow.config)

# Devices per machine, as flow.config.cpu_device_num / gpu_device_num set them; the
# placement of jobs that name none. A GPU count, once set, makes "gpu" the default tag.
_device_num: dict[str, int | None] = {"cpu": 1, "gpu": None}


def _set_device_num(tag: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"flow.config.{tag}_device_num expects a positive int, got {value!r}")
    _device_num[tag] = value


def cpu_device_num(value: int) -> None:
    """How many CPU devices a job without a placement scope runs on (simulated in one process)."""
    _set_device_num("cpu", value)


def gpu_device_num(value: int) -> None:
    """How many GPU devices a job without a placement scope runs on (CPU devices when no GPU is usable)."""
    _set_device_num("gpu", value)


def default_placement() -> PlacementAttr:
    """The placement of ops traced outside any placement scope: every configured device of machine 0."""
    tag = "gpu" if _device_num["gpu"] is not None else "cpu"
    count = _device_num[tag] or 1
    return PlacementAttr(tag, [f"0:0-{count - 1}" if count > 1 else "0:0"])


def reset_devices() -> None:
    """Back to one CPU device: a new session starts from the default configuration, as in OneFlow."""
    _device_num.update(cpu=1, gpu=None)
