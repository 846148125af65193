"""Reading OFRecord batches against the train step they feed.

MNIST's bundled digits written as OneFlow's docs write them (float list images,
int64 list labels, 4 part files), read 100 records a batch with and without
`random_shuffle`; the quick start's MLP train step (100x784 -> 512 -> 10, SGD)
fed by placeholders, and the same job reading its batches itself. The ratios say
whether reading is the bottleneck (goal: a batch read in under a quarter of a step).
"""

from __future__ import annotations

import struct
import tempfile
import timeit
from pathlib import Path

import numpy as np

import irflow as flow
import irflow.core.record.record_pb2 as pb
import irflow.typing as tp
from irflow.data import ofrecord

BATCH = 100


def best_per_call(fn, number: int = 50, repeat: int = 5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def write(directory: Path) -> None:
    (images, labels), _ = flow.data.load_mnist(BATCH, BATCH)
    images, labels = images.reshape(-1, 784), labels.reshape(-1)
    for part, rows in enumerate(np.array_split(np.arange(len(labels)), 4)):
        with open(directory / f"part-{part}", "wb") as f:
            for i in rows:
                data = pb.OFRecord(feature={
                    "images": pb.Feature(float_list=pb.FloatList(value=images[i].tolist())),
                    "labels": pb.Feature(int64_list=pb.Int64List(value=[int(labels[i])])),
                }).SerializeToString()  # fmt: skip
                f.write(struct.pack("<q", len(data)) + data)


def mlp(images, labels):
    hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, flow.layers.dense(hidden, 10, name="dense2"))
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
    return loss


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="ofrecord_bench_"))
    write(directory)
    fields = [ofrecord.FieldConf("images", (784,), np.dtype(np.float32)),
              ofrecord.FieldConf("labels", (), np.dtype(np.int32))]  # fmt: skip
    reads = {}
    for shuffle in (False, True):
        conf = ofrecord.ReaderConf(str(directory), BATCH, 4, random_shuffle=shuffle)
        stream = ofrecord.RecordStream([ofrecord.PartFile(p) for p in conf.part_paths()], conf)
        stream.take(1)  # open and index the first file
        reads[shuffle] = best_per_call(lambda: ofrecord.decode_fields(stream.take(BATCH), fields))

    @flow.global_function(type="train")
    def fed(images: tp.Numpy.Placeholder((BATCH, 784), dtype=flow.float),
            labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:  # fmt: skip
        return mlp(images, labels)

    x = np.random.default_rng(0).random((BATCH, 784), dtype=np.float32)
    y = np.zeros(BATCH, np.int32)
    fed(x, y)
    step = best_per_call(lambda: fed(x, y))
    flow.clear_default_session()

    @flow.global_function(type="train")
    def reading() -> tp.Numpy:
        record = flow.data.ofrecord_reader(str(directory), batch_size=BATCH, data_part_num=4)
        images = flow.data.OFRecordRawDecoder(record, "images", shape=(784,), dtype=flow.float)
        return mlp(images, flow.data.OFRecordRawDecoder(record, "labels", shape=(), dtype=flow.int32))

    for _ in range(41):  # every part file opened
        reading()
    step_reading = best_per_call(reading)
    print(f"read a batch of {BATCH} records / train step: {reads[False] / step:.2f}x "
          f"(random_shuffle: {reads[True] / step:.2f}x)")
    print(f"train step reading its batch / train step fed by placeholders: {step_reading / step:.2f}x")
    print(f"(a train step fed by placeholders: {step * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
