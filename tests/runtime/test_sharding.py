"""Layouts on a mesh: pieces against numpy's pad-and-split, round trips, and the logical view of variables."""

import itertools

import numpy as np
import pytest

from irflow.dialects.mesh import local_region, local_shape, mesh_group
from irflow.dialects.sbp import SbpAttr
from irflow.runtime.sharding import Layout
from irflow.runtime.variables import LogicalVariables, VariableStore

S0, S1, B, P = SbpAttr("split", 0), SbpAttr("split", 1), SbpAttr("broadcast"), SbpAttr("partial_sum")
MESHES = [(1,), (2,), (3,), (4,), (2, 2)]


def nd_sbps(mesh):
    return list(itertools.product([S0, S1, B, P], repeat=len(mesh)))


@pytest.mark.parametrize("mesh", MESHES, ids=str)
@pytest.mark.parametrize("shape", [(5, 7), (4, 8), (1, 3)], ids=str)
def test_shard_then_gather_is_the_identity(mesh, shape) -> None:
    value = np.random.default_rng(0).standard_normal(shape)
    for sbp in nd_sbps(mesh):
        layout = Layout.of(shape, sbp, mesh)
        pieces = [layout.shard(value, r) for r in range(layout.ranks)]
        assert all(p.shape == layout.local_shape for p in pieces)
        np.testing.assert_array_equal(layout.gather(pieces), value)


@pytest.mark.parametrize("n, p", [(5, 2), (5, 4), (7, 3), (8, 4), (2, 3)])
def test_split_pieces_are_padded_chunks(n, p) -> None:
    value = np.arange(1.0, n + 1)
    c = -(-n // p)
    expected = np.split(np.pad(value, (0, p * c - n)), p)
    layout = Layout.of((n,), [S0], [p])
    for r in range(p):
        np.testing.assert_array_equal(layout.shard(value, r), expected[r])


def test_nested_splits_cut_the_chunk_again() -> None:
    # 10 rows on a 2x2 mesh, both axes splitting rows: chunks of 5, then of 3 (the second padded by one).
    assert local_shape((10, 2), [S0, S0], [2, 2]) == (3, 2)
    region = local_region((10, 2), [S0, S0], [2, 2], (1, 1))
    assert (region.start, region.valid) == ((8, 0), (2, 2))
    layout = Layout.of((10, 2), [S0, S0], [2, 2])
    value = np.arange(20.0).reshape(10, 2)
    np.testing.assert_array_equal(layout.shard(value, 3), [[16, 17], [18, 19], [0, 0]])


def test_mesh_groups_are_rows_and_columns() -> None:
    assert mesh_group(3, (2, 2), 0) == (1, 3)
    assert mesh_group(3, (2, 2), 1) == (2, 3)
    assert mesh_group(2, (4,), 0) == (0, 1, 2, 3)


def test_partial_max_cannot_hold_a_host_value() -> None:
    with pytest.raises(ValueError, match="partial_sum\\(max\\)"):
        Layout.of((4,), [SbpAttr("partial_sum", reduction="max")], [2])


def bind(variables: LogicalVariables, name: str, shape, sbp) -> None:
    """What each device's executor does when it binds a buffer.variable."""
    layout = Layout.of(shape, sbp, variables.mesh)
    for store in variables.shards:
        store.ensure(name, layout.local_shape, np.dtype(np.float32), {"kind": "random_normal"}, True, layout)


def test_devices_start_from_the_one_device_values() -> None:
    one = VariableStore(seed=5)
    one.ensure("w", (5, 3), np.dtype(np.float32), {"kind": "random_normal"}, True)
    variables = LogicalVariables((4,), seed=5)
    bind(variables, "w", (5, 3), [S0])
    assert [s["w"].shape for s in variables.shards] == [(2, 3)] * 4
    np.testing.assert_array_equal(variables["w"], one["w"])
    np.testing.assert_array_equal(variables.shards[1]["w"], one["w"][2:4])
    assert variables.names() == ["w"] and "w" in variables and len(variables) == 1
    assert variables.variable("w").value.shape == (5, 3)


def test_load_cuts_whole_values_and_checks_before_changing_any() -> None:
    variables = LogicalVariables((2, 2), seed=1)
    bind(variables, "w", (3, 4), [S1, S0])
    bind(variables, "b", (4,), [B, B])
    before = variables.snapshot()
    with pytest.raises(ValueError, match="variable 'b' has shape \\(4,\\), the value has shape \\(5,\\)"):
        variables.load({"w": np.zeros((3, 4)), "b": np.zeros(5)})
    np.testing.assert_array_equal(variables["w"], before["w"])
    with pytest.raises(KeyError, match="no variable named 'x'"):
        variables.load({"x": np.zeros(2)})
    new = np.arange(12.0).reshape(3, 4)
    variables.load({"w": new})
    np.testing.assert_array_equal(variables["w"], new)
    assert variables.shards[1]["w"].shape == (2, 2)


def test_a_variable_keeps_its_layout() -> None:
    variables = LogicalVariables((2,))
    bind(variables, "w", (4, 4), [S0])
    with pytest.raises(ValueError, match="laid out as \\[split\\(0\\)\\] on mesh \\[2\\], but is requested as"):
        bind(variables, "w", (4, 4), [S1])
    variables.ensure("fresh", (3,), np.dtype(np.float32), {"kind": "constant", "value": 2.0}, False)
    np.testing.assert_array_equal(variables["fresh"], [2, 2, 2])
