"""A memory-aware reordering of a buffer.program's schedule (plan-memory's `reorder` option).

List scheduling over the buffer dependence graph: an op may run once every op
that last wrote what it reads, or read or wrote what it writes, has run (RAW,
WAR, WAW).  Among the ready ops the one that frees the most bytes net of what
it starts keeping alive goes first, ties in program order, so the schedule
stays the traced one wherever memory does not care.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from irflow.dialects import buffer


def _storage(v: SSAValue) -> object:
    """Buffers that alias share a key: the same variable may be named by several ops, a buffer by its cuts."""
    v = buffer.storage_of(v)
    owner = v.owner
    if isinstance(owner, buffer.VariableOp):
        return ("variable", owner.var_name.data)
    return v


def _effects(op: Operation) -> tuple[list[object], list[object]]:
    if isinstance(op, buffer.BufferOp):
        return [_storage(v) for v in op.reads()], [_storage(v) for v in op.writes()]
    return [], []


def shorten_lifetimes(ops: Sequence[Operation]) -> list[Operation]:
    """A dependence-respecting order of `ops` that keeps fewer alloc'd bytes live at once."""
    n = len(ops)
    index = {op: i for i, op in enumerate(ops)}
    deps: list[set[int]] = [set() for _ in range(n)]
    last_write: dict[object, int] = {}
    reads_since: dict[object, list[int]] = {}
    uses: dict[object, int] = {}
    size: dict[object, int] = {}
    for i, op in enumerate(ops):
        reads, writes = _effects(op)
        for key in reads:
            if key in last_write:
                deps[i].add(last_write[key])
        for key in writes:
            if key in last_write:
                deps[i].add(last_write[key])
            deps[i].update(reads_since.get(key, ()))
        for key in reads:
            reads_since.setdefault(key, []).append(i)
        for key in writes:
            last_write[key] = i
            reads_since[key] = []
        for key in {*reads, *writes}:
            uses[key] = uses.get(key, 0) + 1
        for v in op.results:
            if isinstance(op, buffer.AllocOp):
                size[v] = buffer.nbytes(v.type)
        # Storage ops have no effects but must precede their users.
        for operand in op.operands:
            if operand.owner in index:
                deps[i].add(index[operand.owner])  # type: ignore[index]
        deps[i].discard(i)
    users: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    remaining = dict(uses)
    started: set[object] = set()

    def gain(i: int) -> int:
        reads, writes = _effects(ops[i])
        keys = {*reads, *writes}
        freed = sum(size.get(k, 0) for k in keys if remaining[k] == 1)
        new = sum(size.get(k, 0) for k in keys if k not in started)
        return freed - new

    ready = [(-gain(i), i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    order: list[Operation] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(ops[i])
        reads, writes = _effects(ops[i])
        for key in {*reads, *writes}:
            remaining[key] -= 1
            started.add(key)
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (-gain(j), j))
        # Gains of ready ops change as buffers die or start; refresh them (ready sets are small).
        ready = [(-gain(j), j) for _, j in ready]
        heapq.heapify(ready)
    assert len(order) == n, "the buffer dependence graph has a cycle"
    return order
