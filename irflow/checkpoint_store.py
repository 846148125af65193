"""The on-disk checkpoint format: a directory of .npy files and an index.

Layout of a checkpoint directory:

    index.json         {"format", "version", "meta", "variables": {name: entry}}
    00000-conv1_w.npy  one file per variable ("conv1/w" here); its index entry
                       holds file, shape, dtype and the sha256 of the whole file

Variable names ("conv1/weight-0.m") become numbered, sanitized file names so
that any name is safe on any file system; the index is the only mapping.

`save` never leaves a half-written checkpoint at `path`: it writes and fsyncs
a sibling `.<name>.tmp`, moves the previous checkpoint aside to `.<name>.old`,
renames the new one into place, then deletes the old one. A crash between the
two renames leaves the previous checkpoint at `.<name>.old`, where `load`
finds it and the next `save` puts it back. One writer per path at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "irflow-checkpoint"
VERSION = 1
INDEX = "index.json"


class CheckpointError(Exception):
    """A checkpoint that cannot be written or read back as it was saved."""

    def __init__(self, path: Path, message: str, variable: str | None = None) -> None:
        where = f"{path}: variable {variable!r}" if variable is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.variable = variable


def save(
    path: str | os.PathLike[str],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None = None,
) -> None:
    """Write `arrays` and JSON-able `meta` as the checkpoint directory `path`."""
    path = Path(path)
    arrays = _checked(path, arrays)
    meta = dict(meta or {})
    json.dumps(meta)  # fail before writing anything, not after
    tmp, old = _siblings(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _recover(path)
    if not _replaceable(path):
        raise CheckpointError(path, "exists and is not a checkpoint; refusing to replace it")
    try:
        tmp.mkdir()
        variables = {
            name: _write_array(tmp / _file_name(i, name), array)
            for i, (name, array) in enumerate(arrays.items())
        }
        index = {"format": FORMAT, "version": VERSION, "meta": meta, "variables": variables}
        with open(tmp / INDEX, "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)
            _sync(f)
        _fsync_dir(tmp)
        if path.exists():
            os.rename(path, old)
        os.rename(tmp, path)
    except BaseException:
        if old.exists() and not path.exists():
            os.rename(old, path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def load(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict]:
    """Read and verify the checkpoint at `path`: (arrays by name, meta)."""
    path = Path(path)
    _, old = _siblings(path)
    if not path.exists() and old.is_dir():
        path = old  # a save crashed between its two renames
    if not path.is_dir():
        raise CheckpointError(path, "no checkpoint directory")
    index = _read_index(path)
    arrays = {
        name: _read_array(path, name, entry) for name, entry in index["variables"].items()
    }
    return arrays, index["meta"]


def _siblings(path: Path) -> tuple[Path, Path]:
    """The new checkpoint being written, and the previous one moved aside."""
    return path.with_name(f".{path.name}.tmp"), path.with_name(f".{path.name}.old")


def _recover(path: Path) -> None:
    """Finish or roll back a save that a crash interrupted."""
    tmp, old = _siblings(path)
    if old.exists():
        if path.exists():
            shutil.rmtree(old)  # the new checkpoint had landed
        else:
            os.rename(old, path)
    shutil.rmtree(tmp, ignore_errors=True)


def _file_name(i: int, name: str) -> str:
    """Unique by its number, readable by its slug, short enough for any file system."""
    return f"{i:05d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:64]}.npy"


def _checked(path: Path, arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The arrays to save, refused before any file is written if one cannot be."""
    checked = {}
    for name, value in arrays.items():
        if not isinstance(name, str):
            raise CheckpointError(path, f"variable names must be str, got {name!r}")
        checked[name] = np.asarray(value)
        if checked[name].dtype.hasobject:
            raise CheckpointError(path, f"dtype {checked[name].dtype} cannot be saved", name)
    return checked


def _replaceable(path: Path) -> bool:
    """Only a checkpoint or an empty directory may be replaced: never user files."""
    if not path.exists():
        return True
    return path.is_dir() and ((path / INDEX).is_file() or not any(path.iterdir()))


def _write_array(file: Path, array: np.ndarray) -> dict[str, Any]:
    with open(file, "wb") as f:
        np.save(f, array, allow_pickle=False)
        _sync(f)
    return {
        "file": file.name,
        "shape": list(array.shape),
        "dtype": array.dtype.str,
        "sha256": _sha256(file),
    }


def _read_index(path: Path) -> dict[str, Any]:
    try:
        index = json.loads((path / INDEX).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(path, f"missing {INDEX}") from None
    except (OSError, ValueError) as err:
        raise CheckpointError(path, f"unreadable {INDEX}: {err}") from err
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise CheckpointError(path, f"{INDEX} is not an {FORMAT} index")
    if index.get("version") != VERSION:
        raise CheckpointError(
            path, f"unknown format version {index.get('version')!r} (this reads {VERSION})"
        )
    if not isinstance(index.get("variables"), dict) or not isinstance(index.get("meta"), dict):
        raise CheckpointError(path, f"{INDEX} lacks its 'variables' or 'meta' table")
    return index


def _read_array(path: Path, name: str, entry: Any) -> np.ndarray:
    try:
        file, shape, dtype, digest = (entry[k] for k in ("file", "shape", "dtype", "sha256"))
    except (TypeError, KeyError):
        raise CheckpointError(path, f"malformed {INDEX} entry {entry!r}", name) from None
    if not isinstance(file, str) or Path(file).name != file:
        raise CheckpointError(path, f"bad file name {file!r} in {INDEX}", name)
    try:
        if _sha256(path / file) != digest:
            raise CheckpointError(path, f"checksum mismatch in {file}", name)
        array = np.load(path / file, allow_pickle=False)
    except FileNotFoundError:
        raise CheckpointError(path, f"missing file {file}", name) from None
    except (OSError, ValueError) as err:
        raise CheckpointError(path, f"unreadable {file}: {err}", name) from err
    if list(array.shape) != shape or array.dtype.str != dtype:
        raise CheckpointError(
            path,
            f"{file} holds {array.dtype.str} {list(array.shape)}, index says {dtype} {shape}",
            name,
        )
    return array


def _sha256(file: Path) -> str:
    """Digest of the whole .npy file, header included, read in chunks."""
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _sync(f: Any) -> None:
    f.flush()
    os.fsync(f.fileno())


def _fsync_dir(directory: Path) -> None:
    """Make renames and new entries in `directory` durable (POSIX)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
