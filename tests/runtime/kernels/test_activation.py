import numpy as np
import pytest

GRADS = {"relu_grad": "relu", "sigmoid_grad": "sigmoid", "tanh_grad": "tanh"}  # take (dy, y)


def inputs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values away from relu's kink, where finite differences are exact enough."""
    return rng.uniform(0.1, 3.0, shape) * rng.choice([-1.0, 1.0], shape)


@pytest.mark.parametrize("grad", GRADS)
@pytest.mark.parametrize("shape", [(3, 5), (1,)])
def test_output_based_grads_match_finite_differences(kernel, finite_diff, rng, grad, shape) -> None:
    forward = GRADS[grad]
    x, dy = inputs(rng, shape), rng.standard_normal(shape)
    (y,) = kernel(forward, [x], [(shape, np.float64)])
    (dx,) = kernel(grad, [dy, y], [(shape, np.float64)])
    np.testing.assert_allclose(dx, finite_diff(forward, [x], 0, (shape, np.float64), dy), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("shape", [(3, 5), (1,)])
def test_gelu_grad_matches_finite_differences(kernel, finite_diff, rng, shape) -> None:
    x, dy = rng.uniform(-6, 6, shape), rng.standard_normal(shape)
    (dx,) = kernel("gelu_grad", [dy, x], [(shape, np.float64)])
    np.testing.assert_allclose(dx, finite_diff("gelu", [x], 0, (shape, np.float64), dy), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "gelu"])
@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-6), (np.float64, 1e-12)])
def test_matches_torch_forward_and_autograd(kernel, rng, name, dtype, tol) -> None:
    torch = pytest.importorskip("torch")
    x, dy = inputs(rng, (4, 50)).astype(dtype) * 3, rng.standard_normal((4, 50)).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.nn.functional, name)(tx)
    ty.backward(torch.tensor(dy))
    (y,) = kernel(name, [x], [(x.shape, dtype)])
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    saved = x if name == "gelu" else y
    (dx,) = kernel(f"{name}_grad", [dy, saved], [(x.shape, dtype)])
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=tol * 10, atol=tol * 10)
