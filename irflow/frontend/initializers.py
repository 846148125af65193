"""Variable initializers: OneFlow's constructors, and the sampling the runtime's VariableStore calls.

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
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, FloatAttr, IntegerAttr, StringAttr

Initializer = dict[str, Any]

_FORMATS = {"": "channels_first", "NCHW": "channels_first", "NCW": "channels_first", "NCDHW": "channels_first",
            "NHWC": "channels_last", "NWC": "channels_last", "NDHWC": "channels_last",
            "channels_first": "channels_first", "channels_last": "channels_last"}  # fmt: skip
_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("truncated_normal", "random_normal", "random_uniform")


def constant_initializer(value: float = 0.0, dtype: object = None) -> Initializer:
    return {"kind": "constant", "value": float(value)}


def zeros_initializer(dtype: object = None) -> Initializer:
    return constant_initializer(0.0)


def ones_initializer(dtype: object = None) -> Initializer:
    return constant_initializer(1.0)


def random_uniform_initializer(minval: float = 0.0, maxval: float = 1.0, dtype: object = None) -> Initializer:
    if not minval <= maxval:
        raise ValueError(f"random_uniform_initializer: minval {minval} > maxval {maxval}")
    return {"kind": "random_uniform", "minval": float(minval), "maxval": float(maxval)}


def random_normal_initializer(
    mean: float = 0.0, stddev: float = 1.0, seed: int | None = None, dtype: object = None
) -> Initializer:
    return _seeded({"kind": "random_normal", "mean": float(mean), "stddev": _positive(stddev)}, seed)


def truncated_normal_initializer(mean: float = 0.0, stddev: float = 1.0) -> Initializer:
    return {"kind": "truncated_normal", "mean": float(mean), "stddev": _positive(stddev)}


def truncated_normal(stddev: float = 1.0) -> Initializer:
    """OneFlow's `flow.truncated_normal(stddev)`: mean 0, cut at two standard deviations."""
    return truncated_normal_initializer(0.0, stddev)


def variance_scaling_initializer(
    scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal", data_format: str = ""
) -> Initializer:
    if mode not in _MODES:
        raise ValueError(f"variance_scaling_initializer: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(
            f"variance_scaling_initializer: distribution must be one of {', '.join(_DISTRIBUTIONS)}, got {distribution!r}"
        )
    return {
        "kind": "variance_scaling",
        "scale": _positive(scale),
        "mode": mode,
        "distribution": distribution,
        "data_format": _format(data_format),
    }


def xavier_uniform_initializer(data_format: str = "") -> Initializer:
    return variance_scaling_initializer(1.0, "fan_avg", "random_uniform", data_format)


def xavier_normal_initializer(data_format: str = "") -> Initializer:
    return variance_scaling_initializer(1.0, "fan_avg", "random_normal", data_format)


glorot_uniform_initializer = xavier_uniform_initializer
glorot_normal_initializer = xavier_normal_initializer

_GAINS = {"sigmoid": 1.0, "linear": 1.0, "conv2d": 1.0, "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0)}


def kaiming_initializer(
    shape: Sequence[int],
    distribution: str = "random_normal",
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    negative_slope: float = 0.0,
    data_format: str = "NCHW",
) -> Initializer:
    """He initialization for a variable of `shape`, computed here as OneFlow does (std = gain / sqrt(fan))."""
    if nonlinearity == "leaky_relu":
        gain = math.sqrt(2.0 / (1.0 + negative_slope**2))
    elif nonlinearity in _GAINS:
        gain = _GAINS[nonlinearity]
    else:
        known = ", ".join([*_GAINS, "leaky_relu"])
        raise ValueError(f"kaiming_initializer: unknown nonlinearity {nonlinearity!r}, expected one of {known}")
    if mode not in _MODES:
        raise ValueError(f"kaiming_initializer: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    std = gain / math.sqrt(fan(tuple(shape), mode, _format(data_format)))
    if distribution == "random_normal":
        return random_normal_initializer(0.0, std)
    if distribution == "random_uniform":
        bound = math.sqrt(3.0) * std
        return random_uniform_initializer(-bound, bound)
    raise ValueError(f"kaiming_initializer: distribution must be random_normal or random_uniform, got {distribution!r}")


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
    spec = {k: _python(v) for k, v in init.items()}
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
    values = rng.standard_normal(size=shape)
    while True:
        out = np.abs(values) > 2.0
        if not out.any():
            break
        values[out] = rng.standard_normal(size=int(out.sum()))
    return mean + stddev * values


def _python(value: Any) -> Any:
    """An initializer entry as Python: accept both the dict built here and the IR's DictionaryAttr entries."""
    if isinstance(value, StringAttr):
        return value.data
    if isinstance(value, (FloatAttr, IntegerAttr)):
        return value.value.data
    if isinstance(value, DenseArrayBase):
        return list(value.get_values())
    if isinstance(value, ArrayAttr):
        return [_python(v) for v in value.data]
    if isinstance(value, DictionaryAttr):
        return {k: _python(v) for k, v in value.data.items()}
    return value


def _seeded(init: Initializer, seed: int | None) -> Initializer:
    if seed is not None:
        init["seed"] = int(seed)
    return init


def _positive(value: float) -> float:
    if not value > 0:
        raise ValueError(f"expected a positive standard deviation or scale, got {value}")
    return float(value)


def _format(data_format: str) -> str:
    if data_format not in _FORMATS:
        raise ValueError(f"unknown data_format {data_format!r}, expected one of {', '.join(repr(f) for f in _FORMATS)}")
    return _FORMATS[data_format]
