"""OneFlow's TensorBuffer ops: flow.tensor_to_tensor_buffer, tensor_buffer_to_tensor, gen_tensor_buffer,
tensor_buffer_to_list_of_tensors (docs/dynamic.md).

A TensorBuffer is a tensor of tensors, each element with a shape of its own.
Here it is stored at its elements' bound, and its element shapes are part of
its type (`#job.tensor_buffer`): static ones when traced, or, for a TensorBuffer
made from a dynamic input, its dynamic axes, whose sizes the step's data gives.
A tensor taken out of one with `dynamic_out` is a dynamic tensor whose actual
sizes are that element's shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from irflow.dialects import job
from irflow.dialects.bounds import element_shapes, tensor_buffer, with_dynamic
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.tracing import build


def _shape(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        fail(f"{what} must be a list or tuple of non-negative ints, got {value!r}")
    return tuple(value)  # type: ignore[arg-type]


def tensor_to_tensor_buffer(x: Blob, instance_dims: int, name: str | None = None) -> Blob:
    """x as a TensorBuffer: its last `instance_dims` axes are each element's tensor, the others the buffer's shape.

    A dynamic x (a list placeholder) gives a dynamic TensorBuffer, as in OneFlow: as many elements as
    its leading axes have in the step, each of its trailing axes' sizes in the step.
    """
    return build(job.TensorToTensorBufferOp, [x], None, name, "flow.tensor_to_tensor_buffer", instance_dims=int(instance_dims))


def tensor_buffer_to_tensor(
    x: Blob, dtype: dtypes.DType, instance_shape: Sequence[int], name: str | None = None
) -> Blob:
    """The elements of a TensorBuffer, each of `instance_shape`, as one tensor of its shape + instance_shape."""
    instance = _shape(instance_shape, "flow.tensor_buffer_to_tensor: instance_shape")
    dtype = dtypes.as_dtype(dtype, "flow.tensor_buffer_to_tensor dtype")
    shape = x.shape[: x.ndim - len(instance)] if element_shapes(x.value.type) is not None else x.shape
    return build(job.TensorBufferToTensorOp, [x], job.tensor((*shape, *instance), dtype.element_type), name,
                 "flow.tensor_buffer_to_tensor", instance_shape=list(instance))  # fmt: skip


def gen_tensor_buffer(
    shape: Sequence[int],
    shape_list: Sequence[Sequence[int]],
    value_list: Sequence[float],
    data_type: dtypes.DType = dtypes.float32,
    dynamic_out: bool = False,
    name: str | None = None,
) -> Blob:
    """A TensorBuffer of `shape` whose element k is a tensor of `shape_list[k]` filled with `value_list[k]`.

    OneFlow's own example writes the shape as `[(2,)]`, a list holding it, which is read
    as `(2,)` too. `dynamic_out` (a buffer of dynamic shape in OneFlow) changes nothing
    here: the elements are listed, so the buffer's shape is known.
    """
    if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    dims = _shape(shape, "flow.gen_tensor_buffer: shape")
    shapes = [_shape(s, "flow.gen_tensor_buffer: each of shape_list") for s in shape_list]
    count = 1
    for d in dims:
        count *= d
    if not shapes or len(shapes) != count or len(value_list) != count or len({len(s) for s in shapes}) != 1:
        fail(f"flow.gen_tensor_buffer: a buffer of shape {dims} needs {count} element shapes of one rank and "
             f"{count} values, got shapes {shapes} and values {list(value_list)}")
    dtype = dtypes.as_dtype(data_type, "flow.gen_tensor_buffer data_type")
    return build(job.GenTensorBufferOp, [], tensor_buffer(dims, shapes, dtype.element_type), name,
                 "flow.gen_tensor_buffer", values=[float(v) for v in value_list])  # fmt: skip


def tensor_buffer_to_list_of_tensors(
    x: Blob, out_shape: Sequence[int], out_dtype: dtypes.DType, dynamic_out: bool = False, name: str | None = None
) -> list[Blob]:
    """One tensor per element of the TensorBuffer, in row-major order.

    With `dynamic_out`, each has its element's shape within the bound `out_shape`
    (a dynamic tensor); without, each element must have the shape `out_shape`
    (checked when the step starts where the shape is the step's). A dynamic
    TensorBuffer gives one tensor per element of its bound and must be full.
    """
    bound = _shape(out_shape, "flow.tensor_buffer_to_list_of_tensors: out_shape")
    dtype = dtypes.as_dtype(out_dtype, "flow.tensor_buffer_to_list_of_tensors out_dtype")
    shapes = element_shapes(x.value.type) if isinstance(x, Blob) else None
    if shapes is None:
        fail(f"flow.tensor_buffer_to_list_of_tensors expects a TensorBuffer, got {x!r}")
    result = with_dynamic(job.tensor(bound, dtype.element_type), range(len(bound)) if dynamic_out else ())
    return [
        build(job.TensorBufferGetOp, [x], result, None if name is None else f"{name}_{i}",
              "flow.tensor_buffer_to_list_of_tensors", index=i, out_shape=list(bound), dynamic_out=bool(dynamic_out))
        for i in range(len(shapes))
    ]  # fmt: skip
