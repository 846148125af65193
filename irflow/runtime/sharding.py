"""Logical host arrays <-> per-device pieces, by the mesh layout of `irflow.dialects.mesh`.

The runtime cuts inputs and initial variable values into each device's
(padded) piece and puts outputs and variables back together for the caller,
with the same layout rule the compiler used for the per-device types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from irflow.dialects.mesh import Shape, local_region, local_shape, mesh_coords
from irflow.dialects.sbp import NdSbpAttr, SbpAttr


@dataclass(frozen=True)
class Layout:
    """A logical `shape` laid out as `sbp` (one component per mesh axis) on `mesh`."""

    shape: Shape
    sbp: tuple[SbpAttr, ...]
    mesh: Shape

    @classmethod
    def of(cls, shape: Sequence[int], sbp: NdSbpAttr | Sequence[SbpAttr], mesh: Sequence[int]) -> Layout:
        parts = tuple(sbp.components.data) if isinstance(sbp, NdSbpAttr) else tuple(sbp)
        odd = [str(c) for c in parts if c.kind.data == "partial_sum" and c.reduction.data != "sum"]
        if odd:
            raise ValueError(f"a host value cannot be laid out as {odd[0]}: only partial sums have a zero element")
        layout = cls(tuple(int(d) for d in shape), parts, tuple(int(m) for m in mesh))
        layout.local_shape  # checks the components against the mesh and the shape
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

    def shard(self, value: np.ndarray, rank: int) -> np.ndarray:
        """Rank's piece of the logical `value`: its chunk of every split, zero padded.

        A partial_sum component keeps the value at coordinate 0 and zeros
        elsewhere, so that the sum over the mesh axis is the value again.
        """
        if tuple(value.shape) != self.shape:
            raise ValueError(f"expected a value of shape {self.shape}, got {tuple(value.shape)}")
        coords = mesh_coords(rank, self.mesh)
        region = local_region(self.shape, self.sbp, self.mesh, coords)
        piece = np.zeros(region.local, dtype=value.dtype)
        if all(k == 0 for c, k in zip(self.sbp, coords) if c.kind.data == "partial_sum"):
            piece[_window(region.valid)] = value[_window(region.valid, region.start)]
        return piece

    def gather(self, pieces: Sequence[np.ndarray]) -> np.ndarray:
        """The logical value from every rank's piece: splits placed, partial sums added in rank order."""
        if len(pieces) != self.ranks:
            raise ValueError(f"a layout on mesh {list(self.mesh)} needs {self.ranks} pieces, got {len(pieces)}")
        out = np.zeros(self.shape, dtype=pieces[0].dtype)
        for rank, piece in enumerate(pieces):
            coords = mesh_coords(rank, self.mesh)
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


def _window(sizes: Sequence[int], starts: Sequence[int] | None = None) -> tuple[slice, ...]:
    starts = starts or (0,) * len(sizes)
    return (*(slice(a, a + n) for a, n in zip(starts, sizes)), ...)  # `...`: a view even of a 0-d array
