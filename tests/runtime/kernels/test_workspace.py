"""Kernels built on one shared workspace (kernels/workspace.py), as an executor builds them, against PyTorch.

Each kernel's transient scratch overlaps every other kernel's, so a kernel that kept something there from one
run to the next (a padding border, a weight copy made once) would read what another kernel wrote: the kernels
run in alternation on fresh data, each result checked against torch every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from irflow.runtime import threads
from irflow.runtime.kernels import Run, get_kernel, workspace

torch = pytest.importorskip("torch")
F = torch.nn.functional

Make = Callable[[np.random.Generator], tuple[list[np.ndarray], np.ndarray]]


def _conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: int, pad: int) -> list[tuple[str, dict[str, Any], Make]]:
    """conv2d and its two gradients at one geometry, each with the torch result of fresh operands."""
    attrs = {"strides": (stride, stride), "pads": (pad,) * 4, "dilations": (1, 1), "groups": 1}
    t = torch.from_numpy

    def forward(rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        return [x, w], F.conv2d(t(x), t(w), stride=stride, padding=pad).numpy()

    def grads(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, torch.Tensor, torch.Tensor]:
        x = torch.tensor(rng.standard_normal(x_shape), requires_grad=True)
        w = torch.tensor(rng.standard_normal(w_shape), requires_grad=True)
        y = F.conv2d(x, w, stride=stride, padding=pad)
        dy = rng.standard_normal(tuple(y.shape))
        y.backward(t(dy))
        return x.detach().numpy(), dy, x.grad, w

    def grad_input(rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
        _, dy, dx, w = grads(rng)
        return [dy, w.detach().numpy()], dx.numpy()

    def grad_filter(rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
        x, dy, _, w = grads(rng)
        return [dy, x], w.grad.numpy()

    return [("conv2d", attrs, forward), ("conv2d_grad_input", attrs, grad_input), ("conv2d_grad_filter", attrs, grad_filter)]


def _max_pool_grad(rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    x = torch.tensor(rng.standard_normal((3, 4, 7, 7)), requires_grad=True)
    y = F.max_pool2d(x, 3, 2, padding=1)
    dy = rng.standard_normal(tuple(y.shape))
    y.backward(torch.from_numpy(dy))
    return [dy, x.detach().numpy(), y.detach().numpy()], x.grad.numpy()


def _momentum(rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """ins (w, g, m, lr); the expected w after the update (w and m are updated in place: outs are ins)."""
    w, g, m = (rng.standard_normal((64, 33)) for _ in range(3))
    lr = np.array(0.1)
    return [w, g, m, lr], w + (0.9 * m - 0.1 * (g + 0.01 * w))


KERNELS: list[tuple[str, dict[str, Any], Make]] = [
    *_conv((4, 3, 9, 9), (5, 3, 3, 3), 2, 1),  # im2col: a padded input whose zero borders are kept
    *_conv((2, 16, 8, 8), (16, 16, 3, 3), 1, 1),  # Winograd forward, correlation input gradient
    *_conv((3, 6, 12, 12), (8, 6, 5, 5), 1, 2),  # im2col with the widest columns here
    ("max_pool2d_grad", {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}, _max_pool_grad),
    ("momentum_update", {"beta": 0.9, "weight_decay": 0.01}, _momentum),
]


def _build(ws: workspace.Workspace, kernel: tuple[str, dict[str, Any], Make], ins: list[np.ndarray], out: np.ndarray) -> tuple[Run, workspace.Claim]:
    name, attrs, _ = kernel
    outs = [ins[0], ins[2]] if name == "momentum_update" else [out]
    with workspace.building(workspace.Claim(ws)) as claim:
        return get_kernel(name)(np, attrs, ins, outs), claim


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def thread_count(request: pytest.FixtureRequest) -> Any:
    threads.set_cpu_thread_num(request.param)
    yield request.param
    threads.set_cpu_thread_num(None)


def test_kernels_on_one_workspace_match_torch_run_in_alternation(without_in_place: None, thread_count: int) -> None:
    rng = np.random.default_rng(0)
    operands = [make(rng) for _, _, make in KERNELS]
    arrays = [([a.copy() for a in ins], np.full(expected.shape, np.nan)) for ins, expected in operands]
    ws = workspace.Workspace(np)
    sized = [_build(ws, kernel, ins, out)[1] for kernel, (ins, out) in zip(KERNELS, arrays)]  # the executor's first pass
    assert all(claim.took for claim in sized)
    ws.allocate()
    runs = [_build(ws, kernel, ins, out)[0] for kernel, (ins, out) in zip(KERNELS, arrays)]
    for round_ in range(3):
        for (name, _, make), run, (ins, out) in zip(KERNELS, runs, arrays):
            given, expected = make(rng)
            for array, value in zip(ins, given):
                array[...] = value
            run()
            got = ins[0] if name == "momentum_update" else out
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10, err_msg=f"{name}, round {round_}")
    lane_regions = len(ws.regions) - 1  # a lane's region per thread that ran one
    assert lane_regions == thread_count


def test_workspace_is_the_largest_kernel_need_not_the_sum(without_in_place: None) -> None:
    rng = np.random.default_rng(1)
    arrays = [([a.copy() for a in ins], np.empty(expected.shape)) for ins, expected in (make(rng) for _, _, make in KERNELS)]
    alone = []
    for kernel, (ins, out) in zip(KERNELS, arrays):
        own = workspace.Workspace(np)
        _build(own, kernel, ins, out)
        alone.append(own.needs)
    shared = workspace.Workspace(np)
    for kernel, (ins, out) in zip(KERNELS, arrays):
        _build(shared, kernel, ins, out)
    shared.allocate()
    largest = [max(needs[k] for needs in alone) for k in (0, 1)]
    assert shared.needs == largest
    assert shared.nbytes == sum(largest) < sum(map(sum, alone)) / 2


def test_a_kernel_s_arrays_never_overlap_and_those_past_the_region_are_its_own() -> None:
    ws = workspace.Workspace(np)
    with workspace.building(workspace.Claim(ws)):
        workspace.scratch(np, (10,), np.float64)
        with workspace.lane(0):
            workspace.scratch(np, (3, 2), np.float32)
    ws.allocate()
    with workspace.building(workspace.Claim(ws)):
        a = workspace.scratch(np, (10,), np.float64)
        with workspace.lane(0):
            b = workspace.scratch(np, (3, 2), np.float32)
            later = workspace.scratch(np, (1,), np.float32)  # more than any kernel asked while sizing
        with workspace.lane(1):
            c = workspace.scratch(np, (3, 2), np.float32)  # a lane not seen while sizing: its region, as large as lane 0's
    assert np.shares_memory(a, ws.region(0)) and np.shares_memory(b, ws.region(1)) and np.shares_memory(c, ws.region(2))
    assert not any(np.shares_memory(later, region) for region in ws.regions)
    assert a.ctypes.data % 64 == b.ctypes.data % 64 == 0
    outside = workspace.scratch(np, (4,), np.int8)  # no kernel being built: an array of its own
    assert not any(np.shares_memory(outside, region) for region in ws.regions)
