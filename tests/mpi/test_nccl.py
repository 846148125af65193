"""The NCCL communicator (irflow/runtime/nccl.py).

Without a GPU, its code runs on stand-ins (tests/mpi/fake_nccl.py): each rank
a thread, cupy.cuda.nccl's calls turned back into numpy views and performed
by the in-process engine. They check what the communicator itself decides:
which NCCL communicator (world or mesh axis) and rank each call uses, the
counts, types, buffers, roots and packing, the start-up over MPI, and its
errors. Where a GPU, cupy and mpiexec exist, the same checks and an MLP run
on real ranks (the last tests; skipped elsewhere).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from irflow.dialects.mesh import mesh_group
from irflow.errors import ExecutionError
from irflow.runtime.communicator import Site
from irflow.runtime.inprocess import InProcessGroup

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import fake_nccl  # noqa: E402
from collectives_check import call, cases  # noqa: E402
from fake_nccl import device, on_ranks  # noqa: E402

MESHES = [(2,), (3,), (4,), (2, 2)]
FILL = 99  # what every dst holds before a call (a reduce leaves it on the other ranks)


def expected_on_every_rank(mesh, kind, params, srcs, dst_shape, mesh_axis, site):
    """The in-process group's results of one collective, rank by rank (every dst starts as FILL)."""
    group = InProcessGroup(mesh)
    expected = [np.full(dst_shape, FILL, srcs[0].dtype) for _ in srcs]
    group.run([[lambda r=r: call(group.communicator(r), kind, params, srcs[r], expected[r], mesh_axis, site)]
               for r in range(len(srcs))])  # fmt: skip
    return expected


@pytest.mark.parametrize("mesh", MESHES)
def test_every_collective_matches_the_in_process_group(mesh):
    size = math.prod(mesh)
    plan = []
    for mesh_axis, p in enumerate(mesh):
        for n, (kind, params, src_shape, dst_shape) in enumerate(cases(p)):
            site = Site(f"case {kind}{params} on mesh axis {mesh_axis}")
            rng = np.random.default_rng(n)
            srcs = [rng.standard_normal(src_shape).astype(np.float32) for _ in range(size)]
            expected = expected_on_every_rank(mesh, kind, params, srcs, dst_shape, mesh_axis, site)
            plan.append((mesh_axis, kind, params, srcs, dst_shape, expected, site))

    def body(comm):
        got = []
        for mesh_axis, kind, params, srcs, dst_shape, _, site in plan:
            for _ in range(2):  # the second call reuses the scratch arrays
                dst = device(np.full(dst_shape, FILL, np.float32))
                call(comm, kind, params, device(srcs[comm.rank]), dst, mesh_axis, site)
                got.append(np.array(dst))
        return got

    results, errors, _ = on_ranks(mesh, body)
    assert errors == [None] * size
    for rank, (got, _) in enumerate(results):
        for i, (*_, expected, site) in enumerate(plan):
            for again in range(2):
                np.testing.assert_allclose(
                    got[2 * i + again], expected[rank], rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}: {site}"
                )


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.float16, np.uint8])
def test_each_dtype_goes_to_nccl_as_its_own_type(dtype):
    """A wrong NCCL type would make the stand-in read the bytes as another type: the values would differ."""
    mesh, site = (2,), Site("typed")
    srcs = [(np.arange(12).reshape(4, 3) + 10 * r).astype(dtype) for r in range(2)]
    gathered = expected_on_every_rank(mesh, "all_gather", {"axis": 1}, srcs, (4, 6), 0, site)
    summed = expected_on_every_rank(mesh, "all_reduce", {"reduction": "max"}, srcs, (4, 3), 0, site)

    def body(comm):
        a, b = device(np.full((4, 6), FILL, dtype)), device(np.full((4, 3), FILL, dtype))
        comm.all_gather(device(srcs[comm.rank]), a, 1, 0, site)
        comm.all_reduce(device(srcs[comm.rank]), b, 0, "max", site)
        return np.array(a), np.array(b)

    results, errors, _ = on_ranks(mesh, body)
    assert errors == [None, None]
    for rank, ((a, b), _) in enumerate(results):
        np.testing.assert_array_equal(a, gathered[rank])
        np.testing.assert_array_equal(b, summed[rank])


@pytest.mark.parametrize("mesh", [(4,), (2, 2), (2, 3)])
def test_start_up_opens_one_nccl_communicator_per_group_with_ids_broadcast_over_mpi(mesh):
    from irflow.dialects.mesh import mesh_group

    results, errors, nccl = on_ranks(mesh, lambda comm: comm.rank, devices=2)
    size = math.prod(mesh)
    assert errors == [None] * size
    assert [gpu for _, gpu in results] == [r % 2 for r in range(size)]  # its rank on the host, modulo 2 GPUs
    members: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}
    for uid, n, rank, world_rank in nccl.opened:
        members.setdefault(uid, []).append((world_rank, rank, n))
    groups = {tuple(range(size))}  # the world's, for send/recv (and a 1-D mesh's only axis)
    if len(mesh) > 1:
        groups |= {mesh_group(r, mesh, a) for r in range(size) for a in range(len(mesh))}
    opened = sorted(sorted(m) for m in members.values())
    # Each group's ranks share one id, each at its place in the group (its coordinate), sized as the group.
    assert opened == sorted([(r, k, len(g)) for k, r in enumerate(g)] for g in groups)


def test_send_and_recv_pair_world_ranks():
    site = Site("job.send")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def body(comm):
        if comm.rank == 0:
            comm.send(device(x), 3, site)
            comm.recv(got := device(np.zeros_like(x)), 3, site)
            return np.array(got)
        if comm.rank == 3:
            comm.recv(got := device(np.zeros_like(x)), 0, site)
            comm.send(device(np.array(got) * 2), 0, site)
            return np.array(got)
        return None

    results, errors, _ = on_ranks((2, 2), body)
    assert errors == [None] * 4
    np.testing.assert_array_equal(results[3][0], x)
    np.testing.assert_array_equal(results[0][0], 2 * x)


def test_an_exchange_moves_every_pair_in_one_group():
    """A placement change's exchange: rank r sends rank (r+1)%4 its row and (r+2)%4 a different dtype-sized box."""
    site = Site("buffer.transfer")
    rows = [np.full((2, 3), r, np.float64) for r in range(4)]

    def body(comm):
        r = comm.rank
        sends = [((r + 1) % 4, device(rows[r])), ((r + 2) % 4, device(rows[r][:1] + 10))]
        got = [device(np.zeros((2, 3))), device(np.zeros((1, 3)))]
        comm.exchange(sends, [((r - 1) % 4, got[0]), ((r - 2) % 4, got[1])], range(4), site)
        return [np.array(g) for g in got]

    results, errors, _ = on_ranks((4,), body)
    assert errors == [None] * 4
    for r, (got, _) in enumerate(results):
        np.testing.assert_array_equal(got[0], rows[(r - 1) % 4])
        np.testing.assert_array_equal(got[1], rows[(r - 2) % 4][:1] + 10)


@pytest.mark.parametrize("mesh, mesh_axis", [((4,), 0), ((2, 2), 1), ((2, 2), 0)])
def test_a_gather_of_each_devices_own_rows_puts_them_one_after_another(mesh, mesh_axis):
    """The mirrored view's uneven gather (docs/dynamic.md): one group of send/recv pairs, a device of 0 rows too."""
    site = Site("buffer.all_gather")
    own = [3, 0, 5, 1]
    pieces = [np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 100 * r for r, n in enumerate(own)]

    def body(comm):
        group = comm.group(mesh_axis)
        rows = [own[q] for q in group]
        dst = device(np.full((sum(rows), 2), FILL, np.float32))
        step = comm.gather_rows(device(pieces[comm.rank]), dst, rows, mesh_axis, site)
        got = []
        for _ in range(2):  # a step is made once per variant and run at every step of those sizes
            dst[...] = FILL
            step()
            got.append(np.array(dst))
        return got

    results, errors, _ = on_ranks(mesh, body)
    assert errors == [None] * 4
    for r, (got, _) in enumerate(results):
        expected = np.concatenate([pieces[q] for q in mesh_group(r, mesh, mesh_axis)])
        for again in got:
            np.testing.assert_array_equal(again, expected)


def test_a_subgroup_runs_collectives_among_its_members_only_on_the_same_gpu():
    site = Site("job.all_reduce")

    def body(comm):
        if comm.rank not in (1, 2, 3):
            return None
        sub = comm.subgroup([1, 2, 3], [3])
        assert sub is comm.subgroup([1, 2, 3], [3]) and sub.device == comm.device
        dst = device(np.zeros(4, np.float32))
        sub.all_reduce(device(np.full(4, comm.rank, np.float32)), dst, 0, "sum", site)
        return sub.rank, np.array(dst)

    results, errors, _ = on_ranks((4,), body)
    assert errors == [None] * 4
    assert results[0][0] is None
    for rank in (1, 2, 3):
        place, got = results[rank][0]
        assert place == rank - 1
        np.testing.assert_array_equal(got, np.full(4, 6, np.float32))


def test_a_type_nccl_lacks_and_a_strided_buffer_are_errors_naming_the_op():
    site = Site("job.all_reduce")

    def body(comm):
        failures = []
        for src in (device(np.zeros(4, bool)), device(np.zeros((4, 2), np.float32))[:, 0]):
            try:
                comm.all_reduce(src, device(np.zeros(src.shape, src.dtype)), 0, "sum", site)
            except ExecutionError as e:
                failures.append(str(e))
        return failures

    results, errors, _ = on_ranks((2,), body)
    assert errors == [None, None]
    for failures, _ in results:
        assert failures == [
            "all_reduce in 'job.all_reduce': NCCL has no type for bool arrays",
            "all_reduce in 'job.all_reduce': the buffer is not contiguous",
        ]


def test_an_exchange_of_a_type_nccl_lacks_fails_before_anything_is_watched():
    site = Site("buffer.transfer")

    def body(comm):
        peer = 1 - comm.rank
        try:
            comm.exchange([(peer, device(np.zeros(3, bool)))], [(peer, device(np.zeros(3, bool)))], range(2), site)
        except ExecutionError as e:
            return str(e), len(comm._queued)
        return None

    results, errors, _ = on_ranks((2,), body)
    assert errors == [None, None]
    for result, _ in results:
        assert result == ("exchange in 'buffer.transfer': NCCL has no type for bool arrays", 0)


def test_cupy_without_nccl_is_a_clear_error_on_every_rank():
    missing = fake_nccl.FakeNccl()
    missing.available = False
    _, errors, _ = on_ranks((2,), lambda comm: None, nccl=missing)
    for rank, error in enumerate(errors):
        assert isinstance(error, ExecutionError)
        assert str(error).startswith(f"rank {rank}: the job runs on GPUs under mpiexec, which needs NCCL")


def test_an_nccl_failure_is_an_error_naming_the_rank_and_op():
    site = Site("job.all_reduce")

    def body(comm):  # the ranks disagree on the reduction: the stand-in fails the call, as NCCL would misbehave
        comm.all_reduce(device(np.ones(4, np.float32)), device(np.zeros(4, np.float32)), 0, ["sum", "max"][comm.rank], site)

    _, errors, _ = on_ranks((2,), body)
    for rank, error in enumerate(errors):
        assert isinstance(error, ExecutionError)
        assert str(error).startswith(f"rank {rank}: all_reduce in 'job.all_reduce': NCCL failed: collective mismatch")


def test_calls_are_watched_until_their_event_passes_and_events_are_reused():
    before = fake_nccl.Event.made

    def body(comm):
        x, y = device(np.ones(8, np.float32)), device(np.zeros(8, np.float32))
        for _ in range(50):
            comm.all_reduce(x, y, 0, "sum", Site("step"))
        return len(comm.host.watchdog.queued), y[0]

    results, errors, _ = on_ranks((2,), body)
    assert errors == [None, None]
    assert [r for r, _ in results] == [(1, 2.0), (1, 2.0)]  # only the last call is still listed
    assert fake_nccl.Event.made - before <= 4  # two events per rank at most, recorded again and again


def test_a_collective_past_the_timeout_fails_the_rank_naming_the_op(capsys):
    site = Site("job.all_reduce")

    def body(comm):
        if comm.rank == 0:  # waits alone
            comm.all_reduce(device(np.ones(4, np.float32)), device(np.zeros(4, np.float32)), 0, "sum", site)
            return None
        deadline = time.monotonic() + 10
        while not comm.host.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        aborted = list(comm.host.aborted)
        for clique in comm.nccl.cliques.values():
            clique.arrived.abort()  # let rank 0's call go, as the abort would have ended it
        return aborted

    results, errors, _ = on_ranks((2,), body, timeout=0.5)
    assert results[1][0] == [(0, 1)]  # rank 0 called MPI_Abort(1)
    assert isinstance(errors[0], ExecutionError)
    err = capsys.readouterr().err
    assert "irflow: rank 0 of 2 failed; stopping every rank" in err
    assert "rank 0: all_reduce in 'job.all_reduce' waited more than 0.5 s for the other ranks" in err


# ----------------------------------------------------------------- on GPUs


def gpus() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no cupy, no driver, no device
        return 0


MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
on_gpus = pytest.mark.skipif(
    gpus() < 2 or MPIEXEC is None or subprocess.run([sys.executable, "-c", "import mpi4py"]).returncode != 0,
    reason="needs 2 GPUs, cupy, mpi4py and mpiexec",
)


def launch(args: list[str], ranks: int | None, **env: str) -> subprocess.CompletedProcess:
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_", "HYDRA_"))}
    cmd = [sys.executable, *args] if ranks is None else [MPIEXEC, "-n", str(ranks), sys.executable, *args]
    proc = subprocess.run(cmd, cwd=HERE, env={**clean, **env}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@on_gpus
@pytest.mark.parametrize("mesh,ranks", [("2", 2), ("2x2", 4)])
def test_on_gpus_every_collective_matches_the_in_process_group(mesh, ranks):
    if gpus() < ranks:
        pytest.skip(f"needs {ranks} GPUs")
    out = launch(["collectives_check.py", mesh, "gpu"], ranks)
    assert f"collectives ok on mesh [{mesh.replace('x', ', ')}]" in out.stdout


@on_gpus
def test_on_gpus_training_matches_one_cpu_device(tmp_path):
    runs = {}
    for label, devices, ranks, env in (("gpus", 2, 2, {"TRAIN_ON": "gpu"}), ("cpu", 1, None, {})):
        out = tmp_path / f"{label}.npz"
        launch(["train_mlp.py", str(devices), "data", "4", str(out)], ranks, **env)
        runs[label] = dict(np.load(out))
    for key, value in runs["cpu"].items():
        np.testing.assert_allclose(runs["gpus"][key], value, rtol=1e-4, atol=1e-5, err_msg=key)
