"""From a traced job module to an executable: run the pipeline, keep every stage, bind the program.

Passes work on the module in memory; each stage is kept as a clone so that
`ir(stage)` can print it on demand without slowing compilation down.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from irflow.context import make_context
from irflow.dialects import buffer, job
from irflow.errors import CompileError, IrflowError
from irflow.passes import PREDICT_PIPELINE, TRAIN_PIPELINE, available_passes
from irflow.passes.locations import source_location
from irflow.runtime.backend import array_module
from irflow.runtime.executor import Executor, shape_dtype
from irflow.runtime.memory_plan import MemoryPlan
from irflow.runtime.variables import VariableStore
from irflow.textir.verification import first_verify_failure


class Executable:
    """A compiled job: call it with the inputs of one step, get the outputs of `job.return`."""

    def __init__(self, stages: dict[str, ModuleOp], program: buffer.ProgramOp, store: VariableStore, xp: ModuleType):
        self.stages = stages
        self.program = program
        self.xp = xp
        self.executor = Executor(program, store, xp)
        self.input_types = [shape_dtype(op.buf.type) for op in _ordered(program, buffer.InputOp)]
        self.output_types = [shape_dtype(op.buf.type) for op in _ordered(program, buffer.OutputOp)]

    def __call__(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        return self.executor(inputs)

    def memory_plan(self) -> MemoryPlan:
        """Where every buffer of a step lives in the arena, and how close that is to the lower bound."""
        return MemoryPlan.of(self.program)

    def ir(self, stage: str = "buffer") -> str:
        from irflow.textir import print_module

        if stage not in self.stages:
            raise KeyError(f"no stage '{stage}'; stages are {', '.join(self.stages)}")
        return print_module(self.stages[stage], debuginfo=True)


def _ordered(program: buffer.ProgramOp, kind: type) -> list[Any]:
    return sorted((op for op in program.body.block.ops if isinstance(op, kind)), key=lambda op: op.index.value.data)


def pipeline_for(func: job.FuncOp, device: str) -> str:
    spec = TRAIN_PIPELINE if func.job_type.data == "train" else PREDICT_PIPELINE
    return spec.replace("convert-job-to-buffer", f"convert-job-to-buffer{{device={device}}}")


def run_pipeline(module: ModuleOp, spec: str) -> dict[str, ModuleOp]:
    """Apply `spec` to `module` in place; return a clone after every pass, keyed by pass name."""
    stages: dict[str, ModuleOp] = {"job": module.clone()}
    ctx = make_context()
    try:
        passes: tuple[ModulePass, ...] = PassPipeline.parse_spec(available_passes(), spec).passes
    except ValueError as e:
        raise CompileError(f"bad pass pipeline '{spec}': {e}") from e
    for p in passes:
        try:
            p.apply(ctx, module)
        except IrflowError:
            raise
        except VerifyException as e:
            raise CompileError(f"'{p.name}' failed: {e}") from e
        if (failure := first_verify_failure(module)) is not None:
            op, e = failure
            raise CompileError(f"IR after '{p.name}' does not verify: '{op.name}' op {e}", source_location(op))
        stages[p.name] = module.clone()
    stages["buffer"] = stages[passes[-1].name] if passes else stages["job"]
    return stages


def compile_job(
    module: ModuleOp,
    name: str,
    store: VariableStore,
    device: str = "cpu",
    pipeline: str | None = None,
) -> Executable:
    """Compile the job.func `name` of `module` (left untouched) for one device.

    `device` "gpu" runs on cupy when a GPU is usable, else on numpy
    (`Executable.xp` tells which).
    """
    funcs = {f.sym_name.data: f for f in module.walk() if isinstance(f, job.FuncOp)}
    if name not in funcs:
        raise CompileError(f"no job '{name}' in the module (jobs: {', '.join(funcs) or 'none'})")
    func = funcs[name].clone()
    work = ModuleOp([func])
    xp = array_module(device)
    stages = run_pipeline(work, pipeline or pipeline_for(funcs[name], "cpu" if xp is np else "gpu"))
    programs = [op for op in work.body.block.ops if isinstance(op, buffer.ProgramOp)]
    if len(programs) != 1:
        raise CompileError(f"the pipeline left {len(programs)} buffer programs for job '{name}', expected one")
    return Executable(stages, programs[0], store, xp)


__all__ = ["Executable", "compile_job", "run_pipeline"]
