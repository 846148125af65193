"""Train-step time of the OneFlow MLP, LeNet and a small residual CNN against PyTorch CPU eager, in one run.

Same shapes, same batch (100), same optimizer (SGD, momentum 0.9), same number
of threads on both sides: irflow's through `flow.config.cpu_thread_num`,
PyTorch's through `torch.set_num_threads`. Goals: MLP <= 0.6x, LeNet and the
residual CNN <= 1.0x PyTorch's time, at 1 and at 2 threads. Under the MLP's row,
its two large GEMMs alone, run by irflow's matmul kernel and by `torch.mm`: the
floor under any step at this BLAS speed, and how much of PyTorch's step is
GEMM work no framework can skip. The residual CNN
(3x3 convolutions without bias, batch normalization, two residual blocks, see
`resnet_job`) is written once for each side here; tests/test_torch_parity.py
checks that the two train alike.

Every figure is reported twice, each from a process of its own: with the
environment as it is, and with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset
(which some machines set to force an older OpenBLAS kernel on numpy; PyTorch
uses MKL and does not read them). irflow's jobs measure their convolution algorithms
on the machine they run on (`job_config`), as PyTorch's oneDNN picks its kernels for
the CPU it finds. Each run prints the BLAS kernel numpy got
(threadpoolctl's `architecture`). The two sides alternate, round by round, and
each keeps its best round, so load from other processes hits both alike.

    python benchmarks/train_step.py                # both environments, 1 and 2 threads
    python benchmarks/train_step.py --busy         # also steps/s with a competing busy process
    python benchmarks/train_step.py --threads 2 --env as-is
    python benchmarks/train_step.py --profile      # CPU and wall ms per kernel of each irflow step instead
    python benchmarks/train_step.py --heuristic    # irflow's convolution algorithms by its heuristics, not measured
    python benchmarks/train_step.py --device gpu --batch 1000   # irflow on cupy against PyTorch CUDA eager

On a GPU each side's step ends with its loss on the host (irflow's call hands it back; PyTorch's step
reads `loss.item()`), and the first call of each irflow job (compile, variables, first step) is printed.
"""

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import irflow as flow
import irflow.typing as tp
from irflow.runtime import threads
from irflow.runtime.kernels import get_kernel

BATCH = 100
MLP, RESNET = "MLP 784-512-10", "ResNet-BN"
GOALS = {MLP: 0.6, "LeNet": 1.0, RESNET: 1.0}
# The MLP rows' floors: the step's two large GEMMs alone, irflow's, then PyTorch's; ratios against PyTorch's step.
FLOORS = ("  GEMM floor", "  PyTorch GEMMs")
FORCED_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def job_config(measured: bool = True) -> flow.FunctionConfig:
    """irflow's jobs measure their convolution algorithms on this machine (OneFlow's
    `cudnn_conv_heuristic_search_algo(False)`), unless `measured` is False: then its heuristics choose."""
    config = flow.FunctionConfig()
    config.cudnn_conv_heuristic_search_algo(not measured)
    return config


def irflow_jobs(measured: bool = True, device: str = "cpu") -> dict[str, Callable[..., object]]:
    flow.clear_default_session()
    if device == "gpu":
        flow.config.gpu_device_num(1)  # the jobs name no placement: they run on the configured devices
    config = job_config(measured)

    @flow.global_function(type="train", function_config=config)
    def mlp_train(
        images: tp.Numpy.Placeholder((BATCH, 784), dtype=flow.float),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="mlp1")
        logits = flow.layers.dense(hidden, 10, name="mlp2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    @flow.global_function(type="train", function_config=config)
    def lenet_train(
        images: tp.Numpy.Placeholder((BATCH, 1, 28, 28), dtype=flow.float),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        conv1 = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu, name="conv1")
        pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu, name="conv2")
        pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        flat = flow.reshape(pool2, [BATCH, -1])
        hidden = flow.layers.dense(flat, 512, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return {MLP: mlp_train, "LeNet": lenet_train, RESNET: resnet_job(config=config)}


def _conv_bn(x: flow.Blob, filters: int, name: str, relu: bool = True) -> flow.Blob:
    """3x3 SAME convolution without bias, then batch normalization over channels (PyTorch's eps and momentum)."""
    y = flow.layers.conv2d(x, filters, 3, padding="SAME", use_bias=False, name=name)
    y = flow.layers.batch_normalization(y, axis=1, momentum=0.9, epsilon=1e-5, name=f"{name}_bn")
    return flow.nn.relu(y) if relu else y


def _residual(x: flow.Blob, filters: int, name: str) -> flow.Blob:
    return flow.nn.relu(x + _conv_bn(_conv_bn(x, filters, f"{name}_a"), filters, f"{name}_b", relu=False))


def resnet_job(
    learning_rate: float = 0.1, dtype: Any = flow.float, config: flow.FunctionConfig | None = None
) -> Callable[..., object]:
    """The residual CNN's train step in irflow: stem, block, pool; stem, block, pool; dense to 10 classes.

    Its annotations name the arguments, which is why this module does not postpone annotations.
    """

    @flow.global_function(type="train", function_config=config)
    def resnet_train(
        images: tp.Numpy.Placeholder((BATCH, 1, 28, 28), dtype=dtype),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        x = _residual(_conv_bn(images, 16, "stem1"), 16, "block1")
        x = flow.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID", data_format="NCHW")
        x = _residual(_conv_bn(x, 32, "stem2"), 32, "block2")
        x = flow.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID", data_format="NCHW")
        logits = flow.layers.dense(flow.reshape(x, [BATCH, -1]), 10, name="head")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [learning_rate]), momentum=0.9).minimize(loss)
        return loss

    return resnet_train


def torch_resnet() -> Any:
    """The same residual CNN as a torch.nn.Module; `irflow_name` maps its parameter and buffer names to irflow's."""
    from torch import nn

    class ResNetBN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            widths = {"stem1": (1, 16), "block1_a": (16, 16), "block1_b": (16, 16)}
            widths |= {"stem2": (16, 32), "block2_a": (32, 32), "block2_b": (32, 32)}
            self.conv = nn.ModuleDict({k: nn.Conv2d(i, o, 3, padding=1, bias=False) for k, (i, o) in widths.items()})
            self.bn = nn.ModuleDict({k: nn.BatchNorm2d(o, eps=1e-5, momentum=0.1) for k, (_, o) in widths.items()})
            self.head = nn.Linear(32 * 7 * 7, 10)

        def conv_bn(self, x: Any, name: str, relu: bool = True) -> Any:
            y = self.bn[name](self.conv[name](x))
            return nn.functional.relu(y) if relu else y

        def residual(self, x: Any, name: str) -> Any:
            return nn.functional.relu(x + self.conv_bn(self.conv_bn(x, f"{name}_a"), f"{name}_b", relu=False))

        def forward(self, x: Any) -> Any:
            x = nn.functional.max_pool2d(self.residual(self.conv_bn(x, "stem1"), "block1"), 2)
            x = nn.functional.max_pool2d(self.residual(self.conv_bn(x, "stem2"), "block2"), 2)
            return self.head(x.flatten(1))

    return ResNetBN()


def irflow_name(torch_name: str) -> str:
    """`conv.stem1.weight` -> `stem1-weight`, `bn.stem1.running_mean` -> `stem1_bn-moving_mean`, `head.bias` -> `head-bias`."""
    *path, leaf = torch_name.split(".")
    if path[0] == "bn":
        suffix = {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean", "running_var": "moving_variance"}
        return f"{path[1]}_bn-{suffix[leaf]}"
    return f"{path[-1]}-{leaf}"


def torch_device(device: str) -> str:
    """PyTorch's name for irflow's device kind."""
    return "cuda" if device == "gpu" else "cpu"


def torch_steppers(device: str = "cpu") -> dict[str, Callable[..., object]] | None:
    """PyTorch's train steps; on "gpu" (CUDA) each returns the loss's value, which waits for the step to finish,
    as irflow's call does when it hands back its loss."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    lenet = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, 10),
    )  # fmt: skip

    def stepper(model: nn.Module) -> Callable[..., object]:
        model = model.to(torch_device(device))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step(x: torch.Tensor, y: torch.Tensor) -> object:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss.item() if device == "gpu" else loss

        return step

    return {MLP: stepper(mlp), "LeNet": stepper(lenet), RESNET: stepper(torch_resnet())}


def set_threads(n: int) -> None:
    flow.config.cpu_thread_num(n)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(n)


def per_call(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """Wall-clock and process CPU seconds per call (CPU time counts every thread, spinning ones included)."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number, (time.process_time() - cpu) / number


# Pause before each timed round: after its last step PyTorch's OpenMP worker spins on for ~10-15 ms
# (4 ms of CPU in each of the first two 5 ms after 50 MLP steps at 2 threads, nothing after 30 ms), on
# the core the next round's other side needs (irflow's 2-thread MLP step then took 2.05 ms instead of 1.57-1.68).
SETTLE_SECONDS = 0.05


def best_alternating(calls: list[Callable[[], object]], number: int, rounds: int) -> list[tuple[float, float]]:
    """Best wall-clock and best CPU time per call of each call, measured in alternation (a round: each call `number` times)."""
    for fn in calls:
        fn()
    best = [(float("inf"), float("inf"))] * len(calls)
    for _ in range(rounds):
        for i, fn in enumerate(calls):
            time.sleep(SETTLE_SECONDS)
            wall, cpu = per_call(fn, number)
            best[i] = (min(best[i][0], wall), min(best[i][1], cpu))
    return best


def inputs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    flat = rng.random((BATCH, 784), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    images = flat.reshape(BATCH, 1, 28, 28)
    return {MLP: (flat, labels), "LeNet": (images, labels), RESNET: (images, labels)}


def mlp_gemm_floor() -> Callable[[], object]:
    """The MLP step's two 100x784x512 GEMMs (dense1 forward and its weight gradient) through irflow's matmul kernel.

    No step can take less than these at this BLAS speed, whatever else it fuses: the floor under the MLP goal.
    The kernel is the step's own (split over irflow's threads when there are several, BLAS on one thread):
    numpy's GEMMs on several OpenBLAS threads would leave OpenBLAS's spare thread spinning for ~0.1 s after
    each, on a core the next round's steps need.
    """
    rng = np.random.default_rng(1)
    x, w = rng.random((BATCH, 784), dtype=np.float32), rng.random((784, 512), dtype=np.float32)
    dh, h, dw = rng.random((BATCH, 512), dtype=np.float32), np.empty((BATCH, 512), np.float32), np.empty_like(w)
    matmul = get_kernel("matmul")
    forward, weight_grad = matmul(np, {}, [x, w], [h]), matmul(np, {"transpose_a": True}, [x, dh], [dw])

    def gemms() -> None:
        threads.apply()
        forward()
        weight_grad()

    return gemms


def torch_gemm_floor() -> Callable[[], object]:
    """The same two GEMMs through PyTorch's `torch.mm` on its own threads: the part of PyTorch's MLP step that
    no framework overhead adds to. Where they alone take 0.6 of its step, the MLP goal asks irflow's whole step
    to take no longer than PyTorch's GEMMs do."""
    import torch

    rng = np.random.default_rng(1)
    x, w = (torch.from_numpy(rng.random(shape, dtype=np.float32)) for shape in ((BATCH, 784), (784, 512)))
    dh, h, dw = torch.from_numpy(rng.random((BATCH, 512), dtype=np.float32)), torch.empty(BATCH, 512), torch.empty(784, 512)

    def gemms() -> None:
        torch.mm(x, w, out=h)
        torch.mm(x.t(), dh, out=dw)

    return gemms


def compare(thread_counts: list[int], rounds: int, measured: bool, device: str = "cpu") -> None:
    ours, theirs, data = irflow_jobs(measured, device), torch_steppers(device), inputs()
    numbers = {MLP: 50, "LeNet": 5, RESNET: 5} if device == "cpu" else {MLP: 50, "LeNet": 50, RESNET: 50}
    if device == "gpu":
        print("first call of each irflow job (compile, variables, first step):")
        for name, job in ours.items():
            start = time.perf_counter()
            job(*data[name])
            print(f"  {name:<16}{(time.perf_counter() - start) * 1e3:>9.1f}ms")
    print("wall-clock ms per step (the goal's measure), then CPU ms per step of the whole process (all its threads)")
    wall = f"{'threads':<8}{'model':<16}{'irflow':>11}{'PyTorch':>11}{'ratio':>8}{'goal':>7}  met"
    print(f"{wall}{'CPU irflow':>12}{'PyTorch':>9}{'ratio':>7}")
    for n in thread_counts:
        set_threads(n)
        for name, job in ours.items():
            x, y = data[name]
            mine: Callable[[], object] = lambda job=job, x=x, y=y: job(x, y)  # noqa: E731
            if theirs is None:
                ((t, _),) = best_alternating([mine], numbers[name], rounds)
                print(f"{n:<8}{name:<16}{t * 1e3:>9.2f}ms   (PyTorch not installed: no ratio)")
                continue
            import torch

            where = torch_device(device)
            tx, ty = torch.from_numpy(x).to(where), torch.from_numpy(y.astype(np.int64)).to(where)
            other: Callable[[], object] = lambda step=theirs[name], tx=tx, ty=ty: step(tx, ty)  # noqa: E731
            floor = [mlp_gemm_floor(), torch_gemm_floor()] if name == MLP and device == "cpu" else []
            (t_ours, cpu_ours), (t_theirs, cpu_theirs), *gemms = best_alternating(
                [mine, other, *floor], numbers[name], rounds
            )
            ratio = t_ours / t_theirs
            met = "yes" if ratio <= GOALS[name] else "NO"
            print(
                f"{n:<8}{name:<16}{t_ours * 1e3:>9.2f}ms{t_theirs * 1e3:>9.2f}ms{ratio:>7.2f}x{GOALS[name]:>6.1f}x  {met:<3}"
                f"{cpu_ours * 1e3:>10.1f}ms{cpu_theirs * 1e3:>7.1f}ms{cpu_ours / cpu_theirs:>6.2f}x"
            )
            for label, (t_gemm, cpu_gemm), whose in zip(FLOORS, gemms, ("irflow's matmul kernel", "torch.mm")):
                print(
                    f"{'':<8}{label:<16}{t_gemm * 1e3:>9.2f}ms{'':>11}{t_gemm / t_theirs:>7.2f}x"
                    f"{'':>16}{cpu_gemm * 1e3:>10.1f}ms{'':>9}{cpu_gemm / cpu_theirs:>6.2f}x"
                    f"  (its two {BATCH}x784x512 GEMMs alone, {whose})"
                )


def profile(thread_counts: list[int], rounds: int, measured: bool, top: int = 12) -> None:
    """Process CPU ms and wall ms per kernel kind of each irflow step, the least of `rounds` steps per kernel, largest first.

    CPU time counts every thread of the process, so a kernel split over n threads shows up to n times its
    wall time; wall time is what the step waits for.
    """
    from irflow.runtime.executor import Executor

    spent: dict[tuple[str, int], tuple[float, float]] = {}
    build = Executor.step

    def timed(self: Executor, op: Any, *args: Any) -> Callable[[], None] | None:
        run = build(self, op, *args)
        if run is None:  # the workspace is being sized: this kernel is built again on it
            return None
        key = (getattr(op, "kernel", None) and op.kernel.data) or op.name, id(op)
        cpu, wall = time.process_time, time.perf_counter

        def step() -> None:
            start, start_wall = cpu(), wall()
            run()
            least = spent.get(key, (float("inf"), float("inf")))
            spent[key] = (min(least[0], cpu() - start), min(least[1], wall() - start_wall))

        return step

    Executor.step = timed  # type: ignore[method-assign]
    try:
        jobs, data = irflow_jobs(measured), inputs()
        for n in thread_counts:
            set_threads(n)
            for name, job in jobs.items():
                spent.clear()
                for _ in range(rounds + 1):
                    job(*data[name])
                kinds: dict[str, list[tuple[float, float]]] = {}
                for (kind, _), t in spent.items():
                    kinds.setdefault(kind, []).append(t)
                total = sum(c for c, _ in spent.values())
                total_wall = sum(w for _, w in spent.values())
                print(f"\n{n} thread(s), {name}: {total * 1e3:.1f} ms CPU, {total_wall * 1e3:.1f} ms wall in {len(spent)} kernels"
                      f" (least of {rounds} steps each)")
                for kind, ts in sorted(kinds.items(), key=lambda kv: -sum(c for c, _ in kv[1]))[:top]:
                    cpu_ms, wall_ms = sum(c for c, _ in ts) * 1e3, sum(w for _, w in ts) * 1e3
                    print(f"  {kind:<36}{len(ts):>4} x {cpu_ms:>8.2f} ms CPU {cpu_ms / total / 1e3:>6.1%} {wall_ms:>8.2f} ms wall")
    finally:
        Executor.step = build  # type: ignore[method-assign]


def contention(thread_counts: list[int], rounds: int, measured: bool) -> None:
    """irflow steps/s per thread count, alone and beside one busy process (the benchmark's own)."""
    jobs, data = irflow_jobs(measured), inputs()
    print(f"{'threads':<8}{'model':<16}{'quiet':>12}{'1 busy proc':>14}")
    for n in thread_counts:
        set_threads(n)
        for name, job in jobs.items():
            x, y = data[name]
            number = 50 if name.startswith("MLP") else 5
            ((quiet, _),) = best_alternating([lambda job=job, x=x, y=y: job(x, y)], number, rounds)
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # one core's worth of spinning
            try:
                time.sleep(0.2)
                ((busy, _),) = best_alternating([lambda job=job, x=x, y=y: job(x, y)], number, rounds)
            finally:
                spinner.kill()
                spinner.wait()
            print(f"{n:<8}{name:<16}{1 / quiet:>9.1f}/s {1 / busy:>11.1f}/s")


def child(args: argparse.Namespace) -> None:
    counts = [int(n) for n in args.threads.split(",")]
    set_threads(counts[0])
    for info in threads.blas_info():
        print(f"numpy BLAS: {info['internal_api']} {info['version']}, kernel {info.get('architecture')}")
    print("forced: " + (", ".join(f"{v}={os.environ[v]}" for v in FORCED_BLAS_VARIABLES if v in os.environ) or "none"))
    measured = not args.heuristic
    print("irflow's convolution algorithms: " + ("measured per shape and thread count" if measured else "its heuristics"))
    if args.profile:
        profile(counts, args.rounds, measured)
        return
    if args.device == "gpu":
        from irflow.runtime import backend

        gpu = backend.gpu_module()
        print(f"GPU: {gpu.cuda.runtime.getDeviceProperties(0)['name'].decode()}, cupy {gpu.__version__}, batch {BATCH}")
    compare(counts, args.rounds, measured, args.device)
    if args.busy:
        contention(counts, args.rounds, measured)


def main() -> None:
    global BATCH  # --batch: the jobs and inputs are made with it
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; each side keeps its best")
    parser.add_argument("--busy", action="store_true", help="also measure steps/s beside a competing busy process")
    parser.add_argument("--profile", action="store_true", help="CPU and wall time per kernel kind of irflow's steps instead")
    parser.add_argument("--env", choices=("both", "as-is", "unset"), default="both")
    parser.add_argument(
        "--heuristic", action="store_true", help="irflow's convolutions by its heuristics, not measured on this machine"
    )
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="gpu: irflow on cupy against PyTorch CUDA")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"images per step (default {BATCH})")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    BATCH = args.batch
    if args.device == "gpu":
        from irflow.runtime import backend

        if backend.gpu_module() is None:
            parser.error("--device gpu needs cupy and a usable CUDA device; none was found")
    if args.child:
        child(args)
        return
    settings = {
        "as-is": dict(os.environ),
        "unset": {k: v for k, v in os.environ.items() if k not in FORCED_BLAS_VARIABLES},
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average (1 min) at start: {load:.2f} on {len(os.sched_getaffinity(0))} cores")
    for name, env in settings.items():
        if args.env not in ("both", name):
            continue
        print(f"\n== environment {name}" + (f" (env -u {' -u '.join(FORCED_BLAS_VARIABLES)})" if name == "unset" else ""))
        sys.stdout.flush()
        command = [sys.executable, __file__, "--child", "--threads", args.threads, "--rounds", str(args.rounds)]
        command += ["--device", args.device, "--batch", str(args.batch)]
        flags = [flag for flag, on in (("--busy", args.busy), ("--profile", args.profile), ("--heuristic", args.heuristic)) if on]
        subprocess.run(command + flags, env=env, check=True)


if __name__ == "__main__":
    main()
