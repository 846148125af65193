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


def train(tmp_path: Path, devices: int, mode: str, ranks: int | None, steps: int = 4, checkpoint: str = "") -> dict:
    out = tmp_path / f"{mode}-{devices}-{ranks}.npz"
    run(["train_mlp.py", str(devices), mode, str(steps), str(out), *([checkpoint] if checkpoint else [])], ranks)
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


def test_a_checkpoint_written_on_four_ranks_loads_in_one_process(tmp_path):
    checkpoint = tmp_path / "ckpt"
    trained = train(tmp_path, 4, "data", 4, checkpoint=str(checkpoint))
    assert (checkpoint).is_dir()
    out = tmp_path / "restored.npz"
    run(["predict_from_checkpoint.py", str(checkpoint), str(tmp_path / "data-4-4.npz"), str(out)], None)
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
