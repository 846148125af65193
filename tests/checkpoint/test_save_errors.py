"""Bad arguments and a hostile file system: each a CheckpointError or ExecutionError naming what and why."""

import errno
import multiprocessing
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.checkpoint_store import CheckpointError, load, save

@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_checkpoint_error_is_an_irflow_error():
    assert issubclass(flow.CheckpointError, flow.IrflowError)


@pytest.mark.parametrize("path", [None, 123, ""])
def test_bad_paths(path):
    with pytest.raises(flow.CheckpointError, match="a checkpoint path must be a non-empty str or os.PathLike"):
        flow.checkpoint.save(path)
    with pytest.raises(flow.CheckpointError, match="a checkpoint path must be a non-empty str or os.PathLike"):
        flow.checkpoint.get(path)



def test_the_working_directory_and_the_root_as_paths(tmp_path, monkeypatch):
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.array(7, np.int64)}
    save(tmp_path / "ckpt", arrays)
    monkeypatch.chdir(tmp_path / "ckpt")
    for here in (".", "sub/..", Path(".")):
        got, _ = load(here)
        assert sorted(got) == ["step", "w"]
        np.testing.assert_array_equal(got["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
        assert got["step"] == 7
    save(".", {"w": np.ones(2, np.float32)}, overwrite=True)
    np.testing.assert_array_equal(load(tmp_path / "ckpt")[0]["w"], [1.0, 1.0])
    with pytest.raises(CheckpointError, match="/: the root directory cannot be a checkpoint path"):
        flow.checkpoint.save("/", overwrite=True)

def test_get_of_a_missing_checkpoint(tmp_path):
    with pytest.raises(flow.CheckpointError, match=f"{tmp_path / 'nope'}: no checkpoint directory"):
        flow.checkpoint.get(tmp_path / "nope")


def job():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.layers.dense(x, 4, name="d")

    return f


@pytest.mark.parametrize(
    "value, match",
    [
        (None, "expects a dict of variable name to value, got NoneType"),
        ([np.zeros(3)], "expects a dict of variable name to value, got list"),
        ({1: np.zeros((4, 3), np.float32)}, r"variable names must be str, got 1 \(int\)"),
        ({"d-weight": np.ma.masked_array(np.zeros((3, 4), np.float32), mask=True)}, "'d-weight' is a masked array"),
        ({"d-weight": [[0.0] * 4] * 3}, "'d-weight' must be a numpy.ndarray, got list"),
    ],
)
def test_load_variables_rejects(value, match):
    f = job()
    x = np.ones((2, 3), np.float32)
    before = f(x)
    with pytest.raises(flow.ExecutionError, match=match) as err:
        flow.load_variables(value)
    assert err.value.location is not None and err.value.location.file == __file__
    np.testing.assert_array_equal(f(x), before)


def test_saving_over_a_checkpoint_from_the_frontend(tmp_path):
    f = job()
    f(np.ones((2, 3), np.float32))
    flow.checkpoint.save(tmp_path / "ck")
    with pytest.raises(flow.CheckpointError, match="is not empty; pass overwrite=True"):
        flow.checkpoint.save(tmp_path / "ck")
    flow.checkpoint.save(tmp_path / "ck", overwrite=True)
    flow.train.CheckPoint().save(tmp_path / "ck", overwrite=True)
    assert leftovers(tmp_path) == []


def test_a_single_variable_from_the_frontend(tmp_path):
    f = job()
    f(np.ones((2, 3), np.float32))
    flow.checkpoint.save(tmp_path / "ck")
    weight = flow.checkpoint.get(tmp_path / "ck" / "d-weight")
    np.testing.assert_array_equal(weight, flow.get_all_variables()["d-weight"].numpy())
    (tmp_path / "ck" / "d-bias" / "meta").unlink()  # now read as OneFlow's: the declared shape holds
    (tmp_path / "ck" / "index.json").unlink()
    np.testing.assert_array_equal(flow.checkpoint.get(tmp_path / "ck")["d-bias"], flow.get_all_variables()["d-bias"].numpy())


def test_disk_full_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt = tmp_path / "ck"
    save(ckpt, {"w": np.arange(3.0)})
    real_write = os.write

    def full(fd, data):
        if len(data) > 10:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(CheckpointError, match=f"{ckpt}: cannot save: No space left on device"):
        save(ckpt, {"w": np.arange(30.0)}, overwrite=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(load(ckpt)[0]["w"], np.arange(3.0))
    assert leftovers(tmp_path) == []


def test_a_parent_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match=f"its parent {tmp_path / 'file'} is a file"):
        save(tmp_path / "file" / "sub" / "ck", {"w": np.zeros(1)})
    with pytest.raises(CheckpointError, match="exists and is a file"):
        save(tmp_path / "file", {"w": np.zeros(1)}, overwrite=True)
    assert (tmp_path / "file").read_text() == "x"


def unprivileged_saves(base: Path, results: "multiprocessing.Queue[str]") -> None:
    """In a forked child, as user nobody when run by root (root ignores permissions): one line per case."""
    if os.getuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    for label, path, overwrite in [("read-only previous", base / "rw" / "ck", True), ("read-only parent", base / "ro" / "ck", False)]:
        try:
            save(path, {"w": np.arange(5.0)}, overwrite=overwrite)
            results.put(f"{label} saved")
        except CheckpointError as err:
            results.put(f"{label} CheckpointError {err}")
    results.put(f"after {sorted(os.listdir(base / 'rw'))} {load(base / 'rw' / 'ck')[0]['w'].tolist()}")
    save(base / "rw" / "other", {"w": np.arange(2.0)})
    results.put(f"later save {load(base / 'rw' / 'other')[0]['w'].tolist()}")


def test_read_only_previous_checkpoint_and_permission_denied():
    base = Path(tempfile.mkdtemp(prefix="irflow-perm-"))
    try:
        (base / "rw").mkdir()
        (base / "ro").mkdir()
        save(base / "rw" / "ck", {"w": np.arange(3.0)})
        if os.getuid() == 0:
            for p in [base, *base.rglob("*")]:
                os.chown(p, 65534, 65534)
        for p in [base / "rw" / "ck", *(base / "rw" / "ck").iterdir()]:
            if p.is_dir():
                p.chmod(0o555)
        (base / "ro").chmod(0o555)
        fork = multiprocessing.get_context("fork")
        results = fork.Queue()
        child = fork.Process(target=unprivileged_saves, args=(base, results))
        child.start()
        lines = [results.get(timeout=60) for _ in range(4)]
        child.join()
        assert child.exitcode == 0
        assert "read-only previous CheckpointError" in lines[0] and "is read-only" in lines[0], lines
        assert f"{base}/ro/ck: cannot save: Permission denied" in lines[1], lines
        assert lines[2] == "after ['ck'] [0.0, 1.0, 2.0]"  # old intact, nothing left behind
        assert lines[3] == "later save [0.0, 1.0]"
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(base)
