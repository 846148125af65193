"""A kernel's algorithms, chosen by its heuristics or, where the job asks, by measuring them.

Which convolution algorithm is fastest depends on the machine and the thread count. On the
AMD EPYC (Zen 4, AVX-512) the heuristics were tuned on, Winograd ran ResNet-BN's 16- and
32-channel 3x3 convolutions fastest at 1 and 2 threads; on a Zen 3 (AVX2) one, im2col was as
fast at one thread and 1.3-2.2x faster at two, where Winograd's many small numpy calls wait for
each other's GIL (docs/kernels.md, "Measured algorithm choice"). So a job may ask for the choice
to be measured, as OneFlow's `function_config.cudnn_conv_heuristic_search_algo(False)` asks
cuDNN: each candidate runs on the kernel's own operands at its first run with a given thread
count (every candidate writes the same outputs, so that run's result stands), the fastest of a
few alternating rounds is kept, and the choice is remembered for the process by the kernel's
key (its kind, shapes, strides, dtypes, attributes and the thread count): the same job built
again runs the same algorithms. Only on the CPU: a GPU keeps the heuristics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType

from . import workspace
from .parallel import thread_count
from .registry import Run

# Alternating rounds per candidate after its first run; a candidate whose first run takes more than
# _HOPELESS times the fastest first run so far is not timed further (im2col's 1.3 ms against 24 ms by
# shifted rows for a 1-channel input), which bounds a search at a few runs of the fastest.
_ROUNDS, _HOPELESS = 3, 3.0

_searching: ContextVar[bool] = ContextVar("irflow_algorithm_search", default=False)
_varying: ContextVar[bool] = ContextVar("irflow_varying_sizes", default=False)
_chosen: dict[Hashable, str] = {}


@contextmanager
def search(enabled: bool) -> Iterator[None]:
    """Kernels built inside choose their algorithms by measuring them (`enabled`) or by their heuristics."""
    token = _searching.set(enabled)
    try:
        yield
    finally:
        _searching.reset(token)


def searching() -> bool:
    """Whether kernels built now measure their algorithms."""
    return _searching.get()


@contextmanager
def varying_sizes() -> Iterator[None]:
    """Kernels built inside are built again at other sizes, each build's scratch within the first one's (a
    dynamic job's variants, runtime/executor.py): their choices must not depend on the sizes."""
    token = _varying.set(True)
    try:
        yield
    finally:
        _varying.reset(token)


def sizes_vary() -> bool:
    """Whether kernels built now are built again at other sizes (`varying_sizes`)."""
    return _varying.get()


def chosen() -> dict[Hashable, str]:
    """The measured choices so far: kernel key (with the thread count last) -> algorithm."""
    return dict(_chosen)


def choose(xp: ModuleType, key: Hashable, candidates: Mapping[str, Callable[[], Run]], heuristic: str) -> Run:
    """The run of `candidates[heuristic]`, or where kernels measure (on the CPU, with a choice) of the fastest."""
    if len(candidates) == 1 or not searching() or xp.__name__ != "numpy":
        return candidates[heuristic]()
    return _Measured(xp, key, candidates, heuristic)


class _Measured:
    """A kernel's run that measures its candidates at its first run with each thread count, then runs the fastest."""

    def __init__(self, xp: ModuleType, key: Hashable, candidates: Mapping[str, Callable[[], Run]], heuristic: str):
        self.xp, self.key = xp, key
        # the heuristic's first: it wins ties, and the first runs' pruning measures against it early
        self.candidates = {heuristic: candidates[heuristic]} | dict(candidates)
        self.built: dict[str, Run] = {}
        self.runs: dict[int, Run] = {}  # thread count -> the chosen algorithm's run
        self.claim = workspace.held()  # the candidates, built at a run, take their scratch from the kernel's claim

    def __call__(self) -> None:
        count = thread_count(self.xp)
        run = self.runs.get(count)
        if run is None:
            run = self.runs[count] = self._build(self._choice(count))
            # the losers' scratch goes: only algorithms chosen for some thread count stay built
            self.built = {name: r for name, r in self.built.items() if r in self.runs.values()}
        run()

    def _build(self, name: str) -> Run:
        if name not in self.built:
            # built at a run, after the job's build: a kernel a candidate builds measures too
            with search(True), workspace.building(self.claim):
                self.built[name] = self.candidates[name]()
        return self.built[name]

    def _choice(self, count: int) -> str:
        key = (self.key, count)
        name = _chosen.get(key)
        if name is None:
            name = _chosen[key] = fastest({candidate: self._build(candidate) for candidate in self.candidates})
        return name


def fastest(runs: Mapping[str, Run], clock: Callable[[], float] = time.perf_counter) -> str:
    """The name of the fastest run: each run once, then the ones not hopeless in `_ROUNDS` alternating rounds,
    each keeping its least time (load from elsewhere only ever adds time); ties go to the earlier."""
    least: dict[str, float] = {}
    for name, run in runs.items():
        began = clock()
        run()
        least[name] = clock() - began
    first = min(least.values())
    timed = [name for name, t in least.items() if t <= _HOPELESS * first]
    for _ in range(_ROUNDS):
        for name in timed:
            began = clock()
            runs[name]()
            least[name] = min(least[name], clock() - began)
    return min(timed, key=lambda name: least[name])
