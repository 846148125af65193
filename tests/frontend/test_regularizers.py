"""flow.regularizers through kernel_regularizer / bias_regularizer, against PyTorch with the penalty written out."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)


def test_regularized_dense_layer_trains_as_pytorch_with_the_penalty():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(3, 4)).astype(np.float32)

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((5, 4)), y: tp.Numpy.Placeholder((5,), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 3, kernel_regularizer=flow.regularizers.l1_l2(0.01, 0.2),
                                   bias_regularizer=flow.regularizers.l2(0.5), name="fc")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.5).minimize(loss)
        return loss

    flow.load_variables({"fc-weight": w0, "fc-bias": np.full(3, 0.3, np.float32)})
    w = torch.tensor(w0, requires_grad=True)
    b = torch.full((3,), 0.3, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.1, momentum=0.5)
    for _ in range(4):
        x = rng.normal(size=(5, 4)).astype(np.float32)
        y = rng.integers(0, 3, 5).astype(np.int32)
        loss = train(x, y)
        opt.zero_grad()
        per_sample = torch.nn.functional.cross_entropy(torch.tensor(x) @ w.T + b, torch.tensor(y).long(), reduction="none")
        objective = per_sample.mean() + 0.01 * w.abs().sum() + 0.1 * (w * w).sum() + 0.25 * (b * b).sum()
        objective.backward()
        opt.step()
        np.testing.assert_allclose(loss, per_sample.detach().numpy(), rtol=1e-5)  # the job returns the bare loss
    values = flow.get_all_variables()
    np.testing.assert_allclose(values["fc-weight"].numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values["fc-bias"].numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_predict_jobs_ignore_regularizers():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
        return flow.layers.dense(x, 3, kernel_regularizer=flow.regularizers.l2(1.0), name="fc")

    assert f(np.ones((2, 4), np.float32)).shape == (2, 3)


def test_bad_regularizers():
    with pytest.raises(ValueError, match="l2 must be a non-negative number"):
        flow.regularizers.l2(-1)
    with pytest.raises(flow.TraceError, match="regularizer must come from flow.regularizers"):

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
            return x + flow.get_variable("v", shape=(4,), regularizer=0.1)


def test_namespaces_prefix_variable_names():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 4))) -> tp.Numpy:
        with flow.scope.namespace("encoder"):
            h = flow.layers.dense(x, 3, name="fc")
            with flow.scope.namespace("inner"):
                v = flow.get_variable("v", shape=(3,))
        return flow.layers.dense(h + v, 2, name="fc")

    assert {"encoder-fc-weight", "encoder-fc-bias", "encoder-inner-v", "fc-weight", "fc-bias"} == set(
        flow.get_all_variables()
    )
