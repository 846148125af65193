"""Variable initializers as OneFlow spells them: each returns a plain dictionary.

The dictionary is stored on `job.variable` as its `initializer` property, so
that the IR alone says how a variable starts out; irflow/runtime/initializers.py
lists the kinds and draws the values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


from irflow.runtime.initializers import fan

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


def empty_initializer(dtype: object = None) -> Initializer:
    """OneFlow's initializer that leaves a variable's memory as it is: unspecified values, which zeros are."""
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
