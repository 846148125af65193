"""Devices as MPI processes: the communicator for `mpiexec -n N python train.py`.

Each process is one device of the mesh (its world rank is its rank) and runs
its own per-device program: the very program the in-process simulation runs.
Collectives go to mpi4py's buffer-protocol methods on the arena views in place
(no pickling). A collective whose tensor axis is not the leading one packs
through a scratch buffer (one per shape, made on first use and reused on
every later step), so nothing is allocated per step.

Collectives are MPI's blocking ones, as a raw mpi4py program would call them
(MPI's nonblocking collectives run other algorithms: up to several times slower
on small and middle-sized messages). A blocked call cannot raise, so a watchdog
thread keeps the deadline (`IRFLOW_MPI_TIMEOUT`, seconds, default 300): a peer
that died or never comes ends the run with an error naming the op and its
source line, on every rank, never a hang.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import CodeType, FrameType, ModuleType
from typing import Any

import numpy as np

from irflow.dialects.mesh import mesh_rank
from irflow.errors import ExecutionError
from irflow.runtime.communicator import Array, Communicator, Site, stack_parts, strided, unstack_parts

TIMEOUT_ENV = "IRFLOW_MPI_TIMEOUT"
HEAVY_YIELD_ENV = "MPIR_CVAR_ENABLE_HEAVY_YIELD"  # MPICH's; read when MPI starts
DEFAULT_TIMEOUT_S = 300.0
_P2P_TAG = 17  # irflow's point-to-point messages; MPI keeps them in order per pair of ranks
_FORWARD_S = 0.5  # time for the launcher to forward a failing rank's message before the abort


def world() -> Any:
    """mpi4py's COMM_WORLD, importing MPI on first use (a plain `python x.py` is a world of one)."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ExecutionError(
            "running under mpiexec needs mpi4py and an MPI library: pip install 'irflow[mpi]' (mpi4py and mpich)"
        ) from e
    return MPI.COMM_WORLD


def launched_size() -> int:
    """The number of processes mpiexec started, read from its environment without initializing MPI."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 1


def stop_all_on_error() -> None:
    """An uncaught error on any rank ends every rank at once, naming the failing rank and the cause.

    Without it, the other ranks would wait in their next collective until the
    timeout, or for ever in MPI's start-up when this rank fails before it joins
    (a part file missing on its disk is an error while the job is defined): the
    error starts MPI if nothing has. MPI_Abort makes mpiexec end the whole run
    with a non-zero status. Installed once, when irflow is imported under mpiexec.
    """
    previous = sys.excepthook
    if getattr(previous, "irflow_stops_all", False):
        return

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, error, tb)
            abort(world())
        else:
            fail(world(), traceback.format_exception(kind, error, tb))

    hook.irflow_stops_all = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def fail(comm: Any, report: list[str]) -> None:
    """Print `report` as this rank's failure and end every rank."""
    sys.stderr.write(f"irflow: rank {comm.Get_rank()} of {comm.Get_size()} failed; stopping every rank\n")
    sys.stderr.writelines(report)
    abort(comm)


def abort(comm: Any) -> None:
    sys.stderr.flush()
    time.sleep(_FORWARD_S)  # mpiexec stops forwarding output once it tears the ranks down
    comm.Abort(1)


def launched_rank() -> int:
    """This process's rank as mpiexec set it (0 outside mpiexec), read without initializing MPI."""
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 0


def prepare_rank() -> None:
    """Called when irflow is imported, before anything can warn or start MPI.

    Under mpiexec only rank 0 shows warnings, so N ranks do not print each one N
    times (IRFLOW_MPI_ALL_RANKS=1 shows every rank's). MPICH's blocking calls
    spin; told to yield the core with sched_yield while they do
    (MPIR_CVAR_ENABLE_HEAVY_YIELD, unless the environment sets it), ranks that
    share cores with each other or with other programs stop stalling one
    another: a 4 KiB all_reduce on 4 ranks of a busy 2-core machine went from
    7-9 ms to under 0.9 ms. On a core of its own a rank yields to no one. An
    uncaught error on a rank stops every rank (`stop_all_on_error`).
    """
    if launched_size() > 1:
        os.environ.setdefault(HEAVY_YIELD_ENV, "1")
        stop_all_on_error()
    if launched_rank() != 0 and os.environ.get("IRFLOW_MPI_ALL_RANKS") != "1":
        warnings.simplefilter("ignore")


def join(mesh: Sequence[int], xp: ModuleType = np) -> Communicator:
    """This process's device on `mesh`, for a run started by mpiexec: an uncaught error on any rank stops every rank.

    Arrays of numpy go over MPI; cupy arrays (a GPU target) over NCCL, which MPI starts.
    """
    comm = world()
    stop_all_on_error()
    host = MPICommunicator(mesh, comm)
    if xp is np:
        return host
    from irflow.runtime.nccl import NCCLCommunicator

    return NCCLCommunicator(host)


def timeout_s() -> float:
    value = os.environ.get(TIMEOUT_ENV)
    if value is None:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        raise ExecutionError(f"{TIMEOUT_ENV}={value!r} is not a number of seconds") from None
    if not seconds > 0:
        raise ExecutionError(f"{TIMEOUT_ENV}={value!r} must be positive")
    return seconds


@dataclass
class Queued:
    """A call handed to a library that runs it later (NCCL on a GPU stream): done once `event` has passed."""

    what: str
    site: Site
    start: float
    event: Any = None  # recorded on the stream right after the call; None while the call has not returned

    def done(self) -> bool:
        return self.event is not None and self.event.done


class Watchdog:
    """Keeps the deadline of the collectives in flight: past it, this rank fails naming the op.

    A daemon thread looks a few times per timeout. A blocking MPI call costs
    nothing to watch: the thread sees which threads stand in one of the
    `watched` functions (their innermost Python frame: MPI's C code makes none)
    and for how long the same frame has stood there; the function's `site`
    argument names the call. An asynchronous call
    (NCCL) is appended to `queued` until its event has passed; its owner drops
    the done ones from the front. A call that waits too long is reported as
    this rank's failure and every rank is aborted, as for an uncaught error (a
    pending collective cannot be cancelled, so no rank could go on anyway).
    """

    def __init__(self, comm: Any, timeout: float, watched: Mapping[CodeType, str] | None = None):
        self.comm = comm
        self.timeout = timeout
        self.watched = dict(watched or {})  # code -> the op a thread standing in it waits in
        self.queued: deque[Queued] = deque()
        self._seen: dict[int, tuple[FrameType, float]] = {}  # thread -> (its watched frame, first seen)
        # The thread holds the watchdog only while it looks: once its communicators are dropped, it ends.
        threading.Thread(target=_watch, args=(weakref.ref(self),), name="irflow-mpi-watchdog", daemon=True).start()

    def oldest(self) -> tuple[str, Site, float] | None:
        """The call in flight seen longest, as (op, site, since), if any."""
        now, calls = time.monotonic(), []
        seen = {}
        for thread, frame in sys._current_frames().items():
            if frame.f_code in self.watched:
                known = self._seen.get(thread)
                # Holding the frame keeps it alive, so a later call's frame is never mistaken for it.
                seen[thread] = known if known is not None and known[0] is frame else (frame, now)
                frame, since = seen[thread]
                site = frame.f_locals.get("site")
                what = self.watched[frame.f_code]
                calls.append((what, site if isinstance(site, Site) else Site(what), since))
        self._seen = seen
        try:
            first = self.queued[0]  # only peeked: the owner pops
            if not first.done():
                calls.append((first.what, first.site, first.start))
        except IndexError:
            pass
        return min(calls, key=lambda call: call[2], default=None)

    def overdue(self) -> bool:
        """Whether a call in flight has waited past the deadline: then this rank has failed, naming it."""
        call = self.oldest()
        if call is None or time.monotonic() - call[2] <= self.timeout:
            return False
        what, site, _ = call
        error = ExecutionError(
            f"rank {self.comm.Get_rank()}: {what} in {site} waited more than {self.timeout:g} s for the other "
            f"ranks (set {TIMEOUT_ENV} to wait longer)",
            site.location,
        )
        fail(self.comm, traceback.format_exception_only(type(error), error))
        return True


def _watch(watchdog: weakref.ref[Watchdog]) -> None:
    """A watchdog's thread: a look a few times per timeout, until a call is overdue or the watchdog is gone."""
    dog = watchdog()
    while dog is not None:
        period = min(1.0, dog.timeout / 8)
        del dog  # not kept alive by its own thread while it sleeps
        time.sleep(period)
        dog = watchdog()
        if dog is not None and dog.overdue():
            return


class MPICommunicator(Communicator):
    """This process's device: collectives over a mesh axis run on that axis's sub-communicator."""

    def __init__(
        self, mesh: Sequence[int], comm: Any = None, timeout: float | None = None, watchdog: Watchdog | None = None
    ):
        from mpi4py import MPI

        self.MPI = MPI
        self.world = comm if comm is not None else world()
        # Checked before the base class places this rank on the mesh: a rank past its end (more processes
        # than devices) must stop with this message too, not with the mesh's.
        devices = math.prod(mesh)
        if self.world.Get_size() != devices:
            raise ExecutionError(
                f"mpiexec started {self.world.Get_size()} processes, but the job's placement has {devices} devices "
                f"(mesh {list(mesh)}): run one process per device"
            )
        super().__init__(self.world.Get_rank(), mesh)
        self.timeout = timeout if timeout is not None else timeout_s()
        # Every method here that calls MPI is watched, from the splitting below to each collective;
        # a subgroup's calls by its parent's watchdog.
        self.watchdog = watchdog if watchdog is not None else Watchdog(self.world, self.timeout, _BLOCKING)
        # One sub-communicator per mesh axis: the ranks that differ only in that coordinate.
        self.axes = []
        for axis in range(len(self.mesh)):
            color = mesh_rank([0 if k == axis else c for k, c in enumerate(self.coords)], self.mesh)
            self.axes.append(self.world.Split(color, self.coords[axis]))
        self._scratch: dict[tuple[Any, ...], np.ndarray] = {}
        self._subgroups: dict[tuple[tuple[int, ...], tuple[int, ...]], MPICommunicator] = {}
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}

    def _scratch_for(self, key: tuple[Any, ...], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = np.empty(shape, dtype)
        return buf

    # ------------------------------------------------------------- collectives
    # mpi4py takes the arrays' bytes in place and refuses a strided one (BufferError), so the hot path
    # checks nothing itself (a check of .flags would cost more than the rest of the call's Python).

    def all_reduce(self, src: Array, dst: Array, mesh_axis: int, reduction: str, site: Site) -> None:
        try:
            self.axes[mesh_axis].Allreduce(self.MPI.IN_PLACE if src is dst else src, dst, self._ops[reduction])
        except BufferError as e:
            raise strided("all_reduce", site) from e

    def all_gather(self, src: Array, dst: Array, axis: int, mesh_axis: int, site: Site) -> None:
        comm = self.axes[mesh_axis]
        try:
            if axis == 0:
                comm.Allgather(src, dst)
                return
            shape = (self.mesh[mesh_axis], *src.shape)
            stacked = self._scratch_for(("all_gather", src.shape, src.dtype), shape, src.dtype)
            comm.Allgather(src, stacked)
        except BufferError as e:
            raise strided("all_gather", site) from e
        unstack_parts(np, stacked, dst, axis)

    def reduce_scatter(self, src: Array, dst: Array, axis: int, mesh_axis: int, reduction: str, site: Site) -> None:
        comm, op = self.axes[mesh_axis], self._ops[reduction]
        try:
            if axis == 0:
                comm.Reduce_scatter_block(src, dst, op)
                return
            shape = _parts(src.shape, axis, self.mesh[mesh_axis])
            packed = self._scratch_for(("reduce_scatter", src.shape, src.dtype), shape, src.dtype)
            stack_parts(np, src, packed, axis)
            comm.Reduce_scatter_block(packed, dst, op)
        except BufferError as e:
            raise strided("reduce_scatter", site) from e

    def all_to_all(self, src: Array, dst: Array, split_axis: int, concat_axis: int, mesh_axis: int, site: Site) -> None:
        comm = self.axes[mesh_axis]
        # Alltoall sends the k-th p-th of a buffer to coordinate k: along the leading axis that is chunk k
        # already, so that side needs no packing.
        try:
            if split_axis == 0:
                packed = src
            else:
                shape = _parts(src.shape, split_axis, self.mesh[mesh_axis])
                packed = self._scratch_for(("all_to_all_in", src.shape, src.dtype), shape, src.dtype)
                stack_parts(np, src, packed, split_axis)
            if concat_axis == 0:
                comm.Alltoall(packed, dst)
                return
            shape = _parts(dst.shape, concat_axis, self.mesh[mesh_axis])
            received = self._scratch_for(("all_to_all_out", dst.shape, dst.dtype), shape, dst.dtype)
            comm.Alltoall(packed, received)
        except BufferError as e:
            raise strided("all_to_all", site) from e
        unstack_parts(np, received, dst, concat_axis)

    def broadcast(self, src: Array, dst: Array, root: int, mesh_axis: int, site: Site) -> None:
        comm = self.axes[mesh_axis]
        if comm.Get_rank() == root and src is not dst:
            dst[...] = src
        try:
            comm.Bcast(dst, root)
        except BufferError as e:
            raise strided("broadcast", site) from e

    def reduce(self, src: Array, dst: Array, root: int, mesh_axis: int, reduction: str, site: Site) -> None:
        comm = self.axes[mesh_axis]
        try:
            comm.Reduce(src, dst if comm.Get_rank() == root else None, self._ops[reduction], root)
        except BufferError as e:
            raise strided("reduce", site) from e

    def send(self, src: Array, peer: int, site: Site) -> None:
        """Returns when MPI has taken `src` (its bytes may then be reused), as the in-process send does."""
        try:
            self.world.Send(src, peer, _P2P_TAG)
        except BufferError as e:
            raise strided("send", site) from e

    def recv(self, dst: Array, peer: int, site: Site) -> None:
        try:
            self.world.Recv(dst, peer, _P2P_TAG)
        except BufferError as e:
            raise strided("recv", site) from e

    def exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> None:
        """All receives posted first, then all sends; MPI matches each pair of ranks' messages in order.
        The staging buffers of a transfer are contiguous; a strided one is refused by mpi4py."""
        try:
            requests = [self.world.Irecv(dst, source=peer, tag=_P2P_TAG) for peer, dst in recvs]
            requests += [self.world.Isend(src, dest=peer, tag=_P2P_TAG) for peer, src in sends]
        except BufferError as e:
            raise strided("exchange", site) from e
        self.MPI.Request.Waitall(requests)

    def subgroup(self, members: Sequence[int], mesh: Sequence[int]) -> MPICommunicator:
        """A communicator over `members` (made once, by the members only, with MPI_Comm_create_group)."""
        key = (tuple(members), tuple(mesh))
        sub = self._subgroups.get(key)
        if sub is None:
            comm = self.world.Create_group(self.world.Get_group().Incl(list(members)))
            sub = self._subgroups[key] = MPICommunicator(mesh, comm, self.timeout, self.watchdog)
        return sub

    def barrier(self) -> None:
        self.world.Barrier()

    # ------------------------------------------------------------- host-side helpers

    def gather_all(self, piece: np.ndarray, site: Site) -> list[np.ndarray]:
        """Every rank's `piece` (all of one shape and dtype), on every rank: for logical values of variables."""
        stacked = np.empty((self.size, *piece.shape), piece.dtype)
        self.world.Allgather(np.ascontiguousarray(piece), stacked)
        return list(stacked)

    def agree(self, value: Any) -> list[Any]:
        """Every rank's small Python `value` (pickled: start-up checks only, never a step)."""
        return self.world.allgather(value)

    def abort(self, code: int = 1) -> None:
        self.world.Abort(code)


def _parts(shape: tuple[int, ...], axis: int, p: int) -> tuple[int, ...]:
    """The shape of p parts of `shape` along `axis`, the parts leading."""
    return (p, *shape[:axis], shape[axis] // p, *shape[axis + 1 :])


_BLOCKING = {
    f.__code__: "splitting the mesh axes" if name == "__init__" else name
    for name, f in vars(MPICommunicator).items()
    if inspect.isfunction(f)
}
"""Every MPICommunicator method, by the op it waits in: a thread standing in one of them for long waits on MPI."""
