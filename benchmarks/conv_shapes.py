"""irflow's convolution kernels alone against PyTorch's, at one thread, for few-row and many-row shapes.

M = N x oh x ow, the rows of the im2col GEMM: late ResNet stages at small images or batches have few
rows against large weights, where every per-call cost of the weight's size shows (kernels/conv.py's
`_InPlace`); LeNet's and the residual CNN's convolutions of benchmarks/train_step.py (batch 100) have
many. Each shape runs irflow's `conv2d`, and its `conv2d_grad_input` plus `conv2d_grad_filter` (the
backward), as its heuristics choose them, and PyTorch's `torch.nn.functional.conv2d` forward and its
backward through autograd, float32, with one thread on both sides (BLAS held at one by threadpoolctl,
as irflow's executor runs kernels; `torch.set_num_threads(1)`). The two sides alternate, round by
round, each keeping its least time, so load from other processes hits both alike; the ratios are
irflow / PyTorch from the same run.

    python benchmarks/conv_shapes.py                  # every shape, 5 rounds
    python benchmarks/conv_shapes.py --rows few --rounds 9
"""

import argparse
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from irflow.runtime.kernels import get_kernel

# name -> (x shape, w shape, stride, pad): symmetric pads, which PyTorch's conv2d takes as they are.
FEW_ROWS = {
    "512->512 3x3 at 1x1, N=2": ((2, 512, 1, 1), (512, 512, 3, 3), 1, 1),
    "1024->2048 1x1 /2 at 2x2, N=2": ((2, 1024, 2, 2), (2048, 1024, 1, 1), 2, 0),
    "512->2048 1x1 at 1x1, N=2": ((2, 512, 1, 1), (2048, 512, 1, 1), 1, 0),
    "64->64 3x3 at 8x8, N=2": ((2, 64, 8, 8), (64, 64, 3, 3), 1, 1),
    "256->256 3x3 at 4x4, N=8": ((8, 256, 4, 4), (256, 256, 3, 3), 1, 1),
    "256->1024 1x1 at 4x4, N=32": ((32, 256, 4, 4), (1024, 256, 1, 1), 1, 0),
}
MANY_ROWS = {
    "LeNet conv2 32->64 5x5 at 14x14, N=100": ((100, 32, 14, 14), (64, 32, 5, 5), 1, 2),
    "ResNet-BN 16->16 3x3 at 28x28, N=100": ((100, 16, 28, 28), (16, 16, 3, 3), 1, 1),
    "ResNet-BN 32->32 3x3 at 14x14, N=100": ((100, 32, 14, 14), (32, 32, 3, 3), 1, 1),
}
SHAPES = {"few": FEW_ROWS, "many": MANY_ROWS, "all": FEW_ROWS | MANY_ROWS}


def least(run: Callable[[], object], repeats: int) -> float:
    """The least wall time of `repeats` runs, in ms."""
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best * 1e3


def irflow_runs(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dy: np.ndarray) -> tuple[Callable, Callable]:
    """irflow's forward, and its backward (input then filter gradient), built once on bound buffers."""
    attrs = {"strides": (stride, stride), "pads": (pad,) * 4, "dilations": (1, 1), "groups": 1}
    forward = get_kernel("conv2d")(np, attrs, [x, w], [np.empty(dy.shape, np.float32)])
    grad_input = get_kernel("conv2d_grad_input")(np, attrs, [dy, w], [np.empty(x.shape, np.float32)])
    grad_filter = get_kernel("conv2d_grad_filter")(np, attrs, [dy, x], [np.empty(w.shape, np.float32)])

    def backward() -> None:
        grad_input()
        grad_filter()

    return forward, backward


def torch_runs(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dy: np.ndarray) -> tuple[Callable, Callable]:
    """PyTorch's forward, and its backward through autograd (dx and dw) on a graph kept for reuse."""
    import torch

    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tdy = torch.tensor(dy)

    def forward() -> object:
        with torch.no_grad():
            return torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)

    ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)

    def backward() -> None:
        tx.grad = tw.grad = None
        ty.backward(tdy, retain_graph=True)

    return forward, backward


def measure(name: str, shape: tuple, rounds: int, repeats: int) -> None:
    """One shape's row: irflow's and PyTorch's least forward and backward times, and their ratios."""
    x_shape, w_shape, stride, pad = shape
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(x_shape, np.float32), rng.standard_normal(w_shape, np.float32)
    oh, ow = ((size + 2 * pad - k) // stride + 1 for size, k in zip(x_shape[2:], w_shape[2:]))
    dy = rng.standard_normal((x_shape[0], w_shape[0], oh, ow), np.float32)
    sides = {"irflow": irflow_runs(x, w, stride, pad, dy), "torch": torch_runs(x, w, stride, pad, dy)}
    times = {side: [float("inf"), float("inf")] for side in sides}
    for _ in range(rounds):
        for side, runs in sides.items():
            for index, run in enumerate(runs):
                times[side][index] = min(times[side][index], least(run, repeats))
    (fi, bi), (ft, bt) = times["irflow"], times["torch"]
    rows = x_shape[0] * oh * ow
    print(f"{name:40} {rows:6} {fi:9.2f} {ft:9.2f} {fi / ft:6.2f}x {bi:9.2f} {bt:9.2f} {bi / bt:6.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", choices=list(SHAPES), default="all", help="few-row shapes, many-row ones, or both")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per shape")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side and round")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print(f"{'shape':40} {'M':>6} {'irflow':>9} {'torch':>9} {'ratio':>7} {'irflow':>9} {'torch':>9} {'ratio':>7}")
    print(f"{'':40} {'':6} {'forward ms':>27} {'backward (dx + dw) ms':>35}")
    with threadpool_limits(1):
        for name, shape in SHAPES[args.rows].items():
            measure(name, shape, args.rounds, args.repeats)


if __name__ == "__main__":
    main()
