"""A mirrored-view predict job on a 2x2 mesh whose devices' rows differ per step: the rows are split over both
mesh axes and gathered along each (docs/dynamic.md).

    python mirrored_mesh.py OUT_DIR    (writes what the process got to OUT_DIR/rank<R>.npz)

In one process the call passes the four devices' arrays; under `mpiexec -n 4` each rank passes its own.
Every output joins every device's rows in the mesh's order: their column maxima, the rows themselves, the rows
concatenated with themselves doubled (gathered, returned as every device holds them), the rows flattened, every
third of them from the second (gathered, then sliced), the indices of the two largest in each column (gathered),
and an embedding of each device's own ids.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Tuple

import numpy as np

import irflow as flow
import irflow.typing as tp

ROWS = [(3, 0, 4, 1), (0, 0, 2, 0), (4, 4, 4, 4), (1, 2, 3, 4)]  # per step: devices 0-3's rows


def main(out: Path) -> None:
    flow.config.cpu_device_num(4)
    config = flow.function_config()
    config.default_placement_scope(flow.scope.placement("cpu", "0:0-3", (2, 2)))
    config.default_logical_view(flow.scope.mirrored_view())
    config.default_data_type(flow.double)

    @flow.global_function(type="predict", function_config=config)
    def gathered(
        x: tp.ListNumpy.Placeholder((4, 3), dtype=flow.double), ids: tp.ListNumpy.Placeholder((4,), dtype=flow.int32)
    ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        joined = flow.concat([x, x * 2.0], axis=0)  # every device's rows, then all of them doubled: gathered
        table = flow.constant(np.arange(20.0).reshape(10, 2), dtype=flow.double)
        return (flow.math.reduce_max(x, axis=0), flow.math.relu(x), joined, flow.reshape(x, (-1,)), x[1:12:3],
                flow.math.top_k(x, axis=0, k=2), flow.gather(table, ids))  # fmt: skip

    names = ("peak", "rows", "joined", "flat", "thirds", "top", "embedded")
    rng = np.random.default_rng(5)
    rank = os.environ.get("PMI_RANK")
    result: dict[str, np.ndarray] = {}
    for step, rows in enumerate(ROWS):
        xs = [rng.standard_normal((n, 3)) for n in rows]
        ids = [rng.integers(0, 10, n).astype(np.int32) for n in rows]
        mine = slice(None) if rank is None else slice(int(rank), int(rank) + 1)
        for name, value in zip(names, gathered(xs[mine], ids[mine])):
            result[f"{name}{step}"] = value
        x = np.concatenate(xs)
        expected = (x.max(axis=0), np.maximum(x, 0), np.concatenate([x, 2.0 * x]), x.reshape(-1), x[1:12:3],
                    np.argsort(-x, axis=0, kind="stable")[:2], np.arange(20.0).reshape(10, 2)[np.concatenate(ids)])  # fmt: skip
        for name, value in zip(names, expected):
            result[f"numpy_{name}{step}"] = value
    np.savez(out / f"rank{rank or 0}.npz", **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
