"""flow.watch and flow.watch_diff: see a Blob's value, or its gradient, on every call, through a handler.

The watched Blob becomes a hidden extra output of the job; after each call the
handler gets its value, converted as the handler's annotation says
(`tp.Numpy` for the array, `tp.ListNumpy` for one array per device). A watched
gradient is a `job.diff` of the Blob, which the autodiff pass replaces by the
gradient of the train job's loss (through its mean, as minimize uses it).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from irflow import typing as tp
from irflow.dialects import job
from irflow.frontend.blob import Blob
from irflow.frontend.locations import fail
from irflow.frontend.tracing import Trace, build, current, own_value


def watch(blob_watched: Blob, handler_or_prompt: Callable[[Any], Any] | str | None = None) -> None:
    """Call `handler(value)` with `blob_watched`'s value on each call; a string (or None) prints it instead."""
    what = "flow.watch"
    trace = current(what)
    own_value(trace, blob_watched, what)
    _register(trace, blob_watched, handler_or_prompt, what)


def _register(trace: Trace, blob: Blob, handler_or_prompt: Callable[[Any], Any] | str | None, what: str) -> None:
    """Add `blob` to the job's hidden outputs with its handler; `what` is the API the user called, for messages."""
    if handler_or_prompt is None or isinstance(handler_or_prompt, str):
        prompt = handler_or_prompt or blob.name
        trace.watches.append((blob, lambda value: print(prompt, value), "numpy"))
        return
    handler = handler_or_prompt
    if not callable(handler):
        fail(f"{what}: the handler must be callable, got {handler!r}")
    trace.watches.append((blob, handler, _kind(handler, what)))


def watch_diff(blob_watched: Blob, handler_or_prompt: Callable[[Any], Any] | str | None = None) -> None:
    """Call `handler(gradient)` with the loss's gradient with respect to `blob_watched` on each call of a train job."""
    what = "flow.watch_diff"
    trace = current(what)
    own_value(trace, blob_watched, what)
    if trace.job_type != "train":
        fail(f"{what}: only a train job has gradients; '{trace.name}' is a {trace.job_type} job")
    if not blob_watched.dtype.is_floating_point:
        fail(f"{what}: Blob '{blob_watched.name}' is {blob_watched.dtype.name} and has no gradient")
    diff = build(job.DiffOp, [blob_watched], None, f"{blob_watched.name}_diff", what)
    _register(trace, diff, handler_or_prompt, what)


def _kind(handler: Callable[..., Any], what: str) -> str:
    try:
        params = list(inspect.signature(handler).parameters.values())
        hints = typing.get_type_hints(handler)
    except (TypeError, ValueError, NameError):
        return "numpy"
    if len(params) != 1:
        fail(f"{what}: the handler must take one argument (the watched value), it takes {len(params)}")
    annotation = hints.get(params[0].name, params[0].annotation)
    if annotation is inspect.Parameter.empty:
        fail(f"{what}: annotate the handler's argument with tp.Numpy or tp.ListNumpy, e.g. def handler(y: tp.Numpy)")
    if annotation not in (tp.Numpy, tp.ListNumpy):
        fail(f"{what}: the handler's argument must be annotated tp.Numpy or tp.ListNumpy, got {annotation!r}")
    return tp.LEAVES[annotation]
