"""Checkpoints in OneFlow's layout: read what OneFlow writes, write what it reads.

The OneFlow directories here are made by hand from the format's description
(raw little-endian bytes in `out`, a text proto in `meta`), not by irflow.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from irflow.checkpoint_store import CheckpointError, load, load_variable, save


def oneflow_variable(directory: Path, array: np.ndarray, data_type: str | None) -> None:
    directory.mkdir(parents=True)
    (directory / "out").write_bytes(array.astype(array.dtype.newbyteorder("<")).tobytes(order="C"))
    if data_type is not None:
        dims = "".join(f"  dim: {d}\n" for d in array.shape)
        (directory / "meta").write_text(f"shape {{\n{dims}}}\ndata_type: {data_type}\n")


@pytest.fixture
def oneflow_checkpoint(tmp_path) -> Path:
    ckpt = tmp_path / "of_model"
    oneflow_variable(ckpt / "dense1-weight", np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "kFloat")
    oneflow_variable(ckpt / "dense1-bias", np.array([1.5, -2.0, 3.25]), "kDouble")
    oneflow_variable(ckpt / "System-Train-TrainStep", np.array([41], np.int64), "kInt64")
    oneflow_variable(ckpt / "labels", np.array([[1, 2], [3, 4]], np.int32), "kInt32")
    oneflow_variable(ckpt / "half", np.array([0.5, 1.0], np.float16), "kFloat16")
    oneflow_variable(ckpt / "bytes", np.array([1, 255], np.uint8), "kUInt8")
    oneflow_variable(ckpt / "chars", np.array([-3, 4], np.int8), "kChar")
    (ckpt / "snapshot_done").write_bytes(b"")
    return ckpt


def test_reads_a_oneflow_checkpoint(oneflow_checkpoint):
    arrays, meta = load(oneflow_checkpoint)
    assert meta == {}
    assert sorted(arrays) == sorted(["dense1-weight", "dense1-bias", "System-Train-TrainStep", "labels", "half",
                                     "bytes", "chars"])  # fmt: skip
    np.testing.assert_array_equal(arrays["dense1-weight"], np.arange(12, dtype=np.float32).reshape(3, 4) / 7)
    assert arrays["dense1-weight"].dtype == np.float32
    np.testing.assert_array_equal(arrays["dense1-bias"], [1.5, -2.0, 3.25])
    assert arrays["System-Train-TrainStep"].dtype == np.int64 and arrays["System-Train-TrainStep"][0] == 41
    assert arrays["half"].dtype == np.float16 and arrays["chars"].dtype == np.int8
    np.testing.assert_array_equal(arrays["bytes"], [1, 255])


def test_one_variables_directory_gives_that_value(oneflow_checkpoint):
    value = load_variable(oneflow_checkpoint / "dense1-bias")
    np.testing.assert_array_equal(value, [1.5, -2.0, 3.25])


def test_without_meta_the_declared_shape_and_dtype_hold(tmp_path):
    ckpt = tmp_path / "of"
    oneflow_variable(ckpt / "w", np.arange(6, dtype=np.int32).reshape(2, 3), None)
    with pytest.raises(CheckpointError, match="variable 'w': has no w/meta and no declared shape and dtype"):
        load(ckpt)
    arrays, _ = load(ckpt, {"w": ((2, 3), np.dtype(np.int32))})
    np.testing.assert_array_equal(arrays["w"], np.arange(6).reshape(2, 3))
    with pytest.raises(CheckpointError, match=r"'w': w/out: holds 24 bytes, float64 \[4, 3\] needs 96"):
        load(ckpt, {"w": ((4, 3), np.dtype(np.float64))})
    np.testing.assert_array_equal(load_variable(ckpt / "w", {"w": ((3, 2), np.dtype(np.int32))}),
                                  np.arange(6).reshape(3, 2))  # fmt: skip


@pytest.mark.parametrize(
    "meta, match",
    [
        ("shape { dim: 2 }\ndata_type: kTensorBuffer\n", "unsupported data_type kTensorBuffer"),
        ("shape { dim: 2 }\n", "lacks a shape or a data_type"),
        ("shape { dim: 2 }\ndata_type: kFloat\nextra: 1\n", "unexpected text 'extra: 1'"),
        ("shape { dim: 3 }\ndata_type: kFloat\n", "holds 8 bytes, float32 \\[3\\] needs 12"),
    ],
)
def test_bad_meta_names_the_variable(tmp_path, meta, match):
    ckpt = tmp_path / "of"
    oneflow_variable(ckpt / "v", np.zeros(2, np.float32), "kFloat")
    (ckpt / "v" / "meta").write_text(meta)
    with pytest.raises(CheckpointError, match=f"variable 'v': .*{match}"):
        load(ckpt)



def test_a_meta_that_is_not_text_and_a_short_out_name_their_file(tmp_path):
    ckpt = tmp_path / "of"
    oneflow_variable(ckpt / "v", np.zeros(2, np.float32), "kFloat")
    (ckpt / "v" / "meta").write_bytes(b"\xff\xfe shape")
    with pytest.raises(CheckpointError, match="variable 'v': v/meta: 'utf-8' codec can't decode"):
        load(ckpt)
    oneflow_variable(ckpt / "w", np.zeros(3, np.float32), "kFloat")
    (ckpt / "v" / "meta").unlink()
    (ckpt / "w" / "out").write_bytes(b"\0" * 8)  # truncated: the meta is right, the data is short
    with pytest.raises(CheckpointError, match=r"variable 'w': w/out: holds 8 bytes, float32 \[3\] needs 12"):
        load(ckpt, {"v": ((2,), np.dtype(np.float32))})

def parse_meta_independently(text: str) -> tuple[list[int], str]:
    return [int(d) for d in re.findall(r"dim:\s*(\d+)", text)], re.search(r"data_type:\s*(\w+)", text).group(1)


def test_irflow_writes_what_oneflow_reads(tmp_path):
    """Every variable is a directory named after it, with `out` in little-endian C order and a `meta` proto."""
    arrays = {
        "dense1-weight": np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
        "big-endian": np.arange(3, dtype=">i4"),
        "scalar": np.array(2.5),
        "flag": np.array([True, False]),
    }
    save(tmp_path / "ck", arrays)
    assert (tmp_path / "ck" / "snapshot_done").is_file()
    expected_types = {"dense1-weight": "kFloat", "big-endian": "kInt32", "scalar": "kDouble", "flag": "kBool"}
    for name, array in arrays.items():
        directory = tmp_path / "ck" / name
        dims, data_type = parse_meta_independently((directory / "meta").read_text())
        assert dims == list(array.shape) and data_type == expected_types[name]
        little = np.dtype(array.dtype).newbyteorder("<")
        np.testing.assert_array_equal(np.frombuffer((directory / "out").read_bytes(), little).reshape(array.shape), array)
        np.testing.assert_array_equal(load_variable(directory), array)
    back, _ = load(tmp_path / "ck")
    assert back["big-endian"].dtype == np.int32 and back["big-endian"].dtype.isnative


def test_one_variable_of_an_irflow_checkpoint_is_checked_against_its_index(tmp_path):
    save(tmp_path / "ck", {"w": np.arange(4.0)})
    out = tmp_path / "ck" / "w" / "out"
    out.write_bytes(out.read_bytes()[:-1] + b"\x01")
    with pytest.raises(CheckpointError, match="variable 'w': checksum mismatch in w"):
        load_variable(tmp_path / "ck" / "w")


def test_saving_over_a_oneflow_checkpoint(oneflow_checkpoint):
    with pytest.raises(CheckpointError, match="is not empty; pass overwrite=True"):
        save(oneflow_checkpoint, {"w": np.zeros(2)})
    assert "dense1-weight" in load(oneflow_checkpoint)[0]
    save(oneflow_checkpoint, {"w": np.zeros(2)}, overwrite=True)
    assert list(load(oneflow_checkpoint)[0]) == ["w"]
