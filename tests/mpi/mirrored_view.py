"""A mirrored-view job on 2 devices: each device gets its own array; prints the per-device outputs."""

from __future__ import annotations

import json

import numpy as np

import irflow as flow
import irflow.typing as tp


def main() -> None:
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(function_config=config)
    def shifted_relu(x: tp.ListNumpy.Placeholder((2, 3))) -> tp.ListNumpy:
        return flow.math.relu(x - 1.0)

    pieces = [np.arange(6, dtype=np.float32).reshape(2, 3) * (d + 1) for d in range(2)]
    print(json.dumps([out.tolist() for out in shifted_relu(pieces)]))


if __name__ == "__main__":
    main()
