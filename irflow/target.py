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

from irflow.dialects.job import FuncOp, JobOp
from irflow.dialects.sbp import PlacementAttr
from irflow.errors import source_location
from irflow.runtime import backend

# Byte alignment of arena offsets: a CPU cache line; what GPU allocators guarantee.
DEVICE_ALIGNMENT = {"cpu": 64, "gpu": 256}
ONE_CPU = PlacementAttr("cpu", ["0:0"])


@dataclass(frozen=True)
class Target:
    """Where a job runs: `device` is the kind that actually executes (after any GPU fallback).

    `placement` is the job's placement with that device kind: how many devices,
    and their hierarchy (mesh).
    """

    device: str = "cpu"
    placement: PlacementAttr = ONE_CPU

    @classmethod
    def of(cls, device_tag: str, placement: PlacementAttr | None = None) -> Target:
        """The devices of `placement` (default: device 0), on the CPU when "gpu" is asked for and none is usable."""
        backend.array_module(device_tag)  # rejects unknown tags
        device = "gpu" if device_tag == "gpu" and backend.gpu_module() is not None else "cpu"
        ranges, hierarchy = ["0:0"], []
        if placement is not None:
            ranges, hierarchy = [r.data for r in placement.ranges], [h.data for h in placement.hierarchy]
        return cls(device, PlacementAttr(device, ranges, hierarchy))

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


def _recorded_placement(module: ModuleOp) -> PlacementAttr:
    """The placement the frontend recorded on the module's job.func (one CPU device if none)."""
    for op in module.walk():
        if isinstance(op, FuncOp):
            placement = op.attributes.get("placement")
            if isinstance(placement, PlacementAttr):
                return placement
    return ONE_CPU


def decide_target(module: ModuleOp, warned: bool = False) -> tuple[Target, bool]:
    """The target of a traced module, and whether the GPU fallback warning has now been given.

    The devices are the job's placement (from its placement scopes, else
    flow.config.cpu_device_num / gpu_device_num). A "gpu" placement on a
    machine without a usable GPU runs on as many simulated CPU devices after
    one warning per session, as OneFlow falls back.
    """
    placement = _recorded_placement(module)
    gpu_ops = [
        op
        for op in module.walk()
        if isinstance(op, JobOp) and op.placement is not None and op.placement.device_tag.data == "gpu"
    ]
    if not gpu_ops and placement.device_tag.data != "gpu":
        return Target.of("cpu", placement), warned
    target = Target.of("gpu", placement)
    if target.device == "gpu" or warned:
        return target, warned
    # The first op placed on a GPU, else the job itself (its devices came from flow.config.gpu_device_num).
    funcs = [op for op in module.walk() if isinstance(op, FuncOp)]
    where = source_location(gpu_ops[0]) if gpu_ops else (source_location(funcs[0]) if funcs else None)
    warnings.warn_explicit(
        "a 'gpu' placement (flow.scope.placement or flow.config.gpu_device_num) but no usable GPU was found: "
        "running on the CPU",
        RuntimeWarning,
        where.file if where else "irflow",
        where.line if where else 0,
    )
    return target, True
