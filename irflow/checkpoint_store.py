"""The on-disk checkpoint: OneFlow's layout plus an index that makes it safe.

Layout of a checkpoint directory (OneFlow reads it as its own and ignores
index.json):

    index.json       {"format", "version", "meta", "count", "variables", "sha256"}
    snapshot_done    empty: OneFlow's mark of a finished save
    conv1-weight/    one directory per variable (see checkpoint_layout):
      out            raw little-endian C-order bytes
      meta           text proto with its shape and data type

Guarantees:
- Integrity: the index carries the sha256 of its own content (names, shapes,
  dtypes, directories, count, meta), and each entry the sha256 of its
  variable's name, `meta` and `out` together, so a flipped bit, a dropped,
  added or swapped entry, or a stray file is a CheckpointError and nothing
  is loaded.
- Atomicity: `save` writes and fsyncs a sibling `.<name>.tmp`, moves the
  previous checkpoint aside to `.<name>.old`, renames the new one into place,
  then deletes the old one. A process killed at any point leaves the old or
  the new checkpoint; the next save or load of that path finishes or rolls
  back what it left. Writers hold an flock on the parent directory, so two
  saves to one path take turns.
- Consistent reads: `load` reads every file through one open directory
  handle, and hashes exactly the bytes it parses, so a save running
  meanwhile cannot mix two checkpoints; if the directory is replaced during
  the read, the read starts over (a few times) on the new one.

Directories without index.json are read as OneFlow wrote them: every
subdirectory with an `out` is a variable, its shape and dtype from `meta` or,
without one, from what the caller declares.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from irflow import checkpoint_layout as layout
from irflow.errors import IrflowError

FORMAT = "irflow-checkpoint"
VERSION = 2
INDEX = "index.json"
_TOP_KEYS = {"format", "version", "meta", "count", "variables", "sha256"}
_ENTRY_KEYS = {"dir", "shape", "dtype", "sha256"}
_SAFE_DIR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+-]{0,127}")
_READ_ATTEMPTS = 8

Declared = Mapping[str, tuple[tuple[int, ...], np.dtype]]


class CheckpointError(IrflowError):
    """A checkpoint that cannot be written or read back as it was saved."""

    def __init__(self, path: Path | Any, message: str, variable: str | None = None) -> None:
        where = f"{path}: variable {variable!r}" if variable is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.variable = variable


# ------------------------------------------------------------------ saving


def save(
    path: str | os.PathLike[str],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None = None,
    *,
    overwrite: bool = False,
) -> None:
    """Write `arrays` and JSON-able `meta` as the checkpoint directory `path`.

    A non-empty `path` is an error unless `overwrite`, which replaces an
    earlier checkpoint (never a directory of other files).
    """
    path = as_path(path)
    arrays = _checked(path, arrays)
    if not isinstance(meta, (Mapping, type(None))):
        raise CheckpointError(path, f"meta must be a dict, got {type(meta).__name__}")
    meta = dict(meta or {})
    try:
        json.dumps(meta)  # fail before writing anything, not after
    except (TypeError, ValueError) as err:
        raise CheckpointError(path, f"meta is not JSON-serializable: {err}") from None
    dirs = _dir_names(arrays)
    tmp, old = siblings(path)
    with _os_errors(path, "cannot save"):
        _make_parent(path)
        with _locked(path.parent):
            _recover(path)
            _check_replaceable(path, overwrite)
            try:
                tmp.mkdir()
                variables = {name: _write_variable(tmp / dirs[name], name, array) for name, array in arrays.items()}
                body = {"format": FORMAT, "version": VERSION, "meta": meta, "count": len(variables),
                        "variables": variables}  # fmt: skip
                _write_file(tmp / INDEX, _index_text({**body, "sha256": _index_digest(body)}))
                _write_file(tmp / layout.SNAPSHOT_DONE, b"")
                _fsync_dir(tmp)
                if path.exists():
                    os.rename(path, old)
                os.rename(tmp, path)
                _fsync_dir(path.parent)
            except BaseException:
                if old.exists() and not path.exists():
                    os.rename(old, path)
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            if old.exists():
                shutil.rmtree(old)


def as_path(path: Any) -> Path:
    """`path` as a Path; a CheckpointError for None, numbers and "" (which would mean the working directory).

    A save's siblings are named after the path's last component, so "." and "a/.." become the
    absolute directory they name, and the root, which has no name, is refused.
    """
    if not isinstance(path, (str, os.PathLike)) or (isinstance(path, str) and not path):
        raise CheckpointError(repr(path), f"a checkpoint path must be a non-empty str or os.PathLike, got {type(path).__name__}")
    named = Path(path)
    if named.name in ("", ".."):
        named = Path(os.path.abspath(named))
    if not named.name:
        raise CheckpointError(path, "the root directory cannot be a checkpoint path")
    return named


def siblings(path: Path) -> tuple[Path, Path]:
    """The new checkpoint being written, and the previous one moved aside."""
    return path.with_name(f".{path.name}.tmp"), path.with_name(f".{path.name}.old")


def _checked(path: Path, arrays: Any) -> dict[str, np.ndarray]:
    """The arrays to save, refused before any file is written if one cannot be."""
    if not isinstance(arrays, Mapping):
        raise CheckpointError(path, f"arrays must be a dict of name to array, got {type(arrays).__name__}")
    checked = {}
    for name, value in arrays.items():
        if not isinstance(name, str):
            raise CheckpointError(path, f"variable names must be str, got {name!r}")
        if isinstance(value, np.ma.MaskedArray):
            raise CheckpointError(path, "is a masked array; its mask cannot be saved (pass .filled() or .data)", name)
        checked[name] = np.asarray(value)
        if layout.data_type_name(checked[name].dtype) is None:
            raise CheckpointError(
                path, f"dtype {checked[name].dtype} has no OneFlow data type ({', '.join(layout.DATA_TYPES)})", name
            )
    return checked


def _dir_names(arrays: Mapping[str, np.ndarray]) -> dict[str, str]:
    """A directory per variable: its own name where that is a safe file name (as OneFlow writes), else numbered."""
    taken = {INDEX.lower(), layout.SNAPSHOT_DONE.lower()}
    dirs = {}
    for i, name in enumerate(arrays):
        candidate = name if _SAFE_DIR.fullmatch(name) else f"{i:05d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:64]}"
        while candidate.lower() in taken:  # case-insensitive file systems too
            candidate = f"{candidate}.{i}"
        taken.add(candidate.lower())
        dirs[name] = candidate
    return dirs


def _make_parent(path: Path) -> None:
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            raise CheckpointError(path, f"its parent {parent} is a file, not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)


def _check_replaceable(path: Path, overwrite: bool) -> None:
    """Refuse before writing anything what could not be replaced completely."""
    if not path.exists():
        return
    if not path.is_dir():
        raise CheckpointError(path, "exists and is a file, not a checkpoint directory")
    entries = list(path.iterdir())
    if not entries:
        return
    if not overwrite:
        raise CheckpointError(path, "is not empty; pass overwrite=True to replace the checkpoint there")
    if not _is_checkpoint(path):
        raise CheckpointError(path, "exists and is not a checkpoint; refusing to replace it")
    for d in [path, *(e for e in entries if e.is_dir())]:
        if not os.access(d, os.W_OK | os.X_OK):
            raise CheckpointError(path, f"cannot replace it: {d} is read-only, so the old checkpoint could not be removed")


def _is_checkpoint(path: Path) -> bool:
    """irflow's (with an index) or OneFlow's (only variable directories and snapshot_done)."""
    if (path / INDEX).is_file():
        return True
    return all(
        (e.name == layout.SNAPSHOT_DONE and e.is_file()) or (e.is_dir() and (e / layout.OUT).is_file())
        for e in path.iterdir()
    )


def _write_variable(directory: Path, name: str, array: np.ndarray) -> dict[str, Any]:
    directory.mkdir()
    meta = layout.format_meta(array.shape, array.dtype).encode()
    out = layout.to_bytes(array)
    _write_file(directory / layout.META, meta)
    _write_file(directory / layout.OUT, out)
    _fsync_dir(directory)
    dtype = array.dtype.newbyteorder("<")
    return {"dir": directory.name, "shape": list(array.shape), "dtype": dtype.str, "sha256": _digest(name, meta, out)}


def _write_file(file: Path, data: bytes) -> None:
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _recover(path: Path) -> None:
    """Finish or roll back a save that was killed; drop its unfinished copy. Hold the lock."""
    tmp, old = siblings(path)
    if old.exists():
        if path.exists():
            shutil.rmtree(old)  # the new checkpoint had landed
        else:
            os.rename(old, path)
    if tmp.exists():
        shutil.rmtree(tmp)


# ------------------------------------------------------------------ loading


def load(path: str | os.PathLike[str], declared: Declared | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Read and verify the checkpoint at `path`: (arrays by name, meta).

    `declared` gives shape and dtype by name for OneFlow variables saved without `meta`.
    """
    path = as_path(path)
    return _consistent_read(path, lambda d: _read_checkpoint(d, path, declared or {}))


def load_variable(path: str | os.PathLike[str], declared: Declared | None = None) -> np.ndarray:
    """One variable's directory (`out` and `meta`), as OneFlow's checkpoint.get reads it.

    Inside an irflow checkpoint the variable is checked against its index entry.
    """
    path = as_path(path)
    parent = path.parent
    if not (parent / INDEX).is_file():
        return _consistent_read(path, lambda d: _read_variable(d, path, "", (declared or {}).get(path.name), path.name))

    def read(d: _Dir) -> np.ndarray:
        index = _read_index(d, parent)
        for name, entry in index["variables"].items():
            if entry["dir"] == path.name:
                return _read_indexed(d, parent, name, entry)
        raise CheckpointError(path, f"is not listed in {parent / INDEX}")

    return _consistent_read(parent, read)


def is_variable_dir(path: str | os.PathLike[str]) -> bool:
    """A single variable's directory (it holds `out`) rather than a whole checkpoint."""
    return (as_path(path) / layout.OUT).is_file()


class _Dir:
    """An open directory: every read goes through its handle, so a rename of the path cannot mix two saves."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd

    def read(self, relative: str) -> bytes:
        fd = os.open(relative, os.O_RDONLY, dir_fd=self.fd)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def listdir(self, relative: str = ".") -> list[str]:
        if relative == ".":
            return os.listdir(self.fd)
        fd = os.open(relative, os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.fd)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def isdir(self, relative: str) -> bool:
        try:
            return stat.S_ISDIR(os.stat(relative, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return False

    def replaced(self) -> bool:
        """Whether `path` names another directory now than the one open here."""
        try:
            now, open_here = os.stat(self.path), os.fstat(self.fd)
            return (now.st_dev, now.st_ino) != (open_here.st_dev, open_here.st_ino) or open_here.st_nlink == 0
        except OSError:
            return True


def _consistent_read(path: Path, read: Callable[[_Dir], Any]) -> Any:
    """`read` one directory generation; start over when a concurrent save replaced it meanwhile."""
    for attempt in range(_READ_ATTEMPTS):
        _tidy(path)
        target = path
        if not path.exists() and siblings(path)[1].is_dir():
            target = siblings(path)[1]  # between a save's two renames: the previous checkpoint, complete
        try:
            fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            if attempt + 1 < _READ_ATTEMPTS and _busy(path):
                time.sleep(0.005 * (attempt + 1))
                continue
            raise CheckpointError(path, "no checkpoint directory") from None
        except OSError as err:
            raise CheckpointError(path, f"cannot open: {err.strerror}") from None
        directory = _Dir(target, fd)
        try:
            return read(directory)
        except (CheckpointError, OSError) as err:
            if not directory.replaced():
                if isinstance(err, OSError):
                    raise CheckpointError(path, f"cannot read: {err.strerror}") from None
                raise
            time.sleep(0.005 * (attempt + 1))
        finally:
            os.close(fd)
    raise CheckpointError(path, f"was replaced {_READ_ATTEMPTS} times while being read (saves running meanwhile)")


def _busy(path: Path) -> bool:
    """A save of `path` is under way in some process (it holds the lock)."""
    try:
        with _locked(path.parent, wait=False):
            return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def _tidy(path: Path) -> None:
    """What a killed save left of `path`, cleaned unless a save is running or the parent is read-only."""
    tmp, old = siblings(path)
    if not (tmp.exists() or old.exists()):
        return
    with contextlib.suppress(OSError):
        with _locked(path.parent, wait=False):
            _recover(path)


def _read_checkpoint(d: _Dir, path: Path, declared: Declared) -> tuple[dict[str, np.ndarray], dict]:
    names = set(d.listdir())
    if INDEX not in names:
        if not names:
            raise CheckpointError(path, f"is empty: no {INDEX} and no variable directories")
        return _read_oneflow(d, path, names, declared), {}
    index = _read_index(d, path)
    expected = {INDEX, layout.SNAPSHOT_DONE} | {e["dir"] for e in index["variables"].values()}
    if stray := sorted(names - expected):
        raise CheckpointError(path, f"holds {', '.join(map(repr, stray))}, which {INDEX} does not list")
    arrays = {name: _read_indexed(d, path, name, entry) for name, entry in index["variables"].items()}
    return arrays, index["meta"]


def _read_index(d: _Dir, path: Path) -> dict[str, Any]:
    try:
        raw = d.read(INDEX)
        index = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(path, f"missing {INDEX}") from None
    except RecursionError:
        raise CheckpointError(path, f"{INDEX} nests too deeply to be an index") from None
    except ValueError as err:
        raise CheckpointError(path, f"unreadable {INDEX}: {err}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise CheckpointError(path, f"{INDEX} is not an {FORMAT} index")
    if index.get("version") != VERSION:
        raise CheckpointError(path, f"unknown format version {index.get('version')!r} (this reads {VERSION})")
    if set(index) != _TOP_KEYS:
        raise CheckpointError(path, f"{INDEX} has keys {sorted(index)}, expected {sorted(_TOP_KEYS)}")
    body = {k: v for k, v in index.items() if k != "sha256"}
    if index["sha256"] != _index_digest(body):
        raise CheckpointError(path, f"checksum mismatch in {INDEX}: it was changed after the save")
    if _index_text(index) != raw:  # a change that parses the same, as "\u00dc" for "\u00DC", is a change too
        raise CheckpointError(path, f"{INDEX} is not byte for byte as it was saved")
    variables = index["variables"]
    if not isinstance(variables, dict) or not isinstance(index["meta"], dict) or index["count"] != len(variables):
        raise CheckpointError(path, f"{INDEX} lacks its 'variables' or 'meta' table, or its count disagrees")
    dirs = set()
    for name, entry in variables.items():
        if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
            raise CheckpointError(path, f"malformed {INDEX} entry {entry!r}", name)
        if not isinstance(entry["dir"], str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.=+-]*", entry["dir"]):
            raise CheckpointError(path, f"bad directory name {entry['dir']!r} in {INDEX}", name)
        if entry["dir"].lower() in dirs:
            raise CheckpointError(path, f"directory {entry['dir']!r} listed twice in {INDEX}", name)
        dirs.add(entry["dir"].lower())
    return index


def _read_indexed(d: _Dir, path: Path, name: str, entry: dict[str, Any]) -> np.ndarray:
    directory = entry["dir"]
    try:
        meta, out = d.read(f"{directory}/{layout.META}"), d.read(f"{directory}/{layout.OUT}")
        extra = sorted(set(d.listdir(directory)) - {layout.META, layout.OUT})
    except FileNotFoundError:
        raise CheckpointError(path, f"missing {directory}/{layout.META} or {layout.OUT}", name) from None
    if extra:
        raise CheckpointError(path, f"{directory} holds {', '.join(map(repr, extra))}, which {INDEX} does not list", name)
    if _digest(name, meta, out) != entry["sha256"]:
        raise CheckpointError(path, f"checksum mismatch in {directory}: its data is not what was saved as {name!r}", name)
    try:
        shape, dtype = layout.parse_meta(meta.decode("utf-8"))
        array = layout.from_bytes(out, shape, dtype)
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(path, f"{directory}: {err}", name) from None
    if list(shape) != entry["shape"] or dtype.str != entry["dtype"]:
        raise CheckpointError(
            path, f"{directory} holds {dtype.str} {list(shape)}, index says {entry['dtype']} {entry['shape']}", name
        )
    return array


def _read_oneflow(d: _Dir, path: Path, names: set[str], declared: Declared) -> dict[str, np.ndarray]:
    """A checkpoint OneFlow wrote: its variable directories, in name order; other entries are not variables."""
    variables = sorted(n for n in names if d.isdir(n) and layout.OUT in d.listdir(n))
    if not variables:
        raise CheckpointError(path, f"has no {INDEX} and no variable directories (with an '{layout.OUT}' file)")
    return {name: _read_variable(d, path, f"{name}/", declared.get(name), name) for name in variables}


def _read_variable(
    d: _Dir, path: Path, prefix: str, declared: tuple[tuple[int, ...], np.dtype] | None, label: str
) -> np.ndarray:
    """`out` (and `meta` if present) under `prefix` of `d`: "name/" in a checkpoint, "" in the variable's own directory."""
    try:
        out = d.read(prefix + layout.OUT)
    except FileNotFoundError:
        raise CheckpointError(path, f"missing {prefix}{layout.OUT}", label) from None
    try:
        meta = d.read(prefix + layout.META)
    except FileNotFoundError:
        meta = None
    if meta is None and declared is None:
        raise CheckpointError(path, f"has no {prefix}{layout.META} and no declared shape and dtype", label)
    try:  # decoding inside: a `meta` of bytes that are not text is a bad meta, not an unexplained UnicodeDecodeError
        shape, dtype = (
            layout.parse_meta(meta.decode("utf-8"))
            if meta is not None
            else (tuple(declared[0]), np.dtype(declared[1]).newbyteorder("<"))  # type: ignore[index]
        )
    except (UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(path, f"{prefix}{layout.META}: {err}", label) from None
    try:  # a size that disagrees with the shape is `out`'s fault (truncated, or another variable's)
        return layout.from_bytes(out, shape, dtype)
    except ValueError as err:
        raise CheckpointError(path, f"{prefix}{layout.OUT}: {err}", label) from None


# ------------------------------------------------------------------ shared


def _digest(name: str, meta: bytes, out: bytes) -> str:
    """Binds a variable's name to its data: swapping two directories, or renaming one, fails the check."""
    digest = hashlib.sha256()
    for part in (name.encode("utf-8"), meta, out):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def _index_text(index: Mapping[str, Any]) -> bytes:
    return json.dumps(index, indent=1).encode()


def _index_digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@contextlib.contextmanager
def _locked(directory: Path, wait: bool = True) -> Iterator[None]:
    """An exclusive flock on `directory`: one save (or clean-up) at a time; released if the process dies."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _os_errors(path: Path, doing: str) -> Iterator[None]:
    """An OSError (disk full, permission denied, ...) as a CheckpointError naming the path and cause."""
    try:
        yield
    except OSError as err:
        where = f" ({err.filename})" if err.filename and str(err.filename) != str(path) else ""
        cause = err.strerror or errno.errorcode.get(err.errno or 0, str(err))
        raise CheckpointError(path, f"{doing}: {cause}{where}") from err


def _fsync_dir(directory: Path) -> None:
    """Make renames and new entries in `directory` durable (POSIX)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
