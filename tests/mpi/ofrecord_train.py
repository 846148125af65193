"""A job that reads its batches from OFRecord part files on 2 machines of one device each, as users run it:
in one process (the 2 devices simulated), or unchanged under `mpiexec -n 2`.

    python ofrecord_train.py RUN_DIR MODE STEPS

Each process works in RUN_DIR/rank<R> (RUN_DIR/rank0 in one process) and reads
the relative directory `data` there, so under mpiexec each rank has a disk of
its own, as separate machines do: it holds only the part files that rank
reads. MODE is "train" (consistent view: a softmax regression trained with
SGD from the records, returning the loss and the batch's record ids),
"shuffle" (the same, the records and the files' order shuffled) or "mirrored"
(a predict job in the mirrored view returning each device's record ids).
Every rank writes what it got to RUN_DIR/rank<R>/out.npz.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Tuple

import numpy as np

import irflow as flow
import irflow.typing as tp

BATCH, FEATURES, CLASSES, PARTS = 8, 6, 3, 3
MACHINES = ["0:0", "1:0"]


def initial_weight() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((CLASSES, FEATURES)).astype(np.float32) * 0.1


def read(shuffle: bool) -> Tuple[flow.Blob, flow.Blob, flow.Blob]:
    record = flow.data.ofrecord_reader(
        "data", batch_size=BATCH, data_part_num=PARTS, random_shuffle=shuffle, shuffle_buffer_size=4,
        shuffle_after_epoch=shuffle,
    )  # fmt: skip
    x = flow.data.OFRecordRawDecoder(record, "x", shape=(FEATURES,), dtype=flow.float)
    y = flow.data.OFRecordRawDecoder(record, "y", shape=(), dtype=flow.int32)
    ids = flow.data.OFRecordRawDecoder(record, "id", shape=(), dtype=flow.int64)
    return x, y, ids


def main(run_dir: Path, mode: str, steps: int) -> None:
    rank = int(os.environ.get("PMI_RANK", "0"))
    os.chdir(run_dir / f"rank{rank}")
    out: dict[str, np.ndarray] = {}
    if mode == "mirrored":
        config = flow.function_config()
        config.default_logical_view(flow.scope.mirrored_view())

        with flow.scope.placement("cpu", MACHINES):  # the mirrored view's devices are where the job is defined

            @flow.global_function(type="predict", function_config=config)
            def ids_job() -> tp.ListNumpy:
                return read(shuffle=False)[2]

        for step in range(steps):
            for device, part in enumerate(ids_job(), start=rank):  # one process: both devices' ids; a rank: its own
                out[f"ids{step}-{device}"] = part
    else:

        @flow.global_function(type="train")
        def train_job() -> Tuple[tp.Numpy, tp.Numpy]:
            with flow.scope.placement("cpu", MACHINES):
                x, y, ids = read(shuffle=mode == "shuffle")
                logits = flow.layers.dense(x, CLASSES, name="fc", bias_initializer=flow.zeros_initializer())
                loss = flow.math.reduce_mean(flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
                flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
            return loss, ids

        flow.load_variables({"fc-weight": initial_weight()})
        for step in range(steps):
            out[f"loss{step}"], out[f"ids{step}"] = train_job()
        out.update({f"var:{k}": v.numpy() for k, v in flow.get_all_variables().items()})
    np.savez("out.npz", **out)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2], int(sys.argv[3]))
