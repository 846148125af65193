"""Ctrl-C during a step takes effect at the step's end.

A step writes variables from its first kernel to its last (batch normalization's
moving statistics forward, the optimizer's updates after the backward pass), so
a KeyboardInterrupt raised between two kernels would leave a model half
updated: some weights a step ahead of the others, momentum ahead of its weight.
Copying every variable aside before each step would cost a train step a pass
over all its weights. Instead irflow's SIGINT handler, installed at the first
step run in the main thread, notes a signal that arrives during a step and
hands it on when the step ends to the handler it replaced (Python's, which
raises KeyboardInterrupt); outside steps it hands it on at once. A handler the
program sets later replaces irflow's, and then Ctrl-C acts at once again.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any


class _Handler:
    """The SIGINT handler: inside a step (`depth` > 0) it notes the signal, outside it hands it on."""

    def __init__(self, previous: Any):
        self.previous = previous
        self.depth = 0
        self.pending: tuple[FrameType | None] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.depth:
            self.pending = (frame,)
        else:
            self.hand_on(frame)

    def hand_on(self, frame: FrameType | None) -> None:
        if callable(self.previous):
            self.previous(signal.SIGINT, frame)
        elif self.previous == signal.SIG_DFL:  # the default ends the process: let it
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.raise_signal(signal.SIGINT)


_handler: _Handler | None = None


def _installed() -> _Handler | None:
    """irflow's handler, installed on first use; None off the main thread (only it receives signals and may
    set handlers), and where the handler in place was not set from Python (nothing to hand on to)."""
    global _handler
    if threading.current_thread() is not threading.main_thread():
        return None
    if _handler is None:
        previous = signal.getsignal(signal.SIGINT)
        if previous is None:
            return None
        _handler = _Handler(previous)
        signal.signal(signal.SIGINT, _handler)
    return _handler


def deferring(step: Callable[[], None]) -> None:
    """Run `step` with SIGINT held back until it returns or raises."""
    handler = _installed()
    if handler is None:
        step()
        return
    handler.depth += 1
    try:
        step()
    finally:
        handler.depth -= 1
        if not handler.depth and handler.pending is not None:
            (frame,), handler.pending = handler.pending, None
            handler.hand_on(frame)
