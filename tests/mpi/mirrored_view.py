"""A mirrored-view job on 2 devices: each device gets its own array.

    python mirrored_view.py OUT_DIR    (writes the per-device outputs to OUT_DIR/rank<R>.json)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

import irflow as flow
import irflow.typing as tp


def main(out: Path) -> None:
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def shifted_relu(x: tp.ListNumpy.Placeholder((2, 3))) -> tp.ListNumpy:
        return flow.math.relu(x - 1.0)

    pieces = [np.arange(6, dtype=np.float32).reshape(2, 3) * (d + 1) for d in range(2)]
    outputs = [piece.tolist() for piece in shifted_relu(pieces)]
    (out / f"rank{os.environ.get('PMI_RANK', '0')}.json").write_text(json.dumps(outputs))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
