"""Compile time of sbp-infer and insert-boxing at about 1k and 10k ops, against cse on the same module.

The job is a deep MLP train step (dense + relu layers of width 64 on a batch
of 256, sgd), traced with the frontend and taken through autodiff, optimizer
and cse, then placed on 4 devices (1-D) and on a 2x2 hierarchy.  For each
size it prints the ops, the time per op of cse, sbp-infer and insert-boxing,
sbp-infer / cse, the plan's bytes per step and the bytes of plain data
parallelism (every gradient all-reduced once) for scale.

    python benchmarks/sbp_compile.py [--ops 1000,10000]
"""

from __future__ import annotations

import argparse
import time

from xdsl.dialects.builtin import ModuleOp

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.context import make_context
from irflow.dialects import job
from irflow.dialects.sbp import PlacementAttr
from irflow.passes import available_passes
from irflow.passes.insert_boxing import InsertBoxingPass, boxing_bytes
from irflow.passes.sbp_infer import SbpInferPass
from irflow.passes.sbp_rules import nbytes

OPS_PER_LAYER = 12  # what one dense + relu layer becomes after autodiff and optimizer (measured below)
BATCH, WIDTH = 256, 64


def deep_mlp(layers: int) -> ModuleOp:
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, WIDTH)), labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        h = x
        for i in range(layers):
            h = flow.layers.dense(h, WIDTH, activation=flow.nn.relu, name=f"layer{i}")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, h, name="loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    module = train.module.clone()
    run_pipeline(module, "autodiff,optimizer")
    flow.clear_default_session()
    return module


def timed(pass_: object, module: ModuleOp) -> float:
    start = time.perf_counter()
    pass_.apply(make_context(), module)  # type: ignore[attr-defined]
    return time.perf_counter() - start


def data_parallel_bytes(func: job.FuncOp, p: int) -> float:
    """Every trainable variable's gradient all-reduced once: 2T(p-1) per variable."""
    return sum(2.0 * nbytes(op.res.type) * (p - 1) for op in func.body.block.ops
               if isinstance(op, job.VariableOp) and op.trainable.value.data)


def measure(layers: int, placement: PlacementAttr) -> None:
    module = deep_mlp(layers)
    func = next(op for op in module.walk() if isinstance(op, job.FuncOp))
    func.attributes["placement"] = placement
    cse = available_passes()["cse"]()()
    t_cse = timed(cse, module)
    ops = sum(1 for _ in func.body.block.ops)
    t_infer = timed(SbpInferPass(), module)
    t_box = timed(InsertBoxingPass(), module)
    module.verify()
    moved = sum(boxing_bytes(op) for op in func.body.block.ops if isinstance(op, job.BoxingOp))
    p = len(placement.devices)
    print(
        f"{ops:6d} ops  {str(placement):48s} cse {t_cse / ops * 1e6:6.1f} us/op  "
        f"sbp-infer {t_infer / ops * 1e6:7.1f} us/op ({t_infer / t_cse:5.1f}x cse)  "
        f"insert-boxing {t_box / ops * 1e6:5.1f} us/op  "
        f"plan {moved / 1e6:8.2f} MB/step vs data parallel {data_parallel_bytes(func, p) / 1e6:8.2f} MB/step"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="1000,10000", help="approximate op counts, comma separated")
    args = parser.parse_args()
    for target in (int(n) for n in args.ops.split(",")):
        layers = max(1, target // OPS_PER_LAYER)
        for placement in (PlacementAttr("cpu", ["0:0-3"]), PlacementAttr("cpu", ["0:0-3"], hierarchy=[2, 2])):
            measure(layers, placement)


if __name__ == "__main__":
    main()
