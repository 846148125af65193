"""SBP signature rules of the job dialect and the cost model that chooses among them.

A rule lists, for one op and one hierarchy axis of `p` devices, the split
signatures the op can run under (OneFlow's `GetSbpSignatures` of each user op):
which split/broadcast each operand must be and what the result then is.  Two
families are added to every op without a rule of their own: all-broadcast
(every device computes the whole value) and, for each group of operands the
op is linear in (`JobOp.linear_groups`, the dialect's own fact), that group
partial and the rest broadcast giving a partial result.  On N-d hierarchies a
signature is one 1-D signature per axis.

SBPs are the compact codes of `irflow.dialects.sbp` (split(i) is i, broadcast
-1, partial_sum -2).  Costs are bytes moved per step (OneFlow's boxing costs)
plus `compute_cost` bytes per floating-point operation a device executes, so
that redundant computation has a price and data parallelism is preferred to
gathering activations when computing is what dominates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from irflow.dialects import job
from irflow.dialects.bounds import dynamic_axes
from irflow.dialects.job import dtype_of, flag, integer, ints, shape_of
from irflow.dialects.mesh import moved_entries, transfer_boxes
from irflow.dialects.sbp import BROADCAST, PARTIAL, Code, NdCode, code_attr
from irflow.passes.op_tables import registrar

Sig1 = tuple[tuple[Code, ...], Code]
"""One hierarchy axis: (SBP needed of each operand, SBP of the result)."""
Rule = Callable[[Operation, int], list[Sig1]]

RULES: dict[type[Operation], Rule] = {}
"""Op class -> its split signatures on one axis of p > 1 devices."""

INFEASIBLE = math.inf
BOXING_COST = 1e-3
"""Bytes charged per conversion on top of its traffic: among plans moving the same bytes, fewer boxing ops win."""


def gathers_own_rows(dynamic: Sequence[int], src: NdCode, dst: NdCode) -> bool:
    """The one boxing of a dynamic value: each device's own rows (axis 0, the only dynamic axis) split over
    mesh axes and all-gathered to broadcast, their rows one after another, as OneFlow's uneven gather
    (docs/dynamic.md); on a mesh of several axes one gather per splitting axis, the last first, so each
    gathers the rows of its group in order.  Scattering, reducing or transferring each device's own sizes
    stays refused."""
    return (
        tuple(dynamic) == (0,)
        and all(d == BROADCAST for d in dst)
        and all(c in (0, BROADCAST) for c in src)
        and 0 in src
    )


rule = registrar(RULES, "SBP rules")


def _shapes(op: Operation) -> list[tuple[int, ...]]:
    return [shape_of(o.type) for o in op.operands]


def _out(op: Operation) -> tuple[int, ...]:
    return shape_of(op.results[0].type)


# ----------------------------------------------------------------- elementwise


def aligned(out_rank: int, operand: tuple[int, ...], out: tuple[int, ...], axis: int) -> Code:
    """What an operand broadcast (numpy-style) to `out` must be when the result is split on `axis`."""
    i = axis - (out_rank - len(operand))
    if i < 0 or operand[i] != out[axis]:
        return BROADCAST  # a size-1 or missing dimension is read whole by every device
    return i


def _elementwise_except(op: Operation, p: int, excluded: set[int]) -> list[Sig1]:
    out = _out(op)
    sigs = []
    for axis, size in enumerate(out):
        if axis in excluded or size < p:
            continue
        sigs.append((tuple(aligned(len(out), s, out, axis) for s in _shapes(op)), axis))
    return sigs


@rule(
    *(
        c
        for c in job.COMPUTE_OPS
        if issubclass(c, (job.UnaryOp, job.BinaryOp, job.GradOp)) and not issubclass(c, job.SoftmaxLikeGradOp)
    ),
    job.CastOp,
    job.BernoulliOp,
    job.WhereOp,
    job.BroadcastToOp,
    job.PinSizeOp,
    job.UnpinSizeOp,
)
def _elementwise(op: Operation, p: int) -> list[Sig1]:
    return _elementwise_except(op, p, set())


@rule(job.BroadcastLikeOp)
def _broadcast_like(op: Operation, p: int) -> list[Sig1]:
    """Elementwise; with `axes`, x's axes stand for the others of `like`, and an inserted axis reads x whole."""
    kept = job.BroadcastLikeOp.kept_axes([o.type for o in op.operands], op.properties)
    if kept is None:
        return _elementwise_except(op, p, set())
    out, x = _out(op), _shapes(op)[0]
    return [
        ((kept.index(axis) if axis in kept and x[kept.index(axis)] == size else BROADCAST, axis), axis)
        for axis, size in enumerate(out)
        if size >= p
    ]


@rule(job.TensorToTensorBufferOp, job.TensorBufferToTensorOp, job.GenTensorBufferOp, job.TensorBufferGetOp)
def _whole_only(op: Operation, p: int) -> list[Sig1]:
    """TensorBuffers (whose elements have shapes of their own): whole values only."""
    return []


@rule(job.SizeOfOp)
def _size_of(op: Operation, p: int) -> list[Sig1]:
    """A count over an evenly split axis is the sum of the devices' counts (each device's own rows when dynamic).

    Split along an axis it does not count, each device counts its own piece: the same count where the counted
    axes are static; where they are dynamic (the mirrored view), each device's own, which only the gradient of
    a mean over them reads, dividing that device's own rows (docs/dynamic.md)."""
    x = shape_of(op.operands[0].type)
    axes = {job.normalize_axis(a, len(x), "size_of axis") for a in ints(op.properties, "axes")}
    sigs: list[Sig1] = [((i,), PARTIAL) for i in sorted(axes) if x[i] >= p and x[i] % p == 0]
    return sigs + [((i,), BROADCAST) for i in range(len(x)) if i not in axes and x[i] >= p]


def _axis(op: Operation, default: int = -1) -> int:
    rank = len(shape_of(op.operands[0].type))
    return integer(op.properties, "axis", default) % max(rank, 1)


@rule(job.SoftmaxOp, job.LogSoftmaxOp, job.SoftmaxGradOp, job.LogSoftmaxGradOp)
def _softmax(op: Operation, p: int) -> list[Sig1]:
    sigs = _elementwise_except(op, p, {_axis(op)})
    if _class_axis(op) and _out(op)[1] >= p:  # split along the softmax axis: computed in stages
        sigs.append(((1,) * len(op.operands), 1))
    return sigs


@rule(job.BiasAddOp)
def _bias_add(op: Operation, p: int) -> list[Sig1]:
    x = shape_of(op.operands[0].type)
    axis = _axis(op, 1)
    return [((i, 0 if i == axis else BROADCAST), i) for i, d in enumerate(x) if d >= p]


@rule(job.CtcLossOp, job.CtcLossGradOp, job.CtcGreedyDecodeOp)
def _ctc(op: Operation, p: int) -> list[Sig1]:
    """Split along the batch: log_probs' axis 1, the targets' and every per-sequence operand's axis 0."""
    batch = shape_of(op.operands[-1].type)[0]
    axes = tuple(1 if len(shape_of(o.type)) == 3 else 0 for o in op.operands)
    result = 1 if len(_out(op)) == 3 else 0
    return [(axes, result)] if batch >= p else []


@rule(job.FakeQuantizationOp)
def _fake_quantization(op: Operation, p: int) -> list[Sig1]:
    """Split x along any axis, scale and zero_point with it along axis 0 where they hold one value per channel."""
    x = shape_of(op.operands[0].type)
    per_channel = shape_of(op.operands[1].type) != (1,)
    return [((i, *(0 if i == 0 and per_channel else BROADCAST,) * 2), i) for i, d in enumerate(x) if d >= p]


# ----------------------------------------------------------------- shape ops


@rule(job.ReshapeOp)
def _reshape(op: Operation, p: int) -> list[Sig1]:
    """A split maps when both sides cut the same flat ranges: equal leading products and chunk sizes."""
    a, b = shape_of(op.operands[0].type), _out(op)
    sigs = []
    for i, d in enumerate(a):
        if d < p:
            continue
        lead, inner = math.prod(a[:i]), math.prod(a[i + 1 :])
        for j, e in enumerate(b):
            if e >= p and math.prod(b[:j]) == lead and -(-d // p) * inner == -(-e // p) * math.prod(b[j + 1 :]):
                sigs.append(((i,), j))
                break
    return sigs


@rule(job.TransposeOp)
def _transpose(op: Operation, p: int) -> list[Sig1]:
    perm, out = ints(op.properties, "perm"), _out(op)
    return [((perm[j],), j) for j in range(len(out)) if out[j] >= p]


@rule(job.ConcatOp, job.ConcatGradOp)
def _concat(op: Operation, p: int) -> list[Sig1]:
    """Split along any axis but the concatenated one, every operand alike (a concat_grad's dy and the inputs that
    give its sizes)."""
    joined = shape_of(op.operands[0].type) if isinstance(op, job.ConcatGradOp) else _out(op)
    axis = _axis(op, 0)
    return [((i,) * len(op.operands), i) for i, d in enumerate(joined) if i != axis and d >= p]


def _whole_dims(full: tuple[int, ...], op: Operation) -> list[int]:
    """Dimensions a static slice of `full` keeps whole."""
    start, stop, step = ints(op.properties, "start"), ints(op.properties, "stop"), ints(op.properties, "step")
    return [i for i, d in enumerate(full) if start[i] == 0 and stop[i] == d and step[i] == 1]


@rule(job.SliceOp)
def _slice(op: Operation, p: int) -> list[Sig1]:
    x = shape_of(op.operands[0].type)
    return [((i,), i) for i in _whole_dims(x, op) if x[i] >= p]


@rule(job.SliceGradOp)
def _slice_grad(op: Operation, p: int) -> list[Sig1]:
    out = _out(op)
    return _with_like(op, [((i,), i) for i in _whole_dims(out, op) if out[i] >= p], 1)


def _gathered(op: Operation) -> tuple[int, int, int]:
    """A gather's (or its gradient's) params axis it indexes, the rank of its indices and its batch_dims."""
    params = _out(op) if isinstance(op, job.GatherGradOp) else shape_of(op.operands[0].type)
    rank = len(shape_of(op.operands[1].type))
    return integer(op.properties, "axis") % len(params), rank, integer(op.properties, "batch_dims")


def _params_axes(params: tuple[int, ...], op: Operation, p: int) -> list[tuple[int, int]]:
    """(params axis, result axis) of each axis past the batch axes, besides the indexed one, that can split:
    it passes through with the indices whole."""
    axis, rank, batch = _gathered(op)
    return [(i, i if i < axis else i + rank - batch - 1) for i, d in enumerate(params)
            if batch <= i != axis and d >= p]  # fmt: skip


def _split_indices(op: Operation, p: int) -> list[tuple[int, int]]:
    """(indices axis, result axis) of each axis of the indices that splits evenly (the padding of an uneven
    piece would be read as indices); a batch axis is the same axis of params and of the result."""
    axis, _, batch = _gathered(op)
    indices = shape_of(op.operands[1].type)
    return [(k, k if k < batch else axis + k - batch) for k, d in enumerate(indices) if d >= p and d % p == 0]


@rule(job.GatherOp)
def _gather(op: Operation, p: int) -> list[Sig1]:
    """params split off the batch and indexed axes with the indices whole; the indices split with params whole,
    or both split along a batch axis.

    OneFlow also splits params along the indexed axis into partial sums: not offered.
    """
    _, _, batch = _gathered(op)
    sigs: list[Sig1] = [((i, BROADCAST), j) for i, j in _params_axes(shape_of(op.operands[0].type), op, p)]
    return sigs + [((k if k < batch else BROADCAST, k), j) for k, j in _split_indices(op, p)]


@rule(job.GatherGradOp)
def _gather_grad(op: Operation, p: int) -> list[Sig1]:
    """dy split off the batch and indexed axes gives dparams split alike; dy and the indices split together
    give dparams split along a batch axis, or partial sums (each device adds its own slices) along another."""
    _, _, batch = _gathered(op)
    sigs: list[Sig1] = [((j, BROADCAST), i) for i, j in _params_axes(_out(op), op, p)]
    sigs += [((j, k), k if k < batch else PARTIAL) for k, j in _split_indices(op, p)]
    return _with_like(op, sigs, 2)


def _with_like(op: Operation, sigs: list[Sig1], like: int) -> list[Sig1]:
    """A gradient's signatures with its operand `like` (the forward input, for its sizes), where given: split as
    the result, or whole beside partial sums."""
    if len(op.operands) <= like:
        return sigs
    return [((*ins, BROADCAST if out == PARTIAL else out), out) for ins, out in sigs]


def _dim_gathered(op: Operation, p: int) -> tuple[int, list[int]]:
    """A dim_gather's (or its gradient's) indexed dim, and the axes where its index splits evenly (the
    padding of an uneven piece would be read as indices)."""
    index = shape_of(op.operands[1].type)
    dim = integer(op.properties, "dim") % len(index)
    return dim, [i for i, d in enumerate(index) if d >= p and d % p == 0]


@rule(job.DimGatherOp)
def _dim_gather(op: Operation, p: int) -> list[Sig1]:
    """input and index split alike off the indexed dim (where their sizes are equal)."""
    dim, axes = _dim_gathered(op, p)
    return [((i, i), i) for i in axes if i != dim]


@rule(job.DimGatherGradOp)
def _dim_gather_grad(op: Operation, p: int) -> list[Sig1]:
    """dy and index split alike give dinput split alike off the indexed dim, and partial sums along it
    (each device adds its own elements)."""
    dim, axes = _dim_gathered(op, p)
    sigs: list[Sig1] = [((i, i), i if i != dim else PARTIAL) for i in axes]
    return _with_like(op, sigs, 2)


def _nd_axes(op: Operation, whole: tuple[int, ...], p: int) -> tuple[list[tuple[int, int]], list[int]]:
    """A gather_nd's (or scatter_nd's, of `whole` params) slice axes past the K indexed ones that can split,
    with the axis of the gathered value they become; and the axes of the indices but the last that split
    evenly (the padding of an uneven piece would be read as indices)."""
    indices = shape_of(op.operands[1].type)
    k, batch = indices[-1], len(indices) - 1
    slices = [(i, batch + i - k) for i in range(k, len(whole)) if whole[i] >= p]
    return slices, [j for j in range(batch) if indices[j] >= p and indices[j] % p == 0]


@rule(job.GatherNdOp)
def _gather_nd(op: Operation, p: int) -> list[Sig1]:
    """params split along a slice axis with the indices whole, or the indices split with params whole."""
    slices, rows = _nd_axes(op, shape_of(op.operands[0].type), p)
    return [((i, BROADCAST), j) for i, j in slices] + [((BROADCAST, j), j) for j in rows]


@rule(job.ScatterNdOp)
def _scatter_nd(op: Operation, p: int) -> list[Sig1]:
    """updates split along a slice axis give the result split alike; updates and indices split together give
    partial sums (each device adds its own slices)."""
    slices, rows = _nd_axes(op, _out(op), p)
    return [((j, BROADCAST), i) for i, j in slices] + [((j, j), PARTIAL) for j in rows]


@rule(job.TensorScatterNdUpdateOp, job.TensorScatterNdAddOp)
def _tensor_scatter_nd(op: Operation, p: int) -> list[Sig1]:
    """params, updates and the result split along a slice axis alike, the indices whole (OneFlow's signature;
    its other, indices and updates split with params broadcast, would add or write each device's part only).
    Partial params with partial updates come with the op's linear group."""
    slices, _ = _nd_axes(op, shape_of(op.operands[0].type), p)
    return [((i, BROADCAST, j), i) for i, j in slices]


# ----------------------------------------------------------------- linear algebra and reductions


@rule(job.MatmulOp)
def _matmul(op: Operation, p: int) -> list[Sig1]:
    a, b = _shapes(op)
    r = len(a)
    ta, tb = flag(op.properties, "transpose_a"), flag(op.properties, "transpose_b")
    a_m, a_k = (r - 1, r - 2) if ta else (r - 2, r - 1)
    b_k, b_n = (r - 1, r - 2) if tb else (r - 2, r - 1)
    sigs: list[Sig1] = [((i, i), i) for i in range(r - 2) if a[i] >= p]
    if a[a_m] >= p:
        sigs.append(((a_m, BROADCAST), r - 2))
    if b[b_n] >= p:
        sigs.append(((BROADCAST, b_n), r - 1))
    if a[a_k] % p == 0:  # the contraction sums over padding when the split is uneven
        sigs.append(((a_k, b_k), PARTIAL))
    return sigs


def _kept(x: tuple[int, ...], axes: set[int], keepdims: bool) -> dict[int, int]:
    """Input axis -> result axis of the axes a reduction keeps."""
    kept, j = {}, 0
    for i in range(len(x)):
        if i not in axes:
            kept[i] = j
        if keepdims or i not in axes:
            j += 1
    return kept


def _reduced_axes(op: Operation, x: tuple[int, ...]) -> set[int]:
    return {a % len(x) for a in ints(op.properties, "axes")} if x else set()


@rule(job.ReduceSumOp, job.ReduceMeanOp, job.ReduceMaxOp, job.ReduceMinOp, job.ReduceProdOp)
def _reduce(op: Operation, p: int) -> list[Sig1]:
    x = shape_of(op.operands[0].type)
    axes = _reduced_axes(op, x)
    sigs: list[Sig1] = [((i,), j) for i, j in _kept(x, axes, flag(op.properties, "keepdims")).items() if x[i] >= p]
    # Only a sum turns a split reduced axis into partial sums; a mean would need the
    # logical count on every device and a max (or min) a partial_sum(max) no op consumes.
    # A mean over a dynamic axis divides each device's sum by the all-reduced count of the devices'
    # own sizes (lower-to-physical): a few bytes moved, where gathering their rows moves them all. That
    # count takes any axis it reduces, so with a dynamic one among them a static split axis is summed too
    # (a mirrored value's rows pinned static by another reader, split, beside each device's own features).
    dynamic = axes & set(dynamic_axes(op.operands[0].type))
    summed = axes if isinstance(op, job.ReduceSumOp) or dynamic else set()
    if isinstance(op, job.ReduceSumOp | job.ReduceMeanOp):
        sigs += [((i,), PARTIAL) for i in sorted(summed) if x[i] >= p and x[i] % p == 0]
    return sigs


@rule(job.ReduceMaxGradOp, job.ReduceMinGradOp, job.ReduceProdGradOp)
def _reduction_grad(op: Operation, p: int) -> list[Sig1]:
    """(dy, x[, y]): split along a kept axis, dy (and reduce_max's or reduce_min's y) on its result axis, dx as x."""
    x = shape_of(op.operands[1].type)
    kept = _kept(x, _reduced_axes(op, x), flag(op.properties, "keepdims"))
    return [((j, i, *(j for _ in op.operands[2:])), i) for i, j in kept.items() if x[i] >= p]


@rule(job.ArgmaxOp)
def _argmax(op: Operation, p: int) -> list[Sig1]:
    x = shape_of(op.operands[0].type)
    return [((i,), j) for i, j in _kept(x, {_axis(op)}, False).items() if x[i] >= p]


@rule(job.TopKOp, job.ArgSortOp)
def _top_k(op: Operation, p: int) -> list[Sig1]:
    """Split along any axis but the one searched or sorted, which every device needs whole."""
    x = shape_of(op.operands[0].type)
    return [((i,), i) for i in range(len(x)) if i != _axis(op) and x[i] >= p]


# ----------------------------------------------------------------- nn


CLASS_SPLIT_OPS = (
    job.SparseSoftmaxCrossEntropyOp, job.SparseSoftmaxCrossEntropyGradOp, job.SoftmaxOp, job.SoftmaxGradOp,
)  # fmt: skip
"""Ops with a class-split signature: lower-to-physical computes them in stages with all_reduces between."""

STAGED_ALL_REDUCES = {
    job.SparseSoftmaxCrossEntropyOp: 2, job.SparseSoftmaxCrossEntropyGradOp: 2, job.SoftmaxOp: 2, job.SoftmaxGradOp: 1,
}  # fmt: skip
"""All_reduces of one value per row each staged op runs (max and sum of exps; softmax's backward: sum of dy * y)."""


def _class_axis(op: Operation) -> bool:
    """A (rows, classes) softmax over its classes, or a sparse cross-entropy: what the staged kernels compute."""
    if isinstance(op, (job.SoftmaxOp, job.SoftmaxGradOp)):
        return len(_out(op)) == 2 and _axis(op) == 1
    return isinstance(op, CLASS_SPLIT_OPS)


def logits_index(op: Operation) -> int:
    return 1 if isinstance(op, (job.CrossEntropyGradOp, job.SoftmaxGradOp)) else 0


def splits_classes(op: Operation, ins: Sequence[Code]) -> bool:
    """Whether the signature with operand SBPs `ins` (one axis) splits a cross-entropy's (or softmax's) classes."""
    return _class_axis(op) and ins[logits_index(op)] == 1


@rule(job.SparseSoftmaxCrossEntropyOp, job.SoftmaxCrossEntropyOp)
def _cross_entropy(op: Operation, p: int) -> list[Sig1]:
    sigs: list[Sig1] = [((0, 0), 0)] if _out(op)[0] >= p else []
    if isinstance(op, CLASS_SPLIT_OPS) and _shapes(op)[0][1] >= p:
        sigs.append(((1, BROADCAST), PARTIAL))  # each device's part of lse minus the label's logit where it lives
    return sigs


@rule(job.SparseSoftmaxCrossEntropyGradOp, job.SoftmaxCrossEntropyGradOp)
def _cross_entropy_grad(op: Operation, p: int) -> list[Sig1]:
    sigs: list[Sig1] = [((0, 0, 0), 0)] if _out(op)[0] >= p else []
    if isinstance(op, CLASS_SPLIT_OPS) and _out(op)[1] >= p:
        sigs.append(((BROADCAST, 1, BROADCAST), 1))
    return sigs


def _groups(op: Operation) -> int:
    return integer(op.properties, "groups", 1)


@rule(job.Conv2DOp)
def _conv2d(op: Operation, p: int) -> list[Sig1]:
    (n, c, _, _), (f, _, _, _) = _shapes(op)
    sigs: list[Sig1] = [((0, BROADCAST), 0)] if n >= p else []
    if _groups(op) == 1:
        if f >= p:
            sigs.append(((BROADCAST, 0), 1))
        if c % p == 0:
            sigs.append(((1, 1), PARTIAL))
    return sigs


@rule(job.Conv2DGradInputOp)
def _conv2d_grad_input(op: Operation, p: int) -> list[Sig1]:
    (n, f, _, _), (_, c, _, _) = _shapes(op)
    sigs: list[Sig1] = [((0, BROADCAST), 0)] if n >= p else []
    if _groups(op) == 1:
        if c >= p:
            sigs.append(((BROADCAST, 1), 1))
        if f % p == 0:
            sigs.append(((1, 0), PARTIAL))
    return sigs


@rule(job.Conv2DGradFilterOp)
def _conv2d_grad_filter(op: Operation, p: int) -> list[Sig1]:
    (n, f, _, _), (_, c, _, _) = _shapes(op)
    sigs: list[Sig1] = [((0, 0), PARTIAL)] if n % p == 0 else []
    if _groups(op) == 1:
        if f >= p:
            sigs.append(((1, BROADCAST), 0))
        if c >= p:
            sigs.append(((BROADCAST, 1), 1))
    return sigs


@rule(job.MaxPool2DOp, job.AvgPool2DOp, job.MaxPool2DGradOp, job.AvgPool2DGradOp)
def _pool(op: Operation, p: int) -> list[Sig1]:
    # Batch and channels: a pooling window never crosses either.
    out = _out(op)
    return [((i,) * len(op.operands), i) for i in (0, 1) if out[i] >= p]


@rule(
    job.VariableOp,
    job.ConstantOp,
    job.FillOp,
    job.DropoutMaskOp,
    job.RandomUniformOp,
    job.RandomPermutationOp,
    job.OFRecordDecodeOp,
    job.LearningRateOp,
)
def _whole(op: Operation, p: int) -> list[Sig1]:
    # Sources are made whole on every device; broadcast -> split is a free local slice. A random source
    # draws the same whole tensor on every device (one seed), so its samples do not depend on the device count.
    return []


@rule(job.MinimizeOp)
def _minimize(op: Operation, p: int) -> list[Sig1]:
    # Consumed by autodiff: any distribution of the loss will do.
    loss = shape_of(op.operands[0].type)
    return [((i,), BROADCAST) for i, d in enumerate(loss) if d >= p]


# ----------------------------------------------------------------- signatures on a hierarchy


def axis_signatures(op: Operation, p: int) -> list[Sig1]:
    """All signatures on one axis of p devices: all-broadcast, the linear partial ones, the op's splits."""
    n = len(op.operands)
    whole: Sig1 = ((BROADCAST,) * n, BROADCAST)
    if p == 1:
        return [whole]
    sigs = [whole]
    for group in op.linear_groups():  # type: ignore[attr-defined]
        sigs.append((tuple(PARTIAL if i in group else BROADCAST for i in range(n)), PARTIAL))
    return sigs + RULES[type(op)](op, p)


@dataclass(frozen=True)
class Signature:
    """What an op needs of each operand, what its result is, and what running it costs."""

    ins: tuple[NdCode, ...]
    out: NdCode
    cost: float


def _nests_evenly(codes: Sequence[NdCode], shapes: Sequence[tuple[int, ...]], hierarchy: Sequence[int]) -> bool:
    """A tensor axis split on several hierarchy axes must divide evenly by all of them together."""
    for nd, shape in zip(codes, shapes):
        for axis in {c for c in nd if c >= 0}:
            mesh = [p for p, c in zip(hierarchy, nd) if c == axis]
            if len(mesh) > 1 and shape[axis] % math.prod(mesh):
                return False
    return True


def signatures(
    op: Operation, hierarchy: Sequence[int], compute_cost: float, cache: dict[tuple[object, ...], list[Signature]]
) -> list[Signature]:
    """The op's signatures on `hierarchy`: one 1-D signature per axis (nested splits only when even).

    Ops of one kind, types and properties share one list in `cache` (the layers of a deep model repeat).
    """
    key = (
        type(op),
        tuple(o.type for o in op.operands),
        tuple(r.type for r in op.results),
        tuple(sorted((k, v) for k, v in op.properties.items() if k not in ("sbp", "placement"))),
        tuple(hierarchy),
        compute_cost,
    )
    found = cache.get(key)
    if found is None:
        found = cache[key] = _signatures(op, hierarchy, compute_cost)
    return found


def _signatures(op: Operation, hierarchy: Sequence[int], compute_cost: float) -> list[Signature]:
    per_axis = [axis_signatures(op, p) for p in hierarchy]
    shapes = [shape_of(v.type) for v in (*op.operands, *op.results)]
    work = flops(op) * compute_cost
    out = []
    for combo in itertools.product(*per_axis):
        ins = tuple(tuple(sig[0][k] for sig in combo) for k in range(len(op.operands)))
        res = tuple(sig[1] for sig in combo)
        if len(hierarchy) > 1 and not _nests_evenly((*ins, res), shapes, hierarchy):
            continue
        share = math.prod(p for p, sig in zip(hierarchy, combo) if any(c >= 0 for c in (*sig[0], sig[1])))
        out.append(Signature(ins, res, work / share + staged_bytes(op, ins, hierarchy)))
    return out


def staged_bytes(op: Operation, ins: Sequence[NdCode], hierarchy: Sequence[int]) -> float:
    """Bytes the stages of a class-split cross-entropy or softmax move: all_reduces of one value per row."""
    if not _class_axis(op):
        return 0.0
    logits = ins[logits_index(op)]
    shape = shape_of(op.operands[logits_index(op)].type)
    row_bytes = shape[0] * max(1, dtype_of(op.operands[logits_index(op)].type).bitwidth // 8)  # type: ignore[attr-defined]
    total = 0.0
    for k, code in enumerate(logits):
        if code == 1:
            others = [(p, c) for j, (p, c) in enumerate(zip(hierarchy, logits)) if j != k]
            groups, share = math.prod(p for p, _ in others), math.prod(p for p, c in others if c == 0)
            total += groups * STAGED_ALL_REDUCES[type(op)] * axis_cost(PARTIAL, BROADCAST, row_bytes / share, hierarchy[k])
    return total


def flops(op: Operation) -> float:
    """Floating-point operations of the whole (logical) op: what splitting divides among devices."""
    if isinstance(op, job.MatmulOp):
        a = shape_of(op.operands[0].type)
        k = a[-2] if flag(op.properties, "transpose_a") else a[-1]
        return 2.0 * math.prod(_out(op)) * k
    if isinstance(op, (job.Conv2DOp, job.Conv2DGradInputOp, job.Conv2DGradFilterOp)):
        w = shape_of(op.operands[1].type) if not isinstance(op, job.Conv2DGradFilterOp) else _out(op)
        y = _out(op) if isinstance(op, job.Conv2DOp) else shape_of(op.operands[0].type)
        return 2.0 * math.prod(y) * math.prod(w[1:])
    if isinstance(op, (job.VariableOp, job.ConstantOp, job.FillOp, job.LearningRateOp, job.BoxingOp)):
        return 0.0
    sizes = [math.prod(shape_of(v.type)) for v in (*op.operands, *op.results) if isinstance(v.type, TensorType)]
    return float(max(sizes, default=0))


# ----------------------------------------------------------------- conversion costs


def nbytes(t: TensorType) -> int:
    return math.prod(shape_of(t)) * max(1, dtype_of(t).bitwidth // 8)  # type: ignore[attr-defined]


def axis_cost(src: Code, dst: Code, size: float, p: int, to_partial: bool = False) -> float:
    """Bytes moved to turn `src` into `dst` on one axis of p devices, for a value of `size` bytes.

    With `to_partial` (a boxing the user asks for), a broadcast or split value becomes partial sums
    locally: one device's copy and zeros elsewhere, each piece in place in zeros of the whole. Zeros
    are the identity of a sum only: a partial max or min is had no such way.
    """
    if src == dst or p == 1:
        return 0.0
    if dst >= 0:
        if src == BROADCAST:
            return 0.0  # a local slice
        return size * (p - 1) / p if src >= 0 else size * (p - 1)  # all_to_all | reduce_scatter
    if dst == BROADCAST:
        return size * (p - 1) if src >= 0 else 2 * size * (p - 1)  # all_gather | all_reduce
    if to_partial and dst == PARTIAL and src >= BROADCAST:
        return 0.0  # broadcast_to_partial | shard_embed
    return INFEASIBLE  # no plan gains by making a value partial: only a user's boxing does it


def moved_bytes(src: NdCode, dst: NdCode, size: int, hierarchy: Sequence[int], to_partial: bool = False) -> float:
    """Bytes per step, over all devices, to convert a value of `size` bytes one hierarchy axis at a time.

    Converting axis a runs in every group of devices that differ only in their
    axis-a coordinate, each group holding the value divided by the current
    splits of the other axes; the cheapest order of the axes counts. `to_partial`: see `axis_cost`.
    """
    best = INFEASIBLE
    for order in itertools.permutations([a for a, (s, d) in enumerate(zip(src, dst, strict=True)) if s != d]):
        current, total = list(src), 0.0
        for a in order:
            others = [(p, c) for b, (p, c) in enumerate(zip(hierarchy, current)) if b != a]
            groups = math.prod(p for p, _ in others)
            share = math.prod(p for p, c in others if c >= 0)
            total += groups * axis_cost(current[a], dst[a], size / share, hierarchy[a], to_partial)
            current[a] = dst[a]
        best = min(best, total)
    return best


def carried(codes: NdCode, rank: int, target: NdCode) -> NdCode:
    """What a value laid out as `codes` is turned into to change placement (a transfer carries no partial sums).

    On a 1-D placement a partial sum becomes a split (reduce_scatter at the
    source, a local embedding at the destination: only chunks move), along the
    target's split axis if it has one; on a mesh, or for a scalar, broadcast.
    """
    if len(codes) != 1 or rank == 0:
        return tuple(BROADCAST if c < BROADCAST else c for c in codes)
    axis = next((c for c in target if c >= 0), 0)
    return tuple(axis if c < BROADCAST else c for c in codes)


def placement_bytes(
    src: NdCode, dst: NdCode, shape: tuple[int, ...], itemsize: int,
    src_place: tuple[Sequence[int], Sequence[object]], dst_place: tuple[Sequence[int], Sequence[object]],
) -> float:  # fmt: skip
    """Bytes per step to move a value from one placement (hierarchy, devices) to another, as lowering does it:
    partial sums reduced at the source, then only the boxes each destination device lacks."""
    if any(c < BROADCAST for c in dst):
        return INFEASIBLE  # nothing becomes partial by moving data
    sent = carried(src, len(shape), dst)
    before = moved_bytes(src, sent, math.prod(shape) * itemsize, src_place[0])
    boxes = transfer_boxes(
        shape, ([code_attr(c) for c in sent], src_place[0], src_place[1]), ([code_attr(c) for c in dst], dst_place[0], dst_place[1])
    )
    return before + moved_entries(boxes) * itemsize


def transfer_cost(src: NdCode, dst: NdCode, size: int, hierarchy: Sequence[int]) -> float:
    """The search's price of a conversion: its bytes plus BOXING_COST, nothing when there is none."""
    return 0.0 if src == dst else moved_bytes(src, dst, size, hierarchy) + BOXING_COST
