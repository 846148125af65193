"""flow.quantization (OneFlow 0.x): the observers and fake quantization of quantization-aware training.

An observer gives the scale and zero point that quantize a Blob to `quantization_bit` bits: from its own
min and max (min_max_observer), or from their moving averages, kept in variables from step to step
(moving_average_min_max_observer). fake_quantization rounds a Blob to those levels and back
(job.fake_quantization), passing its gradient straight through. "symmetric" quantizes to signed levels
around 0 (zero point 0), "affine" to 0 .. 2**bits - 1 from the minimum.
"""

from __future__ import annotations

from irflow.dialects import job
from irflow.frontend import dtypes, initializers
from irflow.frontend.blob import Blob, expect_blobs
from irflow.frontend.locations import fail
from irflow.frontend.math import abs, maximum, reduce_max, reduce_min  # noqa: A004
from irflow.frontend.ops import reshape, where, zeros_like
from irflow.frontend.tracing import build, current
from irflow.frontend.variables import assign, get_variable


def min_max_observer(
    input: Blob,  # noqa: A002
    quantization_bit: int = 8,
    quantization_scheme: str = "symmetric",
    per_layer_quantization: bool = True,
    name: str | None = None,
) -> tuple[Blob, Blob]:
    """The scale and zero point of `input`'s own min and max: of all of it, shape (1,), or with
    `per_layer_quantization=False` of each entry of its axis 0 (a channel of a weight), shape (C,)."""
    what = "flow.quantization.min_max_observer"
    affine = _scheme(input, quantization_bit, quantization_scheme, what)
    axes = None if per_layer_quantization else list(range(1, input.ndim))
    shape = (1,) if per_layer_quantization else input.shape[:1]
    high = reshape(reduce_max(input, axes), shape)
    low = reshape(reduce_min(input, axes), shape)
    return _scale_and_zero_point(high, low, quantization_bit, affine)


def moving_average_min_max_observer(
    input: Blob,  # noqa: A002
    quantization_bit: int = 8,
    quantization_scheme: str = "symmetric",
    momentum: float = 0.95,
    name: str | None = None,
) -> tuple[Blob, Blob]:
    """The scale and zero point of moving averages of `input`'s max and min (symmetric: of its largest
    magnitude), kept in the variables `<name>-moving_max` and `<name>-moving_min`.

    A train job updates them, as OneFlow's kernel does, to `average * momentum + value * (1 - momentum)`,
    or to the value itself while an average is 0 (its first step), and quantizes with the updated ones;
    other jobs read them as they are. OneFlow's op also declares a `current_train_step` variable that
    nothing advances; irflow has none.
    """
    what = "flow.quantization.moving_average_min_max_observer"
    trace = current(what)
    affine = _scheme(input, quantization_bit, quantization_scheme, what)
    if not dtypes.is_number(momentum) or not 0 <= momentum <= 1:
        fail(f"{what}: momentum must be a number in [0, 1], got {momentum!r}")
    name = name or trace.unique_name("MovingAverageMinMaxObserver")

    def average(kind: str) -> Blob:
        return get_variable(f"{name}-moving_{kind}", shape=(1,), dtype=input.dtype,
                            initializer=initializers.zeros_initializer(), trainable=False)  # fmt: skip

    moving_max, moving_min = average("max"), average("min")
    if trace.job_type != "train":
        return _scale_and_zero_point(moving_max, moving_min, quantization_bit, affine)
    high, low = reshape(reduce_max(input), (1,)), reshape(reduce_min(input), (1,))
    if not affine:
        high = maximum(abs(high), abs(low))

    def updated(moving: Blob, value: Blob) -> Blob:
        return where(moving == 0, value, moving * float(momentum) + value * (1 - float(momentum)))

    new_max = updated(moving_max, high)
    new_min = updated(moving_min, low) if affine else new_max
    assign(moving_max, new_max)
    assign(moving_min, new_min)
    return _scale_and_zero_point(new_max, new_min, quantization_bit, affine)


moving_average_min_maxObserver = moving_average_min_max_observer  # noqa: N816  (OneFlow 0.3's spelling)


def fake_quantization(
    input: Blob,  # noqa: A002
    scale: Blob,
    zero_point: Blob,
    quantization_bit: int = 8,
    quantization_scheme: str = "symmetric",
    name: str | None = None,
) -> Blob:
    """`input` rounded to the levels of `scale` and `zero_point` (an observer's) and back; the gradient
    reaches `input` unchanged (the straight-through estimator, as OneFlow's)."""
    what = "flow.quantization.fake_quantization"
    affine = _scheme(input, quantization_bit, quantization_scheme, what)
    expect_blobs(what, scale=scale, zero_point=zero_point)
    return build(job.FakeQuantizationOp, [input, scale, zero_point], None, name, what,
                 quantization_bit=int(quantization_bit), affine=affine)  # fmt: skip


def _scheme(input: Blob, bits: object, scheme: object, what: str) -> bool:  # noqa: A002
    """Whether `scheme` is "affine" (else "symmetric"), with the input and the bits checked."""
    if not isinstance(input, Blob) or not input.dtype.is_floating_point:
        fail(f"{what}: input must be a floating-point Blob, got {input!r}")
    if not dtypes.is_int(bits) or not 2 <= bits <= 8:  # type: ignore[operator]
        fail(f"{what}: quantization_bit must be an int from 2 to 8, got {bits!r}")
    if scheme not in ("symmetric", "affine"):
        fail(f"{what}: quantization_scheme must be 'symmetric' or 'affine', got {scheme!r}")
    return scheme == "affine"


def _scale_and_zero_point(high: Blob, low: Blob, bits: int, affine: bool) -> tuple[Blob, Blob]:
    """symmetric: max(|high|, |low|) / (2**(bits - 1) - 1) and 0; affine: (high - low) / (2**bits - 1) and
    -low / scale, OneFlow's formulas."""
    if affine:
        scale = (high - low) / float(2**bits - 1)
        return scale, -low / scale
    scale = maximum(abs(high), abs(low)) / float(2 ** (bits - 1) - 1)
    return scale, zeros_like(scale)
