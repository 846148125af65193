"""OneFlow's quick-start LeNet train job, synchronously: `train_job(images, labels)` returns the loss.

    python examples/lenet_train.py [CHECKPOINT_DIR]     (IRFLOW_EPOCHS, default 1)

The saved checkpoint is what examples/lenet_eval.py and lenet_eval_callback.py load.
"""

import os
import sys

from models import lenet

import irflow as flow
import irflow.typing as tp

BATCH_SIZE = 100
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "1"))


@flow.global_function(type="train")
def train_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Numpy:
    with flow.scope.placement("gpu", "0:0"):
        logits = lenet(images, train=True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")

    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


if __name__ == "__main__":
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE)

    for epoch in range(EPOCHS):
        for i, (images, labels) in enumerate(zip(train_images, train_labels)):
            loss = train_job(images, labels)
            if i % 20 == 0:
                print(loss.mean())
    flow.checkpoint.save(sys.argv[1] if len(sys.argv) > 1 else "./lenet_models_1")
    print("model saved")
