"""Planner inputs for tests and benchmarks: generated instances and the shared CSV profiles."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from irflow.memplan.problem import Buffer


def read_profile(path: str | Path) -> list[Buffer]:
    """Buffers of a CSV `id,lower,upper,size` whose lifetime [lower, upper) excludes upper."""
    rows = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(1, 2, 3), dtype=np.int64, ndmin=2)
    return [Buffer(size=s, first=lo, last=up - 1) for lo, up, s in rows.tolist()]


def tiled(n: int, seed: int = 0, height: int = 1 << 20) -> list[Buffer]:
    """`n` buffers that tile a (4n steps) x `height` rectangle, shuffled.

    Guillotine cuts of random rectangles at random places, alternating
    direction at random: every step is fully loaded, so the lower bound and
    the optimum are both `height`, and fragmentation is all a planner's own.
    """
    rng = np.random.default_rng(seed)
    rects = [(0, 4 * n, 0, height)]  # [t0, t1) x [y0, y1)
    while len(rects) < n:
        k = int(rng.integers(len(rects)))
        t0, t1, y0, y1 = rects[k]
        if t1 - t0 > 1 and (y1 - y0 == 1 or rng.random() < 0.5):
            cut = int(rng.integers(t0 + 1, t1))
            rects[k], new = (t0, cut, y0, y1), (cut, t1, y0, y1)
        elif y1 - y0 > 1:
            cut = int(rng.integers(y0 + 1, y1))
            rects[k], new = (t0, t1, y0, cut), (t0, t1, cut, y1)
        else:
            continue
        rects.append(new)
    order = rng.permutation(n)
    return [Buffer(size=y1 - y0, first=t0, last=t1 - 1) for t0, t1, y0, y1 in (rects[i] for i in order)]


def training(n: int, seed: int = 0) -> list[Buffer]:
    """About `n` buffers shaped like one training step of a deep, irregular network.

    Per layer: an activation kept from its forward op to its backward op,
    short-lived temporaries in both passes, an input gradient handed to the
    next backward op, and a weight gradient kept until the optimizer step at
    the end; sizes log-uniform over four decades, as layer widths vary.
    """
    rng = np.random.default_rng(seed)
    layers = max(1, n // 6)
    end = 2 * layers  # the optimizer step
    width = np.exp(rng.uniform(np.log(1 << 10), np.log(1 << 24), layers)).astype(np.int64)
    out: list[Buffer] = []
    for k in range(layers):
        fwd, bwd, w = k, end - 1 - k, int(width[k])
        out.append(Buffer(w, fwd, bwd))  # saved activation
        out.append(Buffer(int(w * rng.uniform(0.5, 2)), fwd, fwd))  # forward workspace
        used_until = min(fwd + int(rng.integers(1, 4)), end)
        out.append(Buffer(int(w * rng.uniform(0.1, 1)), fwd, used_until))  # an output used a few ops on
        out.append(Buffer(w, bwd, bwd + 1))  # input gradient
        out.append(Buffer(int(w * rng.uniform(0.5, 2)), bwd, bwd))  # backward workspace
        out.append(Buffer(int(w * rng.uniform(0.05, 0.5)), bwd, end))  # weight gradient
    return out[:n]


def mixed(n: int, seed: int = 0) -> list[Buffer]:
    """`n` buffers over n/2 steps: 70% live a few steps, 25% up to 5% of the run, 5% up to all of it."""
    rng = np.random.default_rng(seed)
    steps = max(1, n // 2)
    first = rng.integers(0, steps, n)
    kind = rng.random(n)
    length = np.where(
        kind < 0.7,
        rng.geometric(0.5, n) - 1,
        np.where(kind < 0.95, rng.integers(0, max(1, steps // 20), n), rng.integers(0, steps, n)),
    )
    last = np.minimum(first + length, steps - 1)
    size = np.exp(rng.uniform(np.log(64), np.log(1 << 20), n)).astype(np.int64)
    return [Buffer(*b) for b in zip(size.tolist(), first.tolist(), last.tolist())]
