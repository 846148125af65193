"""Compile time per stage, from tracing to the first step, of a ResNet-50-shaped and a BERT-base-shaped
train job and of the examples' jobs.

ResNet-50: bottleneck blocks [3, 4, 6, 3], batch normalization, SGD with
momentum, input (2, 3, 32, 32). BERT-base: 12 layers of width 768 (12 heads of
64, feed-forward 3072, GELU), layer normalization, softmax attention by
batched matmuls and transposes, a word embedding of 30522 rows, Adam;
batch 2 of 32 tokens. The examples' jobs are the MLP and LeNet of
examples/models.py at the examples' batch of 100, train and predict.

For each job it prints the wall and process CPU seconds of each stage
(tracing; every pass of its pipeline, applied as `compile_job` applies them;
the one verification of the result; binding the executor, which creates the
variables; the first step; a later step), each stage's share of the CPU time
to the end of the first step, and compiling (passes, verification, binding)
and the whole from tracing to the end of the first step against a later step.
Each job runs `--rounds` times in fresh sessions and each stage keeps its best
round, so load from other processes weighs less; to compare two trees, run
them alternately.

    python benchmarks/compile_time.py                 # every job, 2 rounds
    python benchmarks/compile_time.py --jobs resnet50 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

import irflow as flow
import irflow.typing as tp
from irflow.compiler import Executable, pipeline_for
from irflow.context import make_context
from irflow.dialects import buffer, job
from irflow.frontend.session import default_session
from irflow.gc_paused import gc_paused
from irflow.passes import available_passes
from irflow.target import Target
from irflow.textir.verification import first_verify_failure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import models  # noqa: E402  (examples/models.py)

Inputs = list[np.ndarray]


def _bn(x: flow.Blob, name: str) -> flow.Blob:
    return flow.layers.batch_normalization(x, axis=1, name=name + "_bn")


def _conv(x: flow.Blob, filters: int, size: int, stride: int, name: str) -> flow.Blob:
    return flow.layers.conv2d(x, filters, size, strides=stride, padding="SAME", use_bias=False, name=name)


def _bottleneck(x: flow.Blob, filters: int, stride: int, name: str, project: bool) -> flow.Blob:
    y = flow.nn.relu(_bn(_conv(x, filters, 1, 1, name + "a"), name + "a"))
    y = flow.nn.relu(_bn(_conv(y, filters, 3, stride, name + "b"), name + "b"))
    y = _bn(_conv(y, 4 * filters, 1, 1, name + "c"), name + "c")
    shortcut = _bn(_conv(x, 4 * filters, 1, stride, name + "p"), name + "p") if project else x
    return flow.nn.relu(y + shortcut)


def resnet50() -> tuple[Any, Inputs]:
    @flow.global_function(type="train")
    def resnet50_train(
        images: tp.Numpy.Placeholder((2, 3, 32, 32)), labels: tp.Numpy.Placeholder((2,), dtype=flow.int32)
    ) -> tp.Numpy:
        h = flow.nn.relu(_bn(_conv(images, 64, 7, 2, "stem"), "stem"))
        h = flow.nn.max_pool2d(h, 3, 2, "SAME")
        for i, (filters, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
            for j in range(blocks):
                h = _bottleneck(h, filters, stride if j == 0 else 1, f"l{i}b{j}", j == 0)
        logits = flow.layers.dense(flow.math.reduce_mean(h, axis=[2, 3]), 10, name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    return resnet50_train, [rng.random((2, 3, 32, 32), np.float32), np.array([1, 2], np.int32)]


BERT_LAYERS, HIDDEN, HEADS, FFN, VOCAB, BATCH, SEQ = 12, 768, 12, 3072, 30522, 2, 32


def _attention(x: flow.Blob, name: str) -> flow.Blob:
    """Multi-head self-attention over (BATCH * SEQ, HIDDEN) rows."""
    head = HIDDEN // HEADS

    def heads(t: flow.Blob) -> flow.Blob:  # (B*S, H) -> (B, heads, S, head)
        return flow.transpose(flow.reshape(t, [BATCH, SEQ, HEADS, head]), perm=[0, 2, 1, 3])

    q, k, v = (heads(flow.layers.dense(x, HIDDEN, name=f"{name}-{p}")) for p in "qkv")
    scores = flow.matmul(q, k, transpose_b=True, alpha=1.0 / math.sqrt(head))
    context = flow.matmul(flow.nn.softmax(scores), v)
    context = flow.reshape(flow.transpose(context, perm=[0, 2, 1, 3]), [BATCH * SEQ, HIDDEN])
    return flow.layers.dense(context, HIDDEN, name=f"{name}-out")


def _encoder_layer(x: flow.Blob, name: str) -> flow.Blob:
    x = flow.layers.layer_norm(x + _attention(x, name), name=f"{name}-ln1")
    hidden = flow.layers.dense(x, FFN, activation=flow.math.gelu, name=f"{name}-ffn1")
    return flow.layers.layer_norm(x + flow.layers.dense(hidden, HIDDEN, name=f"{name}-ffn2"), name=f"{name}-ln2")


def bert_base() -> tuple[Any, Inputs]:
    @flow.global_function(type="train")
    def bert_train(
        tokens: tp.Numpy.Placeholder((BATCH * SEQ,), dtype=flow.int32),
        labels: tp.Numpy.Placeholder((BATCH * SEQ,), dtype=flow.int32),
    ) -> tp.Numpy:
        table = flow.get_variable("word-embedding", (VOCAB, HIDDEN), initializer=flow.truncated_normal(0.02))
        h = flow.gather(table, tokens)
        for i in range(BERT_LAYERS):
            h = _encoder_layer(h, f"layer{i}")
        logits = flow.layers.dense(h, 2, name="classifier")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [1e-4])).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    return bert_train, [rng.integers(0, VOCAB, BATCH * SEQ, dtype=np.int32), rng.integers(0, 2, BATCH * SEQ, dtype=np.int32)]


IMAGES = tp.Numpy.Placeholder((100, 1, 28, 28), dtype=flow.float)
LABELS = tp.Numpy.Placeholder((100,), dtype=flow.int32)


def _example(model: str, job_type: str) -> Callable[[], tuple[Any, Inputs]]:
    net = models.lenet if model == "lenet" else models.mlp

    def make() -> tuple[Any, Inputs]:
        rng = np.random.default_rng(0)
        x = rng.random((100, 1, 28, 28), np.float32)
        if job_type == "predict":

            @flow.global_function(type="predict")
            def eval_job(images: IMAGES) -> tp.Numpy:
                return net(images)

            return eval_job, [x]

        @flow.global_function(type="train")
        def train_job(images: IMAGES, labels: LABELS) -> tp.Numpy:
            logits = net(images, train=True) if model == "lenet" else net(images)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
            return loss

        return train_job, [x, rng.integers(0, 10, 100, dtype=np.int32)]

    return make


JOBS: dict[str, Callable[[], tuple[Any, Inputs]]] = {
    "resnet50": resnet50,
    "bert-base": bert_base,
    **{f"{m}-{t}": _example(m, t) for m in ("mlp", "lenet") for t in ("train", "predict")},
}


class _Clock:
    """Wall and process CPU seconds of each stage: under load from other processes the CPU time of the
    one-threaded stages (all but the steps) moves much less than the wall time."""

    def __init__(self) -> None:
        self.times: dict[str, tuple[float, float]] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.times[name] = (time.perf_counter() - wall, time.process_time() - cpu)


def stage_times(make: Callable[[], tuple[Any, Inputs]]) -> dict[str, tuple[float, float]]:
    """One round in a fresh session: (wall, CPU) seconds per stage, the steps of `compile_job` taken one by one."""
    flow.clear_default_session()
    clock = _Clock()
    with clock.stage("trace"):
        fn, inputs = make()
    func = next(op for op in fn.module.walk() if isinstance(op, job.FuncOp))
    target = Target()
    spec = pipeline_for(func, target)
    with gc_paused():  # as compile_job
        work = ModuleOp([func.clone()])
        source = work.clone()
        ctx = make_context()
        for p in PassPipeline.parse_spec(available_passes(), spec).passes:
            with clock.stage(p.name):
                p.apply(ctx, work)
        with clock.stage("verify"):
            assert first_verify_failure(work) is None
        program = next(op for op in work.body.block.ops if isinstance(op, buffer.ProgramOp))
        with clock.stage("bind"):
            exe = Executable(source, spec, program, default_session().store_for(target, fn.job_name), target)
    for stage in ("first step", "later step"):
        with clock.stage(stage):
            exe(inputs)
    return clock.times


def report(name: str, rounds: list[dict[str, tuple[float, float]]]) -> None:
    best = {stage: tuple(min(r[stage][i] for r in rounds) for i in (0, 1)) for stage in rounds[0]}
    compiled = [stage for stage in best if stage not in ("trace", "first step", "later step")]
    for label, stages in (("compile", compiled), ("trace to first step", [s for s in best if s != "later step"])):
        wall, cpu = (sum(best[s][i] for s in stages) for i in (0, 1))
        print(f"{name}: {label} {wall:.2f} s wall, {cpu:.2f} s CPU: {wall / best['later step'][0]:.1f}x a later step's wall")
    whole = sum(best[s][1] for s in best if s != "later step")
    for stage, (wall, cpu) in best.items():
        print(f"  {stage:24s} {wall:8.3f} s wall {cpu:8.3f} s CPU {cpu / whole:6.1%} of the CPU to the first step's end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for name in args.jobs.split(","):
        report(name, [stage_times(JOBS[name]) for _ in range(args.rounds)])


if __name__ == "__main__":
    main()
