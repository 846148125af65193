"""fuse-batch-norm on traced jobs: which batch normalizations fuse, and that a fused train step matches PyTorch.

tests/test_resnet_parity.py checks the benchmark's residual CNN, all six of
its batch normalizations fused, against PyTorch over three steps.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.dialects import buffer

# In float64 the first loss agrees to the last bit; later ones carry irflow's learning rate, a float32
# scalar (0.1 is 0.1 + 1.5e-9 there), into the updates: ~1e-9 apart.
RTOL = 1e-7


def kernel_names(job: object) -> Counter[str]:
    program = job.executable().program  # type: ignore[attr-defined]
    return Counter(op.kernel.data for op in program.body.block.ops if isinstance(op, buffer.KernelOp))


def conv_bn_job(relu: bool, residual: bool, read_twice: bool = False) -> object:
    flow.clear_default_session()

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((4, 3, 5, 5), dtype=flow.double)) -> tp.Numpy:
        c = flow.layers.conv2d(x, 6, 3, padding="SAME", use_bias=False, name="conv")
        normalized = flow.layers.batch_normalization(c, axis=1, momentum=0.9, epsilon=1e-3, name="bn")
        y = flow.nn.relu(normalized) if relu else normalized
        if residual:  # dy of the normalization also flows to the skip path
            y = flow.nn.relu(y + flow.layers.conv2d(x, 6, 1, use_bias=False, name="skip"))
        loss = flow.math.reduce_mean(flow.math.square(y))
        if read_twice:  # the normalization's output read before the relu too: the relu does not fuse, the rest does
            loss = loss + flow.math.reduce_mean(normalized)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return step


@pytest.mark.parametrize("relu,residual", [(True, False), (False, True), (True, True)])
def test_forward_and_backward_become_three_kernels(relu: bool, residual: bool) -> None:
    names = kernel_names(conv_bn_job(relu, residual))
    assert names["batch_norm_stats"] == names["batch_norm"] == names["batch_norm_grad"] == 1
    assert not {"rsqrt", "sub", "neg", "reduce_sum"} & set(names)


@pytest.mark.parametrize("relu,residual", [(True, False), (False, True), (True, True)])
def test_fused_step_matches_pytorch(relu: bool, residual: bool) -> None:
    torch = pytest.importorskip("torch")
    job = conv_bn_job(relu, residual)
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 5))
    job.executable()  # creates the variables: gamma ones, beta zeros, momenta zeros, as torch's
    start = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    weight = torch.tensor(start["conv-weight"], requires_grad=True)
    skip = torch.tensor(start["skip-weight"], requires_grad=True) if residual else None
    gamma = torch.ones(6, dtype=torch.float64, requires_grad=True)
    beta = torch.zeros(6, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([weight, gamma, beta] + ([skip] if residual else []), lr=0.1, momentum=0.9)
    running = (torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64))
    for _ in range(3):
        loss = job(x)
        opt.zero_grad()
        c = torch.nn.functional.conv2d(torch.tensor(x), weight, padding=1)
        y = torch.nn.functional.batch_norm(c, *running, gamma, beta, training=True, momentum=0.1, eps=1e-3)
        y = torch.relu(y) if relu else y
        y = torch.relu(y + torch.nn.functional.conv2d(torch.tensor(x), skip)) if residual else y
        want = (y**2).mean()
        want.backward()
        opt.step()
        np.testing.assert_allclose(loss, want.item(), rtol=RTOL)
    got = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    for name, value in {"conv-weight": weight, "bn-gamma": gamma, "bn-beta": beta,
                        "bn-moving_mean": running[0], "bn-moving_variance": running[1]}.items():  # fmt: skip
        np.testing.assert_allclose(got[name], value.detach().numpy(), rtol=RTOL, atol=1e-8)


def test_a_second_reader_before_the_relu_keeps_the_relu() -> None:
    names = kernel_names(conv_bn_job(relu=True, residual=False, read_twice=True))
    assert names["batch_norm"] == names["batch_norm_grad"] == 1
    assert names["relu"] == 1 and names["relu_grad"] == 1


def test_normalizing_a_job_input_is_left_unfused() -> None:
    """Nothing differentiates the input, so the backward has no dx and is not the one the pass knows."""
    flow.clear_default_session()

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((4, 3, 2, 2), dtype=flow.float)) -> tp.Numpy:
        y = flow.layers.batch_normalization(x, axis=1, name="bn")
        loss = flow.math.reduce_mean(flow.math.square(y))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    names = kernel_names(step)
    assert "batch_norm" not in names and names["rsqrt"] == 1


def test_ops_with_different_attributes_are_left_alone() -> None:
    """An op of the composite with an attribute the others lack (a placement: other devices) keeps every op."""
    from pathlib import Path

    from irflow.passes.fuse_batch_norm import FuseBatchNormPass
    from irflow.textir import parse_module

    lit = Path(__file__).parent.parent / "lit" / "passes" / "fuse_batch_norm.mlir"
    program = lit.read_text().split("// -----")[0]
    rsqrt = next(line for line in program.splitlines() if '"rsqrt"' in line)
    for text, fused in ((program, True), (program.replace(rsqrt, rsqrt + ' attributes {tag = "elsewhere"}'), False)):
        module = parse_module(text)
        FuseBatchNormPass().apply(None, module)  # type: ignore[arg-type]
        names = {op.kernel.data for op in module.walk() if isinstance(op, buffer.KernelOp)}
        assert ("batch_norm_grad" in names) == fused and ("rsqrt" in names) != fused
