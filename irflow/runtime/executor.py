"""Compile a planned buffer.program into a flat list of closures over arena views.

Binding happens once: every buffer becomes a fixed view of the arena (or of a
variable in the store, or of a constant), every kernel a closure over those
views.  A step then copies the inputs in, runs the closures, and copies the
outputs out: nothing else is allocated.  The array module `xp` is numpy or
cupy; kernels see only it, and collectives go through the communicator the
executor is bound to (`irflow.runtime.communicator`), so the same program runs
on one device, on simulated devices and, later, under MPI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    MemRefType,
    Signedness,
)
from xdsl.ir import Attribute, SSAValue

from irflow.dialects import buffer
from irflow.dialects.sbp import PlacementAttr, hierarchy_of
from irflow.errors import CompileError, ExecutionError, source_location
from irflow.runtime import kernels, threads
from irflow.runtime.attributes import python_value
from irflow.runtime.communicator import Communicator, Site
from irflow.runtime.sharding import Layout, transfer_steps
from irflow.runtime.variables import VariableStore

def numpy_dtype(element_type: Attribute) -> np.dtype:
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        if width == 1:
            return np.dtype(np.bool_)
        kind = "u" if element_type.signedness.data == Signedness.UNSIGNED else "i"
        return np.dtype(f"{kind}{width // 8}")
    return np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[str(element_type)])


def shape_dtype(t: Attribute) -> tuple[tuple[int, ...], np.dtype]:
    assert isinstance(t, MemRefType)
    return tuple(t.get_shape()), numpy_dtype(t.element_type)


class Executor:
    """One device's program, bound to an arena, a variable store and a communicator, callable once per step.

    `feed`, `steps` and `results` are the parts of a call, for drivers that
    interleave the steps of several devices (`InProcessGroup.run`). With
    `check_finite`, a step stops at the first kernel whose output holds NaN or inf.
    """

    def __init__(
        self,
        program: buffer.ProgramOp,
        store: VariableStore,
        xp: ModuleType = np,
        comm: Communicator | None = None,
        check_finite: bool = False,
    ):
        self.xp = xp
        self.comm = comm
        self.check_finite = check_finite
        self.name = program.sym_name.data
        self.views: dict[SSAValue, Any] = {}
        self.inputs: list[tuple[int, Any]] = []
        self.outputs: list[tuple[int, Any]] = []
        self.steps: list[Callable[[], None]] = []
        self.arena: Any = None
        placement = program.attributes.get("placement")
        self.ranks = {d: r for r, d in enumerate(placement.devices)} if isinstance(placement, PlacementAttr) else {}
        for op in program.body.block.ops:
            try:
                self.bind(op, store)
            except (LookupError, ValueError, TypeError) as e:
                raise CompileError(f"cannot build '{op.name}' for the {xp.__name__} backend: {e}", source_location(op)) from e
        self.inputs.sort(key=lambda p: p[0])
        self.outputs.sort(key=lambda p: p[0])

    def members(self, placement: PlacementAttr) -> tuple[int, ...]:
        """The program ranks of `placement`'s devices (a part of the program's, in its order)."""
        return tuple(self.ranks[d] for d in placement.devices)

    def placed(self, op: Any) -> tuple[bool, Communicator | None]:
        """Whether this device runs `op`, and the communicator of the devices that do (docs/distributed.md):
        an op placed on part of the program's devices runs there only, on a sub-communicator."""
        place = op.attributes.get("placement")
        if not isinstance(place, PlacementAttr) or self.comm is None:
            return True, self.comm
        members = self.members(place)
        if self.comm.rank not in members:
            return False, None
        return True, self.comm.subgroup(members, hierarchy_of(place))

    def bind(self, op: Any, store: VariableStore) -> None:
        xp = self.xp
        runs, comm = self.placed(op)
        if not runs and not isinstance(op, buffer.VariableOp):
            return
        if isinstance(op, buffer.ArenaOp):
            size, alignment = op.size.value.data, op.alignment.value.data
            raw = xp.zeros(size + alignment, dtype=np.uint8)
            start = (-raw.data.ptr if hasattr(raw.data, "ptr") else -raw.ctypes.data) % alignment
            self.arena = raw[start : start + size]
        elif isinstance(op, buffer.ViewOp):
            shape, dtype = shape_dtype(op.res.type)
            offset = op.offset.value.data
            nbytes = buffer.nbytes(op.res.type)
            self.views[op.res] = self.arena[offset : offset + nbytes].view(dtype).reshape(shape)
        elif isinstance(op, buffer.AllocOp):
            raise CompileError("buffer.alloc left in the program: run plan-memory first", source_location(op))
        elif isinstance(op, buffer.VariableOp):
            shape, dtype = shape_dtype(op.res.type)
            init = op.attributes.get("initializer")
            trainable = op.attributes.get("trainable")
            self.views[op.res] = store.ensure(
                op.var_name.data,
                shape,
                dtype,
                python_value(init) if init is not None else {"kind": "zeros"},
                python_value(trainable) if trainable is not None else True,
                self.layout(op),
            )
        elif isinstance(op, buffer.ConstantOp):
            shape, dtype = shape_dtype(op.res.type)
            self.views[op.res] = xp.asarray(_dense_values(op.value, shape, dtype))
        elif isinstance(op, buffer.InputOp):
            self.inputs.append((op.index.value.data, self.views[op.buf]))
        elif isinstance(op, buffer.OutputOp):
            self.outputs.append((op.index.value.data, self.views[op.buf]))
        elif isinstance(op, buffer.KernelOp):
            factory = kernels.get_kernel(op.kernel.data)
            attrs = {k: python_value(v) for k, v in op.parameters().items()}
            if "mesh_axis" in attrs:  # a rank-dependent kernel: told this device's coordinate, never the communicator
                attrs["coordinate"] = comm.coords[attrs["mesh_axis"]] if comm else 0
            ins = [self.views[v] for v in op.ins]
            outs = [self.views[v] for v in op.outs]
            run = factory(xp, attrs, ins, outs)
            run = _located(run, op) if op.kernel.data in kernels.CHECKS_DATA else run
            self.steps.append(finite_checked(run, op, outs, xp) if self.check_finite else run)
        elif isinstance(op, buffer.CopyOp):
            src, dst = self.views[op.src], self.views[op.dst]
            self.steps.append(lambda src=src, dst=dst: xp.copyto(dst, src.reshape(dst.shape)))
        elif isinstance(op, (buffer.CollectiveOp, buffer.PointToPointOp)):
            self.steps.append(self.collective(op, comm))
        elif isinstance(op, buffer.TransferOp):
            self.steps.extend(self.transfer(op))
        else:
            raise CompileError(f"the executor cannot run '{op.name}'", source_location(op))

    def layout(self, op: buffer.VariableOp) -> Layout | None:
        """How the variable's logical value is cut over the mesh (None: this device holds all of it)."""
        sbp, shape = op.attributes.get("sbp"), op.attributes.get("logical_shape")
        if sbp is None or shape is None:
            return None
        mesh = self.comm.mesh if self.comm else (1,) * len(sbp.components)  # type: ignore[union-attr]
        place = op.attributes.get("placement")
        if isinstance(place, PlacementAttr) and self.comm is not None:
            return Layout.of(python_value(shape), sbp, hierarchy_of(place), self.members(place))  # type: ignore[arg-type]
        return Layout.of(python_value(shape), sbp, mesh)  # type: ignore[arg-type]

    def transfer(self, op: buffer.TransferOp) -> list[Callable[[], None]]:
        """The steps of a value moving between groups of devices (none on a device of neither)."""
        site = Site(op.name, source_location(op))
        if self.comm is None:
            raise CompileError(f"'{op.name}' needs a communicator; this executor runs one device", site.location)
        shape = tuple(int(d) for d in op.logical_shape.get_values())
        ends = [
            Layout.of(shape, sbp, hierarchy_of(place), self.members(place))
            for sbp, place in ((op.src_sbp, op.src_placement), (op.sbp, op.placement))
        ]
        return transfer_steps(self.views[op.src], self.views[op.dst], ends[0], ends[1], self.comm, site, self.xp)

    def collective(self, op: buffer.CollectiveOp | buffer.PointToPointOp, comm: Communicator | None) -> Callable[[], None]:
        """A step that hands the op's views to the communicator."""
        site = Site(op.name, source_location(op))
        if comm is None:
            raise CompileError(f"'{op.name}' needs a communicator; this executor runs one device", site.location)
        if isinstance(op, buffer.PointToPointOp):
            buf, peer = self.views[op.buf], op.peer.value.data
            if isinstance(op, buffer.SendOp):
                return lambda: comm.send(buf, peer, site)
            return lambda: comm.recv(buf, peer, site)
        if op.mesh_shape() != comm.mesh:
            raise CompileError(
                f"'{op.name}' was compiled for the mesh {list(op.mesh_shape())}, but runs on {list(comm.mesh)}",
                site.location,
            )
        src, dst, axis = self.views[op.src], self.views[op.dst], op.mesh_axis.value.data
        p = {k: python_value(v) for k, v in op.properties.items() if k not in ("mesh", "mesh_axis")}
        if isinstance(op, buffer.AllReduceOp):
            return lambda: comm.all_reduce(src, dst, axis, p["reduction"], site)
        if isinstance(op, buffer.AllGatherOp):
            return lambda: comm.all_gather(src, dst, p["axis"], axis, site)
        if isinstance(op, buffer.ReduceScatterOp):
            return lambda: comm.reduce_scatter(src, dst, p["axis"], axis, p["reduction"], site)
        if isinstance(op, buffer.AllToAllOp):
            return lambda: comm.all_to_all(src, dst, p["split_axis"], p["concat_axis"], axis, site)
        if isinstance(op, buffer.BroadcastOp):
            return lambda: comm.broadcast(src, dst, p["root"], axis, site)
        if isinstance(op, buffer.ReduceOp):
            return lambda: comm.reduce(src, dst, p["root"], axis, p["reduction"], site)
        raise CompileError(f"the executor cannot run '{op.name}'", site.location)

    def feed(self, inputs: Sequence[Any]) -> None:
        """Copy one step's inputs (this device's pieces) into the arena."""
        if len(inputs) != len(self.inputs):
            raise ExecutionError(f"job '{self.name}' takes {len(self.inputs)} inputs, got {len(inputs)}")
        xp = self.xp
        if xp is np:
            threads.apply()  # the chosen BLAS pool size, even if the user's own numpy code changed it
        for (_, view), value in zip(self.inputs, inputs):
            view[...] = xp.asarray(value)

    def results(self) -> list[np.ndarray]:
        """Host copies of the step's outputs."""
        if self.xp is np:
            return [view.copy() for _, view in self.outputs]
        return [self.xp.asnumpy(view) for _, view in self.outputs]

    def __call__(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        self.feed(inputs)
        for step in self.steps:
            step()
        return self.results()


def finite_checked(step: Callable[[], None], op: buffer.KernelOp, outs: list[Any], xp: ModuleType) -> Callable[[], None]:
    """`step`, then a check that its floating-point outputs hold no NaN or inf (only built when asked for)."""
    floats = [out for out in outs if out.dtype.kind == "f"]
    kernel, where = op.kernel.data, source_location(op)

    def checked() -> None:
        step()
        for out in floats:
            if not bool(xp.isfinite(out).all()):
                what = "NaN" if bool(xp.isnan(out).any()) else "inf"
                raise ExecutionError(f"'{kernel}' produced {what} (flow.function_config().detect_anomaly is on)", where)

    return checked


def _located(run: Callable[[], None], op: buffer.KernelOp) -> Callable[[], None]:
    """`run`, with its DataError reported as an ExecutionError naming the op at the user's line."""

    def located() -> None:
        try:
            run()
        except kernels.DataError as err:
            where = source_location(op)
            raise ExecutionError(f"{op.kernel.data}: {err}", where) from None

    return located


def _dense_values(attr: DenseIntOrFPElementsAttr, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    values = np.asarray(attr.get_values(), dtype=dtype)
    return values.reshape(shape) if values.size == int(np.prod(shape)) else np.broadcast_to(values, shape).copy()
