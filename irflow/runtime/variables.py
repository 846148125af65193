"""The per-device variable store: model state outside the arena, addressed by name.

Executables bind the store's arrays once, so every update happens in place
(`load` copies into the existing arrays); checkpoints read and write the store,
never an arena.  Each variable's initial value depends only on the session
seed and its name, so creation order does not change what a model starts from.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from irflow.runtime.initializers import sample


@dataclass
class Variable:
    value: Any  # numpy or cupy array, bound by executables
    initializer: Mapping[str, Any]
    trainable: bool


class VariableStore:
    def __init__(self, seed: int = 0, xp: ModuleType = np):
        self.seed = seed
        self.xp = xp
        self._vars: dict[str, Variable] = {}

    def ensure(
        self, name: str, shape: tuple[int, ...], dtype: np.dtype, initializer: Mapping[str, Any], trainable: bool
    ) -> Any:
        """The variable's array, created from its initializer on first use; shape and dtype must agree."""
        var = self._vars.get(name)
        if var is not None:
            if var.value.shape != tuple(shape) or var.value.dtype != dtype:
                raise ValueError(
                    f"variable '{name}' exists with shape {tuple(var.value.shape)} and dtype {var.value.dtype}, "
                    f"but is requested with shape {tuple(shape)} and dtype {np.dtype(dtype)}"
                )
            return var.value
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        host = np.array(sample(initializer, tuple(shape), np.dtype(dtype), rng), dtype=dtype, order="C")
        if host.shape != tuple(shape):
            raise ValueError(f"initializer {dict(initializer)} of '{name}' gave shape {host.shape}, not {tuple(shape)}")
        self._vars[name] = Variable(self.xp.asarray(host), dict(initializer), trainable)
        return self._vars[name].value

    def __getitem__(self, name: str) -> np.ndarray:
        """A host copy of the variable's current value."""
        value = self._vars[name].value
        return value.get() if hasattr(value, "get") else value.copy()

    def __contains__(self, name: object) -> bool:
        return name in self._vars

    def __iter__(self) -> Iterator[str]:
        return iter(self._vars)

    def __len__(self) -> int:
        return len(self._vars)

    def names(self) -> list[str]:
        return list(self._vars)

    def variable(self, name: str) -> Variable:
        return self._vars[name]

    def snapshot(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self._vars}

    def load(self, values: Mapping[str, np.ndarray]) -> None:
        """Set variables from host arrays; checks every one before changing any."""
        staged = []
        for name, value in values.items():
            if name not in self._vars:
                known = ", ".join(sorted(self._vars)) or "none"
                raise KeyError(f"no variable named '{name}' (known: {known})")
            current = self._vars[name].value
            array = np.asarray(value)
            if array.shape != current.shape:
                raise ValueError(f"variable '{name}' has shape {current.shape}, the value has shape {array.shape}")
            if array.dtype != current.dtype and not np.can_cast(array.dtype, current.dtype, "same_kind"):
                raise ValueError(f"variable '{name}' has dtype {current.dtype}, the value has dtype {array.dtype}")
            staged.append((current, array))
        for current, array in staged:
            current[...] = self.xp.asarray(array.astype(current.dtype, copy=False))

    def clear(self) -> None:
        self._vars.clear()
