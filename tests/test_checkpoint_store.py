"""irflow.checkpoint_store: round trips, atomic replacement, corruption detection."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irflow import checkpoint_store
from irflow.checkpoint_store import CheckpointError, load, save

REPO = Path(__file__).resolve().parent.parent


def sample() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "conv1/weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "conv1/bias-0.m": np.zeros(4, np.float64),
        "step": np.array(7, np.int64),
        "../escape": np.arange(6, dtype=np.int64).reshape(2, 3),
        "Ünïcode name with spaces": np.ones((0, 5), np.float32),
        "fortran": np.asfortranarray(rng.standard_normal((3, 2))),
        "view": np.arange(20.0)[::3],
        "": np.array([True, False]),
    }


def assert_same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        np.testing.assert_array_equal(got[name], array)


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_round_trip(tmp_path):
    ckpt = tmp_path / "ckpt"
    save(ckpt, sample(), meta={"step": 7, "lr": 0.1, "names": ["a", "b"]})
    arrays, meta = load(ckpt)
    assert_same(arrays, sample())
    assert meta == {"step": 7, "lr": 0.1, "names": ["a", "b"]}
    assert leftovers(tmp_path) == []


def test_files_are_safe_and_indexed(tmp_path):
    save(tmp_path / "ckpt", sample())
    files = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert "index.json" in files and len(files) == len(sample()) + 1
    assert all("/" not in f and not f.startswith(".") for f in files)
    index = json.loads((tmp_path / "ckpt" / "index.json").read_text())
    assert index["version"] == checkpoint_store.VERSION
    entry = index["variables"]["conv1/weight"]
    assert entry["shape"] == [4, 3, 3, 3] and entry["dtype"] == "<f4"
    assert len(entry["sha256"]) == 64


def test_save_replaces_and_creates_parents(tmp_path):
    ckpt = tmp_path / "runs" / "a" / "ckpt"
    save(ckpt, {"w": np.zeros(3)})
    save(ckpt, {"v": np.ones(2, np.int64)}, meta={"epoch": 2})
    arrays, meta = load(ckpt)
    assert_same(arrays, {"v": np.ones(2, np.int64)})
    assert meta == {"epoch": 2}
    assert leftovers(ckpt.parent) == []


def fail_on_call(monkeypatch, attr: str, obj, n: int) -> None:
    """Make the n-th call of obj.attr raise KeyboardInterrupt, as a user's Ctrl-C would."""
    real = getattr(obj, attr)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) == n:
            raise KeyboardInterrupt("simulated interrupt")
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, attr, flaky)


@pytest.mark.parametrize(
    "attr, obj, n",
    [
        ("save", np, 3),  # mid-way through the variables
        ("dump", json, 1),  # writing the index
        ("rename", os, 1),  # moving the old checkpoint aside
        ("rename", os, 2),  # moving the new one into place
    ],
)
def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch, attr, obj, n):
    ckpt = tmp_path / "ckpt"
    save(ckpt, sample(), meta={"step": 1})
    fail_on_call(monkeypatch, attr, obj, n)
    with pytest.raises(KeyboardInterrupt):
        save(ckpt, {name: a + 1 for name, a in sample().items() if a.dtype != bool}, {"step": 2})
    monkeypatch.undo()
    arrays, meta = load(ckpt)
    assert_same(arrays, sample())
    assert meta == {"step": 1}
    assert leftovers(tmp_path) == []


def test_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    fail_on_call(monkeypatch, "save", np, 2)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path / "ckpt", sample())
    assert list(tmp_path.iterdir()) == []


def test_crash_between_renames_is_recovered(tmp_path):
    """A killed process can leave the old checkpoint aside and the new one unfinished."""
    ckpt = tmp_path / "ckpt"
    save(ckpt, {"w": np.arange(3)})
    os.rename(ckpt, tmp_path / ".ckpt.old")
    (tmp_path / ".ckpt.tmp").mkdir()
    assert_same(load(ckpt)[0], {"w": np.arange(3)})
    save(ckpt, {"w": np.arange(4)})
    assert_same(load(ckpt)[0], {"w": np.arange(4)})
    assert leftovers(tmp_path) == []


def test_refuses_to_replace_non_checkpoints(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(CheckpointError, match="refusing"):
        save(precious, {"w": np.zeros(1)})
    assert (precious / "thesis.tex").read_text() == "years of work"
    (tmp_path / "empty").mkdir()
    save(tmp_path / "empty", {"w": np.zeros(1)})
    assert "w" in load(tmp_path / "empty")[0]


@pytest.mark.parametrize(
    "arrays, meta, match",
    [
        ({1: np.zeros(1)}, None, "names must be str"),
        ({"o": np.array([object()])}, None, "'o'.*cannot be saved"),
    ],
)
def test_unsaveable_input_writes_nothing(tmp_path, arrays, meta, match):
    with pytest.raises(CheckpointError, match=match):
        save(tmp_path / "ckpt", arrays, meta)
    assert list(tmp_path.iterdir()) == []


def test_unserializable_meta_writes_nothing(tmp_path):
    with pytest.raises(TypeError):
        save(tmp_path / "ckpt", {"w": np.zeros(1)}, {"when": object()})
    assert list(tmp_path.iterdir()) == []


def saved(tmp_path: Path) -> tuple[Path, dict]:
    ckpt = tmp_path / "ckpt"
    save(ckpt, sample())
    return ckpt, json.loads((ckpt / "index.json").read_text())


def rewrite_index(ckpt: Path, index: dict) -> None:
    (ckpt / "index.json").write_text(json.dumps(index))


def test_missing_directory_and_index(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint directory"):
        load(tmp_path / "nowhere")
    ckpt, _ = saved(tmp_path)
    (ckpt / "index.json").unlink()
    with pytest.raises(CheckpointError, match=f"{ckpt}: missing index.json"):
        load(ckpt)


def test_unreadable_or_foreign_index(tmp_path):
    ckpt, index = saved(tmp_path)
    (ckpt / "index.json").write_text("{ truncated")
    with pytest.raises(CheckpointError, match="unreadable index.json"):
        load(ckpt)
    rewrite_index(ckpt, {"variables": {}})
    with pytest.raises(CheckpointError, match="not an irflow-checkpoint index"):
        load(ckpt)


def test_unknown_version(tmp_path):
    ckpt, index = saved(tmp_path)
    rewrite_index(ckpt, {**index, "version": 99})
    with pytest.raises(CheckpointError, match="unknown format version 99"):
        load(ckpt)


def test_missing_variable_file(tmp_path):
    ckpt, index = saved(tmp_path)
    (ckpt / index["variables"]["conv1/weight"]["file"]).unlink()
    expected = f"{ckpt}: variable 'conv1/weight': missing file"
    with pytest.raises(CheckpointError, match=expected) as err:
        load(ckpt)
    assert err.value.variable == "conv1/weight" and err.value.path == ckpt


def test_flipped_byte_fails_checksum(tmp_path):
    ckpt, index = saved(tmp_path)
    file = ckpt / index["variables"]["step"]["file"]
    data = bytearray(file.read_bytes())
    data[-1] ^= 0x01
    file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="'step': checksum mismatch"):
        load(ckpt)


def test_truncated_file_fails_checksum(tmp_path):
    ckpt, index = saved(tmp_path)
    file = ckpt / index["variables"]["conv1/weight"]["file"]
    file.write_bytes(file.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="'conv1/weight': checksum mismatch"):
        load(ckpt)


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("shape", [2, 2], r"holds <f4 \[4, 3, 3, 3\], index says <f4 \[2, 2\]"),
        ("dtype", "<f8", "index says <f8"),
        ("file", "../outside.npy", "bad file name"),
    ],
)
def test_index_disagreeing_with_file(tmp_path, field, value, match):
    ckpt, index = saved(tmp_path)
    index["variables"]["conv1/weight"][field] = value
    rewrite_index(ckpt, index)
    with pytest.raises(CheckpointError, match=f"'conv1/weight': .*{match}"):
        load(ckpt)


def test_save_in_one_process_load_in_another(tmp_path):
    ckpt = tmp_path / "ckpt"
    writer = (
        "import numpy as np, sys\n"
        "from irflow.checkpoint_store import save\n"
        "save(sys.argv[1], {'net/w-1.0': np.arange(12, dtype=np.float32).reshape(3, 4),"
        " 'step': np.array(5)}, meta={'by': 'child'})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", writer, str(ckpt)], check=True, env=env, cwd=tmp_path)
    arrays, meta = load(ckpt)
    np.testing.assert_array_equal(arrays["net/w-1.0"], np.arange(12.0).reshape(3, 4))
    assert arrays["net/w-1.0"].dtype == np.float32
    assert arrays["step"] == 5 and meta == {"by": "child"}

    reader = (
        "import sys\n"
        "from irflow.checkpoint_store import load\n"
        "arrays, meta = load(sys.argv[1])\n"
        "print(arrays['net/w-1.0'].sum(), int(arrays['step']), meta['by'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", reader, str(ckpt)],
        check=True, env=env, capture_output=True, text=True,
    )
    assert out.stdout.split() == ["66.0", "5", "child"]
