"""The per-device variable store: model state outside the arena, addressed by name.

Executables bind the store's arrays once, so every update happens in place
(`load` copies into the existing arrays); checkpoints read and write the store,
never an arena.  Each variable's initial value depends only on the session
seed and its name, so creation order does not change what a model starts from.

On a mesh every device has its own store holding its piece of each variable
(a split variable a chunk, a broadcast one all of it). Initial values are
sampled at the logical shape and then cut, so N devices start from the values
one device starts from; `LogicalVariables` shows the pieces as whole values.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from irflow.dialects.sbp import SbpAttr
from irflow.runtime.communicator import Site
from irflow.runtime.initializers import sample
from irflow.runtime.sharding import Layout

if TYPE_CHECKING:
    from irflow.runtime.mpi import MPICommunicator


@dataclass
class Variable:
    value: Any  # numpy or cupy array, bound by executables
    initializer: Mapping[str, Any]
    trainable: bool
    layout: Layout  # how the logical value is cut; this store holds one rank's piece


class VariableStore:
    def __init__(self, seed: int = 0, xp: ModuleType = np, rank: int = 0):
        self.seed = seed
        self.xp = xp
        self.rank = rank
        self._vars: dict[str, Variable] = {}

    def ensure(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        initializer: Mapping[str, Any],
        trainable: bool,
        layout: Layout | None = None,
    ) -> Any:
        """The variable's array (this rank's piece), created from its initializer on first use.

        `shape` is the local shape; `layout` (default: whole on one device)
        says how the logical value is cut. Both, and the dtype, must agree
        with an existing variable.
        """
        layout = layout or Layout.whole(shape)
        if layout.local_shape != tuple(shape):
            raise ValueError(f"variable '{name}': local shape {tuple(shape)} does not fit the layout {layout}")
        var = self._vars.get(name)
        if var is not None:
            if var.layout != layout:
                raise ValueError(f"variable '{name}' is laid out as {var.layout}, but is requested as {layout}")
            if var.value.shape != tuple(shape) or var.value.dtype != dtype:
                raise ValueError(
                    f"variable '{name}' exists with shape {tuple(var.value.shape)} and dtype {var.value.dtype}, "
                    f"but is requested with shape {tuple(shape)} and dtype {np.dtype(dtype)}"
                )
            return var.value
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        # A fresh array: copied only when the initializer's is not C-ordered of this dtype.
        host = np.asarray(sample(initializer, layout.shape, np.dtype(dtype), rng), dtype=dtype, order="C")
        if host.shape != layout.shape:
            raise ValueError(f"initializer {dict(initializer)} of '{name}' gave shape {host.shape}, not {layout.shape}")
        # On one device the piece is the whole value; `shard` makes a fresh C-ordered array otherwise.
        whole = layout.ranks == 1 and layout.member(self.rank) is not None
        piece = host if whole else layout.shard(host, self.rank)
        self._vars[name] = Variable(self.xp.asarray(piece), dict(initializer), trainable, layout)
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
            current = _known(self, name).value
            staged.append((current, _checked(name, value, current.shape, current.dtype)))
        for current, array in staged:
            current[...] = self.xp.asarray(array.astype(current.dtype, copy=False))

    def clear(self) -> None:
        self._vars.clear()

    # One process holds every device here: it writes what is written once, and has nobody to wait for.
    is_writer = True

    def barrier(self) -> None:
        pass


def _known(store: VariableStore, name: str) -> Variable:
    if name not in store:
        known = ", ".join(sorted(store.names())) or "none"
        raise KeyError(f"no variable named '{name}' (known: {known})")
    return store.variable(name)


def _checked(name: str, value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """`value` as a host array fit for variable `name`, or a ValueError saying why not."""
    array = np.asarray(value)
    if array.shape != tuple(shape):
        raise ValueError(f"variable '{name}' has shape {tuple(shape)}, the value has shape {array.shape}")
    if array.dtype != dtype and not np.can_cast(array.dtype, dtype, "same_kind"):
        raise ValueError(f"variable '{name}' has dtype {dtype}, the value has dtype {array.dtype}")
    return array


class LogicalVariables:
    """Every device's store seen as one store of whole values: what users and checkpoints see.

    The devices of a mesh each hold a piece of every variable (`shards[r]` is
    rank r's store); reading a name gathers the pieces by the variable's
    layout, loading cuts the value into pieces. Same interface as a
    VariableStore, with logical shapes.
    """

    def __init__(self, mesh: Sequence[int], seed: int = 0, xp: ModuleType = np, comm: MPICommunicator | None = None):
        self.mesh = tuple(mesh)
        self.seed = seed
        self.xp = xp
        # In one process every rank's store is here; under MPI only this process's rank is.
        self.comm = comm
        self.ranks = [comm.rank] if comm is not None else list(range(int(np.prod(self.mesh))))
        self.shards = [VariableStore(seed, xp, rank) for rank in self.ranks]

    @property
    def is_writer(self) -> bool:
        """Whether this process writes what is written once for all ranks (checkpoints): rank 0's."""
        return self.comm is None or self.comm.rank == 0

    def barrier(self) -> None:
        if self.comm is not None:
            self.comm.barrier()

    def layout(self, name: str) -> Layout:
        return self.shards[0].variable(name).layout

    def ensure(
        self, name: str, shape: tuple[int, ...], dtype: np.dtype, initializer: Mapping[str, Any], trainable: bool
    ) -> None:
        """Create a variable no job has bound yet, whole (broadcast) on every device."""
        layout = Layout.of(shape, [SbpAttr("broadcast")] * len(self.mesh), self.mesh)
        for store in self.shards:
            store.ensure(name, layout.local_shape, dtype, initializer, trainable, layout)

    def __getitem__(self, name: str) -> np.ndarray:
        """The whole value, gathered from the devices' pieces."""
        pieces = [store[name] for store in self.shards]
        if self.comm is not None:
            pieces = self.comm.gather_all(pieces[0], Site(f"reading variable {name!r}"))
        return self.layout(name).gather(pieces)

    def __contains__(self, name: object) -> bool:
        return name in self.shards[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.shards[0])

    def __len__(self) -> int:
        return len(self.shards[0])

    def names(self) -> list[str]:
        return self.shards[0].names()

    def variable(self, name: str) -> Variable:
        """The variable with its whole value (a host copy)."""
        first = self.shards[0].variable(name)
        return Variable(self[name], first.initializer, first.trainable, first.layout)

    def snapshot(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self.names()}

    def load(self, values: Mapping[str, np.ndarray]) -> None:
        """Set variables from whole host values; checks every one before changing any device."""
        pieces: list[dict[str, np.ndarray]] = [{} for _ in self.shards]
        for name, value in values.items():
            first = _known(self.shards[0], name)
            array = _checked(name, value, first.layout.shape, first.value.dtype).astype(first.value.dtype, copy=False)
            for rank, piece in zip(self.ranks, pieces):
                piece[name] = first.layout.shard(array, rank)
        for store, piece in zip(self.shards, pieces):
            store.load(piece)

    def clear(self) -> None:
        for store in self.shards:
            store.clear()
