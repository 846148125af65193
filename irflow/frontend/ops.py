"""Array ops at the top of the `flow` namespace.

reshape, flatten, transpose, matmul, concat, stack, pad, slice, where, gather, dim_gather, gather_nd, scatter_nd,
tensor_scatter_nd_update / _add, cast, identity, constant, one_hot, ...
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, StringAttr
from xdsl.utils.exceptions import VerifyException

from irflow.dialects import job
from irflow.dialects.bounds import describe, dynamic_axes
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob, expect_blobs
from irflow.frontend.locations import fail
from irflow.frontend.tracing import build, current


def as_blob(value: Any, like: Blob, what: str) -> Blob:
    """A Blob for `value`: Blobs as they are, numbers and arrays as constants of `like`'s dtype."""
    if isinstance(value, Blob):
        return value
    if isinstance(value, (bool, int, float, np.number)):
        return fill((), float(value), like.dtype, what)
    if isinstance(value, (list, tuple, np.ndarray)):
        return constant(np.asarray(value, dtype=like.dtype.np_dtype))
    fail(f"{what} expects Blobs or numbers, got {type(value).__name__} {value!r}")


def operands(x: Any, y: Any, what: str) -> tuple[Blob, Blob]:
    """Both sides of a binary op as Blobs; a Python number takes the other side's dtype."""
    if isinstance(x, Blob):
        return x, as_blob(y, x, what)
    if isinstance(y, Blob):
        return as_blob(x, y, what), y
    fail(f"{what} needs at least one Blob operand, got {x!r} and {y!r}")


def _binary(op: type[job.JobOp], x: Any, y: Any, what: str, name: str | None = None) -> Blob:
    """An elementwise binary op here, where flow.math (which imports this module) is out of reach."""
    return build(op, list(operands(x, y, what)), None, name, what)


def fill(
    shape: Sequence[int], value: float, dtype: dtypes.DType, what: str = "flow.constant", name: str | None = None
) -> Blob:
    return build(job.FillOp, [], job.tensor(shape, dtype.element_type), name, what, value=float(value))


def _dims(shape: object, what: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, (int, np.integer)) for d in shape):
        fail(f"{what}: shape must be a list or tuple of ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def reshape(x: Blob, shape: Sequence[int], name: str | None = None) -> Blob:
    """flow.reshape; one dimension may be -1 and is then inferred from the others."""
    dims = _dims(shape, "flow.reshape")
    size = int(np.prod(x.shape, dtype=np.int64))
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        fail(f"flow.reshape: shape {list(dims)} may hold one -1 and otherwise non-negative sizes")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            fail(f"flow.reshape: cannot reshape {x.shape} ({size} elements) to {list(dims)}")
        dims = tuple(size // known if d == -1 else d for d in dims)
    _keeps_rows(x, dims, "flow.reshape")
    return build(job.ReshapeOp, [x], job.tensor(dims, x.dtype.element_type), name, "flow.reshape")


def _keeps_rows(x: Blob, dims: Sequence[int], what: str) -> None:
    """A reshape of dynamic rows into one row (a new leading axis of 1, as `flow.stack` along axis 0 makes) would
    hold them only at the bound: refused here, where the job's shapes are logical (on a device, a piece of one
    row is a legitimate regrouping of that device's rows)."""
    if 0 in dynamic_axes(x.value.type) and x.shape[0] > 1 and dims and dims[0] == 1:
        fail(f"{what}: the dynamic rows of {describe(x.value.type)} cannot all become one row of {tuple(dims)}: "
             "a reshape regroups them into rows of their own (docs/dynamic.md)")


def reshape_like(x: Blob, like: Blob, name: str | None = None) -> Blob:
    """flow.reshape_like: x reshaped to `like`'s shape (its values are not read)."""
    what = "flow.reshape_like"
    for blob in (x, like):
        if not isinstance(blob, Blob):
            fail(f"{what} expects Blobs, got {type(blob).__name__} {blob!r}")
    if int(np.prod(x.shape, dtype=np.int64)) != int(np.prod(like.shape, dtype=np.int64)):
        fail(f"{what}: x of shape {x.shape} cannot be reshaped to the shape {like.shape} of like (another element count)")
    _keeps_rows(x, like.shape, what)
    return build(job.ReshapeOp, [x], job.tensor(like.shape, x.dtype.element_type), name, what)


def broadcast_like(x: Blob, like: Blob, broadcast_axes: Sequence[int] | None = None, name: str | None = None) -> Blob:
    """flow.broadcast_like: x repeated along `broadcast_axes` of `like` (default all) to `like`'s shape.

    As OneFlow's, x has like's shape with those axes of size 1, or without them (fewer axes);
    a job.broadcast_like, whose gradient sums over the broadcast axes.
    """
    what = "flow.broadcast_like"
    for blob in (x, like):
        if not isinstance(blob, Blob):
            fail(f"{what} expects Blobs, got {type(blob).__name__} {blob!r}")
    rank = like.ndim
    axes = list(range(rank)) if broadcast_axes is None else broadcast_axes
    if not isinstance(axes, (list, tuple)) or not 0 < len(axes) <= rank:
        fail(f"{what}: broadcast_axes must be 1 to {rank} axes of like {like.shape}, got {broadcast_axes!r}")
    axes = sorted({axis_index(a, rank, f"{what}: broadcast_axes") for a in axes})
    kept = tuple(d for a, d in enumerate(like.shape) if a not in axes)
    ones = tuple(1 if a in axes else d for a, d in enumerate(like.shape))
    if x.shape == ones:
        return build(job.BroadcastLikeOp, [x, like], None, name, what)
    if x.shape == kept:
        return build(job.BroadcastLikeOp, [x, like], None, name, what, axes=axes)
    fail(f"{what}: x of shape {x.shape} must have like's shape {like.shape} with broadcast_axes {axes} "
         f"of size 1 {ones} or left out {kept}")  # fmt: skip


def transpose(
    a: Blob,
    perm: Sequence[int] | None = None,
    conjugate: bool = False,
    batch_axis_non_change: bool = False,
    name: str | None = None,
) -> Blob:
    """flow.transpose; `perm` defaults to reversing the axes. Negative axes count from the end.

    OneFlow's `conjugate` has no meaning without complex dtypes and `batch_axis_non_change`
    none without batch axes; they are named (not swallowed by **kwargs) so that a
    misspelt `perm` is a TypeError rather than the default reversal.
    """
    if conjugate:
        fail("flow.transpose: conjugate=True needs complex dtypes, which irflow does not have")
    if perm is None:
        perm = list(reversed(range(a.ndim)))
    perm = [int(p) + a.ndim if int(p) < 0 else int(p) for p in perm]
    return build(job.TransposeOp, [a], None, name, "flow.transpose", perm=perm)


def matmul(
    a: Blob,
    b: Blob,
    transpose_a: bool = False,
    transpose_b: bool = False,
    alpha: float = 1.0,
    name: str | None = None,
) -> Blob:
    """flow.matmul: a @ b with either side optionally transposed; batched when rank > 2."""
    out = build(
        job.MatmulOp, [a, b], None, name, "flow.matmul", transpose_a=bool(transpose_a), transpose_b=bool(transpose_b)
    )
    if alpha != 1.0:
        out = _binary(job.MulOp, out, alpha, "flow.matmul")
    return out


def flatten(input: Blob, start_dim: int = 0, end_dim: int = -1, name: str | None = None) -> Blob:  # noqa: A002
    """Merge the axes start_dim..end_dim (both included; negative count from the end) into one."""
    what = "flow.flatten"
    if not isinstance(input, Blob):
        fail(f"{what} expects a Blob, got {type(input).__name__}")
    rank = max(input.ndim, 1)  # a rank-0 Blob flattens to (1,), as its one axis
    start, end = axis_index(start_dim, rank, f"{what}: start_dim"), axis_index(end_dim, rank, f"{what}: end_dim")
    if start > end:
        fail(f"{what}: start_dim {start_dim} comes after end_dim {end_dim} for a Blob of shape {input.shape}")
    shape = input.shape
    merged = int(np.prod(shape[start : end + 1], dtype=np.int64))
    return reshape(input, shape[:start] + (merged,) + shape[end + 1 :], name)


def identity(x: Blob, name: str | None = None) -> Blob:
    """A copy of `x` as a value of its own (a job.cast to x's own type), as OneFlow's identity op is.

    Being its own value, it takes its own distribute hint (`flow.identity(x).with_distribute(...)`)
    and the placement scope it is made in, and leaves x's as they are.
    """
    if not isinstance(x, Blob):
        fail(f"flow.identity expects a Blob, got {type(x).__name__}")
    return build(job.CastOp, [x], job.tensor(x.shape, x.dtype.element_type), name, "flow.identity")


def identity_n(inputs: Sequence[Blob], name: str | None = None) -> list[Blob]:
    """flow.identity of each Blob in `inputs`, as a list (OneFlow's identity_n: one op, n outputs)."""
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(x, Blob) for x in inputs):
        fail(f"flow.identity_n expects a list of Blobs, got {inputs!r}")
    return [identity(x, f"{name}_{i}" if name else None) for i, x in enumerate(inputs)]


def one_hot(
    indices: Blob,
    depth: int,
    on_value: float = 1,
    off_value: float = 0,
    axis: int = -1,
    dtype: dtypes.DType | None = None,
    name: str | None = None,
) -> Blob:
    """A new axis `axis` of size `depth`: on_value where its position equals the index, off_value elsewhere.

    `indices` are int32 or int64. `dtype` defaults to the job's default_data_type (flow.float
    unless configured). The positions are a constant 0..depth-1 compared with the indices,
    so an index outside [0, depth) gives all off_value, as TensorFlow's one_hot does, where
    OneFlow's CPU kernel stops on a failed check.
    """
    what = "flow.one_hot"
    trace = current(what)
    if not isinstance(indices, Blob) or indices.dtype not in (dtypes.int32, dtypes.int64):
        fail(f"{what}: indices must be an int32 or int64 Blob, got {indices!r}")
    if not dtypes.is_int(depth) or depth < 1:
        fail(f"{what}: depth must be a positive int, got {depth!r}")
    for value in (on_value, off_value):
        if not dtypes.is_number(value):
            fail(f"{what}: on_value and off_value must be numbers, got {value!r}")
    at = axis_index(axis, indices.ndim + 1, what)
    dtype = dtypes.as_dtype(dtype) if dtype is not None else trace.config.data_type
    column = reshape(indices, indices.shape[:at] + (1,) + indices.shape[at:])
    positions = np.arange(int(depth)).reshape((int(depth),) + (1,) * (indices.ndim - at))
    hits = build(job.EqualOp, [column, constant(positions, indices.dtype)], None, None, what)
    if (on_value, off_value) == (1, 0):
        return cast(hits, dtype, name)
    hot = cast(hits, dtype)
    # two products, not off + (on - off) * hot, so that each value comes out exactly as given
    off = _binary(job.MulOp, _binary(job.SubOp, 1.0, hot, what), off_value, what)
    return _binary(job.AddOp, _binary(job.MulOp, hot, on_value, what), off, what, name)


def one_of(value: object, alias: object, arg: str, other: str, what: str) -> Any:
    """OneFlow's two names for one argument (concat's `inputs` / `values`, conv2d_transpose's `value` /
    `input`): exactly one of them given, and that one."""
    if (value is None) == (alias is None):
        fail(f"{what}: give exactly one of {arg} and {other}")
    return value if value is not None else alias


def concat(
    inputs: Sequence[Blob] | None = None,
    axis: int = 0,
    max_dim_size: int | None = None,
    name: str | None = None,
    values: Sequence[Blob] | None = None,
) -> Blob:
    """Join `inputs` along `axis`; `values` is OneFlow's other name for them (one of the two, not both)."""
    inputs = one_of(inputs, values, "inputs", "values", "flow.concat")
    if not isinstance(inputs, (list, tuple)):
        fail(f"flow.concat expects a list of Blobs, got {type(inputs).__name__}")
    if len(inputs) == 1 and isinstance(inputs[0], Blob):
        return inputs[0]
    return build(job.ConcatOp, list(inputs), None, name, "flow.concat", axis=int(axis))


def stack(inputs: Sequence[Blob], axis: int = 0, name: str | None = None) -> Blob:
    """flow.stack: Blobs of one shape joined along a new axis `axis` (in [-rank-1, rank]).

    A concat of the inputs each given that axis of size 1, as OneFlow composes it, so the gradient
    of each input is its slice of the result's.
    """
    what = "flow.stack"
    if not isinstance(inputs, (list, tuple)) or not inputs or not all(isinstance(x, Blob) for x in inputs):
        fail(f"{what} expects a non-empty list of Blobs, got {inputs!r}")
    shape = inputs[0].shape
    for i, x in enumerate(inputs):
        if x.shape != shape:
            fail(f"{what}: every input must have the shape of the first, {shape}; input {i} has {x.shape}")
    at = axis_index(axis, len(shape) + 1, what)
    columns = [reshape(x, shape[:at] + (1,) + shape[at:]) for x in inputs]
    if len(columns) == 1:
        return columns[0]
    return build(job.ConcatOp, columns, None, name, what, axis=at)


def _pad_widths(paddings: object, rank: int, what: str) -> list[tuple[int, int]]:
    """`paddings` as one (before, after) pair of non-negative ints per axis."""
    pairs = list(paddings) if isinstance(paddings, (list, tuple)) else None
    if pairs is None or len(pairs) != rank or not all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(dtypes.is_int(n) and n >= 0 for n in p) for p in pairs
    ):
        fail(f"{what}: paddings must be {rank} pairs (before, after) of non-negative ints, one per axis, got {paddings!r}")
    return [(int(a), int(b)) for a, b in pairs]


def pad(x: Blob, paddings: Sequence[Sequence[int]], constant_value: float = 0, name: str | None = None) -> Blob:
    """flow.pad: `paddings[i] = (before, after)` entries of `constant_value` around axis i.

    Composed of concats of x with filled blocks, so its gradient is x's slice of the result's.
    An integer x takes int(constant_value), as OneFlow's integral value does. An axis padded
    must be static; a dynamic axis that is not padded meets the blocks' static sizes, so it is
    checked at run time to be at its bound.
    """
    what = "flow.pad"
    if not isinstance(x, Blob):
        fail(f"{what} expects a Blob, got {type(x).__name__} {x!r}")
    if not dtypes.is_number(constant_value):
        fail(f"{what}: constant_value must be a number, got {constant_value!r}")
    value = float(constant_value) if x.dtype.is_floating_point else float(int(constant_value))
    widths = [(axis, w) for axis, w in enumerate(_pad_widths(paddings, x.ndim, what)) if any(w)]
    out = x
    for k, (axis, (before, after)) in enumerate(widths):
        blocks = [fill(out.shape[:axis] + (n,) + out.shape[axis + 1 :], value, x.dtype, what) if n else None
                  for n in (before, after)]  # fmt: skip
        parts = [b for b in (blocks[0], out, blocks[1]) if b is not None]
        out = build(job.ConcatOp, parts, None, name if k == len(widths) - 1 else None, what, axis=axis)
    return out


def _pad2d_widths(x: Blob, padding: object, what: str) -> tuple[int, int, int, int]:
    """An NCHW Blob's (left, right, top, bottom) padding from an int (all four) or a list of four."""
    if not isinstance(x, Blob) or x.ndim != 4:
        fail(f"{what} expects an NCHW Blob of rank 4, got {x!r}")
    widths = [padding] * 4 if dtypes.is_int(padding) else padding
    if not isinstance(widths, (list, tuple)) or len(widths) != 4 or not all(dtypes.is_int(n) and n >= 0 for n in widths):
        fail(f"{what}: padding must be a non-negative int or 4 of them (left, right, top, bottom), got {padding!r}")
    left, right, top, bottom = (int(n) for n in widths)
    return left, right, top, bottom


def constant_pad2d(x: Blob, padding: int | Sequence[int], constant_value: float = 0, name: str | None = None) -> Blob:
    """flow.constant_pad2d: `constant_value` around the H and W axes of an NCHW Blob; `padding` is an int or
    (left, right, top, bottom), as PyTorch's F.pad lists the last two axes."""
    left, right, top, bottom = _pad2d_widths(x, padding, "flow.constant_pad2d")
    return pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)], constant_value, name)


def zero_pad2d(x: Blob, padding: int | Sequence[int], name: str | None = None) -> Blob:
    """flow.zero_pad2d: constant_pad2d with zeros."""
    return constant_pad2d(x, padding, 0, name)


def _index_pad2d(
    x: Blob, widths: tuple[int, int, int, int], source: Callable[[int, int], int], what: str, name: str | None
) -> Blob:
    """Pad H and W by gathering at constant positions: `source(i, n)` is the entry of an axis of size n that
    position i (from -before to n + after) repeats. A gather's gradient adds the slices of repeated
    positions, which is what each entry's gradient gathers from its copies."""
    left, right, top, bottom = widths
    padded = [(axis, before, after) for axis, before, after in ((3, left, right), (2, top, bottom)) if before or after]
    out = x
    for k, (axis, before, after) in enumerate(padded):
        n = x.shape[axis]
        positions = constant(np.array([source(i, n) for i in range(-before, n + after)], np.int32), dtypes.int32)
        out = build(job.GatherOp, [out, positions], None, name if k == len(padded) - 1 else None, what, axis=axis)
    return out


def reflection_pad2d(x: Blob, padding: int | Sequence[int], name: str | None = None) -> Blob:
    """flow.reflection_pad2d: an NCHW Blob's H and W mirrored about their first and last entries (which are
    not repeated); `padding` is an int or (left, right, top, bottom), each less than its axis."""
    what = "flow.reflection_pad2d"
    widths = _pad2d_widths(x, padding, what)
    for n, pair in ((x.shape[3], widths[:2]), (x.shape[2], widths[2:])):
        if max(pair) >= n:
            fail(f"{what}: padding {list(pair)} must be less than the size {n} of its axis in {x.shape}")
    return _index_pad2d(x, widths, lambda i, n: abs(i) if i < n else 2 * (n - 1) - i, what, name)


def replication_pad2d(x: Blob, padding: int | Sequence[int], name: str | None = None) -> Blob:
    """flow.replication_pad2d: an NCHW Blob's first and last entries of H and W repeated outwards; `padding`
    is an int or (left, right, top, bottom)."""
    what = "flow.replication_pad2d"
    return _index_pad2d(x, _pad2d_widths(x, padding, what), lambda i, n: min(max(i, 0), n - 1), what, name)


def slice(x: Blob, begin: Sequence[int | None], size: Sequence[int | None], name: str | None = None) -> Blob:  # noqa: A001
    """flow.slice: `size[i]` elements from `begin[i]` on axis i; None or -1 means "to the end"."""
    shape = x.shape
    if not isinstance(begin, (list, tuple)) or len(begin) != len(shape):
        fail(f"flow.slice: begin must be a list of {len(shape)} entries (one per axis of {shape}), got {begin!r}")
    if not isinstance(size, (list, tuple)) or len(size) != len(shape):
        fail(f"flow.slice: size must be a list of {len(shape)} entries (one per axis of {shape}), got {size!r}")
    start, stop = [], []
    for axis, (b, s, d) in enumerate(zip(begin, size, shape)):
        b = 0 if b is None else int(b)
        if b < 0 and axis in dynamic_axes(x.value.type):
            _from_actual_end(x, axis, "flow.slice", f"begin {b}")
        if not -d <= b < max(d, 1):
            fail(f"flow.slice: begin {b} is out of range for axis {axis} of size {d}")
        b %= max(d, 1)
        if s is None or s == -1:
            e = d
        elif not 0 < int(s) <= d:
            fail(f"flow.slice: size {s} is invalid for axis {axis} of size {d}")
        else:
            e = min(b + int(s), d)
        start.append(b)
        stop.append(e)
    return build(job.SliceOp, [x], None, name, "flow.slice", start=start, stop=stop, step=[1] * len(shape))


def slice_v2(x: Blob, slice_tup_list: Sequence[Sequence[int | None]], name: str | None = None) -> Blob:
    """flow.slice_v2: x sliced by a (start, stop, step) per leading axis (None as in a Python slice; axes not
    listed are whole), negative steps too. A negative step is the positive one over the same entries,
    then reversed (flow.reverse); its gradient comes back through both."""
    what = "flow.slice_v2"
    expect_blobs(what, x=x)
    items, backwards = _ascending(x, slice_tup_list, what)
    out = static_slice(x, tuple(items), reshape)
    return reverse(out, backwards, name) if backwards else _named(out, name)


def slice_update(x: Blob, update: Blob, slice_tup_list: Sequence[Sequence[int | None]], name: str | None = None) -> Blob:
    """flow.slice_update: x with the entries flow.slice_v2 would take replaced by `update`'s, of that slice's
    shape. Composed as flow.where between x and update spread into x's shape (job.slice_grad), so x's
    gradient is dy but at the updated entries and update's is the slice of dy."""
    what = "flow.slice_update"
    expect_blobs(what, x=x, update=update)
    if dynamic_axes(x.value.type):
        fail(f"{what}: x of {describe(x.value.type)} has dynamic axes; its slice's shape is known only when the step "
             f"runs (docs/dynamic.md)")  # fmt: skip
    items, backwards = _ascending(x, slice_tup_list, what)
    start, stop, step = (list(bounds) for bounds in zip(*(item.indices(d) for item, d in zip(items, x.shape))))
    shape = tuple(len(range(a, b, c)) for a, b, c in zip(start, stop, step))
    stop = [max(a, b) for a, b in zip(start, stop)]  # job.slice's form of an empty slice
    if update.shape != shape or update.dtype is not x.dtype:
        fail(f"{what}: update must be a {x.dtype.name} Blob of the slice's shape {shape}, got {update!r}")
    if backwards:
        update = reverse(update, backwards)
    spread = build(job.SliceGradOp, [update], x.value.type, None, what, start=start, stop=stop, step=step)
    marks = build(job.SliceGradOp, [fill(shape, 1, dtypes.int8, what)], job.tensor(x.shape, dtypes.int8.element_type),
                  None, what, start=start, stop=stop, step=step)  # fmt: skip
    return where(marks, spread, x, name)


def _ascending(x: Blob, slice_tup_list: object, what: str) -> tuple[list[builtins.slice], list[int]]:
    """Per axis, the ascending slice over the entries a (start, stop, step) takes, and the axes taken
    backwards (a negative step), as OneFlow checks them: start in [-size, size), stop in [-size - 1, size]."""
    if not isinstance(slice_tup_list, (list, tuple)) or len(slice_tup_list) > x.ndim:
        fail(f"{what}: slice_tup_list must be a list of at most {x.ndim} (start, stop, step), one per leading axis of "
             f"{x.shape}, got {slice_tup_list!r}")  # fmt: skip
    items, backwards = [], []
    dynamic = dynamic_axes(x.value.type)
    for axis, (entry, d) in enumerate(zip([*slice_tup_list, *[(None,) * 3] * (x.ndim - len(slice_tup_list))], x.shape)):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3 or not all(
            v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) for v in entry
        ):
            fail(f"{what}: entry {axis} of slice_tup_list must be (start, stop, step) of ints or None, got {entry!r}")
        start, stop, step = entry
        if step == 0:
            fail(f"{what}: the step of axis {axis} must not be 0")
        if start is not None and not -d <= start < d:
            fail(f"{what}: start {start} of axis {axis} is outside [-{d}, {d})")
        if stop is not None and not -d - 1 <= stop <= d:
            fail(f"{what}: stop {stop} of axis {axis} is outside [-{d + 1}, {d}]")
        if step is not None and step < 0:
            if axis in dynamic:
                fail(f"{what}: axis {axis} is dynamic, and a negative step counts from its actual end, known only when "
                     f"the step runs (docs/dynamic.md)")  # fmt: skip
            taken = range(*builtins.slice(start, stop, step).indices(d))
            items.append(builtins.slice(taken[-1], taken[0] + 1, -step) if taken else builtins.slice(0, 0))
            backwards.append(axis)
        else:
            items.append(builtins.slice(start, stop, step))
    return items, backwards


def _bounds(item: Any) -> tuple[Any, ...]:
    """An index item's ints: itself, or a slice's start and stop."""
    return (item.start, item.stop) if isinstance(item, builtins.slice) else (item,)


def _from_actual_end(x: Blob, axis: int, what: str, given: str) -> NoReturn:
    fail(
        f"{what}: {given} counts from the end of axis {axis} of {describe(x.value.type)}, which is dynamic: its "
        "actual size is known only at run time, so a slice of it takes indices from its start (docs/dynamic.md)"
    )


def static_slice(x: Blob, index: Any, reshape_fn: Any) -> Blob:
    """x[index] for ints, slices with a positive step and one Ellipsis."""
    items = list(index) if isinstance(index, tuple) else [index]
    # by identity: `==` on a Blob index (x[y]) would trace flow.math.equal(y, Ellipsis) and fail there
    ellipses = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        fail("a Blob index may hold one Ellipsis")
    if ellipses:
        at = ellipses[0]
        items[at : at + 1] = [builtins.slice(None)] * (x.ndim - len(items) + 1)
    if len(items) > x.ndim:
        fail(f"too many indices ({len(items)}) for a Blob of shape {x.shape}")
    items += [builtins.slice(None)] * (x.ndim - len(items))
    start, stop, step, dropped = [], [], [], []
    dynamic = dynamic_axes(x.value.type)
    for axis, (item, d) in enumerate(zip(items, x.shape)):
        if axis in dynamic and any(isinstance(i, (int, np.integer)) and i < 0 for i in _bounds(item)):
            shown = item if not isinstance(item, builtins.slice) else ":".join("" if i is None else str(i) for i in _bounds(item))
            _from_actual_end(x, axis, "Blob[...]", f"index {shown}")
        if isinstance(item, (int, np.integer)):
            if not -d <= item < d:
                fail(f"index {item} is out of range for axis {axis} of size {d}")
            item = builtins.slice(int(item) % d, int(item) % d + 1)
            dropped.append(axis)
        if not isinstance(item, builtins.slice):
            fail(f"a Blob index takes ints and slices, got {item!r}")
        a, b, s = item.indices(d)
        if s <= 0:
            fail(f"slices of a Blob need a positive step, got {item!r}")
        start.append(a)
        stop.append(max(a, b))
        step.append(s)
    out = build(job.SliceOp, [x], None, None, "Blob[...]", start=start, stop=stop, step=step)
    if pinned := [axis for axis in dropped if axis in dynamic]:  # one row, there at run time: a static axis of 1
        needs = ", ".join(f"index {start[a]} of axis {a} needs a size of {start[a] + 1} or more" for a in pinned)
        out = _pinned(out, pinned, needs, "Blob[...]")
    if dropped:
        out = reshape_fn(out, [n for axis, n in enumerate(out.shape) if axis not in dropped])
    return out


def cast(x: Blob, dtype: dtypes.DType, name: str | None = None) -> Blob:
    dtype = dtypes.as_dtype(dtype)
    if dtype is x.dtype:
        return x
    return build(job.CastOp, [x], job.tensor(x.shape, dtype.element_type), name, "flow.cast")


def expand(x: Blob, expand_size: Sequence[int], name: str | None = None) -> Blob:
    """flow.expand: x repeated along its size-1 axes to `expand_size` (-1 keeps an axis), new axes in front;
    a job.broadcast_to, whose gradient sums over the repeats."""
    what = "flow.expand"
    expect_blobs(what, x=x)
    size = _dims(expand_size, what)
    new = len(size) - x.ndim
    if new < 0:
        fail(f"{what}: expand_size {size} has fewer axes than x {x.shape}")
    shape = list(size)
    for axis, (want, have) in enumerate(zip(size, (None,) * new + x.shape)):
        if have is None and want < 1:
            fail(f"{what}: axis {axis} of expand_size {size} is a new axis and needs a size of 1 or more, got {want}")
        if have is not None and want == -1:
            shape[axis] = have
        elif have is not None and (want < 1 or have not in (1, want)):
            fail(f"{what}: axis {axis} of expand_size {size} must be -1 or a size x's {have} can be repeated to, "
                 f"got {want}")  # fmt: skip
    if tuple(shape) == x.shape:
        return _named(x, name)
    return build(job.BroadcastToOp, [x], job.tensor(tuple(shape), x.dtype.element_type), name, what)


def broadcast_to_compatible_with(x: Blob, compatible: Sequence[Blob], name: str | None = None) -> Blob:
    """flow.broadcast_to_compatible_with: x broadcast to the shape x and every `compatible` Blob broadcast to."""
    what = "flow.broadcast_to_compatible_with"
    if not isinstance(x, Blob) or not all(isinstance(c, Blob) for c in compatible):
        fail(f"{what}: x and compatible must be Blobs, got {x!r} and {compatible!r}")
    shape = x.shape
    for other in compatible:
        try:
            shape = job.broadcast_shapes(shape, other.shape)
        except VerifyException as err:
            fail(f"{what}: {err}")
    return expand(x, shape, name)


def diag(input: Blob, diagonal: int = 0, name: str | None = None) -> Blob:  # noqa: A002
    """flow.diag: of a vector, the square matrix with it on the `diagonal`-th diagonal (above the main one for
    diagonal > 0) and zeros elsewhere; of a matrix, that diagonal as a vector. A select against a constant
    mask, or a gather at constant indices, so the gradient goes back to the diagonal's entries."""
    what = "flow.diag"
    if not isinstance(input, Blob) or input.ndim not in (1, 2):
        fail(f"{what}: input must be a vector or a matrix Blob, got {input!r}")
    if not dtypes.is_int(diagonal):
        fail(f"{what}: diagonal must be an int, got {diagonal!r}")
    if dynamic_axes(input.value.type):
        fail(f"{what}: input of {describe(input.value.type)} is dynamic; its diagonal's place needs the actual sizes")
    k = int(diagonal)
    if input.ndim == 1:
        n = input.shape[0] + abs(k)
        # Entry (i, i + k) holds input[i] above the main diagonal: input down the rows; below it, across the columns.
        spread = reshape(pad(input, [(0, abs(k))]), (n, 1) if k >= 0 else (1, n))
        return where(constant(np.eye(n, k=k, dtype=np.int8)), expand(spread, (n, n)), 0, name)
    rows, columns = np.nonzero(np.eye(*input.shape, k=k, dtype=bool))
    if not len(rows):
        fail(f"{what}: diagonal {k} lies outside a matrix of shape {input.shape}")
    return gather_nd(input, constant(np.stack([rows, columns], axis=1).astype(np.int32)), name)


def pad_grad(x: Blob, paddings: Sequence[Sequence[int]], constant_value: float = 0, name: str | None = None) -> Blob:
    """flow.pad_grad: the adjoint of flow.pad, x without its `paddings` (a slice)."""
    what = "flow.pad_grad"
    expect_blobs(what, x=x)
    widths = _pad_widths(paddings, x.ndim, what)
    if any(before + after > d for (before, after), d in zip(widths, x.shape)):
        fail(f"{what}: paddings {paddings!r} are wider than x {x.shape}")
    return slice(x, [before for before, _ in widths], [d - before - after for (before, after), d in zip(widths, x.shape)],
                 name)  # fmt: skip


def constant_scalar(value: float, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    """flow.constant_scalar: `value` as a Blob of shape (1,), OneFlow's scalar blob."""
    return constant(value, dtype, (1,), name)


def dynamic_reshape(x: Blob, shape: Sequence[int], name: str | None = None) -> Blob:
    """flow.dynamic_reshape: flow.reshape, which regroups dynamic rows already (docs/dynamic.md)."""
    return reshape(x, shape, name)


def cast_to_static_shape(x: Blob, name: str | None = None) -> Blob:
    """flow.cast_to_static_shape: x with every dynamic axis static at its bound, checked when the step runs
    (an ExecutionError at this line where x is smaller)."""
    what = "flow.cast_to_static_shape"
    expect_blobs(what, x=x)
    if not (axes := sorted(dynamic_axes(x.value.type))):
        return _named(x, name)
    return _pinned(x, axes, ", ".join(f"axis {a} needs its bound's size {x.shape[a]}" for a in axes), what, name)


def _pinned(x: Blob, axes: list[int], needs: str, what: str, name: str | None = None) -> Blob:
    """x with dynamic `axes` static (job.pin_size); `needs` is what the step's check says when an axis falls short."""
    out = build(job.PinSizeOp, [x], None, name, what, axes=axes)
    out.value.owner.attributes["reason"] = StringAttr(f"{what}: {needs}")
    return out


def sync_dynamic_resize(inputs: Blob, size: Blob, name: str | None = None) -> NoReturn:
    """OneFlow's flow.sync_dynamic_resize (a dynamic size set from a Blob's value): a TraceError, see
    _data_dependent_size."""
    _data_dependent_size("flow.sync_dynamic_resize", "give the job the rows it should see as its input instead")


def elem_cnt(inputs: Blob, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    """flow.elem_cnt: the number of elements of `inputs` (its actual ones when dynamic), shape (1,), int32
    unless `dtype` says, as OneFlow's."""
    return element_count(inputs, None, dtype, name, "flow.elem_cnt")


def element_count(x: Blob, axes: Sequence[int] | None, dtype: dtypes.DType | None, name: str | None, what: str) -> Blob:
    """The product of x's sizes over `axes` (all for None) when the step runs: a job.size_of, shaped (1,)."""
    if not isinstance(x, Blob):
        fail(f"{what}: the input must be a Blob, got {type(x).__name__} {x!r}")
    counted = range(x.ndim) if axes is None else sorted({axis_index(a, x.ndim, what) for a in axes})
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int32
    count = build(job.SizeOfOp, [x], job.tensor((), dtype.element_type), None, what, axes=list(counted))
    return reshape(count, (1,), name)


def _named(x: Blob, name: str | None) -> Blob:
    """x itself, or under `name` (an identity) where one is given."""
    return identity(x, name) if name is not None else x


def _data_dependent_size(what: str, instead: str) -> NoReturn:
    """A TraceError for OneFlow's ops whose result size depends on the values: irflow's dynamic sizes come
    from a job's inputs when its step starts (docs/dynamic.md), and no op can set one while the step runs."""
    fail(f"{what} is not supported: its size depends on the values, and irflow's dynamic sizes come only "
         f"from the job's inputs, read when a step starts (docs/dynamic.md); {instead}")


def argwhere(condition: Blob, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    """OneFlow's flow.argwhere (the indices of the nonzero entries): a TraceError, see _data_dependent_size."""
    _data_dependent_size("flow.argwhere", "a mask (flow.where, a comparison cast to 0/1) keeps the shape")


def nonzero(a: Blob, name: str | None = None) -> Blob:
    """OneFlow's flow.nonzero: a TraceError, as flow.argwhere."""
    _data_dependent_size("flow.nonzero", "a mask (flow.where, a comparison cast to 0/1) keeps the shape")


def where(condition: Blob, x: Any = None, y: Any = None, name: str | None = None) -> Blob:
    """flow.where: x where `condition` (an integer Blob) is nonzero, else y, the three broadcast.

    One of x and y may be a Python number, taking the other's dtype. OneFlow's form with
    the condition alone returns the indices of its nonzero entries, a result whose size
    depends on the data: irflow does not have it.
    """
    if x is None or y is None:
        _data_dependent_size("flow.where with only a condition (the indices of its nonzero entries)",
                             "give both x and y to select between them")
    expect_blobs("flow.where", condition=condition)
    a, b = operands(x, y, "flow.where")
    return build(job.WhereOp, [condition, a, b], None, name, "flow.where")


def gather(
    params: Blob,
    indices: Blob,
    validate_indices: object = None,
    axis: int | None = None,
    batch_dims: int = 0,
    name: str | None = None,
) -> Blob:
    """flow.gather: the slices of `params` along `axis` at the int32/int64 `indices`, shaped as params with
    that axis replaced by the indices' shape.

    `batch_dims` > 0 makes it OneFlow's batch_gather, which takes `axis` only as batch_dims (its default)
    and then reads neither: the indices' leading ndim - 1 axes are batch axes, equal to params' first ones,
    and each batch entry gathers along the next axis of params with its own indices, which that axis's size
    becomes: BERT's masked-LM loss gathers (b, s, h) at (b, p) positions with axis=2, batch_dims=2. Another
    axis is a TraceError, as OneFlow refuses it (NotImplementedError past the batch axes).

    An index outside the axis stops the step with an ExecutionError at this line, naming it and its
    position, whatever `validate_indices` says (OneFlow ignores that argument too).
    """
    what = "flow.gather"
    expect_blobs(what, params=params)
    if not dtypes.is_int(batch_dims) or batch_dims < 0:
        fail(f"{what}: batch_dims must be a non-negative int, got {batch_dims!r}")
    if not batch_dims:
        axis = axis_index(0 if axis is None else axis, params.ndim, what)
        return build(job.GatherOp, [params, indices], None, name, what, axis=axis)
    # compared before it is normalized, as OneFlow does: axis == batch_dims passes whatever params' rank
    if axis is not None and axis != batch_dims and axis_index(axis, params.ndim, what) != batch_dims:
        fail(f"{what}: with batch_dims={batch_dims} (OneFlow's batch_gather) axis must be {batch_dims} or None, "
             f"got {axis!r}")  # fmt: skip
    if not isinstance(indices, Blob) or not 2 <= indices.ndim <= params.ndim:
        fail(f"{what}: with batch_dims={batch_dims} (OneFlow's batch_gather) indices must be a Blob of 2 to "
             f"{params.ndim} axes (params' rank), the last one gathering, got {indices!r}")  # fmt: skip
    lead = indices.ndim - 1
    return build(job.GatherOp, [params, indices], None, name, what, axis=lead, batch_dims=lead)


def dim_gather(input: Blob, dim: int, index: Blob, name: str | None = None) -> Blob:  # noqa: A002
    """flow.dim_gather: out[..., i, ...] = input[..., index[..., i, ...], ...] along `dim` (PyTorch's gather).

    `index` (int32/int64) has input's shape but along `dim`, as OneFlow requires, and the result has
    index's shape. The gradient adds each element's at its index, so repeated indices add up. An index
    outside the dim stops the step with an ExecutionError at this line, naming it and its position.
    """
    what = "flow.dim_gather"
    expect_blobs(what, input=input)
    return build(job.DimGatherOp, [input, index], None, name, what, dim=axis_index(dim, input.ndim, what))


def argsort(input: Blob, direction: str = "ASCENDING", name: str | None = None) -> Blob:  # noqa: A002
    """flow.argsort: the int32 indices that sort input's last axis, "ASCENDING" or "DESCENDING".

    Equal entries keep their index order both ways and NaN counts as the largest (job.arg_sort).
    Integer indices: no gradient.
    """
    return _arg_sort(input, direction, name, "flow.argsort")


def sort(input: Blob, direction: str = "ASCENDING", name: str | None = None) -> Blob:  # noqa: A002
    """flow.sort: input's last axis sorted, "ASCENDING" or "DESCENDING" (NaN largest).

    The entries argsort's indices pick (dim_gather), so each value's gradient goes back to the
    entry it came from.
    """
    return dim_gather(input, -1, _arg_sort(input, direction, None, "flow.sort"), name)


def _arg_sort(input: Blob, direction: str, name: str | None, what: str) -> Blob:  # noqa: A002
    if not isinstance(input, Blob) or not input.ndim:
        fail(f"{what}: input must be a Blob with at least one axis, got {input!r}")
    if direction not in ("ASCENDING", "DESCENDING"):
        fail(f"{what}: direction must be 'ASCENDING' or 'DESCENDING', got {direction!r}")
    return build(job.ArgSortOp, [input], None, name, what, axis=input.ndim - 1, descending=direction == "DESCENDING")


def gather_nd(params: Blob, indices: Blob, name: str | None = None) -> Blob:
    """flow.gather_nd: the slices of params that int32/int64 `indices` (..., K) pick by their first K
    coordinates, shaped indices.shape[:-1] + params.shape[K:]. Its gradient is scatter_nd (repeats add
    up); a coordinate outside its axis stops the step with an ExecutionError at this line."""
    expect_blobs("flow.gather_nd", params=params)
    return build(job.GatherNdOp, [params, indices], None, name, "flow.gather_nd")


def scatter_nd(indices: Blob, updates: Blob, shape: Sequence[int], name: str | None = None) -> Blob:
    """flow.scatter_nd: zeros of `shape` with each slice of `updates` added where `indices` (..., K) point,
    repeated indices adding up as in OneFlow's kernel; gather_nd's adjoint."""
    what = "flow.scatter_nd"
    expect_blobs(what, updates=updates)
    dims = _dims(shape, what)
    return build(job.ScatterNdOp, [updates, indices], job.tensor(dims, updates.dtype.element_type), name, what)


def tensor_scatter_nd_update(params: Blob, indices: Blob, updates: Blob, name: str | None = None) -> Blob:
    """flow.tensor_scatter_nd_update: params with the slices where `indices` (..., K) point replaced by
    `updates`' slices. As OneFlow's kernel zeroes those slices and then adds, a repeated index gets the sum
    of its updates. Gradients as OneFlow's: gather_nd of dy for the updates, dy with the written slices
    zeroed for params. A coordinate outside its axis stops the step with an ExecutionError at this line."""
    return _tensor_scatter_nd(job.TensorScatterNdUpdateOp, params, indices, updates, name,
                              "flow.tensor_scatter_nd_update")  # fmt: skip


def tensor_scatter_nd_add(params: Blob, indices: Blob, updates: Blob, name: str | None = None) -> Blob:
    """flow.tensor_scatter_nd_add: params with each slice of `updates` added where `indices` (..., K) point,
    repeats adding up (params + scatter_nd); gradients dy for params and gather_nd of dy for the updates."""
    return _tensor_scatter_nd(job.TensorScatterNdAddOp, params, indices, updates, name, "flow.tensor_scatter_nd_add")


def _tensor_scatter_nd(op: type[job.TensorScatterNdOp], params: Blob, indices: Blob, updates: Blob,
                       name: str | None, what: str) -> Blob:  # fmt: skip
    expect_blobs(what, params=params, updates=updates)
    return build(op, [params, indices, updates], None, name, what)


def constant(
    value: Any,
    dtype: dtypes.DType | None = None,
    shape: Sequence[int] | None = None,
    name: str | None = None,
) -> Blob:
    """flow.constant: a scalar broadcast to `shape` (default a scalar), or an array as given."""
    trace = current("flow.constant")
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value)
        if dtype is None:
            dtype = dtypes.from_numpy(array.dtype) or trace.config.data_type
        dtype = dtypes.as_dtype(dtype)
        if shape is not None and tuple(_dims(shape, "flow.constant")) != array.shape:
            array = np.broadcast_to(array, _dims(shape, "flow.constant"))
        array = np.asarray(array, dtype=dtype.np_dtype, order="C")  # ascontiguousarray makes rank 0 rank 1
        t = job.tensor(array.shape, dtype.element_type)
        values = array.reshape(-1).tolist() or [0]
        attr = DenseIntOrFPElementsAttr.from_list(t, values)
        return build(job.ConstantOp, [], t, name, "flow.constant", value=attr)
    if not isinstance(value, (bool, int, float, np.number)):
        fail(f"flow.constant expects a number or an array, got {type(value).__name__}")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else trace.config.data_type
    return fill(_dims(shape, "flow.constant") if shape is not None else (), float(value), dtype, name=name)


def zeros(shape: Sequence[int], dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    """flow.zeros: a Blob of `shape` holding 0, float32 unless `dtype` says (OneFlow's default)."""
    return _filled(shape, 0, dtype, "flow.zeros", name)


def ones(shape: Sequence[int], dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    """flow.ones: a Blob of `shape` holding 1, float32 unless `dtype` says (OneFlow's default)."""
    return _filled(shape, 1, dtype, "flow.ones", name)


def _filled(shape: object, value: float, dtype: dtypes.DType | None, what: str, name: str | None) -> Blob:
    dims = _dims(shape, what)
    if any(d < 0 for d in dims):
        fail(f"{what}: shape must not have a negative dimension, got {shape!r}")
    return fill(dims, value, dtypes.as_dtype(dtype) if dtype is not None else dtypes.float32, what, name)


def arange(start: float, limit: float | None = None, delta: float = 1, dtype: dtypes.DType | None = None,
           name: str | None = None) -> Blob:  # fmt: skip
    """flow.range: start, start + delta, ... before limit, as Python's range (given one number, the limit,
    counting from 0), int64 unless `dtype` says, as OneFlow's. A constant: the numbers are known when traced."""
    what = "flow.range"
    start, limit = (0, start) if limit is None else (start, limit)
    for label, number in (("start", start), ("limit", limit), ("delta", delta)):
        if isinstance(number, bool) or not isinstance(number, (int, builtins.float, np.integer, np.floating)):
            fail(f"{what}: {label} must be a number, got {number!r}")
    if delta == 0:
        fail(f"{what}: delta must not be 0")
    return constant(np.arange(start, limit, delta), dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64, name=name)


def masked_fill(x: Blob, mask: Blob, value: float, name: str | None = None) -> Blob:
    """flow.masked_fill: x with `value` wherever the integer `mask` (broadcast to x) is nonzero; no
    gradient flows to the filled entries (flow.where)."""
    expect_blobs("flow.masked_fill", x=x)
    return where(mask, value, x, name)


def reverse(input: Blob, axis: int | Sequence[int], name: str | None = None) -> Blob:  # noqa: A002
    """flow.reverse: input with its entries along each of `axis` in reverse order. A gather at reversed
    indices per axis, so the gradient is reversed back (gather_grad); a dynamic axis is refused, its
    last entry being known only when the step runs."""
    what = "flow.reverse"
    expect_blobs(what, input=input)
    axes = sorted({axis_index(a, input.ndim, what) for a in (axis if isinstance(axis, (list, tuple)) else [axis])})
    if dynamic := sorted(set(axes) & set(dynamic_axes(input.value.type))):
        fail(f"{what}: axis {dynamic[0]} is dynamic, and its reverse order needs its actual size, known only when "
             f"the step runs (docs/dynamic.md)")  # fmt: skip
    out = input
    for a in axes:
        backwards = np.arange(input.shape[a] - 1, -1, -1, dtype=np.int32)
        out = gather(out, constant(backwards, dtypes.int32), axis=a, name=name if a == axes[-1] else None)
    return out


def constant_like(like: Blob, value: float, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    return fill(like.shape, value, dtypes.as_dtype(dtype) if dtype is not None else like.dtype, "flow.constant_like", name)


def zeros_like(like: Blob, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    return constant_like(like, 0.0, dtype, name)


def ones_like(like: Blob, dtype: dtypes.DType | None = None, name: str | None = None) -> Blob:
    return constant_like(like, 1.0, dtype, name)


def axis_index(axis: object, rank: int, what: str) -> int:
    """`axis` as an index in [0, rank): an int in [-rank, rank), else a TraceError (a modulo would wrap it)."""
    if not dtypes.is_int(axis) or not -rank <= axis < rank:
        fail(f"{what}: axis must be an int in [{-rank}, {rank}), got {axis!r}")
    return int(axis) % rank


def expand_dims(input: Blob, axis: int, name: str | None = None) -> Blob:  # noqa: A002
    axis = axis_index(axis, input.ndim + 1, "flow.expand_dims")
    return reshape(input, input.shape[:axis] + (1,) + input.shape[axis:], name)


def squeeze(input: Blob, axis: int | Sequence[int] | None = None, name: str | None = None) -> Blob:  # noqa: A002
    """Drop the size-1 axes `axis` (an int or a list; negative counts from the end), or every size-1 axis."""
    shape = input.shape
    if axis is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [axis_index(a, len(shape), "flow.squeeze") for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    for a in axes:
        if shape[a] != 1:
            fail(f"flow.squeeze: axis {a} of {shape} has size {shape[a]}, not 1")
    return reshape(input, [d for i, d in enumerate(shape) if i not in axes], name)


def _install_operators() -> None:
    """`blob[...]` is a static slice and `a @ b` a matmul."""
    Blob.__getitem__ = lambda self, index: static_slice(self, index, reshape)  # type: ignore[method-assign]
    Blob.__matmul__ = lambda self, other: matmul(self, other)  # type: ignore[method-assign]
    Blob.__rmatmul__ = lambda self, other: matmul(other, self)  # type: ignore[method-assign]


_install_operators()
