"""A job function's signature: placeholders in, annotated results out.

Reading: parameters become placeholder specs (`tp.Numpy.Placeholder` as an
annotation, or as a default value in OneFlow's older style), and the return
annotation says how the job's outputs come back: now (`tp.Numpy`, nested
`Tuple`/`List`/`Dict`, `tp.Bundle`), through a handler (`tp.Callback[T]`), or,
without an annotation, as OneFlow's older future with `.get()` and
`.async_get(handler)` whose values are `LocalBlob`s. Calling: each argument is
checked against its placeholder before anything runs.
"""

from __future__ import annotations

import inspect
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from irflow import typing as tp
from irflow.errors import ExecutionError, SourceLocation, TraceError
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob
from irflow.frontend.locations import user_location

if TYPE_CHECKING:
    from irflow.frontend.session import Registration
    from irflow.frontend.tracing import Trace

# How a call hands its results back.
SYNC, CALLBACK, FUTURE = "sync", "callback", "future"


@dataclass(frozen=True)
class TupleParam:
    items: tuple[Any, ...]  # PlaceholderDef classes or TupleParams


@dataclass(frozen=True)
class Out:
    """How the job's outputs become the Python value a call returns."""

    kind: str  # "none", "leaf", "tuple", "list", "dict", "bundle"
    leaf: str = "numpy"  # for "leaf" and "bundle": numpy | list_numpy | list_list_numpy | local_blob
    items: tuple[Out, ...] = ()  # "tuple": one per element; "list", "dict": the element's
    variadic: bool = False  # Tuple[X, ...]


@dataclass
class Signature:
    params: list[tuple[str, Any]]  # (name, placeholder spec or TupleParam)
    python: inspect.Signature
    returns: Any  # the annotation (inside tp.Callback); inspect.Signature.empty when there is none
    out: Out | None  # None: no annotation, any nesting of Blobs comes back as LocalBlobs
    mode: str  # SYNC | CALLBACK | FUTURE


def def_location(func: Callable[..., Any]) -> SourceLocation:
    """The line of `def` itself, below any decorators, as the user reads it."""
    code = func.__code__
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError):
        return SourceLocation(code.co_filename, code.co_firstlineno, 1)
    for offset, text in enumerate(lines):
        stripped = text.lstrip()
        if stripped.startswith(("def ", "async def ")):
            return SourceLocation(code.co_filename, first + offset, len(text) - len(stripped) + 1)
    return SourceLocation(code.co_filename, first, 1)


def describe(annotation: Any) -> str:
    if annotation is inspect.Signature.empty:
        return "no annotation"
    if _is_placeholder(annotation):
        return f"{annotation.__name__}({annotation.shape}, dtype={annotation.dtype!r})"
    for cls, _ in tp.LEAVES.items():
        if annotation is cls:
            return f"tp.{cls.__name__}"
    return repr(annotation).replace("irflow.typing.", "tp.").replace("typing.", "")


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, tp.PlaceholderDef)


def read_signature(func: Callable[..., Any], where: SourceLocation) -> Signature:
    """Parameters as placeholder specs; the return annotation (inside tp.Callback) and its spec."""
    try:
        hints = typing.get_type_hints(func)
    except Exception as err:  # noqa: BLE001  NameError etc. from string annotations
        raise TraceError(f"cannot resolve the annotations of '{func.__name__}': {err}", where) from None
    python = inspect.signature(func)
    params: list[tuple[str, Any]] = []
    for p in python.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise TraceError(
                f"job function '{func.__name__}' cannot take {star}{p.name}: every parameter must be a placeholder",
                where,
            )
        annotation = hints.get(p.name, p.annotation)
        if annotation is p.empty and _is_placeholder(p.default):
            annotation = p.default  # OneFlow's older style: `images=flow.FixedTensorDef(...)`
        params.append((p.name, _param_spec(annotation, p.name, where)))
    returns = hints.get("return", python.return_annotation)
    if returns is tp.Callback:
        raise TraceError("tp.Callback needs the type of its result, e.g. -> tp.Callback[tp.Numpy]", where)
    mode = SYNC
    if typing.get_origin(returns) is tp.Callback:
        mode, returns = CALLBACK, typing.get_args(returns)[0]
    elif returns is inspect.Signature.empty:
        mode = FUTURE
    out = None if returns is inspect.Signature.empty else _out_spec(returns, where)
    return Signature(params, python, returns, out, mode)


def _param_spec(annotation: Any, name: str, where: SourceLocation) -> Any:
    if _is_placeholder(annotation):
        return annotation
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args and Ellipsis not in args:
            return TupleParam(tuple(_param_spec(a, name, where) for a in args))
    raise TraceError(
        f"parameter '{name}' needs a placeholder annotation such as "
        f"tp.Numpy.Placeholder((2, 3), dtype=flow.float) (or a Tuple of them), got {describe(annotation)}",
        where,
    )


def leaves(spec: Any) -> list[type[tp.PlaceholderDef]]:
    if isinstance(spec, TupleParam):
        return [leaf for item in spec.items for leaf in leaves(item)]
    return [spec]


def _out_spec(annotation: Any, where: SourceLocation, inside: str = "") -> Out:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is None or annotation is type(None):
        if inside:
            raise TraceError(f"None cannot appear inside {inside}", where)
        return Out("none")
    if annotation in tp.LEAVES:
        return Out("leaf", tp.LEAVES[annotation])
    if annotation is tp.Callback or origin is tp.Callback:
        if not args:
            raise TraceError("tp.Callback needs the type of its result, e.g. -> tp.Callback[tp.Numpy]", where)
        raise TraceError("tp.Callback may only be the outermost return annotation", where)
    if annotation is tp.Bundle or origin is tp.Bundle:
        if not args or args[0] not in tp.LEAVES:
            raise TraceError("tp.Bundle needs a leaf type: tp.Bundle[tp.Numpy] or tp.Bundle[tp.ListNumpy]", where)
        return Out("bundle", tp.LEAVES[args[0]])
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return Out("tuple", items=(_out_spec(args[0], where, "Tuple"),), variadic=True)
        return Out("tuple", items=tuple(_out_spec(a, where, "Tuple") for a in args))
    if origin is list and len(args) == 1:
        return Out("list", items=(_out_spec(args[0], where, "List"),))
    if origin is dict and len(args) == 2:
        return Out("dict", items=(_out_spec(args[1], where, "Dict"),))
    raise TraceError(
        f"unsupported return annotation {describe(annotation)}: use None, tp.Numpy, tp.ListNumpy, "
        "tp.ListListNumpy, Tuple/List/Dict of them, tp.Bundle[...] or tp.Callback[...]",
        where,
    )


# ----------------------------------------------------------------- returned values


class _Mismatch(Exception):
    def __init__(self, path: str, expected: str, value: Any):
        super().__init__(f"{path or 'the result'} is {what(value)}, but the annotation expects {expected}")


def what(value: Any) -> str:
    if isinstance(value, Blob):
        return f"Blob '{value.name}'"
    if isinstance(value, (tuple, list, dict)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"{type(value).__name__} {value!r}"


def returned_blobs(sig: Signature, result: Any, trace: Trace, name: str, where: SourceLocation) -> tuple[list[Blob], Any]:
    """Check what the function returned against its annotation; the Blobs (the job's outputs) and the tree to rebuild."""
    spec = sig.out
    if spec is None:  # no annotation: OneFlow's older API returns whatever Blobs came back
        spec = Out("none") if result is None else Out("bundle", "local_blob")
    if spec.kind == "none":
        if result is not None:
            raise TraceError(f"job function '{name}' returns {what(result)} but is annotated -> None; "
                             "annotate it, e.g. -> tp.Numpy", where)
        return [], ("none",)
    blobs: list[Blob] = []
    try:
        tree = _collect(spec, result, blobs, "")
    except _Mismatch as err:
        expected = describe(sig.returns) if sig.out is not None else "a Blob or a list, tuple or dict of them"
        raise TraceError(
            f"job function '{name}' returns a value that does not match {expected}: {err}", where
        ) from None
    for blob in blobs:
        if blob.trace is not trace:
            raise TraceError(f"job function '{name}' returns Blob '{blob.name}' of another job", where)
    return blobs, tree


def _collect(spec: Out, value: Any, blobs: list[Blob], path: str) -> Any:
    """Check `value` against `spec`; gather its Blobs; return the shape to rebuild from their arrays."""
    if spec.kind == "leaf":
        if not isinstance(value, Blob):
            raise _Mismatch(path, "a Blob", value)
        blobs.append(value)
        return ("leaf", len(blobs) - 1, spec.leaf)
    if spec.kind == "bundle":
        if isinstance(value, Blob):
            blobs.append(value)
            return ("leaf", len(blobs) - 1, spec.leaf)
        if isinstance(value, (list, tuple)):
            items = [_collect(spec, v, blobs, f"{path}[{i}]") for i, v in enumerate(value)]
            return ("tuple" if isinstance(value, tuple) else "list", items)
        if isinstance(value, dict):
            return ("dict", [(k, _collect(spec, v, blobs, f"{path}[{k!r}]")) for k, v in value.items()])
        raise _Mismatch(path, "a Blob or a list, tuple or dict of them", value)
    if spec.kind in ("tuple", "list"):
        if not isinstance(value, (tuple, list)):
            raise _Mismatch(path, f"a {spec.kind}", value)
        items = spec.items * len(value) if spec.variadic or spec.kind == "list" else spec.items
        if len(items) != len(value):
            raise _Mismatch(path, f"a tuple of {len(items)}", value)
        return (spec.kind, [_collect(s, v, blobs, f"{path}[{i}]") for i, (s, v) in enumerate(zip(items, value))])
    if spec.kind == "dict":
        if not isinstance(value, dict):
            raise _Mismatch(path, "a dict", value)
        return ("dict", [(k, _collect(spec.items[0], v, blobs, f"{path}[{k!r}]")) for k, v in value.items()])
    raise AssertionError(spec.kind)


def rebuild(node: Any, arrays: Sequence[Any], instances: Sequence[Sequence[int] | None] = ()) -> Any:
    """The returned value from the job's outputs (arrays, or per-device lists of them in the mirrored view);
    `instances[i]`: output i's rows per tensor-list instance."""
    kind = node[0]
    if kind == "none":
        return None
    if kind == "leaf":
        index = node[1]
        return leaf_value(node[2], arrays[index], instances[index] if index < len(instances) else None)
    if kind == "tuple":
        return tuple(rebuild(n, arrays, instances) for n in node[1])
    if kind == "list":
        return [rebuild(n, arrays, instances) for n in node[1]]
    return {k: rebuild(n, arrays, instances) for k, n in node[1]}


WHOLE = ("numpy", "local_blob")
"""The leaf kinds that show a mirrored job's output whole; the list kinds show each device's part."""


def leaf_kinds(node: Any, count: int) -> list[str]:
    """The kind of each of the `count` outputs a `rebuild` tree places, by output index."""
    kinds = [""] * count
    stack = [node]
    while stack:
        node = stack.pop()
        if node[0] == "leaf":
            kinds[node[1]] = node[2]
        elif node[0] in ("tuple", "list"):
            stack.extend(node[1])
        elif node[0] == "dict":
            stack.extend(n for _, n in node[1])
    return kinds


def leaf_value(kind: str, array: np.ndarray | list[np.ndarray], rows: Sequence[Any] | None = None) -> Any:
    """numpy: the array; list_numpy: one array per device; list_list_numpy: one tensor list per device.

    In the mirrored view on several devices `array` is the list of the split(0) rows
    of the devices this process runs (every device, or under mpiexec its
    own). A tensor list whose rows follow a tensor-list input (`rows`: that input's
    rows per instance, per device on several) is cut back into its instances, as
    views of each device's array.
    """
    if isinstance(array, list):
        pieces = array
    elif kind == "numpy":
        return array
    elif kind == "local_blob":
        return array if isinstance(array, LocalBlob) else local_blob(array)
    else:
        pieces = [array]
    if kind == "list_numpy":
        return pieces
    if rows is None:
        return [[piece] for piece in pieces]
    per_device = rows if isinstance(array, list) else [rows]
    return [np.split(piece, np.cumsum(r)[:-1]) for piece, r in zip(pieces, per_device)]


def instance_rows(value: Any) -> Any:
    """The rows of each instance of a tensor-list input (a tuple), or of each device's (a list of them); else None."""
    if isinstance(value, tuple):
        return [a.shape[0] for a in value]
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return [instance_rows(t) for t in value]
    return None


class LocalBlob(np.ndarray):
    """A result of OneFlow's older API: an ndarray that also answers `.ndarray()`, `.numpy()` and, per device,
    `.numpy_list()` (one array on one device or in the consistent view; each device's rows in the mirrored view)."""

    parts: list[np.ndarray] | None = None  # the mirrored view's per-device arrays, when there are several

    def ndarray(self) -> np.ndarray:
        return self.view(np.ndarray)

    def numpy(self) -> np.ndarray:
        return self.view(np.ndarray)

    def numpy_list(self) -> list[np.ndarray]:
        return list(self.parts) if self.parts is not None else [self.numpy()]

    ndarray_list = numpy_list


def local_blob(whole: np.ndarray, parts: list[np.ndarray] | None = None) -> LocalBlob:
    """`whole` as a LocalBlob that knows the per-device `parts` of a mirrored job's output."""
    blob = whole.view(LocalBlob)
    blob.parts = parts
    return blob


class Future:
    """What a job without a return annotation gives back: `.get()` waits, `.async_get(handler)` does not."""

    def __init__(self, registration: Registration):
        self._registration = registration

    def get(self) -> Any:
        """The result (LocalBlobs, nested as the job returned them); a failure of this call is raised here."""
        return self._registration.wait()

    def async_get(self, callback: Callable[[Any], Any]) -> None:
        """Call `callback(result)` once the result is ready, in call order."""
        self._registration(callback)


# ----------------------------------------------------------------- arguments


def check_argument(
    job: str, name: str, spec: Any, value: Any, flat: list[Any], copy: bool, devices: int, parts: int
) -> None:
    """Validate one argument against its placeholder before anything runs; append its array(s) to `flat`.

    A list placeholder takes one array per device this process runs (`parts`:
    all `devices`, or under mpiexec its own one); in the mirrored view on many
    devices (`devices` > 1) `flat` gets the list of those pieces.
    """
    if isinstance(spec, TupleParam):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec.items):
            raise TypeError(f"{job}() argument '{name}' must be a tuple of {len(spec.items)} arrays, got {what(value)}")
        for i, (s, v) in enumerate(zip(spec.items, value)):
            check_argument(job, f"{name}[{i}]", s, v, flat, copy, devices, parts)
        return
    if spec.kind == "numpy":
        flat.append(_checked(job, name, spec, value, copy))
        return
    if not isinstance(value, (list, tuple)) or len(value) != parts:
        here = f"{devices} device(s) here" if parts == devices else (
            f"this process's {parts}: under mpiexec each of the job's {devices} devices is one process")
        raise TypeError(f"{job}() argument '{name}' must be a list with one array per device ({here}), "
                        f"got {what(value)}")
    named = [None if parts == 1 else i for i in range(parts)]  # the device index errors name
    if spec.kind == "list_list_numpy":
        pieces: list[Any] = [_tensor_list(job, name, spec, item, copy, d) for item, d in zip(value, named)]
    else:
        dynamic = dynamic_axes(spec, devices)
        pieces = [_checked(job, name, spec, a, copy, dynamic, d) for a, d in zip(value, named)]
    flat.append(pieces[0] if devices == 1 else pieces)


def _tensor_list(
    job: str, name: str, spec: Any, instances: Any, copy: bool, device: int | None
) -> tuple[np.ndarray, ...]:
    """One device's tensor list: instances of the placeholder's rank and trailing shape, whose rows fit its bound.

    The job sees their rows one after another (axis 0 is dynamic), so row-wise ops
    act instance by instance; the executor copies each into place.
    """
    who = f"argument '{name}'" + (f" for device {device}" if device is not None else "")
    if not isinstance(instances, (list, tuple)) or not instances:
        raise TypeError(f"{job}() {who} must be a list per device of a non-empty list of arrays "
                        f"([[array, ...]]), got {what(instances)}")
    arrays = tuple(_checked(job, f"{name}[{device or 0}][{i}]", spec, a, copy, (0,)) for i, a in enumerate(instances))
    rows = sum(a.shape[0] for a in arrays)
    if rows > spec.shape[0]:
        raise ExecutionError(
            f"{job}() {who}: its instances {', '.join(str(a.shape) for a in arrays)} have {rows} rows "
            f"together, over the placeholder's bound {spec.shape[0]} (shape {spec.shape})",
            user_location(),
        )
    return arrays


def is_dynamic(spec: Any, devices: int) -> bool:
    """A list placeholder takes arrays within its shape, which is their bound.

    On several devices in the mirrored view each device's array (or tensor list)
    has sizes of its own within the bound.
    """
    return spec.kind != "numpy" and bool(spec.shape)


def dynamic_axes(spec: Any, devices: int) -> tuple[int, ...]:
    """The placeholder's axes whose size may be smaller than its shape (docs/dynamic.md).

    A `tp.ListNumpy` array may be smaller on every axis, as OneFlow checks (each
    device's on its own in the mirrored view on several); an axis of bound 1 stays
    exact (so it still broadcasts). A tensor list's instances share the
    placeholder's trailing shape, so only axis 0 varies there.
    """
    if not is_dynamic(spec, devices):
        return ()
    if spec.kind == "list_list_numpy":
        return (0,)
    return (0, *(a for a, d in enumerate(spec.shape) if a > 0 and d > 1))


def _checked(
    job: str, name: str, spec: Any, array: Any, copy: bool, dynamic: tuple[int, ...] = (), device: int | None = None
) -> np.ndarray:
    """One array of the placeholder's (per-device) shape and dtype, contiguous (copied if `copy`).

    `dynamic`: the axes that may be smaller than the placeholder's, which is their bound;
    `device`: the index of the device the array is for, named in errors.
    """
    who = f"argument '{name}'" + (f" for device {device}" if device is not None else "")
    expected = f"numpy.ndarray of shape {spec.shape} and dtype {spec.dtype.name}"
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{job}() {who} must be a {expected}, got {type(array).__name__}")
    if isinstance(array, np.ma.MaskedArray):
        raise ExecutionError(
            f"{job}() {who} is a masked array; jobs would ignore its mask, so pass .filled(value) or .data",
            user_location(),
        )
    if array.dtype != spec.dtype.np_dtype:
        raise ExecutionError(f"{job}() {who}: expected dtype {spec.dtype.name}, given {array.dtype}",
                             user_location())
    if dynamic:
        fits = array.ndim == len(spec.shape) and all(
            n <= d if a in dynamic else n == d for a, (n, d) in enumerate(zip(array.shape, spec.shape))
        )
        if not fits:
            dims = [f"<={d}" if a in dynamic else str(d) for a, d in enumerate(spec.shape)]
            which = f"axis 0 within the placeholder's bound {spec.shape[0]}" if dynamic == (0,) else (
                f"within the placeholder's shape {spec.shape}")
            raise ExecutionError(
                f"{job}() {who}: expected shape ({', '.join(dims)}{',' if len(dims) == 1 else ''}) "
                f"({which}), given {array.shape}",
                user_location(),
            )
    elif array.shape != spec.shape:
        raise ExecutionError(f"{job}() {who}: expected shape {spec.shape}, given {array.shape}",
                             user_location())
    # not np.ascontiguousarray: it makes a rank-0 array rank 1, which a job on many devices refuses
    return np.array(array, copy=True, order="C") if copy else np.asarray(array, order="C")


def tensor_def(kind: str, name: str) -> Callable[..., type[tp.PlaceholderDef]]:
    """OneFlow's deprecated FixedTensorDef / MirroredTensorDef: the placeholder as a parameter's default."""
    placeholder = {"numpy": tp.Numpy.Placeholder, "list_numpy": tp.ListNumpy.Placeholder}[kind]

    def make(shape: Sequence[int], dtype: object = dtypes.float32, batch_axis: int | None = 0) -> Any:
        warnings.warn(f"flow.{name} is deprecated; annotate the parameter with "
                      f"tp.{'Numpy' if kind == 'numpy' else 'ListNumpy'}.Placeholder(shape, dtype)",
                      DeprecationWarning, stacklevel=2)
        return placeholder(shape, dtype)

    make.__name__ = name
    return make
