"""Distributed jobs on simulated devices: bytes per step of the chosen plan, SBP compile time, step time.

    .venv/bin/python benchmarks/distributed.py [--quick]

1. For the MLP and LeNet train jobs of the documentation (examples/models.py)
   on 4 devices: the bytes per step the plan of sbp-infer communicates (its
   cost model, summed over every boxing insert-boxing made), against plain
   data parallel (every variable hinted broadcast: inputs split, gradients
   all-reduced), against the hidden layer hinted model parallel (split(0)),
   and against the optimum of an unbounded search of the same
   model where that finishes (sbp-infer's search is exact when its states fit).
2. Compile time of sbp-infer + insert-boxing at 1k and 10k ops (the deep MLP
   train job of benchmarks/sbp_compile.py, on 4 devices).
3. Step time of a train step on 4 simulated devices against one device (the
   same process does 4 devices' work plus the collectives: the ratio shows
   the simulation's overhead, not a speed-up).
4. Placement changes: the MLP with its hidden layer on devices 0-3 and its
   output layer and loss on devices 2-3. The bytes per step its transfers
   move (the cost model, which a test checks against the exchanges) against
   moving every transferred value whole, and its step time against the same
   MLP on one placement of 4 devices and on one device.
"""

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

import irflow as flow
import irflow.typing as tp
from irflow.compiler import pipeline_for, run_pipeline
from irflow.dialects import job
from irflow.dialects.sbp import NdSbpAttr, PlacementAttr, SbpAttr
from irflow.passes.insert_boxing import boxing_bytes
from irflow.target import decide_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/sbp_compile.py
from models import lenet, mlp  # noqa: E402  the documentation's models, as the examples use them

DEVICES = 4
UNBOUNDED = 1_000_000  # states of the exact search


def train_job(model: Callable[..., flow.Blob], batch: int, image: tuple[int, ...], devices: int):
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)

    @flow.global_function(type="train")
    def train(
        images: tp.Numpy.Placeholder((batch, *image), dtype=flow.float),
        labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32),
    ) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, model(images))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return train


def sbp_stages(module: ModuleOp, spec: str = "") -> ModuleOp:
    """The module after its pipeline (or `spec`) up to insert-boxing: the SBP plan with its boxing ops."""
    func = next(op for op in module.walk() if isinstance(op, job.FuncOp))
    full = (spec or pipeline_for(func, decide_target(module, warned=True)[0])).split(",")
    upto = ",".join(full[: next(i for i, p in enumerate(full) if p.startswith("insert-boxing")) + 1])
    return run_pipeline(module.clone(), upto)["insert-boxing"]


def plan_bytes(module: ModuleOp) -> float:
    return sum(boxing_bytes(op) for op in module.walk() if isinstance(op, job.BoxingOp) and op.src_sbp is not None)


def hinted(module: ModuleOp, sbp: dict[str, SbpAttr], default: SbpAttr | None = None) -> ModuleOp:
    """The same job with variables hinted (by name; `default` for the others) as the user would hint them."""
    work = module.clone()
    for op in work.walk():
        if isinstance(op, job.VariableOp) and (op.var_name.data in sbp or default is not None):
            op.properties["sbp"] = NdSbpAttr([sbp.get(op.var_name.data, default)])
            op.attributes["sbp_origin"] = StringAttr("hint")
    return work


def data_parallel(module: ModuleOp) -> ModuleOp:
    """Every variable broadcast: plain data parallelism (inputs split, gradients all-reduced)."""
    return hinted(module, {}, SbpAttr("broadcast"))


def model_parallel(module: ModuleOp) -> ModuleOp:
    """The hidden layer split over its output features, as dense(model_distribute=split(0)) hints it."""
    return hinted(module, {"dense1-weight": SbpAttr("split", 0), "dense1-bias": SbpAttr("split", 0)})


def communication(quick: bool) -> None:
    print(f"== bytes communicated per step, train jobs on {DEVICES} devices (sbp-infer's cost model)")
    print(f"{'job':<7}{'chosen':>11}{'data par.':>11}{'model par.':>11}{'optimum':>11}{'chosen/DP':>10}"
          f"{'objective chosen/opt':>22}")  # fmt: skip
    cases = {"mlp": (mlp, 32, (1, 28, 28)), "lenet": (lenet, 8 if quick else 32, (1, 28, 28))}
    for name, (model, batch, image) in cases.items():
        fn = train_job(model, batch, image, DEVICES)
        chosen = plan_bytes(sbp_stages(fn.module))
        dp = plan_bytes(sbp_stages(data_parallel(fn.module)))
        mp = plan_bytes(sbp_stages(model_parallel(fn.module)))
        found = optimum(fn.module)
        if found is None:
            opt_bytes, ratio = "n/a", "search too large"
        else:
            opt_bytes, ratio = f"{found[0]:.0f}", f"{found[1]:.4f}"
        print(f"{name:<7}{chosen:>11.0f}{dp:>11.0f}{mp:>11.0f}{opt_bytes:>11}{chosen / dp:>10.3f}{ratio:>22}")


def optimum(module: ModuleOp) -> tuple[float, float] | None:
    """Bytes of the optimal plan and (chosen objective / optimal objective), from an unbounded exact search.

    sbp-infer's dynamic program is exact while its states fit `max-states`;
    here it gets `UNBOUNDED` states. None if even that is not exact.
    """
    from irflow.passes.sbp_infer import SbpInferPass, build_graph, plan_cost, search, solve

    func = next(op for op in module.walk() if isinstance(op, job.FuncOp))
    before = run_pipeline(module.clone(), "autodiff,optimizer,cse")["cse"]
    graph = build_graph(next(op for op in before.walk() if isinstance(op, job.FuncOp)), SbpInferPass.compute_cost).graph
    best, exact = search(graph, UNBOUNDED)
    if not exact:
        return None
    chosen, _ = solve(graph, SbpInferPass.max_states)
    spec = ",".join(
        f"sbp-infer{{max-states={UNBOUNDED}}}" if p.startswith("sbp-infer") else p
        for p in pipeline_for(func, decide_target(module, warned=True)[0]).split(",")
    )
    return plan_bytes(sbp_stages(module, spec)), plan_cost(graph, chosen) / plan_cost(graph, best)


def compile_time(sizes: list[int]) -> None:
    """S's measurement (benchmarks/sbp_compile.py: a deep MLP train job), on the 4 devices used here."""
    import sbp_compile

    print(f"== compile time of sbp-infer + insert-boxing, train jobs on {DEVICES} devices (benchmarks/sbp_compile.py)")
    for ops in sizes:
        sbp_compile.measure(max(1, ops // sbp_compile.OPS_PER_LAYER), PlacementAttr("cpu", [f"0:0-{DEVICES - 1}"]))


def step_time(repeats: int) -> None:
    print(f"== train step time, {DEVICES} simulated devices vs 1 (batch 64, the MLP)")
    rng = np.random.default_rng(0)
    images = rng.random((64, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, 64).astype(np.int32)
    times = {}
    for devices in (1, DEVICES):
        times[devices] = best = best_step(train_job(mlp, 64, (1, 28, 28), devices), (images, labels), repeats)
        print(f"{devices} device(s): {best * 1e3:8.2f} ms/step")
    print(f"ratio {DEVICES} devices / 1 device: {times[DEVICES] / times[1]:.2f}")


def best_step(step: Callable[..., object], args: tuple, repeats: int) -> float:
    """The fastest of `repeats` calls, in seconds, after one that compiles and warms up."""
    step(*args)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step(*args)
        best = min(best, time.perf_counter() - start)
    return best


def two_scope_mlp(batch: int, head: str):
    """The documentation's MLP with its output layer and loss on part of the devices (`head`)."""
    flow.clear_default_session()
    flow.config.cpu_device_num(DEVICES)

    @flow.global_function(type="train")
    def train(
        images: tp.Numpy.Placeholder((batch, 1, 28, 28), dtype=flow.float),
        labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32),
    ) -> tp.Numpy:
        initializer = flow.truncated_normal(0.1)
        with flow.scope.placement("cpu", f"0:0-{DEVICES - 1}"):
            flat = flow.reshape(images, [batch, -1])
            hidden = flow.layers.dense(flat, 512, activation=flow.nn.relu, kernel_initializer=initializer, name="dense1")
        with flow.scope.placement("cpu", head):
            logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return train


def placements(repeats: int) -> None:
    head = f"0:{DEVICES // 2}-{DEVICES - 1}"
    print(f"== placement change: MLP hidden layer on 0:0-{DEVICES - 1}, output layer and loss on {head} (batch 64)")
    fn = two_scope_mlp(64, head)
    boxes = [
        op for op in sbp_stages(fn.module).walk()
        if isinstance(op, job.BoxingOp) and op.src_placement is not None and op.src_placement != op.placement
    ]  # fmt: skip
    moved = sum(boxing_bytes(op) for op in boxes)
    whole = sum(float(np.prod(job.shape_of(op.x.type)) * 4) for op in boxes)
    print(f"{len(boxes)} transfers: {moved:.0f} bytes/step, moving each value whole: {whole:.0f} ({moved / whole:.3f}x)")
    rng = np.random.default_rng(0)
    images = rng.random((64, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, 64).astype(np.int32)
    times = {}
    for name, make in (("two placements", lambda: two_scope_mlp(64, head)), ("one placement", lambda: train_job(mlp, 64, (1, 28, 28), DEVICES)),
                       ("one device", lambda: train_job(mlp, 64, (1, 28, 28), 1))):  # fmt: skip
        times[name] = best = best_step(make(), (images, labels), repeats)
        print(f"{name:<15}{best * 1e3:8.2f} ms/step")
    print(f"two placements / one placement: {times['two placements'] / times['one placement']:.2f}; "
          f"/ one device: {times['two placements'] / times['one device']:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: 1k ops only, fewer repeats")
    args = parser.parse_args()
    communication(args.quick)
    compile_time([1000] if args.quick else [1000, 10000])
    step_time(3 if args.quick else 10)
    placements(3 if args.quick else 10)


if __name__ == "__main__":
    main()
