"""Data parallelism as "Consistent and mirrored view" describes it, on the devices flow.config names.

The train job takes the mirrored view (one list entry per device, as OneFlow's
mirrored strategy feeds it); the evaluation job keeps the default consistent
view, and a `with flow.scope.mirrored_view()` block shows how a scope
overrides a job's default. Two simulated CPU devices run it: each list holds
one array per device, and the evaluation job's batch is split between them.

    python examples/logical_views.py      (IRFLOW_EPOCHS, default 1)
"""

import os

import numpy as np
from models import mlp

import irflow as flow
import irflow.typing as tp

DEVICES = 2
BATCH_SIZE = 100
PER_DEVICE = BATCH_SIZE // DEVICES
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "1"))

flow.config.enable_legacy_model_io(False)
flow.config.cpu_device_num(DEVICES)


def mirrored_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.default_logical_view(flow.scope.mirrored_view())
    return config


views_seen = {}


@flow.global_function(type="train", function_config=mirrored_config())
def train_job(
    images: tp.ListNumpy.Placeholder((PER_DEVICE, 1, 28, 28), dtype=flow.float),
    labels: tp.ListNumpy.Placeholder((PER_DEVICE,), dtype=flow.int32),
) -> tp.ListNumpy:
    views_seen["train"] = flow.scope.mirrored_view_enabled()
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
    return loss


@flow.global_function(type="predict")
def eval_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float)) -> tp.Numpy:
    views_seen["eval"] = flow.scope.consistent_view_enabled()
    with flow.scope.mirrored_view():
        views_seen["eval scope"] = flow.scope.mirrored_view_enabled()
    return flow.math.argmax(mlp(images), axis=1)


def split(batch):
    return [batch[i * PER_DEVICE:(i + 1) * PER_DEVICE] for i in range(DEVICES)]


if __name__ == "__main__":
    print("views:", views_seen)
    flow.train.CheckPoint().init()
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    for epoch in range(EPOCHS):
        for i, (images, labels) in enumerate(zip(train_images, train_labels)):
            losses = train_job(split(images), split(labels))
            if i % 20 == 0:
                print("loss {:.3f}".format(np.concatenate(losses).mean()))
    right = sum(int(np.sum(eval_job(images) == labels)) for images, labels in zip(test_images, test_labels))
    print("accuracy: {:.1f}%".format(right * 100 / test_labels.size))
