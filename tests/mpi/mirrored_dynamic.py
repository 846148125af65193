"""A mirrored-view train job on 2 devices whose rows differ per device and per step.

    python mirrored_dynamic.py OUT_DIR    (writes what the process got to OUT_DIR/rank<R>.npz)

In one process the call passes both devices' arrays; under `mpiexec -n 2` each
rank passes its own (a one-element list) and gets its own rows back. The
tp.Numpy output joins both devices' rows either way, and the variables after
the last step are the same on every rank (docs/dynamic.md). A predict job's max
over both devices' rows gathers them (each rank's own count), stored next to
numpy's max of the same rows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Tuple

import numpy as np

import irflow as flow
import irflow.typing as tp

ROWS = [(7, 3), (0, 8), (8, 8), (2, 5)]  # per step: device 0's rows, device 1's


def main(out: Path) -> None:
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())
    config.default_data_type(flow.double)

    @flow.global_function(type="train", function_config=config)
    def train(
        x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.double), y: tp.ListNumpy.Placeholder((8,), dtype=flow.int32)
    ) -> Tuple[tp.ListNumpy, tp.Numpy]:
        hidden = flow.layers.dense(x, 5, activation=flow.nn.relu, name="dense1",
                                   kernel_initializer=flow.random_normal_initializer(0.0, 0.5))  # fmt: skip
        logits = flow.layers.dense(hidden, 3, name="dense2", kernel_initializer=flow.random_normal_initializer(0.0, 0.5))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss, loss

    @flow.global_function(type="predict", function_config=config)
    def peak(x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.double)) -> tp.Numpy:
        return flow.math.reduce_max(x, axis=0)  # over both devices' rows, gathered

    rng = np.random.default_rng(4)
    rank = os.environ.get("PMI_RANK")
    result: dict[str, np.ndarray] = {}
    for step, rows in enumerate(ROWS):
        xs = [rng.standard_normal((n, 6)) for n in rows]
        ys = [rng.integers(0, 3, n).astype(np.int32) for n in rows]
        mine = slice(None) if rank is None else slice(int(rank), int(rank) + 1)
        parts, whole = train(xs[mine], ys[mine])
        for d, part in zip(range(2) if rank is None else [int(rank)], parts):
            result[f"part{step}-{d}"] = part
        result[f"whole{step}"] = whole
        result[f"peak{step}"] = peak(xs[mine])
        result[f"numpy_peak{step}"] = np.concatenate(xs).max(axis=0)
    for name, v in flow.get_all_variables().items():
        result[name] = v.numpy()
    np.savez(out / f"rank{rank or 0}.npz", **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
