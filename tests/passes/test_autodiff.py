"""autodiff: the backward program's shape, and every gradient rule against central differences.

Numerical checks run a train job (SGD, lr = 1, momentum 0: the gradient is
w_before - w_after) and a predict job of the same forward program, all in
float64, through the runtime.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from xdsl.dialects.builtin import FileLineColLoc, FunctionType, IntAttr, ModuleOp, StringAttr, TensorType, f32, f64, i64
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser

from irflow.context import make_context
from irflow.dialects import job
from irflow.dialects.bounds import with_dynamic
from irflow.dialects.job import tensor, to_attr
from irflow.errors import CompileError
from irflow.passes.autodiff import AutodiffPass
from irflow.passes.gradients import GRADIENTS, NO_GRADIENT

SGD_LR1 = {"kind": "sgd", "momentum": 0.0, "lr": {"kind": "piecewise_constant", "boundaries": [], "values": [1.0]}}
OPT = (
    '{optimizer = {kind = "sgd", momentum = 0.0, '
    'lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 1.0>}}}'
)


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def autodiff(text: str) -> ModuleOp:
    module = parse(text)
    AutodiffPass().apply(make_context(), module)
    module.verify()
    return module


def ops_of(module: ModuleOp, cls: type[Operation]) -> list[Operation]:
    return [op for op in module.walk() if isinstance(op, cls)]


def the(module: ModuleOp, cls: type[Operation]) -> Operation:
    (op,) = ops_of(module, cls)
    return op


def pair_names(module: ModuleOp) -> list[str]:
    apply = the(module, job.ApplyGradientsOp)
    return [var.owner.var_name.data for var, _ in apply.pairs()]


# ----------------------------------------------------------------- the backward program


LINEAR = f"""
job.func @train(%x: tensor<4x3xf32>) -> tensor<4x2xf32> attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<3x2xf32>
  %b = job.variable {{name = "b", initializer = {{kind = "zeros"}}}} : tensor<2xf32>
  %y = job.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32> loc("model.py":7:8)
  %z = job.bias_add %y, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32> loc("model.py":8:8)
  job.minimize %z {OPT} : tensor<4x2xf32> loc("model.py":9:4)
  job.return %z : tensor<4x2xf32>
}}
"""


def test_minimize_becomes_apply_gradients_before_return():
    module = autodiff(LINEAR)
    assert not ops_of(module, job.MinimizeOp)
    apply = the(module, job.ApplyGradientsOp)
    assert pair_names(module) == ["w", "b"]
    assert apply.optimizer == to_attr(SGD_LR1)
    assert isinstance(apply.next_op, job.ReturnOp)
    assert apply.location == FileLineColLoc(StringAttr("model.py"), IntAttr(9), IntAttr(4))
    for var, grad in apply.pairs():
        assert grad.type == var.type


def test_non_scalar_loss_is_seeded_with_its_mean():
    module = autodiff(LINEAR)
    seeds = [op for op in ops_of(module, job.FillOp) if op.results[0].type == tensor((4, 2), f32)]
    (seed,) = seeds
    assert seed.value.value.data == pytest.approx(1 / 8)


def test_gradient_ops_carry_the_forward_location():
    module = autodiff(LINEAR)
    apply = the(module, job.ApplyGradientsOp)
    (w, dw), (b, db) = apply.pairs()
    assert isinstance(dw.owner, job.MatmulOp) and dw.owner.location.line.data == 7
    assert isinstance(db.owner, job.ReduceSumOp) and db.owner.location.line.data == 8
    forward = ops_of(module, job.MatmulOp)[0]
    assert forward.results[0].name_hint == "y"


def test_only_trainable_float_variables_the_loss_depends_on():
    module = autodiff(f"""
job.func @train(%x: tensor<4xf32>) -> tensor<f32> attributes {{job_type = "train"}} {{
  %frozen = job.variable {{name = "frozen", trainable = false, initializer = {{kind = "zeros"}}}} : tensor<4xf32>
  %unused = job.variable {{name = "unused", initializer = {{kind = "zeros"}}}} : tensor<4xf32>
  %count = job.variable {{name = "count", initializer = {{kind = "zeros"}}}} : tensor<4xi64>
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<4xf32>
  %a = job.mul %x, %frozen : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = job.cast %count : (tensor<4xi64>) -> tensor<4xf32>
  %b = job.mul %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = job.mul %b, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = job.reduce_sum %y {{axes = array<i64: 0>}} : (tensor<4xf32>) -> tensor<f32>
  job.minimize %l {OPT} : tensor<f32>
  job.return %l : tensor<f32>
}}""")
    assert pair_names(module) == ["w"]
    # Nothing flows towards the frozen side: its only backward op is the one w needs.
    assert not any(op.results and op.results[0].type == tensor((4,), i64) for op in module.walk()
                   if op not in ops_of(module, job.VariableOp))


def test_no_gradient_through_argmax_comparisons_and_dropout_masks():
    module = autodiff(f"""
job.func @train(%x: tensor<3x4xf32>) -> tensor<f32> attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<3x4xf32>
  %mask = job.dropout_mask {{rate = 0.5 : f64, seed = 1 : i64}} : tensor<3x4xf32>
  %d = job.mul %w, %mask : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %cmp = job.greater %w, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi8>
  %f = job.cast %cmp : (tensor<3x4xi8>) -> tensor<3x4xf32>
  %am = job.argmax %w : (tensor<3x4xf32>) -> tensor<3xi64>
  %amf = job.cast %am : (tensor<3xi64>) -> tensor<3xf32>
  %amr = job.reshape %amf : (tensor<3xf32>) -> tensor<3x1xf32>
  %e = job.mul %d, %f : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %g = job.mul %e, %amr : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %l = job.reduce_sum %g {{axes = array<i64: 0, 1>}} : (tensor<3x4xf32>) -> tensor<f32>
  job.minimize %l {OPT} : tensor<f32>
  job.return %l : tensor<f32>
}}""")
    assert pair_names(module) == ["w"]
    apply = the(module, job.ApplyGradientsOp)
    backward = [op for op in module.walk() if op.location is not None and op.parent is apply.parent
                and list(op.parent.ops).index(op) > list(op.parent.ops).index(ops_of(module, job.ReduceSumOp)[0])]
    assert not any(isinstance(op, (job.ArgmaxOp, job.GreaterOp, job.DropoutMaskOp)) for op in backward)


def test_fan_out_gradients_are_summed_with_add():
    module = autodiff(f"""
job.func @train() -> tensor<f32> attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<f32>
  %a = job.exp %w : (tensor<f32>) -> tensor<f32>
  %b = job.mul %a, %w : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %c = job.add %b, %a : (tensor<f32>, tensor<f32>) -> tensor<f32>
  job.minimize %c {OPT} : tensor<f32>
  job.return %c : tensor<f32>
}}""")
    (_, dw), = the(module, job.ApplyGradientsOp).pairs()
    assert isinstance(dw.owner, job.AddOp)
    assert dw.name_hint == "w_grad"
    assert sum(isinstance(op, job.AddOp) for op in module.walk()) == 3  # forward add, a's two uses, w's two uses


def test_variable_read_twice_gets_one_pair():
    module = autodiff(f"""
job.func @train() -> tensor<f32> attributes {{job_type = "train"}} {{
  %w1 = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<f32>
  %w2 = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<f32>
  %c = job.mul %w1, %w2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  job.minimize %c {OPT} : tensor<f32>
  job.return %c : tensor<f32>
}}""")
    assert pair_names(module) == ["w"]


def test_missing_gradient_is_a_compile_error_at_the_op():
    text = f"""
job.func @train() -> tensor<f32> attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<2x3xf32>
  %dy = job.variable {{name = "dy", trainable = false, initializer = {{kind = "zeros"}}}} : tensor<2xf32>
  %y = job.reduce_max %w {{axes = array<i64: 1>}} : (tensor<2x3xf32>) -> tensor<2xf32>
  %g = job.reduce_max_grad %dy, %w, %y {{axes = array<i64: 1>}} : (tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32> loc("net.py":12:5)
  %l = job.reduce_sum %g {{axes = array<i64: 0, 1>}} : (tensor<2x3xf32>) -> tensor<f32>
  job.minimize %l {OPT} : tensor<f32>
  job.return %l : tensor<f32>
}}"""
    with pytest.raises(CompileError) as info:
        autodiff(text)
    assert "'job.reduce_max_grad'" in str(info.value)
    assert str(info.value).startswith("net.py:12:5: error: no gradient is defined")


def test_loss_without_trainable_variables_is_an_error():
    with pytest.raises(CompileError, match="does not depend on any trainable variable"):
        autodiff(f"""
job.func @train(%x: tensor<f32>) -> tensor<f32> attributes {{job_type = "train"}} {{
  %y = job.exp %x : (tensor<f32>) -> tensor<f32>
  job.minimize %y {OPT} : tensor<f32> loc("t.py":3:1)
  job.return %y : tensor<f32>
}}""")


def test_jobs_without_minimize_are_untouched():
    text = """
job.func @predict(%x: tensor<2xf32>) -> tensor<2xf32> attributes {job_type = "predict"} {
  %y = job.exp %x : (tensor<2xf32>) -> tensor<2xf32>
  job.return %y : tensor<2xf32>
}"""
    assert str(autodiff(text)) == str(parse(text))


def test_every_op_is_classified():
    """Each op is differentiable, gradient-free, or without a rule: the two max backward ops, reduce_min's, reduce_prod's,
    a concatenation's along a dynamic axis, digamma (lgamma's backward), ctc_loss's and the TensorBuffer conversions
    (none in OneFlow either)."""
    without_rule = {job.ReduceMaxGradOp, job.ReduceMinGradOp, job.ReduceProdGradOp, job.MaxPool2DGradOp, job.ConcatGradOp,
                    job.TensorToTensorBufferOp, job.TensorBufferToTensorOp, job.TensorBufferGetOp, job.DigammaOp,
                    job.CtcLossGradOp}
    effects = {job.AssignOp, job.SgdUpdateOp, job.MomentumUpdateOp, job.AdamUpdateOp, job.RmsPropUpdateOp,
               job.CenteredRmsPropUpdateOp, job.LambUpdateOp, job.LarsUpdateOp, job.LazyAdamUpdateOp,
               job.IndexedSlicesSgdUpdateOp, job.IndexedSlicesMomentumUpdateOp, job.IndexedSlicesAdamUpdateOp,
               job.MinimizeOp, job.ApplyGradientsOp}
    for cls in job.COMPUTE_OPS:
        kinds = [cls in GRADIENTS, cls in NO_GRADIENT, cls in without_rule, cls in effects]
        assert sum(kinds) == 1, cls.name
    # job.boxing runs only once lowered to collectives: its rule is checked structurally below. fake_quantization's
    # is the straight-through estimator, by design not its derivative (0 almost everywhere): test_quantization.py.
    assert set(GRADIENTS) - {job.BoxingOp, job.FakeQuantizationOp} == {c.cls for c in CASES} - {None}, \
        "every rule has a numeric test"


def test_boxing_gradient_is_the_incoming_gradient():
    """A boxing is logically the identity, so its gradient is dy itself; sbp-infer distributes it."""
    module = autodiff(f"""
job.func @train(%x: tensor<4x3xf32>) attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<4x3xf32>
  %b = job.boxing %w {{sbp = #job.nd_sbp<[broadcast]>}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = job.mul %b, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  job.minimize %y {OPT} : tensor<4x3xf32>
  job.return
}}""")
    (var, grad), = the(module, job.ApplyGradientsOp).pairs()  # type: ignore[attr-defined]
    assert isinstance(grad.owner, job.MulOp) and grad.owner.operands[1] is module.body.block.first_op.body.block.args[0]


# ----------------------------------------------------------------- numerical checks


Emit = Callable[..., SSAValue]


@dataclass
class Case:
    """One forward op (or a few) over float64 variables; `forward(emit, v)` returns the loss-shaped value."""

    id: str
    cls: type[Operation] | None
    variables: dict[str, tuple[int, ...]]
    forward: Callable[[Emit, dict[str, SSAValue]], SSAValue]
    positive: tuple[str, ...] = ()
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    eps: float = 1e-6
    rtol: float = 1e-6
    atol: float = 1e-7
    reduce: bool = True  # False: minimize the non-scalar value itself (through its mean)
    constant: tuple[str, ...] = ()  # variables the loss depends on with zero derivative: no pair
    bounds: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    """Inputs that are dynamic: (bound, dynamic axes); the array fed is the actual size."""


def _unary(cls: type[job.JobOp], positive: bool = False) -> Case:
    return Case(cls.name[4:], cls, {"a": (2, 3)}, lambda e, v: e(cls, [v["a"]]),
                positive=("a",) if positive else ())


def _inside(cls: type[job.JobOp], *maps: type[job.JobOp]) -> Case:
    """A unary op of a domain: its operand first mapped into it (tanh into (-1, 1), exp of exp above 1)."""

    def build(e, v):
        a = v["a"]
        for m in reversed(maps):
            a = e(m, [a])
        return e(cls, [a])

    return Case(cls.name[4:], cls, {"a": (2, 3)}, build)


def _binary(cls: type[job.JobOp], b_shape: tuple[int, ...], positive: tuple[str, ...] = ()) -> Case:
    suffix = "x".join(map(str, b_shape)) or "scalar"
    return Case(f"{cls.name[4:]}-{suffix}", cls, {"a": (2, 3), "b": b_shape},
                lambda e, v: e(cls, [v["a"], v["b"]]), positive=positive)


def _matmul(ta: bool, tb: bool) -> Case:
    a = (4, 3) if ta else (3, 4)
    b = (5, 4) if tb else (4, 5)
    return Case(f"matmul-{'T' if ta else 'N'}{'T' if tb else 'N'}", job.MatmulOp, {"a": a, "b": b},
                lambda e, v: e(job.MatmulOp, [v["a"], v["b"]], transpose_a=ta, transpose_b=tb))


CONV = {"strides": [1, 1], "pads": [1, 1, 1, 1]}
CONV_STRIDED = {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2], "groups": 2}
LABELS = np.array([2, 0, 3], np.int64)
DYNAMIC_X = np.array([[0.5, -1.0, 2.0, 1.5], [-0.3, 0.8, -1.2, 0.1]])

CASES = [
    *(_unary(c) for c in (job.NegOp, job.ExpOp, job.SquareOp, job.ReluOp, job.SigmoidOp, job.TanhOp,
                          job.GeluOp, job.AbsOp, job.SinOp, job.CosOp, job.Expm1Op, job.ErfOp, job.ErfcOp)),
    *(_unary(c, positive=True) for c in (job.LogOp, job.SqrtOp, job.RsqrtOp, job.Log1pOp, job.LgammaOp)),
    *(_unary(c) for c in (job.TanOp, job.AtanOp, job.SinhOp, job.CoshOp, job.AsinhOp)),
    *(_inside(c, job.TanhOp) for c in (job.AsinOp, job.AcosOp, job.AtanhOp)),
    _inside(job.AcoshOp, job.ExpOp, job.ExpOp),
    _binary(job.AddOp, (2, 3)),
    _binary(job.AddOp, (3,)),
    _binary(job.SubOp, (2, 1)),
    _binary(job.MulOp, (1, 3)),
    _binary(job.MulOp, ()),
    _binary(job.DivOp, (3,), positive=("b",)),
    _binary(job.MaximumOp, (2, 3)),
    _binary(job.MaximumOp, (3,)),
    _binary(job.MinimumOp, (2, 1)),
    _binary(job.PowOp, (2, 3), positive=("a",)),
    _binary(job.PowOp, (3,), positive=("a",)),
    _binary(job.FloorModOp, (2, 3), positive=("b",)),
    _binary(job.FloorModOp, (3,), positive=("b",)),
    _binary(job.Atan2Op, (2, 3)),
    _binary(job.Atan2Op, (3,)),
    Case("where", job.WhereOp, {"a": (2, 3), "b": (3,)}, lambda e, v: e(job.WhereOp, [v["c"], v["a"], v["b"]]),
         inputs={"c": np.array([[1], [0]])}),
    Case("where-mixed", job.WhereOp, {"a": (2, 1), "b": (1, 3)}, lambda e, v: e(job.WhereOp, [v["c"], v["a"], v["b"]]),
         inputs={"c": np.array([[1, 0, 2], [0, 1, 0]])}),
    Case("cast", job.CastOp, {"a": (2, 3)},
         lambda e, v: e(job.CastOp, [e(job.CastOp, [v["a"]], tensor((2, 3), f32))], tensor((2, 3), f64)),
         eps=1e-2, rtol=1e-4, atol=1e-4),
    Case("bias_add", job.BiasAddOp, {"x": (2, 3, 4), "b": (3,)},
         lambda e, v: e(job.BiasAddOp, [v["x"], v["b"]], axis=1)),
    Case("reshape", job.ReshapeOp, {"a": (2, 3, 2)}, lambda e, v: e(job.ReshapeOp, [v["a"]], tensor((3, 4), f64))),
    Case("transpose", job.TransposeOp, {"a": (2, 3, 4)}, lambda e, v: e(job.TransposeOp, [v["a"]], perm=[2, 0, 1])),
    Case("broadcast_like", job.BroadcastLikeOp, {"a": (3, 1)},
         lambda e, v: e(job.BroadcastLikeOp, [v["a"], v["like"]]), inputs={"like": np.zeros((2, 3, 4))}),
    # x (<=3, <=4) fed at (2, 4): the pin checks the 4 columns, and the rows stay dynamic (the loss's mean
    # divides by the actual elements); a's gradient sums over the actual elements only.
    Case("pin_size", job.PinSizeOp, {"a": (1, 1), "b": (4,)},
         lambda e, v: e(job.MulOp, [e(job.PinSizeOp, [e(job.MulOp, [v["x"], v["a"]])], axes=[1]), v["b"]]),
         inputs={"x": DYNAMIC_X}, bounds={"x": ((3, 4), (0, 1))}, reduce=False),
    Case("unpin_size", job.UnpinSizeOp, {"a": (3, 4)},
         lambda e, v: e(job.MulOp, [e(job.UnpinSizeOp, [v["a"], v["x"]], axes=[1]), v["x"]]),
         inputs={"x": DYNAMIC_X[[0, 1, 0]]}, bounds={"x": ((3, 4), (1,))}, reduce=False),
    Case("broadcast_like-axes", job.BroadcastLikeOp, {"a": (2, 1)},
         lambda e, v: e(job.BroadcastLikeOp, [v["a"], v["like"]], axes=[1, 3]), inputs={"like": np.zeros((2, 3, 4, 5))}),
    Case("broadcast_to", job.BroadcastToOp, {"a": (3, 1)},
         lambda e, v: e(job.BroadcastToOp, [v["a"]], tensor((2, 3, 4), f64))),
    Case("concat", job.ConcatOp, {"a": (2, 3), "b": (2, 2)},
         lambda e, v: e(job.ConcatOp, [v["a"], v["b"], v["a"]], axis=1)),
    Case("slice", job.SliceOp, {"a": (4, 5)},
         lambda e, v: e(job.SliceOp, [v["a"]], start=[1, 0], stop=[4, 5], step=[2, 2])),
    Case("slice_grad", job.SliceGradOp, {"a": (2, 3)},
         lambda e, v: e(job.SliceGradOp, [v["a"]], tensor((4, 5), f64), start=[1, 0], stop=[4, 5], step=[2, 2])),
    Case("gather", job.GatherOp, {"a": (4, 3)}, lambda e, v: e(job.GatherOp, [v["a"], v["i"]], axis=0),
         inputs={"i": np.array([[3, 0, 3], [1, 3, 0]])}),
    Case("gather-axis", job.GatherOp, {"a": (2, 4, 3)}, lambda e, v: e(job.GatherOp, [v["a"], v["i"]], axis=1),
         inputs={"i": np.array([2, 2, 0, 2, 1])}),
    Case("gather-batch", job.GatherOp, {"a": (2, 4, 3)},
         lambda e, v: e(job.GatherOp, [v["a"], v["i"]], axis=1, batch_dims=1), inputs={"i": np.array([[3, 0, 3], [1, 1, 2]])}),
    Case("gather_grad-batch", job.GatherGradOp, {"dy": (2, 3, 5)},
         lambda e, v: e(job.GatherGradOp, [v["dy"], v["i"]], tensor((2, 4, 5), f64), axis=1, batch_dims=1),
         inputs={"i": np.array([[3, 0, 3], [1, 1, 2]])}),
    Case("dim_gather", job.DimGatherOp, {"a": (3, 4)}, lambda e, v: e(job.DimGatherOp, [v["a"], v["i"]], dim=1),
         inputs={"i": np.array([[3, 0, 3, 3, 1], [1, 1, 2, 0, 0], [2, 3, 3, 2, 2]])}),
    Case("dim_gather_grad", job.DimGatherGradOp, {"dy": (2, 3)},
         lambda e, v: e(job.DimGatherGradOp, [v["dy"], v["i"]], tensor((4, 3), f64), dim=0),
         inputs={"i": np.array([[3, 0, 3], [3, 1, 0]])}),
    Case("gather_nd", job.GatherNdOp, {"a": (3, 4, 2)}, lambda e, v: e(job.GatherNdOp, [v["a"], v["i"]]),
         inputs={"i": np.array([[2, 3], [0, 1], [2, 3], [1, 0]])}),
    Case("scatter_nd", job.ScatterNdOp, {"u": (3, 2)}, lambda e, v: e(job.ScatterNdOp, [v["u"], v["i"]], tensor((3, 2), f64)),
         inputs={"i": np.array([[2], [0], [2]])}),
    *(Case(op.name.removeprefix("job."), op, {"a": (3, 4, 2), "u": (4, 2)},
           lambda e, v, op=op: e(op, [v["a"], v["i"], v["u"]]),
           inputs={"i": np.array([[2, 3], [0, 1], [2, 3], [1, 0]])})  # a repeated index: update adds its two up
      for op in (job.TensorScatterNdUpdateOp, job.TensorScatterNdAddOp)),
    Case("gather_grad", job.GatherGradOp, {"dy": (2, 5)},
         lambda e, v: e(job.GatherGradOp, [v["dy"], v["i"]], tensor((2, 3), f64), axis=-1),
         inputs={"i": np.array([1, 0, 1, 1, 2])}),
    *(_matmul(ta, tb) for ta in (False, True) for tb in (False, True)),
    Case("matmul-batched", job.MatmulOp, {"a": (2, 3, 4), "b": (2, 5, 4)},
         lambda e, v: e(job.MatmulOp, [v["a"], v["b"]], transpose_b=True)),
    Case("reduce_sum", job.ReduceSumOp, {"a": (2, 3, 4)}, lambda e, v: e(job.ReduceSumOp, [v["a"]], axes=[1])),
    Case("reduce_sum-keepdims", job.ReduceSumOp, {"a": (2, 3, 4)},
         lambda e, v: e(job.ReduceSumOp, [v["a"]], axes=[0, -1], keepdims=True)),
    Case("reduce_mean", job.ReduceMeanOp, {"a": (2, 3, 4)}, lambda e, v: e(job.ReduceMeanOp, [v["a"]], axes=[0, 2])),
    Case("reduce_max", job.ReduceMaxOp, {"a": (3, 4)}, lambda e, v: e(job.ReduceMaxOp, [v["a"]], axes=[1])),
    Case("reduce_min", job.ReduceMinOp, {"a": (3, 4, 2)},
         lambda e, v: e(job.ReduceMinOp, [v["a"]], axes=[0, 2], keepdims=True)),
    Case("reduce_prod", job.ReduceProdOp, {"a": (2, 3, 4)},
         lambda e, v: e(job.ReduceProdOp, [v["a"]], axes=[0, 2], keepdims=True)),
    # x (<=3, 4) fed with 2 rows: the product and its gradient take the actual rows only
    Case("reduce_prod-dynamic", job.ReduceProdOp, {"a": (1, 4)},
         lambda e, v: e(job.ReduceProdOp, [e(job.MulOp, [v["x"], v["a"]])], axes=[0]),
         inputs={"x": DYNAMIC_X}, bounds={"x": ((3, 4), (0,))}),
    Case("softmax", job.SoftmaxOp, {"a": (3, 4)}, lambda e, v: e(job.SoftmaxOp, [v["a"]])),
    Case("log_softmax", job.LogSoftmaxOp, {"a": (3, 4)}, lambda e, v: e(job.LogSoftmaxOp, [v["a"]], axis=0)),
    # CTC over log_softmax outputs (its gradient is the logits' through log_softmax, as OneFlow's and PyTorch's):
    # 3 sequences of 6, 4 and 5 frames, targets of 3, 1 and 2 labels, one repeated.
    Case("ctc_loss", job.CtcLossOp, {"a": (6, 3, 4)},
         lambda e, v: e(job.CtcLossOp, [e(job.LogSoftmaxOp, [v["a"]], axis=2), v["targets"], v["frames"], v["labels"]]),
         inputs={"targets": np.array([[1, 1, 3], [2, 0, 0], [3, 2, 0]]), "frames": np.array([6, 4, 5]),
                 "labels": np.array([3, 1, 2])}),  # fmt: skip
    Case("sparse_softmax_cross_entropy", job.SparseSoftmaxCrossEntropyOp, {"logits": (3, 4)},
         lambda e, v: e(job.SparseSoftmaxCrossEntropyOp, [v["logits"], v["labels"]]), inputs={"labels": LABELS}),
    Case("softmax_cross_entropy", job.SoftmaxCrossEntropyOp, {"logits": (3, 4), "labels": (3, 4)},
         lambda e, v: e(job.SoftmaxCrossEntropyOp, [v["logits"], v["labels"]]), positive=("labels",)),
    Case("conv2d", job.Conv2DOp, {"x": (2, 2, 5, 5), "w": (3, 2, 3, 3)},
         lambda e, v: e(job.Conv2DOp, [v["x"], v["w"]], **CONV)),
    Case("conv2d-strided-grouped", job.Conv2DOp, {"x": (1, 4, 5, 6), "w": (2, 2, 2, 3)},
         lambda e, v: e(job.Conv2DOp, [v["x"], v["w"]], **CONV_STRIDED)),
    Case("conv2d_grad_input", job.Conv2DGradInputOp, {"dy": (1, 3, 4, 4), "w": (3, 2, 3, 3)},
         lambda e, v: e(job.Conv2DGradInputOp, [v["dy"], v["w"]], tensor((1, 2, 4, 4), f64), **CONV)),
    Case("conv2d_grad_filter", job.Conv2DGradFilterOp, {"dy": (1, 2, 3, 3), "x": (1, 4, 5, 6)},
         lambda e, v: e(job.Conv2DGradFilterOp, [v["dy"], v["x"]], tensor((2, 2, 2, 3), f64), **CONV_STRIDED)),
    Case("max_pool2d", job.MaxPool2DOp, {"x": (1, 2, 4, 5)},
         lambda e, v: e(job.MaxPool2DOp, [v["x"]], kernel=[2, 2], strides=[2, 2], pads=[0, 0, 0, 1])),
    Case("avg_pool2d", job.AvgPool2DOp, {"x": (1, 2, 5, 5)},
         lambda e, v: e(job.AvgPool2DOp, [v["x"]], kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    Case("avg_pool2d_grad", job.AvgPool2DGradOp, {"dy": (1, 2, 3, 3)},
         lambda e, v: e(job.AvgPool2DGradOp, [v["dy"]], tensor((1, 2, 5, 5), f64), kernel=[3, 3], strides=[2, 2],
                        pads=[1, 1, 1, 1])),
    Case("relu_grad", job.ReluGradOp, {"dy": (2, 3), "y": (2, 3)},
         lambda e, v: e(job.ReluGradOp, [v["dy"], v["y"]]), constant=("y",)),
    *(Case(c.name[4:], c, {"dy": (2, 3), "y": (2, 3)}, lambda e, v, c=c: e(c, [v["dy"], v["y"]]))
      for c in (job.SigmoidGradOp, job.TanhGradOp, job.GeluGradOp, job.SoftmaxGradOp)),
    Case("log_softmax_grad", job.LogSoftmaxGradOp, {"dy": (3, 4), "y": (3, 4)},
         lambda e, v: e(job.LogSoftmaxGradOp, [v["dy"], v["y"]], axis=0)),
    Case("sparse_softmax_cross_entropy_grad", job.SparseSoftmaxCrossEntropyGradOp,
         {"dloss": (3,), "logits": (3, 4)},
         lambda e, v: e(job.SparseSoftmaxCrossEntropyGradOp, [v["dloss"], v["logits"], v["labels"]]),
         inputs={"labels": LABELS}),
    Case("softmax_cross_entropy_grad", job.SoftmaxCrossEntropyGradOp,
         {"dloss": (3,), "logits": (3, 4), "labels": (3, 4)},
         lambda e, v: e(job.SoftmaxCrossEntropyGradOp, [v["dloss"], v["logits"], v["labels"]]),
         positive=("labels",)),
    Case("fan-out", None, {"a": (2, 3)},
         lambda e, v: e(job.AddOp, [e(job.MulOp, [v["a"], v["a"]]), e(job.ExpOp, [v["a"]])])),
    Case("non-scalar-loss", None, {"a": (2, 3), "b": (3,)},
         lambda e, v: e(job.MulOp, [e(job.TanhOp, [v["a"]]), v["b"]]), reduce=False),
]


def build_jobs(case: Case) -> tuple[ModuleOp, dict[str, np.ndarray]]:
    """A train job minimizing sum(forward * r) (or forward itself, through its mean) and a predict job
    returning that loss; inputs are the case's integer inputs, then r."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    values = {
        name: rng.uniform(0.5, 2.0, shape) if name in case.positive else rng.standard_normal(shape)
        for name, shape in case.variables.items()
    }
    return ModuleOp([_build_func(case, job_type) for job_type in ("train", "predict")]), values


def _input_type(case: Case, name: str, value: np.ndarray) -> TensorType:
    bound, axes = case.bounds.get(name, (value.shape, ()))
    return with_dynamic(tensor(bound, f64 if value.dtype.kind == "f" else i64), axes)


def _build_func(case: Case, job_type: str) -> job.FuncOp:
    func = job.FuncOp(job_type, job_type, [_input_type(case, n, a) for n, a in case.inputs.items()], [])
    block = func.body.block
    ops: list[Operation] = []

    def emit(cls: type[job.JobOp], operands, result_type=None, **props) -> SSAValue:
        ops.append(cls.make(operands, result_type, **props))
        return ops[-1].results[0]

    values: dict[str, SSAValue] = dict(zip(case.inputs, block.args))
    for name, shape in case.variables.items():
        values[name] = emit(job.VariableOp, [], tensor(shape, f64), name=name, initializer={"kind": "constant", "value": 0.0})
    loss = case.forward(emit, values)
    if case.reduce:
        shape = tuple(loss.type.get_shape())
        r = block.insert_arg(tensor(shape, f64), len(block.args))
        loss = emit(job.MulOp, [loss, r])
        if shape:
            loss = emit(job.ReduceSumOp, [loss], axes=list(range(len(shape))))
    block.add_ops(ops)
    if job_type == "train":
        block.add_op(job.MinimizeOp.create(operands=[loss], properties={"optimizer": to_attr(SGD_LR1)}))
    block.add_op(job.ReturnOp([loss]))
    func.function_type = FunctionType.from_lists([a.type for a in block.args], [loss.type])
    return func


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_autodiff_builds_verified_ir(case: Case):
    module, _ = build_jobs(case)
    module.verify()
    AutodiffPass().apply(make_context(), module)
    module.verify()
    the(module, job.ApplyGradientsOp)
    expected = [n for n in case.variables if n not in case.constant]
    assert pair_names(module) == expected


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_gradient_matches_central_differences(case: Case):
    from irflow.compiler import compile_job
    from irflow.runtime import VariableStore

    module, values = build_jobs(case)
    store = VariableStore(seed=0)
    train = compile_job(module, "train", store)
    loss_of = compile_job(module, "predict", store)
    rng = np.random.default_rng(1)
    feed = list(case.inputs.values())
    if case.reduce:
        train_func = module.body.block.first_op
        feed.append(rng.standard_normal(train_func.body.block.args[-1].type.get_shape()))

    def objective() -> float:
        return float(np.mean(loss_of(feed)[0]))

    store.load(values)
    numeric = {}
    for name, value in values.items():
        grad = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            for sign in (1, -1):
                bumped = value.copy()
                bumped[index] += sign * case.eps
                store.load({name: bumped})
                grad[index] += sign * objective() / (2 * case.eps)
            store.load({name: value})
        numeric[name] = grad

    expected_loss = loss_of(feed)[0]
    (loss,) = train(feed)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-12)
    for name, value in values.items():
        analytic = value - store[name]
        np.testing.assert_allclose(analytic, numeric[name], rtol=case.rtol, atol=case.atol, err_msg=name)


def test_a_gradient_rule_that_cannot_build_its_ops_is_a_compile_error_at_the_op(monkeypatch):
    """A rule whose op does not verify (here a broadcast that would add an axis to a dynamic gradient)."""
    broken = lambda b, op, dy, needs: [b.emit(job.BroadcastToOp, [dy], tensor((2, 3, 5), f32))]  # noqa: E731
    monkeypatch.setitem(GRADIENTS, job.NegOp, broken)
    text = f"""
job.func @train(%x: tensor<3x5xf32, #job.bounded<[0, 1]>>) -> tensor<f32> attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "zeros"}}}} : tensor<1xf32>
  %y = job.mul %x, %w : (tensor<3x5xf32, #job.bounded<[0, 1]>>, tensor<1xf32>) -> tensor<3x5xf32, #job.bounded<[0, 1]>>
  %n = job.neg %y : (tensor<3x5xf32, #job.bounded<[0, 1]>>) -> tensor<3x5xf32, #job.bounded<[0, 1]>> loc("net.py":4:9)
  %l = job.reduce_sum %n {{axes = array<i64: 0, 1>}} : (tensor<3x5xf32, #job.bounded<[0, 1]>>) -> tensor<f32>
  job.minimize %l {OPT} : tensor<f32>
  job.return %l : tensor<f32>
}}"""
    with pytest.raises(CompileError) as info:
        autodiff(text)
    assert str(info.value).startswith("net.py:4:9: error: the gradient of 'job.neg' cannot be built: broadcast_to "
                                      "of (<=3, <=5) keeps its rank")
