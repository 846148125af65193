"""SVG picture of a plan: steps across, bytes up, one rectangle per buffer.

The lower-bound profile (live bytes at each step) is drawn as a line, so the
gap between it and the rectangles is the waste; the title gives size / LB.
Hand-written SVG, no plotting dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from irflow.memplan.problem import Buffer, Plan, as_arrays, load_profile

_W, _H, _M = 800, 500, 40  # drawing size and margin, px


def plot_plan(buffers: Sequence[Buffer], plan: Plan, path: str | Path) -> None:
    """Write `plan` for `buffers` as an SVG file at `path`."""
    size, first, last = as_arrays(buffers)
    if len(size):
        t0, span = int(first.min()), int(last.max() + 1 - first.min())
        steps, load = load_profile(size, first, last)
    else:
        t0, span, steps, load = 0, 1, np.zeros(1, np.int64), np.zeros(1, np.int64)
    lb = int(load.max())
    top = max(plan.size, lb, 1)
    sx, sy = (_W - 2 * _M) / span, (_H - 2 * _M) / top

    def x(t: float) -> float:
        return _M + (t - t0) * sx

    def y(b: float) -> float:
        return _H - _M - b * sy

    ratio = f"{plan.size / lb:.4f}" if lb else "-"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}">',
        f"<title>{escape(f'arena {plan.size} B, lower bound {lb} B, ratio {ratio}')}</title>",
        (
            f'<text x="{_M}" y="{_M / 2}" font-family="sans-serif" font-size="14">'
            f"arena {plan.size:,} B / lower bound {lb:,} B = {ratio}</text>"
        ),
        f'<rect x="{_M}" y="{_M}" width="{_W - 2 * _M}" height="{_H - 2 * _M}" fill="none" stroke="#999"/>',
    ]
    for i, (nbytes, start, end, offset) in enumerate(zip(size.tolist(), first.tolist(), last.tolist(), plan.offsets)):
        if nbytes:
            hue = (i * 137) % 360  # golden-angle hues keep neighbours apart
            out.append(
                f'<rect x="{x(start):.2f}" y="{y(offset + nbytes):.2f}" width="{(end + 1 - start) * sx:.2f}" '
                f'height="{nbytes * sy:.2f}" fill="hsl({hue},60%,70%)" stroke="#333" stroke-width="0.3">'
                f"<title>buffer {i}</title></rect>"
            )
    # The profile is a step function: live bytes from each boundary to the next.
    points = [(x(t0), y(0))]
    for t, v in zip(steps.tolist(), load.tolist()):
        points += [(x(t), points[-1][1]), (x(t), y(v))]
    out.append(
        '<polyline fill="none" stroke="#c00" stroke-width="1.5" points="'
        + " ".join(f"{px:.2f},{py:.2f}" for px, py in points)
        + '"/>'
    )
    out.append("</svg>")
    Path(path).write_text("\n".join(out) + "\n")
