"""Logical host arrays <-> per-device pieces, by the mesh layout of `irflow.dialects.mesh`.

The runtime cuts inputs and initial variable values into each device's
(padded) piece and puts outputs and variables back together for the caller,
with the same layout rule the compiler used for the per-device types. A
value moving between two groups of devices (`buffer.transfer`) is planned
here too: which boxes of which pieces go where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from irflow.dialects.mesh import Region, Shape, local_region, local_shape, mesh_coords, transfer_boxes
from irflow.dialects.sbp import NdSbpAttr, SbpAttr
from irflow.runtime.communicator import Communicator, Site


@dataclass(frozen=True)
class Layout:
    """A logical `shape` laid out as `sbp` (one component per mesh axis) on `mesh`.

    `members` are the program ranks that make up `mesh`, in its row-major
    order, when the value lives on a part of the program's devices (a
    placement scope inside a larger job); None: ranks 0..size-1. Other ranks
    hold a piece of the same shape that means nothing.
    """

    shape: Shape
    sbp: tuple[SbpAttr, ...]
    mesh: Shape
    members: tuple[int, ...] | None = None

    @classmethod
    def of(
        cls,
        shape: Sequence[int],
        sbp: NdSbpAttr | Sequence[SbpAttr],
        mesh: Sequence[int],
        members: Sequence[int] | None = None,
    ) -> Layout:
        parts = tuple(sbp.components.data) if isinstance(sbp, NdSbpAttr) else tuple(sbp)
        odd = [str(c) for c in parts if c.kind.data == "partial_sum" and c.reduction.data != "sum"]
        if odd:
            raise ValueError(f"a host value cannot be laid out as {odd[0]}: only partial sums have a zero element")
        group = tuple(int(r) for r in members) if members is not None else None
        layout = cls(tuple(int(d) for d in shape), parts, tuple(int(m) for m in mesh), group)
        layout.local_shape  # checks the components against the mesh and the shape
        if group is not None and len(group) != layout.ranks:
            raise ValueError(f"a mesh {list(layout.mesh)} of {layout.ranks} devices cannot have {len(group)} members")
        return layout

    @classmethod
    def whole(cls, shape: Sequence[int]) -> Layout:
        """One device holding all of it."""
        return cls.of(shape, [SbpAttr("broadcast")], [1])

    @property
    def local_shape(self) -> Shape:
        return local_shape(self.shape, self.sbp, self.mesh)

    @property
    def ranks(self) -> int:
        return int(np.prod(self.mesh))

    def member(self, rank: int) -> int | None:
        """`rank`'s position on the mesh (None: the value does not live on that rank)."""
        if self.members is None:
            return rank
        return self.members.index(rank) if rank in self.members else None

    def region(self, index: int) -> Region:
        """Where mesh position `index`'s piece lies in the logical value."""
        return local_region(self.shape, self.sbp, self.mesh, mesh_coords(index, self.mesh))

    def shard(self, value: np.ndarray, rank: int) -> np.ndarray:
        """Rank's piece of the logical `value`: its chunk of every split, zero padded.

        A partial_sum component keeps the value at coordinate 0 and zeros
        elsewhere, so that the sum over the mesh axis is the value again.
        A rank off the mesh gets zeros.
        """
        if tuple(value.shape) != self.shape:
            raise ValueError(f"expected a value of shape {self.shape}, got {tuple(value.shape)}")
        index = self.member(rank)
        if index is None:
            return np.zeros(self.local_shape, dtype=value.dtype)
        coords = mesh_coords(index, self.mesh)
        region = local_region(self.shape, self.sbp, self.mesh, coords)
        piece = np.zeros(region.local, dtype=value.dtype)
        if all(k == 0 for c, k in zip(self.sbp, coords) if c.kind.data == "partial_sum"):
            piece[_window(region.valid)] = value[_window(region.valid, region.start)]
        return piece

    def gather(self, pieces: Sequence[np.ndarray]) -> np.ndarray:
        """The logical value from every rank's piece: splits placed, partial sums added in rank order."""
        ranks = self.members if self.members is not None else range(self.ranks)
        if len(pieces) <= max(ranks) or (self.members is None and len(pieces) != self.ranks):
            raise ValueError(f"a layout on mesh {list(self.mesh)} needs {self.ranks} pieces, got {len(pieces)}")
        out = np.zeros(self.shape, dtype=pieces[0].dtype)
        for index, rank in enumerate(ranks):
            piece = pieces[rank]
            coords = mesh_coords(index, self.mesh)
            if tuple(piece.shape) != self.local_shape:
                raise ValueError(f"rank {rank}'s piece has shape {tuple(piece.shape)}, expected {self.local_shape}")
            if any(k != 0 for c, k in zip(self.sbp, coords) if c.kind.data == "broadcast"):
                continue  # a copy of what coordinate 0 holds
            region = local_region(self.shape, self.sbp, self.mesh, coords)
            target = out[_window(region.valid, region.start)]
            source = piece[_window(region.valid)]
            if any(c.kind.data == "partial_sum" for c in self.sbp):
                target += source
            else:
                target[...] = source
        return out

    def __str__(self) -> str:
        return f"[{', '.join(str(c) for c in self.sbp)}] on mesh {list(self.mesh)}"


@dataclass(frozen=True)
class Piece:
    """A box of a logical value that rank `src` holds and rank `dst` needs, in each one's local indices."""

    src: int
    dst: int
    at_src: tuple[slice, ...]
    at_dst: tuple[slice, ...]


def transfer_plan(src: Layout, dst: Layout) -> list[Piece]:
    """`irflow.dialects.mesh.transfer_boxes` between two layouts, in each end's local indices (ranks are program ranks)."""
    if src.shape != dst.shape:
        raise ValueError(f"cannot transfer a value of shape {src.shape} to one of shape {dst.shape}")
    src_ranks, dst_ranks = _ranks(src), _ranks(dst)
    boxes = transfer_boxes(src.shape, (src.sbp, src.mesh, src_ranks), (dst.sbp, dst.mesh, dst_ranks))
    starts = {
        (end, rank): end_layout.region(index).start
        for end, end_layout, ranks in (("src", src, src_ranks), ("dst", dst, dst_ranks))
        for index, rank in enumerate(ranks)
    }
    plan = []
    for box in boxes:
        at = [
            tuple(slice(a - o, a - o + n) for a, o, n in zip(box.start, starts[end, rank], box.size))
            for end, rank in (("src", box.src), ("dst", box.dst))
        ]
        plan.append(Piece(int(box.src), int(box.dst), at[0], at[1]))  # type: ignore[call-overload]
    return plan


def transfer_steps(
    src_view: Any, dst_view: Any, src: Layout, dst: Layout, comm: Communicator, site: Site, xp: ModuleType
) -> list[Callable[[], None]]:
    """This rank's steps of a transfer: pack what it sends (and copy what it keeps), exchange, unpack.

    Staging buffers are made once here; a step allocates nothing. The exchange
    is one communicator call made by every rank of either layout, so the
    in-process driver can match all the pairs at once.
    """
    rank = comm.rank
    group = sorted(set(_ranks(src)) | set(_ranks(dst)))
    if rank not in group:
        return []
    plan = transfer_plan(src, dst)
    at = lambda view, box: view[(*box, ...)]  # noqa: E731  (`...`: a view even of a 0-d array)
    keep = [(at(src_view, p.at_src), at(dst_view, p.at_dst)) for p in plan if p.src == rank and p.dst == rank]
    sends = [(p.dst, at(src_view, p.at_src)) for p in plan if p.src == rank and p.dst != rank]
    recvs = [(p.src, at(dst_view, p.at_dst)) for p in plan if p.dst == rank and p.src != rank]
    out_boxes = [(peer, xp.empty(view.shape, view.dtype), view) for peer, view in sends]
    in_boxes = [(peer, xp.empty(view.shape, view.dtype), view) for peer, view in recvs]
    receives = dst.member(rank) is not None
    outgoing = [(peer, buf) for peer, buf, _ in out_boxes]
    incoming = [(peer, buf) for peer, buf, _ in in_boxes]

    def pack() -> None:
        if receives:
            dst_view.fill(0)  # the padding of uneven pieces
        for source, target in keep:
            xp.copyto(target, source)
        for _, buf, view in out_boxes:
            xp.copyto(buf, view)

    def unpack() -> None:
        for _, buf, view in in_boxes:
            xp.copyto(view, buf)

    return [pack, lambda: comm.exchange(outgoing, incoming, group, site), unpack]


def _ranks(layout: Layout) -> tuple[int, ...]:
    return layout.members if layout.members is not None else tuple(range(layout.ranks))


def _window(sizes: Sequence[int], starts: Sequence[int] | None = None) -> tuple[slice, ...]:
    starts = starts or (0,) * len(sizes)
    return (*(slice(a, a + n) for a, n in zip(starts, sizes)), ...)  # `...`: a view even of a 0-d array
