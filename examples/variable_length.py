"""Variable-length inputs: a bag-of-embeddings classifier of token sequences whose number and length change
from call to call, trained in the mirrored view on two simulated devices (docs/dynamic.md).

Each device gets its own batch of sequences, of its own count and length (the longest of the batch's, the
others padded with id 0): the ids are a `tp.ListNumpy` placeholder at its bound. The job embeds each
call's own ids (`flow.gather` of the table), averages each sequence's own tokens, drops some of each
device's actual rows out, and classifies; the table's gradient comes from every device's ids. The
evaluation job also returns which sequences of both devices it is the most sure of (a `top_k` over
every device's rows, gathered).

    python examples/variable_length.py      (IRFLOW_EPOCHS, default 1)

The data is made here: a sequence of class 1 draws 70% of its tokens from the upper half of the
vocabulary, one of class 0 from the lower half.
"""

import os
from typing import Tuple

import numpy as np

import irflow as flow
import irflow.typing as tp

DEVICES, PER_DEVICE, MAX_LENGTH, VOCABULARY, WIDTH = 2, 32, 24, 100, 16
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "1"))

flow.config.cpu_device_num(DEVICES)


def classify(ids: flow.Blob, training: bool) -> flow.Blob:
    table = flow.get_variable("embedding", shape=(VOCABULARY, WIDTH), dtype=flow.float,
                              initializer=flow.random_normal_initializer(stddev=0.1))
    # the mean of each sequence's own tokens: the batch's length is each call's own, and id 0 pads a sequence
    # shorter than the batch's longest (a mean over the length axis would count the padding)
    padding = np.ones((VOCABULARY, 1), np.float32)
    padding[0] = 0.0  # id 0 embeds as zeros
    summed = flow.math.reduce_sum(flow.gather(table * flow.constant(padding), ids), axis=1)
    tokens = flow.math.reduce_sum(flow.cast(flow.math.not_equal(ids, 0), flow.float), axis=1, keepdims=True)
    pooled = summed / tokens
    if training:
        pooled = flow.nn.dropout(pooled, rate=0.1)
    return flow.layers.dense(pooled, 2, name="classes")


def mirrored_config() -> flow.FunctionConfig:
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())
    return config


@flow.global_function(type="train", function_config=mirrored_config())
def train_job(
    ids: tp.ListNumpy.Placeholder((PER_DEVICE, MAX_LENGTH), dtype=flow.int32),
    labels: tp.ListNumpy.Placeholder((PER_DEVICE,), dtype=flow.int32),
) -> tp.ListNumpy:
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, classify(ids, training=True))
    flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
    return loss


@flow.global_function(type="predict", function_config=mirrored_config())
def eval_job(ids: tp.ListNumpy.Placeholder((PER_DEVICE, MAX_LENGTH), dtype=flow.int32)) -> Tuple[tp.ListNumpy, tp.Numpy]:
    scores = flow.nn.softmax(classify(ids, training=False))
    sure = flow.math.reduce_max(scores, axis=1)
    return flow.math.argmax(scores, axis=1), flow.math.top_k(sure, k=3)  # of every device's rows, gathered


def batch(rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """A random count of sequences of random lengths, padded with id 0 to the longest, and their classes."""
    count, longest = int(rng.integers(1, PER_DEVICE + 1)), int(rng.integers(3, MAX_LENGTH + 1))
    labels = rng.integers(0, 2, count).astype(np.int32)
    own_half = rng.random((count, longest)) < 0.7
    upper = np.where(own_half, labels[:, None] == 1, labels[:, None] == 0)
    ids = rng.integers(1, VOCABULARY // 2, (count, longest)) + upper * (VOCABULARY // 2)
    lengths = rng.integers(1, longest + 1, count)
    ids[np.arange(longest) >= lengths[:, None]] = 0
    return ids.astype(np.int32), labels


if __name__ == "__main__":
    flow.train.CheckPoint().init()
    rng = np.random.default_rng(0)
    for epoch in range(EPOCHS):
        for step in range(300):
            batches = [batch(rng) for _ in range(DEVICES)]  # each device's own count and length
            losses = train_job([ids for ids, _ in batches], [labels for _, labels in batches])
            if step % 100 == 0:
                print("step {} rows {} loss {:.3f}".format(
                    step, [len(loss) for loss in losses], np.concatenate(losses).mean()))
    right = total = 0
    for _ in range(20):
        batches = [batch(rng) for _ in range(DEVICES)]
        classes, surest = eval_job([ids for ids, _ in batches])
        labels = np.concatenate([labels for _, labels in batches])
        right, total = right + int(np.sum(np.concatenate(classes) == labels)), total + len(labels)
    print("the last batch's surest sequences, of both devices' rows:", surest.tolist())
    print("accuracy: {:.1f}%".format(right * 100 / total))
