"""A mirrored-view job on 2 devices: each device passes and gets back its own part.

    python mirrored_view.py OUT_DIR    (writes what the process got to OUT_DIR/rank<R>.json)

In one process the call passes both devices' arrays and gets both parts back;
under `mpiexec -n 2` each rank passes its own array and gets its own part
(a one-element list). The tp.Numpy output is the whole value either way. Under
mpiexec the script also records the error for a list of both devices' arrays.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Tuple

import numpy as np

import irflow as flow
import irflow.typing as tp


def main(out: Path) -> None:
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def shifted_relu(x: tp.ListNumpy.Placeholder((2, 3))) -> Tuple[tp.ListNumpy, tp.Numpy]:
        y = flow.math.relu(x - 1.0)
        return y, y * 2.0

    pieces = [np.arange(6, dtype=np.float32).reshape(2, 3) * (d + 1) for d in range(2)]
    rank = os.environ.get("PMI_RANK")
    mine = pieces if rank is None else [pieces[int(rank)]]
    parts, whole = shifted_relu(mine)
    result = {"parts": [p.tolist() for p in parts], "whole": whole.tolist()}
    if rank is not None:
        try:
            shifted_relu(pieces)
        except TypeError as e:
            result["error"] = str(e)
    (out / f"rank{rank or 0}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
