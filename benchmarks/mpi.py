"""MPI ranks against the in-process simulation, and irflow's communicator against raw mpi4py.

    .venv/bin/python benchmarks/mpi.py [--ranks 4] [--steps 30]

Run plainly, it launches itself under the venv's mpiexec with --ranks
processes, then runs the in-process simulation of the same job in this
process, and prints ratios measured in the same run:

- the communicator layer: each collective irflow's MPI communicator runs
  (all_reduce, all_gather, reduce_scatter, all_to_all; 4 KiB to 4 MiB per
  rank) against the raw mpi4py call on the same buffers (goal: <= 1.1x),
  timed in turns with the raw call timed a second time: the raw/raw column is
  how far the very same call drifts here, the noise any ratio carries;
- the MLP train step (batch 100, data parallel) on the ranks against the same
  job on as many simulated devices and on one device, with the bytes handed to
  collectives per step and per device (the same program runs in both, so the
  bytes are equal by construction: the benchmark checks it).

On a machine with fewer cores than ranks the ranks share cores, and the step
times say more about scheduling than about MPI: compare on a machine with a
core per rank.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import irflow as flow
import irflow.typing as tp
from irflow.dialects import buffer

HERE = Path(__file__).resolve().parent
SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 22)  # bytes per rank
BATCH, FEATURES, HIDDEN, CLASSES = 100, 784, 512, 10


def best(fn, repeats: int) -> float:
    return side_by_side([fn], repeats)[0]


def side_by_side(fns: list, repeats: int, before=lambda: None) -> list[float]:
    """Each fn's median of the faster half of `repeats` calls, the fns taking turns call by call.

    Taking turns (in rotating order) gives each the same share of whatever
    else the machine is doing (other programs come and go), so their ratio
    holds where absolute times do not. `before` runs untimed ahead of every call.
    """
    times: list[list[float]] = [[] for _ in fns]
    for repeat in range(repeats):
        turns = list(zip(fns, times))
        k = repeat % len(turns)  # each takes every place in the order equally often
        for fn, spent in turns[k:] + turns[:k]:
            before()
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [float(np.median(sorted(t)[: max(1, len(t) // 2)])) for t in times]


def communicator_overhead(repeats: int) -> list[dict]:
    from mpi4py import MPI

    from irflow.runtime.communicator import Site
    from irflow.runtime.mpi import MPICommunicator, stop_all_on_error

    comm = MPI.COMM_WORLD
    stop_all_on_error(comm)
    p = comm.Get_size()
    ours = MPICommunicator((p,), comm)
    site = Site("bench")  # made once per op, as the executor does
    rows = []
    for size in SIZES:
        n = size // 4
        n -= n % (p * p)
        src = np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32)
        cases = {
            "all_reduce": (
                np.empty_like(src),
                lambda dst: ours.all_reduce(src, dst, 0, "sum", site),
                lambda dst: comm.Allreduce(src, dst, MPI.SUM),
            ),
            "all_gather": (
                np.empty(n * p, np.float32),
                lambda dst: ours.all_gather(src, dst, 0, 0, site),
                lambda dst: comm.Allgather(src, dst),
            ),
            "reduce_scatter": (
                np.empty(n // p, np.float32),
                lambda dst: ours.reduce_scatter(src, dst, 0, 0, "sum", site),
                lambda dst: comm.Reduce_scatter_block(src, dst, MPI.SUM),
            ),
            "all_to_all": (
                np.empty(n, np.float32),
                lambda dst: ours.all_to_all(src, dst, 0, 0, 0, site),
                lambda dst: comm.Alltoall(src, dst),
            ),
        }
        for name, (dst, irflow_call, raw_call) in cases.items():
            for call in (irflow_call, raw_call):  # warm up: first calls set up MPI's buffers and scratch
                call(dst)
            comm.Barrier()
            # The raw call twice: how far two runs of the very same call drift apart here (the noise floor).
            ours_s, raw_s, again_s = side_by_side(
                [lambda: irflow_call(dst), lambda: raw_call(dst), lambda: raw_call(dst)], repeats, comm.Barrier
            )
            rows.append({"op": name, "bytes": n * 4, "irflow": ours_s, "raw": raw_s, "raw_again": again_s})
    return rows


def mlp_step(devices: int, steps: int) -> dict:
    """Seconds per MLP train step and bytes given to collectives per step per device, on `devices` devices."""
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, FEATURES)), y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.05)
        h = flow.layers.dense(x, HIDDEN, activation=flow.nn.relu, kernel_initializer=init, name="hidden")
        logits = flow.layers.dense(h, CLASSES, kernel_initializer=init, name="logits")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits, name="loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int32)
    train(x, y)  # compile
    seconds = best(lambda: train(x, y), steps)
    program = train.executable().program
    moved = sum(
        buffer.nbytes(op.src.type)
        for op in program.body.block.ops
        if isinstance(op, buffer.CollectiveOp)
    )
    return {"devices": devices, "step_s": seconds, "bytes": moved}


def on_ranks(steps: int, repeats: int) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    overhead = communicator_overhead(repeats)
    step = mlp_step(comm.Get_size(), steps)
    if comm.Get_rank() == 0:
        print(json.dumps({"overhead": overhead, "step": step}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--on-ranks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.on_ranks:
        on_ranks(args.steps, args.repeats)
        return
    mpiexec = Path(sys.executable).parent / "mpiexec"
    cmd = [str(mpiexec), "-n", str(args.ranks), sys.executable, __file__, "--on-ranks",
           "--steps", str(args.steps), "--repeats", str(args.repeats)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYDRA_"))}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    ranks = json.loads(out.strip().splitlines()[-1])
    simulated = mlp_step(args.ranks, args.steps)
    one = mlp_step(1, args.steps)

    print(f"irflow's MPI communicator vs raw mpi4py, {args.ranks} ranks (median of the faster half of {args.repeats}, "
          "taking turns call by call)")
    print(f"{'collective':<16}{'bytes/rank':>12}{'irflow':>12}{'raw':>12}{'ratio':>8}{'raw/raw':>9}")
    worst = noise = 0.0
    for row in ranks["overhead"]:
        ratio, same = row["irflow"] / row["raw"], row["raw_again"] / row["raw"]
        worst, noise = max(worst, ratio), max(noise, same, 1 / same)
        print(f"{row['op']:<16}{row['bytes']:>12,}{row['irflow'] * 1e6:>10.1f}us{row['raw'] * 1e6:>10.1f}us"
              f"{ratio:>8.2f}{same:>9.2f}")
    print(f"worst ratio: {worst:.2f} (goal <= 1.1); the same raw call timed twice differed by up to {noise:.2f}x")
    step = ranks["step"]
    print(f"\nMLP train step, batch {BATCH}, data parallel")
    print(f"{'engine':<28}{'step':>10}{'bytes/step/device':>20}{'vs in-process':>15}")
    for label, row in ((f"{args.ranks} MPI ranks", step), (f"{args.ranks} simulated devices", simulated), ("1 device", one)):
        print(f"{label:<28}{row['step_s'] * 1e3:>8.2f}ms{row['bytes']:>20,}{row['step_s'] / simulated['step_s']:>15.2f}")
    if step["bytes"] != simulated["bytes"]:
        raise SystemExit(f"the ranks moved {step['bytes']} bytes per step, the simulation {simulated['bytes']}")
    print(f"cores here: {os.cpu_count()}; ranks on fewer cores than ranks share them")


if __name__ == "__main__":
    main()
