"""irflow.checkpoint_store: round trips, atomic replacement, corruption detection."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irflow import checkpoint_store
from irflow import errors as flow_errors
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
        "conv1/weight-momentum": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
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


def test_files_are_oneflows_layout_and_indexed(tmp_path):
    save(tmp_path / "ckpt", sample())
    top = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert {"index.json", "snapshot_done"} <= set(top) and len(top) == len(sample()) + 2
    assert all("/" not in f and not f.startswith(".") for f in top)
    assert "fortran" in top and "conv1-x" not in top  # safe names are kept, as OneFlow writes them
    index = json.loads((tmp_path / "ckpt" / "index.json").read_text())
    assert index["version"] == checkpoint_store.VERSION and index["count"] == len(sample())
    entry = index["variables"]["conv1/weight"]
    assert entry["shape"] == [4, 3, 3, 3] and entry["dtype"] == "<f4"
    assert len(entry["sha256"]) == 64 and len(index["sha256"]) == 64
    for name, array in sample().items():
        directory = tmp_path / "ckpt" / index["variables"][name]["dir"]
        assert sorted(p.name for p in directory.iterdir()) == ["meta", "out"]
        assert (directory / "out").read_bytes() == np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()


def test_save_over_a_checkpoint_needs_overwrite(tmp_path):
    ckpt = tmp_path / "runs" / "a" / "ckpt"
    save(ckpt, {"w": np.zeros(3)})
    with pytest.raises(CheckpointError, match=f"{ckpt}: is not empty; pass overwrite=True"):
        save(ckpt, {"v": np.ones(2, np.int64)})
    assert_same(load(ckpt)[0], {"w": np.zeros(3)})
    save(ckpt, {"v": np.ones(2, np.int64)}, meta={"epoch": 2}, overwrite=True)
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
        ("_write_file", checkpoint_store, 3),  # mid-way through the variables
        ("_index_digest", checkpoint_store, 1),  # writing the index
        ("rename", os, 1),  # moving the old checkpoint aside
        ("rename", os, 2),  # moving the new one into place
    ],
)
def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch, attr, obj, n):
    ckpt = tmp_path / "ckpt"
    save(ckpt, sample(), meta={"step": 1})
    fail_on_call(monkeypatch, attr, obj, n)
    with pytest.raises(KeyboardInterrupt):
        save(ckpt, {name: a + 1 for name, a in sample().items() if a.dtype != bool}, {"step": 2}, overwrite=True)
    monkeypatch.undo()
    arrays, meta = load(ckpt)
    assert_same(arrays, sample())
    assert meta == {"step": 1}
    assert leftovers(tmp_path) == []


def test_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    fail_on_call(monkeypatch, "_write_file", checkpoint_store, 2)
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
    save(ckpt, {"w": np.arange(4)}, overwrite=True)
    assert_same(load(ckpt)[0], {"w": np.arange(4)})
    assert leftovers(tmp_path) == []


def test_refuses_to_replace_non_checkpoints(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(CheckpointError, match="not empty"):
        save(precious, {"w": np.zeros(1)})
    with pytest.raises(CheckpointError, match="refusing"):
        save(precious, {"w": np.zeros(1)}, overwrite=True)
    assert (precious / "thesis.tex").read_text() == "years of work"
    (tmp_path / "empty").mkdir()
    save(tmp_path / "empty", {"w": np.zeros(1)})
    assert "w" in load(tmp_path / "empty")[0]


@pytest.mark.parametrize(
    "arrays, meta, match",
    [
        ({1: np.zeros(1)}, None, "names must be str"),
        ({"o": np.array([object()])}, None, "'o'.*dtype object has no OneFlow data type"),
        ({"c": np.zeros(2, np.complex64)}, None, "'c'.*complex64 has no OneFlow data type"),
        ({"m": np.ma.masked_array([1.0, 2.0], mask=[0, 1])}, None, "'m'.*masked array"),
        ([np.zeros(1)], None, "arrays must be a dict"),
        ({"w": np.zeros(1)}, {"when": object()}, "meta is not JSON-serializable"),
        ({"w": np.zeros(1)}, [1], "meta must be a dict"),
    ],
)
def test_unsaveable_input_writes_nothing(tmp_path, arrays, meta, match):
    with pytest.raises(CheckpointError, match=match):
        save(tmp_path / "ckpt", arrays, meta)
    assert list(tmp_path.iterdir()) == []


def saved(tmp_path: Path) -> tuple[Path, dict]:
    ckpt = tmp_path / "ckpt"
    save(ckpt, sample())
    return ckpt, json.loads((ckpt / "index.json").read_text())


def rewrite_index(ckpt: Path, index: dict, resign: bool = False) -> None:
    """Write `index`; with `resign`, with a fresh checksum, as a tamperer who knows the format would."""
    if resign:
        index = {**index, "sha256": checkpoint_store._index_digest({k: v for k, v in index.items() if k != "sha256"})}
    (ckpt / "index.json").write_text(json.dumps(index, indent=1))


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint directory"):
        load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="is empty"):
        load(tmp_path / "empty")


def test_without_its_index_a_checkpoint_reads_as_oneflows(tmp_path):
    """OneFlow's own readers ignore index.json; so does irflow when it is gone (no checksums then)."""
    ckpt, index = saved(tmp_path)
    (ckpt / "index.json").unlink()
    arrays, meta = load(ckpt)
    assert meta == {}
    assert_same({n: arrays[index["variables"][n]["dir"]] for n in sample()}, sample())


def test_unreadable_or_foreign_index(tmp_path):
    ckpt, index = saved(tmp_path)
    (ckpt / "index.json").write_text("{ truncated")
    with pytest.raises(CheckpointError, match="unreadable index.json"):
        load(ckpt)
    rewrite_index(ckpt, {"variables": {}})
    with pytest.raises(CheckpointError, match="not an irflow-checkpoint index"):
        load(ckpt)


def test_deeply_nested_index(tmp_path):
    ckpt, _ = saved(tmp_path)
    (ckpt / "index.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match="index.json nests too deeply"):
        load(ckpt)


def test_unknown_version(tmp_path):
    ckpt, index = saved(tmp_path)
    rewrite_index(ckpt, {**index, "version": 99})
    with pytest.raises(CheckpointError, match="unknown format version 99"):
        load(ckpt)


def test_missing_variable_file(tmp_path):
    ckpt, index = saved(tmp_path)
    (ckpt / index["variables"]["conv1/weight"]["dir"] / "out").unlink()
    expected = f"{ckpt}: variable 'conv1/weight': missing"
    with pytest.raises(CheckpointError, match=expected) as err:
        load(ckpt)
    assert err.value.variable == "conv1/weight" and err.value.path == ckpt
    assert isinstance(err.value, flow_errors.IrflowError)


@pytest.mark.parametrize("part", ["out", "meta"])
def test_flipped_byte_fails_checksum(tmp_path, part):
    ckpt, index = saved(tmp_path)
    file = ckpt / index["variables"]["step"]["dir"] / part
    data = bytearray(file.read_bytes())
    data[-2] ^= 0x01
    file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="'step': checksum mismatch"):
        load(ckpt)


def test_truncated_file_fails_checksum(tmp_path):
    ckpt, index = saved(tmp_path)
    file = ckpt / index["variables"]["conv1/weight"]["dir"] / "out"
    file.write_bytes(file.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="'conv1/weight': checksum mismatch"):
        load(ckpt)


def test_every_bit_flip_in_the_index_is_caught(tmp_path):
    """A flipped bit that keeps the JSON valid could rename a variable: the index's own checksum catches it."""
    ckpt, _ = saved(tmp_path)
    original = (ckpt / "index.json").read_bytes()
    rng = np.random.default_rng(1)
    for position in rng.choice(len(original) * 8, size=300, replace=False):
        data = bytearray(original)
        data[position // 8] ^= 1 << (position % 8)
        (ckpt / "index.json").write_bytes(bytes(data))
        with pytest.raises(CheckpointError):
            load(ckpt)
    (ckpt / "index.json").write_bytes(original)
    assert_same(load(ckpt)[0], sample())


def tampered(index: dict, how: str) -> dict:
    variables = dict(index["variables"])
    if how == "drop one":
        del variables["conv1/bias-0.m"]
    elif how == "drop all":
        variables = {}
    elif how == "swap two of one shape":  # weight and momentum exchanged
        a, b = variables["conv1/weight"], variables["conv1/weight-momentum"]
        variables["conv1/weight"], variables["conv1/weight-momentum"] = b, a
    elif how == "rename one":
        variables["conv1/weigHt"] = variables.pop("conv1/weight")
    elif how == "add one":
        variables["ghost"] = {**variables["step"], "dir": "ghost"}
    elif how == "change a shape":
        variables["conv1/weight"] = {**variables["conv1/weight"], "shape": [2, 2]}
    return {**index, "variables": variables, "count": len(variables)}


TAMPERING = ["drop one", "drop all", "swap two of one shape", "rename one", "add one", "change a shape"]


@pytest.mark.parametrize("how", TAMPERING)
def test_tampered_index_fails_its_checksum(tmp_path, how):
    ckpt, index = saved(tmp_path)
    rewrite_index(ckpt, tampered(index, how))
    with pytest.raises(CheckpointError, match=f"{ckpt}: checksum mismatch in index.json"):
        load(ckpt)


@pytest.mark.parametrize(
    "how, match",
    [
        ("drop one", r"holds '00001-conv1_bias-0.m', which index.json does not list"),
        ("drop all", r"holds .*, which index.json does not list"),
        ("swap two of one shape", r"'conv1/weight': checksum mismatch in 00008-conv1_weight-momentum: its data is not"),
        ("rename one", r"variable 'conv1/weigHt': checksum mismatch"),
        ("add one", r"variable 'ghost': missing ghost/meta"),
        ("change a shape", r"variable 'conv1/weight': .*holds <f4 \[4, 3, 3, 3\], index says <f4 \[2, 2\]"),
    ],
)
def test_tampered_and_resigned_index_is_still_caught(tmp_path, how, match):
    """Even with a recomputed index checksum: names are bound to their data, and every file must be listed."""
    ckpt, index = saved(tmp_path)
    rewrite_index(ckpt, tampered(index, how), resign=True)
    with pytest.raises(CheckpointError, match=match):
        load(ckpt)


def test_count_and_stray_files(tmp_path):
    ckpt, index = saved(tmp_path)
    rewrite_index(ckpt, {**index, "count": 3}, resign=True)
    with pytest.raises(CheckpointError, match="count disagrees"):
        load(ckpt)
    rewrite_index(ckpt, index)
    (ckpt / "notes.txt").write_text("x")
    with pytest.raises(CheckpointError, match="holds 'notes.txt', which index.json does not list"):
        load(ckpt)
    (ckpt / "notes.txt").unlink()
    (ckpt / "step" / "extra").write_text("x")
    with pytest.raises(CheckpointError, match="'step': step holds 'extra'"):
        load(ckpt)
    (ckpt / "step" / "extra").unlink()
    assert_same(load(ckpt)[0], sample())


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("file", "x", "malformed index.json entry"),
        ("dir", "../outside", "bad directory name"),
        ("dir", "step", "directory 'step' listed twice"),
    ],
)
def test_malformed_entries(tmp_path, field, value, match):
    ckpt, index = saved(tmp_path)
    index["variables"]["conv1/weight"][field] = value
    rewrite_index(ckpt, index, resign=True)
    with pytest.raises(CheckpointError, match=match):
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
