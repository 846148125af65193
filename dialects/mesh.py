"""How a logical tensor lies on a device mesh: per-device shapes, chunk positions, groups.

One definition of the layout serves the compiler (`lower-to-physical` computes
per-device types with it), the buffer verifiers and the runtime (which shards
inputs and variables and gathers outputs with it), so they cannot disagree.

A mesh is the placement's hierarchy (`[4]`, `[2, 2]`); ranks number its
devices row-major. An nd-SBP applies its components in mesh-axis order: a
`split(i)` on mesh axis k cuts the tensor axis i *as left by the components
before k* into ceil-sized chunks (torch.chunk's rule), so the per-device size is
`ceil(size / p)` and the last chunks hold padding (or are all padding) when the
size is not divisible. Chunks are contiguous and in coordinate order, so the
concatenation of the padded chunks starts with the whole logical axis.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from irflow.dialects.sbp import NdSbpAttr, SbpAttr

Shape = tuple[int, ...]


def chunk(size: int, parts: int) -> int:
    """The per-device size of an axis of `size` split over `parts` devices (padded to one size)."""
    return -(-size // parts)


def components(sbp: NdSbpAttr | Sequence[SbpAttr]) -> tuple[SbpAttr, ...]:
    return tuple(sbp.components.data) if isinstance(sbp, NdSbpAttr) else tuple(sbp)


def local_shape(shape: Sequence[int], sbp: NdSbpAttr | Sequence[SbpAttr], mesh: Sequence[int]) -> Shape:
    """The per-device (padded) shape of a logical `shape` laid out as `sbp` on `mesh`."""
    parts = components(sbp)
    if len(parts) != len(mesh):
        raise ValueError(f"nd_sbp {[str(c) for c in parts]} has {len(parts)} components for a {len(mesh)}-d mesh {list(mesh)}")
    out = list(shape)
    for c, p in zip(parts, mesh):
        if c.kind.data == "split":
            axis = c.axis.data
            if axis >= len(out):
                raise ValueError(f"{c} on a rank-{len(out)} tensor of shape {tuple(shape)}")
            out[axis] = chunk(out[axis], p)
    return tuple(out)


def mesh_coords(rank: int, mesh: Sequence[int]) -> Shape:
    """The coordinates of `rank` on `mesh` (row-major)."""
    coords = []
    for extent in reversed(mesh):
        coords.append(rank % extent)
        rank //= extent
    return tuple(reversed(coords))


def mesh_rank(coords: Sequence[int], mesh: Sequence[int]) -> int:
    rank = 0
    for c, extent in zip(coords, mesh):
        rank = rank * extent + c
    return rank


def mesh_group(rank: int, mesh: Sequence[int], mesh_axis: int) -> tuple[int, ...]:
    """The ranks that share every coordinate of `rank` but the one on `mesh_axis`, in coordinate order."""
    coords = list(mesh_coords(rank, mesh))
    group = []
    for c in range(mesh[mesh_axis]):
        coords[mesh_axis] = c
        group.append(mesh_rank(coords, mesh))
    return tuple(group)


@dataclass(frozen=True)
class Region:
    """Where a device's local array sits in the logical tensor.

    Along each axis the local array's first `valid[i]` entries are the logical
    entries from `start[i]`; the rest of `local[i]` is padding.
    """

    start: Shape
    valid: Shape
    local: Shape


def local_region(shape: Sequence[int], sbp: NdSbpAttr | Sequence[SbpAttr], mesh: Sequence[int], coords: Sequence[int]) -> Region:
    parts = components(sbp)
    local_shape(shape, parts, mesh)  # checks the components against the mesh and the rank
    start, valid, size = [0] * len(shape), list(shape), list(shape)
    for c, p, k in zip(parts, mesh, coords):
        if c.kind.data != "split":
            continue
        i = c.axis.data
        size_i = chunk(size[i], p)
        offset = k * size_i
        valid[i] = max(0, min(size_i, valid[i] - offset))
        start[i] += offset
        size[i] = size_i
    return Region(tuple(start), tuple(valid), tuple(size))


@dataclass(frozen=True)
class Box:
    """Entries [start, start + size) of a logical value that device `src` sends to device `dst` (or keeps)."""

    src: Hashable
    dst: Hashable
    start: Shape
    size: Shape


def transfer_boxes(
    shape: Sequence[int],
    src: tuple[NdSbpAttr | Sequence[SbpAttr], Sequence[int], Sequence[Hashable]],
    dst: tuple[NdSbpAttr | Sequence[SbpAttr], Sequence[int], Sequence[Hashable]],
) -> list[Box]:
    """What moves when a value laid out as (sbp, mesh, devices) `src` is wanted as `dst` on other devices.

    Neither side may hold partial sums. Each destination device gets the
    boxes of its piece that the source pieces hold, each from one source
    device: itself when it holds it, otherwise one of the replicas, chosen by
    the destination's position so that replicas share the sending. Every
    device derives the same list, so no device needs to be told what to expect.
    """
    for sbp, _, _ in (src, dst):
        if any(c.kind.data == "partial_sum" for c in components(sbp)):
            raise ValueError(f"a transfer moves whole or split values, not {[str(c) for c in components(sbp)]}")
    holders: dict[tuple[Shape, Shape], list[Hashable]] = {}  # src box (start, size) -> the devices holding it
    for index, device in enumerate(src[2]):
        r = local_region(shape, src[0], src[1], mesh_coords(index, src[1]))
        if all(r.valid):
            holders.setdefault((r.start, r.valid), []).append(device)
    boxes = []
    for index, device in enumerate(dst[2]):
        want = local_region(shape, dst[0], dst[1], mesh_coords(index, dst[1]))
        for (start, valid), devices in holders.items():
            lo = tuple(max(a, b) for a, b in zip(start, want.start))
            hi = tuple(min(a + n, b + m) for a, n, b, m in zip(start, valid, want.start, want.valid))
            if any(h <= l for l, h in zip(lo, hi)):
                continue
            sender = device if device in devices else devices[index % len(devices)]
            boxes.append(Box(sender, device, lo, tuple(h - l for l, h in zip(lo, hi))))
    return boxes


def moved_entries(boxes: Sequence[Box]) -> int:
    """Entries that cross between devices (a box a device keeps moves nothing)."""
    total = 0
    for box in boxes:
        if box.src != box.dst:
            n = 1
            for d in box.size:
                n *= d
            total += n
    return total
