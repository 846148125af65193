"""A mirrored-view predict job on a 2x2 mesh whose devices' rows differ per step: the rows are split over both
mesh axes and gathered along each (docs/dynamic.md).

    python mirrored_mesh.py OUT_DIR    (writes what the process got to OUT_DIR/rank<R>.npz)

In one process the call passes the four devices' arrays; under `mpiexec -n 4` each rank passes its own.
Every output joins every device's rows in the mesh's order: their column maxima, the rows themselves, the rows
concatenated with themselves doubled (gathered, returned as every device holds them), and the rows flattened.
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
    def gathered(x: tp.ListNumpy.Placeholder((4, 3), dtype=flow.double)) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        joined = flow.concat([x, x * 2.0], axis=0)  # every device's rows, then all of them doubled: gathered
        return flow.math.reduce_max(x, axis=0), flow.math.relu(x), joined, flow.reshape(x, (-1,))

    rng = np.random.default_rng(5)
    rank = os.environ.get("PMI_RANK")
    result: dict[str, np.ndarray] = {}
    for step, rows in enumerate(ROWS):
        xs = [rng.standard_normal((n, 3)) for n in rows]
        mine = slice(None) if rank is None else slice(int(rank), int(rank) + 1)
        result[f"peak{step}"], result[f"rows{step}"], result[f"joined{step}"], result[f"flat{step}"] = gathered(xs[mine])
        result[f"numpy_peak{step}"] = np.concatenate(xs).max(axis=0)
        result[f"numpy_rows{step}"] = np.maximum(np.concatenate(xs), 0)
        result[f"numpy_joined{step}"] = np.concatenate(xs + [2.0 * x for x in xs])
        result[f"numpy_flat{step}"] = np.concatenate(xs).reshape(-1)
    np.savez(out / f"rank{rank or 0}.npz", **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
