"""A per-device job on simulated devices, called with logical values, against numpy."""

import numpy as np
import pytest
from pathlib import Path

from irflow.context import make_context
from irflow.dialects import buffer
from irflow.errors import ExecutionError
from irflow.passes.convert_job_to_buffer import ConvertJobToBufferPass
from irflow.passes.plan_memory import PlanMemoryPass
from irflow.runtime.spmd import SpmdExecutor
from irflow.runtime.variables import LogicalVariables, VariableStore
from irflow.textir import parse_module

LIT = Path(__file__).parents[1] / "lit" / "passes" / "convert_job_to_buffer.mlir"


def model_parallel_program(view: str = "consistent") -> buffer.ProgramOp:
    """The per-device job of the convert-job-to-buffer lit test: x (5x4, split rows) @ w (4x2, split rows)."""
    text = LIT.read_text().split("// -----")[-1]
    text = text.replace('{kind = "zeros"}', '{kind = "random_normal"}').replace('"consistent"', f'"{view}"')
    module = parse_module(text)
    ConvertJobToBufferPass().apply(make_context(), module)
    PlanMemoryPass().apply(make_context(), module)
    return module.body.block.first_op  # type: ignore[return-value]


def test_consistent_view_takes_and_returns_logical_values() -> None:
    variables = LogicalVariables((2,), seed=4)
    spmd = SpmdExecutor(model_parallel_program(), variables)
    one = VariableStore(seed=4)
    one.ensure("w", (4, 2), np.dtype(np.float32), {"kind": "random_normal"}, True)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    (y,) = spmd([x])
    np.testing.assert_allclose(y, x @ one["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(variables["w"], one["w"])
    assert [s["w"].shape for s in variables.shards] == [(2, 2), (2, 2)]
    with pytest.raises(ExecutionError, match="input 0: expected a value of shape \\(5, 4\\), got \\(4, 4\\)"):
        spmd([x[:4]])


def test_mirrored_view_takes_and_returns_one_array_per_device() -> None:
    variables = LogicalVariables((2,), seed=4)
    spmd = SpmdExecutor(model_parallel_program("mirrored"), variables)
    rng = np.random.default_rng(1)
    pieces = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]
    (ys,) = spmd([pieces])
    x = np.concatenate(pieces)[:5]  # the gather keeps the first 5 rows of the padded pieces
    for y in ys:
        np.testing.assert_allclose(y, x @ variables["w"], rtol=1e-5, atol=1e-6)
    with pytest.raises(ExecutionError, match="must be a list of 2 arrays, one per device"):
        spmd([pieces[0]])


def test_compile_job_binds_every_device_of_the_mesh() -> None:
    from irflow.compiler import compile_job
    from irflow.errors import CompileError
    from irflow.dialects.sbp import PlacementAttr
    from irflow.target import Target

    text = """
job.func @dp(%x: tensor<5x3xf32>) -> tensor<3xf32> attributes {placement = #job.placement<cpu, ["0:0-2"]>} {
  %s = job.reduce_sum %x {axes = array<i64: 0>, sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(0)]>]} : (tensor<5x3xf32>) -> tensor<3xf32>
  %b = job.boxing %s {src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>} : (tensor<3xf32>) -> tensor<3xf32>
  job.return %b : tensor<3xf32>
}"""
    target = Target("cpu", PlacementAttr("cpu", ["0:0-2"]))
    pipeline = "lower-to-physical,convert-job-to-buffer,plan-memory"
    with pytest.raises(CompileError, match="reduces over axis 0 of size 5, split unevenly over 3 devices"):
        compile_job(parse_module(text), "dp", LogicalVariables((3,)), target, pipeline)
    text = text.replace("5x3", "6x3")
    exe = compile_job(parse_module(text), "dp", LogicalVariables((3,)), target, pipeline)
    assert exe.input_types == [((6, 3), np.dtype(np.float32))]
    x = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)
    (y,) = exe([x])
    np.testing.assert_allclose(y, x.sum(0), rtol=1e-5)
    with pytest.raises(CompileError, match="needs a LogicalVariables store"):
        compile_job(parse_module(text), "dp", VariableStore(), target, pipeline)
