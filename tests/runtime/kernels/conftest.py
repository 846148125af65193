"""Fixtures that build a kernel, run it and hand back its outputs, on every backend this machine has.

Each kernel test runs on numpy (restricted to the API cupy shares) and, where a
GPU is usable, again on cupy: the test keeps its host arrays, which are copied
to the device before each run and the outputs copied back after it.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from irflow.runtime import backend
from irflow.runtime.kernels import Run, get_kernel

OutSpec = np.ndarray | tuple[Sequence[int], Any]
# build(name, ins, outs, **attrs) -> (run, outs): `build`, `build_on_gpu` and the `build_kernel` fixture.
Build = Callable[..., tuple[Run, list[np.ndarray]]]


# The module-level names kernels may use: those numpy and cupy both have.
SHARED_API = frozenset(
    """
    add subtract multiply divide floor_divide maximum minimum power negative absolute reciprocal square sqrt exp log tanh
    sin cos floor ceil rint sign log1p expm1 tan arcsin arccos arctan sinh cosh arcsinh arccosh arctanh remainder fmod arctan2
    equal not_equal less less_equal greater greater_equal logical_and logical_or logical_xor logical_not signbit
    sum mean max min prod argmax argsort flip matmul dot einsum take put take_along_axis copyto clip trunc where
    empty zeros ones full arange asarray broadcast_to shares_memory may_share_memory lib random
    """.split()
)


class _SharedApi(types.ModuleType):
    """numpy restricted to SHARED_API, so that CPU test runs catch numpy-only calls that would fail on cupy."""

    def __getattr__(self, name: str) -> Any:
        if name not in SHARED_API:
            raise AttributeError(f"xp.{name} is not in the API numpy and cupy share")
        return getattr(np, name)


XP = _SharedApi("numpy")


def _out(spec: OutSpec) -> np.ndarray:
    """An out buffer: the given array itself, or a fresh one filled with garbage to catch unwritten elements."""
    if isinstance(spec, np.ndarray):
        return spec
    shape, dtype = spec
    dtype = np.dtype(dtype)
    return np.full(shape, np.nan if dtype.kind == "f" else 77, dtype)


def build(name: str, ins: Sequence[np.ndarray], outs: Sequence[OutSpec], **attrs: Any) -> tuple[Run, list[np.ndarray]]:
    out_arrays = [_out(spec) for spec in outs]
    return get_kernel(name)(XP, attrs, list(ins), out_arrays), out_arrays


def build_on_gpu(name: str, ins: Sequence[np.ndarray], outs: Sequence[OutSpec], **attrs: Any) -> tuple[Run, list[np.ndarray]]:
    """The kernel built on cupy arrays; its run copies every host array in, runs, and copies the outs back.

    A host array passed twice (an in that is also an out) is one device array,
    so in-place kernels stay in place.
    """
    cupy = backend.gpu_module()
    out_arrays = [_out(spec) for spec in outs]
    pairs: dict[int, tuple[np.ndarray, Any]] = {}
    for array in (*ins, *out_arrays):
        pairs.setdefault(id(array), (array, cupy.asarray(array)))
    step = get_kernel(name)(cupy, attrs, [pairs[id(a)][1] for a in ins], [pairs[id(a)][1] for a in out_arrays])

    def run() -> None:
        for host, device in pairs.values():
            device.set(np.ascontiguousarray(host))
        step()
        for host in out_arrays:
            device = pairs[id(host)][1]
            if host.flags.c_contiguous:
                device.get(out=host)
            else:
                host[...] = device.get()

    return run, out_arrays


BACKENDS = {"numpy": build} | ({"cupy": build_on_gpu} if backend.gpu_module() is not None else {})


@pytest.fixture(params=list(BACKENDS))
def build_kernel(request: pytest.FixtureRequest) -> Build:
    """build_kernel(name, ins, outs, **attrs) -> (run, outs), to run several times; once per backend."""
    return BACKENDS[request.param]


@pytest.fixture
def kernel(build_kernel: Build) -> Callable[..., list[np.ndarray]]:
    """kernel(name, ins, outs, **attrs) -> outs after one run; an out is an array or (shape, dtype)."""

    def run(name: str, ins: Sequence[np.ndarray], outs: Sequence[OutSpec], **attrs: Any) -> list[np.ndarray]:
        step, out_arrays = build_kernel(name, ins, outs, **attrs)
        step()
        return out_arrays

    return run


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def numeric_grad(forward: Callable[[], np.ndarray], x: np.ndarray, dy: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d sum(forward() * dy) / dx by central differences, perturbing `x` in place (forward reads it)."""
    grad = np.zeros(x.shape)
    flat = x.reshape(-1)
    assert np.shares_memory(flat, x)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + eps
        plus = float(np.sum(forward() * dy))
        flat[i] = saved - eps
        minus = float(np.sum(forward() * dy))
        flat[i] = saved
        grad.reshape(-1)[i] = (plus - minus) / (2 * eps)
    return grad


@pytest.fixture
def finite_diff(build_kernel: Build) -> Callable[..., np.ndarray]:
    """finite_diff(name, ins, wrt, out_spec, dy, **attrs): numeric gradient of kernel `name` w.r.t. ins[wrt]."""

    def grad(name: str, ins: Sequence[np.ndarray], wrt: int, out: OutSpec, dy: np.ndarray, **attrs: Any) -> np.ndarray:
        step, (y,) = build_kernel(name, ins, [out], **attrs)

        def forward() -> np.ndarray:
            step()
            return y.astype(np.float64)

        return numeric_grad(forward, ins[wrt], dy)

    return grad


@pytest.fixture
def without_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Convolutions take the paths they would take with many rows: none runs in place (kernels/conv.py's
    `_InPlace`), which the heuristics choose for the small shapes of these tests."""
    from irflow.runtime.kernels import conv

    monkeypatch.setattr(conv, "_IN_PLACE_ROWS", 0)
    monkeypatch.setattr(conv, "_IN_PLACE_BYTES", 0)
