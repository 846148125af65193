"""An MLP trained with OneFlow's older API, as the 0.2-era documentation writes programs.

The function config carries the optimizer (`config.train.primary_lr`,
`model_update_conf`), `flow.losses.add_loss` marks the loss, parameters are
declared with `flow.FixedTensorDef` defaults, and jobs without a return
annotation return futures: `.async_get(handler)` while training, `.get()`
while evaluating. Saves a checkpoint for examples/older_api_eval.py.

    python examples/older_api_train.py [CHECKPOINT_DIR]      (IRFLOW_EPOCHS, default 1)
"""

import os
import sys
import warnings

import numpy as np
from models import mlp

import irflow as flow

warnings.simplefilter("ignore", DeprecationWarning)  # the older API is deprecated, in OneFlow too

BATCH_SIZE = 100
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "1"))

flow.config.enable_legacy_model_io(False)
flow.config.gpu_device_num(1)
flow.config.enable_debug_mode(False)


def train_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(0.05)
    config.train.model_update_conf({"momentum_conf": {"beta": 0.9}})
    return config


@flow.global_function(train_config())
def train_step(images=flow.FixedTensorDef((BATCH_SIZE, 1, 28, 28)),
               labels=flow.FixedTensorDef((BATCH_SIZE,), dtype=flow.int32)):
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
    flow.losses.add_loss(loss)
    return loss


@flow.global_function(flow.function_config())
def predict(images=flow.FixedTensorDef((BATCH_SIZE, 1, 28, 28))):
    return {"classes": flow.math.argmax(mlp(images), axis=1)}


step_losses = []


def record(loss):
    step_losses.append(float(loss.mean()))
    if len(step_losses) % 20 == 1:
        print(f"step {len(step_losses)}: loss {step_losses[-1]:.3f}")


if __name__ == "__main__":
    flow.train.CheckPoint().init()
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    for epoch in range(EPOCHS):
        for images, labels in zip(train_images, train_labels):
            train_step(images, labels).async_get(record)
    right = sum(int(np.sum(predict(images).get()["classes"] == labels)) for images, labels in zip(test_images, test_labels))
    print("accuracy: {:.1f}%".format(right * 100 / test_labels.size))
    flow.train.CheckPoint().save(sys.argv[1] if len(sys.argv) > 1 else "./older_api_model")
