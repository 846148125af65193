"""Devices as MPI processes: the communicator for `mpiexec -n N python train.py`.

Each process is one device of the mesh (its world rank is its rank) and runs
its own per-device program: the very program the in-process simulation runs.
Collectives go to mpi4py's buffer-protocol methods on the arena views in place
(no pickling). A collective whose tensor axis is not the leading one goes
through a scratch buffer (one per shape, made on first use and reused on every later step),
so nothing is allocated per step.

Every collective is started non-blocking and waited for with a deadline
(`IRFLOW_MPI_TIMEOUT`, seconds, default 300): a peer that died or never comes
ends the run with an error naming the op and its source line, never a hang.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from irflow.dialects.mesh import mesh_rank
from irflow.errors import ExecutionError
from irflow.runtime.communicator import Array, Communicator, Site

TIMEOUT_ENV = "IRFLOW_MPI_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0
_P2P_TAG = 17  # irflow's point-to-point messages; MPI keeps them in order per pair of ranks
_FORWARD_S = 0.5  # time for the launcher to forward a failing rank's message before the abort
_CHECK_EVERY = 256  # Test() calls between looks at the clock; the core is yielded in between (ranks may share cores)


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


def stop_all_on_error(comm: Any) -> None:
    """An uncaught error on any rank ends every rank at once, naming the failing rank and the cause.

    Without it, the other ranks would wait in their next collective until the
    timeout. MPI_Abort makes mpiexec end the whole run with a non-zero status.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, error, tb)
        else:
            sys.stderr.write(f"irflow: rank {rank} of {size} failed; stopping every rank\n")
            traceback.print_exception(kind, error, tb)
        sys.stderr.flush()
        time.sleep(_FORWARD_S)  # mpiexec stops forwarding output once it tears the ranks down
        comm.Abort(1)

    sys.excepthook = hook


def launched_rank() -> int:
    """This process's rank as mpiexec set it (0 outside mpiexec), read without initializing MPI."""
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 0


def quiet_other_ranks() -> None:
    """Under mpiexec only rank 0 shows warnings, so N ranks do not print each one N times.

    Called when irflow is imported, before anything can warn; IRFLOW_MPI_ALL_RANKS=1 shows every rank's.
    """
    if launched_rank() != 0 and os.environ.get("IRFLOW_MPI_ALL_RANKS") != "1":
        warnings.simplefilter("ignore")


def join(mesh: Sequence[int]) -> MPICommunicator:
    """This process's device on `mesh`, for a run started by mpiexec: an uncaught error on any rank stops every rank."""
    comm = world()
    stop_all_on_error(comm)
    return MPICommunicator(mesh, comm)


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


class MPICommunicator(Communicator):
    """This process's device: collectives over a mesh axis run on that axis's sub-communicator."""

    def __init__(self, mesh: Sequence[int], comm: Any = None, timeout: float | None = None):
        from mpi4py import MPI

        self.MPI = MPI
        self.world = comm if comm is not None else world()
        super().__init__(self.world.Get_rank(), mesh)
        if self.world.Get_size() != self.size:
            raise ExecutionError(
                f"mpiexec started {self.world.Get_size()} processes, but the job's placement has {self.size} devices "
                f"(mesh {list(self.mesh)}): run one process per device"
            )
        self.timeout = timeout if timeout is not None else timeout_s()
        # One sub-communicator per mesh axis: the ranks that differ only in that coordinate.
        self.axes = []
        for axis in range(len(self.mesh)):
            color = mesh_rank([0 if k == axis else c for k, c in enumerate(self.coords)], self.mesh)
            self.axes.append(self.world.Split(color, self.coords[axis]))
        self._scratch: dict[tuple[Any, ...], np.ndarray] = {}
        self._subgroups: dict[tuple[tuple[int, ...], tuple[int, ...]], MPICommunicator] = {}
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}

    # ------------------------------------------------------------- waiting

    def _wait(self, request: Any, what: str, site: Site) -> None:
        if request.Test():
            return
        deadline = time.monotonic() + self.timeout
        spins = 0
        while not request.Test():
            # Keep driving MPI's progress (a sleeping rank stalls every round of a collective) but let
            # ranks that share this core run.
            os.sched_yield()
            spins += 1
            if spins % _CHECK_EVERY == 0:
                if time.monotonic() > deadline:
                    raise ExecutionError(
                        f"rank {self.rank}: {what} in {site} waited more than {self.timeout:g} s for the other ranks "
                        f"(set {TIMEOUT_ENV} to wait longer)",
                        site.location,
                    )

    def _scratch_for(self, key: tuple[Any, ...], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = np.empty(shape, dtype)
        return buf

    # ------------------------------------------------------------- collectives

    def all_reduce(self, src: Array, dst: Array, mesh_axis: int, reduction: str, site: Site) -> None:
        send = self.MPI.IN_PLACE if src is dst else _contiguous(src, "all_reduce", site)
        self._wait(self.axes[mesh_axis].Iallreduce(send, dst, self._ops[reduction]), "all_reduce", site)

    def all_gather(self, src: Array, dst: Array, axis: int, mesh_axis: int, site: Site) -> None:
        comm, p = self.axes[mesh_axis], self.mesh[mesh_axis]
        if axis == 0:
            self._wait(comm.Iallgather(_contiguous(src, "all_gather", site), dst), "all_gather", site)
            return
        stacked = self._scratch_for(("all_gather", src.shape, src.dtype), (p, *src.shape), src.dtype)
        self._wait(comm.Iallgather(np.ascontiguousarray(src), stacked), "all_gather", site)
        _unstack(stacked, dst, axis)

    def reduce_scatter(self, src: Array, dst: Array, axis: int, mesh_axis: int, reduction: str, site: Site) -> None:
        comm, p = self.axes[mesh_axis], self.mesh[mesh_axis]
        op = self._ops[reduction]
        if axis == 0:
            request = comm.Ireduce_scatter_block(_contiguous(src, "reduce_scatter", site), dst, op)
            self._wait(request, "reduce_scatter", site)
            return
        packed = self._scratch_for(("reduce_scatter", src.shape, src.dtype), (p, *dst.shape), src.dtype)
        _stack(src, packed, axis)
        out = self._scratch_for(("reduce_scatter_out", dst.shape, dst.dtype), tuple(dst.shape), dst.dtype)
        self._wait(comm.Ireduce_scatter_block(packed, out, op), "reduce_scatter", site)
        dst[...] = out

    def all_to_all(self, src: Array, dst: Array, split_axis: int, concat_axis: int, mesh_axis: int, site: Site) -> None:
        comm, p = self.axes[mesh_axis], self.mesh[mesh_axis]
        chunk = list(src.shape)
        chunk[split_axis] //= p
        # Along the leading axis the chunks already lie one after another: no packing then.
        if split_axis == 0:
            packed = _contiguous(src, "all_to_all", site).reshape(p, *chunk)
        else:
            packed = self._scratch_for(("all_to_all_in", src.shape, src.dtype), (p, *chunk), src.dtype)
            _stack(src, packed, split_axis)
        if concat_axis == 0:
            self._wait(comm.Ialltoall(packed, _contiguous(dst, "all_to_all", site)), "all_to_all", site)
            return
        received = self._scratch_for(("all_to_all_out", src.shape, src.dtype), (p, *chunk), src.dtype)
        self._wait(comm.Ialltoall(packed, received), "all_to_all", site)
        _unstack(received, dst, concat_axis)

    def broadcast(self, src: Array, dst: Array, root: int, mesh_axis: int, site: Site) -> None:
        comm = self.axes[mesh_axis]
        if comm.Get_rank() == root and src is not dst:
            dst[...] = src
        self._wait(comm.Ibcast(_contiguous(dst, "broadcast", site), root), "broadcast", site)

    def reduce(self, src: Array, dst: Array, root: int, mesh_axis: int, reduction: str, site: Site) -> None:
        comm = self.axes[mesh_axis]
        recv = dst if comm.Get_rank() == root else None
        request = comm.Ireduce(_contiguous(src, "reduce", site), recv, self._ops[reduction], root)
        self._wait(request, "reduce", site)

    def send(self, src: Array, peer: int, site: Site) -> None:
        """Completes when MPI has taken `src` (its bytes may then be reused), as the in-process send does."""
        self._wait(self.world.Isend(_contiguous(src, "send", site), dest=peer, tag=_P2P_TAG), "send", site)

    def recv(self, dst: Array, peer: int, site: Site) -> None:
        self._wait(self.world.Irecv(_contiguous(dst, "recv", site), source=peer, tag=_P2P_TAG), "recv", site)

    def exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> None:
        """All receives posted first, then all sends; MPI matches each pair of ranks' messages in order."""
        requests = [self.world.Irecv(_contiguous(dst, "exchange", site), source=peer, tag=_P2P_TAG) for peer, dst in recvs]
        requests += [self.world.Isend(_contiguous(src, "exchange", site), dest=peer, tag=_P2P_TAG) for peer, src in sends]
        for request in requests:
            self._wait(request, "exchange", site)

    def subgroup(self, members: Sequence[int], mesh: Sequence[int]) -> MPICommunicator:
        """A communicator over `members` (made once, by the members only, with MPI_Comm_create_group)."""
        key = (tuple(members), tuple(mesh))
        sub = self._subgroups.get(key)
        if sub is None:
            comm = self.world.Create_group(self.world.Get_group().Incl(list(members)))
            sub = self._subgroups[key] = MPICommunicator(mesh, comm, self.timeout)
        return sub

    def barrier(self) -> None:
        self._wait(self.world.Ibarrier(), "barrier", Site("barrier"))

    # ------------------------------------------------------------- host-side helpers

    def gather_all(self, piece: np.ndarray, site: Site) -> list[np.ndarray]:
        """Every rank's `piece` (all of one shape and dtype), on every rank: for logical values of variables."""
        stacked = np.empty((self.size, *piece.shape), piece.dtype)
        self._wait(self.world.Iallgather(np.ascontiguousarray(piece), stacked), "gather", site)
        return list(stacked)

    def agree(self, value: Any) -> list[Any]:
        """Every rank's small Python `value` (pickled: start-up checks only, never a step)."""
        return self.world.allgather(value)

    def abort(self, code: int = 1) -> None:
        self.world.Abort(code)


def _contiguous(a: Array, what: str, site: Site) -> Array:
    if not a.flags.c_contiguous:
        raise ExecutionError(f"{what} in {site}: the buffer is not contiguous", site.location)
    return a


def _stack(src: np.ndarray, out: np.ndarray, axis: int) -> None:
    """out[k] = chunk k of src along `axis` (out has the parts as its leading axis)."""
    p = out.shape[0]
    moved = np.moveaxis(src.reshape(*src.shape[:axis], p, src.shape[axis] // p, *src.shape[axis + 1 :]), axis, 0)
    np.copyto(out, moved)


def _unstack(stacked: np.ndarray, dst: np.ndarray, axis: int) -> None:
    """dst = the parts of `stacked` concatenated along `axis`."""
    p = stacked.shape[0]
    shape = (*dst.shape[:axis], p, dst.shape[axis] // p, *dst.shape[axis + 1 :])
    np.copyto(dst.reshape(shape), np.moveaxis(stacked, 0, axis))

