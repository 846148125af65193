"""flow.nn: activations, softmax and losses, normalization, convolution, pooling, dropout, pixel shuffle.

Windows follow OneFlow/TensorFlow: `padding` is "VALID", "SAME" (= "SAME_UPPER",
the odd pad at the end), "SAME_LOWER" (at the start), or explicit per-axis pads
(an int or a (before, after) pair per axis of `data_format`; batch and channel
pads must be 0). SAME is resolved here to explicit pads, so the IR only knows
`pads = [top, bottom, left, right]`. NHWC inputs are transposed to NCHW and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from irflow.dialects import job
from irflow.dialects.bounds import dynamic_axes
from irflow.frontend.blob import Blob
from irflow.frontend.ctc import ctc_greedy_decoder  # noqa: F401  (flow.nn's)
from irflow.frontend import dtypes, initializers, math
from irflow.frontend.math import _mask, _softplus_tail, multiply
from irflow.frontend.math import relu  # noqa: F401  (flow.nn.relu is flow.math.relu)
from irflow.frontend.math import fused_scale_tril, tril  # noqa: F401  (flow.nn's are flow.math's)
from irflow.frontend.ops import cast, expand_dims, one_hot, one_of, reshape, squeeze, transpose, where
from irflow.frontend.locations import fail
from irflow.frontend.tracing import build, current, published
from irflow.frontend.variables import get_variable
from irflow.frontend.volumes import avg_pool3d, conv3d, max_pool3d  # noqa: F401  (flow.nn's)
from irflow.frontend.windows import pair, window_pads

_NCHW_TO_NHWC = [0, 2, 3, 1]
_NHWC_TO_NCHW = [0, 3, 1, 2]


def softmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    return build(job.SoftmaxOp, [logits], None, name, "flow.nn.softmax", axis=-1 if axis is None else int(axis))


def log_softmax(logits: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    return build(job.LogSoftmaxOp, [logits], None, name, "flow.nn.log_softmax", axis=-1 if axis is None else int(axis))


logsoftmax = log_softmax  # OneFlow 0.x's name; log_softmax is its later one


def softmax_grad(y: Blob, dy: Blob, axis: int | None = None, name: str | None = None) -> Blob:
    """flow.nn.softmax_grad: softmax's backward from its output y and the gradient dy, along `axis`."""
    return build(job.SoftmaxGradOp, [dy, y], None, name, "flow.nn.softmax_grad", axis=-1 if axis is None else int(axis))


def fused_self_attention_query_mul_key_and_value(x: Blob, head_size: int, alpha: float = 1.0,
                                                  name: str | None = None) -> tuple[Blob, Blob]:  # fmt: skip
    """OneFlow's GPT attention head: x (seq, batch, heads * 3 * head_size) holds each head's query, key and
    value side by side, (seq, batch, heads, 3, head_size); returns alpha q k^T (batch, heads, seq, seq) and
    the values (batch, heads, seq, head_size). OneFlow's one kernel, composed here of a reshape, slices,
    transposes and a batched matmul, so its gradient and SBP are theirs."""
    what = "flow.nn.fused_self_attention_query_mul_key_and_value"
    if not isinstance(x, Blob) or x.ndim != 3:
        fail(f"{what}: x must be a (seq, batch, hidden) Blob, got {x!r}")
    if not dtypes.is_int(head_size) or head_size < 1 or x.shape[2] % (3 * head_size):
        fail(f"{what}: head_size must be a positive int dividing x's hidden size {x.shape[2]} by 3 heads' worth, "
             f"got {head_size!r}")  # fmt: skip
    if not dtypes.is_number(alpha):
        fail(f"{what}: alpha must be a number, got {alpha!r}")
    seq, batch, hidden = x.shape
    parts = reshape(x, (seq, batch, hidden // (3 * head_size), 3, head_size))
    query, key, value = (transpose(parts[:, :, :, i], [1, 2, 0, 3]) for i in range(3))  # (batch, heads, seq, head)
    scores = build(job.MatmulOp, [query, key], None, None, what, transpose_a=False, transpose_b=True)
    return multiply(scores, float(alpha), name) if alpha != 1.0 else scores, value


def sparse_softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Per-sample cross entropy of int labels (batch,) against logits (batch, classes)."""
    return build(job.SparseSoftmaxCrossEntropyOp, [logits, labels], None, name, "flow.nn.sparse_softmax_cross_entropy_with_logits")


def distributed_sparse_softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """sparse_softmax_cross_entropy_with_logits for logits split over their classes (model parallelism).

    OneFlow picks a classes-split kernel here; in irflow the compiler chooses the SBP
    (docs/sbp.md), so this is the same op with the same result.
    """
    return sparse_softmax_cross_entropy_with_logits(labels, logits, name)


def sparse_cross_entropy(labels: Blob, prediction: Blob, name: str | None = None) -> Blob:
    """-log(prediction[i, labels[i]]) per sample, of probabilities (batch, classes) and int labels (batch,).

    The label's probability is picked by a one-hot product, so a label outside [0, classes)
    picks 0 and gives inf (OneFlow's kernel reads out of bounds there).
    """
    what = "flow.nn.sparse_cross_entropy"
    _require_float(prediction, what, "prediction")
    if not isinstance(labels, Blob) or labels.shape != prediction.shape[:-1]:
        fail(f"{what}: labels must be a Blob of shape {prediction.shape[:-1]} (prediction's without its classes), "
             f"got {labels!r}")
    hot = one_hot(labels, prediction.shape[-1], dtype=prediction.dtype)
    return math.negative(math.log(math.reduce_sum(hot * prediction, -1)), name)


def softmax_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Per-sample cross entropy of label distributions against logits, both (batch, classes)."""
    return build(job.SoftmaxCrossEntropyOp, [logits, labels], None, name, "flow.nn.softmax_cross_entropy_with_logits")


def leaky_relu(x: Blob, alpha: float = 0.2, name: str | None = None) -> Blob:
    """x where x > 0, alpha * x elsewhere; the gradient at 0 is alpha, as OneFlow's and PyTorch's kernels have it.

    x times a factor of 1 or alpha picked by x > 0: exact on both sides for any alpha, and
    the factor is the gradient.
    """
    what = "flow.nn.leaky_relu"
    _require_float(x, what)
    return _leaky(x, _require_number(alpha, "alpha", what), name)


def _leaky(x: Blob, alpha: float | Blob, name: str | None) -> Blob:
    """x times 1 where x > 0 and alpha elsewhere (a number, or a Blob broadcast against x: flow.layers.prelu)."""
    positive = _mask(math.greater(x, 0.0), x)
    return multiply(x, positive + (1.0 - positive) * alpha, name)


def _require_float(x: Blob, what: str, label: str = "x") -> None:
    if not isinstance(x, Blob) or not x.dtype.is_floating_point:
        fail(f"{what}: {label} must be a floating-point Blob, got {x!r}")


def _require_number(value: object, label: str, what: str) -> float:
    if not dtypes.is_number(value):
        fail(f"{what}: {label} must be a number, got {value!r}")
    return float(value)


def hardtanh(x: Blob, min_val: float = -1.0, max_val: float = 1.0, name: str | None = None) -> Blob:
    """min_val below min_val, max_val above max_val, x between; the gradient is 0 at both bounds.

    As maximum(min_val, x) then minimum(max_val, .): the bounds come first, and a tie gives the
    gradient to the first operand, so x's is 0 where it equals a bound (OneFlow's and PyTorch's
    choice; flow.math.clip_by_value passes it there).
    """
    return _hardtanh(x, min_val, max_val, name, "flow.nn.hardtanh")


def _hardtanh(x: Blob, min_val: object, max_val: object, name: str | None, what: str) -> Blob:
    _require_float(x, what)
    low, high = _require_number(min_val, "min_val", what), _require_number(max_val, "max_val", what)
    if not low < high:
        fail(f"{what}: min_val must be below max_val, got {low} and {high}")
    return math.minimum(high, math.maximum(low, x), name)


def relu6(x: Blob, name: str | None = None) -> Blob:
    """hardtanh(x, 0, 6), as OneFlow defines it: the gradient is 0 at 0 and at 6."""
    return _hardtanh(x, 0.0, 6.0, name, "flow.nn.relu6")


def hardsigmoid(x: Blob, name: str | None = None) -> Blob:
    """relu6(x + 3) / 6: 0 up to -3, 1 from 3, linear between; the gradient is 0 at -3 and 3 (OneFlow's, PyTorch's)."""
    what = "flow.nn.hardsigmoid"
    _require_float(x, what)
    return math.divide(_hardtanh(x + 3.0, 0.0, 6.0, None, what), 6.0, name)


def hardswish(x: Blob, name: str | None = None) -> Blob:
    """x * relu6(x + 3) / 6, PyTorch's formula; the gradient is 0 at -3 and 1 at 3 (OneFlow's, PyTorch's)."""
    what = "flow.nn.hardswish"
    _require_float(x, what)
    return math.divide(x * _hardtanh(x + 3.0, 0.0, 6.0, None, what), 6.0, name)


def swish(x: Blob, beta: float = 1.0, name: str | None = None) -> Blob:
    """x * sigmoid(beta * x) (PyTorch's silu for beta = 1)."""
    what = "flow.nn.swish"
    _require_float(x, what)
    return multiply(x, math.sigmoid(x * _require_number(beta, "beta", what)), name)


def mish(x: Blob, name: str | None = None) -> Blob:
    """x * tanh(softplus(x)); flow.math.softplus neither overflows nor loses its tail for large |x|."""
    _require_float(x, "flow.nn.mish")
    return multiply(x, math.tanh(math.softplus(x)), name)


def elu(x: Blob, alpha: float = 1.0, name: str | None = None) -> Blob:
    """x where x > 0, alpha * (e**x - 1) elsewhere; the gradient at 0 is alpha (OneFlow's and PyTorch's).

    As relu(x) + alpha * expm1(minimum(x, 0)): no e**x overflows for large x, expm1 keeps the
    digits near 0 that OneFlow's exp(x) - 1 loses, and minimum's tie gives x the gradient at 0.
    """
    what = "flow.nn.elu"
    _require_float(x, what)
    alpha = _require_number(alpha, "alpha", what)
    return math.add(relu(x), math.expm1(math.minimum(x, 0.0)) * alpha, name)


def sigmoid_cross_entropy_with_logits(labels: Blob, logits: Blob, name: str | None = None) -> Blob:
    """Elementwise cross entropy of probabilities `labels` against sigmoid(`logits`), both of one shape.

    As relu(z) * (1 - l) + (relu(z) - z) * l + log(1 + e**-|z|): no e**z overflows, and for
    labels in [0, 1] neither linear term subtracts nearly equal numbers, so a loss near 0
    keeps its digits (relu(z) - z * l would not). The gradient is sigmoid(z) - l for the
    logits, at 0 too (see flow.math.softplus), and -z for float labels. int32 and int8 labels
    (0/1 classes, as Wide&Deep feeds them; OneFlow's kernel takes both) are cast to the
    logits' dtype and take no gradient.
    """
    what = "flow.nn.sigmoid_cross_entropy_with_logits"
    blobs = isinstance(labels, Blob) and isinstance(logits, Blob)
    if blobs and labels.dtype in (dtypes.int32, dtypes.int8) and logits.dtype.is_floating_point:
        labels = cast(labels, logits.dtype)
    if not blobs or (labels.shape, labels.dtype) != (logits.shape, logits.dtype):
        fail(f"{what}: labels and logits must be Blobs of one shape and dtype (or int32/int8 labels), "
             f"got {labels!r} and {logits!r}")
    positive = relu(logits)
    linear = positive * (1.0 - labels) + (positive - logits) * labels
    return math.add(linear, _softplus_tail(logits), name)


def moments(
    x: Blob, axes: int | Sequence[int] | None, keepdims: bool = False, name: str | None = None
) -> tuple[Blob, Blob]:
    """(mean, variance) of `x` over `axes`: flow.math.reduce_mean and flow.math.reduce_variance."""
    return math.reduce_mean(x, axes, keepdims), math.reduce_variance(x, axes, keepdims)


def batch_normalization(
    x: Blob,
    mean: Blob,
    variance: Blob,
    offset: Blob | None = None,
    scale: Blob | None = None,
    variance_epsilon: float = 1e-05,
    axis: int = 1,
    name: str | None = None,
) -> Blob:
    """(x - mean) / sqrt(variance + variance_epsilon) * scale + offset, with statistics given (no variables).

    `mean`, `variance`, `offset` and `scale` are 1-D along `axis` of x (1 for NCHW), or of
    x's rank and broadcast against it, as OneFlow's CPU path takes them. The gradient reaches
    all five.
    """
    what = "flow.nn.batch_normalization"
    _require_float(x, what)
    epsilon = _require_number(variance_epsilon, "variance_epsilon", what)
    if not dtypes.is_int(axis) or not -x.ndim <= axis < x.ndim:
        fail(f"{what}: axis must be an int in [{-x.ndim}, {x.ndim}), got {axis!r}")
    axis = int(axis) % x.ndim
    stat_shape = tuple(x.shape[axis] if a == axis else 1 for a in range(x.ndim))

    def along_axis(label: str, value: Blob) -> Blob:
        if isinstance(value, Blob) and value.shape == (x.shape[axis],):
            return reshape(value, stat_shape)
        if isinstance(value, Blob) and value.ndim == x.ndim:
            return value
        fail(f"{what}: {label} must be a Blob of shape {(x.shape[axis],)} (axis {axis} of x {x.shape}) or of "
             f"x's rank, got {value!r}")

    inv_std = math.rsqrt(along_axis("variance", variance) + epsilon)
    scale = None if scale is None else along_axis("scale", scale)
    offset = None if offset is None else along_axis("offset", offset)
    return _scale_shift(x - along_axis("mean", mean), inv_std, scale, offset, name)


def layer_norm(
    inputs: Blob,
    gamma: Blob | None = None,
    beta: Blob | None = None,
    begin_norm_axis: int = 1,
    begin_params_axis: int = -1,
    epsilon: float = 1e-05,
    name: str | None = None,
) -> Blob:
    """Normalize each sample over the axes from `begin_norm_axis` on, then times `gamma` and plus `beta`.

    (x - mean) / sqrt(variance + epsilon) with the population variance, as OneFlow's CPU
    path composes it from flow.nn.moments; `gamma` and `beta` (optional) have the shape
    `inputs.shape[begin_params_axis:]` and broadcast over the leading axes.
    flow.layers.layer_norm is this with variables for gamma and beta.
    """
    what = "flow.nn.layer_norm"
    params = layer_norm_params(inputs, begin_norm_axis, begin_params_axis, epsilon, what)
    for label, value in (("gamma", gamma), ("beta", beta)):
        if value is not None and (not isinstance(value, Blob) or value.shape != params):
            fail(f"{what}: {label} must be None or a Blob of shape {params} (inputs.shape[{begin_params_axis}:]), "
                 f"got {value!r}")
    mean, variance = moments(inputs, list(range(begin_norm_axis % inputs.ndim, inputs.ndim)), keepdims=True)
    return _scale_shift(inputs - mean, math.rsqrt(variance + epsilon), gamma, beta, name)


def _scale_shift(centered: Blob, inv_std: Blob, scale: Blob | None, offset: Blob | None, name: str | None) -> Blob:
    """centered * inv_std * scale + offset (each optional), the user's name on the last op."""
    if scale is not None:
        inv_std = inv_std * scale
    if offset is None:
        return multiply(centered, inv_std, name)
    return math.add(centered * inv_std, offset, name)


def layer_norm_params(
    inputs: Blob, begin_norm_axis: object, begin_params_axis: object, epsilon: object, what: str
) -> tuple[int, ...]:
    """The shape of layer norm's gamma and beta, `inputs.shape[begin_params_axis:]`, once the arguments are checked."""
    _require_float(inputs, what, "inputs")
    for arg, axis in (("begin_norm_axis", begin_norm_axis), ("begin_params_axis", begin_params_axis)):
        if not dtypes.is_int(axis) or not -inputs.ndim <= axis < inputs.ndim:
            fail(f"{what}: {arg} {axis!r} is out of range for a Blob of shape {inputs.shape}")
    if not dtypes.is_number(epsilon) or not epsilon > 0:
        fail(f"{what}: epsilon must be positive, got {epsilon!r}")
    return inputs.shape[int(begin_params_axis):]


def GroupNorm(  # noqa: N802
    x: Blob, num_groups: int = 32, eps: float = 1e-05, affine: bool = True, name: str | None = None
) -> Blob:
    """Normalize x (N, C, ...) per sample over groups of C / num_groups channels, then scale and shift each channel.

    OneFlow 0.x's function, not a module: each group's channels with all their other axes
    share one mean and variance (flow.nn.moments), eps is added to the variance, and with
    `affine` the function makes its own variables `<name>_gamma` (ones) and `<name>_beta`
    (zeros) of shape (1, C, 1), as OneFlow names and shapes them. Without a `name`, it is
    "GroupNorm_<i>" by its order in the job.
    """
    what = "flow.nn.GroupNorm"
    _require_float(x, what)
    if x.ndim < 3:
        fail(f"{what}: x must be (N, C, ...) of rank >= 3, got shape {x.shape}")
    if not dtypes.is_int(num_groups) or num_groups < 1 or x.shape[1] % num_groups:
        fail(f"{what}: num_groups must be a positive int that divides the {x.shape[1]} channels, got {num_groups!r}")
    return _group_norm(x, int(num_groups), eps, affine, name or current(what).unique_name("GroupNorm"), what)


def _instance_norm(rank: int, layout: str) -> Any:
    what, prefix = f"flow.nn.InstanceNorm{rank - 2}d", f"InstanceNorm{rank - 2}D"

    def instance_norm(x: Blob, eps: float = 1e-05, affine: bool = True, name: str | None = None) -> Blob:
        _require_float(x, what)
        if x.ndim != rank:
            fail(f"{what}: x must be rank {rank} ({layout}), got shape {x.shape}")
        return _group_norm(x, x.shape[1], eps, affine, name or current(what).unique_name(prefix), what)

    doc = (
        f"{what}(x, eps=1e-05, affine=True, name=None): normalize each sample's channels of x ({layout}) over their "
        f"{layout[2:]} axes; GroupNorm with one group per channel, its variables `<name>_gamma` and `<name>_beta` "
        f"of shape (1, C, 1). Without a `name`, it is \"{prefix}_<i>\" by its order in the job."
    )
    return published(instance_norm, what, doc)


InstanceNorm1d = _instance_norm(3, "NCL")
InstanceNorm2d = _instance_norm(4, "NCHW")
InstanceNorm3d = _instance_norm(5, "NCDHW")


def _group_norm(x: Blob, groups: int, eps: object, affine: object, name: str, what: str) -> Blob:
    """x (N, C, ...) viewed as (N, groups, C / groups, rest), normalized over its last two axes per sample and group.

    The variables (1, C, 1), as OneFlow makes them, are viewed as (1, groups, C / groups, 1), so
    that _scale_shift folds gamma into each group's 1 / std before the one product with x.
    """
    epsilon = _require_number(eps, "eps", what)
    if not epsilon >= 0:
        fail(f"{what}: eps must be >= 0, got {epsilon}")
    if not isinstance(affine, bool):
        fail(f"{what}: affine must be a bool, got {affine!r}")
    batch, channels = x.shape[:2]
    grouped = reshape(x, (batch, groups, channels // groups, -1))
    mean, variance = moments(grouped, [2, 3], keepdims=True)
    gamma = beta = None
    if affine:

        def variable(suffix: str, initializer: dict[str, Any]) -> Blob:
            v = get_variable(f"{name}_{suffix}", shape=(1, channels, 1), dtype=x.dtype, initializer=initializer,
                             trainable=True)  # fmt: skip
            return reshape(v, (1, groups, channels // groups, 1))

        gamma = variable("gamma", initializers.ones_initializer())
        beta = variable("beta", initializers.zeros_initializer())
    return reshape(_scale_shift(grouped - mean, math.rsqrt(variance + epsilon), gamma, beta, None), x.shape)


def PixelShuffle(input: Blob, upscale_factor: int, name: str | None = None) -> Blob:  # noqa: A002, N802
    """(B, C * r * r, H, W) -> (B, C, H * r, W * r): PixelShufflev2 with one factor r for both axes."""
    return _pixel_shuffle(input, upscale_factor, upscale_factor, name, "flow.nn.PixelShuffle")


def PixelShufflev2(  # noqa: N802
    input: Blob, h_upscale_factor: int, w_upscale_factor: int, name: str | None = None  # noqa: A002
) -> Blob:
    """(B, C * h * w, H, W) -> (B, C, H * h, W * w) for NCHW input, h and w the two upscale factors.

    Input channel c * h * w + i * w + j lands on the pixels (y * h + i, x * w + j) of output
    channel c, as PyTorch's pixel_shuffle for h = w: a reshape, a transpose and a reshape, so
    the gradient is the inverse shuffle.
    """
    return _pixel_shuffle(input, h_upscale_factor, w_upscale_factor, name, "flow.nn.PixelShufflev2")


def _pixel_shuffle(x: Blob, h: object, w: object, name: str | None, what: str) -> Blob:
    if not isinstance(x, Blob) or x.ndim != 4:
        fail(f"{what}: input must be a rank-4 Blob (NCHW), got {x!r}")
    if not (dtypes.is_int(h) and dtypes.is_int(w) and h > 0 and w > 0):
        fail(f"{what}: upscale factors must be positive ints, got {h!r} and {w!r}")
    batch, channels, height, width = x.shape
    if channels % (h * w):
        fail(f"{what}: the {channels} channels of input {x.shape} are not divisible by the upscale factors' "
             f"product {h} * {w}")
    blocks = reshape(x, (batch, channels // (h * w), h, w, height, width))
    shuffled = transpose(blocks, [0, 1, 4, 2, 5, 3])
    return reshape(shuffled, (batch, channels // (h * w), height * h, width * w), name)


def bias_add(value: Blob, bias: Blob, data_format: str | None = None, name: str | None = None) -> Blob:
    """Add a 1-D bias along the channel axis: 1 for "NC..." (and by default), the last for "N...C"."""
    if data_format is None or data_format.startswith("NC"):
        axis = 1
    elif data_format.startswith("N") and data_format.endswith("C"):
        axis = -1
    else:
        fail(f"flow.nn.bias_add: data_format must be like 'NCHW' or 'NHWC', got {data_format!r}")
    axis = axis if value.ndim > 1 else 0
    return build(job.BiasAddOp, [value, bias], None, name, "flow.nn.bias_add", axis=axis)


def fused_bias_add_gelu(value: Blob, bias: Blob, data_format: str | None = None, name: str | None = None) -> Blob:
    """flow.math.gelu(flow.nn.bias_add(value, bias, data_format)); OneFlow's one CUDA kernel for the pair.

    irflow composes the two, so gradients and SBP are theirs.
    """
    return math.gelu(bias_add(value, bias, data_format), name)


def fused_bias_add_dropout(
    value: Blob,
    bias: Blob,
    data_format: str | None = None,
    rate: float = 0.0,
    noise_shape: Sequence[int] | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> Blob:
    """flow.nn.dropout(flow.nn.bias_add(value, bias, data_format), rate, noise_shape, seed), composed."""
    return dropout(bias_add(value, bias, data_format), rate, noise_shape, seed, name)


def _channels_last(data_format: str, what: str) -> bool:
    if data_format.upper() not in ("NCHW", "NHWC"):
        fail(f"{what}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    return data_format.upper() == "NHWC"


def conv2d(
    input: Blob,  # noqa: A002
    filters: Blob,
    strides: int | Sequence[int],
    padding: str | Sequence[Any],
    bias: Blob | None = None,
    data_format: str = "NCHW",
    dilations: int | Sequence[int] | None = None,
    groups: int = 1,
    name: str | None = None,
) -> Blob:
    """2-D convolution with weight `filters` (out, in/groups, kh, kw), or (out, kh, kw, in/groups) for NHWC.

    A 1-D `bias` of one value per output channel is added as flow.nn.bias_add
    adds it; the model zoo passes it positionally (`None`) before `data_format`.
    """
    what = "flow.nn.conv2d"
    out = _conv2d(input, filters, strides, padding, data_format, dilations, groups, name, what)
    if bias is None:
        return out
    channels = out.shape[3] if _channels_last(data_format, what) else out.shape[1]
    if not isinstance(bias, Blob) or bias.shape != (channels,):
        fail(f"{what}: bias must be 1-D with one value per output channel ({channels}), got {bias!r}")
    return bias_add(out, bias, data_format, name=f"{name}_bias_add" if name else None)


def _conv2d(
    input: Blob,  # noqa: A002
    filters: Blob,
    strides: int | Sequence[int],
    padding: str | Sequence[Any],
    data_format: str,
    dilations: int | Sequence[int] | None,
    groups: int,
    name: str | None,
    what: str,
) -> Blob:
    last = _channels_last(data_format, what)
    if last:
        input, filters = transpose(input, _NHWC_TO_NCHW), transpose(filters, _NHWC_TO_NCHW)
    if input.ndim != 4 or filters.ndim != 4:
        fail(f"{what}: input and filters must be rank 4, got {input.shape} and {filters.shape}")
    s = pair(strides, what, "strides")
    d = pair(dilations if dilations is not None else 1, what, "dilations")
    kernel = (filters.shape[2], filters.shape[3])
    pads = window_pads(padding, (input.shape[2], input.shape[3]), kernel, s, d, last, what)
    out = build(job.Conv2DOp, [input, filters], None, name, what, strides=s, pads=pads, dilations=d, groups=int(groups))
    return transpose(out, _NCHW_TO_NHWC) if last else out


_ONE_D = {"NCW": ("NCHW", 2), "NWC": ("NHWC", 1)}
"""A 1-D format, its 2-D one and where the height-1 axis goes in both the input and the weight."""


def conv1d(
    input: Blob,  # noqa: A002
    filters: Blob,
    strides: int | Sequence[int],
    padding: str | Sequence[Any],
    data_format: str = "NCW",
    dilations: int | Sequence[int] | None = None,
    groups: int = 1,
    name: str | None = None,
) -> Blob:
    """1-D convolution with weight `filters` (out, in/groups, k), or (out, k, in/groups) for NWC.

    flow.nn.conv2d over a height-1 image, so autodiff, SBP and the kernels are conv2d's.
    `padding` is a string or one pad per axis of `data_format` (3 entries). irflow also
    takes groups > 1 with NWC (OneFlow refuses them).
    """
    what = "flow.nn.conv1d"
    two_d, axis = _one_d(data_format, what)
    if not isinstance(input, Blob) or not isinstance(filters, Blob) or input.ndim != 3 or filters.ndim != 3:
        fail(f"{what}: input and filters must be rank-3 Blobs, got {input!r} and {filters!r}")
    s, d = single(strides, what, "strides"), single(dilations if dilations is not None else 1, what, "dilations")
    image, weight = expand_dims(input, axis), expand_dims(filters, axis)
    out = _conv2d(image, weight, (1, s), _padding_2d(padding, axis, what), two_d, (1, d), groups, None, what)
    return squeeze(out, [axis], name)


def _one_d(data_format: object, what: str) -> tuple[str, int]:
    if not isinstance(data_format, str) or data_format.upper() not in _ONE_D:
        fail(f"{what}: data_format must be 'NCW' or 'NWC', got {data_format!r}")
    return _ONE_D[data_format.upper()]


def _padding_2d(padding: str | Sequence[Any], axis: int, what: str) -> str | list[Any]:
    """A 1-D window's `padding` for its height-1 image: a string as it is, or the 3 pads with 0 for the height."""
    if isinstance(padding, str):
        return padding
    if not isinstance(padding, (list, tuple)) or len(padding) != 3:
        fail(f"{what}: padding must be a string or one pad per axis (3 entries), got {padding!r}")
    return [*padding[:axis], 0, *padding[axis:]]


def single(value: int | Sequence[int], what: str, arg: str) -> int:
    """A 1-D window's size, stride or dilation: an int or a list of one int."""
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if not dtypes.is_int(value):
        fail(f"{what}: {arg} must be an int or a list of one int, got {value!r}")
    return int(value)


def conv2d_transpose(
    value: Blob | None = None,
    filter: Blob | None = None,  # noqa: A002
    output_shape: Sequence[int] | None = None,
    strides: int | Sequence[int] | None = None,
    padding: str | Sequence[Any] = "VALID",
    data_format: str = "NCHW",
    name: str | None = None,
    input: Blob | None = None,  # noqa: A002
    filters: Blob | None = None,
    dilations: int | Sequence[int] | None = None,
) -> Blob:
    """The transposed convolution: the input-gradient of flow.nn.conv2d, as job.conv2d_grad_input.

    `value` (or `input`) is (n, in, h, w) and `filter` (or `filters`) (in, out, kh, kw), or
    (in, kh, kw, out) for NHWC: the weight of the conv2d that maps `output_shape` back onto
    the input. `output_shape` must be one that conv2d, with these strides and padding, maps
    to the input's size; the rows it never reads are zeros (OneFlow's output_padding).
    SAME crops the odd row at the end, as OneFlow's; irflow also takes SAME_LOWER and
    explicit pads (as conv2d), and dilations with NHWC.
    """
    what = "flow.nn.conv2d_transpose"
    x, w, last = _transpose_operands(value, input, filter, filters, data_format, what)
    shape = dtypes.positive_sizes(output_shape) if output_shape is not None else None
    if shape is None or len(shape) != 4:
        fail(f"{what}: output_shape must be four positive ints, got {output_shape!r}")
    if last:
        shape = tuple(shape[i] for i in _NHWC_TO_NCHW)
    s = pair(strides, what, "strides")
    d = pair(dilations if dilations is not None else 1, what, "dilations")
    same = isinstance(padding, str) and padding.upper() == "SAME"  # OneFlow's deconv crops the odd row at the end
    pads = window_pads("SAME_UPPER" if same else padding, shape[2:], (w.shape[2], w.shape[3]), s, d, last, what)
    return _transposed(x, w, shape, s, d, pads, f"padding {padding!r}", last, name, what)


def torch_conv2d_transpose(
    value: Blob | None = None,
    filter: Blob | None = None,  # noqa: A002
    output_padding: int | Sequence[int] | None = None,
    strides: int | Sequence[int] | None = None,
    padding_needed: Sequence[int] | None = None,
    data_format: str = "NCHW",
    name: str | None = None,
    input: Blob | None = None,  # noqa: A002
    filters: Blob | None = None,
    dilations: int | Sequence[int] | None = None,
) -> Blob:
    """flow.nn.conv2d_transpose sized as PyTorch's: `padding_needed` (two even ints) rows cut, half at each end.

    Each spatial size is (in - 1) * stride + (k - 1) * dilation + 1 - padding_needed +
    output_padding, the extra rows at the end (zeros), as torch.nn.ConvTranspose2d with
    padding = padding_needed / 2.
    """
    what = "flow.nn.torch_conv2d_transpose"
    x, w, last = _transpose_operands(value, input, filter, filters, data_format, what)
    s = pair(strides, what, "strides")
    d = pair(dilations if dilations is not None else 1, what, "dilations")
    cut = pair(padding_needed, what, "padding_needed") if padding_needed is not None else None
    if cut is None or min(cut) < 0 or cut[0] % 2 or cut[1] % 2:
        fail(f"{what}: padding_needed must be two even non-negative ints, got {padding_needed!r}")
    extra = pair(output_padding if output_padding is not None else 0, what, "output_padding")
    if min(extra) < 0:
        fail(f"{what}: output_padding must be non-negative, got {output_padding!r}")
    spatial = [(x.shape[2 + i] - 1) * s[i] + (w.shape[2 + i] - 1) * d[i] + 1 - cut[i] + extra[i] for i in range(2)]
    if min(spatial) < 1:
        fail(f"{what}: padding_needed {list(cut)} leaves an empty output ({spatial})")
    pads = [cut[0] // 2, cut[0] // 2, cut[1] // 2, cut[1] // 2]
    shape = (x.shape[0], w.shape[1], *spatial)
    return _transposed(x, w, shape, s, d, pads, f"output_padding {list(extra)}", last, name, what)


def _transpose_operands(
    value: object, input: object, filter: object, filters: object, data_format: str, what: str  # noqa: A002
) -> tuple[Blob, Blob, bool]:
    """A transposed convolution's input and weight, as NCHW rank-4 Blobs, and whether they came as NHWC."""
    x, w = _either(value, input, "value", "input", what), _either(filter, filters, "filter", "filters", what)
    last = _channels_last(data_format, what)
    if x.ndim != 4 or w.ndim != 4:
        fail(f"{what}: input and filter must be rank 4, got {x.shape} and {w.shape}")
    if last:
        x, w = transpose(x, _NHWC_TO_NCHW), transpose(w, _NHWC_TO_NCHW)
    return x, w, last


def _transposed(
    x: Blob,
    w: Blob,
    shape: tuple[int, ...],
    s: tuple[int, int],
    d: tuple[int, int],
    pads: list[int],
    padding: str,
    last: bool,
    name: str | None,
    what: str,
) -> Blob:
    """job.conv2d_grad_input of NCHW `x` and `w` to `shape`, once conv2d is known to map `shape` back onto x."""
    seen = " (as NCHW)" if last else ""
    if (x.shape[0], x.shape[1], w.shape[1]) != (shape[0], w.shape[0], shape[1]):
        fail(f"{what}: input {x.shape} and filter {w.shape} (in, out, kh, kw) do not give the output {shape}{seen}")
    kernel = (w.shape[2], w.shape[3])
    reached = tuple(job.window_out(shape[2 + i], kernel[i], s[i], *pads[2 * i : 2 * i + 2], d[i]) for i in range(2))
    if reached != x.shape[2:]:
        fail(
            f"{what}: output_shape {shape} does not fit the input {x.shape}{seen}: "
            f"conv2d with strides {s} and {padding} maps its {shape[2:]} to {reached}"
        )
    result = job.tensor(shape, job.dtype_of(x.value.type))
    out = build(job.Conv2DGradInputOp, [x, w], result, name, what, strides=s, pads=pads, dilations=d)
    return transpose(out, _NCHW_TO_NHWC) if last else out


def _either(value: object, alias: object, arg: str, other: str, what: str) -> Blob:
    """`one_of` the two names, a Blob."""
    given = one_of(value, alias, arg, other, what)
    if not isinstance(given, Blob):
        fail(f"{what}: {arg if value is not None else other} must be a Blob, got {given!r}")
    return given


def _pool(op: type[job.JobOp], what: str) -> Any:
    def pool(
        input: Blob,  # noqa: A002
        ksize: int | Sequence[int],
        strides: int | Sequence[int],
        padding: str | Sequence[Any],
        data_format: str = "NCHW",
        name: str | None = None,
    ) -> Blob:
        return _pool2d(op, input, pair(ksize, what, "ksize"), pair(strides, what, "strides"), padding, data_format,
                       name, what)  # fmt: skip

    return published(pool, what, f"{what}(input, ksize, strides, padding, data_format='NCHW'); {op.__doc__ or ''}")


def _pool2d(
    op: type[job.JobOp],
    input: Blob,  # noqa: A002
    k: tuple[int, int],
    s: tuple[int, int],
    padding: str | Sequence[Any],
    data_format: str,
    name: str | None,
    what: str,
) -> Blob:
    last = _channels_last(data_format, what)
    if last:
        input = transpose(input, _NHWC_TO_NCHW)
    if input.ndim != 4:
        fail(f"{what}: input must be rank 4 ({data_format}), got {input.shape}")
    pads = window_pads(padding, (input.shape[2], input.shape[3]), k, s, (1, 1), last, what)
    out = build(op, [input], None, name, what, kernel=k, strides=s, pads=pads)
    return transpose(out, _NCHW_TO_NHWC) if last else out


max_pool2d = _pool(job.MaxPool2DOp, "flow.nn.max_pool2d")
avg_pool2d = _pool(job.AvgPool2DOp, "flow.nn.avg_pool2d")


def _pool1d(op: type[job.JobOp], what: str, default_format: str) -> Any:
    def pool(
        input: Blob,  # noqa: A002
        ksize: int | Sequence[int],
        strides: int | Sequence[int],
        padding: str | Sequence[Any],
        data_format: str = default_format,
        name: str | None = None,
    ) -> Blob:
        two_d, axis = _one_d(data_format, what)
        if not isinstance(input, Blob) or input.ndim != 3:
            fail(f"{what}: input must be a rank-3 Blob ({data_format}), got {input!r}")
        k, s = single(ksize, what, "ksize"), single(strides, what, "strides")
        image = expand_dims(input, axis)
        out = _pool2d(op, image, (1, k), (1, s), _padding_2d(padding, axis, what), two_d, None, what)
        return squeeze(out, [axis], name)

    doc = (
        f"{what}(input, ksize, strides, padding, data_format='{default_format}'): the 2-D pooling over a height-1 "
        "image. OneFlow 0.x declares it and raises NotImplementedError; irflow runs it."
    )
    return published(pool, what, doc)


max_pool1d = _pool1d(job.MaxPool2DOp, "flow.nn.max_pool1d", "NWC")
avg_pool1d = _pool1d(job.AvgPool2DOp, "flow.nn.avg_pool1d", "NCW")


def dropout(
    x: Blob,
    rate: float,
    noise_shape: Sequence[int] | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> Blob:
    """Zero elements with probability `rate` and scale the rest by 1/(1-rate) in train jobs; identity in predict jobs.

    Without a `seed`, the mask's seed is derived from the job and the op's name (`_keep_mask`).
    """
    what = "flow.nn.dropout"
    trace = current(what)
    _check_mask(x, rate, noise_shape, what)
    if trace.job_type != "train" or rate == 0.0:
        return x
    name = name or trace.unique_name("dropout")
    return multiply(x, _keep_mask(x, rate, seed, name, what), name)


def random_mask_like(
    like: Blob, rate: float, seed: int | None = None, noise_shape: Sequence[int] | None = None, name: str | None = None
) -> Blob:
    """An int8 Blob of `like`'s shape: 0 with probability `rate`, else 1 (the mask dropout multiplies by), in any job.

    Seeded as dropout's mask: without a `seed`, from the job and the op's name.
    """
    what = "flow.nn.random_mask_like"
    trace = current(what)
    if not isinstance(like, Blob):
        fail(f"{what}: like must be a Blob, got {like!r}")
    _check_mask(like, rate, noise_shape, what)
    name = name or trace.unique_name("RandomMaskLike")
    scaled = _keep_mask(like, rate, seed, name, what, dtypes.float32.element_type)
    return math.greater(scaled, 0.0, name)  # a comparison's int8 0/1


def _check_mask(x: Blob, rate: object, noise_shape: Sequence[int] | None, what: str) -> None:
    if noise_shape is not None:
        fail(f"{what}: noise_shape is not supported (the mask always has the input's shape {x.shape})")
    if not dtypes.is_number(rate) or not 0.0 <= rate < 1.0:
        fail(f"{what}: rate must be in [0, 1), got {rate!r}")


def _keep_mask(like: Blob, rate: float, seed: int | None, name: str, what: str, dtype: Any = None) -> Blob:
    """`<name>-mask`, a job.dropout_mask of `like`'s shape: 0 with probability `rate`, else 1/(1-rate); without a
    seed, the job's and the op's names make one (Trace.op_seed).

    The mask is drawn at the bound of a dynamic `like` (one generator, whatever each step's sizes) and its
    leading elements taken at like's actual sizes (job.unpin_size)."""
    if seed is None:
        seed = current(what).op_seed(name)
    mask_type = job.tensor(like.shape, dtype or like.value.type.element_type)
    mask = build(job.DropoutMaskOp, [], mask_type, f"{name}-mask", what, rate=float(rate), seed=int(seed))
    if dynamic := dynamic_axes(like.value.type):
        mask = build(job.UnpinSizeOp, [mask, like], None, None, what, axes=list(dynamic))
    return mask


# ----------------------------------------------------------------- losses
# OneFlow 0.x's flow.nn.L1Loss, MSELoss, ...: functions (not modules) of (input, target, ..., reduction, name).

_REDUCTIONS = ("none", "mean", "sum")


def _loss_inputs(what: str, reduction: object, **blobs: Blob) -> None:
    """Check a loss' arguments before it traces anything: a known reduction, float Blobs of one shape and dtype."""
    if not isinstance(reduction, str) or reduction not in _REDUCTIONS:  # `in` would compare a Blob by tracing ==
        fail(f"{what}: reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    (first, x), *others = blobs.items()
    _require_float(x, what, first)
    for label, other in others:
        if not isinstance(other, Blob) or (other.shape, other.dtype) != (x.shape, x.dtype):
            fail(f"{what}: {label} must be a Blob of {first}'s shape {x.shape} and dtype {x.dtype}, got {other!r}")


def _reduce_loss(loss: Blob, reduction: str, name: str | None) -> Blob:
    """'none': the elementwise loss; 'mean' / 'sum': over every element, to a scalar."""
    if reduction == "mean":
        return math.reduce_mean(loss, name=name)
    if reduction == "sum":
        return math.reduce_sum(loss, name=name)
    return loss


def L1Loss(input: Blob, target: Blob, reduction: str = "mean", name: str | None = None) -> Blob:  # noqa: A002, N802
    """|target - input|, reduced; the gradient is 0 where they are equal (as OneFlow's and PyTorch's)."""
    _loss_inputs("flow.nn.L1Loss", reduction, input=input, target=target)
    return _reduce_loss(math.abs(target - input), reduction, name)


def MSELoss(input: Blob, target: Blob, reduction: str = "mean", name: str | None = None) -> Blob:  # noqa: A002, N802
    """(target - input)**2, reduced."""
    _loss_inputs("flow.nn.MSELoss", reduction, input=input, target=target)
    return _reduce_loss(math.squared_difference(target, input), reduction, name)


def BCELoss(  # noqa: N802
    input: Blob,  # noqa: A002
    target: Blob,
    weight: Blob | None = None,
    reduction: str = "mean",
    name: str | None = None,
) -> Blob:
    """-weight * (target * log(input) + (1 - target) * log(1 - input)), reduced; `input` holds probabilities.

    Each log is clamped at -100, as PyTorch's: a probability of exactly 0 or 1 gives a
    finite loss (OneFlow's gives NaN or inf). The log is taken of max(p, the dtype's
    smallest subnormal), so that no 1/0 reaches the gradient: where a log is clamped its
    gradient is 0, the derivative of the clamped loss (PyTorch's formula gives +-1e12 there).
    """
    what = "flow.nn.BCELoss"
    _loss_inputs(what, reduction, input=input, target=target, **_optional(weight=weight))
    loss = -(target * _clamped_log(input) + (1.0 - target) * _clamped_log(1.0 - input))
    return _reduce_loss(loss if weight is None else weight * loss, reduction, name)


def _clamped_log(p: Blob) -> Blob:
    """max(log(p), -100); log(tiny) < -100 in float32 and float64, so that max picks -100 where p <= e**-100."""
    tiny = float(np.finfo(p.dtype.np_dtype).smallest_subnormal)
    return math.maximum(math.log(math.maximum(p, tiny)), -100.0)


def _optional(**blobs: Blob | None) -> dict[str, Blob]:
    return {label: blob for label, blob in blobs.items() if blob is not None}


def BCEWithLogitsLoss(  # noqa: N802
    input: Blob,  # noqa: A002
    target: Blob,
    weight: Blob | None = None,
    pos_weight: Blob | None = None,
    reduction: str = "mean",
    name: str | None = None,
) -> Blob:
    """weight * (pos_weight * target * softplus(-input) + (1 - target) * softplus(input)), reduced; input: logits.

    That is -weight * (pos_weight * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x))),
    written as two terms that are never negative for t in [0, 1]: nothing cancels, and
    flow.math.softplus neither overflows nor loses e**x for large |x|. `pos_weight` has one
    entry per class (input.shape[-1]) and broadcasts over the other axes.
    """
    what = "flow.nn.BCEWithLogitsLoss"
    _loss_inputs(what, reduction, input=input, target=target, **_optional(weight=weight))
    positive = target * math.softplus(-input)
    if pos_weight is not None:
        classes = input.shape[-1:]
        if not isinstance(pos_weight, Blob) or (pos_weight.shape, pos_weight.dtype) != (classes, input.dtype):
            fail(f"{what}: pos_weight must be a Blob of shape {classes} (one weight per class) and dtype "
                 f"{input.dtype}, got {pos_weight!r}")
        positive = positive * pos_weight
    loss = positive + (1.0 - target) * math.softplus(input)
    return _reduce_loss(loss if weight is None else weight * loss, reduction, name)


def KLDivLoss(  # noqa: N802
    input: Blob,  # noqa: A002
    target: Blob,
    log_target: bool = False,
    reduction: str = "mean",
    name: str | None = None,
) -> Blob:
    """target * (log(target) - input), reduced; `input` holds log-probabilities. 'mean' is over every element.

    With `log_target`, the target holds log-probabilities too: e**target * (target - input).
    Otherwise the loss is 0 where target <= 0, as OneFlow documents (PyTorch: 0 at 0, NaN
    below); the log is taken of 1 there, so no 0 * log(0) reaches the value or a gradient.
    """
    what = "flow.nn.KLDivLoss"
    _loss_inputs(what, reduction, input=input, target=target)
    if log_target:
        return _reduce_loss(math.exp(target) * (target - input), reduction, name)
    positive = math.greater(target, 0.0)
    loss = target * (math.log(where(positive, target, 1.0)) - input)
    return _reduce_loss(where(positive, loss, 0.0), reduction, name)


def MarginRankingLoss(  # noqa: N802
    input1: Blob, input2: Blob, target: Blob, margin: float = 0.0, reduction: str = "mean", name: str | None = None
) -> Blob:
    """max(0, margin - target * (input1 - input2)), reduced; target (1 or -1) broadcasts against the inputs.

    At the bound the gradient passes, as clip_by_value's (OneFlow's flow.clip and PyTorch's clamp_min).
    """
    what = "flow.nn.MarginRankingLoss"
    _loss_inputs(what, reduction, input1=input1, input2=input2)
    margin = _require_number(margin, "margin", what)
    _require_float(target, what, "target")
    return _reduce_loss(math.clip_by_value(margin - target * (input1 - input2), 0.0), reduction, name)


def TripletMarginLoss(  # noqa: N802
    anchor: Blob,
    positive: Blob,
    negative: Blob,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-06,
    swap: bool = False,
    reduction: str = "mean",
    name: str | None = None,
) -> Blob:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) per row of (batch, features), reduced.

    d(a, b) is the p-norm of a - b + eps over axis 1, as OneFlow and PyTorch's pairwise
    distance take it. With `swap`, d(anchor, negative) is min(d(anchor, negative),
    d(positive, negative)), as PyTorch has it; OneFlow refuses swap=True.
    """
    what = "flow.nn.TripletMarginLoss"
    _loss_inputs(what, reduction, anchor=anchor, positive=positive, negative=negative)
    if anchor.ndim != 2:
        fail(f"{what}: anchor, positive and negative must be (batch, features), got shape {anchor.shape}")
    margin = _require_number(margin, "margin", what)
    p = _require_number(p, "p", what)
    eps = _require_number(eps, "eps", what)
    if not p > 0:
        fail(f"{what}: p must be positive, got {p}")

    def distance(a: Blob, b: Blob) -> Blob:
        if p == 2.0:
            return math.sqrt(math.reduce_sum(math.square(a - b + eps), 1))
        return math.pow(math.reduce_sum(math.pow(math.abs(a - b + eps), p), 1), 1.0 / p)

    far = distance(anchor, negative)
    if swap:
        far = math.minimum(far, distance(positive, negative))
    return _reduce_loss(math.clip_by_value(margin + distance(anchor, positive) - far, 0.0), reduction, name)
