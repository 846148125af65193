"""OneFlow's MLP train job from "Define and call job function", asynchronously (`tp.Callback`).

Prints the mean loss every 20 steps, then the held-out accuracy, and saves a
checkpoint that examples/mlp_predict.py can evaluate.

    python examples/mlp_train.py [CHECKPOINT_DIR]      (IRFLOW_EPOCHS, default 1)
"""

import os
import sys

from models import mlp

import irflow as flow
import irflow.typing as tp

BATCH_SIZE = 100
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "1"))


@flow.global_function(type="train")
def train_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Callback[tp.Numpy]:
    logits = mlp(images)
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


@flow.global_function(type="predict")
def eval_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float)) -> tp.Numpy:
    return flow.math.argmax(mlp(images), axis=1)


g_i = 0
g_losses = []


def cb_print_loss(result: tp.Numpy):
    global g_i
    g_losses.append(float(result.mean()))
    if g_i % 20 == 0:
        print(result.mean())
    g_i += 1


def main():
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    for epoch in range(EPOCHS):
        for i, (images, labels) in enumerate(zip(train_images, train_labels)):
            train_job(images, labels)(cb_print_loss)
    flow.sync_default_session()

    correct = sum(int((eval_job(images) == labels).sum()) for images, labels in zip(test_images, test_labels))
    print("accuracy: {0:.1f}%".format(correct * 100 / test_labels.size))
    flow.checkpoint.save(sys.argv[1] if len(sys.argv) > 1 else "./mlp_models_1")
    print("model saved")


if __name__ == "__main__":
    main()
