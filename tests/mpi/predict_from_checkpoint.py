"""Load a checkpoint (written by train_mlp.py on any number of ranks) in one process; predict its probe batch.

    python predict_from_checkpoint.py CHECKPOINT_DIR TRAINED.npz OUT.npz
"""

from __future__ import annotations

import sys

import numpy as np

import irflow as flow
import irflow.typing as tp
from train_mlp import BATCH, CLASSES, FEATURES, HIDDEN


def main(checkpoint: str, trained: str, out: str) -> None:
    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((BATCH, FEATURES))) -> tp.Numpy:
        h = flow.layers.dense(x, HIDDEN, activation=flow.nn.relu, name="hidden")
        return flow.nn.softmax(flow.layers.dense(h, CLASSES, name="logits"))

    flow.load_variables(flow.checkpoint.get(checkpoint))
    probe = np.load(trained)["probe"]
    np.savez(out, predictions=predict(probe))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
