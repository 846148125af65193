"""Optimizer updates: the variable (and its state) is both an input and the output.

Every update reads an input before writing the output of the same role, so
outputs may be the very arrays given as inputs, as the executor binds them.
`lr` and `step` are rank-0 arrays read at run time (a schedule may change them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from .parallel import Split
from .registry import Array, Run, register, sequence
from .workspace import scratch

# Variables of at least this many elements are updated one slice per CPU thread when there are several.
# Momentum, float32, wall time best of 100 at load ~1.6, 1 -> 2 threads: LeNet's 512x3136 dense weight
# 0.83-0.94 -> 0.54-0.64 ms; the MLP's 512x784 one 0.13-0.17 -> 0.12-0.16 ms (no gain: not split).
_SPLIT_ELEMENTS = 1 << 20
_SLICES = 64


def _step(xp: ModuleType, g: Array, w: Array, lr: Array, weight_decay: float, out: Array) -> list[Run]:
    """out = lr * (g + weight_decay * w): SGD's step, L2 regularization folded into the gradient."""
    if weight_decay:
        return [
            partial(xp.multiply, w, weight_decay, out=out),
            partial(xp.add, out, g, out=out),
            partial(xp.multiply, out, lr, out=out),
        ]
    return [partial(xp.multiply, g, lr, out=out)]  # one pass, not a copy of g and a second one


def _elementwise(xp: ModuleType, arrays: Sequence[Array], steps: Callable[[list[Array]], list[Run]]) -> Run:
    """`steps` over the flattened `arrays`, or, for a large variable, over one contiguous slice of them per CPU
    thread (kernels/parallel.py); an update is elementwise, so the slices are independent and the result the same."""
    flat = [a.reshape(-1) for a in arrays]
    size = flat[0].size
    if size < _SPLIT_ELEMENTS:
        return sequence(steps(flat))
    cuts = [size * i // _SLICES for i in range(_SLICES + 1)]

    def part(slices: range) -> tuple[list[Run], None]:
        span = slice(cuts[slices.start], cuts[slices.stop])
        return steps([a[span] for a in flat]), None

    return Split(xp, _SLICES, [], part)


@register("sgd_update")
def sgd_update(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """w -= lr * (g + weight_decay * w)."""
    (w, g, lr), (w_out,) = ins, outs
    weight_decay = float(attrs.get("weight_decay", 0.0))

    def steps(arrays: list[Array]) -> list[Run]:
        w, g, w_out, t = arrays
        return [*_step(xp, g, w, lr, weight_decay, t), partial(xp.subtract, w, t, out=w_out)]

    return _elementwise(xp, [w, g, w_out, scratch(xp, w.shape, w.dtype)], steps)


@register("momentum_update")
def momentum_update(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """OneFlow's momentum: m = beta * m - lr * (g + weight_decay * w); w += m."""
    (w, g, m, lr), (w_out, m_out) = ins, outs
    beta = float(attrs["beta"])
    weight_decay = float(attrs.get("weight_decay", 0.0))

    def steps(arrays: list[Array]) -> list[Run]:
        w, g, m, w_out, m_out, t = arrays
        return [
            *_step(xp, g, w, lr, weight_decay, t),
            partial(xp.multiply, m, beta, out=m_out),
            partial(xp.subtract, m_out, t, out=m_out),
            partial(xp.add, w, m_out, out=w_out),
        ]

    return _elementwise(xp, [w, g, m, w_out, m_out, scratch(xp, w.shape, w.dtype)], steps)


def _bias_correction(xp: ModuleType, beta: float, step: Array, out: Array) -> None:
    """out = 1 - beta**step, in out's dtype (float64: a float32 step would round beta**step)."""
    xp.power(beta, step, out=out, dtype=out.dtype)
    xp.subtract(1.0, out, out=out)


@register("adam_update")
def adam_update(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """torch.optim.Adam, or AdamW when weight_decay > 0 (decoupled: w *= 1 - lr * weight_decay first).

    With `step` the 1-based count of this update: m_hat = m / (1 - beta1**step),
    w -= lr * m_hat / (sqrt(v / (1 - beta2**step)) + epsilon), grouped as torch
    groups it (scalar factors in float64, epsilon added after the square root).
    """
    (w, g, m, v, lr, step), (w_out, m_out, v_out) = ins, outs
    beta1, beta2 = float(attrs["beta1"]), float(attrs["beta2"])
    epsilon = float(attrs["epsilon"])
    weight_decay = float(attrs.get("weight_decay", 0.0))
    bias_correction = bool(attrs.get("do_bias_correction", True))
    t = scratch(xp, w.shape, w.dtype)
    # Scalar factors are computed in float64 and applied in w's dtype, as torch does with Python floats.
    shape = np.broadcast_shapes(lr.shape, step.shape)
    exact = scratch(xp, (3, *shape), np.float64)
    applied = scratch(xp, (3, *shape), w.dtype)
    step_size, root_correction, decay = (exact[i, ...] for i in range(3))  # 0-d views, not scalars
    step_size_w, root_correction_w, decay_w = (applied[i, ...] for i in range(3))
    decayed = w_out if weight_decay else w

    def run() -> None:
        if bias_correction:
            _bias_correction(xp, beta1, step, step_size)
            xp.divide(lr, step_size, out=step_size)
            _bias_correction(xp, beta2, step, root_correction)
            xp.sqrt(root_correction, out=root_correction)
        else:
            xp.copyto(step_size, lr)
            root_correction.fill(1.0)
        xp.multiply(lr, -weight_decay, out=decay)
        xp.add(decay, 1.0, out=decay)
        xp.copyto(applied, exact)
        if weight_decay:
            xp.multiply(w, decay_w, out=w_out)
        _moments(xp, g, m, v, m_out, v_out, t, beta1, beta2)
        xp.sqrt(v_out, out=t)
        xp.divide(t, root_correction_w, out=t)
        xp.add(t, epsilon, out=t)
        xp.divide(m_out, t, out=t)
        xp.multiply(t, step_size_w, out=t)
        xp.subtract(decayed, t, out=w_out)

    return run


def _moments(
    xp: ModuleType, g: Array, m: Array, v: Array, m_out: Array, v_out: Array, t: Array, beta1: float, beta2: float
) -> None:
    """Adam's (and LAMB's) moments: m += (1 - beta1) * (g - m), torch's lerp; v = beta2 * v + (1 - beta2) * g**2.
    `t` is scratch of g's shape."""
    xp.subtract(g, m, out=t)
    xp.multiply(t, 1.0 - beta1, out=t)
    xp.add(m, t, out=m_out)
    xp.multiply(v, beta2, out=v_out)
    xp.square(g, out=t)
    xp.multiply(t, 1.0 - beta2, out=t)
    xp.add(v_out, t, out=v_out)


@register("rmsprop_update", "centered_rmsprop_update")
def rmsprop_update(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """OneFlow's RMSProp: ms = d * ms + (1 - d) * g * g, centered (a mean_gradient in and out) also
    mg = d * mg + (1 - d) * g; w -= lr * g / sqrt(ms [- mg * mg] + epsilon).

    torch.optim.RMSprop adds epsilon after the square root instead.
    """
    w, g, ms, *centered, lr = ins
    decay, epsilon = float(attrs["decay_rate"]), float(attrs["epsilon"])

    def steps(arrays: list[Array]) -> list[Run]:
        w, g, ms, w_out, ms_out, t, *centering = arrays
        runs = [
            partial(xp.multiply, ms, decay, out=ms_out),
            partial(xp.square, g, out=t),
            partial(xp.multiply, t, 1.0 - decay, out=t),
            partial(xp.add, ms_out, t, out=ms_out),
        ]
        if centering:
            mg, mg_out = centering
            runs += [
                partial(xp.multiply, mg, decay, out=mg_out),
                partial(xp.multiply, g, 1.0 - decay, out=t),
                partial(xp.add, mg_out, t, out=mg_out),
                partial(xp.square, mg_out, out=t),
                partial(xp.subtract, ms_out, t, out=t),
                partial(xp.add, t, epsilon, out=t),
            ]
        else:
            runs.append(partial(xp.add, ms_out, epsilon, out=t))
        return [
            *runs,
            partial(xp.sqrt, t, out=t),
            partial(xp.divide, g, t, out=t),
            partial(xp.multiply, t, lr, out=t),
            partial(xp.subtract, w, t, out=w_out),
        ]

    w_out, ms_out, *mg_out = outs
    return _elementwise(xp, [w, g, ms, w_out, ms_out, scratch(xp, w.shape, w.dtype), *centered, *mg_out], steps)


def _squared_norms(xp: ModuleType, a: Array, b: Array, scratch: Array, out: Array) -> None:
    """out[0], out[1] = the sums of squares of a and b."""
    for i, x in enumerate((a, b)):
        xp.square(x, out=scratch)
        xp.sum(scratch, out=out[i, ...])


def _norms(xp: ModuleType, a: Array, b: Array, scratch: Array, given: Sequence[Array], out: Array) -> None:
    """out[0], out[1] = the 2-norms of a and b (whole arrays), or the roots of `given`'s one array of squared
    norms: a split variable's, summed over its pieces (job.NormUpdateOp)."""
    if given:
        xp.copyto(out, given[0])
    else:
        _squared_norms(xp, a, b, scratch, out)
    xp.sqrt(out, out=out)


def _trust_ratio(xp: ModuleType, norms: Array, numerator: Array, denominator: Array, out: Array,
                 positive: Array) -> None:
    """out = numerator / denominator where both norms are positive, else 1 (LAMB's and LARS's guard)."""
    xp.greater(norms, 0.0, out=positive)
    xp.logical_and(positive[0, ...], positive[1, ...], out=positive[0, ...])
    xp.copyto(denominator, 1.0, where=xp.logical_not(positive[0, ...]))  # no 0 / 0 where the ratio is 1
    xp.divide(numerator, denominator, out=out)
    xp.copyto(out, 1.0, where=xp.logical_not(positive[0, ...]))


def _lamb_direction(xp: ModuleType, attrs: Mapping[str, Any], g: Array, m: Array, v: Array, step: Array,
                    moments: tuple[Array, Array], u: Array, t: Array) -> Run:
    """moments = Adam's new (m, v); u = m_hat / sqrt(v_hat + epsilon), LAMB's direction; `t` is scratch.
    One definition for the update and for the norms of a split variable's piece, so both see the same u."""
    beta1, beta2, epsilon = float(attrs["beta1"]), float(attrs["beta2"]), float(attrs["epsilon"])
    corrections = scratch(xp, (2,), np.float64)
    applied = scratch(xp, (2,), u.dtype)
    m_out, v_out = moments

    def run() -> None:
        _bias_correction(xp, beta1, step, corrections[0, ...])
        _bias_correction(xp, beta2, step, corrections[1, ...])
        xp.copyto(applied, corrections)
        _moments(xp, g, m, v, m_out, v_out, t, beta1, beta2)
        xp.divide(v_out, applied[1, ...], out=t)
        xp.add(t, epsilon, out=t)
        xp.sqrt(t, out=t)
        xp.divide(m_out, applied[0, ...], out=u)
        xp.divide(u, t, out=u)

    return run


@register("lamb_update")
def lamb_update(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """OneFlow's LAMB: Adam's moments with bias correction, u = m_hat / sqrt(v_hat + epsilon) (epsilon
    under the root, as OneFlow), then w -= lr * (|w| / |u|) * (u + weight_decay * w), the ratio 1 when
    either norm is 0 and, as OneFlow's lamb kernel, taken before the decay joins u.

    `step` is the 1-based count of this update, as adam_update's. A last input, when given, holds the
    squared norms of the whole variable (a split one's, from lamb_norms summed over the devices).
    """
    (w, g, m, v, lr, step, *given), (w_out, m_out, v_out) = ins, outs
    weight_decay = float(attrs.get("weight_decay", 0.0))
    u, t = scratch(xp, w.shape, w.dtype), scratch(xp, w.shape, w.dtype)
    direction = _lamb_direction(xp, attrs, g, m, v, step, (m_out, v_out), u, t)
    norms, scalars = scratch(xp, (2,), w.dtype), scratch(xp, (2,), w.dtype)
    positive = scratch(xp, (2,), bool)
    ratio, denominator = scalars[0, ...], scalars[1, ...]

    def run() -> None:
        direction()
        _norms(xp, w, u, t, given, norms)
        xp.copyto(denominator, norms[1, ...])
        _trust_ratio(xp, norms, norms[0, ...], denominator, ratio, positive)
        if weight_decay:
            xp.multiply(w, weight_decay, out=t)
            xp.add(u, t, out=u)
        xp.multiply(ratio, lr, out=ratio)
        xp.multiply(u, ratio, out=u)
        xp.subtract(w, u, out=w_out)

    return run


def _real(attrs: Mapping[str, Any], arrays: Sequence[Array]) -> list[Array]:
    """The entries of each piece that hold the variable: `valid`, which the executor works out from the
    piece's layout and the device's coordinates, leaves out the padding of an uneven split."""
    real = tuple(slice(0, n) for n in attrs["valid"])
    return [a[real] for a in arrays]


@register("lamb_norms")
def lamb_norms(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """|w|**2 and |u|**2 over this device's real entries of a split variable, u as lamb_update takes it."""
    (w, g, m, v), (step,), (out,) = _real(attrs, ins[:4]), ins[4:], outs
    u, t = scratch(xp, w.shape, w.dtype), scratch(xp, w.shape, w.dtype)
    moments = scratch(xp, w.shape, w.dtype), scratch(xp, w.shape, w.dtype)  # this step's m and v, not kept
    direction = _lamb_direction(xp, attrs, g, m, v, step, moments, u, t)

    def run() -> None:
        direction()
        _squared_norms(xp, w, u, t, out)

    return run


@register("lars_norms")
def lars_norms(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """|w|**2 and |g|**2 over this device's real entries of a split variable."""
    (w, g), (out,) = _real(attrs, ins), outs
    t = scratch(xp, w.shape, w.dtype)
    return lambda: _squared_norms(xp, w, g, t, out)


@register("lars_update")
def lars_update(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """OneFlow's LARS: local_lr = lr * lars_coefficient * |w| / (epsilon + |g| + weight_decay * |w|), the ratio
    1 (the plain lr) when either norm is 0; m = momentum_beta * m - local_lr * (g + weight_decay * w); w += m.

    The paper puts no epsilon at |g| and has no such fallback; OneFlow's kernel does. A last input, when
    given, holds the squared norms of the whole variable (a split one's, from lars_norms summed over the devices).
    """
    (w, g, m, lr, *given), (w_out, m_out) = ins, outs
    beta, epsilon = float(attrs["momentum_beta"]), float(attrs["epsilon"])
    coefficient, weight_decay = float(attrs["lars_coefficient"]), float(attrs.get("weight_decay", 0.0))
    t = scratch(xp, w.shape, w.dtype)
    norms, scalars = scratch(xp, (2,), w.dtype), scratch(xp, (3,), w.dtype)
    positive = scratch(xp, (2,), bool)
    ratio, numerator, denominator = (scalars[i, ...] for i in range(3))

    def run() -> None:
        _norms(xp, w, g, t, given, norms)
        xp.multiply(norms[0, ...], coefficient, out=numerator)
        xp.add(norms[1, ...], epsilon, out=denominator)
        if weight_decay:
            xp.multiply(norms[0, ...], weight_decay, out=ratio)  # ratio as scratch, before it is computed
            xp.add(denominator, ratio, out=denominator)
        _trust_ratio(xp, norms, numerator, denominator, ratio, positive)
        xp.multiply(ratio, lr, out=ratio)
        if weight_decay:
            xp.multiply(w, weight_decay, out=t)
            xp.add(t, g, out=t)
            xp.multiply(t, ratio, out=t)
        else:
            xp.multiply(g, ratio, out=t)
        xp.multiply(m, beta, out=m_out)
        xp.subtract(m_out, t, out=m_out)
        xp.add(w, m_out, out=w_out)

    return run


def _present_only(xp: ModuleType, dense: Run, present: Array, originals: Sequence[Array], steps: Sequence[Array],
                  outs: Sequence[Array]) -> Run:
    """`dense` writes every element's new value into `steps`; then each out takes it where `present` is nonzero
    and its original (the variable or state as read) elsewhere, so elements not present keep theirs."""
    absent = scratch(xp, present.shape, bool)

    def run() -> None:
        dense()
        xp.equal(present, 0, out=absent)
        for original, step, out in zip(originals, steps, outs):
            xp.copyto(step, original, where=absent)
            xp.copyto(out, step)

    return run


def _sparse(dense: Callable[..., Run]) -> Callable[..., Run]:
    """The kernel of a job.SparseUpdateOp: `dense`'s update (ins without `present`, ins[2]) where `present`."""

    def build(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
        w, g, present, *rest = ins
        originals = [w, *rest[: len(outs) - 1]]
        steps = [scratch(xp, o.shape, o.dtype) for o in outs]
        return _present_only(xp, dense(xp, attrs, [w, g, *rest], steps), present, originals, steps, outs)

    return build


def _lazy_adam(xp: ModuleType, attrs: Mapping[str, Any], ins: Sequence[Array], outs: Sequence[Array]) -> Run:
    """OneFlow's lazy_adam step (torch.optim.SparseAdam's): Adam's moments, then
    w -= lr * sqrt(1 - beta2**step) / (1 - beta1**step) * m / (sqrt(v) + epsilon), the rate's factor in float64."""
    (w, g, m, v, lr, step), (w_out, m_out, v_out) = ins, outs
    beta1, beta2, epsilon = float(attrs["beta1"]), float(attrs["beta2"]), float(attrs["epsilon"])
    t = scratch(xp, w.shape, w.dtype)
    shape = np.broadcast_shapes(lr.shape, step.shape)
    exact = scratch(xp, (2, *shape), np.float64)
    step_size, root = exact[0, ...], exact[1, ...]
    step_size_w = scratch(xp, shape, w.dtype)

    def run() -> None:
        _bias_correction(xp, beta2, step, root)
        xp.sqrt(root, out=root)
        _bias_correction(xp, beta1, step, step_size)
        xp.divide(root, step_size, out=step_size)
        xp.multiply(step_size, lr, out=step_size)
        xp.copyto(step_size_w, step_size)
        _moments(xp, g, m, v, m_out, v_out, t, beta1, beta2)
        xp.sqrt(v_out, out=t)
        xp.add(t, epsilon, out=t)
        xp.divide(m_out, t, out=t)
        xp.multiply(t, step_size_w, out=t)
        xp.subtract(w, t, out=w_out)

    return run


register("lazy_adam_update")(_sparse(_lazy_adam))
register("indexed_slices_sgd_update")(_sparse(sgd_update))
register("indexed_slices_momentum_update")(_sparse(momentum_update))
register("indexed_slices_adam_update")(_sparse(adam_update))
