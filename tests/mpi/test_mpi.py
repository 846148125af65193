"""The same per-device programs on MPI ranks: `mpiexec -n N python script.py`, checked against one process.

Each test launches real MPI processes (the mpich wheel's Hydra launcher; on a
2-core machine 4 ranks are oversubscribed, which MPICH allows). The in-process
simulation and the one-device run are the oracles the ranks must match.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="the MPI tests need the [mpi] extra: mpi4py and mpich")

HERE = Path(__file__).parent
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
if MPIEXEC is None:
    pytest.skip("no mpiexec next to this Python or on PATH", allow_module_level=True)


def clean_env() -> dict[str, str]:
    """The environment without any MPI launcher's variables (pytest itself may run under one)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_", "HYDRA_"))}


def run(args: list[str], ranks: int | None = None, timeout: float = 120, check: bool = True, **env: str):
    cmd = [sys.executable, *args] if ranks is None else [MPIEXEC, "-n", str(ranks), sys.executable, *args]
    proc = subprocess.run(
        cmd, cwd=HERE, env={**clean_env(), **env}, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.parametrize("mesh,ranks", [("2", 2), ("3", 3), ("4", 4), ("2x2", 4)])
def test_every_collective_matches_the_in_process_group(mesh, ranks):
    out = run(["collectives_check.py", mesh], ranks)
    assert f"collectives ok on mesh [{mesh.replace('x', ', ')}]" in out.stdout


def train(
    tmp_path: Path, devices: int, mode: str, ranks: int | None, steps: int = 4, checkpoint: str = "", machines: int = 1,
    optimizer: str = "sgd",
) -> dict:  # fmt: skip
    out = tmp_path / f"{mode}-{devices}-{ranks}-{machines}-{optimizer}.npz"
    args = ["train_mlp.py", str(devices), mode, str(steps), str(out), *([checkpoint] if checkpoint else [])]
    run(args, ranks, MACHINES=str(machines), OPTIMIZER=optimizer)
    return dict(np.load(out))


def assert_same(got: dict, expected: dict, rtol: float = 1e-4) -> None:
    assert got.keys() == expected.keys()
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], rtol=rtol, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("mode", ["data", "model"])
def test_training_on_ranks_matches_one_process_and_one_device(tmp_path, ranks, mode):
    on_ranks = train(tmp_path, ranks, mode, ranks)
    simulated = train(tmp_path, ranks, mode, None)
    one_device = train(tmp_path, 1, mode, None)
    assert_same(on_ranks, simulated)
    assert_same(on_ranks, one_device)


@pytest.mark.parametrize("optimizer", ["lamb", "lars"])
def test_lamb_and_lars_of_a_split_layer_on_ranks_match_one_process_and_one_device(tmp_path, optimizer):
    """The hidden weight split over 2 ranks: each rank's update reads the norms all-reduced over MPI."""
    on_ranks = train(tmp_path, 2, "model", 2, optimizer=optimizer)
    assert_same(on_ranks, train(tmp_path, 2, "model", None, optimizer=optimizer))
    assert_same(on_ranks, train(tmp_path, 1, "model", None, optimizer=optimizer))


def test_machine_num_spreads_the_default_placement_over_ranks(tmp_path):
    """cpu_device_num(2) on machine_num(2): 4 devices, one rank each (docs/mpi.md), training as one device does."""
    assert_same(train(tmp_path, 4, "data", 4, machines=2), train(tmp_path, 1, "data", None))


def test_a_checkpoint_written_on_four_ranks_loads_in_one_process(tmp_path):
    checkpoint = tmp_path / "ckpt"
    trained = train(tmp_path, 4, "data", 4, checkpoint=str(checkpoint))
    assert (checkpoint).is_dir()
    out = tmp_path / "restored.npz"
    run(["predict_from_checkpoint.py", str(checkpoint), str(tmp_path / "data-4-4-1-sgd.npz"), str(out)], None)
    restored = dict(np.load(out))
    np.testing.assert_allclose(restored["predictions"], trained["predictions"], rtol=1e-5, atol=1e-6)


def test_a_failing_rank_stops_every_rank_quickly():
    start = time.monotonic()
    proc = run(["fail_on_rank.py", "1"], 4, check=False, timeout=60)
    assert proc.returncode != 0
    assert "rank 1 of 4 failed" in proc.stderr and "bad input on rank 1" in proc.stderr
    assert time.monotonic() - start < 30


def test_a_collective_that_waits_too_long_fails_with_its_op():
    proc = run(["fail_on_rank.py", "hang"], 2, check=False, timeout=60, IRFLOW_MPI_TIMEOUT="2")
    assert proc.returncode != 0
    assert "waited more than 2 s" in proc.stderr


@pytest.mark.parametrize("devices, ranks", [(4, 3), (2, 3)])
def test_world_size_must_match_the_placement(tmp_path, devices, ranks):
    """Fewer processes than devices, or more (a rank past the mesh's end): every rank stops with docs/mpi.md's message."""
    proc = run(["train_mlp.py", str(devices), "data", "1", str(tmp_path / "x.npz")], ranks, check=False)
    assert proc.returncode != 0
    assert f"mpiexec started {ranks} processes, but the job's placement has {devices} devices" in proc.stderr
    assert "is not on the mesh" not in proc.stderr


def test_ranks_that_compiled_different_programs_stop_before_the_first_step():
    proc = run(["differ_on_rank.py"], 2, check=False, timeout=60)
    assert proc.returncode != 0
    assert "ranks compiled different programs for job 'predict': rank 0 and rank 1 first differ" in proc.stderr


def test_only_rank_0_shows_irflows_warnings(tmp_path):
    proc = run(["warn_on_every_rank.py"], 2, timeout=60)
    assert proc.stderr.count("no usable GPU was found") == 1
    proc = run(["warn_on_every_rank.py"], 2, timeout=60, IRFLOW_MPI_ALL_RANKS="1")
    assert proc.stderr.count("no usable GPU was found") == 2


def test_mirrored_train_job_with_each_ranks_own_rows_matches_one_process(tmp_path):
    """Rows differ per rank and per step (zero included): parts, the joined loss and the variables."""
    (tmp_path / "one").mkdir()
    (tmp_path / "ranks").mkdir()
    run(["mirrored_dynamic.py", str(tmp_path / "one")], None)
    run(["mirrored_dynamic.py", str(tmp_path / "ranks")], 2)
    simulated = dict(np.load(tmp_path / "one" / "rank0.npz"))
    rows = [(7, 3), (0, 8), (8, 8), (2, 5)]
    for rank in range(2):
        got = dict(np.load(tmp_path / "ranks" / f"rank{rank}.npz"))
        for step, sizes in enumerate(rows):
            assert got[f"part{step}-{rank}"].shape == (sizes[rank],)
            np.testing.assert_array_equal(got[f"part{step}-{rank}"], simulated[f"part{step}-{rank}"])
            np.testing.assert_array_equal(got[f"whole{step}"], simulated[f"whole{step}"])  # both ranks' rows
            np.testing.assert_array_equal(got[f"peak{step}"], got[f"numpy_peak{step}"])  # both ranks' rows gathered
            np.testing.assert_array_equal(simulated[f"peak{step}"], simulated[f"numpy_peak{step}"])
        for name in [k for k in simulated if not k.startswith(("part", "whole", "peak", "numpy_peak"))]:
            np.testing.assert_array_equal(got[name], simulated[name], err_msg=name)


def test_each_ranks_own_rows_gather_over_both_axes_of_a_mesh(tmp_path):
    """4 ranks as a 2x2 mesh, rows differing per rank and step (zero included): a max over all of them, the
    rows themselves, a concatenation along them, the rows flattened, a slice and a top_k of all of them, and an
    embedding of each rank's own ids, gathered along each mesh axis in turn (the concatenation's, the slice's and
    the top_k's inputs on the devices), as one process gives them and numpy."""
    (tmp_path / "one").mkdir()
    (tmp_path / "ranks").mkdir()
    run(["mirrored_mesh.py", str(tmp_path / "one")], None)
    run(["mirrored_mesh.py", str(tmp_path / "ranks")], 4)
    simulated = dict(np.load(tmp_path / "one" / "rank0.npz"))
    for rank in range(4):
        got = dict(np.load(tmp_path / "ranks" / f"rank{rank}.npz"))
        for step in range(4):
            for name in ("peak", "rows", "joined", "flat", "thirds", "top", "embedded"):
                np.testing.assert_array_equal(got[f"{name}{step}"], got[f"numpy_{name}{step}"], err_msg=f"{name}{step}")
                np.testing.assert_array_equal(simulated[f"{name}{step}"], got[f"{name}{step}"], err_msg=f"{name}{step}")


def test_mirrored_view_on_ranks_passes_and_returns_each_ranks_own_part(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "ranks").mkdir()
    run(["mirrored_view.py", str(tmp_path / "one")], None)
    run(["mirrored_view.py", str(tmp_path / "ranks")], 2)
    simulated = json.loads((tmp_path / "one" / "rank0.json").read_text())
    x = [np.arange(6, dtype=np.float32).reshape(2, 3) * (d + 1) for d in range(2)]
    expected = [np.maximum(piece - 1, 0) for piece in x]  # numpy's relu(x - 1) of each device's rows
    np.testing.assert_array_equal(simulated["parts"], expected)
    for rank in range(2):
        got = json.loads((tmp_path / "ranks" / f"rank{rank}.json").read_text())
        assert got["parts"] == [simulated["parts"][rank]]  # its own part only, as one process gives device `rank`
        np.testing.assert_array_equal(got["whole"], np.concatenate(expected) * 2)  # tp.Numpy: the whole value
        assert "must be a list with one array per device (this process's 1: under mpiexec each of the job's 2" in (
            got["error"]
        )


def test_a_watchdogs_thread_ends_once_its_communicator_is_dropped():
    """Each communicator's watchdog thread used to run for the life of the process: 72 of them after this
    directory's tests, each waking every second (their allocations then landed in other tests' measurements)."""
    import gc
    import threading

    from irflow.runtime.mpi import Watchdog

    def watchers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "irflow-mpi-watchdog"]

    before = set(watchers())
    watchdog = Watchdog(comm=None, timeout=0.08)  # looks every 10 ms
    (thread,) = set(watchers()) - before
    time.sleep(0.05)
    assert thread.is_alive() and not watchdog.overdue()  # nothing in flight: it keeps watching
    del watchdog
    gc.collect()
    thread.join(timeout=2)
    assert not thread.is_alive()


# ----------------------------------------------------------------- jobs that read OFRecord files

sys.path.insert(0, str(HERE))
from ofrecord_train import BATCH, CLASSES, FEATURES, initial_weight  # noqa: E402

import irflow.core.record.record_pb2 as pb  # noqa: E402

RECORDS = [7, 5, 9]  # records in part-0, part-1, part-2: 2 devices read parts 0-1 and part 2 (OneFlow's balanced split)


def write_records(run_dir: Path, parts_of_rank: list[set[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The part files of ofrecord_train.py, record i holding x[i], y[i] and its id i; rank r's disk
    (run_dir/rank<r>/data) holds the parts parts_of_rank[r]. Returns x and y."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((sum(RECORDS), FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, sum(RECORDS))
    first = np.cumsum([0, *RECORDS])
    for rank, parts in enumerate(parts_of_rank):
        (run_dir / f"rank{rank}" / "data").mkdir(parents=True)
        for part in parts:
            with open(run_dir / f"rank{rank}" / "data" / f"part-{part}", "wb") as f:
                for i in range(first[part], first[part + 1]):
                    data = pb.OFRecord(feature={
                        "x": pb.Feature(float_list=pb.FloatList(value=x[i].tolist())),
                        "y": pb.Feature(int64_list=pb.Int64List(value=[int(y[i])])),
                        "id": pb.Feature(int64_list=pb.Int64List(value=[i])),
                    }).SerializeToString()  # fmt: skip
                    f.write(len(data).to_bytes(8, "little") + data)
    return x, y


def device_ids(device: int, steps: int) -> list[np.ndarray]:
    """OneFlow's rule, by hand: device 0 reads parts 0-1, device 1 part 2, in order and round again; each gives
    BATCH / 2 records a step."""
    first = np.cumsum([0, *RECORDS])
    stream = np.arange(first[0], first[2]) if device == 0 else np.arange(first[2], first[3])
    rows = BATCH // 2
    return [np.take(stream, np.arange(k * rows, (k + 1) * rows), mode="wrap") for k in range(steps)]


def test_two_machines_training_from_their_own_part_files_match_numpy(tmp_path):
    """Each rank's disk holds only the part files its device reads; the loss and the variables are those of
    softmax regression trained by numpy on the batches OneFlow's rule gives (the first wraps around at step 3)."""
    steps = 4
    x, y = write_records(tmp_path / "ranks", [{0, 1}, {2}])
    run(["ofrecord_train.py", str(tmp_path / "ranks"), "train", str(steps)], 2, timeout=60)
    got = [dict(np.load(tmp_path / "ranks" / f"rank{r}" / "out.npz")) for r in range(2)]
    w, b = initial_weight().astype(np.float64), np.zeros(len(initial_weight()))
    for step, (ids0, ids1) in enumerate(zip(device_ids(0, steps), device_ids(1, steps))):
        ids = np.concatenate([ids0, ids1])  # split(0): device 0's rows, then device 1's
        logits = x[ids] @ w.T + b
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(ids)), y[ids]]).mean()
        p[np.arange(len(ids)), y[ids]] -= 1
        w, b = w - 0.5 * p.T @ x[ids] / len(ids), b - 0.5 * p.mean(0)
        for rank in range(2):  # both ranks see the whole batch's ids and the loss
            np.testing.assert_array_equal(got[rank][f"ids{step}"], ids)
            np.testing.assert_allclose(got[rank][f"loss{step}"], loss, rtol=1e-5)
    for rank in range(2):
        np.testing.assert_allclose(got[rank]["var:fc-weight"], w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[rank]["var:fc-bias"], b, rtol=1e-5, atol=1e-6)


def test_mirrored_reader_gives_each_rank_its_own_records(tmp_path):
    steps = 3
    write_records(tmp_path / "ranks", [{0, 1}, {2}])
    run(["ofrecord_train.py", str(tmp_path / "ranks"), "mirrored", str(steps)], 2, timeout=60)
    for rank in range(2):
        got = dict(np.load(tmp_path / "ranks" / f"rank{rank}" / "out.npz"))
        assert sorted(got) == [f"ids{step}-{rank}" for step in range(steps)]
        for step, ids in enumerate(device_ids(rank, steps)):
            np.testing.assert_array_equal(got[f"ids{step}-{rank}"], ids)


def test_shuffled_records_on_two_ranks_are_the_simulated_devices_records(tmp_path):
    """random_shuffle and shuffle_after_epoch (files move between devices after an epoch, so every disk holds
    every part): the ranks read what the two devices simulated in one process read and train the same; in the
    first epoch each device reads its own part files, no record twice."""
    steps = 6
    write_records(tmp_path / "ranks", [{0, 1, 2}, {0, 1, 2}])
    write_records(tmp_path / "one", [{0, 1, 2}])
    run(["ofrecord_train.py", str(tmp_path / "ranks"), "shuffle", str(steps)], 2, timeout=60)
    run(["ofrecord_train.py", str(tmp_path / "one"), "shuffle", str(steps)], None, timeout=60)
    simulated = dict(np.load(tmp_path / "one" / "rank0" / "out.npz"))
    for rank in range(2):
        got = dict(np.load(tmp_path / "ranks" / f"rank{rank}" / "out.npz"))
        assert got.keys() == simulated.keys()
        for key in simulated:
            np.testing.assert_allclose(got[key], simulated[key], rtol=1e-6, err_msg=key)
    half = BATCH // 2
    device0 = np.concatenate([simulated[f"ids{step}"][:half] for step in range(2)])
    device1 = np.concatenate([simulated[f"ids{step}"][half:] for step in range(2)])
    assert len(set(device0.tolist())) == len(device0)  # 8 of the 12 records of its epoch (4 more in the buffer)
    assert device0.max() < RECORDS[0] + RECORDS[1] <= device1.min()  # its parts 0-1, device 1's part 2
    assert not np.array_equal(simulated["ids0"], np.concatenate(device_ids(0, 1) + device_ids(1, 1)))


def test_a_part_file_missing_on_one_rank_stops_both_ranks_naming_it(tmp_path):
    write_records(tmp_path / "ranks", [{0, 1}, set()])
    start = time.monotonic()
    proc = run(["ofrecord_train.py", str(tmp_path / "ranks"), "train", "2"], 2, check=False, timeout=60)
    assert proc.returncode != 0
    assert "rank 1 of 2 failed" in proc.stderr
    assert "needs the part file(s) 'data/part-2' on rank 1 of 2 (mpiexec), which do not exist" in proc.stderr
    assert "ofrecord_train.py:37" in proc.stderr  # the reader's line
    assert time.monotonic() - start < 30
