"""Which array module runs a device's kernels: numpy on CPUs, cupy on usable GPUs."""

from __future__ import annotations

import functools
import importlib
import os
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


def available_memory(xp: ModuleType) -> int | None:
    """Bytes a new allocation can get now: free GPU memory for cupy, MemAvailable (or free pages) for numpy.

    None where the system does not say.
    """
    if xp is not np:
        runtime = getattr(getattr(xp, "cuda", None), "runtime", None)
        return int(runtime.memGetInfo()[0]) if runtime is not None else None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
