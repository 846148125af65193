"""One per-device program on every device of a mesh (SPMD), called with logical values.

`SpmdExecutor` builds one Executor per rank from the same buffer.program, each
with its own arena, its own piece of the variables (`LogicalVariables.shards`)
and its own communicator of an `InProcessGroup`; a call cuts the inputs into
the devices' pieces, runs the devices together and puts the outputs back
together. What a piece is comes from the IR: `buffer.input` / `buffer.output`
carry the value's `logical_shape` and `sbp`, the program its `mesh` and `view`.

Consistent view (default): callers pass and receive whole logical arrays.
Mirrored view: each input is a list with one array per device (its piece) and
each output comes back as such a list, as OneFlow's ListNumpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from irflow.dialects import buffer
from irflow.dialects.sbp import SbpAttr
from irflow.errors import CompileError, ExecutionError, source_location
from irflow.runtime.attributes import python_value
from irflow.runtime.executor import Executor, shape_dtype
from irflow.runtime.inprocess import InProcessGroup
from irflow.runtime.sharding import Layout
from irflow.runtime.variables import LogicalVariables, VariableStore

VIEWS = ("consistent", "mirrored")


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
        self.group = InProcessGroup(self.mesh, xp)
        self.executors = [
            Executor(program, store, xp, self.group.communicator(rank), check_finite)
            for rank, store in enumerate(variables.shards)
        ]
        self.input_layouts = [value_layout(op, self.mesh) for op in _boundary(program, buffer.InputOp)]
        self.output_layouts = [value_layout(op, self.mesh) for op in _boundary(program, buffer.OutputOp)]

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        if len(inputs) != len(self.input_layouts):
            raise ExecutionError(f"job '{self.name}' takes {len(self.input_layouts)} inputs, got {len(inputs)}")
        pieces = [self.pieces(i, value) for i, value in enumerate(inputs)]
        for rank, executor in enumerate(self.executors):
            executor.feed([p[rank] for p in pieces])
        self.group.run([e.steps for e in self.executors])
        results = [e.results() for e in self.executors]
        if self.view == "mirrored":
            return [[r[i] for r in results] for i in range(len(self.output_layouts))]
        return [layout.gather([r[i] for r in results]) for i, layout in enumerate(self.output_layouts)]

    def pieces(self, index: int, value: Any) -> list[np.ndarray]:
        """Every rank's piece of input `index`: cut from the whole value, or given per device (mirrored)."""
        layout = self.input_layouts[index]
        if self.view == "mirrored":
            if not isinstance(value, (list, tuple)) or len(value) != len(self.executors):
                raise ExecutionError(
                    f"job '{self.name}' runs in the mirrored view on {len(self.executors)} devices: "
                    f"input {index} must be a list of {len(self.executors)} arrays, one per device"
                )
            return [np.asarray(v) for v in value]
        try:
            array = np.asarray(value)
            return [layout.shard(array, rank) for rank in range(len(self.executors))]
        except ValueError as e:
            raise ExecutionError(f"job '{self.name}', input {index}: {e}") from e


def _boundary(program: buffer.ProgramOp, kind: type) -> list[Any]:
    """The program's buffer.input (or buffer.output) ops in argument order."""
    return sorted((op for op in program.body.block.ops if isinstance(op, kind)), key=lambda op: op.index.value.data)
