"""Train jobs on N simulated devices against the same job on one device.

The same job function, changed only by configuration and SBP hints, must give
the one-device losses at every step and the one-device variables after
several steps: the compiler's own plan, data parallel (checked to be the
plan), model parallel over the output features (split(0) of the (units, in)
weight), over the input features (split(1): partial sums), hybrid on one mesh
axis and on a 2x2 hierarchy, and the mirrored view. The one-device run is itself checked against PyTorch in
tests/test_torch_parity.py.
"""

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.dialects import job
from irflow.textir import parse_module

BATCH, STEPS = 12, 3
TOLERANCE = {flow.float64: 1e-5, flow.float32: 1e-4}

S0, S1, B = flow.distribute.split(0), flow.distribute.split(1), flow.distribute.broadcast()
# hints per mode: {layer name: model_distribute}; "images": the input's distribute
# "auto" is configuration alone: on these small layers the cost model computes the dense layers whole
# on every device (LeNet's convolutions run data parallel); test_data_parallel_plan uses a larger batch.
MODES: dict[str, dict[str, object]] = {
    "auto": {},
    "model-rows": {"dense1": S0},  # the hidden layer's weight split over its output features
    "model-cols": {"dense2": S1},  # the output layer's weight split over its input features: partial sums
    "hybrid": {"flat": S0, "dense2": S0},  # split batch into dense1, model parallel in dense2
}
# 2x2: data parallel on mesh axis 0, model parallel on axis 1
HYBRID_2D = {"images": [S0, B], "flat": [S0, B], "dense1": [B, S0], "dense2": [B, S1]}


def mlp(images: flow.Blob, hints: dict[str, object], hidden: int = 12) -> flow.Blob:
    """The documentation's MLP (examples/models.py), narrower: flatten, dense(relu), dense(10)."""
    initializer = flow.truncated_normal(0.1)
    flat = flow.reshape(images, [images.shape[0], -1])
    if "flat" in hints:
        flat = flat.with_distribute(hints["flat"])
    h = flow.layers.dense(
        flat, hidden, activation=flow.nn.relu, kernel_initializer=initializer, name="dense1",
        model_distribute=hints.get("dense1"),
    )  # fmt: skip
    logits = flow.layers.dense(h, 10, kernel_initializer=initializer, name="dense2", model_distribute=hints.get("dense2"))
    return logits.with_distribute(hints["logits"]) if "logits" in hints else logits


def lenet(images: flow.Blob, hints: dict[str, object]) -> flow.Blob:
    """The documentation's LeNet (examples/models.py), smaller and without dropout."""
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(images, 4, 3, padding="SAME", activation=flow.nn.relu, name="conv1",
                               kernel_initializer=initializer)  # fmt: skip
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", data_format="NCHW")
    conv2 = flow.layers.conv2d(pool1, 8, 3, padding="SAME", activation=flow.nn.relu, name="conv2",
                               kernel_initializer=initializer)  # fmt: skip
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", data_format="NCHW")
    return mlp(pool2, hints)


def train_job(model: Callable, hints: dict[str, object], dtype, config, image_shape, mirrored_devices: int = 0):
    placeholder = tp.ListNumpy.Placeholder if mirrored_devices else tp.Numpy.Placeholder
    batch = image_shape[0] // max(mirrored_devices, 1)

    @flow.global_function(type="train", function_config=config)
    def train(
        images: placeholder((batch, *image_shape[1:]), dtype=dtype),
        labels: placeholder((batch,), dtype=flow.int32),
    ) -> tp.ListNumpy:
        if "images" in hints:
            images = images.with_distribute(hints["images"])
        logits = model(images, hints)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return train


def batches(image_shape, dtype, steps: int = STEPS):
    rng = np.random.default_rng(7)
    return [
        (rng.random(image_shape).astype(dtype.np_dtype), rng.integers(0, 10, image_shape[0]).astype(np.int32))
        for _ in range(steps)
    ]


def run(model, hints, dtype, image_shape, devices=1, hierarchy=None, mirrored=False):
    """Losses of every step (whole batches), the variables after the last, and the job, on `devices` devices."""
    flow.clear_default_session()
    config = flow.function_config()
    config.default_data_type(dtype)
    if hierarchy:
        config.default_placement_scope(flow.scope.placement("cpu", f"0:0-{devices - 1}", hierarchy))
    else:
        flow.config.cpu_device_num(devices)
    if mirrored:
        config.default_logical_view(flow.scope.mirrored_view())
    train = train_job(model, hints, dtype, config, image_shape, devices if mirrored else 0)
    losses = []
    for images, labels in batches(image_shape, dtype):
        if mirrored:
            per_device = train(np.array_split(images, devices), np.array_split(labels, devices))
            assert len(per_device) == devices
            losses.append(np.concatenate(per_device))
        else:
            (loss,) = train(images, labels)
            losses.append(loss)
    return losses, {name: v.numpy() for name, v in flow.get_all_variables().items()}, train


def assert_same(reference, other, dtype, what: str) -> None:
    rtol = TOLERANCE[dtype]
    for step, (want, got) in enumerate(zip(reference[0], other[0])):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2, err_msg=f"{what}: loss at step {step}")
    assert reference[1].keys() == other[1].keys()
    for name, want in reference[1].items():
        np.testing.assert_allclose(other[1][name], want, rtol=rtol, atol=rtol * 1e-2, err_msg=f"{what}: {name}")


MODELS = {"mlp": (mlp, (BATCH, 1, 4, 4)), "lenet": (lenet, (BATCH, 1, 8, 8))}
_references: dict[tuple, tuple] = {}


def reference(model_name: str, dtype) -> tuple:
    key = (model_name, dtype)
    if key not in _references:
        model, shape = MODELS[model_name]
        _references[key] = run(model, {}, dtype, shape)
    return _references[key]


@pytest.mark.parametrize("devices", [2, 3, 4])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_n_devices_train_like_one(model_name, mode, devices):
    model, shape = MODELS[model_name]
    got = run(model, MODES[mode], flow.float64, shape, devices)
    assert_same(reference(model_name, flow.float64), got, flow.float64, f"{model_name} {mode} on {devices}")


@pytest.mark.parametrize("model_name", list(MODELS))
def test_float32_auto_and_model_parallel(model_name):
    model, shape = MODELS[model_name]
    for mode in ("auto", "model-rows"):
        got = run(model, MODES[mode], flow.float32, shape, 4)
        assert_same(reference(model_name, flow.float32), got, flow.float32, f"{model_name} {mode} float32")


def test_hybrid_on_a_2x2_hierarchy():
    model, shape = MODELS["mlp"]
    got = run(model, HYBRID_2D, flow.float64, shape, 4, hierarchy=[2, 2])
    assert_same(reference("mlp", flow.float64), got, flow.float64, "mlp hybrid 2x2")


@pytest.mark.parametrize("devices", [2, 3])
def test_mirrored_view_gives_per_device_results(devices):
    model, shape = MODELS["mlp"]
    got = run(model, {}, flow.float64, shape, devices, mirrored=True)
    assert_same(reference("mlp", flow.float64), got, flow.float64, f"mirrored on {devices}")


@pytest.mark.parametrize("devices", [2, 3, 4])
def test_data_parallel_plan(devices):
    """Batch 120: the plan is plain data parallelism, every gradient all-reduced once."""
    def wide(images, hints):
        return mlp(images, hints, hidden=64)

    shape = (120, 1, 4, 4)
    want = run(wide, {}, flow.float64, shape)
    got = run(wide, {}, flow.float64, shape, devices)
    assert_same(want, got, flow.float64, f"data parallel on {devices}")
    boxing = [op for op in parse_module(got[2].ir("insert-boxing")).walk() if isinstance(op, job.BoxingOp)]
    reduced = [op for op in boxing if str(op.src_sbp.components.data[0]) == "partial_sum"]
    assert len(reduced) == 4 and all("momentum_update" in op.attributes["reason"].data for op in reduced)


def test_uneven_model_splits():
    """10 features over 3 or 4 devices: padded chunks, and no contraction over an uneven split."""
    shape = (BATCH, 1, 4, 4)

    def narrow(images, hints):
        return mlp(images, hints, hidden=10)

    want = run(narrow, {}, flow.float64, shape)
    for devices in (3, 4):
        for hints in ({"dense1": S0}, {"dense2": S1}):
            got = run(narrow, hints, flow.float64, shape, devices)
            assert_same(want, got, flow.float64, f"{hints} on {devices}")


def test_the_documentation_mlp_runs_data_parallel():
    """examples/models.py's MLP as written (784-512-10) on 4 devices, two steps."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
    try:
        from models import mlp as documented
    finally:
        sys.path.pop(0)
    shape = (8, 1, 28, 28)
    results = [run(lambda images, hints: documented(images), {}, flow.float32, shape, n) for n in (1, 4)]
    assert_same(results[0], results[1], flow.float32, "documented MLP on 4 devices")
