"""Under mpiexec: rank 1 builds a wider hidden layer than the others, so the ranks compiled different programs."""

from __future__ import annotations

import os

import numpy as np

import irflow as flow
import irflow.typing as tp


def main() -> None:
    rank, size = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
    flow.config.cpu_device_num(size)
    hidden = 8 if rank != 1 else 12

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return flow.layers.dense(flow.layers.dense(x, hidden, name="h"), 3, name="out")

    predict(np.ones((4, 6), np.float32))


if __name__ == "__main__":
    main()
