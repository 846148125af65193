"""Which array module runs a device's kernels: numpy on CPUs, cupy on usable GPUs."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import numpy as np


@functools.cache
def gpu_module() -> ModuleType | None:
    """cupy when it imports and sees at least one GPU, else None."""
    try:
        cupy = importlib.import_module("cupy")
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # no cupy, no driver, no device: all mean "no usable GPU"
        return None
    return None


def array_module(device: str) -> ModuleType:
    if device == "gpu":
        return gpu_module() or np
    if device != "cpu":
        raise ValueError(f"unknown device tag '{device}', expected 'cpu' or 'gpu'")
    return np
