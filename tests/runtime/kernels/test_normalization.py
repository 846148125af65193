"""The fused batch-normalization kernels against torch's batch_norm, a numpy formula and finite differences."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from irflow.runtime.kernels import normalization

from .conftest import Build, build, numeric_grad

EPS = 1e-5
# (shape, channel axis): NCHW conv outputs, dense (N, C), a channel axis last, and chunks that do not divide A
SHAPES = [((6, 3, 5, 4), 1), ((7, 5), 1), ((4, 3, 6), 2), ((9, 2, 3, 3), 1)]


def _reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axis: int, relu: bool) -> tuple[np.ndarray, ...]:
    """mean, biased variance and y in float64, written directly from the definition."""
    axes = tuple(a for a in range(x.ndim) if a != axis)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    x = x.astype(np.float64)
    mean = x.mean(axis=axes)
    var = ((x - mean.reshape(shape)) ** 2).mean(axis=axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + EPS) * gamma.reshape(shape) + beta.reshape(shape)
    return mean, var, np.maximum(y, 0) if relu else y


def _forward(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axis: int, relu: bool, build: Build = build
) -> Callable[[], list[np.ndarray]]:
    c = x.shape[axis]
    stats, (mean, var) = build("batch_norm_stats", [x], [((c,), x.dtype), ((c,), x.dtype)], axis=axis)
    ins = [x, mean, var, gamma, beta]
    norm, (y,) = build("batch_norm", ins, [(x.shape, x.dtype)], axis=axis, epsilon=EPS, relu=relu)

    def run() -> list[np.ndarray]:
        stats()
        norm()
        return [mean, var, y]

    return run


@pytest.mark.parametrize("shape,axis", SHAPES)
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("relu", [False, True])
def test_forward_matches_the_definition(
    build_kernel: Build, shape: tuple[int, ...], axis: int, dtype: type, tol: float, relu: bool
) -> None:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3 + 40).astype(dtype)  # a mean far from 0: a one-pass variance would lose digits
    gamma, beta = rng.standard_normal(shape[axis]).astype(dtype), rng.standard_normal(shape[axis]).astype(dtype)
    got = _forward(x, gamma, beta, axis, relu, build_kernel)()
    for g, want in zip(got, _reference(x, gamma, beta, axis, relu)):
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol * 10)


def test_small_chunks_give_the_same_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk of one row of A (the kernels walk A in chunks) sums to what one chunk does."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 4, 4))
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    whole = _forward(x, gamma, beta, 1, False)()
    monkeypatch.setattr(normalization, "CHUNK_BYTES", 1)
    for a, b in zip(_forward(x, gamma, beta, 1, False)(), whole):
        np.testing.assert_allclose(a, b, rtol=1e-13)


def _backward(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, axis: int, relu: bool, y: np.ndarray | None, build: Build = build
) -> list[np.ndarray]:
    c = x.shape[axis]
    stats, (mean, var) = build("batch_norm_stats", [x], [((c,), x.dtype), ((c,), x.dtype)], axis=axis)
    stats()
    ins = [dy, x, mean, var, gamma] + ([y] if relu else [])
    outs = [(x.shape, x.dtype), ((c,), x.dtype), ((c,), x.dtype)]
    grad, result = build("batch_norm_grad", ins, outs, axis=axis, epsilon=EPS, relu=relu)
    grad()
    return result


@pytest.mark.parametrize("shape,axis", SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_backward_matches_finite_differences(build_kernel: Build, shape: tuple[int, ...], axis: int, relu: bool) -> None:
    rng = np.random.default_rng(5)
    x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    gamma, beta = rng.standard_normal(shape[axis]), rng.standard_normal(shape[axis])
    forward = _forward(x, gamma, beta, axis, relu, build_kernel)
    y = forward()[2].copy()
    dx, dgamma, dbeta = _backward(dy, x, gamma, axis, relu, y, build_kernel)
    np.testing.assert_allclose(dx, numeric_grad(lambda: forward()[2], x, dy), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dgamma, numeric_grad(lambda: forward()[2], gamma, dy), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dbeta, numeric_grad(lambda: forward()[2], beta, dy), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
@pytest.mark.parametrize("relu", [False, True])
def test_against_torch(build_kernel: Build, dtype: type, tol: float, relu: bool) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    shape = (16, 8, 7, 7)
    x, dy = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    gamma, beta = rng.standard_normal(8).astype(dtype), rng.standard_normal(8).astype(dtype)
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    ty = torch.nn.functional.batch_norm(tx, None, None, tg, tb, training=True, eps=EPS)
    ty = torch.relu(ty) if relu else ty
    ty.backward(torch.tensor(dy))
    y = _forward(x, gamma, beta, 1, relu, build_kernel)()[2]
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    for got, want in zip(_backward(dy, x, gamma, 1, relu, y, build_kernel), (tx.grad, tg.grad, tb.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=tol, atol=tol * 10)


def test_runs_again_on_new_contents() -> None:
    """A second run reads the inputs' current contents and resets its sums."""
    rng = np.random.default_rng(7)
    x, dy = rng.standard_normal((4, 2, 3, 3)), rng.standard_normal((4, 2, 3, 3))
    gamma = rng.standard_normal(2)
    first = [a.copy() for a in _backward(dy, x, gamma, 1, False, None)]
    stats, (mean, var) = build("batch_norm_stats", [x], [((2,), x.dtype), ((2,), x.dtype)], axis=1)
    stats()
    outs_spec = [(x.shape, x.dtype), ((2,), x.dtype), ((2,), x.dtype)]
    grad, outs = build("batch_norm_grad", [dy, x, mean, var, gamma], outs_spec, axis=1, epsilon=EPS)
    grad()
    grad()
    for a, b in zip(outs, first):
        np.testing.assert_allclose(a, b, rtol=1e-14)
    x[...] = rng.standard_normal(x.shape)
    stats()
    grad()
    for a, b in zip(outs, _backward(dy, x, gamma, 1, False, None)):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_wrong_shapes_name_the_kernel_and_operand() -> None:
    x = np.zeros((4, 3, 2, 2))
    c3, c4 = np.zeros(3), np.zeros(4)
    with pytest.raises(ValueError, match="batch_norm: gamma has shape \\(4,\\), expected 3 elements"):
        build("batch_norm", [x, c3, c3, c4, c3], [(x.shape, x.dtype)], axis=1, epsilon=EPS)
    with pytest.raises(ValueError, match="batch_norm_stats: axis 4 is out of range"):
        build("batch_norm_stats", [x], [((3,), x.dtype), ((3,), x.dtype)], axis=4)
    with pytest.raises(ValueError, match="batch_norm_grad: takes 6 inputs with relu=True, given 5"):
        outs = [(x.shape, x.dtype), ((3,), x.dtype), ((3,), x.dtype)]
        build("batch_norm_grad", [x, x, c3, c3, c3], outs, axis=1, epsilon=EPS, relu=True)


@pytest.mark.parametrize("relu", [False, True])
def test_backward_in_float32_on_a_far_mean_against_torch_in_float64(build_kernel: Build, relu: bool) -> None:
    """Mean 40 and std 3: dx's k_x * x and k_0 cancel to k_x * (x - mean), which float32 must still get right."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    shape = (12, 4, 6, 5)
    x = (rng.standard_normal(shape) * 3 + 40).astype(np.float32)
    dy, gamma, beta = rng.standard_normal(shape), rng.standard_normal(4), rng.standard_normal(4)
    tx, tg, tb = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, gamma, beta))
    ty = torch.nn.functional.batch_norm(tx, None, None, tg, tb, training=True, eps=EPS)
    ty = torch.relu(ty) if relu else ty
    ty.backward(torch.tensor(dy))
    y = ty.detach().numpy().astype(np.float32)
    got = _backward(dy.astype(np.float32), x, gamma.astype(np.float32), 1, relu, y, build_kernel)
    for g, want in zip(got, (tx.grad, tg.grad, tb.grad)):
        scale = float(np.abs(want.numpy()).max())
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("relu", [False, True])
def test_threads_take_the_chunks_and_agree_with_one_thread(monkeypatch: pytest.MonkeyPatch, count: int, relu: bool) -> None:
    """One-row chunks taken by several threads: bit for bit the forward and backward of one thread (every
    chunk's sums in a slot of their own, added in chunk order)."""
    from irflow.runtime import threads

    rng = np.random.default_rng(9)
    shape = (7, 3, 4, 5)
    x, dy = rng.standard_normal(shape) * 3 + 40, rng.standard_normal(shape)  # means far from 0
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    monkeypatch.setattr(normalization, "CHUNK_BYTES", 1)
    forward = _forward(x, gamma, beta, 1, relu)
    alone = [a.copy() for a in forward()]
    alone += [a.copy() for a in _backward(dy, x, gamma, 1, relu, alone[2])]
    try:
        threads.set_cpu_thread_num(count)
        split = [a.copy() for a in forward()]
        split += _backward(dy, x, gamma, 1, relu, split[2])
    finally:
        threads.set_cpu_thread_num(None)
    for a, b in zip(split, alone):
        np.testing.assert_array_equal(a, b)
    for got, want in zip(split, _reference(x, gamma, beta, 1, relu)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_steps_allocate_no_arrays_at_one_and_two_threads() -> None:
    """Scratch, partial sums and planes are built once (each thread count's on its first run)."""
    import tracemalloc

    from irflow.runtime import threads

    rng = np.random.default_rng(10)
    x, dy = rng.standard_normal((6, 3, 8, 8)), rng.standard_normal((6, 3, 8, 8))
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    forward = _forward(x, gamma, beta, 1, True)
    y = forward()[2]
    stats, (mean, var) = build("batch_norm_stats", [x], [((3,), x.dtype), ((3,), x.dtype)], axis=1)
    outs = [(x.shape, x.dtype), ((3,), x.dtype), ((3,), x.dtype)]
    grad, _ = build("batch_norm_grad", [dy, x, mean, var, gamma, y], outs, axis=1, epsilon=EPS, relu=True)
    numpy_only = [tracemalloc.DomainFilter(True, 389047)]  # numpy's domain for array data
    try:
        for count in (1, 2):
            threads.set_cpu_thread_num(count)
            forward(), grad()
            tracemalloc.start()
            try:
                before = tracemalloc.take_snapshot().filter_traces(numpy_only)
                for _ in range(3):
                    forward(), grad()
                after = tracemalloc.take_snapshot().filter_traces(numpy_only)
            finally:
                tracemalloc.stop()
            assert sum(s.size_diff for s in after.compare_to(before, "filename")) <= 0, count
    finally:
        threads.set_cpu_thread_num(None)
