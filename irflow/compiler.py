"""The compiler's room: pipeline specs, running passes, keeping every stage, and binding the result.

Passes work on the module in memory. `run_pipeline` verifies after every pass
and keeps each stage as a clone (irflow-opt's and the tests' way);
`compile_job` runs the passes without either (`apply_pipeline`), and its
`Executable` makes the stages again, on first use, when `ir(stage)` asks for
one. The runtime receives only the final buffer program and the target: it
imports no pass.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from irflow.context import make_context
from irflow.dialects import buffer, job
from irflow.errors import CompileError, IrflowError, source_location
from irflow.gc_paused import gc_paused
from irflow.passes import PREDICT_PIPELINE, TRAIN_PIPELINE, available_passes
from irflow.runtime import spmd
from irflow.runtime.backend import available_memory
from irflow.runtime.executor import row_sources
from irflow.runtime.memory_plan import MemoryPlan
from irflow.runtime.variables import LogicalVariables, VariableStore
from irflow.target import Target
from irflow.textir.verification import first_verify_failure


class Executable:
    """A compiled job: call it with the inputs of one step, get the outputs of `job.return`."""

    def __init__(
        self,
        source: ModuleOp,
        spec: str,
        program: buffer.ProgramOp,
        store: VariableStore | LogicalVariables,
        target: Target,
        check_finite: bool = False,
    ):
        self._source, self._spec = source, spec
        self.program = program
        self.target = target
        # One device, or every device of the program's mesh (then `store` holds one shard per device).
        self.executor = spmd.bind(program, store, target.xp, check_finite)
        self.input_types = spmd.boundary_types(program, buffer.InputOp)
        self.output_types = spmd.boundary_types(program, buffer.OutputOp)
        # Per output, the input whose dynamic rows it has: a tensor list comes back cut into that input's instances.
        self.row_sources = row_sources(program)

    @property
    def xp(self) -> Any:
        return self.target.xp

    @functools.cached_property
    def stages(self) -> dict[str, ModuleOp]:
        """Every stage's IR ("job" as traced, each pass's name, then "buffer"), made on first use by
        running the pipeline again on the traced job: compiling keeps none of them."""
        return run_pipeline(self._source.clone(), self._spec)

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Whole arrays in and out; in the mirrored view, one array per device for each input and output."""
        return self.executor(inputs)

    def memory_plan(self) -> MemoryPlan:
        """Where every buffer of a step lives in the arena, and how close that is to the lower bound."""
        return MemoryPlan.of(self.program)

    def ir(self, stage: str = "buffer") -> str:
        from irflow.textir import print_module

        if stage not in self.stages:
            raise KeyError(f"no stage '{stage}'; stages are {', '.join(self.stages)}")
        return print_module(self.stages[stage], debuginfo=True)


def new_variable_bytes(program: buffer.ProgramOp, store: VariableStore | LogicalVariables) -> int:
    """What the variables this program creates (those not in `store` yet) will take on one device."""
    ops = (op for op in program.body.block.ops if isinstance(op, buffer.VariableOp))
    return sum(buffer.nbytes(op.res.type) for op in ops if op.var_name.data not in store)


def pipeline_for(func: job.FuncOp, target: Target) -> str:
    """The job's pass pipeline, each pass given the target's options."""
    spec = TRAIN_PIPELINE if func.job_type.data == "train" else PREDICT_PIPELINE
    return ",".join(name + target.pass_options(name) for name in spec.split(","))


def run_pipeline(module: ModuleOp, spec: str) -> dict[str, ModuleOp]:
    """Apply `spec` to `module` in place, verifying after every pass as mlir-opt does; return a clone
    after every pass, keyed by pass name."""
    with gc_paused():
        stages: dict[str, ModuleOp] = {"job": module.clone()}
        ctx = make_context()
        passes = _passes(spec)
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


def apply_pipeline(module: ModuleOp, spec: str) -> ModuleOp:
    """`run_pipeline` for compiling: the passes in place, the result verified once, no stage kept;
    returns a copy of the input, from which `run_pipeline` gives every stage again.

    Where a pass or that verification fails, `run_pipeline` runs again on that copy (the passes are
    deterministic), which raises the error naming the pass at fault. Verifying after every pass and
    keeping every stage took about half of compiling the train benchmark's three jobs.
    """
    source = module.clone()
    ctx = make_context()
    try:
        for p in _passes(spec):
            p.apply(ctx, module)
        failure = first_verify_failure(module)
    except IrflowError:
        raise
    except Exception:
        run_pipeline(source, spec)  # a pass that crashed on IR an earlier one broke: name that one
        raise
    if failure is not None:
        run_pipeline(source, spec)
        op, e = failure
        raise CompileError(f"IR after the pipeline '{spec}' does not verify: '{op.name}' op {e}", source_location(op))
    return source


def _passes(spec: str) -> tuple[ModulePass, ...]:
    try:
        return PassPipeline.parse_spec(available_passes(), spec).passes
    except ValueError as e:
        raise CompileError(f"bad pass pipeline '{spec}': {e}") from e


def compile_job(
    module: ModuleOp,
    name: str,
    store: VariableStore | LogicalVariables,
    target: Target | None = None,
    pipeline: str | None = None,
    check_finite: bool = False,
) -> Executable:
    """Compile the job.func `name` of `module` (left untouched) for `target` (default: one CPU).

    `check_finite` stops a step at the first kernel whose output holds NaN or inf.
    """
    target = target or Target()
    funcs = {f.sym_name.data: f for f in module.walk() if isinstance(f, job.FuncOp)}
    if name not in funcs:
        raise CompileError(f"no job '{name}' in the module (jobs: {', '.join(funcs) or 'none'})")
    with gc_paused():
        work = ModuleOp([funcs[name].clone()])
        spec = pipeline or pipeline_for(funcs[name], target)
        source = apply_pipeline(work, spec)
        programs = [op for op in work.body.block.ops if isinstance(op, buffer.ProgramOp)]
        if len(programs) != 1:
            raise CompileError(f"the pipeline left {len(programs)} buffer programs for job '{name}', expected one")
        if "arena_size" in programs[0].attributes:  # unplanned, the executor says what is missing
            MemoryPlan.of(programs[0]).check_fits(new_variable_bytes(programs[0], store), available_memory(target.xp))
        return Executable(source, spec, programs[0], store, target, check_finite)


__all__ = ["Executable", "apply_pipeline", "compile_job", "pipeline_for", "run_pipeline"]
