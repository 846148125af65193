"""The compile target: decided once per job, handed to the passes and the runtime.

Device kind, placement (device count and hierarchy), array module and arena
alignment travel together, so no pass, store or executor re-decides the device:
the passes get the target as options, the variable store and the executor get
the target itself.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import ModuleType

from xdsl.dialects.builtin import ModuleOp

from irflow.dialects.job import JobOp
from irflow.dialects.sbp import PlacementAttr
from irflow.errors import source_location
from irflow.runtime import backend

# Byte alignment of arena offsets: a CPU cache line; what GPU allocators guarantee.
DEVICE_ALIGNMENT = {"cpu": 64, "gpu": 256}


@dataclass(frozen=True)
class Target:
    """Where a job runs: `device` is the kind that actually executes (after any GPU fallback)."""

    device: str = "cpu"
    placement: PlacementAttr = PlacementAttr("cpu", ["0:0"])

    @classmethod
    def of(cls, device_tag: str) -> Target:
        """One device of kind `device_tag`, on the CPU when "gpu" is asked for and none is usable."""
        if device_tag == "gpu" and backend.gpu_module() is not None:
            return cls("gpu", PlacementAttr("gpu", ["0:0"]))
        backend.array_module(device_tag)  # rejects unknown tags
        return cls("cpu")

    @property
    def alignment(self) -> int:
        return DEVICE_ALIGNMENT[self.device]

    @property
    def xp(self) -> ModuleType:
        return backend.array_module(self.device)

    @property
    def num_devices(self) -> int:
        return len(self.placement.devices)

    @property
    def hierarchy(self) -> tuple[int, ...]:
        return tuple(h.data for h in self.placement.hierarchy) or (self.num_devices,)

    def pass_options(self, pass_name: str) -> str:
        """The `{...}` options that tell `pass_name` about this target ("" if it needs none)."""
        if pass_name == "convert-job-to-buffer":
            return f"{{device={self.device}}}"
        if pass_name == "plan-memory":
            return f"{{alignment={self.alignment}}}"
        return ""


def decide_target(module: ModuleOp, warned: bool = False) -> tuple[Target, bool]:
    """The target of a traced module, and whether the GPU fallback warning has now been given.

    A "gpu" placement on a machine without a usable GPU runs on the CPU after
    one warning per session, as OneFlow falls back.
    """
    gpu_ops = [
        op
        for op in module.walk()
        if isinstance(op, JobOp) and op.placement is not None and op.placement.device_tag.data == "gpu"
    ]
    if not gpu_ops:
        return Target("cpu"), warned
    target = Target.of("gpu")
    if target.device == "gpu" or warned:
        return target, warned
    where = source_location(gpu_ops[0])
    warnings.warn_explicit(
        "flow.scope.placement('gpu', ...) but no usable GPU was found: running on the CPU",
        RuntimeWarning,
        where.file if where else "irflow",
        where.line if where else 0,
    )
    return target, True

