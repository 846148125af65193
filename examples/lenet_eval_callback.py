"""The LeNet eval job of "Getting results from job function", asynchronously: `-> tp.Callback[...]`.

Each call returns at once; `acc` gets (labels, logits) later, in call order.
`flow.sync_default_session()` waits for every pending callback.

    python examples/lenet_eval_callback.py [CHECKPOINT_DIR]
"""

import sys
from typing import Tuple

import numpy as np
from models import lenet

import irflow as flow
import irflow.typing as tp

BATCH_SIZE = 100


@flow.global_function(type="predict")
def eval_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Callback[Tuple[tp.Numpy, tp.Numpy]]:
    with flow.scope.placement("cpu", "0:0"):
        logits = lenet(images, train=False)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")

    return (labels, logits)


g_total = 0
g_correct = 0


def acc(arguments: Tuple[tp.Numpy, tp.Numpy]):
    global g_total
    global g_correct

    labels = arguments[0]
    logits = arguments[1]
    predictions = np.argmax(logits, 1)
    right_count = np.sum(predictions == labels)
    g_total += labels.shape[0]
    g_correct += right_count


if __name__ == "__main__":
    if len(sys.argv) > 1:
        flow.load_variables(flow.checkpoint.get(sys.argv[1]))
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)

    for epoch in range(1):
        for i, (images, labels) in enumerate(zip(test_images, test_labels)):
            eval_job(images, labels)(acc)

    flow.sync_default_session()
    print("accuracy: {0:.1f}%".format(g_correct * 100 / g_total))
