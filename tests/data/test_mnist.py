"""irflow.data.load_mnist: OneFlow's shapes and scaling, the bundled split, user files."""

from pathlib import Path

import numpy as np
import pytest

from irflow.data import load_mnist
from irflow.data.mnist import BUNDLED


@pytest.fixture(autouse=True)
def no_user_mnist(monkeypatch, tmp_path):
    """Keep a developer's own ~/.irflow/mnist.npz or $IRFLOW_MNIST out of the tests."""
    monkeypatch.delenv("IRFLOW_MNIST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def fake_mnist(path: Path, n_train: int = 12, n_test: int = 6) -> Path:
    rng = np.random.default_rng(1)
    np.savez(
        path,
        x_train=rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        y_train=np.arange(n_train, dtype=np.uint8) % 10,
        x_test=np.full((n_test, 28, 28), 255, dtype=np.uint8),
        y_test=np.arange(n_test, dtype=np.uint8) % 10,
    )
    return path


@pytest.mark.parametrize(
    "data_format, image_shape", [("NCHW", (1, 28, 28)), ("NHWC", (28, 28, 1))]
)
def test_shapes_and_dtypes(data_format, image_shape):
    (x, y), (tx, ty) = load_mnist(100, 50, data_format)
    assert x.shape == (40, 100, *image_shape) and x.dtype == np.float32
    assert y.shape == (40, 100) and y.dtype == np.int32
    assert tx.shape == (20, 50, *image_shape) and ty.shape == (20, 50)


def test_defaults_follow_oneflow():
    (x, y), (tx, ty) = load_mnist()
    assert x.shape == (40, 100, 1, 28, 28) and tx.shape == (10, 100, 1, 28, 28)


def test_values_are_scaled_like_oneflow():
    (x, y), _ = load_mnist()
    assert x.min() == 0.0 and x.max() == 1.0
    raw = np.load(BUNDLED)["x_train"][:100]
    np.testing.assert_array_equal(x[0, :, 0], raw.astype(np.float32) / 255)
    assert set(np.unique(y)) == set(range(10))


def test_formats_hold_the_same_pixels():
    (nchw, _), _ = load_mnist(data_format="NCHW")
    (nhwc, _), _ = load_mnist(data_format="NHWC")
    np.testing.assert_array_equal(nchw[:, :, 0], nhwc[..., 0])


def test_incomplete_batches_are_dropped():
    (x, y), (tx, ty) = load_mnist(train_batch_size=300, test_batch_size=999)
    assert x.shape[:2] == (13, 300) and y.shape == (13, 300)
    assert tx.shape[:2] == (1, 999)


def test_held_out_test_is_disjoint_and_balanced():
    (x, _), (tx, ty) = load_mnist(1000, 1000)
    train = {img.tobytes() for img in x.reshape(-1, 784)}
    assert not any(img.tobytes() in train for img in tx.reshape(-1, 784))
    assert np.bincount(ty.ravel(), minlength=10).tolist() == [100] * 10


def test_batches_mix_classes():
    (_, y), _ = load_mnist()
    assert all(len(np.unique(batch)) >= 5 for batch in y)


def test_custom_file_by_argument_env_and_home(tmp_path, monkeypatch):
    fake = fake_mnist(tmp_path / "mnist.npz")
    (x, y), (tx, ty) = load_mnist(4, 3, path=fake)
    assert x.shape == (3, 4, 1, 28, 28) and tx.shape == (2, 3, 1, 28, 28)
    assert np.all(tx == 1.0) and y.ravel().tolist() == [i % 10 for i in range(12)]

    monkeypatch.setenv("IRFLOW_MNIST", str(fake))
    assert load_mnist(4, 3)[0][0].shape == (3, 4, 1, 28, 28)

    monkeypatch.delenv("IRFLOW_MNIST")
    home = Path(tmp_path / "home" / ".irflow")
    home.mkdir(parents=True)
    fake_mnist(home / "mnist.npz")
    assert load_mnist(4, 3)[0][0].shape == (3, 4, 1, 28, 28)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"train_batch_size": 0}, "train_batch_size"),
        ({"test_batch_size": -1}, "test_batch_size"),
        ({"train_batch_size": 4001}, "train_batch_size"),
        ({"test_batch_size": 1001}, "test_batch_size"),
        ({"train_batch_size": 2.5}, "train_batch_size"),
        ({"data_format": "NCWH"}, "data_format"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_mnist(**kwargs)


def test_missing_files_are_named(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="path: no MNIST file"):
        load_mnist(path=tmp_path / "nope.npz")
    monkeypatch.setenv("IRFLOW_MNIST", str(tmp_path / "gone.npz"))
    with pytest.raises(ValueError, match="IRFLOW_MNIST.*gone.npz"):
        load_mnist()


def test_corrupt_files_are_named(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip at all")
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(BUNDLED.read_bytes()[:50_000])
    missing_key = tmp_path / "missing_key.npz"
    np.savez(missing_key, x_train=np.zeros((2, 28, 28), np.uint8))
    float_images = tmp_path / "float_images.npz"
    np.savez(float_images, x_train=np.zeros((2, 28, 28)), y_train=np.zeros(2, np.uint8),
             x_test=np.zeros((2, 28, 28)), y_test=np.zeros(2, np.uint8))
    ragged = tmp_path / "ragged.npz"
    np.savez(ragged, x_train=np.zeros((2, 28, 28), np.uint8), y_train=np.zeros(3, np.uint8),
             x_test=np.zeros((2, 28, 28), np.uint8), y_test=np.zeros(2, np.uint8))
    for bad in (garbage, truncated, missing_key, float_images, ragged):
        with pytest.raises(ValueError, match=bad.name):
            load_mnist(1, 1, path=bad)


def test_bundled_file_is_small():
    assert BUNDLED.stat().st_size < 3 * 2**20


def write_idx(path: Path, array: np.ndarray, compress: bool) -> None:
    """The IDX layout written independently of the reader: magic, big-endian sizes, bytes."""
    import gzip
    import struct

    raw = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)


@pytest.mark.parametrize("compress", [False, True])
def test_out_dir_with_idx_files(tmp_path, compress, capsys):
    rng = np.random.default_rng(2)
    parts = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": (np.arange(20) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(10)[::-1] % 10).astype(np.uint8),
    }
    for name, array in parts.items():
        write_idx(tmp_path / name, array, compress)
    (x, y), (tx, ty) = load_mnist(10, 5, out_dir=tmp_path)
    assert x.shape == (2, 10, 1, 28, 28) and tx.shape == (2, 5, 1, 28, 28)
    np.testing.assert_array_equal(x.reshape(20, 28, 28), parts["train-images-idx3-ubyte"] / np.float32(255))
    np.testing.assert_array_equal(ty.reshape(-1), parts["t10k-labels-idx1-ubyte"])
    assert capsys.readouterr().err == ""


def test_out_dir_with_mnist_npz(tmp_path):
    fake_mnist(tmp_path / "mnist.npz")
    (x, _), (tx, _) = load_mnist(4, 3, out_dir=tmp_path)
    assert x.shape[:2] == (3, 4) and tx.shape[:2] == (2, 3)


def test_out_dir_without_data_uses_the_bundled_subset_with_a_note(tmp_path, capsys):
    (x, _), _ = load_mnist(100, 100, out_dir=tmp_path)
    assert x.shape[0] == 40
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no mnist.npz or MNIST IDX files in {tmp_path}" in err


def test_a_broken_idx_file_is_named(tmp_path):
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        (tmp_path / name).write_bytes(b"\0\0\x08\x03" + (2).to_bytes(4, "big") * 3 + b"short")
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte: the header says \(2, 2, 2\)"):
        load_mnist(1, 1, out_dir=tmp_path)
