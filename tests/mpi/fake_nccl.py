"""Stand-ins for what irflow's NCCL communicator calls: cupy.cuda.nccl, cupy, and the rank's MPI communicator.

Every rank is a thread of this process. The stand-in NCCL communicator turns
each pointer call back into numpy views of the memory it names and performs
it on the in-process engine (`InProcessGroup`, the oracle the MPI ranks are
checked against), once every member of its clique has called; send/recv go
through a mailbox per pair of ranks. Arrays are numpy arrays that show the
CUDA array interface, so the communicator takes their addresses as it takes
cupy's. Nothing here is a GPU: what it checks is the communicator's own
bookkeeping (which NCCL communicator, rank, count, type, buffer and root each
call names).
"""

from __future__ import annotations

import ctypes
import itertools
import queue
import threading
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from irflow.dialects.mesh import mesh_coords, mesh_group
from irflow.errors import ExecutionError
from irflow.runtime.communicator import Site
from irflow.runtime.inprocess import InProcessGroup
from irflow.runtime.mpi import Watchdog

WAIT_S = 20.0  # a stand-in wait longer than this is a test failure, not a hang


class DeviceArray(np.ndarray):
    """A numpy array that shows the CUDA array interface, as a cupy array does."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.__array_interface__


def device(a: np.ndarray) -> DeviceArray:
    return np.ascontiguousarray(a).view(DeviceArray)


# ----------------------------------------------------------------- cupy


class Stream:
    ptr = 0x5EED  # what every call must pass as its stream


class Event:
    """Every stand-in call has finished when it returns, so an event has passed once recorded."""

    made = 0

    def __init__(self, disable_timing: bool = False):
        Event.made += 1
        self.done = False

    def record(self, stream: Stream) -> None:
        assert stream.ptr == Stream.ptr
        self.done = True


class Cuda:
    def __init__(self, devices: int):
        self.runtime = SimpleNamespace(getDeviceCount=lambda: devices)
        self.used = threading.local()

    def Device(self, index: int) -> Any:  # noqa: N802 (cupy's name)
        return SimpleNamespace(use=lambda: setattr(self.used, "device", index))

    @staticmethod
    def get_current_stream() -> Stream:
        return Stream()

    Event = Event


def fake_cupy(devices: int = 2) -> SimpleNamespace:
    return SimpleNamespace(
        cuda=Cuda(devices),
        empty=lambda shape, dtype: np.empty(shape, dtype).view(DeviceArray),
        copyto=np.copyto,
        moveaxis=np.moveaxis,
    )


# ----------------------------------------------------------------- cupy.cuda.nccl

TYPES = {1: np.int8, 2: np.uint8, 3: np.int32, 4: np.uint32, 5: np.int64, 6: np.uint64, 7: np.float16,
         8: np.float32, 9: np.float64}  # fmt: skip
OPS = {0: "sum", 2: "max", 3: "min"}


class NcclError(RuntimeError):
    pass


class Clique:
    """The ranks that opened NCCL communicators with one unique id."""

    def __init__(self, size: int):
        self.size = size
        self.engine = InProcessGroup((size,))
        self.arrived = threading.Barrier(size, timeout=WAIT_S)
        self.failure: Exception | None = None
        self.mailbox: dict[tuple[int, int], queue.Queue] = {}
        self.lock = threading.Lock()

    def box(self, source: int, target: int) -> queue.Queue:
        with self.lock:
            return self.mailbox.setdefault((source, target), queue.Queue())


class FakeNccl:
    """The part of cupy.cuda.nccl the communicator uses, recording what it was asked."""

    NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32, NCCL_INT64, NCCL_UINT64 = 1, 2, 3, 4, 5, 6
    NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64 = 7, 8, 9
    NCCL_SUM, NCCL_MAX, NCCL_MIN = 0, 2, 3
    NcclError = NcclError
    available = True  # cupy's flag: False when it could not load NCCL

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.cliques: dict[tuple[int, ...], Clique] = {}
        self.opened: list[tuple[tuple[int, ...], int, int, int]] = []  # (unique id, size, rank, world rank)
        self.lock = threading.Lock()
        self.depth = threading.local()

        class NcclCommunicator(FakeCommunicator):
            nccl = self

        self.NcclCommunicator = NcclCommunicator

    def get_unique_id(self) -> tuple[int, ...]:
        n = next(self.ids)
        return (n,) + (0,) * 127

    def clique(self, uid: tuple[int, ...], size: int, rank: int) -> Clique:
        with self.lock:
            self.opened.append((uid, size, rank, int(threading.current_thread().name)))
            return self.cliques.setdefault(uid, Clique(size))

    def groupStart(self) -> None:  # noqa: N802 (cupy's name)
        self.depth.n = getattr(self.depth, "n", 0) + 1

    def groupEnd(self) -> None:  # noqa: N802
        if getattr(self.depth, "n", 0) < 1:
            raise NcclError("groupEnd without groupStart")
        self.depth.n -= 1


def view(address: int, count: int, datatype: int) -> np.ndarray:
    """The `count` elements of type `datatype` at `address`, as a numpy view (no copy)."""
    dtype = np.dtype(TYPES[datatype])
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype, count=count)


class FakeCommunicator:
    """One rank's NCCL communicator: each call waits for its clique and runs on the in-process engine."""

    nccl: FakeNccl

    def __init__(self, ndev: int, uid: tuple[int, ...], rank: int):
        assert len(uid) == 128 and 0 <= rank < ndev
        self.rank = rank
        self.clique = self.nccl.clique(uid, ndev, rank)

    def _collective(self, kind: str, src: np.ndarray, dst: np.ndarray, stream: int, **params: Any) -> None:
        assert stream == Stream.ptr, "NCCL calls go on the current stream"
        clique = self.clique
        getattr(clique.engine.communicator(self.rank), kind)(src, dst, mesh_axis=0, site=Site(f"nccl {kind}"), **params)
        self._wait()
        if self.rank == 0:
            try:
                clique.engine.resolve(set())
            except ExecutionError as e:
                clique.failure = e
                clique.engine.waiting.clear()
        self._wait()
        if clique.failure is not None:
            raise NcclError(str(clique.failure))

    def _wait(self) -> None:
        try:
            self.clique.arrived.wait()
        except threading.BrokenBarrierError:
            raise NcclError("a member of the clique never came") from None

    def allReduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int, stream: int) -> None:  # noqa: N802
        src, dst = view(sendbuf, count, datatype), view(recvbuf, count, datatype)
        self._collective("all_reduce", src, dst, stream, reduction=OPS[op])

    def allGather(self, sendbuf: int, recvbuf: int, count: int, datatype: int, stream: int) -> None:  # noqa: N802
        src, dst = view(sendbuf, count, datatype), view(recvbuf, count * self.clique.size, datatype)
        self._collective("all_gather", src, dst, stream, axis=0)

    def reduceScatter(self, sendbuf: int, recvbuf: int, recvcount: int, datatype: int, op: int, stream: int) -> None:  # noqa: N802
        src, dst = view(sendbuf, recvcount * self.clique.size, datatype), view(recvbuf, recvcount, datatype)
        self._collective("reduce_scatter", src, dst, stream, axis=0, reduction=OPS[op])

    def broadcast(self, sendbuff: int, recvbuff: int, count: int, datatype: int, root: int, stream: int) -> None:
        src, dst = view(sendbuff, count, datatype), view(recvbuff, count, datatype)
        self._collective("broadcast", src, dst, stream, root=root)

    def reduce(self, sendbuf: int, recvbuf: int, count: int, datatype: int, op: int, root: int, stream: int) -> None:
        src, dst = view(sendbuf, count, datatype), view(recvbuf, count, datatype)
        self._collective("reduce", src, dst, stream, root=root, reduction=OPS[op])

    def send(self, sendbuf: int, count: int, datatype: int, peer: int, stream: int) -> None:
        assert stream == Stream.ptr and peer != self.rank
        self.clique.box(self.rank, peer).put(view(sendbuf, count, datatype).copy())

    def recv(self, recvbuf: int, count: int, datatype: int, peer: int, stream: int) -> None:
        assert stream == Stream.ptr and peer != self.rank
        try:
            got = self.clique.box(peer, self.rank).get(timeout=WAIT_S)
        except queue.Empty:
            raise NcclError(f"rank {self.rank} waited for rank {peer}'s send") from None
        np.copyto(view(recvbuf, count, datatype), got)


# ----------------------------------------------------------------- the rank's MPI communicator


class Rendezvous:
    """Threads of one group exchanging Python objects (mpi4py's pickled bcast/allgather)."""

    def __init__(self, size: int):
        self.arrived = threading.Barrier(size, timeout=WAIT_S)
        self.slots: dict[int, Any] = {}


class ThreadComm:
    """The mpi4py calls the communicator makes, among the threads of one group; `rank` is the place in it."""

    def __init__(self, meeting: Rendezvous, rank: int, size: int, aborted: list[tuple[int, int]] | None = None):
        self.meeting, self.rank, self.size, self.aborted = meeting, rank, size, aborted

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self.allgather(obj)[root]

    def allgather(self, obj: Any) -> list[Any]:
        self.meeting.slots[self.rank] = obj
        self.meeting.arrived.wait()
        got = [self.meeting.slots[r] for r in range(self.size)]
        self.meeting.arrived.wait()
        return got

    def Split_type(self, kind: int) -> ThreadComm:  # noqa: N802: every thread is on this one host
        return ThreadComm(self.meeting, self.rank, self.size)

    def Free(self) -> None:  # noqa: N802
        pass

    def Abort(self, code: int) -> None:  # noqa: N802
        assert self.aborted is not None
        self.aborted.append((self.rank, code))


class FakeHost:
    """What NCCLCommunicator reads from the rank's MPICommunicator."""

    MPI = SimpleNamespace(COMM_TYPE_SHARED=1)

    def __init__(
        self, rank: int, mesh: Sequence[int], meetings: dict[tuple[int, ...], Rendezvous], timeout: float,
        aborted: list[tuple[int, int]], watchdog: Watchdog | None = None,
    ):  # fmt: skip
        self.rank, self.mesh, self.timeout = rank, tuple(mesh), timeout
        size = int(np.prod(mesh))
        self.aborted = aborted  # (rank, code) of every rank's MPI_Abort, shared by the run
        self.world = ThreadComm(meetings[tuple(range(size))], rank, size, self.aborted)
        coords = mesh_coords(rank, mesh)
        self.axes = []
        for axis, extent in enumerate(mesh):
            self.axes.append(ThreadComm(meetings[mesh_group(rank, mesh, axis)], coords[axis], extent))
        self.watchdog = watchdog or Watchdog(self.world, timeout)
        self.subgroups = SUBGROUP_MEETINGS

    def subgroup(self, members: Sequence[int], mesh: Sequence[int]) -> FakeHost:
        """MPI_Comm_create_group's communicator: its ranks are the places in `members`."""
        with self.subgroups.lock:
            meetings = self.subgroups.by_members.setdefault((tuple(members), tuple(mesh)), meetings_for(mesh))
        return FakeHost(members.index(self.rank), mesh, meetings, self.timeout, self.aborted, self.watchdog)

    def barrier(self) -> None:
        self.world.allgather(None)

    def gather_all(self, piece: np.ndarray, site: Site) -> list[np.ndarray]:
        return self.world.allgather(piece)

    def agree(self, value: Any) -> list[Any]:
        return self.world.allgather(value)


SUBGROUP_MEETINGS = SimpleNamespace(lock=threading.Lock(), by_members={})
"""The meetings of each subgroup's ranks, made by the first member to ask (reset by every on_ranks)."""


def meetings_for(mesh: Sequence[int]) -> dict[tuple[int, ...], Rendezvous]:
    size = int(np.prod(mesh))
    groups = {tuple(range(size))} | {mesh_group(r, mesh, a) for r in range(size) for a in range(len(mesh))}
    return {g: Rendezvous(len(g)) for g in groups}


def on_ranks(
    mesh: Sequence[int], body: Callable[[Any], Any], timeout: float = 300.0, devices: int = 2, nccl: FakeNccl | None = None
):
    """body(communicator) on every rank of `mesh`, each a thread.

    Returns each rank's (result, GPU it chose) and error, and the stand-in NCCL module.
    """
    from irflow.runtime.nccl import NCCLCommunicator

    nccl, cupy = nccl or FakeNccl(), fake_cupy(devices)
    meetings = meetings_for(mesh)
    SUBGROUP_MEETINGS.by_members.clear()
    size = int(np.prod(mesh))
    aborted: list[tuple[int, int]] = []
    hosts = [FakeHost(r, mesh, meetings, timeout, aborted) for r in range(size)]
    results: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def rank_main(r: int) -> None:
        try:
            comm = NCCLCommunicator(hosts[r], nccl=nccl, xp=cupy)
            results[r] = (body(comm), cupy.cuda.used.device)
        except BaseException as e:  # reported by the caller
            errors[r] = e

    threads = [threading.Thread(target=rank_main, args=(r,), name=str(r), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    return results, errors, nccl
