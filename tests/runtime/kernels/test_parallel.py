"""kernels/parallel.py: chunks pulled by the threads or cut into per-thread parts, BLAS on one thread meanwhile."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from irflow.runtime import threads
from irflow.runtime.kernels import parallel


@pytest.mark.parametrize("count, parts", [(5, 2), (5, 3), (2, 3), (1, 4), (7, 1)])
def test_spans_cover_the_chunks_in_order_and_evenly(count, parts) -> None:
    cut = parallel.spans(count, parts)
    assert [i for span in cut for i in span] == list(range(count))
    assert len(cut) == min(count, parts)
    assert max(map(len, cut)) - min(map(len, cut)) <= 1


@pytest.mark.parametrize("count, most, chunks", [(100, 74, 2), (100, 9, 12), (100, 7, 16), (7, 100, 2), (5, 1, 5), (1, 3, 1), (0, 4, 0)])
def test_even_chunks_are_few_even_and_balanced(count, most, chunks) -> None:
    """At most `most` items each, as few chunks as can be but an even number, so 2 threads get equal halves."""
    cut = parallel.even_chunks(count, most)
    assert [i for chunk in cut for i in chunk] == list(range(count))
    assert len(cut) == chunks
    assert all(0 < len(chunk) <= most for chunk in cut)
    if chunks % 2 == 0 and chunks:
        halves = [sum(len(cut[i]) for i in span) for span in parallel.spans(chunks, 2)]
        assert max(halves) - min(halves) <= 1


def test_parts_run_on_their_own_threads_with_one_blas_thread() -> None:
    seen: dict[int, tuple[int, list[int]]] = {}
    barrier = threading.Barrier(3, timeout=10)  # every part must be running at once to pass it

    def part(index: int):
        def run() -> None:
            barrier.wait()
            seen[index] = (threading.get_ident(), [i["num_threads"] for i in threads.blas_info()])

        return run

    try:
        threads.set_cpu_thread_num(3)
        parallel.run_parts([part(0), part(1), part(2)])
        assert seen[0][0] == threading.get_ident()
        assert len({ident for ident, _ in seen.values()}) == 3
        assert all(counts == [1] * len(counts) for _, counts in seen.values())
        assert all(i["num_threads"] == 1 for i in threads.blas_info())
    finally:
        threads.set_cpu_thread_num(None)


def test_an_error_in_a_part_is_raised_after_every_part_finished() -> None:
    finished = []

    def slow() -> None:
        threading.Event().wait(0.05)
        finished.append("slow")

    def failing() -> None:
        raise RuntimeError("part 1 failed")

    with pytest.raises(RuntimeError, match="part 1 failed"):
        parallel.run_parts([slow, failing])
    assert finished == ["slow"]


def test_parts_run_here_while_another_thread_holds_the_workers() -> None:
    """Jobs called from two threads: the second kernel to split runs its parts in its own thread, one after another."""
    holding, released = threading.Event(), threading.Event()
    ran_in: list[int] = []

    def hold() -> None:
        holding.set()
        assert released.wait(10)

    other = threading.Thread(target=parallel.run_parts, args=([hold, lambda: None],))
    other.start()
    try:
        assert holding.wait(10)
        parallel.run_parts([lambda: ran_in.append(threading.get_ident())] * 3)
        assert ran_in == [threading.get_ident()] * 3
    finally:
        released.set()
        other.join(10)
    worker_ran = threading.Event()  # part 0 waits for part 1, so part 1 cannot be taken back: a worker runs it
    parallel.run_parts([lambda: worker_ran.wait(10), lambda: (ran_in.append(threading.get_ident()), worker_ran.set())])
    assert ran_in[-1] != threading.get_ident()  # the workers are free again


def test_a_part_the_worker_has_not_begun_runs_in_the_waiting_thread() -> None:
    """As when the worker's core is busy: the caller, done with its own part, runs the worker's part itself."""
    worker = parallel._Worker()
    ran_in: list[int] = []
    worker._part = lambda: ran_in.append(threading.get_ident())  # handed over; the worker not woken yet
    assert worker.finish() is None
    assert ran_in == [threading.get_ident()]
    worker._part = lambda: 1 / 0
    assert isinstance(worker.finish(), ZeroDivisionError)  # an error comes back, as from the worker
    began = threading.Event()
    worker.start(lambda: (began.set(), ran_in.append(threading.get_ident()), threading.Event().wait(0.05)))
    assert began.wait(10)
    assert worker.finish() is None  # begun by the worker: waited for
    assert len(ran_in) == 2 and ran_in[1] != threading.get_ident()


def test_many_short_kernels_run_every_part_exactly_once() -> None:
    """Parts so short that the caller often takes one back while its worker is waking: none lost, none run twice."""
    counts = [0, 0, 0]

    def part(i: int):
        return lambda: counts.__setitem__(i, counts[i] + 1)  # each index written by one thread per kernel

    for _ in range(3000):
        parallel.run_parts([part(0), part(1), part(2)])
    assert counts == [3000, 3000, 3000]


def test_split_builds_one_plan_per_thread_count_and_combines_in_part_order() -> None:
    out = np.zeros(4)
    order: list[range] = []

    def part(span: range):
        order.append(span)
        return [lambda: out.__setitem__(slice(span.start, span.stop), 1)], span.start

    split = parallel.Split(np, 4, [lambda: out.fill(0)], part, lambda starts: [lambda: out.__setitem__(0, len(starts))])
    try:
        threads.set_cpu_thread_num(2)
        split()
        split()
    finally:
        threads.set_cpu_thread_num(None)
    assert set(split.plans) == {1, 2}
    assert order == [range(0, 4), range(0, 2), range(2, 4)]
    np.testing.assert_array_equal(out, [2, 1, 1, 1])


def test_a_forked_child_runs_parts_on_a_pool_of_its_own() -> None:
    """The parent's pool threads do not exist in a fork; the child must not wait on them."""
    import os
    import signal
    import time

    parallel.run_parts([lambda: None, lambda: None])  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:  # the child: exit 0 once two parts have run, 1 if they fail
        code = 1
        try:
            parallel.run_parts([lambda: None, lambda: None])
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung running two parts")


def test_pulled_runs_every_chunk_once_each_with_its_lanes_scratch() -> None:
    """Lanes are built as thread counts need them; every chunk runs once per call, on the lane of the thread
    that took it, between the prologue and the finish."""
    events: list[str] = []
    ran: list[tuple[int, int]] = []  # (chunk, lane)
    lanes = 0

    def lane():
        nonlocal lanes
        own, lanes = lanes, lanes + 1
        return lambda index: [lambda: ran.append((index, own))]

    pulled = parallel.Pulled(np, 9, [lambda: events.append("prologue")], lane, [lambda: events.append(f"finish {len(ran)}")])
    assert lanes == 1  # lane 0 comes with the kernel
    try:
        threads.set_cpu_thread_num(3)
        for _ in range(200):
            ran.clear()
            pulled()
            assert sorted(index for index, _ in ran) == list(range(9))
    finally:
        threads.set_cpu_thread_num(None)
    assert lanes == 3 and events[-2:] == ["prologue", "finish 9"]
    ran.clear()
    pulled()  # one thread: lane 0, in chunk order
    assert ran == [(index, 0) for index in range(9)]


def test_pulled_gives_a_slow_thread_fewer_chunks() -> None:
    """The point of pulling: a thread held up (here, lane 0's first chunk waits for lane 1 to have run three)
    does not leave the others idle, as a fixed half of the chunks each would."""
    three_done = threading.Event()
    by_lane: dict[int, list[int]] = {0: [], 1: []}
    lanes = 0

    def lane():
        nonlocal lanes
        own, lanes = lanes, lanes + 1

        def chunk(index: int) -> list:
            def run() -> None:
                if own == 0 and not by_lane[0]:
                    three_done.wait(10)
                by_lane[own].append(index)
                if len(by_lane[1]) >= 3:
                    three_done.set()

            return [run]

        return chunk

    pulled = parallel.Pulled(np, 8, [], lane)
    try:
        threads.set_cpu_thread_num(2)
        pulled()
    finally:
        threads.set_cpu_thread_num(None)
    assert sorted(by_lane[0] + by_lane[1]) == list(range(8))
    assert len(by_lane[1]) >= 3 and len(by_lane[0]) < 4


def test_pulled_raises_a_chunks_error_after_every_chunk_ran() -> None:
    ran: list[int] = []

    def lane():
        def chunk(index: int) -> list:
            def run() -> None:
                ran.append(index)
                if index == 2:
                    raise RuntimeError("chunk 2 failed")

            return [run]

        return chunk

    pulled = parallel.Pulled(np, 6, [], lane)
    try:
        threads.set_cpu_thread_num(2)
        with pytest.raises(RuntimeError, match="chunk 2 failed"):
            pulled()
    finally:
        threads.set_cpu_thread_num(None)
    assert sorted(ran) == list(range(6))  # the other thread, or the caller taking its part back, ran the rest


def test_chunk_sum_adds_the_slots_in_chunk_order() -> None:
    """Bit for bit the left-to-right sum, into a strided view: so a reduction does not depend on the thread count."""
    rng = np.random.default_rng(0)
    slots = (rng.standard_normal((13, 3, 40)) * 10.0 ** rng.uniform(-4, 4, (13, 3, 40))).astype(np.float32)
    expected = slots[0].copy()
    for slot in slots[1:]:
        expected += slot
    out = np.empty((40, 3), np.float32).T
    parallel.chunk_sum(np, slots, out)()
    np.testing.assert_array_equal(out, expected)


def test_reduction_groups_bound_the_slots_memory() -> None:
    """A slot per chunk while they fit in _SLOTS_BYTES; else groups of consecutive chunks, _MIN_GROUPS at least."""
    assert parallel.reduction_groups(26, 9 << 10) == [range(i, i + 1) for i in range(26)]
    big = parallel.reduction_groups(50, 9_437_184)  # a 512-channel 3x3 filter gradient in float32
    assert len(big) == parallel._MIN_GROUPS and [i for g in big for i in g] == list(range(50))
    middle = parallel.reduction_groups(50, parallel._SLOTS_BYTES // 10)
    assert len(middle) == 10 and max(map(len, middle)) - min(map(len, middle)) <= 1
    assert parallel.reduction_groups(0, 8) == []


def test_pulled_sum_adds_each_groups_terms_then_the_groups_in_order(monkeypatch) -> None:
    """The same bits at 1 and 3 threads: within a group its chunks' terms in order, then the groups in order."""
    monkeypatch.setattr(parallel, "_SLOTS_BYTES", 0)  # 4 groups of 7 chunks: 1, 2, 2, 2
    rng = np.random.default_rng(3)
    terms = (rng.standard_normal((7, 5)) * 10.0 ** rng.uniform(-6, 6, (7, 5))).astype(np.float32)

    def lane():
        return lambda index, into: [lambda: np.copyto(into, terms[index])]

    out = np.empty(5, np.float32)
    reduction = parallel.pulled_sum(np, 7, (5,), np.dtype(np.float32), lane, out)
    groups = [terms[0], terms[1] + terms[2], terms[3] + terms[4], terms[5] + terms[6]]
    expected = ((groups[0] + groups[1]) + groups[2]) + groups[3]
    reduction()
    np.testing.assert_array_equal(out, expected)
    try:
        threads.set_cpu_thread_num(3)
        for _ in range(50):
            out.fill(0)
            reduction()
            np.testing.assert_array_equal(out, expected)
    finally:
        threads.set_cpu_thread_num(None)
