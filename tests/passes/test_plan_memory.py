"""plan-memory: liveness from the IR, no overlap of live buffers, in-place reuse, the plan in the IR."""

import itertools

import pytest

from irflow.dialects import buffer
from irflow.compiler import run_pipeline


CHAIN = """
job.func @chain(%x: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {job_type = "predict"} {
  %a = job.exp %x : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %b = job.tanh %a : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = job.matmul %b, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = job.sigmoid %c : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = job.matmul %d, %c : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  job.return %e : tensor<64x64xf32>
}
"""


@pytest.fixture
def planned(parse_ir):
    """Text of a job -> its buffer.program after bufferization and planning."""

    def run(text: str, spec: str = "convert-job-to-buffer,plan-memory"):
        module = parse_ir(text)
        run_pipeline(module, spec)
        return next(op for op in module.walk() if isinstance(op, buffer.ProgramOp))

    return run


def views(program):
    return [op for op in program.body.block.ops if isinstance(op, buffer.ViewOp)]


def use_span(program, value):
    ops = list(program.body.block.ops)
    uses = [i for i, op in enumerate(ops) if isinstance(op, buffer.BufferOp) and value in (*op.reads(), *op.writes())]
    return min(uses), max(uses)


def test_live_buffers_never_share_bytes(planned, mlp_text):
    for text in (mlp_text, CHAIN):
        program = planned(text)
        spans = {v: use_span(program, v.res) for v in views(program)}
        for v, w in itertools.combinations(spans, 2):
            (f1, l1), (f2, l2) = spans[v], spans[w]
            if f1 <= l2 and f2 <= l1 and v.offset != w.offset:
                a = (v.offset.value.data, v.offset.value.data + buffer.nbytes(v.res.type))
                b = (w.offset.value.data, w.offset.value.data + buffer.nbytes(w.res.type))
                assert a[1] <= b[0] or b[1] <= a[0], f"{v.res.name_hint} and {w.res.name_hint} overlap while live"


def test_in_place_reuse_shares_the_input_buffer(planned):
    program = planned(CHAIN)
    by_name = {v.res.name_hint: v.offset.value.data for v in views(program)}
    assert by_name["x"] == by_name["a"] == by_name["b"]  # exp and tanh write over their dying inputs
    assert by_name["c"] != by_name["d"]  # c is still read after sigmoid


ELEMENTWISE = """
job.func @elementwise(%x: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {job_type = "predict"} {
  %a = job.exp %x : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %b = job.tanh %a : (tensor<64x64xf32>) -> tensor<64x64xf32>
  job.return %b : tensor<64x64xf32>
}
"""


def test_in_place_reuse_halves_an_elementwise_chain(planned):
    with_reuse = planned(ELEMENTWISE).attributes["arena_size"].value.data
    without = planned(ELEMENTWISE, "convert-job-to-buffer,plan-memory{in-place=false}").attributes["arena_size"].value.data
    assert with_reuse == 64 * 64 * 4 and without == 2 * with_reuse


def test_plan_is_recorded_in_the_ir(planned):
    program = planned(CHAIN)
    size = program.attributes["arena_size"].value.data
    bound = program.attributes["lower_bound"].value.data
    assert 0 < bound <= size
    arena = next(op for op in program.body.block.ops if isinstance(op, buffer.ArenaOp))
    assert arena.size.value.data == size
    assert all("lifetime" in v.attributes for v in views(program))


def test_outputs_stay_live_until_copied_out(planned):
    program = planned(CHAIN)
    ops = list(program.body.block.ops)
    out = next(op for op in ops if isinstance(op, buffer.OutputOp))
    last = ops.index(out)
    src = out.buf.owner
    # Lifetimes index the schedule as it was before the arena op was prepended.
    assert src.attributes["lifetime"].get_values()[1] == last - 1


BRANCHES = """
job.func @branches(%x: tensor<32x32xf32>) -> (tensor<32xf32>, tensor<32xf32>) attributes {job_type = "predict"} {
  %p = job.exp %x : (tensor<32x32xf32>) -> tensor<32x32xf32>
  %q = job.matmul %x, %x : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %s = job.reduce_sum %p {axes = array<i64: 1>} : (tensor<32x32xf32>) -> tensor<32xf32>
  %t = job.reduce_sum %q {axes = array<i64: 1>} : (tensor<32x32xf32>) -> tensor<32xf32>
  job.return %s, %t : tensor<32xf32>, tensor<32xf32>
}
"""


def test_reordering_lets_branches_die_sooner(planned):
    traced = planned(BRANCHES).attributes["arena_size"].value.data
    reordered = planned(BRANCHES, "convert-job-to-buffer,plan-memory{reorder=true}").attributes["arena_size"].value.data
    assert (traced, reordered) == (3 * 4096, 2 * 4096 + 128)


def test_reordered_programs_compute_the_same(mlp_module, parse_ir):
    import numpy as np

    from irflow.compiler import compile_job
    from irflow.runtime import VariableStore

    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    plain = compile_job(parse_ir(BRANCHES), "branches", VariableStore())([x])
    spec = "convert-job-to-buffer,plan-memory{reorder=true}"
    reordered = compile_job(parse_ir(BRANCHES), "branches", VariableStore(), pipeline=spec)([x])
    for a, b in zip(plain, reordered):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(plain[1], (x @ x).sum(1), rtol=1e-4, atol=1e-4)
    store = VariableStore()
    ref = compile_job(mlp_module, "mlp", store)
    again = compile_job(mlp_module, "mlp", store, pipeline="cse," + spec)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_array_equal(ref([x])[0], again([x])[0])
