"""OneFlow's MLP as a predict job, synchronously: `eval_job(images, labels)` returns (labels, logits).

The program of "Define and call job function" / "Getting results from job
function", with `import irflow as flow`. Give a checkpoint directory (as
examples/main.py saves) to evaluate trained weights; without one the weights
keep their initial values and the accuracy is chance.

    python examples/mlp_predict.py [CHECKPOINT_DIR]
"""

import sys
from typing import Tuple

import numpy as np
from models import mlp

import irflow as flow
import irflow.typing as tp

BATCH_SIZE = 100


@flow.global_function(type="predict")
def eval_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> Tuple[tp.Numpy, tp.Numpy]:
    with flow.scope.placement("cpu", "0:0"):
        logits = mlp(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")

    return (labels, logits)


g_total = 0
g_correct = 0


def acc(labels, logits):
    global g_total
    global g_correct

    predictions = np.argmax(logits, 1)
    right_count = np.sum(predictions == labels)
    g_total += labels.shape[0]
    g_correct += right_count


if __name__ == "__main__":
    if len(sys.argv) > 1:
        flow.load_variables(flow.checkpoint.get(sys.argv[1]))
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)

    for i, (images, labels) in enumerate(zip(test_images, test_labels)):
        labels, logits = eval_job(images, labels)
        acc(labels, logits)

    print("accuracy: {0:.1f}%".format(g_correct * 100 / g_total))
