"""The main job (`make run`): train the OneFlow quick-start MLP on the bundled MNIST subset.

Prints the loss as it trains, the held-out accuracy, saves a checkpoint and
dumps every IR stage of both jobs so that `irflow-opt` can replay them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from models import mlp

import irflow as flow
import irflow.typing as tp

BATCH_SIZE = 100
EPOCHS = int(os.environ.get("IRFLOW_EPOCHS", "10"))
OUT = Path(os.environ.get("IRFLOW_OUT", "irflow_out"))
os.environ.setdefault("IRFLOW_DUMP_IR", str(OUT / "ir"))


@flow.global_function(type="train")
def train_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
    labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32),
) -> tp.Numpy:
    with flow.scope.placement("cpu", "0:0"):
        logits = mlp(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
    lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
    flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
    return loss


@flow.global_function(type="predict")
def eval_job(
    images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
) -> tp.Numpy:
    with flow.scope.placement("cpu", "0:0"):
        return flow.math.argmax(mlp(images), axis=1)


def progress(epoch: int, step: int, steps: int, loss: float, started: float) -> None:
    done = int(30 * step / steps)
    bar = "#" * done + "." * (30 - done)
    rate = step / max(time.perf_counter() - started, 1e-9)
    sys.stdout.write(f"\repoch {epoch + 1}/{EPOCHS} [{bar}] {step}/{steps} loss {loss:.4f} ({rate:.0f} steps/s)")
    sys.stdout.flush()


def main() -> None:
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    steps = len(train_images)
    print(f"training the MLP on {steps * BATCH_SIZE} images, {EPOCHS} epochs of {steps} steps")
    for epoch in range(EPOCHS):
        started = time.perf_counter()
        for step, (images, labels) in enumerate(zip(train_images, train_labels), 1):
            loss = train_job(images, labels)
            if step % 5 == 0 or step == steps:
                progress(epoch, step, steps, float(loss.mean()), started)
        print()
    correct = sum(int((eval_job(images) == labels).sum()) for images, labels in zip(test_images, test_labels))
    total = test_labels.size
    print(f"held-out accuracy: {correct / total:.2%} ({correct}/{total})")
    checkpoint = OUT / "checkpoint"
    flow.checkpoint.save(str(checkpoint), overwrite=True)  # this program's own output: a rerun replaces it
    print(f"checkpoint saved to {checkpoint}")
    print(f"IR of every stage: {os.environ['IRFLOW_DUMP_IR']}/ (replay with .venv/bin/irflow-opt FILE -p ...)")
    if correct / total < 0.8:
        raise SystemExit("accuracy is far below what this model reaches; something is wrong")


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
