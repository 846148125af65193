"""Compile a planned buffer.program into a flat list of closures over arena views.

Binding happens once: every buffer becomes a fixed view of the arena (or of a
variable in the store, or of a constant), every kernel a closure over those
views.  A step then copies the inputs in, runs the closures, and copies the
outputs out: nothing else is allocated.  The array module `xp` is numpy or
cupy; kernels see only it, and collectives go through the communicator the
executor is bound to (`irflow.runtime.communicator`), so the same program runs
on one device, on simulated devices and, later, under MPI.

A program with dynamic sizes (docs/dynamic.md) has buffers planned at their
bound and `buffer.cut` views of them at the step's actual sizes.  The ops that
touch a cut are bound per *variant*, one per distinct set of input sizes, made
on first use and kept: a variant's views are views of the same arena, and its
kernels take their scratch arrays from slabs made once at the bound, so no
step allocates array memory, whatever its sizes.

Kernels' transient scratch (what each run writes before reading it) is one
workspace per executor, shared by every kernel and sized by the largest need
(kernels/workspace.py): binding builds each kernel once to size it, then again
on it those that took scratch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache, partial
from types import ModuleType
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    MemRefType,
    Signedness,
)
from xdsl.ir import Attribute, Operation, SSAValue

from irflow.dialects import buffer
from irflow.dialects.mesh import local_region, mesh_group
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, hierarchy_of
from irflow.errors import CompileError, ExecutionError, source_location
from irflow.runtime import interrupts, kernels, threads
from irflow.runtime.kernels import algorithms, workspace
from irflow.runtime.attributes import python_value
from irflow.runtime.communicator import Communicator, Site
from irflow.runtime.sharding import Layout, transfer_steps
from irflow.runtime.variables import VariableStore

@cache  # a handful of element types; telling a float type apart prints it
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


MAX_VARIANTS = 256
"""Variants kept per executor; beyond it the oldest is rebuilt when its sizes come back."""


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
        # Dynamic sizes: where each comes from, the cuts in program order, and per op of the plan either
        # its step (static) or the op, bound per variant.
        self.dims: list[tuple[SSAValue, int, int, int]] = []  # (size value, input index, axis, bound)
        self.cuts: list[buffer.CutOp | buffer.SubviewOp] = []
        self.const_sizes: dict[SSAValue, int] = {}
        # Sizes made of others (a concatenation's, a reshape's, a slice's).
        self.derived: list[buffer.AddSizesOp | buffer.ScaleSizeOp | buffer.SliceSizeOp] = []
        # Sizes summed over devices (`buffer.sum_sizes`): the variant's key is then every rank's input sizes.
        self.summed: list[buffer.SumSizesOp] = []
        self.plan: list[Callable[[], None] | Any] = []
        self.scratch: dict[Any, _ScratchModule] = {}
        self.variants: dict[tuple[int, ...], tuple[list[Any], list[Any], list[Callable[[], None]]]] = {}
        # The kernels' transient scratch, one for all (kernels/workspace.py): each kernel is built once while it
        # sizes the workspace, and those that took scratch (`unsized`, by plan index) again on it.
        self.workspace = workspace.Workspace(xp)
        self.unsized: dict[int, tuple[buffer.KernelOp | buffer.CopyOp, Communicator | None]] = {}
        for op in program.body.block.ops:
            try:
                self.bind(op, store)
            except (LookupError, ValueError, TypeError) as e:
                raise CompileError(f"cannot build '{op.name}' for the {xp.__name__} backend: {e}", source_location(op)) from e
        self.inputs.sort(key=lambda p: p[0])
        self.outputs.sort(key=lambda p: p[0])
        # Variables a step writes before a kernel that may stop it, each with a copy made once to keep them in.
        self.kept = [(view, xp.empty_like(view)) for view in self.exposed(program)]
        bounds = tuple(bound for *_, bound in self.dims) * (self.comm.size if self.summed else 1)
        if self.cuts:  # the bound's variant: it sizes every scratch slab, and its errors are compile errors
            self.variant(bounds)
        self.workspace.allocate()
        for index, (op, comm) in self.unsized.items():
            self.plan[index] = self.step(op, self.views, xp, comm)
        if self.cuts:  # built again, on the workspace
            self.variants.clear()
            self.input_views, self.output_views, self.steps = self.variant(bounds)
        else:
            self.input_views = [v for _, v in self.inputs]
            self.output_views = [v for _, v in self.outputs]
            self.steps = list(self.plan)

    def exposed(self, program: buffer.ProgramOp) -> list[Any]:
        """The variables a step writes before a kernel that may stop it: one that checks its data (a label
        out of range), or with `check_finite` any kernel, checked after it wrote its outputs. A forward
        `job.assign` (batch normalization's moving statistics) comes before such a check, and a failed
        step must leave every variable as it was; the optimizer's updates usually come after all of them."""
        written: dict[SSAValue, None] = {}
        exposed: dict[SSAValue, None] = {}
        for op in program.body.block.ops:
            writes = dict.fromkeys(v for v in _writes(op) if isinstance(v.owner, buffer.VariableOp))
            if self.check_finite:
                written.update(writes)
            if isinstance(op, buffer.KernelOp) and (self.check_finite or _checks_data(op)):
                exposed.update(written)
            written.update(writes)
        return [self.views[v] for v in exposed]

    def keep(self) -> None:
        """Before a step: copy the variables it could leave half-changed (`kept`) aside."""
        for view, copy in self.kept:
            self.xp.copyto(copy, view)

    def restore(self) -> None:
        """The step failed: put back the variables `keep` copied aside, as if it never ran."""
        for view, copy in self.kept:
            self.xp.copyto(view, copy)

    def is_dynamic(self, op: Any) -> bool:
        return any(isinstance(v.owner, (buffer.CutOp, buffer.SubviewOp)) for v in op.operands) or isinstance(
            op, (buffer.AssertSameSizeOp, buffer.StoreSizeOp)
        )

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
        if isinstance(op, buffer.ConstSizeOp):
            self.const_sizes[op.res] = op.value.value.data
        elif isinstance(op, buffer.InputDimOp):
            index, axis = op.index.value.data, op.axis.value.data
            self.dims.append((op.res, index, axis, -1))
        elif isinstance(op, buffer.SumSizesOp):
            mesh = tuple(int(d) for d in op.mesh.get_values())
            if self.comm is None or mesh != self.comm.mesh:
                where = list(self.comm.mesh) if self.comm else "one device"
                raise CompileError(f"'{op.name}' sums sizes over the mesh {list(mesh)}, but runs on {where}", source_location(op))
            self.summed.append(op)
        elif isinstance(op, (buffer.AddSizesOp, buffer.ScaleSizeOp, buffer.SliceSizeOp)):
            self.derived.append(op)
        elif isinstance(op, buffer.SubviewOp):
            self.cuts.append(op)
        elif isinstance(op, buffer.CutOp):
            self.cuts.append(op)
            dynamic = [a for a, d in enumerate(op.res.type.get_shape()) if d < 0]
            bounds = dict(zip(op.sizes, (op.buf.type.get_shape()[a] for a in dynamic)))
            self.dims = [(v, i, a, bounds.get(v, b) if b < 0 else b) for v, i, a, b in self.dims]
        elif isinstance(op, (buffer.InputOp, buffer.OutputOp)) and isinstance(op.buf.owner, buffer.CutOp):
            (self.inputs if isinstance(op, buffer.InputOp) else self.outputs).append((op.index.value.data, op.buf))
        elif isinstance(op, buffer.StoreSizeOp) and not op.sizes:  # a count of static axes only: a constant
            self.plan.append(partial(self.views[op.out].fill, op.factor.value.data))
        elif self.is_dynamic(op):
            self.plan.append(op)
        elif isinstance(op, buffer.ArenaOp):
            size, alignment = op.size.value.data, op.alignment.value.data
            self.arena = workspace.aligned(partial(xp.zeros, dtype=np.uint8), size, alignment)
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
        elif isinstance(op, (buffer.KernelOp, buffer.CopyOp)):
            run = self.step(op, self.views, xp, comm)
            if run is None:
                self.unsized[len(self.plan)] = (op, comm)
            self.plan.append(run)
        elif isinstance(op, (buffer.CollectiveOp, buffer.PointToPointOp)):
            self.plan.append(self.collective(op, comm))
        elif isinstance(op, buffer.TransferOp):
            self.plan.extend(self.transfer(op))
        else:
            raise CompileError(f"the executor cannot run '{op.name}'", source_location(op))

    def step(
        self, op: buffer.KernelOp | buffer.CopyOp, views: dict[SSAValue, Any], xp: Any, comm: Communicator | None
    ) -> Callable[[], None] | None:
        """The run of a kernel or copy over `views`; `xp` is the array module the kernel is built with,
        `comm` the communicator of the devices the op runs on. None while the workspace is sized, for a
        kernel that took scratch: it is built again once the workspace is made."""
        if isinstance(op, buffer.CopyOp):
            src, dst, copyto = views[op.src], views[op.dst], self.xp.copyto
            return lambda: copyto(dst, src.reshape(dst.shape))
        factory = kernels.get_kernel(op.kernel.data)
        attrs = {k: python_value(v) for k, v in op.parameters().items()}
        if "mesh_axis" in attrs:  # a rank-dependent kernel: told this device's coordinate, never the communicator
            attrs["coordinate"] = comm.coords[attrs["mesh_axis"]] if comm else 0
        if "layout" in attrs:  # a kernel reading a piece of a split value: told how much of it is real here
            shape = attrs["logical_shape"]
            attrs["valid"] = local_region(shape, attrs["layout"], comm.mesh, comm.coords).valid if comm else shape
        ins = [views[v] for v in op.ins]
        outs = [views[v] for v in op.outs]
        with workspace.building(workspace.Claim(self.workspace)) as claim:
            run = factory(xp, attrs, ins, outs)
        if claim.took and self.workspace.sizing:
            return None  # its own arrays go now: only the largest kernel's need stays
        run = _located(run, op, comm) if _checks_data(op) else run
        return finite_checked(run, op, without_padding(op, outs, comm), self.xp) if self.check_finite else run

    # ------------------------------------------------------------- dynamic sizes

    def sizes_of(self, inputs: Sequence[Any]) -> tuple[int, ...]:
        """The step's actual sizes, one per `buffer.input_dim`, each checked against its bound."""
        sizes = []
        for _, index, axis, bound in self.dims:
            value = inputs[index]
            if isinstance(value, tuple):  # a tensor list: its instances' rows one after another
                shape = (sum(a.shape[0] for a in value), *value[0].shape[1:]) if value else ()
            else:
                shape = getattr(value, "shape", ())
            size = shape[axis] if axis < len(shape) else -1
            if not 0 <= size <= bound:
                raise ExecutionError(
                    f"job '{self.name}' input {index}: axis {axis} may have at most {bound} elements "
                    f"(its bound), given shape {tuple(shape)}"
                )
            sizes.append(size)
        return tuple(sizes)

    def variant(self, sizes: tuple[int, ...]) -> tuple[list[Any], list[Any], list[Callable[[], None]]]:
        """The inputs' views, the outputs' views and the steps at these actual sizes (built on first use)."""
        found = self.variants.get(sizes)
        if found is not None:
            return found
        size = self.size_on(sizes)
        rank = self.comm.rank if self.summed else 0  # type: ignore[union-attr]
        sizes_known = (*self.const_sizes, *(v for v, *_ in self.dims), *(s.res for s in (*self.summed, *self.derived)))
        known = {v: size(v, rank) for v in sizes_known}
        views = dict(self.views)
        for cut in self.cuts:
            if isinstance(cut, buffer.SubviewOp):  # a part along one axis of a cut, in program order after it
                at, axis = known[cut.offset], cut.axis.value.data
                part = slice(at, at + known[cut.size])
                views[cut.res] = views[cut.src][(slice(None),) * axis + (part,)]
                continue
            base = views[cut.buf]
            given = iter(known[v] for v in cut.sizes)
            shape = tuple(next(given) if d < 0 else d for d in cut.res.type.get_shape())
            views[cut.res] = base.reshape(-1)[: math.prod(shape)].reshape(shape)
        steps: list[Callable[[], None]] = []
        for entry in self.plan:
            if not isinstance(entry, Operation):
                steps.append(entry)
            elif isinstance(entry, buffer.AssertSameSizeOp):
                found_sizes = [known[v] for v in entry.sizes]
                if len(set(found_sizes)) > 1:
                    # each device's sizes are its own in the mirrored view on several: name the one at fault
                    device = f" on device {self.comm.rank}" if self.comm is not None and self.comm.size > 1 else ""
                    given = " and ".join(map(str, found_sizes))
                    raise ExecutionError(
                        f"{entry.what.data} must have the same size{device}, given {given}",
                        source_location(entry),
                    )
            elif isinstance(entry, buffer.StoreSizeOp):
                count = entry.factor.value.data * math.prod(known[v] for v in entry.sizes)
                steps.append(partial(views[entry.out].fill, count))
            elif isinstance(entry, buffer.AllGatherOp):
                steps.append(self.gather_rows(entry, views, size))
            elif isinstance(entry, (buffer.CollectiveOp, buffer.PointToPointOp, buffer.TransferOp)):
                raise CompileError(f"'{entry.name}' cannot move each device's own sizes", source_location(entry))
            else:
                scratch = self.scratch.setdefault(entry, _ScratchModule(self.xp))
                scratch.building()
                try:
                    # heuristics only: a measured choice is per size, and each new size would be measured again
                    with algorithms.search(False), algorithms.varying_sizes():
                        # None while the workspace is sized: the bound's variant is then built again
                        steps.append(self.step(entry, views, scratch, self.placed(entry)[1]))  # type: ignore[arg-type]
                except (LookupError, ValueError, TypeError) as e:
                    raise CompileError(f"cannot build '{entry.name}' at sizes {list(sizes)}: {e}", source_location(entry)) from e
                finally:
                    scratch.seal()
        ins = [views[v] if isinstance(v, SSAValue) else v for _, v in self.inputs]
        outs = [views[v] if isinstance(v, SSAValue) else v for _, v in self.outputs]
        if len(self.variants) >= MAX_VARIANTS:
            del self.variants[next(iter(self.variants))]
        self.variants[sizes] = found = (ins, outs, steps)
        return found

    def size_on(self, key: tuple[int, ...]) -> Callable[[SSAValue, int], int]:
        """A size value's value on program rank r in the variant `key`: this rank's input sizes, or every
        rank's one after another when the program sums sizes over devices (`buffer.sum_sizes`)."""
        where = {v: i for i, (v, *_) in enumerate(self.dims)}
        stride = len(self.dims) if self.summed else 0

        def size(v: SSAValue, r: int) -> int:
            if v in self.const_sizes:
                return self.const_sizes[v]
            if v in where:
                return key[r * stride + where[v]]
            op = v.owner
            if isinstance(op, buffer.AddSizesOp):
                return op.constant.value.data + sum(size(s, r) for s in op.sizes)
            if isinstance(op, buffer.SliceSizeOp):
                return op.of(size(op.size, r))
            if isinstance(op, buffer.ScaleSizeOp):  # each device's own sizes in the mirrored view: name the one
                on = "" if self.comm is None or self.comm.size == 1 else f" on device {r if self.summed else self.comm.rank}"
                return scaled(op, size(op.size, r), on)
            assert isinstance(op, buffer.SumSizesOp) and self.comm is not None
            return sum(size(op.size, q) for q in mesh_group(r, self.comm.mesh, op.mesh_axis.value.data))

        return size

    def gather_rows(
        self, op: buffer.AllGatherOp, views: dict[SSAValue, Any], size: Callable[[SSAValue, int], int]
    ) -> Callable[[], None]:
        """An all_gather of each device's own rows, every device's row count read from the variant."""
        cut, comm = op.src.owner, self.placed(op)[1]
        assert isinstance(cut, buffer.CutOp) and comm is not None
        axis, site = op.mesh_axis.value.data, Site(op.name, source_location(op))
        rows = [size(cut.sizes[0], q) for q in comm.group(axis)]
        src, dst = views[op.src], views[op.dst]
        return comm.gather_rows(src, dst, rows, axis, site)

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

    def feed(self, inputs: Sequence[Any], sizes: tuple[int, ...] | None = None) -> None:
        """Copy one step's inputs (this device's pieces) into the arena; with dynamic sizes, pick their variant
        (`sizes`: every rank's input sizes, one after another, given where the program sums them over devices)."""
        if len(inputs) != len(self.inputs):
            raise ExecutionError(f"job '{self.name}' takes {len(self.inputs)} inputs, got {len(inputs)}")
        xp = self.xp
        if self.cuts:
            if self.summed and sizes is None:
                raise ExecutionError(f"job '{self.name}' sums sizes over devices: it needs every device's input sizes")
            self.input_views, self.output_views, self.steps = self.variant(sizes if self.summed else self.sizes_of(inputs))
        if xp is np:
            threads.apply()  # BLAS on one thread, even if the user's own numpy code changed it
        for view, value in zip(self.input_views, inputs):
            if isinstance(value, tuple):  # a tensor list: each instance into its rows
                start = 0
                for instance in value:
                    view[start : start + instance.shape[0]] = xp.asarray(instance)
                    start += instance.shape[0]
            else:
                view[...] = xp.asarray(value)

    def results(self) -> list[np.ndarray]:
        """Host copies of the step's outputs (at their actual shapes)."""
        if self.xp is np:
            return [view.copy() for view in self.output_views]
        return [self.xp.asnumpy(view) for view in self.output_views]

    def __call__(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        self.feed(inputs)
        whole_step([self], self.run_steps)
        return self.results()

    def run_steps(self) -> None:
        """One step over the fed inputs."""
        for step in self.steps:
            step()


def scaled(op: buffer.ScaleSizeOp, size: int, device: str) -> int:
    """`size * multiplier / divisor`, or the step's located error where it is not whole."""
    multiplied, divisor = size * op.multiplier.value.data, op.divisor.value.data
    if multiplied % divisor:
        raise ExecutionError(f"{op.what.data}: {size} rows do not make whole ones{device}", source_location(op))
    return multiplied // divisor


def whole_step(executors: Sequence[Executor], run: Callable[[], None]) -> None:
    """`run` (the executors' step) as a whole: Ctrl-C waits for its end, and where it fails every
    executor puts back the variables its `keep` copied aside."""

    def guarded() -> None:
        for executor in executors:
            executor.keep()
        try:
            run()
        except BaseException:
            for executor in executors:
                executor.restore()
            raise

    interrupts.deferring(guarded)


def _writes(op: Operation) -> Sequence[SSAValue]:
    """The buffers `op` writes: a kernel's outputs, a copy's destination."""
    if isinstance(op, buffer.KernelOp):
        return op.outs
    if isinstance(op, buffer.CopyOp):
        return (op.dst,)
    return ()


def row_sources(program: buffer.ProgramOp) -> list[int | None]:
    """Per output, the input whose actual rows (axis 0) it has, if its axis 0 is that input's dynamic axis 0."""
    sources: list[tuple[int, int | None]] = []
    for op in program.body.block.ops:
        if not isinstance(op, buffer.OutputOp):
            continue
        source = None
        cut = op.buf.owner
        if isinstance(cut, buffer.CutOp) and cut.res.type.get_shape()[0] < 0:
            dim = cut.sizes[0].owner
            if isinstance(dim, buffer.InputDimOp) and dim.axis.value.data == 0:
                source = dim.index.value.data
        sources.append((op.index.value.data, source))
    return [source for _, source in sorted(sources)]


class _ScratchModule:
    """The array module a kernel on cut views is built with: `xp`, except that the arrays it makes while
    it is built (`empty`, `zeros`, `full`, `arange`, `asarray`) are views of slabs made when it is first
    built, at the bound (its transient scratch comes from the executor's workspace, sized with the bound's
    variant).  A variant's kernel asks for the same arrays, never larger, in the same order;
    each lays out the batch first, so a variant's arrays are prefixes of the bound's, and what a kernel
    fills once at build (padding borders, row offsets) is the same in every variant.  Once built
    (`sealed`), calls go to `xp` itself, as in a kernel built on static views."""

    def __init__(self, xp: ModuleType):
        self._xp = xp
        self._slabs: list[Any] = []
        self._next = 0
        self._sealed = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._xp, name)
        setattr(self, name, value)  # looked up once: kernels call through it every step
        return value

    def building(self) -> None:
        self._next, self._sealed = 0, False

    def seal(self) -> None:
        self._sealed = True

    def empty(self, shape: Any, dtype: Any = float, order: str = "C") -> Any:
        if self._sealed:
            return self._xp.empty(shape, dtype, order)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        dtype = np.dtype(dtype)
        size = math.prod(shape) * dtype.itemsize
        if self._next == len(self._slabs):
            self._slabs.append(self._xp.empty(max(size, 1), np.uint8))
        slab = self._slabs[self._next]
        self._next += 1
        if size > slab.size:
            raise ValueError(f"scratch of {size} bytes exceeds the {slab.size} made at the bound")
        return slab[:size].view(dtype).reshape(shape)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> Any:
        if self._sealed:
            return self._xp.full(shape, fill_value, dtype, order)
        out = self.empty(shape, np.result_type(fill_value) if dtype is None else dtype)
        out.fill(fill_value)
        return out

    def zeros(self, shape: Any, dtype: Any = float, order: str = "C") -> Any:
        return self._xp.zeros(shape, dtype, order) if self._sealed else self.full(shape, 0, dtype)

    def arange(self, *args: Any, dtype: Any = None) -> Any:
        if self._sealed:
            return self._xp.arange(*args, dtype=dtype)
        return self.asarray(self._xp.arange(*args, dtype=dtype))

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        if self._sealed:
            return self._xp.asarray(a, dtype=dtype)
        values = self._xp.asarray(a, dtype=dtype)
        out = self.empty(values.shape, values.dtype)
        out[...] = values
        return out



def without_padding(op: buffer.KernelOp, outs: list[Any], comm: Communicator | None) -> list[Any]:
    """The entries of `outs` that hold the value: the piece of an uneven split ends in padding, computed from
    zeros, where log or rsqrt give inf that no logical entry holds."""
    shape, sbp = op.attributes.get("logical_shape"), op.attributes.get("sbp")
    if shape is None or not isinstance(sbp, NdSbpAttr) or comm is None:
        return outs
    region = local_region(python_value(shape), sbp, comm.mesh, comm.coords)
    return [out[tuple(slice(0, n) for n in region.valid)] for out in outs]


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


def _checks_data(op: buffer.KernelOp) -> bool:
    """Whether `op`'s kernel may stop a step with a DataError, for the dtype it writes (every kernel writes
    an output: KernelOp's verifier)."""
    return kernels.checks_data(op.kernel.data, shape_dtype(op.outs[0].type)[1])


def _located(run: Callable[[], None], op: buffer.KernelOp, comm: Communicator | None) -> Callable[[], None]:
    """`run`, with its DataError reported as an ExecutionError naming the op at the user's line and, on
    several devices, the device: a kernel sees that device's part of the data, and its positions are in it."""
    device = f" on device {comm.rank} of {comm.size} (positions within its part)" if comm and comm.size > 1 else ""

    def located() -> None:
        try:
            run()
        except kernels.DataError as err:
            where = source_location(op)
            raise ExecutionError(f"{op.kernel.data}{device}: {err}", where) from None

    return located


def _dense_values(attr: DenseIntOrFPElementsAttr, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    values = np.asarray(attr.get_values(), dtype=dtype)
    return values.reshape(shape) if values.size == int(np.prod(shape)) else np.broadcast_to(values, shape).copy()
