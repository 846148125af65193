"""The SBP rule tables, checked by running every signature on simulated devices.

For each sample op and each signature on p devices, the logical inputs are cut
as the signature says (split: numpy's array_split, uneven chunks included;
partial: random addends that sum to the value; broadcast: whole), the op's
kernel runs once per device on its pieces, and the pieces of the result are
put back together (concatenated, summed, or checked equal). That must be the
kernel's result on the whole inputs: the oracle is the unsplit computation.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType, f64, i32, i64
from xdsl.ir import Attribute, Block, Operation

from irflow.dialects import job
from irflow.dialects.job import ints, shape_of, tensor
from irflow.dialects.sbp import BROADCAST, PARTIAL, code_text
from irflow.passes.sbp_rules import RULES, axis_signatures, moved_bytes, signatures, splits_classes, transfer_cost
from irflow.passes.sbp_infer import SPECIAL_OPS
from irflow.runtime.attributes import python_value
from irflow.runtime.kernels.registry import get_kernel


def make(cls: type[job.JobOp], types: Sequence[Attribute], result: Attribute | None = None, **props: object) -> Operation:
    block = Block(arg_types=list(types))
    return cls.make(list(block.args), result, **props)


def t(*shape: int) -> TensorType:
    return tensor(shape, f64)


SAMPLES: list[tuple[str, Operation]] = [
    ("relu", make(job.ReluOp, [t(4, 6)])),
    ("broadcast_like", make(job.BroadcastLikeOp, [t(1, 6), t(4, 6)])),
    ("broadcast_like-axes", make(job.BroadcastLikeOp, [t(4, 5), t(4, 3, 5)], axes=[1])),
    ("neg", make(job.NegOp, [t(6, 4)])),
    ("add-broadcast", make(job.AddOp, [t(4, 6), t(1, 6)])),
    ("sub-rank", make(job.SubOp, [t(6,), t(4, 6)])),
    ("mul", make(job.MulOp, [t(4, 6), t(4, 6)])),
    ("div", make(job.DivOp, [t(4, 6), t(4, 1)])),
    ("maximum", make(job.MaximumOp, [t(4, 6), t(4, 6)])),
    ("less", make(job.LessOp, [t(4, 6), t(4, 6)])),
    ("cast", make(job.CastOp, [t(4, 6)], tensor((4, 6), job.f32))),
    ("where", make(job.WhereOp, [tensor((4, 1), job.i8), t(4, 6), t(6)])),
    ("relu_grad", make(job.ReluGradOp, [t(4, 6), t(4, 6)])),
    ("bias_add", make(job.BiasAddOp, [t(4, 6, 3), t(6)], axis=1)),
    ("reshape-split", make(job.ReshapeOp, [t(6, 4)], t(6, 2, 2))),
    ("reshape-merge", make(job.ReshapeOp, [t(4, 3, 2)], t(12, 2))),
    ("reshape-flat", make(job.ReshapeOp, [t(6, 4)], t(24))),
    ("transpose", make(job.TransposeOp, [t(4, 6, 3)], perm=[2, 0, 1])),
    ("broadcast_to", make(job.BroadcastToOp, [t(1, 6)], t(4, 6))),
    ("concat", make(job.ConcatOp, [t(4, 6), t(4, 2)], axis=1)),
    ("slice", make(job.SliceOp, [t(4, 6)], start=[0, 1], stop=[4, 5], step=[1, 2])),
    ("slice_grad", make(job.SliceGradOp, [t(4, 2)], t(4, 6), start=[0, 1], stop=[4, 5], step=[1, 2])),
    ("gather", make(job.GatherOp, [t(4, 6, 5), tensor((6, 2), i32)], axis=1)),
    ("gather-uneven", make(job.GatherOp, [t(5, 4), tensor((7,), i32)])),
    ("gather-batch", make(job.GatherOp, [t(4, 6, 5), tensor((4, 2, 2), i32)], axis=1, batch_dims=1)),
    ("gather-batch-past", make(job.GatherOp, [t(4, 6, 5, 3), tensor((4, 6), i32)], axis=2, batch_dims=1)),
    ("gather_grad-batch", make(job.GatherGradOp, [t(4, 2, 2, 5), tensor((4, 2, 2), i32)], t(4, 6, 5), axis=1,
                               batch_dims=1)),
    ("dim_gather", make(job.DimGatherOp, [t(4, 5, 6), tensor((4, 3, 6), i32)], dim=1)),
    ("dim_gather-uneven", make(job.DimGatherOp, [t(5, 7), tensor((5, 4), i32)], dim=-1)),
    ("dim_gather_grad", make(job.DimGatherGradOp, [t(4, 6, 6), tensor((4, 6, 6), i32)], t(4, 5, 6), dim=1)),
    ("gather_nd", make(job.GatherNdOp, [t(4, 5, 6), tensor((6, 2, 2), i32)])),
    ("gather_nd-uneven", make(job.GatherNdOp, [t(5, 7), tensor((5, 1), i32)])),
    ("scatter_nd", make(job.ScatterNdOp, [t(6, 2, 6), tensor((6, 2, 2), i32)], t(4, 5, 6))),
    ("tensor_scatter_nd_update", make(job.TensorScatterNdUpdateOp, [t(4, 5, 6), tensor((6, 2, 2), i32), t(6, 2, 6)])),
    ("tensor_scatter_nd_add-uneven", make(job.TensorScatterNdAddOp, [t(5, 7), tensor((5, 1), i32), t(5, 7)])),
    ("gather_grad", make(job.GatherGradOp, [t(4, 6, 2, 5), tensor((6, 2), i32)], t(4, 6, 5), axis=1)),
    ("gather_grad-uneven", make(job.GatherGradOp, [t(7, 4), tensor((7,), i32)], t(5, 4))),
    ("matmul", make(job.MatmulOp, [t(6, 4), t(4, 6)])),
    ("matmul-ta", make(job.MatmulOp, [t(4, 6), t(4, 3)], transpose_a=True)),
    ("matmul-tb", make(job.MatmulOp, [t(6, 4), t(3, 4)], transpose_b=True)),
    ("matmul-tatb", make(job.MatmulOp, [t(4, 6), t(3, 4)], transpose_a=True, transpose_b=True)),
    ("matmul-batched", make(job.MatmulOp, [t(4, 3, 6), t(4, 6, 2)])),
    ("reduce_sum", make(job.ReduceSumOp, [t(4, 6, 3)], axes=[1])),
    ("reduce_sum-keepdims", make(job.ReduceSumOp, [t(4, 6)], axes=[0], keepdims=True)),
    ("reduce_mean", make(job.ReduceMeanOp, [t(4, 6)], axes=[1])),
    ("reduce_max", make(job.ReduceMaxOp, [t(4, 6)], axes=[0])),
    ("reduce_max_grad", make(job.ReduceMaxGradOp, [t(6), t(4, 6), t(6)], axes=[0])),
    ("reduce_min", make(job.ReduceMinOp, [t(4, 6, 5)], axes=[0, 2], keepdims=True)),
    ("reduce_min_grad", make(job.ReduceMinGradOp, [t(4, 5), t(4, 6, 5), t(4, 5)], axes=[1])),
    ("reduce_prod", make(job.ReduceProdOp, [t(4, 6, 5)], axes=[1], keepdims=True)),
    ("reduce_prod_grad", make(job.ReduceProdGradOp, [t(4, 5), t(4, 6, 5)], axes=[1])),
    ("argmax", make(job.ArgmaxOp, [t(4, 6)], axis=1)),
    ("top_k", make(job.TopKOp, [t(4, 6)], axis=1, k=3)),
    ("arg_sort", make(job.ArgSortOp, [t(5, 6)], axis=0, descending=True)),
    ("fake_quantization-layer", make(job.FakeQuantizationOp, [t(4, 6), t(1), t(1)], affine=True)),
    ("fake_quantization-channel", make(job.FakeQuantizationOp, [t(4, 6, 2), t(4), t(4)], quantization_bit=4)),
    ("ctc_loss", make(job.CtcLossOp, [t(6, 5, 4), tensor((5, 3), i64), tensor((5,), i64), tensor((5,), i64)])),
    ("ctc_loss_grad", make(job.CtcLossGradOp, [t(5), t(6, 5, 4), tensor((5, 3), i64), tensor((5,), i64),
                                               tensor((5,), i64)], blank=2)),
    ("ctc_greedy_decode", make(job.CtcGreedyDecodeOp, [t(6, 5, 4), tensor((5,), i64)])),
    ("softmax", make(job.SoftmaxOp, [t(4, 6)], axis=1)),
    ("log_softmax", make(job.LogSoftmaxOp, [t(4, 6)], axis=0)),
    ("softmax_grad", make(job.SoftmaxGradOp, [t(4, 6), t(4, 6)], axis=1)),
    ("sparse_ce", make(job.SparseSoftmaxCrossEntropyOp, [t(6, 4), tensor((6,), i32)])),
    ("ce", make(job.SoftmaxCrossEntropyOp, [t(6, 4), t(6, 4)])),
    ("sparse_ce_grad", make(job.SparseSoftmaxCrossEntropyGradOp, [t(6), t(6, 4), tensor((6,), i32)])),
    ("ce_grad", make(job.SoftmaxCrossEntropyGradOp, [t(6), t(6, 4), t(6, 4)])),
    ("conv2d", make(job.Conv2DOp, [t(4, 6, 5, 5), t(6, 6, 3, 3)], strides=[1, 1], pads=[1, 1, 1, 1])),
    ("conv2d_grad_input",
     make(job.Conv2DGradInputOp, [t(4, 6, 5, 5), t(6, 6, 3, 3)], t(4, 6, 5, 5), strides=[1, 1], pads=[1, 1, 1, 1])),
    ("conv2d_grad_filter",
     make(job.Conv2DGradFilterOp, [t(4, 6, 5, 5), t(4, 6, 5, 5)], t(6, 6, 3, 3), strides=[1, 1], pads=[1, 1, 1, 1])),
    ("max_pool2d", make(job.MaxPool2DOp, [t(4, 6, 4, 4)], kernel=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0])),
    ("avg_pool2d", make(job.AvgPool2DOp, [t(4, 6, 4, 4)], kernel=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0])),
    ("avg_pool2d_grad",
     make(job.AvgPool2DGradOp, [t(4, 6, 2, 2)], t(4, 6, 4, 4), kernel=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0])),
]  # fmt: skip


def run_kernel(op: Operation, ins: Sequence[np.ndarray], out_shape: tuple[int, ...]) -> np.ndarray:
    attrs = {k: python_value(v) for k, v in op.properties.items() if k not in ("sbp", "placement")}
    out = np.zeros(out_shape, dtype=_dtype(op.results[0].type))
    get_kernel(op.name.removeprefix("job."))(np, attrs, list(ins), [out])()
    return out


def _dtype(t: Attribute) -> np.dtype:
    return {"f64": np.float64, "f32": np.float32, "i8": np.int8, "i32": np.int32, "i64": np.int64}[
        str(t.element_type)  # type: ignore[attr-defined]
    ]


GATHERS = (job.GatherOp, job.GatherGradOp, job.DimGatherOp, job.DimGatherGradOp)


CTC = (job.CtcLossOp, job.CtcLossGradOp, job.CtcGreedyDecodeOp)


def ctc_inputs(op: Operation, rng: np.random.Generator) -> list[np.ndarray]:
    """Log probabilities, then labels other than the blank and lengths within their bounds (each as the op takes them)."""
    shapes = [tuple(v.type.get_shape()) for v in op.operands]  # type: ignore[attr-defined]
    frames, batch, classes = next(s for s in shapes if len(s) == 3)
    blank = job.integer(op.properties, "blank", 0)
    scores = rng.standard_normal((frames, batch, classes))
    log_probs = scores - np.log(np.exp(scores).sum(axis=2, keepdims=True))
    labels = rng.choice([c for c in range(classes) if c != blank], (batch, 3))
    given = {3: log_probs, 2: labels}
    lengths = [rng.integers(2, frames + 1, batch), rng.integers(0, 4, batch)]  # input, then target lengths
    arrays = []
    for shape in shapes:
        if len(shape) in given:
            arrays.append(given[len(shape)])
        elif len(arrays) == 0:  # the gradient's dloss
            arrays.append(rng.standard_normal(shape))
        else:
            arrays.append(lengths.pop(0))
    return arrays


def logical_inputs(op: Operation, rng: np.random.Generator) -> list[np.ndarray]:
    if isinstance(op, CTC):
        return ctc_inputs(op, rng)
    arrays = []
    for i, v in enumerate(op.operands):
        shape = tuple(v.type.get_shape())  # type: ignore[attr-defined]
        if isinstance(op, (job.GatherNdOp, job.ScatterNdOp, job.TensorScatterNdOp)) and i == 1:  # each coordinate within its axis
            whole = shape_of((op.results[0] if isinstance(op, job.ScatterNdOp) else op.operands[0]).type)
            columns = [rng.integers(0, n, shape[:-1]) for n in whole[: shape[-1]]]
            arrays.append(np.stack(columns, axis=-1).astype(np.int32))
        elif isinstance(op, GATHERS) and i == 1:  # in range, and repeated
            indexed = op.results[0] if isinstance(op, (job.GatherGradOp, job.DimGatherGradOp)) else op.operands[0]
            axis = job.integer(op.properties, "dim" if isinstance(op, (job.DimGatherOp, job.DimGatherGradOp)) else "axis")
            arrays.append(rng.integers(0, shape_of(indexed.type)[axis], shape).astype(np.int32))
        elif str(v.type.element_type) == "i32":  # type: ignore[attr-defined]
            classes = next(o.type.get_shape()[-1] for o in op.operands if len(o.type.get_shape()) == 2)  # type: ignore[attr-defined]
            arrays.append(rng.integers(0, classes, shape).astype(np.int32))
        elif isinstance(op, job.WhereOp) and i == 0:  # a condition that picks both branches
            arrays.append(rng.integers(0, 2, shape).astype(np.int8))
        elif isinstance(op, job.ReduceMaxGradOp | job.ReduceMinGradOp) and i == 2:  # y must be x's max (min): ties
            extremum = np.max if isinstance(op, job.ReduceMaxGradOp) else np.min
            arrays.append(extremum(arrays[1], axis=tuple(ints(op.properties, "axes"))))
        else:
            arrays.append(rng.standard_normal(shape) + (3.0 if isinstance(op, job.DivOp) and i == 1 else 0.0))
    return arrays


def pieces(x: np.ndarray, code: int, p: int, rng: np.random.Generator) -> list[np.ndarray]:
    if code >= 0:
        return np.array_split(x, p, axis=code)
    if code == BROADCAST:
        return [x] * p
    parts = [rng.standard_normal(x.shape) for _ in range(p - 1)]
    return [*parts, x - sum(parts)]


def assemble(outs: list[np.ndarray], code: int) -> np.ndarray:
    if code >= 0:
        return np.concatenate(outs, axis=code)
    if code == PARTIAL:
        return sum(outs[1:], outs[0])
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    return outs[0]


def local_shape(shape: tuple[int, ...], code: int, p: int, device: int) -> tuple[int, ...]:
    if code < 0:
        return shape
    return tuple(len(np.array_split(np.arange(d), p)[device]) if i == code else d for i, d in enumerate(shape))


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("name,op", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_every_signature_computes_the_logical_op(name: str, op: Operation, p: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{name}-{p}".encode()))
    whole = logical_inputs(op, rng)
    result_shape = tuple(op.results[0].type.get_shape())  # type: ignore[attr-defined]
    expected = run_kernel(op, whole, result_shape)
    sigs = axis_signatures(op, p)
    assert len(set(sigs)) == len(sigs), "a signature is listed twice"
    for ins, out in sigs:
        if splits_classes(op, ins):
            continue  # computed in stages with collectives: tests/distributed/test_class_split.py
        cut = [pieces(x, c, p, rng) for x, c in zip(whole, ins)]
        outs = [run_kernel(op, [c[d] for c in cut], local_shape(result_shape, out, p, d)) for d in range(p)]
        got = assemble(outs, out)
        what = f"{name}: ({', '.join(code_text((c,)) for c in ins)}) -> {code_text((out,))} on {p} devices"
        tol = 1e-5 if expected.dtype == np.float32 else 1e-9  # a cast rounds each addend
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=what)


def test_every_op_has_a_rule():
    """Ops without a rule table entry take their SBP from a variable or a hint (sbp_infer.SPECIAL_OPS)."""
    for cls in job.COMPUTE_OPS:
        assert (cls in RULES) != (cls in SPECIAL_OPS), cls.name


def test_partial_signatures_come_from_the_dialect_facts():
    matmul = dict(SAMPLES)["matmul"]
    partial_in = {ins for ins, out in axis_signatures(matmul, 2) if PARTIAL in ins}
    assert partial_in == {(PARTIAL, BROADCAST), (BROADCAST, PARTIAL)}
    relu = dict(SAMPLES)["relu"]
    assert all(PARTIAL not in ins for ins, _ in axis_signatures(relu, 4))
    add = dict(SAMPLES)["add-broadcast"]
    assert ((PARTIAL, PARTIAL), PARTIAL) in axis_signatures(add, 2)


def test_uneven_contraction_never_becomes_partial():
    """7 rows over 2 devices: (S(k), S(k)) -> P would sum the padding rows."""
    op = make(job.MatmulOp, [t(4, 7), t(7, 3)])
    assert ((1, 0), PARTIAL) not in axis_signatures(op, 2)
    assert ((1, 0), PARTIAL) in axis_signatures(op, 7)
    reduce = make(job.ReduceSumOp, [t(7, 3)], axes=[0])
    assert ((0,), PARTIAL) not in axis_signatures(reduce, 2)


def test_one_device_is_all_broadcast():
    for _, op in SAMPLES:
        assert {s.out for s in signatures(op, (1,), 0.0, {})} == {(BROADCAST,)}


def test_nd_signatures_nest_splits_only_when_even():
    op = dict(SAMPLES)["matmul"]  # (6, 4) x (4, 6)
    sigs = signatures(op, (2, 2), 0.0, {})
    assert any(s.ins == ((0, BROADCAST), (BROADCAST, 1)) and s.out == (0, 1) for s in sigs)
    assert not any(s.out == (0, 0) for s in sigs)  # 6 rows do not split over 2 x 2 devices
    even = make(job.MatmulOp, [t(8, 4), t(4, 6)])
    assert any(s.ins[0] == (0, 0) and s.out == (0, 0) for s in signatures(even, (2, 2), 0.0, {}))


def test_conversion_costs_follow_oneflow():
    T, p = 1000, 4
    assert moved_bytes((BROADCAST,), (0,), T, (p,)) == 0
    assert moved_bytes((0,), (1,), T, (p,)) == T * (p - 1) / p
    assert moved_bytes((0,), (BROADCAST,), T, (p,)) == T * (p - 1)
    assert moved_bytes((PARTIAL,), (0,), T, (p,)) == T * (p - 1)
    assert moved_bytes((PARTIAL,), (BROADCAST,), T, (p,)) == 2 * T * (p - 1)
    assert moved_bytes((BROADCAST,), (PARTIAL,), T, (p,)) == float("inf")
    assert transfer_cost((0,), (0,), T, (p,)) == 0
    # 2x2: gathering axis 1 of a value also split on axis 0: two groups each gather half the value.
    assert moved_bytes((0, 1), (0, BROADCAST), T, (2, 2)) == 2 * (T / 2) * 1
    # Gathering both axes moves what one gather over all 4 devices moves: T(p-1).
    assert moved_bytes((0, 0), (BROADCAST, BROADCAST), T, (2, 2)) == moved_bytes((0,), (BROADCAST,), T, (4,))
    # All-reduce axis by axis: the whole value in every group, twice.
    assert moved_bytes((PARTIAL, PARTIAL), (BROADCAST, BROADCAST), T, (2, 2)) == 2 * 2 * (2 * T)
