"""irflow's passes, registered by name and imported lazily (as xDSL's `get_all_passes`)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def _lift_host_inputs() -> type[ModulePass]:
    from irflow.passes.lift_host_inputs import LiftHostInputsPass

    return LiftHostInputsPass


def _autodiff() -> type[ModulePass]:
    from irflow.passes.autodiff import AutodiffPass

    return AutodiffPass


def _optimizer() -> type[ModulePass]:
    from irflow.passes.optimizer import OptimizerPass

    return OptimizerPass


def _sbp_infer() -> type[ModulePass]:
    from irflow.passes.sbp_infer import SbpInferPass

    return SbpInferPass


def _insert_boxing() -> type[ModulePass]:
    from irflow.passes.insert_boxing import InsertBoxingPass

    return InsertBoxingPass


def _lower_to_physical() -> type[ModulePass]:
    from irflow.passes.lower_to_physical import LowerToPhysicalPass

    return LowerToPhysicalPass


def _convert_job_to_buffer() -> type[ModulePass]:
    from irflow.passes.convert_job_to_buffer import ConvertJobToBufferPass

    return ConvertJobToBufferPass


def _fuse_elementwise() -> type[ModulePass]:
    from irflow.passes.fuse_elementwise import FuseElementwisePass

    return FuseElementwisePass


def _fuse_batch_norm() -> type[ModulePass]:
    from irflow.passes.fuse_batch_norm import FuseBatchNormPass

    return FuseBatchNormPass


def _plan_memory() -> type[ModulePass]:
    from irflow.passes.plan_memory import PlanMemoryPass

    return PlanMemoryPass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {
        "lift-host-inputs": _lift_host_inputs,
        "autodiff": _autodiff,
        "optimizer": _optimizer,
        "sbp-infer": _sbp_infer,
        "insert-boxing": _insert_boxing,
        "lower-to-physical": _lower_to_physical,
        "convert-job-to-buffer": _convert_job_to_buffer,
        "fuse-batch-norm": _fuse_batch_norm,
        "fuse-elementwise": _fuse_elementwise,
        "plan-memory": _plan_memory,
    }


# xDSL's passes that irflow's pipelines and tests run on its dialects; irflow-opt lists only these and irflow's.
XDSL_PASSES = ("canonicalize", "cse", "dce")


def available_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """irflow's passes and the xDSL passes of `XDSL_PASSES`, by name."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    xdsl = xdsl_passes()
    return {**{name: xdsl[name] for name in XDSL_PASSES}, **get_all_passes()}


# What a job goes through from trace to execution; `irflow-opt -p` takes the same names.
# On one device sbp-infer makes everything broadcast, insert-boxing adds nothing and lower-to-physical
# changes nothing; on many, they turn the logical job into the one program every device runs.
TRAIN_PIPELINE = (
    "lift-host-inputs,autodiff,optimizer,cse,sbp-infer,insert-boxing,lower-to-physical,convert-job-to-buffer,fuse-batch-norm,"
    "fuse-elementwise,plan-memory"
)
PREDICT_PIPELINE = "lift-host-inputs,cse,sbp-infer,insert-boxing,lower-to-physical,convert-job-to-buffer,fuse-elementwise,plan-memory"
