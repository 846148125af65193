"""One per-device program on every device of a mesh (SPMD), called with logical values.

`SpmdExecutor` builds one Executor per rank from the same buffer.program, each
with its own arena, its own piece of the variables (`LogicalVariables.shards`)
and its own communicator of an `InProcessGroup`; a call cuts the inputs into
the devices' pieces, runs the devices together and puts the outputs back
together. What a piece is comes from the IR: `buffer.input` / `buffer.output`
carry the value's `logical_shape` and `sbp`, the program its `mesh` and `view`.

Consistent view (default): callers pass and receive whole logical arrays.
Mirrored view: each input is a list with one array for each device this
process runs (every device in one process, its own under mpiexec), and each
output comes back as those devices' pieces, as OneFlow's ListNumpy; `logical`
and `local_part` turn them into the whole value or this process's rows.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import DYNAMIC_INDEX

from irflow.dialects import buffer
from irflow.dialects.mesh import local_region, mesh_coords
from irflow.dialects.sbp import SbpAttr
from irflow.errors import CompileError, ExecutionError, source_location
from irflow.runtime.attributes import python_value
from irflow.runtime.communicator import Site
from irflow.runtime.executor import Executor, shape_dtype, whole_step
from irflow.runtime.inprocess import InProcessGroup
from irflow.runtime.sharding import Layout
from irflow.runtime.variables import LogicalVariables, VariableStore

if TYPE_CHECKING:
    from irflow.runtime.mpi import MPICommunicator

VIEWS = ("consistent", "mirrored")


class DevicePieces(list):
    """An input given as its pieces for this process's devices, in their order, already cut as its SBP cuts it:
    what a host-side reader reads per device (irflow/frontend/records.py), which under mpiexec has only its
    own rank's rows. Either view takes it as it is."""


def program_mesh(program: buffer.ProgramOp) -> tuple[int, ...]:
    """The mesh a program was lowered for (one device when it says nothing)."""
    mesh = program.attributes.get("mesh")
    return tuple(python_value(mesh)) if mesh is not None else (1,)


def value_layout(op: buffer.InputOp | buffer.OutputOp, mesh: Sequence[int]) -> Layout:
    """How a host value crossing the program's boundary is cut over the mesh."""
    sbp, logical = op.attributes.get("sbp"), op.attributes.get("logical_shape")
    if sbp is None or logical is None:  # whole on every device
        return Layout.of(op.buf.type.get_shape(), [SbpAttr("broadcast")] * len(mesh), mesh)  # type: ignore[attr-defined]
    return Layout.of(python_value(logical), sbp, mesh)  # type: ignore[arg-type]


def bind(
    program: buffer.ProgramOp, store: VariableStore | LogicalVariables, xp: ModuleType = np, check_finite: bool = False
) -> Executor | SpmdExecutor:
    """The callable for `program`: one Executor, or one per device of its mesh."""
    mesh = program_mesh(program)
    if isinstance(store, LogicalVariables):
        return SpmdExecutor(program, store, xp, check_finite)
    if any(p != 1 for p in mesh):
        raise CompileError(
            f"job '{program.sym_name.data}' runs on the mesh {list(mesh)}: it needs a LogicalVariables store "
            "with one shard per device",
            source_location(program),
        )
    return Executor(program, store, xp, check_finite=check_finite)


def boundary_types(program: buffer.ProgramOp, kind: type) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Logical shape and dtype of each input (kind=InputOp) or output (OutputOp), as callers see them."""
    mesh = program_mesh(program)
    return [(value_layout(op, mesh).shape, shape_dtype(op.buf.type)[1]) for op in _boundary(program, kind)]


class SpmdExecutor:
    """The devices of a mesh running one program in step; called like an Executor with logical values."""

    def __init__(
        self, program: buffer.ProgramOp, variables: LogicalVariables, xp: ModuleType = np, check_finite: bool = False
    ):
        self.name = program.sym_name.data
        self.mesh = program_mesh(program)
        if self.mesh != variables.mesh:
            raise CompileError(
                f"job '{self.name}' was lowered for the mesh {list(self.mesh)}, its variables live on {list(variables.mesh)}",
                source_location(program),
            )
        view = program.attributes.get("view")
        self.view = python_value(view) if view is not None else "consistent"
        if self.view not in VIEWS:
            raise CompileError(f"unknown view '{self.view}', expected one of {', '.join(VIEWS)}", source_location(program))
        # Under MPI this process is one device of the mesh; otherwise all of them are simulated here.
        self.comm = variables.comm
        self.ranks = variables.ranks
        self.group = InProcessGroup(self.mesh, xp) if self.comm is None else None
        comms = [self.comm] if self.comm is not None else [self.group.communicator(r) for r in self.ranks]
        self.executors = [
            Executor(program, store, xp, comm, check_finite) for store, comm in zip(variables.shards, comms)
        ]
        if self.comm is not None:
            check_same_program(self.comm, program)
        self.input_layouts = [value_layout(op, self.mesh) for op in _boundary(program, buffer.InputOp)]
        self.output_layouts = [value_layout(op, self.mesh) for op in _boundary(program, buffer.OutputOp)]
        # Outputs split along a dynamic axis 0: each device returns its own rows.
        self.dynamic_outputs = {
            i for i, op in enumerate(_boundary(program, buffer.OutputOp)) if op.buf.type.get_shape()[:1] == (DYNAMIC_INDEX,)
        }

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        if len(inputs) != len(self.input_layouts):
            raise ExecutionError(f"job '{self.name}' takes {len(self.input_layouts)} inputs, got {len(inputs)}")
        pieces = [self.pieces(i, value) for i, value in enumerate(inputs)]
        sizes = self.every_size([[p[rank] for p in pieces] for rank in range(len(self.executors))])
        for rank, executor in enumerate(self.executors):
            executor.feed([p[rank] for p in pieces], sizes)
        whole_step(self.executors, self.run_steps)
        results = [e.results() for e in self.executors]
        outputs = [[r[i] for r in results] for i in range(len(self.output_layouts))]
        if self.view == "mirrored":
            return outputs
        return [self.logical(i, pieces) for i, pieces in enumerate(outputs)]

    def run_steps(self) -> None:
        """One step of every device over the fed inputs: in-process devices together, else this process's one."""
        if self.group is not None:
            self.group.run([e.steps for e in self.executors])
        else:
            self.executors[0].run_steps()

    def every_size(self, inputs: list[list[Any]]) -> tuple[int, ...] | None:
        """Every rank's input sizes, one after another, for a program that sums sizes over devices (an all_gather
        of each device's own rows): read here for simulated devices, gathered from the ranks under MPI."""
        if not self.executors[0].summed:
            return None
        local = [executor.sizes_of(ins) for executor, ins in zip(self.executors, inputs)]
        if self.comm is None:
            return tuple([n for sizes in local for n in sizes])  # exact size: a freed key's memory is reused
        every = self.comm.gather_all(np.array(local[0], np.int64), Site(f"job '{self.name}' input sizes"))
        return tuple(int(n) for sizes in every for n in sizes)

    def logical(self, index: int, pieces: list[np.ndarray]) -> np.ndarray:
        """Output `index`'s whole value from this process's pieces (under MPI gathered from every rank if not broadcast)."""
        layout = self.output_layouts[index]
        site = Site(f"job '{self.name}' output {index}")
        if all(c.kind.data == "broadcast" for c in layout.sbp):  # every device holds it all (rows gathered too)
            return pieces[0]
        if index in self.dynamic_outputs:  # each device's own rows, one after another (docs/dynamic.md)
            return np.concatenate(pieces if self.comm is None else self.gather_rows(pieces[0], layout.local_shape, site))
        if self.comm is None:
            return layout.gather(pieces)
        return layout.gather(self.comm.gather_all(pieces[0], site))

    def gather_rows(self, piece: np.ndarray, bound: tuple[int, ...], site: Site) -> list[np.ndarray]:
        """Every rank's rows of a dynamic output: the counts first, then the pieces at their bound."""
        assert self.comm is not None
        rows = self.comm.gather_all(np.array([piece.shape[0]], np.int64), site)
        padded = np.zeros(bound, piece.dtype)
        padded[: piece.shape[0]] = piece
        return [whole[: int(n[0])] for whole, n in zip(self.comm.gather_all(padded, site), rows)]

    def local_part(self, index: int, pieces: list[np.ndarray]) -> list[np.ndarray]:
        """Output `index` of a mirrored job as this process holds it: each of its devices' rows, without padding."""
        layout = self.output_layouts[index]
        valid = [local_region(layout.shape, layout.sbp, self.mesh, mesh_coords(r, self.mesh)).valid for r in self.ranks]
        return [piece[tuple(slice(0, n) for n in rows)] for piece, rows in zip(pieces, valid)]

    def pieces(self, index: int, value: Any) -> list[np.ndarray]:
        """Every rank's piece of input `index`: cut from the whole value, or given per device (mirrored)."""
        layout = self.input_layouts[index]
        if isinstance(value, DevicePieces):
            assert len(value) == len(self.ranks), f"{len(value)} pieces for {len(self.ranks)} devices"
            return list(value)
        if self.view == "mirrored":
            here = len(self.ranks)
            if not isinstance(value, (list, tuple)) or len(value) != here:
                devices = math.prod(self.mesh)
                which = (
                    f"a list of {devices} arrays, one per device"
                    if here == devices
                    else f"a list of {here} array(s), this process's part (under mpiexec each of the {devices} "
                    f"devices is one process, rank {self.ranks[0]} here)"
                )
                raise ExecutionError(
                    f"job '{self.name}' runs in the mirrored view on {devices} devices: input {index} must be {which}"
                )
            return [v if isinstance(v, tuple) else np.asarray(v) for v in value]  # a tuple: a device's tensor list
        try:
            array = np.asarray(value)
            return [layout.shard(array, rank) for rank in self.ranks]
        except ValueError as e:
            raise ExecutionError(f"job '{self.name}', input {index}: {e}") from e


def _boundary(program: buffer.ProgramOp, kind: type) -> list[Any]:
    """The program's buffer.input (or buffer.output) ops in argument order."""
    return sorted((op for op in program.body.block.ops if isinstance(op, kind)), key=lambda op: op.index.value.data)


def check_same_program(comm: MPICommunicator, program: buffer.ProgramOp) -> None:
    """Before the first step, every rank must have compiled the same per-device program for the same mesh."""
    text = f"mesh {list(comm.mesh)}\n{program}"
    digest = hashlib.sha256(text.encode()).hexdigest()
    digests = comm.agree(digest)
    if len(set(digests)) == 1:
        return
    texts = comm.agree(text)
    other = next(r for r, d in enumerate(digests) if d != digests[0])
    ours, theirs = texts[0].splitlines(), texts[other].splitlines()
    line = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    show = lambda lines: lines[line].strip() if line < len(lines) else "(end of program)"  # noqa: E731
    raise CompileError(
        f"ranks compiled different programs for job '{program.sym_name.data}': rank 0 and rank {other} "
        f"first differ at line {line + 1}: rank 0 has `{show(ours)}`, rank {other} has `{show(theirs)}` "
        "(every rank must run the same script with the same configuration)",
        source_location(program),
    )

