"""flow.layers: dense, conv1d, conv2d, batch_normalization, layer_norm: get_variable and flow ops, as OneFlow builds them.

Variables are named `<name>-weight` and `<name>-bias`; without a `name`, a
layer is called "Dense_<i>" / "Conv2d_<i>" by its order in the job, so a train
job and an eval job that build the same layers share their variables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from irflow.dialects import job
from irflow.frontend import dtypes, initializers, math
from irflow.frontend.blob import Blob
from irflow.frontend.distribute import Distribute, split
from irflow.frontend.nn import (
    _leaky, bias_add, conv1d as nn_conv1d, conv2d as nn_conv2d, layer_norm as nn_layer_norm, layer_norm_params, single,
)
from irflow.frontend.ops import constant, gather, matmul, reshape
from irflow.frontend.locations import fail
from irflow.frontend.tracing import append_op, build, current
from irflow.frontend.variables import get_variable
from irflow.frontend.volumes import conv3d as nn_conv3d, triple
from irflow.frontend.windows import pair

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
    kernel = pair(kernel_size, what, "kernel_size")
    weight, name = _conv_weight(inputs, filters, kernel, data_format, groups, kernel_initializer, kernel_regularizer,
                                trainable, name, weight_name, "Conv2d", what)  # fmt: skip
    out = nn_conv2d(inputs, weight, strides, padding, None, data_format, dilation_rate, groups, name=name)
    return _conv_tail(out, filters, activation, use_bias, bias_initializer, bias_regularizer, trainable, name,
                      bias_name, data_format)  # fmt: skip


def conv1d(
    inputs: Blob,
    filters: int,
    kernel_size: int | Sequence[int] = 1,
    strides: int | Sequence[int] = 1,
    padding: str | Sequence[Any] = "VALID",
    data_format: str = "NCW",
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
    """1-D convolution layer (flow.nn.conv1d); weight (filters, in_channels/groups, k), or (filters, k, in/groups) for NWC.

    Without a `name` it is "Conv1d_<i>" (OneFlow: "Conv1d"), as conv2d's layers are counted.
    """
    what = "flow.layers.conv1d"
    kernel = (single(kernel_size, what, "kernel_size"),)
    weight, name = _conv_weight(inputs, filters, kernel, data_format, groups, kernel_initializer, kernel_regularizer,
                                trainable, name, weight_name, "Conv1d", what)  # fmt: skip
    out = nn_conv1d(inputs, weight, strides, padding, data_format, dilation_rate, groups, name=name)
    return _conv_tail(out, filters, activation, use_bias, bias_initializer, bias_regularizer, trainable, name,
                      bias_name, data_format)  # fmt: skip


def conv3d(
    inputs: Blob,
    filters: int,
    kernel_size: int | Sequence[int] = 1,
    strides: int | Sequence[int] = 1,
    padding: str | Sequence[Any] = "VALID",
    data_format: str = "NCDHW",
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
    """3-D convolution layer (flow.nn.conv3d); weight (filters, in/groups, kd, kh, kw), or (filters, kd, kh, kw,
    in/groups) for NDHWC. Without a `name` it is "Conv3d_<i>" (OneFlow: "Conv3d")."""
    what = "flow.layers.conv3d"
    kernel = triple(kernel_size, what, "kernel_size")
    weight, name = _conv_weight(inputs, filters, kernel, data_format, groups, kernel_initializer, kernel_regularizer,
                                trainable, name, weight_name, "Conv3d", what)  # fmt: skip
    out = nn_conv3d(inputs, weight, strides, padding, data_format, dilation_rate, groups, name=name)
    return _conv_tail(out, filters, activation, use_bias, bias_initializer, bias_regularizer, trainable, name,
                      bias_name, data_format)  # fmt: skip


def _conv_weight(
    inputs: Blob,
    filters: int,
    kernel: tuple[int, ...],
    data_format: str,
    groups: int,
    initializer: dict[str, Any] | None,
    regularizer: object,
    trainable: bool,
    name: str | None,
    weight_name: str | None,
    prefix: str,
    what: str,
) -> tuple[Blob, str]:
    """A convolution layer's weight variable, (filters, in/groups, *kernel) or (filters, *kernel, in/groups), and its name."""
    trace = current(what)
    if not isinstance(inputs, Blob) or inputs.ndim != len(kernel) + 2:
        fail(f"{what}: inputs must be a rank-{len(kernel) + 2} Blob ({data_format}), got {inputs!r}")
    if not isinstance(groups, int) or groups < 1 or not isinstance(filters, int) or filters < 1 or filters % groups:
        fail(f"{what}: filters ({filters}) must be a positive multiple of groups ({groups})")
    last = isinstance(data_format, str) and data_format.upper().endswith("C")
    channels = inputs.shape[-1] if last else inputs.shape[1]
    if channels % groups:
        fail(f"{what}: the input's {channels} channels do not split into {groups} groups")
    name = name or trace.unique_name(prefix)
    shape = (filters, *kernel, channels // groups) if last else (filters, channels // groups, *kernel)
    weight = get_variable(
        weight_name or f"{name}-weight",
        shape=shape,
        dtype=inputs.dtype,
        initializer=initializer or initializers.xavier_uniform_initializer(data_format),
        regularizer=regularizer,
        trainable=trainable,
    )
    return weight, name


def _conv_tail(
    out: Blob,
    filters: int,
    activation: Activation | None,
    use_bias: bool,
    bias_initializer: dict[str, Any] | None,
    bias_regularizer: object,
    trainable: bool,
    name: str,
    bias_name: str | None,
    data_format: str,
) -> Blob:
    """A convolution layer's `<name>-bias` (unless not `use_bias`) and activation."""
    if use_bias:
        out = _add_bias(
            out, bias_name or f"{name}-bias", filters, bias_initializer, bias_regularizer, trainable, name, data_format
        )
    return _activate(out, activation, name)


def upsample_2d(
    x: Blob,
    size: int | Sequence[int] = (2, 2),
    align_corners: bool = False,
    data_format: str = "NCHW",
    interpolation: str = "nearest",
    name: str = "Upsample2D",
) -> Blob:
    """x enlarged `size` = (height_scale, width_scale) times, by "nearest" or "bilinear" interpolation.

    Both work on the spatial axes where they lie, so NHWC needs no transpose. irflow takes
    whole scales only (OneFlow also fractional ones) and needs a static batch.
    """
    what = "flow.layers.upsample_2d"
    current(what)
    scales = (size, size) if not isinstance(size, (list, tuple)) else tuple(size)
    if len(scales) != 2 or not all(dtypes.is_number(k) and k >= 1 and float(k).is_integer() for k in scales):
        fail(f"{what}: size must be a whole number >= 1 or a pair of them, got {size!r}")
    if interpolation not in ("nearest", "bilinear"):
        fail(f"{what}: interpolation must be 'nearest' or 'bilinear', got {interpolation!r}")
    if interpolation == "nearest" and align_corners:
        fail(f"{what}: interpolation 'nearest' does not take align_corners")
    if not isinstance(x, Blob) or x.ndim != 4 or not x.dtype.is_floating_point:
        fail(f"{what}: x must be a floating-point Blob of rank 4 ({data_format}), got {x!r}")
    h = {"NCHW": 2, "NHWC": 1}.get(data_format.upper() if isinstance(data_format, str) else "")
    if h is None:
        fail(f"{what}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    sh, sw = int(scales[0]), int(scales[1])
    if interpolation == "bilinear":
        if sh > 1:  # a scale of 1 keeps every row: no gathers
            x = _linear(x, h, sh, align_corners, None if sw > 1 else name)
        return _linear(x, h + 1, sw, align_corners, name) if sw > 1 else x
    return _repeat(x, h, sh, sw, name, what)


def _repeat(x: Blob, h: int, sh: int, sw: int, name: str, what: str) -> Blob:
    """Each pixel as a sh x sw block: the axes h and h + 1 each get a size-1 axis after them, which
    job.broadcast_to widens to the scales and a reshape merges, so the gradient sums each block."""
    before, (height, width), after = x.shape[:h], x.shape[h : h + 2], x.shape[h + 2 :]
    wide = job.tensor((*before, height, sh, width, sw, *after), job.dtype_of(x.value.type))
    blocks = build(job.BroadcastToOp, [reshape(x, (*before, height, 1, width, 1, *after))], wide, None, what)
    return reshape(blocks, (*before, height * sh, width * sw, *after), name)


def _linear(x: Blob, axis: int, scale: int, align_corners: bool, name: str | None) -> Blob:
    """x resampled to `scale` times its size along `axis` by linear interpolation between two gathered rows.

    The source of output row i is i * (n - 1) / (m - 1) with `align_corners`, else
    (i + 0.5) / scale - 0.5 clamped at 0 (PyTorch's and OneFlow's); the rows and their weights
    are constants, so the gradient is gather's (the rows' shares summed).
    """
    n = x.shape[axis]
    m = n * scale
    rows = np.arange(m, dtype=np.float64)
    if align_corners:
        source = rows * ((n - 1) / (m - 1) if m > 1 else 0.0)
    else:
        source = np.maximum((rows + 0.5) / scale - 0.5, 0.0)
    low = np.floor(source).astype(np.int32)
    high = np.minimum(low + 1, n - 1).astype(np.int32)
    share = (source - low).reshape([m if a == axis else 1 for a in range(x.ndim)])
    below = gather(x, constant(low), axis=axis) * constant(1.0 - share, x.dtype)
    return math.add(below, gather(x, constant(high), axis=axis) * constant(share, x.dtype), name)


def prelu(
    inputs: Blob,
    alpha_initializer: dict[str, Any] | None = None,
    alpha_regularizer: object = None,
    shared_axes: Sequence[int] | None = None,
    trainable: bool = True,
    name: str | None = None,
    model_distribute: object = None,
) -> Blob:
    """x where x > 0, alpha * x elsewhere, with a trainable `<name>-alpha` (zeros) of inputs.shape[1:].

    The axes in `shared_axes` (each in [1, rank)) share one alpha: its size there is 1.
    As flow.nn.leaky_relu with alpha a variable: x times 1 or alpha, so x's gradient at 0
    is alpha and alpha's is x where x <= 0 (OneFlow's and PyTorch's). Without a `name` the
    layer is "PRelu_<i>" (OneFlow: "PRelu"); `model_distribute` None is broadcast.
    """
    what = "flow.layers.prelu"
    trace = current(what)
    if not isinstance(inputs, Blob) or inputs.ndim < 2 or not inputs.dtype.is_floating_point:
        fail(f"{what}: inputs must be a floating-point Blob of rank >= 2, got {inputs!r}")
    shape = list(inputs.shape[1:])
    shared = shared_axes if shared_axes is not None else []
    if not isinstance(shared, (list, tuple)) or not all(dtypes.is_int(a) and 1 <= a < inputs.ndim for a in shared):
        fail(f"{what}: shared_axes must be a list of axes in [1, {inputs.ndim}), got {shared_axes!r}")
    for axis in shared:
        shape[axis - 1] = 1
    name = name or trace.unique_name("PRelu")
    alpha = get_variable(
        f"{name}-alpha",
        shape=shape,
        dtype=inputs.dtype,
        initializer=alpha_initializer or initializers.constant_initializer(0.0),
        regularizer=alpha_regularizer,
        trainable=trainable,
        distribute=model_distribute,
    )
    return _leaky(inputs, alpha, name)


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


def batch_normalization(
    inputs: Blob,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 0.001,
    center: bool = True,
    scale: bool = True,
    beta_initializer: dict[str, Any] | None = None,
    gamma_initializer: dict[str, Any] | None = None,
    beta_regularizer: object = None,
    gamma_regularizer: object = None,
    moving_mean_initializer: dict[str, Any] | None = None,
    moving_variance_initializer: dict[str, Any] | None = None,
    trainable: bool = True,
    training: bool = True,
    name: str | None = None,
    gamma_name: str | None = None,
    beta_name: str | None = None,
    moving_mean_name: str | None = None,
    moving_variance_name: str | None = None,
) -> Blob:
    """Normalize over every axis but `axis`, then scale by `<name>-gamma` and shift by `<name>-beta`.

    `gamma_name`, `beta_name`, `moving_mean_name` and `moving_variance_name`
    name a variable outright instead of `<name>-<suffix>` (as OneFlow's, still
    under the enclosing flow.scope.namespace).

    In a train job (with `training` and `trainable`) the batch's statistics
    normalize, and the non-trainable `<name>-moving_mean` / `-moving_variance`
    move towards them: moving = momentum * moving + (1 - momentum) * batch,
    with the unbiased batch variance (as cuDNN and PyTorch keep it). Anywhere
    else the moving statistics normalize.
    """
    what = "flow.layers.batch_normalization"
    trace = current(what)
    if not isinstance(axis, int) or not -inputs.ndim <= axis < inputs.ndim:
        fail(f"{what}: axis {axis!r} is out of range for a Blob of shape {inputs.shape}")
    if not 0.0 <= momentum <= 1.0 or not epsilon > 0:
        fail(f"{what}: momentum must be in [0, 1] and epsilon positive, got {momentum!r} and {epsilon!r}")
    axis %= inputs.ndim
    name = name or trace.unique_name("BatchNorm")
    channels = inputs.shape[axis]
    reduced = [a for a in range(inputs.ndim) if a != axis]
    stat_shape = tuple(channels if a == axis else 1 for a in range(inputs.ndim))

    names = {"gamma": gamma_name, "beta": beta_name, "moving_mean": moving_mean_name,
             "moving_variance": moving_variance_name}  # fmt: skip

    def variable(suffix: str, init: dict[str, Any] | None, default: float, learn: bool, reg: object = None) -> Blob:
        return get_variable(names[suffix] or f"{name}-{suffix}", shape=(channels,), dtype=inputs.dtype, regularizer=reg,
                            initializer=init or initializers.constant_initializer(default), trainable=learn)

    moving_mean = variable("moving_mean", moving_mean_initializer, 0.0, False)
    moving_variance = variable("moving_variance", moving_variance_initializer, 1.0, False)
    if training and trainable and trace.job_type == "train":
        mean = math.reduce_mean(inputs, reduced, keepdims=True)
        centered = inputs - mean
        variance = math.reduce_mean(math.square(centered), reduced, keepdims=True)
        count = int(np.prod(inputs.shape)) // channels
        unbiased = variance * (count / max(count - 1, 1))
        _assign(moving_mean, reshape(moving_mean, stat_shape) * momentum + mean * (1.0 - momentum), what)
        _assign(moving_variance, reshape(moving_variance, stat_shape) * momentum + unbiased * (1.0 - momentum), what)
    else:
        centered, variance = inputs - reshape(moving_mean, stat_shape), reshape(moving_variance, stat_shape)
    out = centered * math.rsqrt(variance + epsilon)
    if scale:
        out = out * reshape(variable("gamma", gamma_initializer, 1.0, trainable, gamma_regularizer), stat_shape)
    if center:
        out = out + reshape(variable("beta", beta_initializer, 0.0, trainable, beta_regularizer), stat_shape)
    return out


def batch_normalization_add_relu(
    inputs: Blob,
    addend: Blob | None = None,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 0.001,
    center: bool = True,
    scale: bool = True,
    beta_initializer: dict[str, Any] | None = None,
    gamma_initializer: dict[str, Any] | None = None,
    beta_regularizer: object = None,
    gamma_regularizer: object = None,
    moving_mean_initializer: dict[str, Any] | None = None,
    moving_variance_initializer: dict[str, Any] | None = None,
    trainable: bool = True,
    training: bool = True,
    name: str | None = None,
    gamma_name: str | None = None,
    beta_name: str | None = None,
    moving_mean_name: str | None = None,
    moving_variance_name: str | None = None,
) -> Blob:
    """relu(batch_normalization(inputs) + addend), with batch_normalization's variables and arguments.

    OneFlow fuses these into one GPU kernel; irflow composes them and its
    fuse-batch-norm pass fuses the train-mode normalization and relu.
    """
    out = batch_normalization(
        inputs, axis, momentum, epsilon, center, scale, beta_initializer, gamma_initializer, beta_regularizer,
        gamma_regularizer, moving_mean_initializer, moving_variance_initializer, trainable, training, name,
        gamma_name, beta_name, moving_mean_name, moving_variance_name,
    )  # fmt: skip
    if addend is not None:
        out = out + addend
    return math.relu(out)


def batch_normalization_relu(
    inputs: Blob,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 0.001,
    center: bool = True,
    scale: bool = True,
    beta_initializer: dict[str, Any] | None = None,
    gamma_initializer: dict[str, Any] | None = None,
    beta_regularizer: object = None,
    gamma_regularizer: object = None,
    moving_mean_initializer: dict[str, Any] | None = None,
    moving_variance_initializer: dict[str, Any] | None = None,
    trainable: bool = True,
    training: bool = True,
    name: str | None = None,
) -> Blob:
    """relu(batch_normalization(inputs)): batch_normalization_add_relu without an addend."""
    return batch_normalization_add_relu(
        inputs, None, axis, momentum, epsilon, center, scale, beta_initializer, gamma_initializer, beta_regularizer,
        gamma_regularizer, moving_mean_initializer, moving_variance_initializer, trainable, training, name,
    )  # fmt: skip


def layer_norm(
    inputs: Blob,
    center: bool = True,
    scale: bool = True,
    trainable: bool = True,
    begin_norm_axis: int = 1,
    begin_params_axis: int = -1,
    epsilon: float = 1e-5,
    name: str | None = None,
) -> Blob:
    """flow.nn.layer_norm with `<name>-gamma` (ones) and `<name>-beta` (zeros) as its gamma and beta.

    Both have the shape `inputs.shape[begin_params_axis:]`. Without a `name`, the layer is
    "LayerNorm_<i>" by its order in the job.
    """
    what = "flow.layers.layer_norm"
    trace = current(what)
    params = layer_norm_params(inputs, begin_norm_axis, begin_params_axis, epsilon, what)
    name = name or trace.unique_name("LayerNorm")

    def variable(suffix: str, value: float) -> Blob:
        return get_variable(f"{name}-{suffix}", shape=params, dtype=inputs.dtype, trainable=trainable,
                            initializer=initializers.constant_initializer(value))

    gamma = variable("gamma", 1.0) if scale else None
    beta = variable("beta", 0.0) if center else None
    return nn_layer_norm(inputs, gamma, beta, begin_norm_axis, begin_params_axis, epsilon)


def layer_norm_grad(dy: Blob, x: Blob, mean: Blob, inv_variance: Blob, begin_norm_axis: int = 1,
                    name: str = "LayerNormGrad") -> Blob:  # fmt: skip
    """flow.layers.layer_norm_grad: the gradient of a layer normalization (without gamma) with respect to x,
    from its per-instance `mean` and `inv_variance` (1 / sqrt(variance + epsilon), shape x.shape[:begin_norm_axis]):
    inv_variance (dy - mean(dy) - x_hat mean(dy x_hat)) over the normalized axes, OneFlow's op composed."""
    what = "flow.layers.layer_norm_grad"
    begin, kept = _instances(x, begin_norm_axis, what)
    for label, blob in (("dy", dy), ("mean", mean), ("inv_variance", inv_variance)):
        want = x.shape if label == "dy" else x.shape[:begin]
        if not isinstance(blob, Blob) or blob.shape != want:
            fail(f"{what}: {label} must be a Blob of shape {want}, got {blob!r}")
    scale = reshape(inv_variance, kept)
    x_hat = (x - reshape(mean, kept)) * scale
    axes = list(range(begin, x.ndim))
    centered = dy - math.reduce_mean(dy, axes, keepdims=True)
    return math.multiply(scale, centered - x_hat * math.reduce_mean(dy * x_hat, axes, keepdims=True), name)


def layer_norm_param_grad(dy: Blob, norm: Blob, gamma: Blob, begin_params_axis: int = -1,
                          name: str = "LayerNormParamGrad") -> tuple[Blob, Blob, Blob]:  # fmt: skip
    """flow.layers.layer_norm_param_grad: from dy and the normalized input (norm), the gradients with respect to
    norm (dy gamma), beta (dy summed over the axes before begin_params_axis) and gamma (dy norm summed so)."""
    what = "flow.layers.layer_norm_param_grad"
    begin, _ = _instances(dy, begin_params_axis, what)
    for label, blob, want in (("norm", norm, dy.shape), ("gamma", gamma, dy.shape[begin:])):
        if not isinstance(blob, Blob) or blob.shape != want:
            fail(f"{what}: {label} must be a Blob of shape {want}, got {blob!r}")
    leading = list(range(begin))
    return dy * gamma, math.reduce_sum(dy, leading), math.reduce_sum(dy * norm, leading)


def _instances(x: object, axis: int, what: str) -> tuple[int, tuple[int, ...]]:
    """`axis` (where the normalized or parameter axes begin) as an index >= 1, and x's shape with those axes 1."""
    if not isinstance(x, Blob):
        fail(f"{what}: expected a Blob, got {type(x).__name__} {x!r}")
    if not dtypes.is_int(axis) or not -x.ndim < axis < x.ndim or axis % x.ndim == 0:
        fail(f"{what}: the begin axis must be in [1, {x.ndim}) (negative from the end), got {axis!r}")
    begin = axis % x.ndim
    return begin, x.shape[:begin] + (1,) * (x.ndim - begin)


def _assign(variable: Blob, value: Blob, what: str) -> None:
    """job.assign of a moving statistic: `value` is (1, C, 1, ...) like the view, the variable itself (C,).

    The variable is the Blob flow.get_variable returned, so its name carries
    the enclosing flow.scope.namespace prefixes."""
    append_op(job.AssignOp.create(operands=[variable.value, reshape(value, variable.shape).value]), what)
