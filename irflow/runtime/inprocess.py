"""N simulated devices in one process: exact, deterministic, and unable to hang.

Every device runs the same executor code it would run under MPI; only the
driver differs. `InProcessGroup.run` interleaves the devices' step lists in one
thread: it runs each device until it calls a collective (the call only
registers the device's views and parks it), and when every member of a group
has called, performs the collective over all of them at once (reductions in
coordinate order, so results do not depend on timing) and lets them go on.
When no group can complete, the devices disagree (a different collective,
shape, dtype or order, or a device that finished its step): that is an
ExecutionError naming the op and its source line, at once, never a hang. See
docs/runtime.md for why this beats one thread per device here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from irflow.errors import ExecutionError
from irflow.runtime.communicator import Array, Communicator, Site


@dataclass
class _Call:
    """One device's side of a collective, parked until its group is complete."""

    kind: str
    rank: int
    group: tuple[int, ...]
    params: tuple[tuple[str, Any], ...]
    src: Array | None
    dst: Array | None
    site: Site

    def signature(self) -> tuple[Any, ...]:
        if self.kind == "exchange":  # what each rank sends differs; the pairs are checked when performed
            return ("exchange", self.group)
        if self.kind in ("send", "recv"):  # the two sides of one transfer: same pair, same shape and dtype
            return ("send/recv", self.group, _spec(self.src if self.src is not None else self.dst))
        if self.kind == "gather_rows":  # each device's own rows: the same counts, the dtype, not the shapes
            return (self.kind, self.group, self.params, str(self.src.dtype))  # type: ignore[union-attr]
        return (self.kind, self.group, self.params, *(_spec(a) for a in (self.src, self.dst)))

    def describe(self) -> str:
        params = "".join(f", {k}={v}" for k, v in self.params if k not in ("sends", "recvs"))
        arrays = "" if self.src is None else f" {_spec(self.src)} -> {_spec(self.dst)}"
        return f"{self.kind}{arrays} over ranks {list(self.group)}{params} ({self.site})"


def _spec(a: Array | None) -> tuple[tuple[int, ...], str] | None:
    return None if a is None else (tuple(a.shape), str(a.dtype))


class InProcessGroup:
    """The devices of one mesh, simulated in this process; `communicator(rank)` binds an executor."""

    def __init__(self, mesh: Sequence[int], xp: ModuleType = np):
        self.xp = xp
        self.communicators = [InProcessCommunicator(self, r, mesh) for r in range(_size(mesh))]
        self.mesh = self.communicators[0].mesh
        self.size = len(self.communicators)
        self.waiting: dict[int, _Call] = {}

    def communicator(self, rank: int) -> InProcessCommunicator:
        return self.communicators[rank]

    def park(self, call: _Call) -> None:
        if call.rank in self.waiting:
            raise ExecutionError(f"rank {call.rank} called {call.site} while still waiting in {self.waiting[call.rank].site}")
        self.waiting[call.rank] = call

    def run(self, programs: Sequence[Sequence[Callable[[], None]]]) -> None:
        """Run one step: `programs[r]` is rank r's list of step closures."""
        if len(programs) != self.size:
            raise ExecutionError(f"a mesh of {self.size} devices needs {self.size} programs, got {len(programs)}")
        position = [0] * self.size
        try:
            while True:
                for rank, steps in enumerate(programs):
                    i = position[rank]
                    while i < len(steps) and rank not in self.waiting:
                        steps[i]()
                        i += 1
                    position[rank] = i
                if not self.waiting:
                    return
                self.resolve({r for r in range(self.size) if position[r] == len(programs[r]) and r not in self.waiting})
        finally:
            self.waiting.clear()

    def resolve(self, finished: set[int]) -> None:
        """Perform every collective whose group has all called; raise when none can complete."""
        done = False
        for group in sorted({c.group for c in self.waiting.values()}):
            calls = [self.waiting.get(r) for r in group]
            if any(c is None or c.group != group for c in calls):
                continue
            first = calls[0]
            for other in calls[1:]:
                if other.signature() != first.signature():  # type: ignore[union-attr]
                    raise ExecutionError(
                        f"collective mismatch: rank {first.rank} calls {first.describe()}, "  # type: ignore[union-attr]
                        f"rank {other.rank} calls {other.describe()}",  # type: ignore[union-attr]
                        first.site.location,  # type: ignore[union-attr]
                    )
            self.perform(calls)  # type: ignore[arg-type]
            for r in group:
                del self.waiting[r]
            done = True
        if not done:
            self.report_stall(finished)

    def report_stall(self, finished: set[int]) -> None:
        call = self.waiting[min(self.waiting)]
        for r in call.group:
            other = self.waiting.get(r)
            if r in finished:
                raise ExecutionError(
                    f"rank {call.rank} waits in {call.describe()}, but rank {r} finished the step without it",
                    call.site.location,
                )
            if other is not None and other.group != call.group:
                raise ExecutionError(
                    f"collective mismatch: rank {call.rank} calls {call.describe()}, rank {r} calls {other.describe()}",
                    call.site.location,
                )
        raise ExecutionError(f"rank {call.rank} waits in {call.describe()} forever", call.site.location)

    def perform(self, calls: Sequence[_Call]) -> None:
        """One collective over its whole group: compute every result first, then write every dst."""
        xp, first = self.xp, calls[0]
        if first.kind == "exchange":
            self.exchange(calls)
            return
        params = dict(first.params)
        srcs = [c.src for c in calls]
        n = len(calls)
        if first.kind == "barrier":
            return
        if first.kind in ("send", "recv"):
            sender = next((c for c in calls if c.kind == "send"), None)
            receiver = next((c for c in calls if c.kind == "recv"), None)
            if sender is None or receiver is None:
                raise ExecutionError(
                    f"collective mismatch: ranks {list(first.group)} both {first.kind} ({first.site})", first.site.location
                )
            xp.copyto(receiver.dst, sender.src)
            return
        if first.kind in ("all_reduce", "reduce", "reduce_scatter"):
            total = _reduce(xp, srcs, params["reduction"])
            if first.kind == "all_reduce":
                results = [total] * n
            elif first.kind == "reduce":
                results = [total if k == params["root"] else None for k in range(n)]
            else:
                results = xp.split(total, n, axis=params["axis"])
        elif first.kind == "all_gather":
            results = [xp.concatenate(srcs, axis=params["axis"])] * n
        elif first.kind == "gather_rows":
            results = [xp.concatenate(srcs, axis=0)] * n
        elif first.kind == "all_to_all":
            pieces = [xp.split(s, n, axis=params["split_axis"]) for s in srcs]
            results = [xp.concatenate([p[j] for p in pieces], axis=params["concat_axis"]) for j in range(n)]
        elif first.kind == "broadcast":
            results = [srcs[params["root"]]] * n
        else:
            raise AssertionError(first.kind)
        for call, result in zip(calls, results):
            if result is not None:
                xp.copyto(call.dst, result)


    def exchange(self, calls: Sequence[_Call]) -> None:
        """Every send meets the receive its peer posted for it, in order; anything unmatched is an error."""
        by_rank = {c.rank: c for c in calls}
        pending = {c.rank: {peer: [a for p, a in dict(c.params)["recvs"] if p == peer] for peer in by_rank} for c in calls}
        moves = []
        for call in calls:
            for peer, src in dict(call.params)["sends"]:
                queue = pending.get(peer, {}).get(call.rank)
                dst = queue.pop(0) if queue else None
                if dst is None or src.shape != dst.shape or src.dtype != dst.dtype:
                    raise ExecutionError(
                        f"exchange mismatch: rank {call.rank} sends {_spec(src)} to rank {peer}, which "
                        + ("expects nothing more from it" if dst is None else f"expects {_spec(dst)}")
                        + f" ({call.site})",
                        call.site.location,
                    )
                moves.append((src, dst))
        left = [(r, peer) for r, queues in pending.items() for peer, queue in queues.items() if queue]
        if left:
            r, peer = left[0]
            raise ExecutionError(
                f"exchange mismatch: rank {r} expects data from rank {peer}, which sends none ({by_rank[r].site})",
                by_rank[r].site.location,
            )
        results = [(dst, src.copy()) for src, dst in moves]
        for dst, value in results:
            self.xp.copyto(dst, value)


def _reduce(xp: ModuleType, arrays: Sequence[Array], reduction: str) -> Array:
    op = {"sum": xp.add, "max": xp.maximum, "min": xp.minimum}[reduction]
    acc = arrays[0].copy()
    for a in arrays[1:]:
        op(acc, a, out=acc)
    return acc


def _size(mesh: Sequence[int]) -> int:
    n = 1
    for extent in mesh:
        n *= extent
    return n


class InProcessCommunicator(Communicator):
    """A device of an InProcessGroup: every call parks the device until its group is complete."""

    def __init__(self, owner: InProcessGroup, rank: int, mesh: Sequence[int], members: Sequence[int] | None = None):
        super().__init__(rank, mesh)
        self.owner = owner
        # The group's ranks, when this communicator covers part of the devices (`subgroup`).
        self.members = tuple(members) if members is not None else tuple(range(self.size))
        self.subgroups: dict[tuple[tuple[int, ...], tuple[int, ...]], InProcessCommunicator] = {}

    def _park(self, kind: str, src: Array | None, dst: Array | None, mesh_axis: int | None, site: Site, **params: Any) -> None:
        self.owner.park(self._call(kind, src, dst, mesh_axis, site, **params))

    def _call(self, kind: str, src: Array | None, dst: Array | None, mesh_axis: int | None, site: Site, **params: Any) -> _Call:
        group = tuple(range(self.size)) if mesh_axis is None else self.group(mesh_axis)
        if mesh_axis is not None:
            params["mesh_axis"] = mesh_axis
        members = tuple(self.members[r] for r in group)
        return _Call(kind, self.members[self.rank], members, tuple(sorted(params.items())), src, dst, site)

    def exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> None:
        self.prepared_exchange(sends, recvs, group, site)()

    def prepared_exchange(
        self, sends: Sequence[tuple[int, Array]], recvs: Sequence[tuple[int, Array]], group: Sequence[int], site: Site
    ) -> Callable[[], None]:
        """The parked call made once: performing it only reads it."""
        members = tuple(sorted(self.members[r] for r in group))
        params = (("recvs", tuple((self.members[p], a) for p, a in recvs)), ("sends", tuple((self.members[p], a) for p, a in sends)))
        return partial(self.owner.park, _Call("exchange", self.members[self.rank], members, params, None, None, site))

    def subgroup(self, members: Sequence[int], mesh: Sequence[int]) -> InProcessCommunicator:
        key = (tuple(members), tuple(mesh))
        if self.rank not in key[0]:
            raise ValueError(f"rank {self.rank} is not one of the members {list(members)}")
        sub = self.subgroups.get(key)
        if sub is None:
            sub = self.subgroups[key] = InProcessCommunicator(
                self.owner, key[0].index(self.rank), mesh, [self.members[r] for r in key[0]]
            )
        return sub

    def all_reduce(self, src: Array, dst: Array, mesh_axis: int, reduction: str, site: Site) -> None:
        self._park("all_reduce", src, dst, mesh_axis, site, reduction=reduction)

    def all_gather(self, src: Array, dst: Array, axis: int, mesh_axis: int, site: Site) -> None:
        self._park("all_gather", src, dst, mesh_axis, site, axis=axis)

    def gather_rows(self, src: Array, dst: Array, rows: Sequence[int], mesh_axis: int, site: Site) -> Callable[[], None]:
        """One call, made once and parked at each step, that concatenates the group's rows as a static
        all_gather does: the exchange's pairs would copy every piece once more here."""
        return partial(self.owner.park, self._call("gather_rows", src, dst, mesh_axis, site, rows=tuple(rows)))

    def reduce_scatter(self, src: Array, dst: Array, axis: int, mesh_axis: int, reduction: str, site: Site) -> None:
        self._park("reduce_scatter", src, dst, mesh_axis, site, axis=axis, reduction=reduction)

    def all_to_all(self, src: Array, dst: Array, split_axis: int, concat_axis: int, mesh_axis: int, site: Site) -> None:
        self._park("all_to_all", src, dst, mesh_axis, site, split_axis=split_axis, concat_axis=concat_axis)

    def broadcast(self, src: Array, dst: Array, root: int, mesh_axis: int, site: Site) -> None:
        self._park("broadcast", src, dst, mesh_axis, site, root=root)

    def reduce(self, src: Array, dst: Array, root: int, mesh_axis: int, reduction: str, site: Site) -> None:
        self._park("reduce", src, dst, mesh_axis, site, root=root, reduction=reduction)

    def send(self, src: Array, peer: int, site: Site) -> None:
        self._pair("send", src, None, peer, site)

    def recv(self, dst: Array, peer: int, site: Site) -> None:
        self._pair("recv", None, dst, peer, site)

    def _pair(self, kind: str, src: Array | None, dst: Array | None, peer: int, site: Site) -> None:
        if not 0 <= peer < self.size or peer == self.rank:
            raise ExecutionError(f"rank {self.rank}: {site} names peer {peer}, not another rank of {self.size}", site.location)
        group = tuple(sorted((self.rank, peer)))
        self.owner.park(_Call(kind, self.rank, group, (("peer", peer),), src, dst, site))

    def barrier(self) -> None:
        self._park("barrier", None, None, None, Site("barrier"))
