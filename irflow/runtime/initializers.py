"""Drawing a variable's initial value from its initializer dictionary (the VariableStore's job).

An initializer is a plain dictionary, stored on `job.variable` as its
`initializer` property, so that the IR alone says how a variable starts out.
The kinds and their keys:

    {kind = "constant", value}                      every element `value`
    {kind = "random_uniform", minval, maxval}       U[minval, maxval)
    {kind = "random_normal", mean, stddev}          N(mean, stddev^2)
    {kind = "truncated_normal", mean, stddev}       N(mean, stddev^2), redrawn beyond 2 stddev
    {kind = "variance_scaling", scale, mode, distribution, data_format}
        the fan of the variable's own shape decides the spread: mode is
        "fan_in" | "fan_out" | "fan_avg", distribution "truncated_normal" |
        "random_normal" | "random_uniform", data_format "channels_first" |
        "channels_last" (which axes of a conv weight are spatial)

Every kind may carry an integer `seed`; then that variable draws from its own
generator instead of the store's, as OneFlow's `random_seed` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irflow.runtime.attributes import python_value


def fan(shape: tuple[int, ...], mode: str, data_format: str = "channels_first") -> float:
    """OneFlow's fan of a weight: (out, in) for dense, (out, in, *spatial) or (out, *spatial, in) for conv."""
    if len(shape) == 0:
        fan_in = fan_out = 1.0
    elif len(shape) == 1:
        fan_in = fan_out = float(shape[0])
    elif len(shape) == 2:
        fan_in, fan_out = float(shape[1]), float(shape[0])
    else:
        fan_in = float(np.prod(shape[1:]))
        spatial = shape[2:] if data_format == "channels_first" else shape[1:-1]
        fan_out = float(shape[0] * np.prod(spatial))
    value = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]
    return max(value, 1.0)


def sample(init: Mapping[str, Any], shape: Sequence[int], np_dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """The initial value of a variable of `shape` and `np_dtype` (the IR's dictionary or a plain dict)."""
    spec = {k: python_value(v) for k, v in init.items()}
    shape = tuple(int(d) for d in shape)
    np_dtype = np.dtype(np_dtype)
    if spec.get("seed") is not None:
        rng = np.random.default_rng(int(spec["seed"]))
    kind = spec.get("kind")
    if kind == "constant":
        return np.full(shape, spec.get("value", 0.0), dtype=np_dtype)
    if kind == "random_uniform":
        lo, hi = spec.get("minval", 0.0), spec.get("maxval", 1.0)
        if np_dtype.kind in "iu":
            return rng.integers(int(lo), max(int(hi), int(lo) + 1), size=shape).astype(np_dtype)
        values = rng.uniform(lo, hi, size=shape)
    elif kind == "random_normal":
        values = rng.normal(spec.get("mean", 0.0), spec.get("stddev", 1.0), size=shape)
    elif kind == "truncated_normal":
        values = _truncated(rng, shape, spec.get("mean", 0.0), spec.get("stddev", 1.0))
    elif kind == "variance_scaling":
        n = fan(shape, spec.get("mode", "fan_in"), spec.get("data_format", "channels_first"))
        scale = spec.get("scale", 1.0) / n
        distribution = spec.get("distribution", "truncated_normal")
        if distribution == "random_uniform":
            limit = math.sqrt(3.0 * scale)
            values = rng.uniform(-limit, limit, size=shape)
        elif distribution == "random_normal":
            values = rng.normal(0.0, math.sqrt(scale), size=shape)
        else:
            # The std of a normal cut at 2 stddev is 0.8796 of the uncut one; undo that (as TF and OneFlow).
            values = _truncated(rng, shape, 0.0, math.sqrt(scale) / 0.87962566103423978)
    else:
        raise ValueError(f"unknown initializer kind {kind!r} in {spec}")
    if np_dtype.kind not in "f":
        values = np.rint(values)
    return values.astype(np_dtype)


def _truncated(rng: np.random.Generator, shape: tuple[int, ...], mean: float, stddev: float) -> np.ndarray:
    """Draws beyond 2 redrawn, in index order, until none is: each round looks at the last round's
    redraws only (a whole-array scan per round took seconds for a BERT embedding)."""
    values = rng.standard_normal(size=shape)
    flat = values.reshape(-1)
    out = np.flatnonzero(np.abs(flat) > 2.0)
    while out.size:
        flat[out] = redrawn = rng.standard_normal(size=out.size)
        out = out[np.abs(redrawn) > 2.0]
    return mean + stddev * values
