"""Simulated devices: every collective against numpy on 1-d and 2-d meshes; disagreeing devices fail, never hang."""

import numpy as np
import pytest

from irflow.context import make_context
from irflow.dialects import buffer
from irflow.errors import ExecutionError
from irflow.passes.plan_memory import PlanMemoryPass
from irflow.runtime.executor import Executor
from irflow.runtime.inprocess import InProcessGroup
from irflow.runtime.spmd import SpmdExecutor
from irflow.runtime.variables import LogicalVariables, VariableStore
from irflow.textir import parse_module


def program(text: str, mesh: tuple[int, ...], view: str = "mirrored") -> buffer.ProgramOp:
    attrs = f'mesh = array<i64: {", ".join(map(str, mesh))}>, view = "{view}"'
    module = parse_module(f'buffer.program @p on "cpu" attributes {{{attrs}}} {{\n{text}\n}}')
    PlanMemoryPass().apply(make_context(), module)
    return module.body.block.first_op  # type: ignore[return-value]


def collectives(mesh: tuple[int, ...], axis: int) -> str:
    """x (2x4) through every collective over `axis` of `mesh`; p = the group size."""
    p = mesh[axis]
    m = f"mesh = array<i64: {', '.join(map(str, mesh))}>, mesh_axis = {axis} : i64"
    return f"""
  %x = buffer.alloc : memref<2x4xf64>
  buffer.input %x {{index = 0 : i64}} : memref<2x4xf64>
  %r = buffer.alloc : memref<2x4xf64>
  buffer.all_reduce %x, %r {{{m}, reduction = "sum"}} : memref<2x4xf64>, memref<2x4xf64>
  %g = buffer.alloc : memref<{2 * p}x4xf64>
  buffer.all_gather %x, %g {{{m}, axis = 0 : i64}} : memref<2x4xf64>, memref<{2 * p}x4xf64>
  %m = buffer.alloc : memref<2x4xf64>
  buffer.all_reduce %x, %m {{{m}, reduction = "max"}} : memref<2x4xf64>, memref<2x4xf64>
  %s = buffer.alloc : memref<2x{4 // p}xf64>
  buffer.reduce_scatter %x, %s {{{m}, axis = 1 : i64, reduction = "sum"}} : memref<2x4xf64>, memref<2x{4 // p}xf64>
  %t = buffer.alloc : memref<{2 * p}x{4 // p}xf64>
  buffer.all_to_all %x, %t {{{m}, split_axis = 1 : i64, concat_axis = 0 : i64}} : memref<2x4xf64>, memref<{2 * p}x{4 // p}xf64>
  %b = buffer.alloc : memref<2x4xf64>
  buffer.broadcast %x, %b {{{m}, root = {p - 1} : i64}} : memref<2x4xf64>, memref<2x4xf64>
  buffer.output %r {{index = 0 : i64}} : memref<2x4xf64>
  buffer.output %g {{index = 1 : i64}} : memref<{2 * p}x4xf64>
  buffer.output %m {{index = 2 : i64}} : memref<2x4xf64>
  buffer.output %s {{index = 3 : i64}} : memref<2x{4 // p}xf64>
  buffer.output %t {{index = 4 : i64}} : memref<{2 * p}x{4 // p}xf64>
  buffer.output %b {{index = 5 : i64}} : memref<2x4xf64>"""


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(8)


def groups(mesh: tuple[int, ...], axis: int) -> list[list[int]]:
    ranks = np.arange(int(np.prod(mesh))).reshape(mesh)
    return [list(g) for g in np.moveaxis(ranks, axis, -1).reshape(-1, mesh[axis])]


@pytest.mark.parametrize("mesh, axis", [((1,), 0), ((2,), 0), ((4,), 0), ((2, 2), 0), ((2, 2), 1), ((1, 4), 1)])
def test_every_collective_matches_numpy(rng, mesh, axis) -> None:
    n = int(np.prod(mesh))
    spmd = SpmdExecutor(program(collectives(mesh, axis), mesh), LogicalVariables(mesh))
    xs = [rng.standard_normal((2, 4)) for _ in range(n)]
    outs = spmd([xs])
    for group in groups(mesh, axis):
        mine = [xs[r] for r in group]
        p = len(group)
        for k, r in enumerate(group):
            np.testing.assert_array_equal(outs[0][r], sum(mine[1:], mine[0].copy()))  # summed in coordinate order
            np.testing.assert_array_equal(outs[1][r], np.concatenate(mine, 0))
            np.testing.assert_array_equal(outs[2][r], np.maximum.reduce(mine))
            np.testing.assert_array_equal(outs[3][r], np.split(sum(mine[1:], mine[0].copy()), p, 1)[k])
            np.testing.assert_array_equal(outs[4][r], np.concatenate([np.split(x, p, 1)[k] for x in mine], 0))
            np.testing.assert_array_equal(outs[5][r], mine[-1])


def test_repeated_steps_are_deterministic(rng) -> None:
    spmd = SpmdExecutor(program(collectives((4,), 0), (4,)), LogicalVariables((4,)))
    xs = [rng.standard_normal((2, 4)) for _ in range(4)]
    first = spmd([xs])
    second = spmd([xs])
    for a, b in zip(first, second):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


REDUCE = """
  %x = buffer.alloc : memref<{shape}xf32>
  buffer.input %x {{index = 0 : i64}} : memref<{shape}xf32>
  %r = buffer.alloc : memref<{shape}xf32>
  buffer.all_reduce %x, %r {{mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "sum"}} : memref<{shape}xf32>, memref<{shape}xf32> loc("model.py":{line}:3)
  buffer.output %r {{index = 0 : i64}} : memref<{shape}xf32>"""

GATHER = """
  %x = buffer.alloc : memref<2xf32>
  buffer.input %x {index = 0 : i64} : memref<2xf32>
  %g = buffer.alloc : memref<4xf32>
  buffer.all_gather %x, %g {mesh = array<i64: 2>, mesh_axis = 0 : i64, axis = 0 : i64} : memref<2xf32>, memref<4xf32> loc("model.py":20:3)
  %r = buffer.alloc : memref<2xf32>
  buffer.all_reduce %x, %r {mesh = array<i64: 2>, mesh_axis = 0 : i64, reduction = "sum"} : memref<2xf32>, memref<2xf32> loc("model.py":21:3)
  buffer.output %r {index = 0 : i64} : memref<2xf32>"""

LOCAL = """
  %x = buffer.alloc : memref<2xf32>
  buffer.input %x {index = 0 : i64} : memref<2xf32>
  %y = buffer.alloc : memref<2xf32>
  buffer.kernel "neg" ins(%x : memref<2xf32>) outs(%y : memref<2xf32>)
  buffer.output %y {index = 0 : i64} : memref<2xf32>"""


def run_two(text0: str, text1: str, shapes: tuple[tuple[int, ...], tuple[int, ...]] = ((2,), (2,))) -> None:
    """Rank 0 runs one program, rank 1 another: what a buggy lowering or a mismatched MPI job would do."""
    group = InProcessGroup((2,))
    execs = [
        Executor(program(text, (2,)), VariableStore(rank=r), comm=group.communicator(r))
        for r, text in enumerate((text0, text1))
    ]
    for e, shape in zip(execs, shapes):
        e.feed([np.ones(shape, np.float32)])
    group.run([e.steps for e in execs])


def test_participants_with_different_shapes_fail_naming_the_op() -> None:
    with pytest.raises(ExecutionError, match=r"model.py:10:3: error: collective mismatch: rank 0 calls all_reduce "
                       r"\(\(2,\), 'float32'\).*'buffer.all_reduce' at model.py:10:3.*rank 1 calls all_reduce \(\(3,\)"):
        run_two(REDUCE.format(shape="2", line=10), REDUCE.format(shape="3", line=11), ((2,), (3,)))


def test_participants_in_different_order_fail() -> None:
    with pytest.raises(ExecutionError, match="collective mismatch: rank 0 calls all_gather.*rank 1 calls all_reduce"):
        run_two(GATHER, REDUCE.format(shape="2", line=10))


def test_a_device_that_skips_the_collective_fails_instead_of_hanging() -> None:
    with pytest.raises(ExecutionError, match=r"model.py:10:3: error: rank 0 waits in all_reduce.*rank 1 finished"):
        run_two(REDUCE.format(shape="2", line=10), LOCAL)


def test_the_group_is_usable_after_a_failure() -> None:
    with pytest.raises(ExecutionError):
        run_two(REDUCE.format(shape="2", line=10), LOCAL)
    run_two(REDUCE.format(shape="2", line=10), REDUCE.format(shape="2", line=10))


def test_a_collective_without_a_communicator_is_a_located_compile_error() -> None:
    from irflow.errors import CompileError

    with pytest.raises(CompileError, match=r"model.py:10:3: error: 'buffer.all_reduce' needs a communicator"):
        Executor(program(REDUCE.format(shape="2", line=10), (2,)), VariableStore())


def test_a_program_for_another_mesh_is_refused() -> None:
    from irflow.errors import CompileError

    with pytest.raises(CompileError, match=r"compiled for the mesh \[2\], but runs on \[4\]"):
        Executor(program(REDUCE.format(shape="2", line=10), (2,)), VariableStore(), comm=InProcessGroup((4,)).communicator(0))


SEND = """
  %x = buffer.alloc : memref<3xf32>
  buffer.input %x {index = 0 : i64} : memref<3xf32>
  buffer.send %x {peer = 1 : i64} : memref<3xf32> loc("model.py":50:1)
  buffer.output %x {index = 0 : i64} : memref<3xf32>"""

RECV = """
  %x = buffer.alloc : memref<3xf32>
  buffer.input %x {index = 0 : i64} : memref<3xf32>
  %y = buffer.alloc : memref<3xf32>
  buffer.recv %y {peer = 0 : i64} : memref<3xf32> loc("model.py":51:1)
  buffer.output %y {index = 0 : i64} : memref<3xf32>"""


def test_send_reaches_the_matching_recv() -> None:
    group = InProcessGroup((2,))
    execs = [Executor(program(t, (2,)), VariableStore(rank=r), comm=group.communicator(r)) for r, t in enumerate((SEND, RECV))]
    execs[0].feed([np.arange(3, dtype=np.float32)])
    execs[1].feed([np.zeros(3, np.float32)])
    group.run([e.steps for e in execs])
    np.testing.assert_array_equal(execs[1].results()[0], [0, 1, 2])


def test_two_sends_to_each_other_fail() -> None:
    with pytest.raises(ExecutionError, match=r"model.py:50:1: error: collective mismatch: ranks \[0, 1\] both send"):
        run_two(SEND, SEND.replace("peer = 1", "peer = 0"), ((3,), (3,)))
