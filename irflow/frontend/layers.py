"""flow.layers: dense and conv2d, built from get_variable and flow.nn ops as OneFlow builds them.

Variables are named `<name>-weight` and `<name>-bias`; without a `name`, a
layer is called "Dense_<i>" / "Conv2d_<i>" by its order in the job, so a train
job and an eval job that build the same layers share their variables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from irflow.frontend import initializers
from irflow.frontend.blob import Blob
from irflow.frontend.distribute import Distribute, split
from irflow.frontend.nn import bias_add, conv2d as nn_conv2d, pair
from irflow.frontend.ops import matmul, reshape
from irflow.frontend.tracing import current, fail
from irflow.frontend.variables import get_variable

Activation = Callable[..., Blob]


def dense(
    inputs: Blob,
    units: int,
    activation: Activation | None = None,
    use_bias: bool = True,
    kernel_initializer: dict[str, Any] | None = None,
    bias_initializer: dict[str, Any] | None = None,
    kernel_regularizer: object = None,
    bias_regularizer: object = None,
    trainable: bool = True,
    name: str | None = None,
    model_distribute: object = None,
) -> Blob:
    """inputs (..., in) @ weight(units, in)^T + bias(units); inputs of rank > 2 are flattened and restored.

    `model_distribute` is the weight's distribute: split(0) splits it over the
    output features (the bias too, so each device computes its own features),
    split(1) over the input features (each device then holds a partial sum).
    """
    what = "flow.layers.dense"
    trace = current(what)
    if inputs.ndim < 2:
        fail(f"{what}: inputs must have rank >= 2, got {inputs.shape}")
    if not isinstance(units, int) or units < 1:
        fail(f"{what}: units must be a positive int, got {units!r}")
    name = name or trace.unique_name("Dense")
    in_shape = inputs.shape
    if inputs.ndim > 2:
        inputs = reshape(inputs, (-1, in_shape[-1]))
    weight = get_variable(
        f"{name}-weight",
        shape=(units, in_shape[-1]),
        dtype=inputs.dtype,
        initializer=kernel_initializer or initializers.constant_initializer(0.0),
        regularizer=kernel_regularizer,
        trainable=trainable,
        distribute=model_distribute,
    )
    out = matmul(inputs, weight, transpose_b=True, name=f"{name}_matmul")
    if use_bias:
        by_features = isinstance(model_distribute, Distribute) and model_distribute == split(0)
        out = _add_bias(
            out, f"{name}-bias", units, bias_initializer, bias_regularizer, trainable, name,
            distribute=model_distribute if by_features else None,
        )  # fmt: skip
    out = _activate(out, activation, name)
    if len(in_shape) > 2:
        out = reshape(out, in_shape[:-1] + (units,))
    return out


def conv2d(
    inputs: Blob,
    filters: int,
    kernel_size: int | Sequence[int] = 1,
    strides: int | Sequence[int] = 1,
    padding: str | Sequence[Any] = "VALID",
    data_format: str = "NCHW",
    dilation_rate: int | Sequence[int] | None = None,
    groups: int = 1,
    activation: Activation | None = None,
    use_bias: bool = True,
    kernel_initializer: dict[str, Any] | None = None,
    bias_initializer: dict[str, Any] | None = None,
    kernel_regularizer: object = None,
    bias_regularizer: object = None,
    trainable: bool = True,
    name: str | None = None,
    weight_name: str | None = None,
    bias_name: str | None = None,
) -> Blob:
    """2-D convolution layer; weight (filters, in_channels/groups, kh, kw), or (filters, kh, kw, in/groups) for NHWC."""
    what = "flow.layers.conv2d"
    trace = current(what)
    if inputs.ndim != 4:
        fail(f"{what}: inputs must be rank 4 ({data_format}), got {inputs.shape}")
    kh, kw = pair(kernel_size, what, "kernel_size")
    if not isinstance(groups, int) or groups < 1 or not isinstance(filters, int) or filters % groups:
        fail(f"{what}: filters ({filters}) must be a positive multiple of groups ({groups})")
    last = data_format.upper() == "NHWC"
    channels = inputs.shape[3] if last else inputs.shape[1]
    if channels % groups:
        fail(f"{what}: the input's {channels} channels do not split into {groups} groups")
    name = name or trace.unique_name("Conv2d")
    shape = (filters, kh, kw, channels // groups) if last else (filters, channels // groups, kh, kw)
    weight = get_variable(
        weight_name or f"{name}-weight",
        shape=shape,
        dtype=inputs.dtype,
        initializer=kernel_initializer or initializers.xavier_uniform_initializer(data_format),
        regularizer=kernel_regularizer,
        trainable=trainable,
    )
    out = nn_conv2d(inputs, weight, strides, padding, data_format, dilation_rate, groups, name=name)
    if use_bias:
        out = _add_bias(
            out, bias_name or f"{name}-bias", filters, bias_initializer, bias_regularizer, trainable, name, data_format
        )
    return _activate(out, activation, name)


def _add_bias(
    out: Blob,
    variable: str,
    units: int,
    initializer: dict[str, Any] | None,
    regularizer: object,
    trainable: bool,
    name: str,
    data_format: str | None = None,
    distribute: Distribute | None = None,
) -> Blob:
    """`<layer>_bias_add`: a (units,) variable, zeros unless `initializer`, on the channel axis of `data_format`."""
    bias = get_variable(
        variable,
        shape=(units,),
        dtype=out.dtype,
        initializer=initializer or initializers.constant_initializer(0.0),
        regularizer=regularizer,
        trainable=trainable,
        distribute=distribute,
    )
    return bias_add(out, bias, data_format, name=f"{name}_bias_add")


def _activate(out: Blob, activation: Activation | None, name: str) -> Blob:
    """OneFlow applies a layer's activation only when it is callable, under the name `<layer>_activation`."""
    return activation(out, name=f"{name}_activation") if callable(activation) else out
