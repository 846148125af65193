"""Building or rewriting a big module without Python's cyclic garbage collector.

IR is a graph of cycles (an op and its block, a value and its uses) that a
parse, a pass pipeline or an executor's binding makes by the hundred thousand
and frees little of. Each full collection walks every object alive, so the
collections that their allocations set off take time that grows with the heap
(a tenth of compiling a ResNet-50 train job). With collection paused the
cycles they do drop wait for the next collection after it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause cyclic garbage collection inside the block; a collector paused already stays so."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
