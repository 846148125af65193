"""MNIST as OneFlow's `flow.data.load_mnist` returns it, without a download.

OneFlow fetches Keras' `mnist.npz`; irflow cannot reach the network at run
time, so it reads that same file when the user has one and otherwise falls
back to a 5,000-digit subset bundled with the package (see README.md here).
"""

from __future__ import annotations

import gzip
import operator
import os
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np

BUNDLED = Path(__file__).with_name("mnist_5k.npz")
ENV_VAR = "IRFLOW_MNIST"
HOME_FILE = Path("~/.irflow/mnist.npz")
KEYS = ("x_train", "y_train", "x_test", "y_test")
FORMATS = ("NCHW", "NHWC")
# The standard IDX files of the full data set, as yann.lecun.com serves them (each may be gzipped).
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

Split = tuple[np.ndarray, np.ndarray]


def load_mnist(
    train_batch_size: int = 100,
    test_batch_size: int = 100,
    data_format: str = "NCHW",
    path: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
) -> tuple[Split, Split]:
    """Return `((train_images, train_labels), (test_images, test_labels))`.

    Images are float32 scaled to [0, 1] by x / 255, exactly as OneFlow's
    loader does (no mean/std normalization), shaped (num_batches, batch, 1,
    28, 28) for "NCHW" or (num_batches, batch, 28, 28, 1) for "NHWC"; labels
    are int32 shaped (num_batches, batch). Samples keep the file's order.

    The source is the first of: `path`; `out_dir` (OneFlow's download
    directory) when it holds `mnist.npz` or the four standard IDX files
    (`train-images-idx3-ubyte` and so on, gzipped or not); the file named by
    $IRFLOW_MNIST; `~/.irflow/mnist.npz`; the bundled subset (4,000 train /
    1,000 held-out test digits), with a one-line note on stderr when `out_dir`
    was named but held neither. Unlike OneFlow, which fails on a batch size
    that does not divide the data, the incomplete last batch is dropped.
    """
    if data_format not in FORMATS:
        raise ValueError(f"data_format must be one of {FORMATS}, got {data_format!r}")
    arrays = _read_dir(Path(out_dir)) if out_dir is not None and path is None else None
    x_train, y_train, x_test, y_test = arrays or _read(_source(path))
    if out_dir is not None and path is None and arrays is None:
        print(f"flow.data.load_mnist: no mnist.npz or MNIST IDX files in {out_dir}; "
              f"using the {len(x_train) + len(x_test)} digits bundled with irflow", file=sys.stderr)
    return (
        _batches(x_train, y_train, train_batch_size, "train_batch_size", data_format),
        _batches(x_test, y_test, test_batch_size, "test_batch_size", data_format),
    )


def _source(path: str | os.PathLike[str] | None) -> Path:
    """The file to read; a path the user named explicitly must exist."""
    env = os.environ.get(ENV_VAR)
    for given, what in ((path, "path"), (env, f"${ENV_VAR}")):
        if given:
            if not Path(given).is_file():
                raise ValueError(f"{what}: no MNIST file at {given}")
            return Path(given)
    home = HOME_FILE.expanduser()
    return home if home.is_file() else BUNDLED


def _read_dir(directory: Path) -> tuple[np.ndarray, ...] | None:
    """The full data set from OneFlow's download directory, or None when it holds none."""
    if (directory / "mnist.npz").is_file():
        return _read(directory / "mnist.npz")
    found = [_idx_file(directory, name) for name in IDX_FILES]
    if not all(found):
        return None
    arrays = tuple(_read_idx(f) for f in found)  # type: ignore[arg-type]
    for (x, y), part in (((arrays[0], arrays[1]), "train"), ((arrays[2], arrays[3]), "t10k")):
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(f"{directory}: {part} images {x.shape} and labels {y.shape} do not pair up")
    return arrays


def _idx_file(directory: Path, name: str) -> Path | None:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _read_idx(file: Path) -> np.ndarray:
    """One IDX file of unsigned bytes: magic 0x0000080N (N dimensions), N big-endian sizes, then the data."""
    opener = gzip.open if file.suffix == ".gz" else open
    try:
        with opener(file, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{file}: not a readable IDX file: {err}") from err
    if len(data) < 4 or data[:3] != b"\0\0\x08" or not 1 <= data[3] <= 3:
        raise ValueError(f"{file}: not an IDX file of unsigned bytes (magic {data[:4].hex()})")
    ndim = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, 4))
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"{file}: the header says {shape} ({int(np.prod(shape))} bytes), the file holds {body.size}")
    return body.reshape(shape)


def _read(file: Path) -> tuple[np.ndarray, ...]:
    """x_train, y_train, x_test, y_test from a Keras-layout mnist.npz, checked."""
    try:
        with np.load(file, allow_pickle=False) as npz:
            arrays = tuple(npz[key] for key in KEYS)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise ValueError(f"{file}: not a readable mnist.npz with keys {KEYS}: {err}") from err
    for x, y, part in ((arrays[0], arrays[1], "train"), (arrays[2], arrays[3], "test")):
        if x.dtype != np.uint8 or x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(
                f"{file}: x_{part} must be uint8 (N, H, W) and y_{part} (N,), "
                f"got {x.dtype} {x.shape} and {y.shape}"
            )
        if not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"{file}: y_{part} must hold integer labels, got {y.dtype}")
    return arrays


def _batches(x: np.ndarray, y: np.ndarray, size: int, name: str, data_format: str) -> Split:
    """Scale, cast and cut into whole batches of `size`."""
    try:
        size = operator.index(size)
    except TypeError:
        raise ValueError(f"{name} must be an int, got {size!r}") from None
    if not 0 < size <= len(x):
        raise ValueError(f"{name} must be in 1..{len(x)} (the number of samples), got {size}")
    n = len(x) // size * size
    images = x[:n].astype(np.float32) / np.float32(255.0)
    channel_axis = 2 if data_format == "NCHW" else 4
    images = np.expand_dims(images.reshape(-1, size, *x.shape[1:]), channel_axis)
    return images, y[:n].astype(np.int32).reshape(-1, size)
