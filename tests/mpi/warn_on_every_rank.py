"""Under mpiexec: a job asking for GPUs on a machine without one warns (the fallback warning) on every rank."""

from __future__ import annotations

import os

import numpy as np

import irflow as flow
import irflow.typing as tp


def main() -> None:
    flow.config.gpu_device_num(int(os.environ["PMI_SIZE"]))

    @flow.global_function(type="predict")
    def double(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        return x * 2

    np.testing.assert_array_equal(double(np.ones((4, 2), np.float32)), np.full((4, 2), 2, np.float32))


if __name__ == "__main__":
    main()
