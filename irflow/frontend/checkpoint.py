"""Reading and writing variables: flow.get_all_variables, flow.load_variables, flow.checkpoint.save/get.

All of them first wait for queued calls, so that they see (and replace) the
values every earlier call has left; they read and write the session's
VariableStore, never a running job's memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from irflow import checkpoint_store
from irflow.errors import ExecutionError
from irflow.frontend.session import default_session
from irflow.frontend.tracing import user_location


class Variable:
    """One variable's value as `flow.get_all_variables()` hands it out: `.numpy()` gives a copy."""

    def __init__(self, name: str, array: np.ndarray):
        self.name = name
        self._array = array

    def numpy(self) -> np.ndarray:
        return self._array.copy()

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    def __repr__(self) -> str:
        return f"Variable({self.name!r}, shape={self.shape}, dtype={self.dtype})"


def get_all_variables() -> dict[str, Variable]:
    """Every variable the session's jobs have created so far, by name (optimizer state included)."""
    session = default_session()
    session.sync()
    return {name: Variable(name, array) for name, array in session.store.snapshot().items()}


def load_variables(value_dict: Mapping[str, Any], ignore_mismatch: bool = True) -> None:
    """Replace variables' values, all or nothing: every shape and dtype is checked before any is set.

    Values may be arrays or what flow.get_all_variables() returns. As in OneFlow,
    names the session does not know (a train checkpoint's optimizer state, loaded
    for evaluation) are skipped unless `ignore_mismatch=False`, which also
    requires a value for every variable the session knows.
    """
    session = default_session()
    session.sync()
    known = _known(session)
    arrays: dict[str, np.ndarray] = {}
    unknown = []
    for name, value in value_dict.items():
        array = value.numpy() if hasattr(value, "numpy") else value
        if not isinstance(array, np.ndarray):
            raise ExecutionError(
                f"flow.load_variables: '{name}' must be a numpy.ndarray, got {type(value).__name__}", user_location()
            )
        if name not in known:
            unknown.append(name)
            continue
        shape, dtype = known[name]
        if array.shape != shape or array.dtype != dtype:
            raise ExecutionError(
                f"flow.load_variables: variable '{name}' is {dtype} {shape}, given {array.dtype} {array.shape}",
                user_location(),
            )
        arrays[name] = np.array(array, copy=True)
    if not ignore_mismatch:
        missing = sorted(set(known) - set(arrays))
        if unknown or missing:
            raise ExecutionError(
                f"flow.load_variables: unknown names {sorted(unknown)}, no value for {missing} "
                f"(known: {', '.join(sorted(known)) or 'none yet'})",
                user_location(),
            )
    store = session.store
    for name in arrays:
        if name not in store:  # declared by a job that has not run yet: create it, then overwrite
            d = session.variables[name]
            store.ensure(name, d.shape, d.dtype.np_dtype, d.initializer, d.trainable)
    store.load(arrays)


def _known(session: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Variables the jobs declared and those the store holds (optimizer state), with shape and dtype."""
    known = {name: (d.shape, d.dtype.np_dtype) for name, d in session.variables.items()}
    store = session.store
    for name in store.names():
        value = store.variable(name).value
        known[name] = (tuple(value.shape), np.dtype(value.dtype))
    return known


def save(path: str | os.PathLike[str]) -> None:
    """Write every variable, optimizer state included, as the checkpoint directory `path`."""
    session = default_session()
    session.sync()
    store = session.store
    values = store.snapshot()  # every rank takes part: under MPI this gathers the pieces
    if getattr(store, "is_writer", True):  # written once, by rank 0, however many ranks run
        checkpoint_store.save(path, values, meta={"seed": session.seed})
    if hasattr(store, "barrier"):
        store.barrier()


def get(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read the checkpoint at `path` (checksums verified) as a dict for flow.load_variables."""
    arrays, _ = checkpoint_store.load(path)
    return arrays


class CheckPoint:
    """OneFlow's older `flow.train.CheckPoint()`, as the documentation's programs use it."""

    def init(self) -> None:
        """Variables start from their initializers when their first job is compiled: nothing to do here."""

    def save(self, path: str | os.PathLike[str]) -> None:
        save(path)

    def load(self, path: str | os.PathLike[str]) -> None:
        load_variables(get(path))
