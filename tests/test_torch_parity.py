"""Train steps against PyTorch: same initial weights, same batches, same optimizer.

The OneFlow quick-start MLP and a LeNet (conv 5x5 SAME, max-pool, dense) must
give PyTorch's loss at every step and its parameters after several steps under
SGD with momentum and under Adam: in float64 to rtol 1e-7 (the same arithmetic),
in float32 the losses to rtol 1e-4 and the parameters to rtol 1e-4 under SGD.

Under Adam in float32 each side's parameters are compared with PyTorch's float64
run instead, within ADAM_FLOAT32 of each tensor's largest magnitude: a relu or
max-pool decision that float32 rounding flips sends part of a gradient to
another position, and Adam, which scales every element's step to about the
learning rate whatever its gradient, turns that into a visible move. Whether
one flips is chance: LeNet's weights ended 3.7e-3 (irflow) and 3.7e-7 (PyTorch
float32) from the float64 run with seed 0 on an AMD EPYC Zen 3, and 7.2e-4 and
3.3e-4 with seed 1, 2.6e-4 and 1.2e-4 with seed 3.
"""

import copy  # no `from __future__ import annotations`: the jobs' annotations name their dtype argument

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")
nn = torch.nn

BATCH, STEPS = 16, 4
ADAM_FLOAT32 = 1e-2


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    torch.manual_seed(0)
    yield
    flow.clear_default_session()


def make_optimizers(kind: str):
    if kind == "momentum":
        ours = flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9)
        return ours, lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9)
    ours = flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [1e-3]), do_bias_correction=True)
    return ours, lambda params: torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)


def config_of(dtype: str) -> flow.FunctionConfig:
    config = flow.FunctionConfig()
    config.default_data_type(getattr(flow, dtype))
    return config


def mlp_job(optimizer, dtype: str):
    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(
        images: tp.Numpy.Placeholder((BATCH, 784), dtype=getattr(flow, dtype)),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        hidden = flow.layers.dense(images, 64, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        optimizer.minimize(loss)
        return loss

    model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    names = {"0.weight": "dense1-weight", "0.bias": "dense1-bias", "2.weight": "dense2-weight", "2.bias": "dense2-bias"}
    return train, model, names, (BATCH, 784)


def lenet_job(optimizer, dtype: str):
    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(
        images: tp.Numpy.Placeholder((BATCH, 1, 28, 28), dtype=getattr(flow, dtype)),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        conv1 = flow.layers.conv2d(images, 8, 5, padding="SAME", activation=flow.nn.relu, name="conv1")
        pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        conv2 = flow.layers.conv2d(pool1, 16, 5, padding="SAME", activation=flow.nn.relu, name="conv2")
        pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        flat = flow.reshape(pool2, [BATCH, -1])
        hidden = flow.layers.dense(flat, 32, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        optimizer.minimize(loss)
        return loss

    model = nn.Sequential(
        nn.Conv2d(1, 8, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10),
    )  # fmt: skip
    names = {
        "0.weight": "conv1-weight", "0.bias": "conv1-bias", "3.weight": "conv2-weight", "3.bias": "conv2-bias",
        "7.weight": "dense1-weight", "7.bias": "dense1-bias", "9.weight": "dense2-weight", "9.bias": "dense2-bias",
    }  # fmt: skip
    return train, model, names, (BATCH, 1, 28, 28)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("optimizer_kind", ["momentum", "adam"])
@pytest.mark.parametrize("build", [mlp_job, lenet_job], ids=["mlp", "lenet"])
def test_train_steps_match_pytorch(build, optimizer_kind, dtype, device):
    if device == "gpu":
        flow.config.gpu_device_num(1)  # the jobs name no placement: they take the configured devices
    ours_opt, torch_opt = make_optimizers(optimizer_kind)
    train, model, names, image_shape = build(ours_opt, dtype)
    model = model.to(getattr(torch, dtype))
    exact = copy.deepcopy(model).double()
    flow.load_variables({ours: p.detach().numpy().copy() for theirs, p in model.named_parameters() for ours in [names[theirs]]})
    optimizers = [torch_opt(m.parameters()) for m in (model, exact)]
    rng = np.random.default_rng(0)
    rtol = 1e-7 if dtype == "float64" else 1e-4
    for step in range(STEPS):
        images = rng.random(image_shape).astype(dtype)
        labels = rng.integers(0, 10, BATCH)
        loss = train(images, labels.astype(np.int32))
        torch_losses = []
        for m, opt in zip((model, exact), optimizers):
            opt.zero_grad()
            inputs = torch.from_numpy(images).to(next(m.parameters()).dtype)
            torch_loss = nn.functional.cross_entropy(m(inputs), torch.from_numpy(labels))
            torch_loss.backward()
            opt.step()
            torch_losses.append(torch_loss.item())
        np.testing.assert_allclose(loss.mean(), torch_losses[0], rtol=rtol, err_msg=f"loss at step {step}")
    variables = flow.get_all_variables()
    for (theirs, p), (_, truth) in zip(model.named_parameters(), exact.named_parameters()):
        ours, p, truth = variables[names[theirs]].numpy(), p.detach().numpy(), truth.detach().numpy()
        if dtype == "float32" and optimizer_kind == "adam":
            scale = np.abs(truth).max()
            for who, value in (("irflow", ours), ("PyTorch float32", p)):
                error = np.abs(value - truth).max() / scale
                assert error <= ADAM_FLOAT32, f"{names[theirs]}: {who} {error:.2e} from PyTorch float64"
        else:
            np.testing.assert_allclose(ours, p, rtol=rtol, atol=rtol / 100, err_msg=names[theirs])
