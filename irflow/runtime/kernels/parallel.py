"""Running a kernel's batch chunks on irflow's CPU threads (`flow.config.cpu_thread_num` > 1).

OpenBLAS's own threads split every GEMM and meet after each one, and between
GEMMs they busy-wait; on a shared machine a meeting waits for the thread that
lost its core, and the waiting threads take cores from the rest of the step
(LeNet's conv2 filter gradient: 27 ms with one BLAS thread, 248 ms with two,
at load ~2 on 2 cores). Kernels with independent chunks of the batch instead
run them on irflow's threads, with scratch buffers of their own, while BLAS
stays on one thread (runtime/threads.py): the threads meet once per kernel,
and an idle one sleeps.

`Pulled` (the im2col, shifted-rows and Winograd convolutions, batch
normalization, pooling): the threads take the chunks one at a time from a
shared counter, each running a chunk with its own lane of scratch, so a
thread that runs slower takes fewer chunks. On a 2-vCPU VM (Zen 3), two equal
halves of a convolution took 6.9 and 15.4 ms at times, and over the 39 splits
of a ResNet-BN step at 2 threads the later half ended 14-32 ms after the
other in all (two runs).
A reduction writes one slot per chunk (per group of consecutive chunks where
slots for all would take too much memory), added in order after the chunks,
so results do not depend on which thread ran which chunk, nor on the thread count.

`Split` (GEMMs cut in two, the DFT convolution's batched transforms, optimizer
updates over contiguous slices): one contiguous part of the chunks per
thread, built as one piece of work; a
part's chunks depend only on the thread count, so results are the same from
call to call (a reduction over the parts adds them in part order).
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType
from typing import Any

from irflow.runtime import threads

from . import workspace
from .registry import Array, Run, sequence


class _Worker:
    """A thread that runs one part at a time, handed over through locks; a part it has not begun yet
    is taken back by the caller that waits for it.

    A lock released by one thread and acquired by another is the cheapest wake-up CPython
    has: a part's round trip took ~30 us this way against ~55 us through a ThreadPoolExecutor's
    queue and future (no-op parts, 2 cores at load ~5). Taking a part back bounds a kernel at
    about its one-thread time when the other core is busy with another process: the caller,
    done with its own part, runs the waiting one instead of sleeping until the worker gets a core.
    """

    def __init__(self) -> None:
        self._go, self._done, self._claim = threading.Lock(), threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._part: Run | None = None
        self._woken = False  # _go released, and the worker not past its next claim yet
        self._error: BaseException | None = None
        threading.Thread(target=self._serve, name="irflow-kernel", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            with self._claim:
                part, self._part, self._woken = self._part, None, False
            if part is None:  # taken back: the caller ran it and does not wait
                continue
            try:
                part()
            except BaseException as error:  # handed to the thread that waits, raised there
                self._error = error
            self._done.release()

    def start(self, part: Run) -> None:
        with self._claim:
            self._part, self._error = part, None
            if not self._woken:  # else the worker, woken before, has still to claim: it takes this part
                self._woken = True
                self._go.release()

    def finish(self) -> BaseException | None:
        """The part's error, if it raised one, once it has run: here, if the worker has not begun it."""
        with self._claim:
            part, self._part = self._part, None
            if part is not None and self._go.acquire(blocking=False):
                self._woken = False  # the wake-up withdrawn before the worker saw it
        if part is None:
            self._done.acquire()
            return self._error
        try:
            part()
        except BaseException as error:
            return error
        return None


_workers: list[_Worker] = []
_in_use = threading.Lock()  # held while a kernel's parts run on the workers


def _forget_workers() -> None:
    """In a forked child the workers' threads do not exist: start afresh rather than wait on them."""
    global _workers, _in_use
    _workers, _in_use = [], threading.Lock()


os.register_at_fork(after_in_child=_forget_workers)


def thread_count(xp: ModuleType) -> int:
    """Threads a CPU kernel may split over now; 1 on a GPU, where the device is the parallelism."""
    return threads.cpu_thread_num() if xp.__name__ == "numpy" else 1


def spans(count: int, parts: int) -> list[range]:
    """`range(count)` cut into `parts` contiguous, non-empty spans differing in length by at most one."""
    parts = max(1, min(parts, count))
    cuts = [count * p // parts for p in range(parts + 1)]
    return [range(a, b) for a, b in zip(cuts, cuts[1:])]


def even_chunks(count: int, most: int) -> list[range]:
    """`range(count)` in `spans` of at most `most` items, as few as can be but an even number where count allows.

    A Split's parts are whole chunks: in chunks of `most` and a remainder, 100 images in chunks of
    at most 74 gave one of 2 threads 74 images and the other 26; even spans give each 50.
    """
    chunks = -(-count // max(1, most))
    return spans(count, min(count, chunks + chunks % 2)) if count else []


def run_parts(parts: Sequence[Run]) -> None:
    """Run parts[0] here and the others on the worker threads; wait for all of them.

    The first error raised by a part is raised here, after every part has finished. While another
    thread's kernel holds the workers (jobs run from two threads), the parts run here, one after another.
    """
    if len(parts) == 1 or not _in_use.acquire(blocking=False):
        for part in parts:
            part()
        return
    try:
        while len(_workers) < len(parts) - 1:
            _workers.append(_Worker())
        started: list[_Worker] = []
        try:
            for worker, part in zip(_workers, parts[1:]):
                worker.start(part)
                started.append(worker)
            parts[0]()
        finally:
            errors = [worker.finish() for worker in started]
    finally:
        _in_use.release()
    for error in errors:
        if error is not None:
            raise error


def summed(xp: ModuleType, finish: Callable[[Any], list[Run]]) -> Callable[[list[Any]], list[Run]]:
    """A `combine` for parts whose values are partial sums: the others added into the first, in part order
    (so results do not depend on which thread finished first), then `finish(total)`."""

    def combine(totals: list[Any]) -> list[Run]:
        first, *rest = totals
        return [*(partial(xp.add, first, other, out=first) for other in rest), *finish(first)]

    return combine


class Split:
    """A kernel's run: `prologue`, then its chunks in one part per thread, then the steps that combine the parts.

    `part(span)` builds the steps for the chunks in `span`, with scratch of its own, and a value
    for `combine` (a part's partial sum, say); `combine(values)` builds the finishing steps from
    the parts' values, in part order. Each thread count's plan is built on its first use and kept.
    """

    def __init__(
        self,
        xp: ModuleType,
        chunks: int,
        prologue: Sequence[Run],
        part: Callable[[range], tuple[list[Run], Any]],
        combine: Callable[[list[Any]], list[Run]] = lambda values: [],
    ):
        self.xp, self.chunks, self.prologue, self.part, self.combine = xp, chunks, sequence(prologue), part, combine
        self.plans: dict[int, Run] = {}
        self.claim = workspace.held()  # a later thread count's plan takes its scratch from the kernel's claim
        self.plan(1)  # the one-thread plan at build, as every kernel builds its steps then

    def plan(self, count: int) -> Run:
        run = self.plans.get(count)
        if run is None:
            with workspace.building(self.claim):
                built = []
                for index, span in enumerate(spans(self.chunks, count)):
                    with workspace.lane(index):  # the parts run at once: each its own lane's scratch
                        built.append(self.part(span))
                finish = sequence(self.combine([value for _, value in built]))
            parts = [sequence(steps) for steps, _ in built]
            prologue = self.prologue

            def run() -> None:
                prologue()
                run_parts(parts)
                finish()

            self.plans[count] = run
        return run

    def __call__(self) -> None:
        self.plan(thread_count(self.xp))()


# A reduction's slots take at most this many bytes in all, unless that leaves fewer than _MIN_GROUPS of them.
_SLOTS_BYTES = 1 << 23
_MIN_GROUPS = 4


def reduction_groups(chunks: int, slot_bytes: int) -> list[range]:
    """Consecutive chunks that share one slot of a reduction, each group summed in order by the thread that takes it.

    A slot per chunk would cost chunks x the result: for a 512-channel 3x3 filter gradient (9.4 MB) in
    50 chunks, 472 MB. Groups fixed here, whatever the thread count, keep results the same at every count.
    """
    return spans(chunks, min(chunks, max(_MIN_GROUPS, _SLOTS_BYTES // max(1, slot_bytes)))) if chunks else []


def chunk_sum(xp: ModuleType, slots: Array, out: Array) -> Run:
    """out = the chunks' slots (slots[i] for chunk i) added in chunk order, as one reduction over the first axis."""
    return partial(xp.sum, slots, axis=0, out=out)


class Pulled:
    """A kernel's run: `prologue`, then `chunks` independent chunks taken one at a time by the threads, then `finish`.

    `lane()` makes one thread's scratch (`workspace.scratch`, from that lane's region) and returns the
    steps of chunk i with it; every chunk must write only its own part of the outputs (a reduction: a
    slot of its own, which `finish` adds in chunk order). Lane 0 is built with the kernel; another when
    a thread count first needs it, under the kernel's claim.
    """

    def __init__(
        self,
        xp: ModuleType,
        chunks: int,
        prologue: Sequence[Run],
        lane: Callable[[], Callable[[int], list[Run]]],
        finish: Sequence[Run] = (),
    ):
        self.xp, self.chunks, self.lane = xp, chunks, lane
        self.prologue, self.finish = sequence(prologue), sequence(finish)
        self.lanes: list[list[Run]] = []
        self.claim = workspace.held()
        self._lanes(1)

    def _lanes(self, count: int) -> list[list[Run]]:
        while len(self.lanes) < count:
            with workspace.building(self.claim), workspace.lane(len(self.lanes)):
                steps = self.lane()
                self.lanes.append([sequence(steps(index)) for index in range(self.chunks)])
        return self.lanes[:count]

    def __call__(self) -> None:
        self.prologue()
        lanes = self._lanes(max(1, min(thread_count(self.xp), self.chunks)))
        if len(lanes) == 1:
            for chunk in lanes[0]:
                chunk()
        else:
            taken = itertools.count()
            run_parts([partial(_pull, lane, taken) for lane in lanes])
        self.finish()


def _pull(lane: list[Run], taken: itertools.count[int]) -> None:
    """Run the chunks not yet taken, one at a time (`next` on a shared count is atomic under the GIL)."""
    for index in taken:
        if index >= len(lane):
            return
        lane[index]()


def pulled_sum(
    xp: ModuleType,
    chunks: int,
    shape: tuple[int, ...],
    dtype: Any,
    lane: Callable[[], Callable[[int, Array], list[Run]]],
    out: Array,
    finish: Sequence[Run] = (),
) -> Pulled:
    """A `Pulled` reduction: `lane()(i, into)` are the steps writing chunk i's term (of `shape`) to `into`;
    the terms of each of `reduction_groups` go to its slot, in chunk order, and the slots to `out`, then `finish`."""
    groups = reduction_groups(chunks, math.prod(shape) * dtype.itemsize)
    slots = workspace.scratch(xp, (len(groups), *shape), dtype)  # each written by its group's first term
    shared = any(len(group) > 1 for group in groups)

    def group_lane() -> Callable[[int], list[Run]]:
        term, spare = lane(), workspace.scratch(xp, shape, dtype) if shared else None

        def steps(index: int) -> list[Run]:
            first, *rest = groups[index]
            built = term(first, slots[index])
            for chunk in rest:
                built += [*term(chunk, spare), partial(xp.add, slots[index], spare, out=slots[index])]
            return built

        return steps

    return Pulled(xp, len(groups), [], group_lane, [chunk_sum(xp, slots, out), *finish])
