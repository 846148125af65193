"""A planned program's memory, read back from the IR: a table for people, a picture for the eye.

Everything comes from what `plan-memory` recorded (`arena_size`,
`lower_bound`, each view's `offset` and `lifetime`), so the same report works
on a live executable and on IR text read by `irflow-opt --emit=memory-plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import SSAValue

from irflow.dialects import buffer
from irflow.errors import CompileError
from irflow.memplan import Buffer, Plan, plot_plan


@dataclass(frozen=True)
class PlannedBuffer:
    name: str
    size: int
    first: int
    last: int
    offset: int


@dataclass(frozen=True)
class MemoryPlan:
    program: str
    arena_size: int
    lower_bound: int
    buffers: tuple[PlannedBuffer, ...]

    @classmethod
    def of(cls, program: buffer.ProgramOp) -> MemoryPlan:
        if "arena_size" not in program.attributes:
            raise ValueError(f"program '{program.sym_name.data}' has no memory plan: run plan-memory first")
        writers = _first_writers(program)
        planned = []
        for op in program.body.block.ops:
            if isinstance(op, buffer.ViewOp):
                first, last = op.attributes["lifetime"].get_values()  # type: ignore[union-attr]
                planned.append(
                    PlannedBuffer(writers.get(op.res, op.res.name_hint or "?"), buffer.nbytes(op.res.type),
                                  int(first), int(last), op.offset.value.data)
                )  # fmt: skip
        return cls(
            program.sym_name.data,
            _int_attr(program, "arena_size"),
            _int_attr(program, "lower_bound"),
            tuple(planned),
        )

    @property
    def ratio(self) -> float:
        return self.arena_size / self.lower_bound if self.lower_bound else 1.0

    def table(self) -> str:
        """One row per buffer; the name column is as wide as the longest name, so columns stay aligned."""
        width = max([len("buffer"), *(len(b.name) for b in self.buffers)]) + 2
        rows = [f"memory plan of @{self.program}: arena {self.arena_size} bytes, lower bound {self.lower_bound} "
                f"bytes, ratio {self.ratio:.4f}",
                f"{'buffer':<{width}}{'bytes':>12}{'offset':>12}{'lifetime':>14}"]  # fmt: skip
        for b in self.buffers:
            rows.append(f"{b.name:<{width}}{b.size:>12}{b.offset:>12}{f'[{b.first}, {b.last}]':>14}")
        return "\n".join(rows) + "\n"

    def planned(self) -> tuple[list[Buffer], Plan]:
        """The planner's view: one buffer per group of in-place partners, and where it went."""
        distinct = list({(b.offset, b.first, b.last): b for b in self.buffers}.values())
        buffers = [Buffer(size=b.size, first=b.first, last=b.last) for b in distinct]
        return buffers, Plan(offsets=tuple(b.offset for b in distinct), size=self.arena_size)

    def check_fits(self, variables: int, available: int | None) -> None:
        """Refuse, before allocating anything, a step that needs more memory than the device has free."""
        needed = self.arena_size + variables
        if available is None or needed <= available:
            return
        largest = sorted(self.buffers, key=lambda b: b.size, reverse=True)[:3]
        raise CompileError(
            f"job '{self.program}' needs {_size(needed)} (an arena of {_size(self.arena_size)} and "
            f"{_size(variables)} of new variables) but only {_size(available)} of memory is available; "
            f"largest buffers: {', '.join(f'{b.name} {_size(b.size)}' for b in largest) or 'none'}"
        )

    def plot(self, path: str | Path) -> None:
        """An SVG: time across, bytes up, one rectangle per buffer (in-place partners drawn once)."""
        plot_plan(*self.planned(), path)


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit} ({nbytes} bytes)"
    return f"{nbytes} bytes"


def _int_attr(program: buffer.ProgramOp, key: str) -> int:
    return program.attributes[key].value.data  # type: ignore[union-attr]


def _first_writers(program: buffer.ProgramOp) -> dict[SSAValue, str]:
    """Name each buffer after what first writes it, with the user's line where known."""
    names: dict[SSAValue, str] = {}
    for op in program.body.block.ops:
        if not isinstance(op, buffer.BufferOp):
            continue
        for v in op.writes():
            if v in names:
                continue
            what = op.kernel.data if isinstance(op, buffer.KernelOp) else op.name.removeprefix("buffer.")
            loc = op.location
            where = f" ({Path(loc.filename.data).name}:{loc.line.data})" if isinstance(loc, FileLineColLoc) else ""
            if isinstance(op, buffer.InputOp):  # the call's argument: its index, and its name where known
                names[v] = f"input {op.index.value.data}" + (f" %{v.name_hint}" if v.name_hint else "") + where
            else:
                names[v] = f"{v.name_hint or what}{where}"
    return names
