"""The xDSL context that knows every dialect irflow prints."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func

from irflow.dialects.buffer import Buffer
from irflow.dialects.job import Job


def make_context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, Job, Buffer):
        ctx.load_dialect(dialect)
    return ctx
