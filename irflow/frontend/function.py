"""@flow.global_function: trace a Python function into a job, compile it when the session starts, run it.

Defining the function traces it at once (OneFlow's lazy mode): placeholders
become the block arguments of one `job.func`, every op call appends a job op,
and the returned Blobs become `job.return`'s operands, followed by any
`flow.watch`ed Blobs as hidden outputs. When the session starts (the first
job call, among others: see session.py) every job hands a copy of its module
to the compiler (`irflow.compiler.compile_job`); calls reuse that executable.
Reading the signature and shaping results is signature.py's work.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, FunctionType, ModuleOp, StringAttr

from irflow import typing as tp
from irflow.dialects.bounds import dynamic_axes, element_shapes, with_dynamic
from irflow.dialects.job import PinSizeOp, ReturnOp, i64_array, shape_of, tensor
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr, hierarchy_of, nd_text
from irflow.errors import ExecutionError, TraceError
from irflow.frontend import signature
from irflow.frontend.blob import Blob
from irflow.frontend.config import FunctionConfig
from irflow.frontend.distribute import job_placement, nd_sbp, placement_here
from irflow.frontend.records import HostFeeds
from irflow.frontend.scope import view_here
from irflow.frontend.session import Session, default_session
from irflow.frontend.signature import CALLBACK, FUTURE, Future, TupleParam
from irflow.frontend.locations import to_loc, user_location
from irflow.frontend.tracing import Trace, tracing
from irflow.textir import print_module
from irflow.textir.regions import is_value_name
from irflow.textir.verification import first_verify_failure

JOB_TYPES = ("train", "predict")
DUMP_ENV = "IRFLOW_DUMP_IR"


def global_function(
    type: str | FunctionConfig = "predict",  # noqa: A002  OneFlow's parameter name
    function_config: FunctionConfig | None = None,
) -> Callable[[Callable[..., Any]], JobFunction]:
    """Make a job function: `@flow.global_function(type="train", function_config=config)`."""
    if isinstance(type, FunctionConfig):
        # OneFlow's older API: the config is the first argument, and config.train makes a train job.
        kind = "train" if type.train.configured else "predict"
        warnings.warn(
            "flow.global_function(function_config) is deprecated; "
            f"write flow.global_function(type={kind!r}, function_config=config)",
            DeprecationWarning,
            stacklevel=2,
        )
        type, function_config = kind, type
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


# ----------------------------------------------------------------- the job


class JobFunction:
    """A traced job function: call it with numpy arrays; `ir(stage)` shows its IR."""

    def __init__(self, func: Callable[..., Any], job_type: str, config: FunctionConfig):
        functools.update_wrapper(self, func)
        self._func = func
        self.job_type = job_type
        self.config = config
        session = default_session()
        self._session: Session | None = session
        self._where = signature.def_location(func)
        self._exe: Any = None
        self._compile_lock = threading.Lock()
        self.job_name = self._unique_name(func.__name__)
        declared = self._trace()
        known = dict(session.variables)
        session.jobs[self.job_name] = self
        session.variables.update(declared)
        if session.started:  # defined after start-up: compile now, creating its new variables
            try:
                session.run(self.executable)
            except BaseException:
                del session.jobs[self.job_name]
                session.variables = known
                raise

    def _unique_name(self, name: str) -> str:
        assert self._session is not None
        taken, n, unique = self._session.jobs, 1, name
        while unique in taken:
            unique, n = f"{name}_{n}", n + 1
        return unique

    # ------------------------------------------------------------- tracing

    def _trace(self) -> dict[str, Any]:
        """Trace the function into `self.module`; return the variables it declares."""
        self.signature = sig = signature.read_signature(self._func, self._where)
        self.is_callback = sig.mode == CALLBACK
        leaves = [leaf for _, spec in sig.params for leaf in signature.leaves(spec)]
        with self.config.placement_scope or contextlib.nullcontext():
            self.mirrored = view_here(self.config).mirrored
            placement = placement_here()
            # Mirrored: a placeholder's shape is one device's; the job sees their concatenation along axis 0.
            self.devices = len(placement.devices) if self.mirrored else 1
            self._configured = default_session().resource.placement()
            types = [self._logical_type(leaf) for leaf in leaves]
            trace = Trace(self.job_name, self.job_type, self.config, types, placement)
            trace.own_sizes = self.devices > 1
            with tracing(trace):
                result = self._func(*self._arguments(trace))
        if self.job_type == "train" and not trace.minimized:
            raise TraceError(
                f"train job '{self.job_name}' minimizes nothing: call flow.optimizer.SGD(...).minimize(loss) "
                "(or flow.losses.add_loss(loss) with config.train set)",
                self._where,
            )
        blobs, self._out = signature.returned_blobs(sig, result, trace, self._func.__name__, self._where)
        self.output_count = len(blobs)
        self._watchers = [(handler, kind) for _, handler, kind in trace.watches]
        self._finish(trace, [b.value for b in blobs] + [b.value for b, _, _ in trace.watches])
        # A job that reads OFRecords feeds the arguments lift-host-inputs makes of its decoders at every call.
        self._host = HostFeeds(trace.feeds, job_placement(trace), self.devices > 1) if trace.feeds else None
        return trace.declared

    def _finish(self, trace: Trace, values: list[Any]) -> None:
        """Close the body with job.return, fix the function type, verify."""
        for value in values:
            if element_shapes(value.type) is not None:
                raise TraceError(
                    f"job '{self.job_name}' returns a TensorBuffer; take its tensors out with "
                    "flow.tensor_buffer_to_tensor or flow.tensor_buffer_to_list_of_tensors",
                    self._where,
                )
        if self.devices > 1:
            values = self._joinable(trace, values)
        ret = ReturnOp(values)
        loc = to_loc(self._where)
        if loc is not None:
            for located in (ret, trace.func, *trace.block.args):
                located.location = loc
        trace.block.add_op(ret)
        self._distribute(trace, values)
        trace.func.properties["function_type"] = FunctionType.from_lists(
            [a.type for a in trace.block.args], [v.type for v in values]
        )
        # As module.verify() checks, each distinct op signature once, without the whole module in the message.
        if (failure := first_verify_failure(trace.module)) is not None:
            op, err = failure
            raise TraceError(f"job '{self.job_name}' does not verify: '{op.name}' op {err}", self._where)
        self.module: ModuleOp = trace.module

    def _logical_type(self, leaf: type[tp.PlaceholderDef]) -> Any:
        if self.devices == 1:
            static = tensor(leaf.shape, leaf.dtype.element_type)
            # One device's list placeholder is dynamic within its shape (docs/dynamic.md).
            return with_dynamic(static, signature.dynamic_axes(leaf, self.devices))
        if leaf.kind == "numpy" or not leaf.shape:
            raise TraceError(
                f"job '{self.job_name}' is in the mirrored view on {self.devices} devices, so each input is one "
                f"array per device: use tp.ListNumpy.Placeholder with a shape of rank >= 1, "
                f"got {signature.describe(leaf)}",
                self._where,
            )
        # Each device's tp.ListNumpy rows are its own, within the placeholder's: the job's are their sum (docs/dynamic.md).
        logical = tensor((leaf.shape[0] * self.devices, *leaf.shape[1:]), leaf.dtype.element_type)
        return with_dynamic(logical, signature.dynamic_axes(leaf, self.devices))

    def _output_kinds(self) -> list[str]:
        """Each output's leaf kind (tp.Numpy, tp.ListNumpy, ...), the returned ones, then the watched."""
        return signature.leaf_kinds(self._out, self.output_count) + [kind for _, kind in self._watchers]

    def _joinable(self, trace: Trace, values: list[Any]) -> list[Any]:
        """The outputs returned whole (tp.Numpy: the devices' rows one after another) need one width: their
        dynamic axes past 0 pinned at their bound, checked per device when the step starts (docs/dynamic.md)."""
        kinds = self._output_kinds()
        joinable = []
        for value, kind in zip(values, kinds, strict=True):
            uneven = [a for a in dynamic_axes(value.type) if a > 0]
            if kind in signature.WHOLE and uneven:
                pin = trace.append(PinSizeOp.make([value], axes=uneven, placement=None), self._where)
                pin.results[0].name_hint = value.name_hint
                value = pin.results[0]
            joinable.append(value)
        return joinable

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
            # tp.Numpy outputs of each device's rows may come back gathered too: every device's rows, whole
            kinds = self._output_kinds()
            gathered = [i for i, (v, kind) in enumerate(zip(values, kinds)) if kind == "numpy" and 0 in dynamic_axes(v.type)]
            if gathered:
                func.attributes["whole_results"] = i64_array(gathered)
        if count == 1 and not trace.arg_hints:
            return
        axes = len(hierarchy_of(placement))
        split0 = NdSbpAttr([SbpAttr("split", 0)] * axes)
        whole = NdSbpAttr([SbpAttr("broadcast")] * axes)
        arg_sbp = []
        for arg in trace.block.args:
            hinted = split0 if shape_of(arg.type) else whole
            if arg.index in trace.arg_hints:  # given on arg_placement: fitted to the job's hierarchy
                _, distribute, what, where = trace.arg_hints[arg.index]
                hinted = nd_sbp(distribute, shape_of(arg.type), placement, what, where)
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
            arg = next(block_args)
            if is_value_name(name):
                arg.name_hint = name  # the placeholder's parameter name reads in the IR: %images
            return Blob(arg, trace, name)

        return [make(name, spec) for name, spec in self.signature.params]

    # ------------------------------------------------------------- calling

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = self._live_session()
        params = self.signature.params
        if kwargs or len(args) != len(params):
            try:
                bound = self.signature.python.bind(*args, **kwargs)
            except TypeError as err:
                raise TypeError(
                    f"{self.job_name}() takes {len(params)} argument(s) "
                    f"({', '.join(n for n, _ in params)}): {err}"
                ) from None
            args = tuple(bound.arguments[name] for name, _ in params)
        mode = self.signature.mode
        copy = mode != signature.SYNC  # the caller may reuse its arrays as soon as an async call returns
        session.start()  # first: the device count set before start-up decides what each argument must be
        flat: list[Any] = []
        parts = self._parts()
        for (name, spec), value in zip(params, args):
            signature.check_argument(self.job_name, name, spec, value, flat, copy, self.devices, parts)
        if mode == CALLBACK:
            return session.run_async(lambda: self._run(flat))
        if mode == FUTURE:
            return Future(session.run_async(lambda: self._run(flat)))
        return session.run(lambda: self._run(flat))

    def _parts(self) -> int:
        """How many devices' parts a mirrored call passes and gets back here: every device's, or under mpiexec its own."""
        from irflow.runtime import mpi

        return 1 if self.devices > 1 and mpi.launched_size() > 1 else self.devices

    def _run(self, inputs: list[Any]) -> Any:
        exe = self._exe or self.executable()
        if self._host is not None:
            inputs = [*inputs, *self._host.next()]
        outputs = exe(inputs)
        if self.devices > 1:  # mirrored: each output is this process's devices' (padded) pieces of its split(0) value
            kinds = self._output_kinds()
            outputs = [_mirrored_output(exe, i, pieces, kind) for i, (pieces, kind) in enumerate(zip(outputs, kinds))]
        # An output with the rows of a tensor-list input comes back as that input's instances (each device's).
        instances = [signature.instance_rows(inputs[i]) if i is not None else None for i in exe.row_sources]
        for (handler, kind), array, rows in zip(self._watchers, outputs[self.output_count :], instances[self.output_count :]):
            handler(signature.leaf_value(kind, array, rows))
        return signature.rebuild(self._out, outputs[: self.output_count], instances)

    def _live_session(self) -> Session:
        if self._session is None or self._session is not default_session():
            raise ExecutionError(
                f"job '{self.job_name}' belongs to a session that flow.clear_default_session() dropped; define it again"
            )
        return self._session

    # ------------------------------------------------------------- compiling

    def executable(self) -> Any:
        """The compiled job, made on first use (when the session starts, or for `ir`/`memory_plan` before)."""
        with self._compile_lock:
            if self._exe is None:
                session = self._live_session()
                if session.resource.placement() != self._configured:
                    # flow.config changed the device count after the definition, before start-up (as
                    # OneFlow allows): trace again for the devices the session now has.
                    session.variables.update(self._trace())
                from irflow.compiler import compile_job
                from irflow.runtime.kernels import algorithms
                from irflow.target import decide_target

                dump = dump_directory()
                target, session.gpu_warned = decide_target(self.module, session.gpu_warned)
                with algorithms.search(not self.config.conv_heuristic):
                    self._exe = compile_job(
                        self.module,
                        self.job_name,
                        session.store_for(target, self.job_name),
                        target,
                        check_finite=self.config.check_finite,
                    )
                if dump is not None:
                    self._dump(dump)
            return self._exe

    def ir(self, stage: str = "job") -> str:
        """The module's text at `stage`: "job" as traced, a pass's name, or "buffer"."""
        if stage == "job" and self._exe is None:
            return print_module(self.module, debuginfo=True)
        return self.executable().ir(stage)

    def memory_plan(self) -> Any:
        """The step's arena as planned (`.table()`, `.plot(path)`, `.ratio` to the lower bound)."""
        return self.executable().memory_plan()

    def _dump(self, out: Path) -> None:
        for i, stage in enumerate(self._exe.stages):
            (out / f"{self.job_name}.{i:02d}.{stage}.mlir").write_text(self._exe.ir(stage))

    def drop_executable(self) -> None:
        """The session's start-up failed: compile again next time."""
        self._exe = None

    def forget(self) -> None:
        """The session was cleared: drop the executable; calls now raise."""
        self._session = None
        self._exe = None

    def __repr__(self) -> str:
        return f"<irflow job function '{self.job_name}' ({self.job_type})>"


def _mirrored_output(exe: Any, index: int, pieces: list[Any], kind: str) -> Any:
    """A mirrored job's output `index` as its leaf kind shows it: whole, each device's part, or (OneFlow's
    older LocalBlob) whole with each device's part for `.numpy_list()`."""
    if kind == "local_blob":
        return signature.local_blob(exe.executor.logical(index, pieces), exe.executor.local_part(index, pieces))
    if kind in signature.WHOLE:
        return exe.executor.logical(index, pieces)
    return exe.executor.local_part(index, pieces)


def dump_directory() -> Path | None:
    """The directory $IRFLOW_DUMP_IR names, created if needed; a path that cannot be one is an error."""
    value = os.environ.get(DUMP_ENV)
    if not value:
        return None
    out = Path(value)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".irflow-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ExecutionError(
            f"{DUMP_ENV}={value!r} is not a directory irflow can write the IR to: {err.strerror or err}"
        ) from None
    return out
