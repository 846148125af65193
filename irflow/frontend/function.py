"""@flow.global_function: trace a Python function into a job, compile it on first call, run it.

Defining the function traces it at once (OneFlow's lazy mode): placeholders
become the block arguments of one `job.func`, every op call appends a job op,
and the returned Blobs become `job.return`'s operands, followed by any
`flow.watch`ed Blobs as hidden outputs. The first call hands a copy of the
module to the compiler (`irflow.compiler.compile_job`); later calls reuse that executable.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, FunctionType, ModuleOp, StringAttr
from xdsl.utils.exceptions import VerifyException

from irflow import typing as tp
from irflow.dialects.job import ReturnOp, shape_of, tensor
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr, hierarchy_of, nd_text
from irflow.errors import ExecutionError, SourceLocation, TraceError
from irflow.frontend.blob import Blob
from irflow.frontend.config import FunctionConfig
from irflow.frontend.distribute import job_placement, placement_here
from irflow.frontend.session import Session, default_session
from irflow.frontend.tracing import Trace, to_loc, tracing, user_location
from irflow.textir import print_module

JOB_TYPES = ("train", "predict")
DUMP_ENV = "IRFLOW_DUMP_IR"


def global_function(
    type: str | FunctionConfig = "predict",  # noqa: A002  OneFlow's parameter name
    function_config: FunctionConfig | None = None,
) -> Callable[[Callable[..., Any]], JobFunction]:
    """Make a job function: `@flow.global_function(type="train", function_config=config)`."""
    if isinstance(type, FunctionConfig):
        warnings.warn(
            "flow.global_function(function_config) is deprecated; "
            "write flow.global_function(type='predict', function_config=config)",
            DeprecationWarning,
            stacklevel=2,
        )
        type, function_config = "predict", type
    if callable(type):
        raise TraceError(
            "flow.global_function must be called: write @flow.global_function() or "
            "@flow.global_function(type='train')",
            user_location(),
        )
    if type not in JOB_TYPES:
        raise TraceError(f"flow.global_function: type must be 'train' or 'predict', got {type!r}", user_location())
    if function_config is not None and not isinstance(function_config, FunctionConfig):
        raise TraceError(
            f"flow.global_function: function_config must come from flow.function_config(), got {function_config!r}",
            user_location(),
        )
    config = function_config or FunctionConfig()

    def decorator(func: Callable[..., Any]) -> JobFunction:
        return JobFunction(func, type, config)

    return decorator


# ----------------------------------------------------------------- annotations


@dataclass(frozen=True)
class TupleParam:
    items: tuple[Any, ...]  # PlaceholderDef classes or TupleParams


@dataclass(frozen=True)
class Out:
    """How the job's outputs become the Python value a call returns."""

    kind: str  # "none", "leaf", "tuple", "list", "dict", "bundle"
    leaf: str = "numpy"  # for "leaf" and "bundle": numpy | list_numpy | list_list_numpy
    items: tuple[Out, ...] = ()  # "tuple": one per element; "list", "dict": the element's
    variadic: bool = False  # Tuple[X, ...]


def _def_location(func: Callable[..., Any]) -> SourceLocation:
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


def _describe(annotation: Any) -> str:
    if annotation is inspect.Signature.empty:
        return "no annotation"
    if isinstance(annotation, type) and issubclass(annotation, tp.PlaceholderDef):
        return f"{annotation.__name__}({annotation.shape}, dtype={annotation.dtype!r})"
    for cls, _ in tp.LEAVES.items():
        if annotation is cls:
            return f"tp.{cls.__name__}"
    return repr(annotation).replace("irflow.typing.", "tp.").replace("typing.", "")


def _param_spec(annotation: Any, name: str, where: SourceLocation) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, tp.PlaceholderDef):
        return annotation
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args and Ellipsis not in args:
            return TupleParam(tuple(_param_spec(a, name, where) for a in args))
    raise TraceError(
        f"parameter '{name}' needs a placeholder annotation such as "
        f"tp.Numpy.Placeholder((2, 3), dtype=flow.float) (or a Tuple of them), got {_describe(annotation)}",
        where,
    )


def _leaves(spec: Any) -> list[type[tp.PlaceholderDef]]:
    if isinstance(spec, TupleParam):
        return [leaf for item in spec.items for leaf in _leaves(item)]
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
        f"unsupported return annotation {_describe(annotation)}: use None, tp.Numpy, tp.ListNumpy, "
        "tp.ListListNumpy, Tuple/List/Dict of them, tp.Bundle[...] or tp.Callback[...]",
        where,
    )


# ----------------------------------------------------------------- returned values


class _Mismatch(Exception):
    def __init__(self, path: str, expected: str, value: Any):
        super().__init__(f"{path or 'the result'} is {_what(value)}, but the annotation expects {expected}")


def _what(value: Any) -> str:
    if isinstance(value, Blob):
        return f"Blob '{value.name}'"
    if isinstance(value, (tuple, list, dict)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"{type(value).__name__} {value!r}"


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


def _rebuild(node: Any, arrays: Sequence[np.ndarray], devices: int) -> Any:
    kind = node[0]
    if kind == "none":
        return None
    if kind == "leaf":
        return leaf_value(node[2], arrays[node[1]], devices)
    if kind == "tuple":
        return tuple(_rebuild(n, arrays, devices) for n in node[1])
    if kind == "list":
        return [_rebuild(n, arrays, devices) for n in node[1]]
    return {k: _rebuild(n, arrays, devices) for k, n in node[1]}


def _joined(pieces: Sequence[np.ndarray], rows: int) -> np.ndarray:
    """The split(0) value of `rows` rows from every device's piece, padding cut off (ceil-sized chunks)."""
    chunk = -(-rows // len(pieces))
    return np.concatenate([p[: max(0, min(chunk, rows - r * chunk))] for r, p in enumerate(pieces)])


def leaf_value(kind: str, array: np.ndarray, devices: int = 1) -> Any:
    """numpy: the array; list_numpy: one array per device; list_list_numpy: one tensor list per device.

    In the mirrored view (`devices` > 1) device r's array is its split(0) chunk of
    the job's value: ceil-sized rows, the last devices' fewer.
    """
    if kind == "numpy":
        return array
    pieces = [array]
    if devices > 1:
        chunk = -(-array.shape[0] // devices)
        pieces = [array[r * chunk : (r + 1) * chunk] for r in range(devices)]
    return pieces if kind == "list_numpy" else [[piece] for piece in pieces]


# ----------------------------------------------------------------- the job


class JobFunction:
    """A traced job function: call it with numpy arrays; `ir(stage)` shows its IR."""

    def __init__(self, func: Callable[..., Any], job_type: str, config: FunctionConfig):
        functools.update_wrapper(self, func)
        self._func = func
        self.job_type = job_type
        self.config = config
        self._session: Session | None = default_session()
        self._where = _def_location(func)
        self._exe: Any = None
        self._compile_lock = threading.Lock()
        self.job_name = self._unique_name(func.__name__)
        self._trace()
        self._session.jobs[self.job_name] = self

    def _unique_name(self, name: str) -> str:
        assert self._session is not None
        taken, n, unique = self._session.jobs, 1, name
        while unique in taken:
            unique, n = f"{name}_{n}", n + 1
        return unique

    # ------------------------------------------------------------- tracing

    def _trace(self) -> None:
        returns, spec = self._read_signature()
        leaves = [leaf for _, spec in self._params for leaf in _leaves(spec)]
        self.mirrored = self.config.mirrored
        with self.config.placement_scope or contextlib.nullcontext():
            placement = placement_here()
            # Mirrored: a placeholder's shape is one device's; the job sees their concatenation along axis 0.
            self.devices = len(placement.devices) if self.mirrored else 1
            types = [self._logical_type(leaf) for leaf in leaves]
            trace = Trace(self.job_name, self.job_type, self.config, types, placement)
            with tracing(trace):
                result = self._func(*self._arguments(trace))
        blobs = self._returned_blobs(returns, spec, result, trace)
        self.output_count = len(blobs)
        self._watchers = [(handler, kind) for _, handler, kind in trace.watches]
        self._finish(trace, [b.value for b in blobs] + [b.value for b, _, _ in trace.watches])
        assert self._session is not None
        self._session.variables.update(trace.declared)

    def _read_signature(self) -> tuple[Any, Out | None]:
        """Parameters as placeholder specs; the return annotation (inside tp.Callback) and its spec."""
        func, where = self._func, self._where
        try:
            hints = typing.get_type_hints(func)
        except Exception as err:  # noqa: BLE001  NameError etc. from string annotations
            raise TraceError(f"cannot resolve the annotations of '{func.__name__}': {err}", where) from None
        self._signature = inspect.signature(func)
        self._params: list[tuple[str, Any]] = []
        for p in self._signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                star = "*" if p.kind is p.VAR_POSITIONAL else "**"
                raise TraceError(
                    f"job function '{func.__name__}' cannot take {star}{p.name}: every parameter must be a placeholder",
                    where,
                )
            self._params.append((p.name, _param_spec(hints.get(p.name, p.annotation), p.name, where)))
        returns = hints.get("return", self._signature.return_annotation)
        if returns is tp.Callback:
            raise TraceError("tp.Callback needs the type of its result, e.g. -> tp.Callback[tp.Numpy]", where)
        self.is_callback = typing.get_origin(returns) is tp.Callback
        if self.is_callback:
            returns = typing.get_args(returns)[0]
        return returns, None if returns is inspect.Signature.empty else _out_spec(returns, where)

    def _returned_blobs(self, returns: Any, spec: Out | None, result: Any, trace: Trace) -> list[Blob]:
        """Check what the function returned against its annotation; the Blobs become the job's outputs."""
        name, where = self._func.__name__, self._where
        self._out: Any = ("none",)
        if spec is None or spec.kind == "none":
            if result is not None:
                why = "has no return annotation" if spec is None else "is annotated -> None"
                raise TraceError(
                    f"job function '{name}' returns {_what(result)} but {why}; annotate it, e.g. -> tp.Numpy", where
                )
            return []
        blobs: list[Blob] = []
        try:
            self._out = _collect(spec, result, blobs, "")
        except _Mismatch as err:
            raise TraceError(
                f"job function '{name}' returns a value that does not match its annotation {_describe(returns)}: {err}",
                where,
            ) from None
        for blob in blobs:
            if blob.trace is not trace:
                raise TraceError(f"job function '{name}' returns Blob '{blob.name}' of another job", where)
        return blobs

    def _finish(self, trace: Trace, values: list[Any]) -> None:
        """Close the body with job.return, fix the function type, verify."""
        ret = ReturnOp(values)
        loc = to_loc(self._where)
        if loc is not None:
            for located in (ret, trace.func, *trace.block.args):
                located.location = loc
        trace.block.add_op(ret)
        self._output_rows = [shape_of(v.type)[0] if shape_of(v.type) else 1 for v in values]
        self._distribute(trace, values)
        trace.func.properties["function_type"] = FunctionType.from_lists(
            [a.type for a in trace.block.args], [v.type for v in values]
        )
        try:
            trace.module.verify()
        except VerifyException as err:
            raise TraceError(f"job '{self.job_name}' does not verify: {err}", self._where) from None
        self.module: ModuleOp = trace.module

    def _logical_type(self, leaf: type[tp.PlaceholderDef]) -> Any:
        if self.devices == 1:
            return tensor(leaf.shape, leaf.dtype.element_type)
        if leaf.kind == "numpy" or not leaf.shape:
            raise TraceError(
                f"job '{self.job_name}' is in the mirrored view on {self.devices} devices, so each input is one "
                f"array per device: use tp.ListNumpy.Placeholder with a shape of rank >= 1, "
                f"got {_describe(leaf)}",
                self._where,
            )
        return tensor((leaf.shape[0] * self.devices, *leaf.shape[1:]), leaf.dtype.element_type)

    def _distribute(self, trace: Trace, values: list[Any]) -> None:
        """Record the job's placement, view and input SBP on its job.func (see docs/distributed.md)."""
        func, placement = trace.func, job_placement(trace)
        if placement != PlacementAttr("cpu", ["0:0"]):
            func.attributes["placement"] = placement
        count = len(placement.devices)
        if self.mirrored and count != self.devices:
            raise TraceError(
                f"job '{self.job_name}' is in the mirrored view: its inputs were laid out for the {self.devices} "
                f"device(s) of {trace.arg_placement}, but its ops run on {count}; give the job one placement",
                self._where,
            )
        if self.mirrored and count > 1:
            func.attributes["view"] = StringAttr("mirrored")
            for value in values:
                if not shape_of(value.type):
                    raise TraceError(
                        f"job '{self.job_name}' is in the mirrored view, where each output is one array per "
                        "device split along axis 0: a rank-0 output has no such split; return it unreduced",
                        self._where,
                    )
        if count == 1 and not trace.arg_sbp:
            return
        axes = len(hierarchy_of(placement))
        split0 = NdSbpAttr([SbpAttr("split", 0)] * axes)
        whole = NdSbpAttr([SbpAttr("broadcast")] * axes)
        arg_sbp = []
        for arg in trace.block.args:
            default = split0 if shape_of(arg.type) else whole
            hinted = trace.arg_sbp.get(arg.index, default)
            if self.mirrored and hinted != split0:
                raise TraceError(
                    f"job '{self.job_name}' is in the mirrored view, where every input is split along axis 0 "
                    f"(one array per device); input {arg.index} is hinted {nd_text(hinted)}",
                    self._where,
                )
            arg_sbp.append(hinted)
        func.attributes["arg_sbp"] = ArrayAttr(arg_sbp)

    def _arguments(self, trace: Trace) -> list[Any]:
        block_args = iter(trace.block.args)

        def make(name: str, spec: Any) -> Any:
            if isinstance(spec, TupleParam):
                return tuple(make(f"{name}_{i}", s) for i, s in enumerate(spec.items))
            return Blob(next(block_args), trace, name)

        return [make(name, spec) for name, spec in self._params]

    # ------------------------------------------------------------- calling

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = self._live_session()
        if kwargs or len(args) != len(self._params):
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError as err:
                raise TypeError(
                    f"{self.job_name}() takes {len(self._params)} argument(s) "
                    f"({', '.join(n for n, _ in self._params)}): {err}"
                ) from None
            args = tuple(bound.arguments[name] for name, _ in self._params)
        copy = self.is_callback  # the caller may reuse its arrays as soon as an async call returns
        flat: list[np.ndarray] = []
        for (name, spec), value in zip(self._params, args):
            self._check(name, spec, value, flat, copy)
        if self.is_callback:
            return session.run_async(lambda: self._run(flat))
        return session.run(lambda: self._run(flat))

    def _check(self, name: str, spec: Any, value: Any, flat: list[np.ndarray], copy: bool) -> None:
        """Validate one argument against its placeholder before anything runs."""
        if isinstance(spec, TupleParam):
            if not isinstance(value, (tuple, list)) or len(value) != len(spec.items):
                raise TypeError(
                    f"{self.job_name}() argument '{name}' must be a tuple of {len(spec.items)} arrays, got {_what(value)}"
                )
            for i, (s, v) in enumerate(zip(spec.items, value)):
                self._check(f"{name}[{i}]", s, v, flat, copy)
            return
        if spec.kind == "numpy":
            flat.append(self._checked(name, spec, value, copy))
            return
        devices = self.devices
        if not isinstance(value, (list, tuple)) or len(value) != devices:
            raise TypeError(f"{self.job_name}() argument '{name}' must be a list with one array per device "
                            f"({devices} device(s) here), got {_what(value)}")
        arrays = list(value)
        if spec.kind == "list_list_numpy":
            for i, item in enumerate(value):
                if not isinstance(item, (list, tuple)) or len(item) != 1:
                    raise TypeError(f"{self.job_name}() argument '{name}' must be a list per device of one "
                                    f"array each ([[array], ...]), got {_what(item)} for device {i}")
            arrays = [item[0] for item in value]
        pieces = [self._checked(name if devices == 1 else f"{name}[{i}]", spec, a, copy) for i, a in enumerate(arrays)]
        flat.append(pieces[0] if devices == 1 else pieces)  # mirrored: each device's piece of the split(0) input

    def _checked(self, name: str, spec: Any, array: Any, copy: bool) -> np.ndarray:
        """One array of the placeholder's (per-device) shape and dtype, contiguous (copied if `copy`)."""
        expected = f"numpy.ndarray of shape {spec.shape} and dtype {spec.dtype.name}"
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{self.job_name}() argument '{name}' must be a {expected}, got {type(array).__name__}")
        if array.dtype != spec.dtype.np_dtype:
            raise ExecutionError(
                f"{self.job_name}() argument '{name}': expected dtype {spec.dtype.name}, given {array.dtype}",
                user_location(),
            )
        if array.shape != spec.shape:
            raise ExecutionError(
                f"{self.job_name}() argument '{name}': expected shape {spec.shape}, given {array.shape}",
                user_location(),
            )
        return np.array(array, copy=True, order="C") if copy else np.ascontiguousarray(array)

    def _run(self, inputs: list[Any]) -> Any:
        outputs = (self._exe or self.executable())(inputs)
        if self.devices > 1:  # mirrored: each output is every device's (padded) piece of its split(0) value
            outputs = [_joined(pieces, rows) for pieces, rows in zip(outputs, self._output_rows)]
        for (handler, kind), array in zip(self._watchers, outputs[self.output_count :]):
            handler(leaf_value(kind, array, self.devices))
        return _rebuild(self._out, outputs[: self.output_count], self.devices)

    def _live_session(self) -> Session:
        if self._session is None or self._session is not default_session():
            raise ExecutionError(
                f"job '{self.job_name}' belongs to a session that flow.clear_default_session() dropped; define it again"
            )
        return self._session

    # ------------------------------------------------------------- compiling

    def executable(self) -> Any:
        """The compiled job, made on first use."""
        with self._compile_lock:
            if self._exe is None:
                session = self._live_session()
                from irflow.compiler import compile_job
                from irflow.target import decide_target

                target, session.gpu_warned = decide_target(self.module, session.gpu_warned)
                self._exe = compile_job(self.module, self.job_name, session.store_for(target, self.job_name), target)
                self._dump(os.environ.get(DUMP_ENV))
            return self._exe

    def ir(self, stage: str = "job") -> str:
        """The module's text at `stage`: "job" as traced, a pass's name, or "buffer"."""
        if stage == "job" and self._exe is None:
            return print_module(self.module, debuginfo=True)
        return self.executable().ir(stage)

    def memory_plan(self) -> Any:
        """The step's arena as planned (`.table()`, `.plot(path)`, `.ratio` to the lower bound)."""
        return self.executable().memory_plan()

    def _dump(self, directory: str | None) -> None:
        if not directory:
            return
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for i, stage in enumerate(self._exe.stages):
            (out / f"{self.job_name}.{i:02d}.{stage}.mlir").write_text(self._exe.ir(stage))

    def forget(self) -> None:
        """The session was cleared: drop the executable; calls now raise."""
        self._session = None
        self._exe = None

    def __repr__(self) -> str:
        return f"<irflow job function '{self.job_name}' ({self.job_type})>"
