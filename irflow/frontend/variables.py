"""flow.get_variable: model state addressed by name and shared by every job that names it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from irflow.dialects import job
from irflow.errors import source_location
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob
from irflow.frontend.distribute import hint
from irflow.frontend.initializers import constant_initializer
from irflow.frontend.regularizers import Regularizer
from irflow.frontend.session import VariableDecl, default_session
from irflow.frontend import tracing
from irflow.frontend.locations import fail, user_location
from irflow.frontend.tracing import append_op, build, current

_KINDS = ("constant", "random_uniform", "random_normal", "truncated_normal", "variance_scaling")


def get_variable(
    name: str,
    shape: Sequence[int] | None = None,
    dtype: dtypes.DType | None = None,
    initializer: dict[str, Any] | None = None,
    regularizer: object = None,
    trainable: bool | None = None,
    model_name: str | None = None,
    random_seed: int | None = None,
    distribute: object = None,
    reuse: bool = True,
) -> Blob:
    """Create the variable `name` or fetch it: the same name in two jobs is the same variable.

    `dtype` defaults to the job's default_data_type and `initializer` to zeros.
    A `regularizer` penalizes a trainable variable when its job minimizes a
    loss (flow.regularizers); inside `flow.scope.namespace("ns")` the name is `ns-<name>`.
    `distribute` (flow.distribute.split(0), ...) fixes how the variable lies over
    the job's devices; the first declaration decides for every job (default:
    broadcast, a whole copy on every device).
    """
    what = "flow.get_variable"
    trace = current(what)
    if not isinstance(name, str) or not name:
        fail(f"{what}: name must be a non-empty string, got {name!r}")
    if shape is None:
        fail(f"{what}('{name}'): shape is required")
    sizes = dtypes.positive_sizes(shape)
    if sizes is None:
        fail(f"{what}('{name}'): shape must be a list or tuple of positive ints, got {shape!r}")
    if regularizer is not None and not isinstance(regularizer, Regularizer):
        fail(f"{what}('{name}'): regularizer must come from flow.regularizers.l1/l2/l1_l2, got {regularizer!r}")
    name = "".join(f"{n}-" for n in tracing.namespaces) + name
    shape = sizes
    dtype = dtypes.as_dtype(dtype) if dtype is not None else trace.config.data_type
    if initializer is not None and (not isinstance(initializer, dict) or initializer.get("kind") not in _KINDS):
        fail(f"{what}('{name}'): initializer must come from flow.*_initializer(), got {initializer!r}")
    init = dict(initializer) if initializer is not None else constant_initializer(0.0)
    if random_seed is not None:
        init["seed"] = int(random_seed)
    trainable = True if trainable is None else bool(trainable)

    if name in trace.variables:
        blob = trace.variables[name]
        if not reuse:
            fail(f"{what}: variable '{name}' is already defined in job '{trace.name}' (reuse=False)")
        _agree(trace.declared[name], shape, dtype, distribute, what)
        return blob
    known = default_session().variables.get(name)
    if known is not None:
        _agree(known, shape, dtype, distribute, what)
        init, trainable, distribute = known.initializer, known.trainable, known.distribute  # the first decides
    blob = build(
        job.VariableOp,
        [],
        job.tensor(shape, dtype.element_type),
        name,
        what,
        name=name,
        initializer=init,
        trainable=trainable,
    )
    if distribute is not None:
        hint(blob, distribute, f"{what}('{name}')")
    trace.variables[name] = blob
    if regularizer is not None and trainable:
        trace.regularizers[name] = (blob, regularizer)
    trace.declared[name] = known or VariableDecl(
        name, shape, dtype, init, trainable, trace.name, user_location(), distribute
    )
    return blob


def assign(ref: Blob, value: Blob, dtype: dtypes.DType | None = None, name: str | None = None) -> None:
    """flow.assign: the variable `ref` (a Blob flow.get_variable returned) holds `value` from the next step on.

    Like the optimizer's updates (job.assign), it is written once every read of the step is done, so the
    job reads the old value throughout. One write per variable and step: a second flow.assign of it,
    or one of a variable the optimizer trains, is an error naming both lines.
    """
    what = "flow.assign"
    trace = current(what)
    if not isinstance(ref, Blob) or not any(ref is v for v in trace.variables.values()):
        fail(f"{what}: ref must be a variable of this job (a Blob flow.get_variable returned), got {ref!r}")
    variable = ref.value.owner.var_name.data
    wanted = dtypes.as_dtype(dtype) if dtype is not None else ref.dtype
    if not isinstance(value, Blob) or value.shape != ref.shape or value.dtype is not ref.dtype or wanted is not ref.dtype:
        fail(f"{what}: value must be a {ref.dtype.name} {ref.shape} Blob like variable '{variable}', got {value!r}")
    for op in trace.block.ops:
        if isinstance(op, job.AssignOp) and op.variable == ref.value:
            fail(f"{what}: variable '{variable}' is already assigned in this step, at {source_location(op)}; a "
                 f"variable takes one write per step")  # fmt: skip
    append_op(job.AssignOp.create(operands=[ref.value, value.value]), what)


def _agree(known: VariableDecl, shape: tuple[int, ...], dtype: dtypes.DType, distribute: object, what: str) -> None:
    where = f" at {known.location}" if known.location else ""
    if known.shape != shape or known.dtype is not dtype:
        fail(
            f"{what}: variable '{known.name}' is {dtype.name} {shape} here, but job '{known.job}' "
            f"declared it {known.dtype.name} {known.shape}{where}; one name is one variable"
        )
    if distribute is not None and distribute != known.distribute:
        fail(
            f"{what}: variable '{known.name}' is given distribute={distribute!r} here, but job '{known.job}' "
            f"declared it with distribute={known.distribute!r}{where}; one name is one variable"
        )
