"""flow.math: elementwise arithmetic, activations and reductions.

Some functions are compositions of the job dialect's ops (softplus, clip_by_value,
reduce_variance, ...), so autodiff, SBP inference and every backend take them as
they are. Where a composition must pick a branch per element, a comparison cast to
0/1 (`_mask`) selects: comparisons carry no gradient, so the selector does not either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from irflow.dialects import job
from irflow.frontend import dtypes
from irflow.frontend.blob import Blob
from irflow.frontend.ops import axis_index, cast, constant, constant_like, element_count, one_hot, operands, reshape, where
from irflow.frontend.ops import broadcast_to_compatible_with  # noqa: F401  (flow.math's too)
from irflow.frontend.locations import fail
from irflow.frontend.tracing import build, published


def _binary(op: type[job.JobOp], what: str) -> Any:
    def apply(x: Any, y: Any, name: str | None = None) -> Blob:
        a, b = operands(x, y, what)
        return build(op, [a, b], None, name, what)

    return published(
        apply, what, f"{what}(x, y): {op.__doc__}; numpy broadcasting, Python numbers take the Blob's dtype."
    )


def _unary(op: type[job.JobOp], what: str) -> Any:
    def apply(x: Blob, name: str | None = None) -> Blob:
        return build(op, [x], None, name, what)

    return published(apply, what, f"{what}(x): {op.__doc__}, elementwise.")


add = _binary(job.AddOp, "flow.math.add")
subtract = _binary(job.SubOp, "flow.math.subtract")
multiply = _binary(job.MulOp, "flow.math.multiply")
divide = _binary(job.DivOp, "flow.math.divide")
maximum = _binary(job.MaximumOp, "flow.math.maximum")
minimum = _binary(job.MinimumOp, "flow.math.minimum")
pow = _binary(job.PowOp, "flow.math.pow")  # noqa: A001
mod = _binary(job.FloorModOp, "flow.math.mod")
atan2 = _binary(job.Atan2Op, "flow.math.atan2")
equal = _binary(job.EqualOp, "flow.math.equal")
not_equal = _binary(job.NotEqualOp, "flow.math.not_equal")
less = _binary(job.LessOp, "flow.math.less")
less_equal = _binary(job.LessEqualOp, "flow.math.less_equal")
greater = _binary(job.GreaterOp, "flow.math.greater")
greater_equal = _binary(job.GreaterEqualOp, "flow.math.greater_equal")

negative = _unary(job.NegOp, "flow.math.negative")
exp = _unary(job.ExpOp, "flow.math.exp")
log = _unary(job.LogOp, "flow.math.log")
sqrt = _unary(job.SqrtOp, "flow.math.sqrt")
rsqrt = _unary(job.RsqrtOp, "flow.math.rsqrt")
square = _unary(job.SquareOp, "flow.math.square")
relu = _unary(job.ReluOp, "flow.math.relu")
sigmoid = _unary(job.SigmoidOp, "flow.math.sigmoid")
tanh = _unary(job.TanhOp, "flow.math.tanh")
gelu = _unary(job.GeluOp, "flow.math.gelu")
abs = _unary(job.AbsOp, "flow.math.abs")  # noqa: A001
sin = _unary(job.SinOp, "flow.math.sin")
cos = _unary(job.CosOp, "flow.math.cos")
floor = _unary(job.FloorOp, "flow.math.floor")
ceil = _unary(job.CeilOp, "flow.math.ceil")
round = _unary(job.RoundOp, "flow.math.round")  # noqa: A001
rint = _unary(job.RoundOp, "flow.math.rint")  # OneFlow's rint and round both round halves to even
sign = _unary(job.SignOp, "flow.math.sign")
log1p = _unary(job.Log1pOp, "flow.math.log1p")
expm1 = _unary(job.Expm1Op, "flow.math.expm1")
erf = _unary(job.ErfOp, "flow.math.erf")
erfc = _unary(job.ErfcOp, "flow.math.erfc")
tan = _unary(job.TanOp, "flow.math.tan")
asin = _unary(job.AsinOp, "flow.math.asin")
acos = _unary(job.AcosOp, "flow.math.acos")
atan = _unary(job.AtanOp, "flow.math.atan")
sinh = _unary(job.SinhOp, "flow.math.sinh")
cosh = _unary(job.CoshOp, "flow.math.cosh")
asinh = _unary(job.AsinhOp, "flow.math.asinh")
acosh = _unary(job.AcoshOp, "flow.math.acosh")
atanh = _unary(job.AtanhOp, "flow.math.atanh")
lgamma = _unary(job.LgammaOp, "flow.math.lgamma")  # its gradient is digamma, which OneFlow 0.x's kernel lacks
sigmoid_v2 = _unary(job.SigmoidOp, "flow.math.sigmoid_v2")  # OneFlow's second kernel of the same function
tanh_v2 = _unary(job.TanhOp, "flow.math.tanh_v2")


def reciprocal(x: Blob, name: str | None = None) -> Blob:
    return divide(1.0, x, name)


def reciprocal_no_nan(x: Blob, name: str | None = None) -> Blob:
    """1 / x, and 0 where x is 0 (OneFlow's gradient there is 0 too).

    Two selects: the division never sees a 0, so no inf reaches the result or, times the
    select's 0, the gradient (inf * 0 is NaN).
    """
    zero = equal(x, 0.0)
    return where(zero, 0.0, divide(1.0, where(zero, 1.0, x)), name)


def squared_difference(x: Any, y: Any, name: str | None = None) -> Blob:
    """(x - y)**2, elementwise with numpy broadcasting."""
    return square(subtract(x, y), name)


def xlogy(x: Any, y: Any, name: str | None = None) -> Blob:
    """x * log(y), and 0 where x is 0 whatever y is (OneFlow's; PyTorch's gives NaN for y NaN).

    Two selects: where x is 0 the log sees 1, so neither the value nor either gradient (0
    there, as OneFlow's and PyTorch's) meets log(0) * 0. Broadcasts as numpy does.
    """
    a, b = operands(x, y, "flow.math.xlogy")
    zero = equal(a, 0.0)
    return where(zero, 0.0, multiply(a, log(where(zero, 1.0, b))), name)


def xdivy(x: Any, y: Any, name: str | None = None) -> Blob:
    """x / y, and 0 where x is 0 whatever y is (OneFlow's: 0 / 0 is 0), with gradients 0 there too."""
    a, b = operands(x, y, "flow.math.xdivy")
    zero = equal(a, 0.0)
    return where(zero, 0.0, divide(a, where(zero, 1.0, b)), name)


def floordiv(x: Any, y: Any, name: str | None = None) -> Blob:
    """floor(x / y) for floats; for integers OneFlow 0.x's kernel floors C's quotient, which has already
    rounded toward zero, so -7 // 2 is -3 (not Python's -4), and so it is here. An integer divisor of 0 is
    an ExecutionError, as in flow.math.divide. Piecewise constant: no gradient (OneFlow's is 0).
    """
    a, b = operands(x, y, "flow.math.floordiv")
    if not a.dtype.is_floating_point:
        return divide(a, b, name)
    return floor(divide(a, b), name)


def logical_and(x: Any, y: Any, name: str | None = None) -> Blob:
    """1 where both x and y are nonzero, else 0, as int8 (OneFlow's); NaN counts as nonzero, as in C."""
    a, b = operands(x, y, "flow.math.logical_and")
    return multiply(not_equal(a, 0.0), not_equal(b, 0.0), name)


def polyval(coeffs: Sequence[float], x: Blob, name: str | None = None) -> Blob:
    """coeffs[0] * x**(n-1) + ... + coeffs[n-1] by Horner's rule; zeros for no coefficients.

    The first step is coeffs[0] * x, not OneFlow's 0 * x + coeffs[0], which is NaN where x is inf.
    """
    what = "flow.math.polyval"
    if not isinstance(coeffs, (list, tuple)) or not all(dtypes.is_number(c) for c in coeffs):
        fail(f"{what}: coeffs must be a list or tuple of numbers, got {coeffs!r}")
    if len(coeffs) < 2:
        return constant_like(x, float(coeffs[0]) if coeffs else 0.0, name=name)
    p = multiply(x, float(coeffs[0]))
    for i, c in enumerate(coeffs[1:], start=2):
        p = add(p, float(c), name if i == len(coeffs) else None)
        if i < len(coeffs):
            p = multiply(p, x)
    return p


def clip_by_value(
    values: Blob, min_value: float | None = None, max_value: float | None = None, name: str | None = None
) -> Blob:
    """min(max(values, min_value), max_value); also flow.clip_by_value, flow.clip, flow.clamp, flow.clip_by_scalar.

    The bounds are numbers, as OneFlow's. The gradient passes where min_value <= values <=
    max_value, bounds included (maximum and minimum give a tie to their first operand),
    as OneFlow's clip_by_scalar and PyTorch's clamp have it.
    """
    what = "flow.math.clip_by_value"
    if min_value is None and max_value is None:
        fail(f"{what}: min_value and max_value cannot both be None")
    for bound in (min_value, max_value):
        if bound is not None and not dtypes.is_number(bound):
            fail(f"{what}: min_value and max_value must be numbers, got {bound!r}")
    if min_value is not None:
        values = maximum(values, min_value, name if max_value is None else None)
    if max_value is not None:
        values = minimum(values, max_value, name)
    return values


def softplus(x: Blob, name: str | None = None) -> Blob:
    """log(1 + e**x), as relu(x) + log(1 + e**-|x|): no e**x overflows, and very negative x give e**x itself."""
    return add(relu(x), _softplus_tail(x), name)


def log_sigmoid(x: Blob, name: str | None = None) -> Blob:
    """log(1 / (1 + e**-x)) as -softplus(-x): OneFlow's kernel computes e**-x, which overflows to
    -inf for x below -88 in float32, where this keeps x itself."""
    return negative(softplus(negative(x)), name)


def _softplus_tail(x: Blob) -> Blob:
    """log(1 + e**-|x|), what softplus adds to relu(x) (and the sigmoid cross entropy to its linear part).

    -|x| is minimum(x, -x), whose tie at 0 gives x the gradient: at 0 the tail's gradient
    is log1p'(1) * e**0 = 1/2 and relu's is 0, so softplus' is sigmoid(0) (abs would give 0).
    """
    return log1p(exp(minimum(x, negative(x))))


def _mask(condition: Blob, like: Blob) -> Blob:
    """A comparison's int8 0/1 as `like`'s dtype: a selector that carries no gradient."""
    return cast(condition, like.dtype)


def add_n(inputs: Sequence[Blob], name: str | None = None) -> Blob:
    if not inputs:
        fail("flow.math.add_n needs at least one Blob")
    out = inputs[0]
    for x in inputs[1:]:
        out = add(out, x)
    return out


def _axes(x: Blob, axis: int | Sequence[int] | None, what: str) -> list[int] | None:
    """OneFlow's reduction axes: None reduces every axis, [] none at all.

    Numpy integers are axes as ints are; a bool is refused (True would be axis 1).
    """
    if axis is None:
        return list(range(x.ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    for a in axes:
        if not dtypes.is_int(a):
            fail(f"{what}: axis {a!r} is not an int")
        if not -x.ndim <= a < max(x.ndim, 1):
            fail(f"{what}: axis {a!r} is out of range for a Blob of shape {x.shape}")
    return [int(a) % max(x.ndim, 1) for a in axes]


def _reduce(op: type[job.JobOp], what: str) -> Any:
    def apply(
        input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
    ) -> Blob:
        axes = _axes(input_tensor, axis, what)
        if not axes:
            return input_tensor
        return build(op, [input_tensor], None, name, what, axes=sorted(set(axes)), keepdims=bool(keepdims))

    return published(apply, what, f"{what}(input_tensor, axis=None, keepdims=False): axis None reduces all axes.")


reduce_sum = _reduce(job.ReduceSumOp, "flow.math.reduce_sum")
reduce_mean = _reduce(job.ReduceMeanOp, "flow.math.reduce_mean")
reduce_max = _reduce(job.ReduceMaxOp, "flow.math.reduce_max")
reduce_min = _reduce(job.ReduceMinOp, "flow.math.reduce_min")
reduce_prod = _reduce(job.ReduceProdOp, "flow.math.reduce_prod")


def two_stage_reduce_max(
    x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """reduce_max. OneFlow's two stages (a max on each device, then across the devices, for an x split
    along a reduced axis) are a plan, which sbp-infer makes from x's SBP; the values and the gradient
    (maxima share dy) are reduce_max's. OneFlow refuses an x that is not split; any x is taken here."""
    return reduce_max(x, axis, keepdims, name)


def two_stage_reduce_min(
    x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """reduce_min, as two_stage_reduce_max is reduce_max."""
    return reduce_min(x, axis, keepdims, name)


def reduce_variance(
    input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """The population variance mean((x - mean(x))**2) over `axis` (None: every axis; []: zeros).

    OneFlow composes mean(x**2) - mean(x)**2, which loses every digit when the mean is
    large against the spread, and can go negative; the two passes here do neither.
    """
    return _variance(input_tensor, axis, keepdims, name, "flow.math.reduce_variance")


def reduce_std(
    input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """sqrt(reduce_variance(...)). Where the variance is 0 (a constant slice) the gradient is 0, as PyTorch's."""
    return _sqrt_zero_safe(_variance(input_tensor, axis, keepdims, None, "flow.math.reduce_std"), name)


def _sqrt_zero_safe(x: Blob, name: str | None = None) -> Blob:
    """sqrt(x) with gradient 0 where x is 0, as PyTorch's std and norm have it, not 1 / 0 * 0 = NaN.

    The square root is taken of 1 in those places and its result multiplied by 0.
    """
    constant = _mask(equal(x, 0.0), x)
    return multiply(sqrt(add(x, constant)), subtract(1.0, constant), name)


def _variance(x: Blob, axis: int | Sequence[int] | None, keepdims: bool, name: str | None, what: str) -> Blob:
    axes = _axes(x, axis, what)
    return reduce_mean(square(subtract(x, reduce_mean(x, axes, keepdims=True))), axes, keepdims, name)


def reduce_any(
    x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """1 where some entry over `axis` is nonzero, else 0, as int8 (OneFlow's); NaN counts as nonzero.

    axis [] compares each entry with 0, as OneFlow's does.
    """
    nonzero = not_equal(x, 0.0)
    axes = _axes(x, axis, "flow.math.reduce_any")
    return reduce_max(nonzero, axes, keepdims, name) if axes else nonzero


def reduce_all(
    x: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """1 where every entry over `axis` is nonzero, else 0, as int8 (OneFlow's): no entry is 0."""
    axes = _axes(x, axis, "flow.math.reduce_all")
    if not axes:
        return not_equal(x, 0.0, name)
    return equal(reduce_max(equal(x, 0.0), axes, keepdims), 0, name)


def reduce_logsumexp(
    input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """log(sum(e**x)) over `axis`, as m + log(sum(e**(x - m))) with m the max: OneFlow's
    log(reduce_sum(exp(x))) overflows to inf from x = 89 in float32 and gives -inf for very negative x.

    Where the max is inf or NaN (or every entry -inf) the shift is 0, so the result is inf,
    NaN or -inf as the sum has it. The shift's gradient cancels (e**(x - m) sums to e**(lse - m)).
    """
    axes = _axes(input_tensor, axis, "flow.math.reduce_logsumexp")
    if not axes:
        return input_tensor
    shift = _finite_or(reduce_max(input_tensor, axes, keepdims=True), 0.0)
    total = reduce_sum(exp(subtract(input_tensor, shift)), axes, keepdims)
    return add(log(total), _kept(shift, axes, keepdims), name)


def reduce_euclidean_norm(
    input_tensor: Blob, axis: int | Sequence[int] | None = None, keepdims: bool = False, name: str | None = None
) -> Blob:
    """sqrt(sum(x**2)) over `axis`, with x scaled by its largest |x| first: OneFlow's sqrt(reduce_sum(square(x)))
    overflows from |x| = 2e19 and underflows below 1e-19 in float32. The gradient is x / norm, and 0 for an
    all-zero slice (PyTorch's vector_norm; OneFlow's is NaN there).
    """
    axes = _axes(input_tensor, axis, "flow.math.reduce_euclidean_norm")
    return _euclidean_norm(input_tensor, axes, keepdims, name)


def _euclidean_norm(x: Blob, axes: list[int], keepdims: bool, name: str | None = None) -> Blob:
    if not axes:
        return abs(x, name)
    largest = reduce_max(abs(x), axes, keepdims=True)
    usable = multiply(greater(largest, 0.0), _finite(largest))  # a zero, inf or NaN scale divides by 1
    scale = where(usable, largest, 1.0)
    squares = reduce_sum(square(divide(x, scale)), axes, keepdims)
    return multiply(_sqrt_zero_safe(squares), _kept(scale, axes, keepdims), name)


def l2_normalize(
    input: Blob, axis: int | Sequence[int] | None = None, epsilon: float = 1e-12, name: str | None = None  # noqa: A002
) -> Blob:
    """x / sqrt(max(sum(x**2), epsilon)) over `axis`, as x / max(norm, sqrt(epsilon)) with the norm of
    reduce_euclidean_norm (no overflow for large |x|). Below sqrt(epsilon) the divisor is that constant,
    so the gradient is dy / sqrt(epsilon), as OneFlow's kernel has it. axis None normalizes over every
    axis (OneFlow 0.x fails on None; TensorFlow's meaning).
    """
    what = "flow.math.l2_normalize"
    if not dtypes.is_number(epsilon) or not epsilon > 0:
        fail(f"{what}: epsilon must be a positive number, got {epsilon!r}")
    norm = _euclidean_norm(input, _axes(input, axis, what), keepdims=True)
    return divide(input, maximum(norm, float(np.sqrt(epsilon))), name)


def _finite(x: Blob) -> Blob:
    """1 where x is finite, else 0 (int8): x - x is NaN for inf and NaN."""
    return equal(subtract(x, x), 0.0)


def _finite_or(x: Blob, value: float) -> Blob:
    return where(_finite(x), x, value)


def _kept(x: Blob, axes: list[int], keepdims: bool) -> Blob:
    """A value reduced with keepdims=True, shaped as `keepdims` asks: summed over its size-1 axes when they
    go (exact; a reshape would lose the dynamic sizes of the other axes)."""
    return x if keepdims else reduce_sum(x, axes)


def argmax(input: Blob, axis: int = -1, name: str | None = None) -> Blob:  # noqa: A002
    """Index of the largest value along `axis` (int64; OneFlow returns int32)."""
    return build(job.ArgmaxOp, [input], None, name, "flow.math.argmax", axis=int(axis))


def top_k(input: Blob, axis: int = -1, k: int = 1, sorted: bool = True, name: str | None = None) -> Blob:  # noqa: A002
    """The int32 indices of the k largest entries along `axis`, largest first, as OneFlow's (indices only).

    k above the axis' size (along a dynamic axis, its actual size) takes the whole axis, as OneFlow's.
    Equal entries come in index order and NaN counts as the largest, as torch.topk; `sorted=False`
    (OneFlow's order left open) gives the same sorted indices. Integer indices: no gradient.
    """
    what = "flow.math.top_k"
    if not isinstance(input, Blob) or not input.ndim:
        fail(f"{what}: input must be a Blob with at least one axis, got {input!r}")
    axis = axis_index(axis, input.ndim, what)
    if not dtypes.is_int(k) or k < 1:
        fail(f"{what}: k must be a positive int, got {k!r}")
    return build(job.TopKOp, [input], None, name, what, axis=axis, k=min(int(k), input.shape[axis]))


def unsorted_segment_sum(
    data: Blob, segment_ids: Blob, num_segments: int, axis: int = 0, name: str | None = None
) -> Blob:
    """Sums of data's slices by segment: the axes axis .. axis + segment_ids.ndim of data, indexed as
    segment_ids, become one axis of num_segments, each the sum of its id's slices (0 for an id none has).

    job.gather_grad, the adjoint of gather: its gradient gathers, and sbp-infer splits it as it
    splits gather's. An id outside [0, num_segments) is an ExecutionError naming it and its
    position; OneFlow's CPU kernel skips ids above and stops on negative ones.
    """
    what = "flow.math.unsorted_segment_sum"
    _check_num_segments(num_segments, what)
    axis = _segment_axis(data, segment_ids, axis, what)
    shape = data.shape[:axis] + (int(num_segments),) + data.shape[axis + segment_ids.ndim:]
    return build(job.GatherGradOp, [data, segment_ids], job.tensor(shape, data.dtype.element_type), name, what,
                 axis=axis)  # fmt: skip


def unsorted_batch_segment_sum(data: Blob, segment_ids: Blob, num_segments: int, name: str | None = None) -> Blob:
    """unsorted_segment_sum within each batch entry: segment_ids (2 or more axes) has data's leading shape, all
    but its last axis batch axes, and data's axis segment_ids.ndim - 1 becomes num_segments sums per entry.

    The adjoint of flow.gather's batch_gather (OneFlow's batch_gather gradient is this op): job.gather_grad
    with those batch axes, so its gradient is that batch_gather, split on a batch axis as it is. An id
    outside [0, num_segments) is an ExecutionError naming it and its position, as in unsorted_segment_sum.
    """
    what = "flow.math.unsorted_batch_segment_sum"
    _check_num_segments(num_segments, what)
    _segment_axis(data, segment_ids, 0, what)
    if segment_ids.ndim < 2:
        fail(f"{what}: segment_ids needs a batch axis before its segment axis (2 or more axes, as OneFlow's "
             f"op), got shape {segment_ids.shape}")  # fmt: skip
    at = segment_ids.ndim - 1
    shape = data.shape[:at] + (int(num_segments),) + data.shape[at + 1:]
    return build(job.GatherGradOp, [data, segment_ids], job.tensor(shape, data.dtype.element_type), name, what,
                 axis=at, batch_dims=at)  # fmt: skip


def _check_num_segments(num_segments: object, what: str) -> None:
    if not dtypes.is_int(num_segments) or num_segments < 1:
        fail(f"{what}: num_segments must be a positive int, got {num_segments!r}")


def unsorted_segment_sum_like(data: Blob, segment_ids: Blob, like: Blob, axis: int = 0, name: str | None = None) -> Blob:
    """unsorted_segment_sum with like's shape (num_segments = like.shape[axis])."""
    what = "flow.math.unsorted_segment_sum_like"
    if not isinstance(like, Blob):
        fail(f"{what}: like must be a Blob, got {like!r}")
    axis = _segment_axis(data, segment_ids, axis, what)
    return build(job.GatherGradOp, [data, segment_ids], job.tensor(like.shape, data.dtype.element_type), name, what,
                 axis=axis)  # fmt: skip


def _segment_axis(data: Blob, segment_ids: Blob, axis: object, what: str) -> int:
    """`axis` as an index, with segment_ids' shape that of data's axes from it on."""
    if not isinstance(data, Blob) or not isinstance(segment_ids, Blob):
        fail(f"{what}: data and segment_ids must be Blobs, got {data!r} and {segment_ids!r}")
    at = axis_index(axis, data.ndim, what)
    if data.shape[at:at + segment_ids.ndim] != segment_ids.shape:
        fail(f"{what}: segment_ids of shape {segment_ids.shape} must be data's axes from {at} on, "
             f"of data's shape {data.shape}")  # fmt: skip
    return at


def in_top_k(targets: Blob, predictions: Blob, k: int, name: str | None = None) -> Blob:
    """1 (int8) where the target's prediction is among the k largest of its row, as OneFlow's kernel: fewer
    than k predictions exceed it, so ties count in its favour. 0 where OneFlow's "cannot say": a target
    outside [0, classes) or a row holding an inf or NaN. targets (batch,) int32/int64, predictions
    (batch, classes) floating point.
    """
    what = "flow.math.in_top_k"
    if not isinstance(predictions, Blob) or predictions.ndim != 2 or not predictions.dtype.is_floating_point:
        fail(f"{what}: predictions must be a (batch, classes) floating-point Blob, got {predictions!r}")
    if not isinstance(targets, Blob) or targets.shape != predictions.shape[:1]:
        fail(f"{what}: targets must be a Blob of shape {predictions.shape[:1]}, got {targets!r}")
    if not dtypes.is_int(k) or k < 0:
        fail(f"{what}: k must be a non-negative int, got {k!r}")
    hit = one_hot(targets, predictions.shape[1], dtype=dtypes.int8)  # a target out of range: a row of 0
    target = reduce_max(where(hit, predictions, -np.inf), 1, keepdims=True)
    above = reduce_sum(cast(greater(predictions, target), dtypes.int32), 1)
    sayable = multiply(reduce_max(hit, 1), reduce_all(_finite(predictions), 1))
    return logical_and(less(above, int(k)), sayable, name)


def tril(x: Blob, diagonal: int = 0, fill_value: float = 0, name: str | None = None) -> Blob:
    """x on and below the `diagonal`-th diagonal of its last two axes (above it for diagonal > 0), fill_value
    elsewhere; the gradient passes where x is kept. A select against a constant mask, never a product, so
    an inf or NaN above the diagonal does not leak.
    """
    what = "flow.math.tril"
    if not isinstance(x, Blob) or x.ndim < 2:
        fail(f"{what}: x must be a Blob with at least 2 axes, got {x!r}")
    if not dtypes.is_int(diagonal):
        fail(f"{what}: diagonal must be an int, got {diagonal!r}")
    if not dtypes.is_number(fill_value):
        fail(f"{what}: fill_value must be a number, got {fill_value!r}")
    kept = constant(np.tri(*x.shape[-2:], k=int(diagonal), dtype=np.int8))
    return where(kept, x, fill_value, name)


def fused_scale_tril(x: Blob, diagonal: int = 0, fill_value: float = 0, scale: float = 1, name: str | None = None) -> Blob:
    """flow.math.fused_scale_tril (also flow.nn's): tril of x * scale, fill_value above the diagonal."""
    if not dtypes.is_number(scale):
        fail(f"flow.math.fused_scale_tril: scale must be a number, got {scale!r}")
    return tril(multiply(x, scale), diagonal, fill_value, name)


def reduced_shape_elem_cnt(input_blob: Blob, axis: Sequence[int] | None = None, dtype: dtypes.DType | None = None,
                           name: str | None = None) -> Blob:  # fmt: skip
    """flow.math.reduced_shape_elem_cnt: the product of input_blob's sizes over `axis` (all by default; the
    actual ones when dynamic), shape (1,), int32 unless `dtype` says, as OneFlow's."""
    axes = [axis] if dtypes.is_int(axis) else axis
    return element_count(input_blob, axes, dtype, name, "flow.math.reduced_shape_elem_cnt")


def count_not_finite(x: Blob, name: str | None = None) -> Blob:
    """flow.count_not_finite: how many entries of x are inf or NaN, int64 of shape (1,) (OneFlow's, for
    dynamic loss scaling)."""
    return multi_count_not_finite([x], name, "flow.count_not_finite")


def multi_count_not_finite(x: Sequence[Blob] | None = None, name: str | None = None,
                           what: str = "flow.multi_count_not_finite") -> Blob:  # fmt: skip
    """flow.multi_count_not_finite: count_not_finite summed over the Blobs `x`."""
    if not isinstance(x, (list, tuple)) or not x or not all(isinstance(b, Blob) for b in x):
        fail(f"{what}: x must be a non-empty list of Blobs, got {x!r}")
    counts = [reduce_sum(cast(equal(_finite(b), 0), dtypes.int64)) for b in x]
    return reshape(add_n(counts) if len(counts) > 1 else counts[0], (1,), name)


def sigmoid_grad(y: Blob, dy: Blob, name: str | None = None) -> Blob:
    """flow.math.sigmoid_grad: sigmoid's backward from its output y and the gradient dy, dy y (1 - y)."""
    return build(job.SigmoidGradOp, [dy, y], None, name, "flow.math.sigmoid_grad")


def gelu_grad(x: Blob, dy: Blob, name: str | None = None) -> Blob:
    """flow.math.gelu_grad: gelu's backward from its input x and the gradient dy."""
    return build(job.GeluGradOp, [dy, x], None, name, "flow.math.gelu_grad")


def _install_operators() -> None:
    """Python's operators on Blobs are these functions; comparisons give int8 Blobs of 0/1, as OneFlow's."""
    binary = {"add": add, "sub": subtract, "mul": multiply, "truediv": divide, "pow": pow, "mod": mod}
    for dunder, function in binary.items():
        setattr(Blob, f"__{dunder}__", lambda self, other, f=function: f(self, other))
        setattr(Blob, f"__r{dunder}__", lambda self, other, f=function: f(other, self))
    comparisons = {"eq": equal, "ne": not_equal, "lt": less, "le": less_equal, "gt": greater, "ge": greater_equal}
    for dunder, function in comparisons.items():
        setattr(Blob, f"__{dunder}__", lambda self, other, f=function: f(self, other))
    Blob.__neg__ = lambda self: negative(self)  # type: ignore[method-assign]
    Blob.__pos__ = lambda self: self  # type: ignore[method-assign]
    Blob.__abs__ = lambda self: abs(self)  # type: ignore[method-assign]


_install_operators()
