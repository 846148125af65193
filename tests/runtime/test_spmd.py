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
