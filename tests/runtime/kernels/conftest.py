"""Fixtures that build a kernel with numpy, run it and hand back its outputs."""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from irflow.runtime.kernels import Run, get_kernel

OutSpec = np.ndarray | tuple[Sequence[int], Any]


# The module-level names kernels may use: those numpy and cupy both have.
SHARED_API = frozenset(
    """
    add subtract multiply divide floor_divide maximum minimum power negative absolute reciprocal square sqrt exp log tanh
    equal not_equal less less_equal greater greater_equal logical_and logical_or logical_xor logical_not
    sum mean max min argmax matmul dot einsum take put take_along_axis copyto clip trunc where
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


def run(name: str, ins: Sequence[np.ndarray], outs: Sequence[OutSpec], **attrs: Any) -> list[np.ndarray]:
    step, out_arrays = build(name, ins, outs, **attrs)
    step()
    return out_arrays


@pytest.fixture
def kernel() -> Callable[..., list[np.ndarray]]:
    """kernel(name, ins, outs, **attrs) -> outs after one run; an out is an array or (shape, dtype)."""
    return run


@pytest.fixture
def build_kernel() -> Callable[..., tuple[Run, list[np.ndarray]]]:
    """build_kernel(name, ins, outs, **attrs) -> (run, outs), to run several times."""
    return build


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
def finite_diff() -> Callable[..., np.ndarray]:
    """finite_diff(name, ins, wrt, out_spec, dy, **attrs): numeric gradient of kernel `name` w.r.t. ins[wrt]."""

    def grad(name: str, ins: Sequence[np.ndarray], wrt: int, out: OutSpec, dy: np.ndarray, **attrs: Any) -> np.ndarray:
        step, (y,) = build(name, ins, [out], **attrs)

        def forward() -> np.ndarray:
            step()
            return y.astype(np.float64)

        return numeric_grad(forward, ins[wrt], dy)

    return grad
