import itertools

import numpy as np
import pytest

# (x shape, attrs): non-overlapping, SAME on odd and even sizes (asymmetric), overlapping, 1x1, size-1.
CASES = [
    ((2, 3, 6, 6), dict(kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0))),
    ((2, 2, 7, 7), dict(kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
    ((1, 2, 8, 8), dict(kernel=(3, 3), strides=(2, 2), pads=(0, 1, 0, 1))),
    ((2, 1, 5, 4), dict(kernel=(3, 2), strides=(1, 1), pads=(1, 1, 0, 1))),
    ((1, 2, 3, 3), dict(kernel=(1, 1), strides=(2, 1), pads=(0, 0, 0, 0))),
    ((1, 1, 1, 1), dict(kernel=(1, 1), strides=(1, 1), pads=(0, 0, 0, 0))),
]
IDS = ["2x2", "same-odd", "same-even", "overlap-rect", "1x1-strided", "scalar"]


def windows(x_shape, kernel, strides, pads):
    """For each output (oh, ow): the in-bounds input positions of its window, in row-major order."""
    h, w = x_shape[2:]
    oh = (h + pads[0] + pads[1] - kernel[0]) // strides[0] + 1
    ow = (w + pads[2] + pads[3] - kernel[1]) // strides[1] + 1
    for i, j in itertools.product(range(oh), range(ow)):
        rows = [i * strides[0] + k - pads[0] for k in range(kernel[0])]
        cols = [j * strides[1] + k - pads[2] for k in range(kernel[1])]
        yield (i, j), [(r, c) for r in rows for c in cols if 0 <= r < h and 0 <= c < w], (oh, ow)


def pool_reference(x: np.ndarray, mode: str, **attrs) -> np.ndarray:
    out = None
    for (i, j), cells, (oh, ow) in windows(x.shape, **attrs):
        if out is None:
            out = np.zeros((*x.shape[:2], oh, ow))
        values = np.stack([x[:, :, r, c] for r, c in cells], axis=-1).astype(np.float64)
        out[:, :, i, j] = values.max(-1) if mode == "max" else values.mean(-1)
    return out


def max_pool_grad_reference(dy: np.ndarray, x: np.ndarray, **attrs) -> np.ndarray:
    dx = np.zeros(x.shape)
    for (i, j), cells, _ in windows(x.shape, **attrs):
        for n, c in np.ndindex(*x.shape[:2]):
            values = [x[n, c, r, s] for r, s in cells]
            r, s = cells[values.index(max(values))]
            dx[n, c, r, s] += dy[n, c, i, j]
    return dx


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("x_shape, attrs", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pool_matches_definition(kernel, rng, mode, x_shape, attrs, dtype) -> None:
    x = rng.standard_normal(x_shape).astype(dtype)
    ref = pool_reference(x, mode, **attrs)
    (y,) = kernel(f"{mode}_pool2d", [x], [(ref.shape, dtype)], **attrs)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6 if dtype == np.float32 else 1e-14)


def test_max_pool_pads_with_minus_infinity(kernel) -> None:
    x = -np.ones((1, 1, 3, 3))
    (y,) = kernel("max_pool2d", [x], [((1, 1, 2, 2), np.float64)], kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    np.testing.assert_array_equal(y, -1)


@pytest.mark.parametrize("x_shape, attrs", CASES, ids=IDS)
def test_max_pool_grad_routes_to_the_first_maximum(kernel, rng, x_shape, attrs) -> None:
    x = rng.integers(0, 3, x_shape).astype(np.float64)  # ties everywhere
    (y,) = kernel("max_pool2d", [x], [(pool_reference(x, "max", **attrs).shape, np.float64)], **attrs)
    dy = rng.standard_normal(y.shape)
    (dx,) = kernel("max_pool2d_grad", [dy, x, y], [(x_shape, np.float64)], **attrs)
    np.testing.assert_allclose(dx, max_pool_grad_reference(dy, x, **attrs), rtol=1e-14)


@pytest.mark.parametrize("x_shape, attrs", CASES, ids=IDS)
def test_max_pool_grad_relu_grad_epilogue(kernel, rng, x_shape, attrs) -> None:
    """relu_grad(max_pool2d_grad(dy, x, y), x) in one kernel, x with ties and zeros (relu outputs)."""
    x = np.maximum(rng.integers(-2, 3, x_shape), 0).astype(np.float64)
    (y,) = kernel("max_pool2d", [x], [(pool_reference(x, "max", **attrs).shape, np.float64)], **attrs)
    dy = rng.standard_normal(y.shape)
    (dx,) = kernel("max_pool2d_grad", [dy, x, y], [(x_shape, np.float64)], epilogue="relu_grad", **attrs)
    np.testing.assert_allclose(dx, max_pool_grad_reference(dy, x, **attrs) * (x > 0), rtol=1e-14)


def test_max_pool_grad_rejects_an_unknown_epilogue(build_kernel) -> None:
    x, y = np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 1, 1))
    with pytest.raises(ValueError, match="max_pool2d_grad: unknown epilogue 'relu'"):
        build_kernel("max_pool2d_grad", [y, x, y], [((1, 1, 2, 2), np.float64)], kernel=(2, 2), strides=(2, 2), epilogue="relu")


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("x_shape, attrs", CASES, ids=IDS)
def test_pool_grads_match_finite_differences(kernel, finite_diff, rng, mode, x_shape, attrs) -> None:
    x = rng.permutation(np.arange(float(np.prod(x_shape)))).reshape(x_shape) / 10  # distinct values
    (y,) = kernel(f"{mode}_pool2d", [x], [(pool_reference(x, mode, **attrs).shape, np.float64)], **attrs)
    dy = rng.standard_normal(y.shape)
    ins = [dy, x, y] if mode == "max" else [dy]
    (dx,) = kernel(f"{mode}_pool2d_grad", ins, [(x_shape, np.float64)], **attrs)
    expected = finite_diff(f"{mode}_pool2d", [x], 0, (y.shape, np.float64), dy, **attrs)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-7)


def torch_max_pool(torch, rng, x: np.ndarray, attrs: dict):
    """PyTorch's max pool of x (padded with -inf as the kernel pads) and its backward of a random dy: (tx, ty, dy)."""
    top, bottom, left, right = attrs["pads"]
    tx = torch.tensor(x, requires_grad=True)
    f = torch.nn.functional
    ty = f.max_pool2d(f.pad(tx, (left, right, top, bottom), value=-np.inf), attrs["kernel"], attrs["strides"])
    dy = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(dy))
    return tx, ty, dy


@pytest.mark.parametrize("x_shape, attrs", CASES[:4], ids=IDS[:4])
def test_pools_match_torch(kernel, rng, x_shape, attrs) -> None:
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    x = rng.standard_normal(x_shape).astype(np.float32)
    top, bottom, left, right = attrs["pads"]
    tx, ty, dy = torch_max_pool(torch, rng, x, attrs)
    (y,) = kernel("max_pool2d", [x], [(tuple(ty.shape), np.float32)], **attrs)
    (dx,) = kernel("max_pool2d_grad", [dy, x, y], [(x_shape, np.float32)], **attrs)
    np.testing.assert_allclose(y, ty.detach().numpy())
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-6)
    if top == bottom and left == right:  # torch pads avg_pool2d symmetrically only
        tx.grad = None
        ty = f.avg_pool2d(tx, attrs["kernel"], attrs["strides"], padding=(top, left), count_include_pad=False)
        ty.backward(torch.tensor(dy))
        (y,) = kernel("avg_pool2d", [x], [(tuple(ty.shape), np.float32)], **attrs)
        (dx,) = kernel("avg_pool2d_grad", [dy], [(x_shape, np.float32)], **attrs)
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("x_shape, attrs", CASES[:4], ids=IDS[:4])
@pytest.mark.parametrize("epilogue", [None, "relu_grad"])
def test_max_pool_grad_matches_torch_on_ties(kernel, rng, x_shape, attrs, epilogue) -> None:
    """With ties in most windows (relu-like zeros and small integers), dx is PyTorch's max_pool2d backward (times x > 0 with the epilogue)."""
    torch = pytest.importorskip("torch")
    x = np.maximum(rng.integers(-1, 3, x_shape), 0).astype(np.float32)
    tx, ty, dy = torch_max_pool(torch, rng, x, attrs)
    (y,) = kernel("max_pool2d", [x], [(tuple(ty.shape), np.float32)], **attrs)
    extra = {"epilogue": epilogue} if epilogue else {}
    (dx,) = kernel("max_pool2d_grad", [dy, x, y], [(x_shape, np.float32)], **attrs, **extra)
    expected = tx.grad.numpy() * (x > 0) if epilogue else tx.grad.numpy()
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-6)  # overlapping windows add shares in another order


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("x_shape, attrs", CASES, ids=IDS)
def test_pools_in_one_image_chunks_over_threads(kernel, rng, monkeypatch, count, x_shape, attrs) -> None:
    """Three one-image chunks (the batch cut into chunks, taken by `count` threads) against the definitions."""
    from irflow.runtime import threads
    from irflow.runtime.kernels import pooling

    monkeypatch.setattr(pooling, "_CHUNK_BYTES", 1)
    x_shape = (3, *x_shape[1:])
    x = np.maximum(rng.integers(-2, 3, x_shape), 0).astype(np.float64)  # ties and zeros
    try:
        threads.set_cpu_thread_num(count)
        for mode in ("max", "avg"):
            ref = pool_reference(x, mode, **attrs)
            (y,) = kernel(f"{mode}_pool2d", [x], [(ref.shape, np.float64)], **attrs)
            np.testing.assert_allclose(y, ref, rtol=1e-14, atol=1e-14)
        dy = rng.standard_normal(y.shape)
        (y,) = kernel("max_pool2d", [x], [(y.shape, np.float64)], **attrs)
        expected = max_pool_grad_reference(dy, x, **attrs)
        (dx,) = kernel("max_pool2d_grad", [dy, x, y], [(x_shape, np.float64)], **attrs)
        np.testing.assert_allclose(dx, expected, rtol=1e-14)
        (dx,) = kernel("max_pool2d_grad", [dy, x, y], [(x_shape, np.float64)], epilogue="relu_grad", **attrs)
        np.testing.assert_allclose(dx, expected * (x > 0), rtol=1e-14)
        (dx,) = kernel("avg_pool2d_grad", [dy], [(x_shape, np.float64)], **attrs)
        expected = np.zeros(x_shape)
        for (i, j), cells, _ in windows(x_shape, **attrs):
            for r, c in cells:
                expected[:, :, r, c] += dy[:, :, i, j] / len(cells)
        np.testing.assert_allclose(dx, expected, rtol=1e-14)
    finally:
        threads.set_cpu_thread_num(None)
