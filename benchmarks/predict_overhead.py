"""Per-call cost of a small predict job against the same math in numpy with preallocated outputs.

The OneFlow quick-start MLP forward (100x784 -> 512 -> relu -> 10) at batch
100.  Both sides run in this process on the same weights; the ratio is what
irflow's dispatch, input/output copies and kernel closures cost.  Goal: <= 1.3x.
"""

from __future__ import annotations

import timeit

import numpy as np

import irflow as flow
import irflow.typing as tp


def best_per_call(fn, number: int = 200, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def mlp(images: tp.Numpy.Placeholder((100, 784), dtype=flow.float)) -> tp.Numpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
        return flow.layers.dense(hidden, 10, name="dense2")

    x = np.random.default_rng(0).random((100, 784), dtype=np.float32)
    mlp(x)  # compile
    weights = {k: v.numpy() for k, v in flow.get_all_variables().items()}
    w1, b1 = weights["dense1-weight"], weights["dense1-bias"]
    w2, b2 = weights["dense2-weight"], weights["dense2-bias"]
    hidden = np.empty((100, 512), np.float32)
    logits = np.empty((100, 10), np.float32)

    def numpy_forward() -> np.ndarray:
        np.matmul(x, w1.T, out=hidden)
        np.add(hidden, b1, out=hidden)
        np.maximum(hidden, 0, out=hidden)
        np.matmul(hidden, w2.T, out=logits)
        np.add(logits, b2, out=logits)
        return logits.copy()

    np.testing.assert_allclose(mlp(x), numpy_forward(), rtol=1e-4, atol=1e-4)
    ours = best_per_call(lambda: mlp(x))
    base = best_per_call(numpy_forward)
    print(f"{'what':<34}{'per call':>12}")
    print(f"{'numpy, preallocated outputs':<34}{base * 1e6:>10.1f}us")
    print(f"{'irflow predict job':<34}{ours * 1e6:>10.1f}us")
    print(f"ratio irflow / numpy: {ours / base:.3f}x (goal <= 1.3x)")


if __name__ == "__main__":
    main()
