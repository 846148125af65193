"""Train-step time of the OneFlow MLP and LeNet against PyTorch CPU eager, in one run.

Same shapes, same batch (100), same optimizer (SGD, momentum 0.9), same
number of threads: numpy's BLAS and PyTorch both use OPENBLAS_NUM_THREADS
when it is set (`OPENBLAS_NUM_THREADS=1 python benchmarks/train_step.py`),
else their defaults (one per core).  Goals: MLP no slower than PyTorch, LeNet
within 1.5x.
"""

from __future__ import annotations

import os
import timeit

import numpy as np

import irflow as flow
import irflow.typing as tp

BATCH = 100


def best_per_call(fn, number: int = 50, repeat: int = 7) -> float:
    """Best of `repeat` means: the shared 2-core machines here make single runs noisy."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def irflow_jobs():
    flow.clear_default_session()

    @flow.global_function(type="train")
    def mlp_train(
        images: tp.Numpy.Placeholder((BATCH, 784), dtype=flow.float),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="mlp1")
        logits = flow.layers.dense(hidden, 10, name="mlp2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    @flow.global_function(type="train")
    def lenet_train(
        images: tp.Numpy.Placeholder((BATCH, 1, 28, 28), dtype=flow.float),
        labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32),
    ) -> tp.Numpy:
        conv1 = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu, name="conv1")
        pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu, name="conv2")
        pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        flat = flow.reshape(pool2, [BATCH, -1])
        hidden = flow.layers.dense(flat, 512, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss

    return mlp_train, lenet_train


def torch_models():
    import torch
    from torch import nn

    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    lenet = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, 10),
    )  # fmt: skip

    def stepper(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    return torch, stepper(mlp), stepper(lenet)


def main() -> None:
    rng = np.random.default_rng(0)
    flat = rng.random((BATCH, 784), dtype=np.float32)
    images = flat.reshape(BATCH, 1, 28, 28)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    mlp_train, lenet_train = irflow_jobs()
    ours = {
        "MLP 784-512-10": best_per_call(lambda: mlp_train(flat, labels)),
        "LeNet": best_per_call(lambda: lenet_train(images, labels), number=5),
    }
    try:
        torch, torch_mlp, torch_lenet = torch_models()
    except ImportError:
        for name, t in ours.items():
            print(f"{name:<16} irflow {t * 1e3:8.2f} ms  (PyTorch not installed: no ratio)")
        return
    if "OPENBLAS_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OPENBLAS_NUM_THREADS"]))
    tx, ty = torch.from_numpy(flat), torch.from_numpy(labels.astype(np.int64))
    theirs = {
        "MLP 784-512-10": best_per_call(lambda: torch_mlp(tx, ty)),
        "LeNet": best_per_call(lambda: torch_lenet(tx.reshape(BATCH, 1, 28, 28), ty), number=5),
    }
    goals = {"MLP 784-512-10": 1.0, "LeNet": 1.5}
    print(f"threads: PyTorch {torch.get_num_threads()}, numpy BLAS {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    print(f"{'model':<16}{'irflow':>12}{'PyTorch':>12}{'ratio':>9}{'goal':>8}")
    for name in ours:
        ratio = ours[name] / theirs[name]
        print(f"{name:<16}{ours[name] * 1e3:>10.2f}ms{theirs[name] * 1e3:>10.2f}ms{ratio:>8.2f}x{goals[name]:>7.1f}x")


if __name__ == "__main__":
    main()
