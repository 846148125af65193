"""GPUs as MPI processes: NCCL collectives on cupy arrays, for `mpiexec -n N python train.py` on GPUs.

`irflow.runtime.mpi.join` picks this communicator when the job's target is
the GPU (cupy usable) and mpiexec started the run. Each rank drives one GPU:
its rank among the ranks of its host, modulo the host's GPUs. MPI starts
NCCL: for the world and for every mesh axis, the group's first member makes
an NCCL unique id and broadcasts it over the group's MPI communicator, and the
group opens its NCCL communicator with it (a 1-D mesh's only axis is the world).

Collectives are enqueued on cupy's current stream, the one the device's
kernels run on, on the arena views in place (cupy.cuda.nccl's pointer calls):
they run after the kernels before them and before those after, and the host
does not wait. A collective over a non-leading tensor axis packs through a
scratch array made once per shape; all_to_all is a group of NCCL send/recv
pairs. The host-side helpers (reading variables, the start-up agreement,
barriers, abort) go over MPI, on host copies.

Each call records a CUDA event after itself; MPI's watchdog looks at the
oldest one not yet passed and, past IRFLOW_MPI_TIMEOUT, fails the rank naming
that op, as for MPI.

Not yet run on a GPU: tests/mpi/test_nccl.py runs this code on a stand-in for
cupy.cuda.nccl built on the in-process engine, and its GPU tests skip where
there is no GPU and cupy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from irflow.errors import ExecutionError
from irflow.runtime.communicator import Array, Communicator, Site, contiguous, stack_parts, unstack_parts
from irflow.runtime.mpi import Queued

if TYPE_CHECKING:
    from irflow.runtime.mpi import MPICommunicator

_TYPES = {
    "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
    "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
    "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
}  # fmt: skip
_OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}


def address(a: Array) -> int:
    """The device address of a cupy array's first element (any array with the CUDA array interface)."""
    return a.__cuda_array_interface__["data"][0]


class NCCLCommunicator(Communicator):
    """This process's GPU: collectives over a mesh axis run on that axis's NCCL communicator.

    `host` is the rank's MPI communicator (it checked the world size); `nccl`
    and `xp` default to cupy.cuda.nccl and cupy.
    """

    def __init__(
        self, host: MPICommunicator, nccl: Any = None, xp: ModuleType | None = None, device: int | None = None
    ):
        if xp is None:
            import cupy as xp
        if nccl is None:
            from cupy.cuda import nccl
        if not getattr(nccl, "available", True):  # cupy's flag: False when it could not load NCCL
            raise ExecutionError(
                f"rank {host.rank}: the job runs on GPUs under mpiexec, which needs NCCL, and cupy could not load it "
                "(install NCCL where cupy finds it: see cupy's installation guide)"
            )
        super().__init__(host.rank, host.mesh)
        self.host, self.nccl, self.xp = host, nccl, xp
        if device is None:  # a subgroup keeps its parent's GPU
            on_host = host.world.Split_type(host.MPI.COMM_TYPE_SHARED)
            device = on_host.Get_rank() % xp.cuda.runtime.getDeviceCount()
            on_host.Free()
        self.device = device
        xp.cuda.Device(self.device).use()
        self.world = self._open(host.world)
        # The axis communicator's rank is the coordinate on that axis (MPI's Split keyed it so).
        self.axes = [self.world] if len(self.mesh) == 1 else [self._open(comm) for comm in host.axes]
        self._types = {np.dtype(name): getattr(nccl, const) for name, const in _TYPES.items()}
        self._ops = {name: getattr(nccl, const) for name, const in _OPS.items()}
        self._scratch: dict[tuple[Any, ...], Array] = {}
        self._queued = host.watchdog.queued
        self._events: list[Any] = []  # events already passed, recorded again by later calls
        self._subgroups: dict[tuple[tuple[int, ...], tuple[int, ...]], NCCLCommunicator] = {}

    def _open(self, comm: Any) -> Any:
        """The NCCL communicator of the MPI communicator `comm`'s ranks, in the same order."""
        # The id goes as get_unique_id made it: a tuple of ints in older cupy, bytes in newer.
        uid = comm.bcast(self.nccl.get_unique_id() if comm.Get_rank() == 0 else None, root=0)
        return self.nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())

    # ------------------------------------------------------------- enqueuing

    def _enqueue(self, what: str, site: Site, call: Callable[..., Any], *args: Any) -> None:
        """`call(*args, stream)` on the current stream, watched until the event recorded after it has passed."""
        queued = self._queued
        while queued and queued[0].done():
            self._events.append(queued.popleft().event)
        entry = Queued(what, site, time.monotonic())
        queued.append(entry)
        stream = self.xp.cuda.get_current_stream()
        try:
            call(*args, stream.ptr)
        except self.nccl.NcclError as e:
            queued.remove(entry)
            raise ExecutionError(f"rank {self.rank}: {what} in {site}: NCCL failed: {e}", site.location) from e
        event = self._events.pop() if self._events else self.xp.cuda.Event(disable_timing=True)
        event.record(stream)
        entry.event = event

    def _type(self, a: Array, what: str, site: Site) -> int:
        kind = self._types.get(np.dtype(a.dtype))
        if kind is None:
            raise ExecutionError(f"{what} in {site}: NCCL has no type for {a.dtype} arrays", site.location)
        return kind

    def _scratch_for(self, key: tuple[Any, ...], shape: tuple[int, ...], dtype: Any) -> Array:
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = self.xp.empty(shape, dtype)
        return buf

    # ------------------------------------------------------------- collectives

    def all_reduce(self, src: Array, dst: Array, mesh_axis: int, reduction: str, site: Site) -> None:
        send, recv = contiguous(src, "all_reduce", site), contiguous(dst, "all_reduce", site)
        self._enqueue(
            "all_reduce", site, self.axes[mesh_axis].allReduce, address(send), address(recv), dst.size,
            self._type(dst, "all_reduce", site), self._ops[reduction],
        )  # fmt: skip

    def all_gather(self, src: Array, dst: Array, axis: int, mesh_axis: int, site: Site) -> None:
        p = self.mesh[mesh_axis]
        send = contiguous(src, "all_gather", site)
        recv = contiguous(dst, "all_gather", site) if axis == 0 else (
            self._scratch_for(("all_gather", src.shape, src.dtype), (p, *src.shape), src.dtype))
        kind = self._type(src, "all_gather", site)
        self._enqueue("all_gather", site, self.axes[mesh_axis].allGather, address(send), address(recv), src.size, kind)
        if axis != 0:
            unstack_parts(self.xp, recv, dst, axis)

    def reduce_scatter(self, src: Array, dst: Array, axis: int, mesh_axis: int, reduction: str, site: Site) -> None:
        p = self.mesh[mesh_axis]
        if axis == 0:
            send = contiguous(src, "reduce_scatter", site)
        else:
            send = self._scratch_for(("reduce_scatter", src.shape, src.dtype), (p, *dst.shape), src.dtype)
            stack_parts(self.xp, src, send, axis)
        recv = contiguous(dst, "reduce_scatter", site)
        self._enqueue(
            "reduce_scatter", site, self.axes[mesh_axis].reduceScatter, address(send), address(recv), dst.size,
            self._type(dst, "reduce_scatter", site), self._ops[reduction],
        )  # fmt: skip

    def all_to_all(self, src: Array, dst: Array, split_axis: int, concat_axis: int, mesh_axis: int, site: Site) -> None:
        p = self.mesh[mesh_axis]
        chunk = list(src.shape)
        chunk[split_axis] //= p
        # Along the leading axis the chunks already lie one after another: no packing then.
        if split_axis == 0:
            packed = contiguous(src, "all_to_all", site).reshape(p, *chunk)
        else:
            packed = self._scratch_for(("all_to_all_in", src.shape, src.dtype), (p, *chunk), src.dtype)
            stack_parts(self.xp, src, packed, split_axis)
        if concat_axis == 0:
            received = contiguous(dst, "all_to_all", site).reshape(p, *chunk)
        else:
            received = self._scratch_for(("all_to_all_out", src.shape, src.dtype), (p, *chunk), src.dtype)
        kind = self._type(src, "all_to_all", site)
        self._enqueue("all_to_all", site, self._exchange, mesh_axis, packed, received, kind)
        if concat_axis != 0:
            unstack_parts(self.xp, received, dst, concat_axis)

    def _exchange(self, mesh_axis: int, packed: Array, received: Array, kind: int, stream: int) -> None:
        """received[k] = what coordinate k's packed[me] holds: one NCCL group of send/recv pairs."""
        comm, me, count = self.axes[mesh_axis], self.coords[mesh_axis], packed[0].size
        self.xp.copyto(received[me], packed[me])
        self.nccl.groupStart()
        try:
            for peer in range(self.mesh[mesh_axis]):
                if peer != me:
                    comm.send(address(packed[peer]), count, kind, peer, stream)
                    comm.recv(address(received[peer]), count, kind, peer, stream)
        finally:
            self.nccl.groupEnd()

    def broadcast(self, src: Array, dst: Array, root: int, mesh_axis: int, site: Site) -> None:
        recv = contiguous(dst, "broadcast", site)
        send = contiguous(src, "broadcast", site) if self.coords[mesh_axis] == root else recv
        self._enqueue(
            "broadcast", site, self.axes[mesh_axis].broadcast, address(send), address(recv), dst.size,
            self._type(dst, "broadcast", site), root,
        )  # fmt: skip

    def reduce(self, src: Array, dst: Array, root: int, mesh_axis: int, reduction: str, site: Site) -> None:
        """NCCL writes only the root's dst (the others' address is passed and ignored)."""
        send, recv = contiguous(src, "reduce", site), contiguous(dst, "reduce", site)
        self._enqueue(
            "reduce", site, self.axes[mesh_axis].reduce, address(send), address(recv), src.size,
            self._type(src, "reduce", site), self._ops[reduction], root,
        )  # fmt: skip

    def send(self, src: Array, peer: int, site: Site) -> None:
        send = contiguous(src, "send", site)
        self._enqueue("send", site, self.world.send, address(send), src.size, self._type(src, "send", site), peer)

    def recv(self, dst: Array, peer: int, site: Site) -> None:
        recv = contiguous(dst, "recv", site)
        self._enqueue("recv", site, self.world.recv, address(recv), dst.size, self._type(dst, "recv", site), peer)

    def exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> None:
        """One NCCL group of the world's send/recv pairs (never to itself: a transfer copies what it keeps)."""
        # (address, count, NCCL type, peer) of each, checked before anything is enqueued
        pairs = [
            [(address(contiguous(a, "exchange", site)), a.size, self._type(a, "exchange", site), peer) for peer, a in side]
            for side in (sends, recvs)
        ]
        self._enqueue("exchange", site, self._pairs, *pairs)

    def _pairs(self, sends: list[tuple[int, int, int, int]], recvs: list[tuple[int, int, int, int]], stream: int) -> None:
        self.nccl.groupStart()
        try:
            for ptr, count, kind, peer in sends:
                self.world.send(ptr, count, kind, peer, stream)
            for ptr, count, kind, peer in recvs:
                self.world.recv(ptr, count, kind, peer, stream)
        finally:
            self.nccl.groupEnd()

    def subgroup(self, members: Sequence[int], mesh: Sequence[int]) -> NCCLCommunicator:
        """The NCCL communicators of `members` (opened once, by the members only), on this rank's GPU."""
        key = (tuple(members), tuple(mesh))
        sub = self._subgroups.get(key)
        if sub is None:
            sub = self._subgroups[key] = NCCLCommunicator(self.host.subgroup(members, mesh), self.nccl, self.xp, self.device)
        return sub

    def barrier(self) -> None:
        self.host.barrier()

    # ------------------------------------------------------------- host-side helpers, over MPI

    def gather_all(self, piece: np.ndarray, site: Site) -> list[np.ndarray]:
        return self.host.gather_all(piece, site)

    def agree(self, value: Any) -> list[Any]:
        return self.host.agree(value)

    def abort(self, code: int = 1) -> None:
        self.host.abort(code)
