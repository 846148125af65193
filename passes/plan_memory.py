"""plan-memory: one arena per program, every buffer at a fixed offset (static memory planning).

Liveness comes from the IR alone: a buffer lives from the first op that reads
or writes it to the last (`OperandEffects`), in schedule order.  Buffers whose
lifetimes are disjoint share bytes (`irflow.memplan`); an elementwise kernel
whose input dies at that kernel writes its output in place.  The plan is
recorded in the IR: `arena_size` and `lower_bound` on the program, `lifetime`
on every view, so `irflow-opt` shows it.  With `reorder`, the schedule is
first rearranged so buffers die sooner (passes/memory_schedule.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irflow.dialects import buffer
from irflow.errors import CompileError
from irflow.dialects.job import i64_array
from irflow.memplan import Buffer, lower_bound, plan
from irflow.passes.memory_schedule import shorten_lifetimes

# Kernels that read each input element only to write the same output element,
# so the output may take the memory of an input that dies there.
ELEMENTWISE_KERNELS = frozenset(
    "neg exp log sqrt rsqrt square relu sigmoid tanh gelu abs identity "
    "sin cos floor ceil round sign log1p expm1 erf erfc tan asin acos atan sinh cosh asinh acosh atanh lgamma digamma "
    "add sub mul div maximum minimum pow floor_mod atan2 "
    "relu_grad sigmoid_grad tanh_grad gelu_grad bias_add bias_add_relu".split()
)


@dataclass
class Liveness:
    """First and last schedule index of every alloc'd buffer, with in-place merges applied."""

    allocs: list[buffer.AllocOp]
    first: dict[SSAValue, int]
    last: dict[SSAValue, int]
    leader: dict[SSAValue, SSAValue]

    @classmethod
    def of(cls, program: buffer.ProgramOp, in_place: bool) -> Liveness:
        ops = list(program.body.block.ops)
        allocs = [op for op in ops if isinstance(op, buffer.AllocOp)]
        first: dict[SSAValue, int] = {}
        last: dict[SSAValue, int] = {}
        for index, op in enumerate(ops):
            # A buffer lives from its first use; an alloc op itself schedules nothing.
            if isinstance(op, buffer.BufferOp) and not isinstance(op, buffer.AllocOp):
                for v in map(buffer.storage_of, (*op.reads(), *op.writes())):  # a cut is its bound buffer
                    if isinstance(v.owner, buffer.AllocOp):
                        first.setdefault(v, index)
                        last[v] = index
        for index, op in enumerate(ops):
            if isinstance(op, buffer.AllocOp) and op.res not in first:
                first[op.res] = last[op.res] = index  # never used: a point lifetime where it stands
        leader = {a.res: a.res for a in allocs}
        live = cls(allocs, first, last, leader)
        if in_place:
            live.merge_in_place(ops)
        return live

    def find(self, v: SSAValue) -> SSAValue:
        while self.leader[v] is not v:
            v = self.leader[v]
        return v

    def merge_in_place(self, ops: list[Operation]) -> None:
        for index, op in enumerate(ops):
            if not isinstance(op, buffer.KernelOp) or op.kernel.data not in ELEMENTWISE_KERNELS:
                continue
            out = buffer.storage_of(op.outs[0])
            if out not in self.leader or self.first[out] != index:
                continue
            for src in map(buffer.storage_of, op.ins):
                if src in self.leader and src.type == out.type and src is not out:
                    root = self.find(src)
                    if self.last[root] == index:
                        self.leader[out] = root
                        self.last[root] = self.last[out]
                        break

    def groups(self) -> dict[SSAValue, list[buffer.AllocOp]]:
        groups: dict[SSAValue, list[buffer.AllocOp]] = {}
        for a in self.allocs:
            groups.setdefault(self.find(a.res), []).append(a)
        return groups


@dataclass(frozen=True)
class PlanMemoryPass(ModulePass):
    """Replace every buffer.alloc with a view at a planned offset of one arena per program.

    A program that has its arena is planned already and left as it is: planning
    it again would add a second, empty arena.
    """

    name = "plan-memory"

    # Byte alignment of every offset; the compile target passes its device's (64 on CPUs, 256 on GPUs).
    alignment: int = 64
    # Seconds the planner may spend improving on its fast default (0: default only).
    effort: float = 0.0
    in_place: bool = True
    # Reorder the schedule (within its dependences) so that buffers die sooner.
    reorder: bool = False

    def __post_init__(self) -> None:
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise ValueError(f"must be a power of two, got {self.alignment}")
        if self.effort < 0:
            raise ValueError(f"must be a number of seconds >= 0, got {self.effort}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        programs = [o for o in op.body.block.ops if isinstance(o, buffer.ProgramOp)]
        if not programs:
            raise CompileError("plan-memory found no buffer.program to plan: run convert-job-to-buffer first")
        for program in programs:
            if not any(isinstance(o, buffer.ArenaOp) for o in program.body.block.ops):
                self.plan_program(program)

    def plan_program(self, program: buffer.ProgramOp) -> None:
        if self.reorder:
            block = program.body.block
            order = shorten_lifetimes(list(block.ops))
            for o in order:
                o.detach()
            block.add_ops(order)
        live = Liveness.of(program, self.in_place)
        groups = live.groups()
        roots = list(groups)
        sizes = [max(buffer.nbytes(a.res.type) for a in groups[r]) for r in roots]
        buffers = [Buffer(size=s, first=live.first[r], last=live.last[r]) for r, s in zip(roots, sizes)]
        alignment = self.alignment
        result = plan(buffers, alignment=alignment, budget_s=self.effort or None)
        arena = buffer.ArenaOp(max(result.size, alignment), alignment)
        block = program.body.block
        if block.first_op is None:
            block.add_op(arena)
        else:
            block.insert_op_before(arena, block.first_op)
        for root, offset in zip(roots, result.offsets):
            lifetime = i64_array([live.first[root], live.last[root]])
            for alloc in groups[root]:
                view = buffer.ViewOp(arena.res, offset, alloc.res.type)
                view.attributes["lifetime"] = lifetime
                view.location = alloc.location
                view.res.name_hint = alloc.res.name_hint
                Rewriter.replace_op(alloc, view)
        program.attributes["arena_size"] = IntegerAttr(arena.size.value.data, i64)
        program.attributes["lower_bound"] = IntegerAttr(lower_bound(buffers), i64)
