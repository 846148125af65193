"""Evaluate examples/older_api_train.py's checkpoint with futures: `.async_get(handler)`, no sync.

As the documentation's async_batch_job does, the accuracy is printed right
after the loop: a call waits while an earlier one is unfinished (see
flow.config.max_calls_in_flight), so by then every batch but the last is counted.

    python examples/older_api_eval.py [CHECKPOINT_DIR]
"""

import sys
import warnings

import numpy as np
from models import mlp

import irflow as flow

warnings.simplefilter("ignore", DeprecationWarning)

BATCH_SIZE = 100


@flow.global_function(flow.function_config())
def evaluate(images=flow.FixedTensorDef((BATCH_SIZE, 1, 28, 28)),
             labels=flow.FixedTensorDef((BATCH_SIZE,), dtype=flow.int32)):
    return labels, mlp(images)


g_total = 0
g_correct = 0


def count(result):
    global g_total, g_correct
    labels, logits = result
    g_total += labels.shape[0]
    g_correct += int(np.sum(np.argmax(logits.ndarray(), 1) == labels))


if __name__ == "__main__":
    flow.train.CheckPoint().load(sys.argv[1] if len(sys.argv) > 1 else "./older_api_model")
    _, (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    for images, labels in zip(test_images, test_labels):
        evaluate(images, labels).async_get(count)
    print("counted {} of {} right after the loop".format(g_total, test_labels.size))
    flow.sync_default_session()
    print("accuracy: {:.1f}%".format(g_correct * 100 / g_total))
