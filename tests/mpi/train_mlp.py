"""A small MLP train job, run as users run it: in one process, or unchanged under mpiexec.

    python train_mlp.py DEVICES MODE STEPS OUT.npz [CHECKPOINT_DIR]

MODE is "data" (data parallel) or "model" (the hidden layer's weight split
over its output features). Writes the losses, the variables after training
and the predictions of a fixed batch to OUT.npz (once, from rank 0), and saves
a checkpoint when asked. With TRAIN_ON=gpu in the environment the devices are GPUs;
with MACHINES=m the DEVICES are m machines' worth (`flow.config.machine_num(m)`);
OPTIMIZER=lamb or lars trains with LAMB or LARS instead of momentum SGD.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import irflow as flow
import irflow.typing as tp

BATCH, FEATURES, HIDDEN, CLASSES = 12, 20, 16, 10
OPTIMIZERS = {
    "sgd": lambda schedule: flow.optimizer.SGD(schedule, momentum=0.9),
    "lamb": lambda schedule: flow.optimizer.LAMB(schedule, weight_decay=0.01),
    "lars": lambda schedule: flow.optimizer.LARS(schedule, lars_coefficient=0.1, weight_decay=0.01),
}


def main(devices: int, mode: str, steps: int, out: str, checkpoint: str | None) -> None:
    gpus = os.environ.get("TRAIN_ON") == "gpu"
    machines = int(os.environ.get("MACHINES", "1"))
    flow.config.machine_num(machines)
    (flow.config.gpu_device_num if gpus else flow.config.cpu_device_num)(devices // machines)
    hidden_distribute = flow.distribute.split(0) if mode == "model" else None

    def mlp(x: flow.Blob) -> flow.Blob:
        init = flow.random_normal_initializer(stddev=0.1)
        h = flow.layers.dense(
            x, HIDDEN, activation=flow.nn.relu, kernel_initializer=init, name="hidden", model_distribute=hidden_distribute
        )
        return flow.layers.dense(h, CLASSES, kernel_initializer=init, name="logits")

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((BATCH, FEATURES)), y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, mlp(x), name="loss")
        OPTIMIZERS[os.environ.get("OPTIMIZER", "sgd")](flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((BATCH, FEATURES))) -> tp.Numpy:
        return flow.nn.softmax(mlp(x))

    rng = np.random.default_rng(0)
    xs = rng.standard_normal((steps, BATCH, FEATURES)).astype(np.float32)
    ys = rng.integers(0, CLASSES, (steps, BATCH)).astype(np.int32)
    losses = [train(x, y) for x, y in zip(xs, ys)]
    probe = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    predictions = predict(probe)
    variables = {name: value.numpy() for name, value in flow.get_all_variables().items()}
    if checkpoint:
        flow.checkpoint.save(checkpoint)
    if os.environ.get("PMI_RANK", "0") == "0":  # under mpiexec, rank 0 writes
        np.savez(out, losses=np.array(losses), predictions=predictions, probe=probe, **{f"var:{k}": v for k, v in variables.items()})


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
