"""flow.watch_diff hands each call's gradient of the loss to a handler; checked against PyTorch's autograd."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)


def test_gradients_of_a_hidden_layer_and_of_an_unused_blob():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(4, 3)).astype(np.float32)
    seen, unused = [], []

    def record(diff: tp.Numpy):
        seen.append(diff)

    def record_unused(diff: tp.Numpy):
        unused.append(diff)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((5, 3)), y: tp.Numpy.Placeholder((5,), dtype=flow.int32)) -> tp.Numpy:
        hidden = flow.layers.dense(x, 4, use_bias=False, name="fc")
        flow.watch_diff(hidden, record)
        flow.watch_diff(x * 2, record_unused)  # the loss does not depend on it: zeros
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.nn.relu(hidden))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    flow.load_variables({"fc-weight": w0})
    w = torch.tensor(w0, requires_grad=True)
    for _ in range(2):
        x = rng.normal(size=(5, 3)).astype(np.float32)
        y = rng.integers(0, 4, 5).astype(np.int32)
        train(x, y)
        hidden = torch.tensor(x) @ w.T
        hidden.retain_grad()
        loss = torch.nn.functional.cross_entropy(torch.relu(hidden), torch.tensor(y).long())
        w.grad = None
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        np.testing.assert_allclose(seen[-1], hidden.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(unused[-1], np.zeros((5, 3), np.float32))


def test_watch_diff_needs_a_train_job():
    with pytest.raises(flow.TraceError, match="watch_diff: only a train job has gradients"):

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            flow.watch_diff(x, lambda d: None)
            return x


def test_a_bad_handler_is_named_as_watch_diffs():
    """watch_diff handed its handler to flow.watch, whose messages then named flow.watch."""
    with pytest.raises(flow.TraceError, match=r"^.*: error: flow\.watch_diff: annotate the handler's argument"):

        @flow.global_function(type="train")
        def f(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
            w = flow.get_variable("w", shape=(2,))
            flow.watch_diff(x * w, lambda d: None)
            loss = flow.math.reduce_sum(x * w)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
            return loss
