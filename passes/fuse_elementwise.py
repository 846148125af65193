"""fuse-elementwise: a kernel and the elementwise kernel that alone reads its result become one kernel.

Runs on buffer programs before plan-memory. The intermediate buffer goes
away, and the fused kernel applies the second step while the data is still in
cache: for `conv2d`, the bias and the relu run on each chunk of the GEMM's
product before it is written out (its `epilogue` attribute), instead of as two
more passes over the whole output.

    bias_add(x, b) -> t; relu(t) -> y           =>  bias_add_relu(x, b) -> y
    conv2d(x, w) -> c; bias_add(c, b) -> y      =>  conv2d(x, w, b) {epilogue = "bias_add"} -> y
    conv2d {epilogue = "bias_add"}; relu        =>  conv2d {epilogue = "bias_add_relu"}
    max_pool2d_grad(dy, x, y) -> d; relu_grad(d, x) -> dx  =>  max_pool2d_grad(dy, x, y) {epilogue = "relu_grad"} -> dx
    matmul(a, b) -> g; momentum_update(w, g, m, lr) -> (w, m)  =>  matmul(a, b, w, m, lr) {epilogue = "momentum_update"} -> (w, m)

The last (and its `sgd_update` twin) takes an optimizer update into the matmul
that makes its weight gradient: where numpy's BLAS allows, the kernel adds the
product straight into the momentum (or the weight) with one GEMM, and the
gradient is never stored (kernels/linalg.py).

A pair fuses only when the intermediate is a `buffer.alloc` that the first
kernel writes and the second reads, and nothing else uses; and when no op
between them writes what the first kernel reads (the fused kernel runs where
the second one stood).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irflow.dialects import buffer

# (first kernel, second kernel) -> the kernel doing both; the second's extra inputs follow the first's.
FUSED = {("bias_add", "relu"): "bias_add_relu"}

# Kernels that apply a channel-wise epilogue (kernel `epilogue` with the bias as an extra input) per chunk.
EPILOGUE_HOSTS = frozenset({"conv2d"})
EPILOGUES = frozenset({"bias_add", "bias_add_relu"})

# (first, second) where second's other input is first's input 1: first does both, with `epilogue = second`.
# relu_grad(max_pool2d_grad(dy, x, y), x) masks dy by y > 0 instead of dx by x > 0 (a quarter of the work for 2x2).
ABSORBED = frozenset({("max_pool2d_grad", "relu_grad")})

# Updates whose gradient (input 1) a `matmul` may make as its epilogue: ins (a, b, w, the update's other inputs).
UPDATES = frozenset({"sgd_update", "momentum_update"})


def _writer(value: SSAValue) -> buffer.KernelOp | None:
    """The one kernel that writes an alloc'd intermediate which exactly one other op reads, else None.

    A dynamic intermediate is the `buffer.cut` of an alloc that nothing else uses.
    """
    storage = value.owner.buf if isinstance(value.owner, buffer.CutOp) else value
    if not isinstance(storage.owner, buffer.AllocOp) or (storage is not value and len(list(storage.uses)) != 1):
        return None
    uses = list(value.uses)
    users = {use.operation for use in uses}
    writers = [op for op in users if isinstance(op, buffer.KernelOp) and value in op.outs and value not in op.ins]
    if len(uses) != 2 or len(users) != 2 or len(writers) != 1 or len(writers[0].outs) != 1:
        return None
    return writers[0]


def _reads_kept(first: Operation, second: Operation, values: tuple[SSAValue, ...]) -> bool:
    """No op strictly between `first` and `second` writes any of `values`."""
    op = first.next_op
    while op is not None and op is not second:
        if isinstance(op, buffer.BufferOp) and any(v in values for v in op.writes()):
            return False
        op = op.next_op
    return op is second


def _epilogue(op: buffer.KernelOp) -> str | None:
    attr = op.parameters().get("epilogue")
    return attr.data if isinstance(attr, StringAttr) else None


def _channel_axis(op: buffer.KernelOp) -> bool:
    axis = op.parameters().get("axis")
    return axis is None or (isinstance(axis, IntegerAttr) and axis.value.data == 1)


def _fuse(first: buffer.KernelOp, second: buffer.KernelOp) -> buffer.KernelOp | None:
    """The kernel doing `first` then `second` (whose input 0 is first's output), if one exists."""
    name, params = first.kernel.data, dict(first.parameters())
    extra = tuple(second.ins[1:])
    epilogue = _epilogue(first)
    if name in EPILOGUE_HOSTS and epilogue is None and second.kernel.data in EPILOGUES and _channel_axis(second):
        params["epilogue"] = StringAttr(second.kernel.data)
    elif epilogue is None and (name, second.kernel.data) in ABSORBED and extra == (first.ins[1],):
        params["epilogue"] = StringAttr(second.kernel.data)
        extra = ()
    elif epilogue is not None and (epilogue, second.kernel.data) in FUSED:
        params["epilogue"] = StringAttr(FUSED[epilogue, second.kernel.data])
    elif epilogue is None and (name, second.kernel.data) in FUSED:
        name = FUSED[name, second.kernel.data]
        params.update(second.parameters())
    else:
        return None
    fused = buffer.KernelOp(name, [*first.ins, *extra], list(second.outs), params)
    fused.location = first.location
    return fused


def _fuse_update(first: buffer.KernelOp, update: buffer.KernelOp) -> buffer.KernelOp | None:
    """The matmul making `update`'s gradient with the update as its epilogue, if `first` is a plain matmul."""
    if first.kernel.data != "matmul" or _epilogue(first) is not None:
        return None
    params = {**first.parameters(), **update.parameters(), "epilogue": StringAttr(update.kernel.data)}
    fused = buffer.KernelOp("matmul", [*first.ins, update.ins[0], *update.ins[2:]], list(update.outs), params)
    fused.location = first.location
    return fused


@dataclass(frozen=True)
class FuseElementwisePass(ModulePass):
    """Merge each kernel with the elementwise kernel that alone consumes its result (see the module doc)."""

    name = "fuse-elementwise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [o for o in op.body.block.ops if isinstance(o, buffer.ProgramOp)]:
            for second in list(program.body.block.ops):
                if not isinstance(second, buffer.KernelOp) or not second.ins:
                    continue
                at = 1 if second.kernel.data in UPDATES and len(second.ins) > 1 else 0
                intermediate = second.ins[at]
                first = _writer(intermediate)
                if first is None or list(second.ins).count(intermediate) != 1:
                    continue
                fused = _fuse_update(first, second) if at else _fuse(first, second)
                # The fused kernel reads the first one's inputs where the second stood; the second's it reads there anyway.
                if fused is None or not _reads_kept(first, second, tuple(first.ins)):
                    continue
                Rewriter.replace_op(second, fused, new_results=[])
                Rewriter.erase_op(first)
                storage = buffer.storage_of(intermediate)
                if storage is not intermediate:
                    Rewriter.erase_op(intermediate.owner)
                Rewriter.erase_op(storage.owner)


__all__ = ["ABSORBED", "EPILOGUES", "EPILOGUE_HOSTS", "FUSED", "UPDATES", "FuseElementwisePass"]
