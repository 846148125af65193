"""OneFlow's OFRecord data pipeline: write MNIST as OFRecord part files, then train and evaluate from them.

The records are written as OneFlow's "How to make an OFRecord dataset" writes
them (`record_pb2`, images as a float list, labels as an int64 list, each record
an 8-byte length and the message). The jobs take no arguments: each call reads
its batch with `flow.data.ofrecord_reader` and `OFRecordRawDecoder`.

    python examples/ofrecord_train.py [DATA_DIR]      (IRFLOW_EPOCHS, default 1)

On 2 devices, data parallel, each reading its own part files: IRFLOW_DEVICES=2
in one process, or one process per device (name the same DATA_DIR on each):

    IRFLOW_DEVICES=2 mpiexec -n 2 python examples/ofrecord_train.py /tmp/mnist_ofrecord
"""

import os
import struct
import sys
import tempfile
from typing import Tuple

import numpy as np
from models import mlp

import irflow as flow
import irflow.core.record.record_pb2 as ofrecord
import irflow.typing as tp

BATCH_SIZE = 100
TRAIN_PARTS = TEST_PARTS = 4
DEVICES = int(os.environ.get("IRFLOW_DEVICES", "1"))
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "1"))
DATA_DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="mnist_ofrecord_")


def write_part(path: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Written aside and renamed: under mpiexec every process writes the same files, and none reads a half-written one."""
    partial = f"{path}.{os.getpid()}"
    with open(partial, "wb") as f:
        for image, label in zip(images, labels):
            record = ofrecord.OFRecord(
                feature={
                    "images": ofrecord.Feature(float_list=ofrecord.FloatList(value=image.ravel().tolist())),
                    "labels": ofrecord.Feature(int64_list=ofrecord.Int64List(value=[int(label)])),
                }
            )
            serialized = record.SerializeToString()
            f.write(struct.pack("<q", record.ByteSize()))
            f.write(serialized)
    os.replace(partial, path)


def write_dataset() -> Tuple[int, int]:
    """MNIST's train digits in TRAIN_PARTS part files under DATA_DIR/train, the test digits in TEST_PARTS under
    DATA_DIR/test; how many of each."""
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    train_images, train_labels = train_images.reshape(-1, 784), train_labels.reshape(-1)
    for name in ("train", "test"):
        os.makedirs(os.path.join(DATA_DIR, name), exist_ok=True)
    for part, rows in enumerate(np.array_split(np.arange(len(train_labels)), TRAIN_PARTS)):
        write_part(os.path.join(DATA_DIR, "train", f"part-{part}"), train_images[rows], train_labels[rows])
    test_images, test_labels = test_images.reshape(-1, 784), test_labels.reshape(-1)
    for part, rows in enumerate(np.array_split(np.arange(len(test_labels)), TEST_PARTS)):
        write_part(os.path.join(DATA_DIR, "test", f"part-{part}"), test_images[rows], test_labels[rows])
    return len(train_labels), test_labels.size


TRAIN_SIZE, TEST_SIZE = write_dataset()  # before the jobs are defined: the reader checks its files then
flow.config.cpu_device_num(DEVICES)


def decode(subset: str, parts: int, shuffle: bool) -> Tuple[flow.Blob, flow.Blob]:
    record = flow.data.ofrecord_reader(
        os.path.join(DATA_DIR, subset),
        batch_size=BATCH_SIZE,
        data_part_num=parts,
        part_name_suffix_length=-1,
        random_shuffle=shuffle,
        shuffle_after_epoch=shuffle,
    )
    images = flow.data.OFRecordRawDecoder(record, "images", shape=(1, 28, 28), dtype=flow.float)
    labels = flow.data.OFRecordRawDecoder(record, "labels", shape=(), dtype=flow.int32)
    return images, labels


@flow.global_function(type="train")
def train_job() -> tp.Numpy:
    images, labels = decode("train", TRAIN_PARTS, shuffle=True)
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images), name="softmax_loss")
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
    return loss


@flow.global_function(type="predict")
def eval_job() -> Tuple[tp.Numpy, tp.Numpy]:
    images, labels = decode("test", TEST_PARTS, shuffle=False)
    return flow.math.argmax(mlp(images), axis=1), labels


def main():
    print(f"wrote {TRAIN_SIZE} training records in {TRAIN_PARTS} part files under {DATA_DIR}")
    for step in range(EPOCHS * TRAIN_SIZE // BATCH_SIZE):
        loss = train_job()
        if step % 20 == 0:
            print(loss.mean())
    correct = 0
    for _ in range(TEST_SIZE // BATCH_SIZE):
        predictions, labels = eval_job()
        correct += int((predictions == labels).sum())
    print("accuracy: {0:.1f}%".format(correct * 100 / TEST_SIZE))


if __name__ == "__main__":
    main()
