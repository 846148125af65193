"""The compiler's room: pipeline specs, running passes, keeping every stage, and binding the result.

Passes work on the module in memory; each stage is kept as a clone so that
`ir(stage)` can print it on demand without slowing compilation down. The
runtime receives only the final buffer program and the target: it imports no
pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from irflow.context import make_context
from irflow.dialects import buffer, job
from irflow.errors import CompileError, IrflowError, source_location
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
        stages: dict[str, ModuleOp],
        program: buffer.ProgramOp,
        store: VariableStore | LogicalVariables,
        target: Target,
        check_finite: bool = False,
    ):
        self.stages = stages
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


def run_pipeline(module: ModuleOp, spec: str, verify_each: bool = True) -> dict[str, ModuleOp]:
    """Apply `spec` to `module` in place; return a clone after every pass, keyed by pass name.

    `verify_each` verifies the module after every pass, as mlir-opt does. Without it only the result
    is verified; where that (or a pass) fails, the clones are verified in order, and the error names
    the first pass whose output does not verify, as `verify_each` would have. Verifying every pass
    took about half of compiling the benchmark's three train jobs.
    """
    stages: dict[str, ModuleOp] = {"job": module.clone()}
    kept = [("job", stages["job"])]  # in order, a pass run twice each time: what `_blame` walks
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
            if not verify_each:
                _blame(kept)
            raise CompileError(f"'{p.name}' failed: {e}") from e
        except Exception:
            if not verify_each:
                _blame(kept)  # a pass that crashes on IR an earlier one broke: name that one
            raise
        if verify_each:
            _check(module, f"IR after '{p.name}'")
        stages[p.name] = module.clone()
        kept.append((p.name, stages[p.name]))
    if not verify_each and first_verify_failure(module) is not None:
        _blame(kept)
    stages["buffer"] = stages[passes[-1].name] if passes else stages["job"]
    return stages


def _check(module: ModuleOp, what: str) -> None:
    """A CompileError at the first op of `module` that fails verification, if one does."""
    if (failure := first_verify_failure(module)) is not None:
        op, e = failure
        raise CompileError(f"{what} does not verify: '{op.name}' op {e}", source_location(op))


def _blame(stages: Sequence[tuple[str, ModuleOp]]) -> None:
    """The verification error of the first stage whose IR does not verify; none: return."""
    for name, stage in stages:
        _check(stage, "the pipeline's input" if name == "job" else f"IR after '{name}'")


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
    work = ModuleOp([funcs[name].clone()])
    stages = run_pipeline(work, pipeline or pipeline_for(funcs[name], target), verify_each=False)
    programs = [op for op in work.body.block.ops if isinstance(op, buffer.ProgramOp)]
    if len(programs) != 1:
        raise CompileError(f"the pipeline left {len(programs)} buffer programs for job '{name}', expected one")
    if "arena_size" in programs[0].attributes:  # unplanned, the executor says what is missing
        MemoryPlan.of(programs[0]).check_fits(new_variable_bytes(programs[0], store), available_memory(target.xp))
    return Executable(stages, programs[0], store, target, check_finite)


__all__ = ["Executable", "compile_job", "pipeline_for", "run_pipeline"]
