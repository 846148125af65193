import math

import numpy as np
import pytest

FLOATS = [(np.float32, 1e-5), (np.float64, 1e-12)]


def softmax_rows(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference softmax and log-softmax, row by row in Python floats."""
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    soft, log = np.empty(moved.shape), np.empty(moved.shape)
    for index in np.ndindex(*moved.shape[:-1]):
        row = [float(v) for v in moved[index]]
        top = max(row)
        lse = top + math.log(math.fsum(math.exp(v - top) for v in row))
        log[index] = [v - lse for v in row]
        soft[index] = [math.exp(v - lse) for v in row]
    return np.moveaxis(soft, -1, axis), np.moveaxis(log, -1, axis)


@pytest.mark.parametrize("dtype, tol", FLOATS)
@pytest.mark.parametrize("shape, axis", [((4, 7), -1), ((4, 7), 0), ((2, 3, 5), 1), ((3, 1), 1), ((6,), 0)])
def test_softmax_and_log_softmax(kernel, rng, dtype, tol, shape, axis) -> None:
    x = (rng.standard_normal(shape) * 5 + 900).astype(dtype)  # large values: must not overflow
    soft, log = softmax_rows(x, axis)
    (y,) = kernel("softmax", [x], [(shape, dtype)], axis=axis)
    (z,) = kernel("log_softmax", [x], [(shape, dtype)], axis=axis)
    np.testing.assert_allclose(y, soft, rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(z, log, rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_over_an_empty_axis_is_empty(kernel, name) -> None:
    """A dynamic axis with no rows: nothing to normalize (numpy's max over it raised)."""
    (y,) = kernel(name, [np.zeros((0, 3))], [((0, 3), np.float64)], axis=0)
    assert y.shape == (0, 3)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((2, 3, 2), 1)])
def test_softmax_grads_match_finite_differences(kernel, finite_diff, rng, name, shape, axis) -> None:
    x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    (y,) = kernel(name, [x], [(shape, np.float64)], axis=axis)
    (dx,) = kernel(f"{name}_grad", [dy, y], [(shape, np.float64)], axis=axis)
    np.testing.assert_allclose(dx, finite_diff(name, [x], 0, (shape, np.float64), dy, axis=axis), rtol=1e-6, atol=1e-9)


def sparse_loss(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    _, log = softmax_rows(logits, 1)
    return np.array([-log[n, int(c)] for n, c in enumerate(labels)])


@pytest.mark.parametrize("dtype, tol", FLOATS)
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n, c", [(5, 10), (1, 1), (3, 2)])
def test_sparse_softmax_cross_entropy(kernel, rng, dtype, tol, label_dtype, n, c) -> None:
    logits = (rng.standard_normal((n, c)) * 30).astype(dtype)
    labels = rng.integers(0, c, n).astype(label_dtype)
    (loss,) = kernel("sparse_softmax_cross_entropy", [logits, labels], [((n,), dtype)])
    np.testing.assert_allclose(loss, sparse_loss(logits, labels), rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("dtype, tol", FLOATS)
def test_softmax_cross_entropy(kernel, rng, dtype, tol) -> None:
    logits = (rng.standard_normal((4, 6)) * 30).astype(dtype)
    labels = rng.uniform(0, 1, (4, 6)).astype(dtype)
    (loss,) = kernel("softmax_cross_entropy", [logits, labels], [((4,), dtype)])
    _, log = softmax_rows(logits, 1)
    ref = [-math.fsum(float(p) * q for p, q in zip(labels[i], log[i])) for i in range(4)]
    np.testing.assert_allclose(loss, ref, rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("n, c", [(4, 5), (1, 1)])
def test_sparse_cross_entropy_grad_matches_finite_differences(kernel, finite_diff, rng, n, c) -> None:
    logits, labels, dloss = rng.standard_normal((n, c)), rng.integers(0, c, n), rng.standard_normal(n)
    (dlogits,) = kernel("sparse_softmax_cross_entropy_grad", [dloss, logits, labels], [((n, c), np.float64)])
    expected = finite_diff("sparse_softmax_cross_entropy", [logits, labels], 0, ((n,), np.float64), dloss)
    np.testing.assert_allclose(dlogits, expected, rtol=1e-6, atol=1e-9)


def test_softmax_cross_entropy_grad_matches_finite_differences(kernel, finite_diff, rng) -> None:
    logits, dloss = rng.standard_normal((3, 4)), rng.standard_normal(3)
    labels = rng.uniform(0, 1, (3, 4))  # unnormalized on purpose: the gradient scales softmax by sum(labels)
    (dlogits,) = kernel("softmax_cross_entropy_grad", [dloss, logits, labels], [((3, 4), np.float64)])
    expected = finite_diff("softmax_cross_entropy", [logits, labels], 0, ((3,), np.float64), dloss)
    np.testing.assert_allclose(dlogits, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("sparse", [True, False])
def test_cross_entropy_matches_torch(kernel, rng, sparse) -> None:
    torch = pytest.importorskip("torch")
    logits, dloss = rng.standard_normal((8, 10)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    if sparse:
        labels = rng.integers(0, 10, 8)
        target = torch.tensor(labels)
    else:
        labels = rng.dirichlet(np.ones(10), 8).astype(np.float32)
        target = torch.tensor(labels)
    name = "sparse_softmax_cross_entropy" if sparse else "softmax_cross_entropy"
    t_logits = torch.tensor(logits, requires_grad=True)
    t_loss = torch.nn.functional.cross_entropy(t_logits, target, reduction="none")
    t_loss.backward(torch.tensor(dloss))
    (loss,) = kernel(name, [logits, labels], [((8,), np.float32)])
    (dlogits,) = kernel(f"{name}_grad", [dloss, logits, labels], [((8, 10), np.float32)])
    np.testing.assert_allclose(loss, t_loss.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dlogits, t_logits.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_softmax_grads_match_torch(kernel, rng) -> None:
    torch = pytest.importorskip("torch")
    x, dy = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    for name in ["softmax", "log_softmax"]:
        tx = torch.tensor(x, requires_grad=True)
        getattr(torch, name)(tx, dim=1).backward(torch.tensor(dy))
        (y,) = kernel(name, [x], [(x.shape, np.float64)], axis=1)
        (dx,) = kernel(f"{name}_grad", [dy, y], [(x.shape, np.float64)], axis=1)
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-14)
