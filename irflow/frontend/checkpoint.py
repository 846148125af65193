"""Reading and writing variables: flow.get_all_variables, flow.load_variables, flow.checkpoint.save/get.

All of them first wait for queued calls and then keep other threads' calls
out while they work (Session.between_steps), so that they see and replace
the values as one step left them; they read and write the session's
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
from irflow.frontend.locations import user_location


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
    with session.between_steps():
        return {name: Variable(name, array) for name, array in session.store.snapshot().items()}


def load_variables(value_dict: Mapping[str, Any], ignore_mismatch: bool = True) -> None:
    """Replace variables' values, all or nothing: every shape and dtype is checked before any is set.

    Values may be arrays or what flow.get_all_variables() returns. As in OneFlow,
    names the session does not know (a train checkpoint's optimizer state, loaded
    for evaluation) are skipped unless `ignore_mismatch=False`, which also
    requires a value for every variable the session knows.
    """
    if not isinstance(value_dict, Mapping):
        raise ExecutionError(
            f"flow.load_variables: expects a dict of variable name to value, got {type(value_dict).__name__}",
            user_location(),
        )
    session = default_session()
    with session.between_steps():
        _load(session, value_dict, ignore_mismatch)


def _load(session: Any, value_dict: Mapping[Any, Any], ignore_mismatch: bool) -> None:
    known = _known(session)
    arrays: dict[str, np.ndarray] = {}
    unknown = []
    for name, value in value_dict.items():
        if not isinstance(name, str):
            raise ExecutionError(
                f"flow.load_variables: variable names must be str, got {name!r} ({type(name).__name__})",
                user_location(),
            )
        array = value.numpy() if hasattr(value, "numpy") else value
        if isinstance(array, np.ma.MaskedArray):
            raise ExecutionError(
                f"flow.load_variables: '{name}' is a masked array, whose mask irflow cannot keep; "
                "pass .filled(value) or .data",
                user_location(),
            )
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


def save(path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Write every variable, optimizer state included, as the checkpoint directory `path`.

    OneFlow's layout (a directory per variable) with irflow's index. As in
    OneFlow, a non-empty `path` is an error; `overwrite=True` replaces an
    earlier checkpoint there, atomically.
    """
    checkpoint_store.as_path(path)  # a bad path fails before waiting for queued calls
    session = default_session()
    with session.between_steps():
        store = session.store
        arrays = store.snapshot()  # every rank takes part: under MPI this gathers the pieces
    if store.is_writer:  # written once, by rank 0, however many ranks run
        checkpoint_store.save(path, arrays, meta={"seed": session.seed}, overwrite=overwrite)
    store.barrier()


def get(path: str | os.PathLike[str]) -> Any:
    """The checkpoint at `path` (checksums verified) as a dict for flow.load_variables.

    On one variable's directory (it holds `out`), that variable's value alone,
    as OneFlow returns it. OneFlow variables saved without `meta` take the
    shape and dtype the session's jobs declare.
    """
    session = default_session()
    with session.between_steps():
        declared = _known(session)
    if checkpoint_store.is_variable_dir(path):
        return checkpoint_store.load_variable(path, declared)
    arrays, _ = checkpoint_store.load(path, declared)
    return arrays


class CheckPoint:
    """OneFlow's older `flow.train.CheckPoint()`, as the documentation's programs use it."""

    def init(self) -> None:
        """Start the session: every job defined so far compiles and every variable takes its initial value."""
        default_session().start()

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        save(path, overwrite=overwrite)

    def load(self, path: str | os.PathLike[str]) -> None:
        load_variables(get(path))
