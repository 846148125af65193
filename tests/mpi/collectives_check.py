"""Run under mpiexec: every collective of the MPI communicator equals the in-process group's, rank by rank.

    mpiexec -n N python collectives_check.py MESH [gpu]    (MESH: 4 or 2x2; gpu: NCCL on cupy arrays)
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from irflow.errors import ExecutionError
from irflow.runtime.communicator import Site
from irflow.runtime.inprocess import InProcessGroup
from irflow.runtime.mpi import join


def cases(p: int) -> list[tuple[str, dict, tuple[int, ...], tuple[int, ...]]]:
    """(kind, params, src shape, dst shape) for a group of p devices."""
    return [
        ("all_reduce", {"reduction": "sum"}, (3, 5), (3, 5)),
        ("all_reduce", {"reduction": "max"}, (4,), (4,)),
        ("all_gather", {"axis": 0}, (2, 3), (2 * p, 3)),
        ("all_gather", {"axis": 1}, (2, 3), (2, 3 * p)),
        ("reduce_scatter", {"axis": 0, "reduction": "sum"}, (2 * p, 3), (2, 3)),
        ("reduce_scatter", {"axis": 1, "reduction": "sum"}, (3, 2 * p), (3, 2)),
        ("all_to_all", {"split_axis": 1, "concat_axis": 0}, (2, 2 * p), (2 * p, 2)),
        ("all_to_all", {"split_axis": 0, "concat_axis": 1}, (2 * p, 3), (2, 3 * p)),
        ("broadcast", {"root": 1 % p}, (3, 2), (3, 2)),
        ("reduce", {"root": 0, "reduction": "sum"}, (5,), (5,)),
    ]


def call(comm, kind: str, params: dict, src, dst, mesh_axis: int, site: Site) -> None:
    getattr(comm, kind)(src, dst, **params, mesh_axis=mesh_axis, site=site)


def main(mesh: tuple[int, ...], gpu: bool) -> None:
    xp = np
    if gpu:
        import cupy as xp
    comm = join(mesh, xp)
    size = comm.size
    for mesh_axis in range(len(mesh)):
        p = mesh[mesh_axis]
        for n, (kind, params, src_shape, dst_shape) in enumerate(cases(p)):
            site = Site(f"case {kind}{params} on mesh axis {mesh_axis}")
            rng = np.random.default_rng(n)
            srcs = [rng.standard_normal(src_shape).astype(np.float32) for _ in range(size)]
            group = InProcessGroup(mesh)
            expected = [np.full(dst_shape, -7.0, np.float32) for _ in range(size)]
            steps = [[lambda r=r: call(group.communicator(r), kind, params, srcs[r], expected[r], mesh_axis, site)]
                     for r in range(size)]
            group.run(steps)
            got = xp.full(dst_shape, -7.0, np.float32)
            call(comm, kind, params, xp.asarray(srcs[comm.rank]), got, mesh_axis, site)
            np.testing.assert_allclose(_host(got), expected[comm.rank], rtol=1e-5, atol=1e-6, err_msg=str(site))
            # a second call reuses the scratch buffers and gives the same answer
            again = xp.full(dst_shape, -7.0, np.float32)
            call(comm, kind, params, xp.asarray(srcs[comm.rank]), again, mesh_axis, site)
            np.testing.assert_array_equal(_host(again), _host(got))
    strided = xp.zeros((4, 2), np.float32)[:, 0]
    with pytest.raises(ExecutionError, match="all_reduce in 'strided': the buffer is not contiguous"):
        comm.all_reduce(strided, xp.zeros(4, np.float32), 0, "sum", Site("strided"))
    comm.barrier()
    if comm.rank == 0:
        print(f"collectives ok on mesh {list(mesh)}")


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else a


if __name__ == "__main__":
    main(tuple(int(x) for x in sys.argv[1].split("x")), sys.argv[2:] == ["gpu"])
