"""flow.watch: see a Blob's value on every call, through a handler.

The watched Blob becomes a hidden extra output of the job; after each call the
handler gets its value, converted as the handler's annotation says
(`tp.Numpy` for the array, `tp.ListNumpy` for one array per device).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from irflow import typing as tp
from irflow.frontend.blob import Blob
from irflow.frontend.tracing import current, fail, own_value


def watch(blob_watched: Blob, handler_or_prompt: Callable[[Any], Any] | str | None = None) -> None:
    """Call `handler(value)` with `blob_watched`'s value on each call; a string (or None) prints it instead."""
    what = "flow.watch"
    trace = current(what)
    own_value(trace, blob_watched, what)
    if handler_or_prompt is None or isinstance(handler_or_prompt, str):
        prompt = handler_or_prompt or blob_watched.name
        trace.watches.append((blob_watched, lambda value: print(prompt, value), "numpy"))
        return
    handler = handler_or_prompt
    if not callable(handler):
        fail(f"{what}: the handler must be callable, got {handler!r}")
    trace.watches.append((blob_watched, handler, _kind(handler, what)))


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
