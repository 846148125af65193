"""A checkpoint saved by one process restores the same predictions in another."""

import subprocess
import sys
import textwrap

import numpy as np

import irflow as flow
import irflow.typing as tp

MODEL = textwrap.dedent(
    """
    import numpy as np
    import irflow as flow
    import irflow.typing as tp

    def model(x):
        hidden = flow.layers.dense(x, 16, activation=flow.nn.relu, kernel_initializer=flow.random_normal_initializer(), name="h")
        return flow.layers.dense(hidden, 3, kernel_initializer=flow.random_normal_initializer(), name="out")
    """
)

TRAIN_AND_SAVE = MODEL + textwrap.dedent(
    """
    import sys
    flow.random.seed(int(sys.argv[2]))

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((8, 5)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, model(x))
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        return model(x)

    rng = np.random.default_rng(0)
    for _ in range(5):
        train(rng.random((8, 5), dtype=np.float32), rng.integers(0, 3, 8).astype(np.int32))
    flow.checkpoint.save(sys.argv[1])
    np.save(sys.argv[1] + ".predictions.npy", predict(np.linspace(0, 1, 40, dtype=np.float32).reshape(8, 5)))
    """
)


def test_checkpoint_reproduces_predictions_across_processes(tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    subprocess.run([sys.executable, "-c", TRAIN_AND_SAVE, checkpoint, "123"], check=True, timeout=300)
    expected = np.load(checkpoint + ".predictions.npy")

    namespace: dict = {}
    exec(MODEL, namespace)

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder((8, 5))) -> tp.Numpy:
        return namespace["model"](x)

    x = np.linspace(0, 1, 40, dtype=np.float32).reshape(8, 5)
    assert not np.allclose(predict(x), expected)  # fresh weights (seed 0) differ from the trained ones
    flow.load_variables(flow.checkpoint.get(checkpoint))
    np.testing.assert_array_equal(predict(x), expected)
    assert {"h-weight-m", "h-weight-v", "System-Train-TrainStep"} <= set(flow.checkpoint.get(checkpoint))
