"""lower-to-physical: every SBP transition on 1-4 devices and a 2x2 mesh, even and uneven.

Each case is a job with one job.boxing. The lowered IR must hold the expected
collectives (B->S none, S->B one all_gather, P->B one all_reduce, P->S one
reduce_scatter, S(i)->S(j) one all_to_all), and on simulated devices every
device's piece must be what numpy's pad-and-split of the logical value says.
Values are small integers in float64, so every sum is exact.
"""

import itertools
from collections import Counter

import numpy as np
import pytest

from irflow.compiler import run_pipeline
from irflow.dialects import buffer, job
from irflow.dialects.mesh import local_shape
from irflow.dialects.sbp import NdSbpAttr, SbpAttr
from irflow.errors import CompileError
from irflow.runtime.spmd import SpmdExecutor
from irflow.runtime.variables import LogicalVariables
from irflow.textir import parse_module

S0, S1, B, P = SbpAttr("split", 0), SbpAttr("split", 1), SbpAttr("broadcast"), SbpAttr("partial_sum")
KINDS = {"S0": S0, "S1": S1, "B": B, "P": P}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def boxing_job(shape, src, dst, mesh) -> str:
    n = int(np.prod(mesh))
    placement = f'#job.placement<cpu, ["0:0-{n - 1}"]' + (f", hierarchy = {list(mesh)}>" if len(mesh) > 1 else ">")
    t = f"tensor<{'x'.join(map(str, shape))}xf64>"
    nd = lambda parts: f"#job.nd_sbp<[{', '.join(str(c) for c in parts)}]>"  # noqa: E731
    return f"""
job.func @box(%x: {t}) -> {t} attributes {{placement = {placement}, arg_sbp = [{nd(src)}], view = "mirrored"}} {{
  %y = job.boxing %x {{src_sbp = {nd(src)}, sbp = {nd(dst)}, placement = {placement}, reason = "test"}} : ({t}) -> {t} loc("model.py":7:5)
  job.return %y : {t}
}}"""


def lower(shape, src, dst, mesh):
    module = parse_module(boxing_job(shape, src, dst, mesh))
    stages = run_pipeline(module, "lower-to-physical,convert-job-to-buffer,plan-memory")
    program = module.body.block.first_op
    assert isinstance(program, buffer.ProgramOp)
    ops = Counter(op.name.removeprefix("job.") for op in stages["lower-to-physical"].walk())
    return program, ops


def reference_piece(value: np.ndarray, sbp, mesh, rank: int) -> np.ndarray:
    """numpy's view of a device's piece: per mesh axis, pad the split axis with zeros to a multiple and cut."""
    coords = np.unravel_index(rank, mesh)
    piece = value
    for c, p, k in zip(sbp, mesh, coords):
        if c.kind.data == "split":
            axis = c.axis.data
            widths = [(0, 0)] * piece.ndim
            widths[axis] = (0, -piece.shape[axis] % p)
            piece = np.split(np.pad(piece, widths), p, axis=axis)[k]
    return piece


def partial_groups(sbp, mesh):
    """Per combination of the other coordinates, the ranks whose pieces add up (those differing on P axes)."""
    ranks = np.arange(int(np.prod(mesh))).reshape(mesh)
    p_axes = [k for k, c in enumerate(sbp) if c.kind.data == "partial_sum"]
    moved = np.moveaxis(ranks, p_axes, list(range(len(p_axes))))
    return [list(g) for g in moved.reshape(int(np.prod([mesh[k] for k in p_axes])), -1).T]


def pieces_in(value: np.ndarray, sbp, mesh, rng) -> list[np.ndarray]:
    """Every device's piece of `value`; partial sums as random integer addends."""
    whole = [B if c.kind.data == "partial_sum" else c for c in sbp]
    pieces = [reference_piece(value, whole, mesh, r) for r in range(int(np.prod(mesh)))]
    for group in partial_groups(sbp, mesh):
        noise = [rng.integers(-5, 5, pieces[0].shape).astype(np.float64) for _ in group[1:]]
        for r, e in zip(group[1:], noise):
            pieces[r] = e
        pieces[group[0]] = pieces[group[0]] - sum(noise, np.zeros(pieces[0].shape))
    return pieces


def check_numbers(program, shape, src, dst, mesh, rng) -> None:
    value = rng.integers(-9, 9, shape).astype(np.float64)
    (out,) = SpmdExecutor(program, LogicalVariables(mesh))([pieces_in(value, src, mesh, rng)])
    whole = [B if c.kind.data == "partial_sum" else c for c in dst]
    for group in partial_groups(dst, mesh):  # each device's piece, or the sum of partial pieces
        total = sum((out[r] for r in group[1:]), out[group[0]].copy())
        for r in group:
            np.testing.assert_array_equal(total, reference_piece(value, whole, mesh, r))


def expected_ops(src: SbpAttr, dst: SbpAttr, p: int) -> Counter:
    if src == dst or p == 1:
        return Counter()
    kinds = (src.kind.data, dst.kind.data)
    return Counter({
        ("split", "broadcast"): {"all_gather": 1},
        ("partial_sum", "broadcast"): {"all_reduce": 1},
        ("partial_sum", "split"): {"reduce_scatter": 1},
        ("split", "split"): {"all_to_all": 1},
        ("broadcast", "split"): {"shard_slice": 1},
        ("broadcast", "partial_sum"): {"broadcast_to_partial": 1},
        ("split", "partial_sum"): {"shard_embed": 1},
    }[kinds])  # fmt: skip


def shapes(p: int) -> list[tuple[int, int]]:
    """Even, uneven, and so small that some devices hold only padding."""
    return [(2 * p, 3 * p), (2 * p + 1, 3 * p - 1), (1, 2)]


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("src, dst", list(itertools.product(KINDS, repeat=2)), ids="->".join)
def test_every_transition_on_one_mesh_axis(p, src, dst) -> None:
    rng = np.random.default_rng(p)
    for shape in shapes(p):
        program, ops = lower(shape, [KINDS[src]], [KINDS[dst]], (p,))
        moved = Counter({k: v for k, v in ops.items() if k in (*COLLECTIVES, "shard_slice", "shard_embed", "broadcast_to_partial")})
        assert moved == expected_ops(KINDS[src], KINDS[dst], p), (shape, dict(ops))
        assert "boxing" not in ops
        check_numbers(program, shape, [KINDS[src]], [KINDS[dst]], (p,), rng)


def test_uneven_gather_unpads_and_scatter_pads() -> None:
    _, ops = lower((5, 4), [S0], [B], (2,))
    assert ops["all_gather"] == 1 and ops["slice"] == 1 and ops["pad"] == 0
    _, ops = lower((5, 4), [P], [S0], (2,))
    assert ops["pad"] == 1 and ops["reduce_scatter"] == 1
    _, ops = lower((5, 7), [S0], [S1], (2,))
    assert ops["pad"] == 1 and ops["all_to_all"] == 1 and ops["slice"] == 1
    _, ops = lower((6, 8), [S0], [S1], (2,))
    assert ops["pad"] == ops["slice"] == 0


ND = [list(c) for c in itertools.product([S0, S1, B, P], repeat=2)]


@pytest.mark.parametrize("src", ND, ids=lambda s: "".join(str(c) for c in s))
def test_every_transition_on_a_2x2_mesh(src) -> None:
    rng = np.random.default_rng(7)
    for dst in ND:
        for shape in [(4, 8), (5, 3)]:
            program, ops = lower(shape, src, dst, (2, 2))
            check_numbers(program, shape, src, dst, (2, 2), rng)
            touched = [{c.axis.data for c in (s, d) if c.kind.data == "split"} for s, d in zip(src, dst)]
            if src[0] == dst[0] or src[1] == dst[1] or not touched[0] & touched[1]:
                # one mesh axis at a time: each axis costs what it costs on its own
                expected = expected_ops(src[0], dst[0], 2) + expected_ops(src[1], dst[1], 2)
                if not (src[0] != dst[0] and any(c.kind.data == "split" and c.axis.data in touched[0] for c in src[1:])):
                    counted = Counter({k: ops[k] for k in expected})
                    assert counted == expected, (src, dst, dict(ops))


def test_two_d_examples_use_one_collective_per_changed_axis() -> None:
    _, ops = lower((4, 8), [S0, B], [B, B], (2, 2))
    assert {k: ops[k] for k in COLLECTIVES} == {"all_gather": 1, "all_reduce": 0, "reduce_scatter": 0, "all_to_all": 0}
    _, ops = lower((4, 8), [P, S1], [B, S1], (2, 2))
    assert {k: ops[k] for k in COLLECTIVES} == {"all_gather": 0, "all_reduce": 1, "reduce_scatter": 0, "all_to_all": 0}
    _, ops = lower((4, 8), [B, P], [S0, S1], (2, 2))
    assert ops["reduce_scatter"] == 1 and ops["shard_slice"] == 1


def test_per_device_func_records_what_the_runtime_needs() -> None:
    module = parse_module(boxing_job((5, 4), [S0], [B], (2,)))
    run_pipeline(module, "lower-to-physical")
    func = module.body.block.first_op
    assert isinstance(func, job.FuncOp)
    assert job.shape_of(func.body.block.args[0].type) == (3, 4)
    assert func.attributes["mesh"] == job.i64_array([2])
    assert list(func.attributes["arg_shapes"].data) == [job.i64_array([5, 4])]
    assert func.attributes["result_sbp"].data[0] == NdSbpAttr([B])
    gather = next(op for op in func.walk() if isinstance(op, job.AllGatherOp))
    assert gather.attributes["reason"].data == "test" and gather.location == next(
        op for op in parse_module(boxing_job((5, 4), [S0], [B], (2,))).walk() if isinstance(op, job.BoxingOp)
    ).location


def test_one_device_only_drops_the_boxing() -> None:
    module = parse_module(boxing_job((5, 4), [S0], [B], (1,)))
    run_pipeline(module, "lower-to-physical")
    func = module.body.block.first_op
    assert [op.name for op in func.body.block.ops] == ["job.return"]
    assert "mesh" not in func.attributes


def test_a_placement_outside_the_jobs_devices_is_a_located_error() -> None:
    text = boxing_job((4, 4), [S0], [B], (2,)).replace(
        'placement = #job.placement<cpu, ["0:0-1"]>, reason', 'placement = #job.placement<cpu, ["0:0-1"]>, src_placement = #job.placement<cpu, ["0:2-3"]>, reason'
    )
    with pytest.raises(CompileError, match=r"model.py:7:5: error: 'job.boxing' is placed on .*0:2-3.*, outside the job's devices"):
        run_pipeline(parse_module(text), "lower-to-physical")


def run_job(text: str, mesh, inputs, seed: int = 0):
    module = parse_module(text)
    run_pipeline(module, "lower-to-physical,convert-job-to-buffer,plan-memory")
    variables = LogicalVariables(mesh, seed=seed)
    return SpmdExecutor(module.body.block.first_op, variables)(inputs), variables


PLACE2 = '#job.placement<cpu, ["0:0-1"]>'


def test_mean_over_a_split_axis_divides_by_the_logical_count() -> None:
    text = f"""
job.func @mean(%x: tensor<6x4xf64>) -> tensor<4xf64> attributes {{placement = {PLACE2}, view = "consistent"}} {{
  %m = job.reduce_mean %x {{axes = array<i64: 0>, sbp = #job.nd_sbp<[partial_sum]>, sbp_in = [#job.nd_sbp<[split(0)]>]}} : (tensor<6x4xf64>) -> tensor<4xf64>
  %b = job.boxing %m {{src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>}} : (tensor<4xf64>) -> tensor<4xf64>
  job.return %b : tensor<4xf64>
}}"""
    x = np.random.default_rng(0).standard_normal((6, 4))
    (mean,), _ = run_job(text, (2,), [x])
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-12)


def test_a_partial_source_is_counted_once() -> None:
    text = f"""
job.func @bias(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {{placement = {PLACE2}, arg_sbp = [#job.nd_sbp<[partial_sum]>], view = "consistent"}} {{
  %f = job.fill {{value = 2.0 : f64, sbp = #job.nd_sbp<[partial_sum]>}} : tensor<3x4xf64>
  %y = job.add %x, %f {{sbp = #job.nd_sbp<[partial_sum]>}} : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  %b = job.boxing %y {{src_sbp = #job.nd_sbp<[partial_sum]>, sbp = #job.nd_sbp<[broadcast]>}} : (tensor<3x4xf64>) -> tensor<3x4xf64>
  job.return %b : tensor<3x4xf64>
}}"""
    x = np.random.default_rng(1).standard_normal((3, 4))
    (y,), _ = run_job(text, (2,), [x])
    np.testing.assert_allclose(y, x + 2.0, rtol=1e-12)


def test_model_parallel_variable_starts_from_the_one_device_value() -> None:
    from irflow.runtime.variables import VariableStore

    place = '#job.placement<cpu, ["0:0-2"]>'
    text = f"""
job.func @mp(%x: tensor<5x4xf64>) -> tensor<5x7xf64> attributes {{placement = {place}, arg_sbp = [#job.nd_sbp<[broadcast]>], view = "consistent"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "random_normal"}}, sbp = #job.nd_sbp<[split(1)]>}} : tensor<4x7xf64>
  %y = job.matmul %x, %w {{sbp = #job.nd_sbp<[split(1)]>}} : (tensor<5x4xf64>, tensor<4x7xf64>) -> tensor<5x7xf64>
  %b = job.boxing %y {{src_sbp = #job.nd_sbp<[split(1)]>, sbp = #job.nd_sbp<[broadcast]>}} : (tensor<5x7xf64>) -> tensor<5x7xf64>
  job.return %b : tensor<5x7xf64>
}}"""
    x = np.random.default_rng(2).standard_normal((5, 4))
    (y,), variables = run_job(text, (3,), [x], seed=9)
    one = VariableStore(seed=9)
    one.ensure("w", (4, 7), np.dtype(np.float64), {"kind": "random_normal"}, True)
    np.testing.assert_array_equal(variables["w"], one["w"])
    assert [s["w"].shape for s in variables.shards] == [(4, 3)] * 3
    np.testing.assert_allclose(y, x @ one["w"], rtol=1e-12)


@pytest.mark.parametrize("op, attrs, message", [
    ("reduce_sum", "axes = array<i64: 0>", "reduces over axis 0 of size 5, split unevenly over 2 devices"),
    ("softmax", "axis = 0 : i64", "normalizes over axis 0, which is split"),
], ids=["uneven-reduce", "split-softmax"])  # fmt: skip
def test_inexact_per_device_ops_are_located_errors(op, attrs, message) -> None:
    out = "tensor<4xf64>" if op == "reduce_sum" else "tensor<5xf64>"
    sbp = "partial_sum" if op == "reduce_sum" else "split(0)"
    shape = "tensor<5x4xf64>" if op == "reduce_sum" else "tensor<5xf64>"
    text = f"""
job.func @bad(%x: {shape}) -> {out} attributes {{placement = {PLACE2}}} {{
  %m = job.{op} %x {{{attrs}, sbp = #job.nd_sbp<[{sbp}]>, sbp_in = [#job.nd_sbp<[split(0)]>]}} : ({shape}) -> {out} loc("model.py":30:9)
  job.return %m : {out}
}}"""
    with pytest.raises(CompileError, match=f"model.py:30:9: error: 'job.{op}' {message}"):
        run_pipeline(parse_module(text), "lower-to-physical")


@pytest.mark.parametrize("src, dst, sbp_out, ok", [
    ("4x6", "24", "split(0)", True),
    ("4x6", "8x3", "split(0)", True),
    ("2x8", "16", "split(0)", False),  # rank 0 holds a column block: not the first half of the flat vector
], ids=["flatten", "regroup", "columns"])  # fmt: skip
def test_a_reshape_keeps_a_split_only_where_the_pieces_agree(src, dst, sbp_out, ok) -> None:
    sbp_in = "split(0)" if src == "4x6" else "split(1)"
    text = f"""
job.func @r(%x: tensor<{src}xf64>) -> tensor<{dst}xf64> attributes {{placement = {PLACE2}, arg_sbp = [#job.nd_sbp<[{sbp_in}]>], view = "consistent"}} {{
  %y = job.reshape %x {{sbp = #job.nd_sbp<[{sbp_out}]>, sbp_in = [#job.nd_sbp<[{sbp_in}]>]}} : (tensor<{src}xf64>) -> tensor<{dst}xf64> loc("model.py":40:2)
  %b = job.boxing %y {{src_sbp = #job.nd_sbp<[{sbp_out}]>, sbp = #job.nd_sbp<[broadcast]>}} : (tensor<{dst}xf64>) -> tensor<{dst}xf64>
  job.return %b : tensor<{dst}xf64>
}}"""
    if not ok:
        with pytest.raises(CompileError, match="model.py:40:2: error: 'job.reshape' of \\(2, 8\\) to \\(16,\\): split\\(1\\) does not map"):
            run_pipeline(parse_module(text), "lower-to-physical")
        return
    x = np.arange(24.0).reshape(4, 6)
    (y,), _ = run_job(text, (2,), [x])
    np.testing.assert_array_equal(y, x.reshape([int(d) for d in dst.split("x")]))


def test_pieces_that_do_not_fit_the_op_are_a_located_error() -> None:
    text = f"""
job.func @r(%x: tensor<5x4xf64>) -> tensor<20xf64> attributes {{placement = {PLACE2}}} {{
  %y = job.reshape %x {{sbp = #job.nd_sbp<[split(0)]>, sbp_in = [#job.nd_sbp<[split(0)]>]}} : (tensor<5x4xf64>) -> tensor<20xf64> loc("model.py":41:2)
  job.return %y : tensor<20xf64>
}}"""
    with pytest.raises(CompileError, match=r"model.py:41:2: error: 'job.reshape' with sbp \(\[split\(0\)\]\) -> \[split\(0\)\] "
                       r"does not fit per-device pieces: cannot reshape tensor<3x4xf64> to tensor<10xf64>"):
        run_pipeline(parse_module(text), "lower-to-physical")


def test_the_program_does_not_grow_with_the_device_count() -> None:
    sizes = []
    for p in (2, 1024):
        module = parse_module(boxing_job((4096, 3), [S0], [S1], (p,)))
        run_pipeline(module, "lower-to-physical,convert-job-to-buffer")
        sizes.append(sum(1 for _ in module.walk()))
    assert sizes[0] == sizes[1]


TRAIN = """
job.func @train(%x: tensor<{b}x6xf64>, %y: tensor<{b}xi32>) -> tensor<{b}xf64> attributes {{job_type = "train"{placement}}} {{
  %w1 = job.variable {{name = "w1", initializer = {{kind = "random_normal"}}{hint}}} : tensor<8x6xf64>
  %h = job.matmul %x, %w1 {{transpose_b = true}} : (tensor<{b}x6xf64>, tensor<8x6xf64>) -> tensor<{b}x8xf64>
  %b1 = job.variable {{name = "b1", initializer = {{kind = "constant", value = 0.1 : f64}}}} : tensor<8xf64>
  %hb = job.bias_add %h, %b1 : (tensor<{b}x8xf64>, tensor<8xf64>) -> tensor<{b}x8xf64>
  %r = job.relu %hb : (tensor<{b}x8xf64>) -> tensor<{b}x8xf64>
  %w2 = job.variable {{name = "w2", initializer = {{kind = "random_normal"}}}} : tensor<3x8xf64>
  %o = job.matmul %r, %w2 {{transpose_b = true}} : (tensor<{b}x8xf64>, tensor<3x8xf64>) -> tensor<{b}x3xf64>
  %loss = job.sparse_softmax_cross_entropy %o, %y : (tensor<{b}x3xf64>, tensor<{b}xi32>) -> tensor<{b}xf64>
  job.minimize %loss {{optimizer = {{kind = "sgd", momentum = 0.0 : f64, lr = {{kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 0.1>}}}}}} : tensor<{b}xf64>
  job.return %loss : tensor<{b}xf64>
}}"""


def train(mesh: tuple[int, ...], batch: int, hint: str, steps: int = 3):
    from irflow.compiler import compile_job
    from irflow.dialects.sbp import PlacementAttr
    from irflow.runtime.variables import VariableStore
    from irflow.target import Target

    devices = int(np.prod(mesh))
    placement = PlacementAttr("cpu", [f"0:0-{devices - 1}"], mesh if len(mesh) > 1 else ())
    text = TRAIN.format(
        b=batch,
        placement=f", placement = {placement}" if devices > 1 else "",
        hint=f', sbp = #job.nd_sbp<[{hint}]>, sbp_origin = "hint"' if hint and devices > 1 else "",
    )
    store = LogicalVariables(mesh, seed=3) if devices > 1 else VariableStore(seed=3)
    pipeline = "autodiff,optimizer,cse,sbp-infer,insert-boxing,lower-to-physical,convert-job-to-buffer,plan-memory"
    exe = compile_job(parse_module(text), "train", store, Target("cpu", placement), pipeline)
    rng = np.random.default_rng(0)
    losses = [exe([rng.standard_normal((batch, 6)), rng.integers(0, 3, batch).astype(np.int32)])[0] for _ in range(steps)]
    if hint and devices > 1:  # the hinted weight lives in pieces: model (or hybrid) parallel
        parts = [SbpAttr("split", int(c[6])) if c.startswith("split") else B for c in hint.split(", ")]
        assert store.shards[0]["w1"].shape == local_shape((8, 6), parts, mesh) != (8, 6)
    return losses, store.snapshot()


@pytest.mark.parametrize("mesh, hint", [
    ((2,), ""), ((3,), ""), ((4,), ""), ((2, 2), ""),
    ((2,), "split(0)"), ((3,), "split(0)"), ((4,), "split(1)"), ((3,), "split(1)"),
    ((2, 2), "split(0), split(1)"), ((2, 2), "broadcast, split(0)"),
], ids=str)  # fmt: skip
@pytest.mark.parametrize("batch", [12, 10], ids=["even", "uneven"])
def test_train_steps_on_many_devices_equal_one_device(mesh, hint, batch) -> None:
    """The whole pipeline (autodiff to plan-memory) with sbp-infer's plan: same losses and variables as one device.

    Inferred plans, and the first weight hinted split over its output or input
    features (model parallel) or over both mesh axes of a 2x2 mesh (hybrid).
    """
    losses, variables = train((1,), batch, "")
    many_losses, many = train(mesh, batch, hint)
    for a, b in zip(losses, many_losses):
        np.testing.assert_allclose(b, a, rtol=1e-10)
    assert sorted(many) == sorted(variables)
    for name in variables:
        np.testing.assert_allclose(many[name], variables[name], rtol=1e-10, err_msg=name)
