"""sbp-infer: the plan is the optimum of its cost model, hints win, defaults and origins are recorded."""

import itertools
import random
import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ArrayAttr, FunctionType, ModuleOp, StringAttr, f32
from xdsl.ir import SSAValue

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.context import make_context
from irflow.dialects import job
from irflow.dialects.job import shape_of, tensor
from irflow.dialects.sbp import PARTIAL, PlacementAttr, nd_attr, nd_codes
from irflow.passes.insert_boxing import sbp_report
from irflow.passes.sbp_infer import SbpInferPass, build_graph, plan_cost, refine, search

PLACEMENTS = [
    PlacementAttr("cpu", ["0:0-1"]),
    PlacementAttr("cpu", ["0:0-2"]),
    PlacementAttr("cpu", ["0:0-3"]),
    PlacementAttr("cpu", ["0:0-3"], hierarchy=[2, 2]),
]
SHAPES = [(4, 6), (6, 8), (8, 4), (6, 6)]


def random_job(rng: random.Random, max_ops: int, hints: bool = True) -> job.FuncOp:
    """A random predict job of up to `max_ops` ops over 2-D values: matmuls, elementwise, reductions."""
    placement = rng.choice(PLACEMENTS)
    args = [tensor(rng.choice(SHAPES), f32) for _ in range(rng.randint(1, 2))]
    func = job.FuncOp("random", "predict", args, [])
    block = func.body.block
    values: list[SSAValue] = list(block.args)

    def emit(op: job.JobOp) -> None:
        block.add_op(op)
        values.append(op.results[0])

    if rng.random() < 0.7:
        var = job.VariableOp.make([], tensor(rng.choice(SHAPES), f32), name="w", initializer={"kind": "zeros"})
        emit(var)
    while len(block.ops) < max_ops:
        kind = rng.choice(["unary", "binary", "matmul", "matmul", "reduce", "transpose"])
        x = rng.choice(values)
        a = shape_of(x.type)
        if kind == "unary":
            emit(rng.choice([job.ReluOp, job.TanhOp, job.NegOp]).make([x]))
        elif kind == "binary":
            same = [v for v in values if shape_of(v.type) == a]
            emit(rng.choice([job.AddOp, job.MulOp, job.SubOp]).make([x, rng.choice(same)]))
        elif kind == "matmul":
            fits = [(v, False) for v in values if shape_of(v.type)[0] == a[1]]
            fits += [(v, True) for v in values if shape_of(v.type)[1] == a[1]]
            if fits:
                y, tb = rng.choice(fits)
                emit(job.MatmulOp.make([x, y], transpose_b=tb))
        elif kind == "reduce":
            emit(job.ReduceSumOp.make([x], axes=[rng.randint(0, 1)], keepdims=True))
        else:
            emit(job.TransposeOp.make([x], perm=[1, 0]))
    for op in block.ops:
        if hints and rng.random() < 0.15 and not isinstance(op, job.VariableOp):
            hint = rng.choice(sorted({s.out for s in _signatures(op, placement)}))
            op.properties["sbp"] = nd_attr(hint)
            op.attributes["sbp_origin"] = StringAttr("hint")
    outs = rng.sample(values[len(args):] or values, k=1)
    block.add_op(job.ReturnOp(outs))
    func.function_type = FunctionType.from_lists(args, [v.type for v in outs])
    func.attributes["placement"] = placement
    return func


def _signatures(op: job.JobOp, placement: PlacementAttr) -> list:
    from irflow.dialects.sbp import hierarchy_of
    from irflow.passes.sbp_rules import signatures

    return signatures(op, hierarchy_of(placement), 0.25)


def brute_force(g) -> float:  # noqa: ANN001 - the graph of sbp_infer
    """The least cost over every combination of signatures: test-only exhaustive enumeration."""
    return min(plan_cost(g, plan) for plan in itertools.product(*(range(len(n.choices)) for n in g.nodes)))


def _small_enough(g, limit: int = 4000) -> bool:  # noqa: ANN001
    count = 1
    for n in g.nodes:
        count *= len(n.choices)
    return count <= limit


@pytest.mark.parametrize("seed", range(40))
def test_plan_is_the_exhaustive_optimum(seed: int) -> None:
    rng = random.Random(seed)
    for max_ops in range(12, 2, -1):
        func = random_job(rng, max_ops)
        g = build_graph(func, 0.25).graph
        if _small_enough(g):
            break
    plan, exact = search(g, 4096)
    assert exact
    assert plan_cost(g, plan) == pytest.approx(brute_force(g), rel=1e-12, abs=1e-9)


def test_beam_and_descent_never_beat_the_optimum_and_improve_the_greedy_start() -> None:
    rng = random.Random(7)
    for _ in range(4):
        g = build_graph(random_job(rng, 24), 0.25).graph
        best, exact = search(g, 512)
        greedy, greedy_exact = search(g, 1)
        refined = refine(g, list(greedy))
        assert plan_cost(g, refined) <= plan_cost(g, greedy) + 1e-9
        if exact:
            assert plan_cost(g, best) <= plan_cost(g, refined) + 1e-9


# ----------------------------------------------------------------- the MLP train job of the examples


sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
import models  # noqa: E402


def mlp_train_module(batch: int, momentum: float = 0.0) -> ModuleOp:
    @flow.global_function(type="train")
    def train(
        images: tp.Numpy.Placeholder((batch, 1, 28, 28), dtype=flow.float),
        labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32),
    ) -> tp.Numpy:
        logits = models.mlp(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=momentum).minimize(loss)
        return loss

    return train.module.clone()


def _compile(module: ModuleOp, placement: PlacementAttr | None) -> job.FuncOp:
    func = next(op for op in module.walk() if isinstance(op, job.FuncOp))
    if placement is not None:
        func.attributes["placement"] = placement
    run_pipeline(module, "autodiff,optimizer,cse,sbp-infer,insert-boxing")
    return func


def test_data_parallel_gradients_are_partial_and_all_reduced_before_the_update() -> None:
    func = _compile(mlp_train_module(1024), PlacementAttr("cpu", ["0:0-3"]))
    updates = [op for op in func.body.block.ops if isinstance(op, job.SgdUpdateOp)]
    assert len(updates) == 4
    for update in updates:
        box = update.operands[1].owner
        assert isinstance(box, job.BoxingOp), f"{update.operands[0].owner.var_name.data}'s gradient is not boxed"
        assert nd_codes(box.src_sbp) == (PARTIAL,) and nd_codes(box.sbp) == (-1,)
        assert box.attributes["reason"] == StringAttr("job.sgd_update needs [broadcast] for operand 1")
    report = sbp_report(ModuleOp([func.clone()]))
    assert report.count("all_reduce") == 4
    assert "job @train on #job.placement<cpu, [\"0:0-3\"]> (4 devices)" in report


def test_one_device_is_all_broadcast_without_boxing() -> None:
    func = _compile(mlp_train_module(8), None)
    assert not any(isinstance(op, job.BoxingOp) for op in func.body.block.ops)
    for op in func.body.block.ops:
        if isinstance(op, job.JobOp) and op.results:
            assert nd_codes(op.sbp) == (-1,)
            assert op.placement == PlacementAttr("cpu", ["0:0"])
    assert func.attributes["arg_sbp"] == ArrayAttr([nd_attr((-1,))] * 2)


def test_origins_are_recorded_on_every_op() -> None:
    module = mlp_train_module(64)
    func = next(op for op in module.walk() if isinstance(op, job.FuncOp))
    func.attributes["placement"] = PlacementAttr("cpu", ["0:0-1"])
    run_pipeline(module, "autodiff,optimizer,sbp-infer")
    for op in func.body.block.ops:
        if not isinstance(op, job.ReturnOp):
            assert op.attributes["sbp_origin"].data in ("default", "rule", "cost"), op.name  # type: ignore[attr-defined]
    variables = [op for op in func.body.block.ops if isinstance(op, job.VariableOp)]
    assert {op.attributes["sbp_origin"].data for op in variables} == {"default"}  # type: ignore[attr-defined]


def test_optimizer_state_follows_its_weight() -> None:
    """A momentum buffer takes the SBP of the variable it belongs to (a split weight: a split buffer)."""
    module = mlp_train_module(64, momentum=0.9)
    func = next(op for op in module.walk() if isinstance(op, job.FuncOp))
    for op in func.body.block.ops:
        if isinstance(op, job.VariableOp) and op.var_name.data == "dense1-weight":
            op.properties["sbp"] = nd_attr((0,))
            op.attributes["sbp_origin"] = StringAttr("hint")
    func.attributes["placement"] = PlacementAttr("cpu", ["0:0-1"])
    run_pipeline(module, "autodiff,optimizer,sbp-infer,insert-boxing")
    (update,) = [
        op for op in func.body.block.ops
        if isinstance(op, job.MomentumUpdateOp) and op.operands[0].owner.var_name.data == "dense1-weight"
    ]
    state = update.operands[2].owner
    assert isinstance(state, job.VariableOp)
    assert nd_codes(state.sbp) == (0,) and state.attributes["sbp_origin"] == StringAttr("rule")
    assert nd_codes(update.operands[1].owner.sbp) == (0,)


def test_pass_runs_standalone_on_every_func() -> None:
    rng = random.Random(3)
    funcs = [random_job(rng, 8, hints=False) for _ in range(2)]
    funcs[1].sym_name = StringAttr("second")
    module = ModuleOp(funcs)
    SbpInferPass().apply(make_context(), module)
    module.verify()
    for op in module.walk():
        if isinstance(op, job.JobOp) and op.results:
            assert op.sbp is not None and op.placement is not None
