"""Checkpoints shared between processes: a load during saves, saves killed part-way."""

import itertools
import multiprocessing
import os
import signal
import time
from pathlib import Path

import numpy as np

from irflow.checkpoint_store import CheckpointError, load, save

VARIABLES, SIZE = 8, 1 << 14


def generation(gen: int, variables: int = VARIABLES) -> dict[str, np.ndarray]:
    """A checkpoint whose every value is its generation number."""
    return {f"v{i}": np.full(SIZE, gen, np.int64) for i in range(variables)}


def save_forever(path: Path) -> None:
    for gen in itertools.count(1):
        save(path, generation(gen), {"gen": gen}, overwrite=True)


def start_writer(path: Path) -> multiprocessing.Process:
    """Another process (forked: it starts at once) saving generation 1, 2, ... to `path` until killed."""
    writer = multiprocessing.get_context("fork").Process(target=save_forever, args=(path,), daemon=True)
    writer.start()
    return writer


def stop(writer: multiprocessing.Process) -> None:
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()


def one_generation(arrays: dict[str, np.ndarray], meta: dict, variables: int = VARIABLES) -> bool:
    return len(arrays) == variables and {int(v) for a in arrays.values() for v in np.unique(a)} == {meta["gen"]}


def test_a_load_during_saves_is_one_whole_checkpoint(tmp_path):
    """Every load gives one generation, never weights of one save and others of the next; errors are rare."""
    ckpt = tmp_path / "ckpt"
    save(ckpt, generation(0), {"gen": 0})
    writer = start_writer(ckpt)
    loads = errors = 0
    mixed = []
    deadline = time.monotonic() + 5.0
    try:
        while loads < 100 and time.monotonic() < deadline:
            try:
                arrays, meta = load(ckpt)
            except CheckpointError:
                errors += 1
                continue
            finally:
                loads += 1
            if not one_generation(arrays, meta):
                mixed.append(meta["gen"])
    finally:
        stop(writer)
    assert loads >= 10, "the writer should have run alongside a number of loads"
    assert mixed == []
    assert errors <= loads // 20, f"{errors} of {loads} loads failed while a writer saved"


def test_killed_saves_leave_one_checkpoint_and_the_next_load_cleans_up(tmp_path):
    """SIGKILL at random points of saves: a load then gets a whole generation and leaves no temporaries."""
    ckpt = tmp_path / "ckpt"
    save(ckpt, generation(0), {"gen": 0})
    rng = np.random.default_rng(0)
    for delay in rng.uniform(0.0, 0.4, size=6):
        writer = start_writer(ckpt)
        time.sleep(delay)
        stop(writer)
        arrays, meta = load(ckpt)
        assert one_generation(arrays, meta)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_a_killed_save_is_cleaned_by_the_next_save(tmp_path):
    ckpt = tmp_path / "ckpt"
    save(ckpt, generation(0), {"gen": 0})
    writer = start_writer(ckpt)
    time.sleep(0.15)
    stop(writer)
    save(ckpt, generation(7), {"gen": 7}, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert load(ckpt)[1] == {"gen": 7}


def save_killed_at(path: Path, gen: int, step: int, calls: list[str]) -> None:
    """Save generation `gen` of two variables, SIGKILLing this process just before its `step`-th fsync or rename."""
    for name in ("fsync", "rename"):
        real = getattr(os, name)

        def hooked(*args, real=real):
            calls.append(real.__name__)
            if len(calls) == step:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args)

        setattr(os, name, hooked)
    save(path, generation(gen, 2), {"gen": gen}, overwrite=True)
    (path.parent / "steps").write_text(str(len(calls)))


def test_a_kill_before_each_fsync_and_rename_leaves_the_old_or_the_new_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    save(ckpt, generation(0, 2), {"gen": 0})
    fork = multiprocessing.get_context("fork")
    counter = fork.Process(target=save_killed_at, args=(ckpt, 0, 0, []))  # kills nothing: counts the steps
    counter.start()
    counter.join()
    total = int((tmp_path / "steps").read_text())
    (tmp_path / "steps").unlink()
    assert total >= 2 * 3 + 3 + 2  # each variable's two files and directory, the index, the marker, two renames
    landed = []
    for step in range(1, total + 1):
        killed = fork.Process(target=save_killed_at, args=(ckpt, step, step, []))
        killed.start()
        killed.join()
        assert killed.exitcode == -signal.SIGKILL
        arrays, meta = load(ckpt)
        assert one_generation(arrays, meta, 2) and meta["gen"] in (step - 1, step)  # the old or the new
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
        landed.append(meta["gen"] == step)
        if not landed[-1]:
            save(ckpt, generation(step, 2), {"gen": step}, overwrite=True)  # the next kill replaces generation step
    assert not landed[0] and landed[-1], landed  # killed before the first step: the old; before the last: the new
