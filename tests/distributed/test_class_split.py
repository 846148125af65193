"""Sparse softmax cross-entropy with the logits split over classes (a model-parallel classifier head).

lower-to-physical computes it in stages: each row's max over the device's
classes and its sum of exp, each all-reduced, then each device's part of the
loss (a partial sum) or its chunk of the gradient. The oracles: numpy's
log-sum-exp, PyTorch's cross_entropy and autograd, and the one-device run.
"""

from collections import Counter

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.errors import ExecutionError
from irflow.runtime.spmd import SpmdExecutor
from irflow.runtime.variables import LogicalVariables
from irflow.textir import parse_module


def staged_job(n: int, classes: int, p: int) -> str:
    """Loss and gradient of a cross-entropy whose logits arrive split(1) on p devices, both gathered for the caller."""
    place = f'#job.placement<cpu, ["0:0-{p - 1}"]>'
    x, v = f"tensor<{n}x{classes}xf64>", f"tensor<{n}xf64>"
    sbp = lambda c: f"#job.nd_sbp<[{c}]>"  # noqa: E731
    S1, B, P = sbp("split(1)"), sbp("broadcast"), sbp("partial_sum")
    return f"""
job.func @ce(%x: {x}, %y: tensor<{n}xi32>, %d: {v}) -> ({v}, {x}) attributes {{placement = {place}, arg_sbp = [{S1}, {B}, {B}]}} {{
  %l = job.sparse_softmax_cross_entropy %x, %y {{sbp = {P}, placement = {place}, sbp_in = [{S1}, {B}]}} : ({x}, tensor<{n}xi32>) -> {v} loc("model.py":5:3)
  %lb = job.boxing %l {{src_sbp = {P}, sbp = {B}, placement = {place}}} : ({v}) -> {v}
  %g = job.sparse_softmax_cross_entropy_grad %d, %x, %y {{sbp = {S1}, placement = {place}, sbp_in = [{B}, {S1}, {B}]}} : ({v}, {x}, tensor<{n}xi32>) -> {x} loc("model.py":6:3)
  %gb = job.boxing %g {{src_sbp = {S1}, sbp = {B}, placement = {place}}} : ({x}) -> {x}
  job.return %lb, %gb : {v}, {x}
}}"""


def staged(n: int, classes: int, p: int):
    module = parse_module(staged_job(n, classes, p))
    stages = run_pipeline(module, "lower-to-physical,convert-job-to-buffer,plan-memory")
    ops = Counter(op.name for op in stages["lower-to-physical"].walk())
    return SpmdExecutor(module.body.block.first_op, LogicalVariables((p,))), ops


def reference(x: np.ndarray, y: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    rows = np.arange(len(y))
    softmax = np.exp(x - lse[:, None])
    onehot = np.zeros_like(x)
    onehot[rows, y] = 1
    return lse - x[rows, y], (softmax - onehot) * d[:, None]


def data(n: int, classes: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, classes)) * 4 - 30  # all negative: a padding zero would be the largest "logit"
    return x, rng.integers(0, classes, n).astype(np.int32), rng.standard_normal(n)


@pytest.mark.parametrize("p, classes", [(2, 10), (3, 10), (4, 10), (3, 4), (4, 5)], ids=lambda v: str(v))
def test_staged_loss_and_gradient_match_numpy(p: int, classes: int) -> None:
    """Even and uneven class counts, and so few classes that a device holds only padding (5 over 4: 2, 2, 1, 0)."""
    run, ops = staged(6, classes, p)
    assert ops["job.class_split_max"] == ops["job.class_split_sum_exp"] == 2
    assert ops["job.all_reduce"] == 5  # max and sum for loss and gradient, and the loss's partial sum
    assert "job.all_gather" in ops and "job.sparse_softmax_cross_entropy" not in ops
    x, y, d = data(6, classes, p + classes)
    loss, grad = run([x, y, d])
    want_loss, want_grad = reference(x, y, d)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-15)


def test_staged_loss_and_gradient_match_pytorch() -> None:
    torch = pytest.importorskip("torch")
    x, y, d = data(7, 11, 0)
    run, _ = staged(7, 11, 3)
    loss, grad = run([x, y, d])
    logits = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.cross_entropy(logits, torch.tensor(y, dtype=torch.int64), reduction="none")
    (want * torch.tensor(d)).sum().backward()
    np.testing.assert_allclose(loss, want.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(grad, logits.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_a_label_outside_the_classes_is_a_located_error() -> None:
    run, _ = staged(4, 10, 2)
    x, y, d = data(4, 10, 1)
    y[2] = 10
    with pytest.raises(ExecutionError, match=r"model.py:5:3.*label 10 at position \[2\] is outside \[0, 10\)"):
        run([x, y, d])


# ----------------------------------------------------------------- chosen by sbp-infer for a model-parallel head


def train(devices: int, classes: int, steps: int = 3, split_logits: bool = False):
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)
    config = flow.function_config()
    config.default_data_type(flow.float64)

    @flow.global_function(type="train", function_config=config)
    def job(x: tp.Numpy.Placeholder((8, 6), dtype=flow.float64), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        init = flow.truncated_normal(0.5)
        h = flow.layers.dense(x, 12, activation=flow.math.tanh, kernel_initializer=init, name="hidden")
        logits = flow.layers.dense(h, classes, kernel_initializer=init, name="head", model_distribute=flow.distribute.split(0))
        if split_logits and devices > 1:
            logits = logits.with_distribute(flow.distribute.split(1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(5)
    losses = [job(rng.standard_normal((8, 6)), rng.integers(0, classes, 8).astype(np.int32)) for _ in range(steps)]
    return losses, {k: v.numpy() for k, v in flow.get_all_variables().items()}, job


@pytest.mark.parametrize(
    "devices, classes, split_logits",
    [(2, 48, False), (3, 48, False), (4, 48, False), (3, 40, True), (4, 30, True)],
    ids=["2 devices", "3 devices", "4 devices", "3 devices uneven", "4 devices uneven"],
)
def test_a_model_parallel_head_keeps_its_logits_split_and_trains_as_one_device(devices, classes, split_logits) -> None:
    """The cost model keeps a model-parallel head's logits split: two all_reduces per row cost less than
    gathering the logits. With uneven classes the weight gradient's contraction cannot be partial and the
    plan gathers instead, unless the logits are hinted split(1), as in the uneven cases."""
    want_losses, want_vars, _ = train(1, classes)
    losses, variables, job = train(devices, classes, split_logits=split_logits)
    for a, b in zip(want_losses, losses):
        np.testing.assert_allclose(b, a, rtol=1e-12)
    for name in want_vars:
        np.testing.assert_allclose(variables[name], want_vars[name], rtol=1e-10, atol=1e-14, err_msg=name)
    lowered = job.ir("lower-to-physical")
    assert "job.class_split_cross_entropy " in lowered and "= job.sparse_softmax_cross_entropy " not in lowered
    if classes % devices == 0:  # (uneven, the gradient is cheaper gathered: the staged tests above check it)
        assert "job.class_split_cross_entropy_grad " in lowered and "= job.sparse_softmax_cross_entropy_grad" not in lowered
    chosen = job.ir("sbp-infer")
    ce = next(line for line in chosen.splitlines() if "job.sparse_softmax_cross_entropy " in line)
    assert 'sbp_origin = "cost"' in ce and "sbp = #job.nd_sbp<[partial_sum]>" in ce


# ----------------------------------------------------------------- softmax split along its axis


def softmax_job(n: int, classes: int, p: int) -> str:
    """softmax(x) and its backward for dy, with x and dy split(1) over p devices, gathered for the caller."""
    place = f'#job.placement<cpu, ["0:0-{p - 1}"]>'
    x = f"tensor<{n}x{classes}xf64>"
    S1, B = "#job.nd_sbp<[split(1)]>", "#job.nd_sbp<[broadcast]>"
    return f"""
job.func @softmax(%x: {x}, %dy: {x}) -> ({x}, {x}) attributes {{placement = {place}, arg_sbp = [{S1}, {S1}]}} {{
  %y = job.softmax %x {{axis = 1 : i64, sbp = {S1}, placement = {place}, sbp_in = [{S1}]}} : ({x}) -> {x}
  %dx = job.softmax_grad %dy, %y {{axis = 1 : i64, sbp = {S1}, placement = {place}, sbp_in = [{S1}, {S1}]}} : ({x}, {x}) -> {x}
  %yb = job.boxing %y {{src_sbp = {S1}, sbp = {B}, placement = {place}}} : ({x}) -> {x}
  %db = job.boxing %dx {{src_sbp = {S1}, sbp = {B}, placement = {place}}} : ({x}) -> {x}
  job.return %yb, %db : {x}, {x}
}}"""


@pytest.mark.parametrize("p, classes", [(2, 10), (3, 10), (4, 10), (4, 5)], ids=lambda v: str(v))
def test_softmax_split_along_its_axis_matches_pytorch(p: int, classes: int) -> None:
    torch = pytest.importorskip("torch")
    module = parse_module(softmax_job(5, classes, p))
    stages = run_pipeline(module, "lower-to-physical,convert-job-to-buffer,plan-memory")
    ops = Counter(op.name for op in stages["lower-to-physical"].walk())
    assert ops["job.class_split_softmax"] == ops["job.class_split_dot"] == ops["job.class_split_softmax_grad"] == 1
    assert ops["job.all_reduce"] == 3 and "job.softmax" not in ops and "job.softmax_grad" not in ops
    x, _, _ = data(5, classes, p)
    dy = np.random.default_rng(p).standard_normal((5, classes))
    y, dx = SpmdExecutor(module.body.block.first_op, LogicalVariables((p,)))([x, dy])
    logits = torch.tensor(x, requires_grad=True)
    want = torch.softmax(logits, dim=1)
    (want * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(y, want.detach().numpy(), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(dx, logits.grad.numpy(), rtol=1e-9, atol=1e-15)


def test_mirrored_labels_against_a_class_split_weight_train_as_numpy() -> None:
    """The mirrored view: each device's labels (dynamic rows) against logits that are a weight split over its
    classes. The staged ops relate the labels' rows to the logits' as the cross-entropy did (lowering refused
    the dynamic labels), and a device short of rows is still an error at the loss's line."""
    flow.config.cpu_device_num(2)
    config = flow.function_config()
    config.default_data_type(flow.float64)
    config.default_logical_view(flow.scope.mirrored_view())
    w0 = np.random.default_rng(3).standard_normal((4, 6))

    @flow.global_function(type="train", function_config=config)
    def f(labels: tp.ListNumpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 6), dtype=flow.float64, distribute=flow.distribute.split(1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, w)  # MARK-ce
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
        return loss

    flow.load_variables({"w": w0})
    labels = np.array([5, 0, 2, 3], np.int32)
    loss = f([labels[:2], labels[2:]])
    soft = np.exp(w0 - w0.max(axis=1, keepdims=True))
    soft /= soft.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(loss, -np.log(soft[np.arange(4), labels]), rtol=1e-12)
    grad = (soft - np.eye(6)[labels]) / 4  # the loss's seed: one over its 4 rows
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w0 - 0.5 * grad, rtol=1e-12)
    with pytest.raises(ExecutionError, match="static 4") as err:
        f([labels[:2], labels[2:3]])
    assert "MARK-ce" in open(__file__).read().splitlines()[err.value.location.line - 1]
