"""The one interface between an executor and the other devices of its mesh.

An executor is bound to a `Communicator` when it is built; its collective steps
call these methods on arena views, in place, and nothing else in the runtime
talks to other devices (kernels never see a communicator: a rank-dependent
kernel is told its mesh coordinate when it is built). Implementations:
`irflow.runtime.inprocess` (N simulated devices in one process),
`irflow.runtime.mpi` (one MPI process per device) and `irflow.runtime.nccl`
(one MPI process per GPU, collectives through NCCL): the last two run the same
per-device programs unchanged.

Completion rule: a call's `dst` is written by the time the calling device runs
its next step. A blocking implementation (MPI) writes it before returning; the
in-process one writes it when the last member of the group has called, and its
scheduler does not run the caller's next step before then; NCCL enqueues it on
the stream the device's kernels run on, ahead of the next step's kernels.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

from irflow.dialects.mesh import mesh_coords, mesh_group
from irflow.errors import ExecutionError, SourceLocation

Array = Any
"""A numpy or cupy ndarray: a view of the device's arena or of a variable."""


@dataclass(frozen=True)
class Site:
    """Which op of the program makes a call, for the errors a disagreeing group raises."""

    op: str
    location: SourceLocation | None = None

    def __str__(self) -> str:
        return f"'{self.op}'" + (f" at {self.location}" if self.location else "")


class Communicator(ABC):
    """One device's view of the mesh: its rank, coordinates, and the collectives over a mesh axis."""

    def __init__(self, rank: int, mesh: Sequence[int]):
        size = 1
        for extent in mesh:
            size *= extent
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not on the mesh {list(mesh)} of {size} devices")
        self.rank = rank
        self.mesh = tuple(mesh)
        self.size = size
        self.coords = mesh_coords(rank, mesh)

    def group(self, mesh_axis: int) -> tuple[int, ...]:
        """The ranks a collective over `mesh_axis` involves, in coordinate order."""
        return mesh_group(self.rank, self.mesh, mesh_axis)

    @abstractmethod
    def all_reduce(self, src: Array, dst: Array, mesh_axis: int, reduction: str, site: Site) -> None:
        """dst = reduction of every src of the group."""

    @abstractmethod
    def all_gather(self, src: Array, dst: Array, axis: int, mesh_axis: int, site: Site) -> None:
        """dst = the group's srcs concatenated along `axis` in coordinate order."""

    @abstractmethod
    def reduce_scatter(self, src: Array, dst: Array, axis: int, mesh_axis: int, reduction: str, site: Site) -> None:
        """dst = this device's chunk along `axis` of the reduction of every src."""

    @abstractmethod
    def all_to_all(self, src: Array, dst: Array, split_axis: int, concat_axis: int, mesh_axis: int, site: Site) -> None:
        """Chunk k of src along `split_axis` goes to coordinate k; dst concatenates what arrives along `concat_axis`."""

    @abstractmethod
    def broadcast(self, src: Array, dst: Array, root: int, mesh_axis: int, site: Site) -> None:
        """dst = src of the group's device at coordinate `root`."""

    @abstractmethod
    def reduce(self, src: Array, dst: Array, root: int, mesh_axis: int, reduction: str, site: Site) -> None:
        """The root's dst = reduction of every src; other devices' dst is left alone."""

    @abstractmethod
    def send(self, src: Array, peer: int, site: Site) -> None:
        """Rank `peer` receives src (it calls recv with this rank as its peer)."""

    @abstractmethod
    def recv(self, dst: Array, peer: int, site: Site) -> None:
        """dst = what rank `peer` sends."""

    @abstractmethod
    def exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> None:
        """Point-to-point transfers done together: each `(peer, src)` of `sends` fills the matching
        `(rank, dst)` of the peer's `recvs`, pairs matched in order. Every rank of `group` (ranks of
        this mesh, including this one) calls it, possibly with nothing to send or receive."""

    def gather_rows(self, src: Array, dst: Array, rows: Sequence[int], mesh_axis: int, site: Site) -> Callable[[], None]:
        """The step of an all_gather of each device's own rows (OneFlow's uneven gather, docs/dynamic.md): dst
        gets the group's srcs one after another along axis 0, coordinate k's `rows[k]` rows.  One exchange of
        the devices' rows, the same on every backend, then this device's own rows copied in; its pairs are
        fixed when the step is made (once per variant of sizes), so a step makes no objects of its own."""
        group = self.group(mesh_axis)
        starts = [sum(rows[:k]) for k in range(len(group))]
        me = group.index(self.rank)
        sends = [(peer, src) for peer in group if peer != self.rank and rows[me]]
        recvs = [(peer, dst[a : a + n]) for peer, a, n in zip(group, starts, rows) if peer != self.rank and n]
        exchange = self.prepared_exchange(sends, recvs, group, site)
        mine = dst[starts[me] : starts[me] + rows[me]]

        def step() -> None:
            exchange()
            mine[...] = src

        return step

    def prepared_exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> Callable[[], None]:
        """`exchange` with its pairs fixed, as a step (a backend may prepare what it can once)."""
        return partial(self.exchange, sends, recvs, group, site)

    @abstractmethod
    def subgroup(self, members: Sequence[int], mesh: Sequence[int]) -> Communicator:
        """The communicator of this rank (one of `members`) on the mesh `mesh` made of `members` (row-major):
        collectives of ops placed on part of the devices. Every member asks for it, in the same order."""

    @abstractmethod
    def barrier(self) -> None:
        """Returns once every device of the mesh has called it."""


def contiguous(a: Array, what: str, site: Site) -> Array:
    """`a` itself, for a library that reads its bytes in place; a strided view is an error naming the op."""
    if not a.flags.c_contiguous:
        raise strided(what, site)
    return a


def strided(what: str, site: Site) -> ExecutionError:
    return ExecutionError(f"{what} in {site}: the buffer is not contiguous", site.location)


def stack_parts(xp: ModuleType, src: Array, out: Array, axis: int) -> None:
    """out[k] = chunk k of src along `axis` (out has the parts as its leading axis): what goes to coordinate k."""
    p = out.shape[0]
    moved = xp.moveaxis(src.reshape(*src.shape[:axis], p, src.shape[axis] // p, *src.shape[axis + 1 :]), axis, 0)
    xp.copyto(out, moved)


def unstack_parts(xp: ModuleType, stacked: Array, dst: Array, axis: int) -> None:
    """dst = the parts of `stacked` (its leading axis) concatenated along `axis`."""
    p = stacked.shape[0]
    shape = (*dst.shape[:axis], p, dst.shape[axis] // p, *dst.shape[axis + 1 :])
    xp.copyto(dst.reshape(shape), xp.moveaxis(stacked, 0, axis))
