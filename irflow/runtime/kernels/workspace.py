"""Transient scratch that every kernel of an executor shares (docs/kernels.md, "Scratch").

A kernel's scratch is *transient* when each run writes it before reading it: nothing in it is
needed from one run to the next. The kernels of one executor run one after another, so their
transient scratch can be one memory the size of the largest kernel's, not one per kernel: a
ResNet-50 train job's kernels had made 125 MB of their own, and a first step faults every page
of it in (docs/runtime.md). A builder asks for such an array with `scratch(xp, shape, dtype)`;
what a kernel keeps between runs (padding borders zeroed once, index tables, an RNG) it still
makes with `xp.empty` / `xp.zeros` as its own.

The executor builds each kernel under a `Claim` of its `Workspace`. A claim's arrays lie one
after another in each region and never overlap, also those built after the kernel's build (a lane
for a new thread count, a Split's plan, a measured search's candidates: kernels/parallel.py and
algorithms.py take the claim with them and build under it again), so one kernel's arrays are
always disjoint, while different kernels' overlap. Region 0 holds what a kernel's run uses as a
whole; region i + 1 what lane i builds (`lane(i)`), since a kernel's lanes run at once on
different threads: region 0 is sized by the largest kernel-level need and every lane region by
the largest lane's, so a lane built at a later thread count fits as lane 0 did.

Binding is two passes: every kernel is built once with arrays of its own while the workspace
sizes the regions, then `allocate` makes them and the kernels that asked for scratch are built
again on them. An array that does not fit its region later (a build at a run asking more than
any kernel did at binding) is made on its own, as without a workspace. Executors share nothing:
the simulated devices of one process (runtime/inprocess.py) interleave their kernels on one
thread and could share one, but nothing else ties a device's executor to that driver.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from .registry import Array

_ALIGN = 64  # each array starts on a cache line, as the arena's buffers do

# The claim of the kernel being built and the region its scratch goes to (0, or lane i's i + 1): per thread, as a
# kernel's parts may be built at a run on whichever thread runs them.
_current: ContextVar[tuple[Claim, int] | None] = ContextVar("irflow_scratch_claim", default=None)


class Workspace:
    """One executor's shared transient scratch: region 0 (a kernel's run as a whole) and one region per lane."""

    def __init__(self, xp: ModuleType):
        self.xp = xp
        self.needs = [0, 0]  # bytes: the largest kernel-level and lane need seen while sizing
        self.regions: list[Array] | None = None  # None while sizing

    @property
    def sizing(self) -> bool:
        return self.regions is None

    def allocate(self) -> None:
        """End sizing: make region 0 and lane 0's region at the largest needs seen."""
        self.regions = [self._buffer(self.needs[0]), self._buffer(self.needs[1])]

    def region(self, index: int) -> Array:
        """Region `index` (made on first use for a lane past those of binding, at the lane need)."""
        assert self.regions is not None
        while len(self.regions) <= index:
            self.regions.append(self._buffer(self.needs[1]))
        return self.regions[index]

    @property
    def nbytes(self) -> int:
        """Bytes of the regions made so far."""
        return sum(region.size for region in self.regions or ())

    def _buffer(self, size: int) -> Array:
        return aligned(partial(self.xp.empty, dtype=np.uint8), size, _ALIGN)


def aligned(make: Callable[[int], Array], size: int, alignment: int) -> Array:
    """`size` bytes starting at a multiple of `alignment`, cut from `make(n)`, a uint8 array of n bytes
    (numpy's or cupy's: a cupy array's address is `data.ptr`)."""
    raw = make(size + alignment)
    start = (-raw.data.ptr if hasattr(raw.data, "ptr") else -raw.ctypes.data) % alignment
    return raw[start : start + size]


class Claim:
    """One kernel's part of a workspace: where its next array goes in each region, and whether it took any."""

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self.cursors: dict[int, int] = {}
        self.took = False
        self._lock = threading.Lock()

    def take(self, region: int, shape: tuple[int, ...], dtype: np.dtype) -> Array:
        workspace = self.workspace
        size = math.prod(shape) * dtype.itemsize
        with self._lock:
            start = self.cursors.get(region, 0)
            end = start + -(-size // _ALIGN) * _ALIGN
            self.cursors[region] = end
            self.took = True
        if workspace.regions is None:
            kind = min(region, 1)
            workspace.needs[kind] = max(workspace.needs[kind], end)
            return workspace.xp.empty(shape, dtype)
        buffer = workspace.region(region)
        if end > buffer.size:
            return workspace.xp.empty(shape, dtype)
        return buffer[start : start + size].view(dtype).reshape(shape)


def scratch(xp: ModuleType, shape: Any, dtype: Any) -> Array:
    """An uninitialized array that a kernel's every run writes before it reads: from the workspace of the
    kernel being built (shared with the executor's other kernels), or without one `xp.empty`."""
    current = _current.get()
    if current is None:
        return xp.empty(shape, dtype)
    claim, region = current
    return claim.take(region, tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),), np.dtype(dtype))


def held() -> Claim | None:
    """The claim of the kernel being built, for parts of it built later under `building(claim)`."""
    current = _current.get()
    return None if current is None else current[0]


@contextmanager
def building(claim: Claim | None) -> Iterator[Claim | None]:
    """Kernels' `scratch` inside comes from `claim`'s region 0 (no claim: arrays of their own)."""
    token = _current.set(None if claim is None else (claim, 0))
    try:
        yield claim
    finally:
        _current.reset(token)


@contextmanager
def lane(index: int) -> Iterator[None]:
    """The `scratch` of lane `index` of the kernel being built (the scratch its thread uses alone) comes from
    that lane's region."""
    current = _current.get()
    if current is None:
        yield
        return
    token = _current.set((current[0], index + 1))
    try:
        yield
    finally:
        _current.reset(token)
