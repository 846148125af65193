import numpy as np
import pytest

from irflow.runtime.kernels.linalg import gemm

from .conftest import XP, build

CASES = [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((2, 3, 4), (2, 4, 6)), ((2, 1, 3, 4), (2, 1, 4, 2))]


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Triple loop over every batch entry."""
    out = np.zeros((*a.shape[:-1], b.shape[-1]))
    for index in np.ndindex(*a.shape[:-2]):
        for i in range(a.shape[-2]):
            for j in range(b.shape[-1]):
                out[index + (i, j)] = sum(
                    float(a[index + (i, k)]) * float(b[index + (k, j)]) for k in range(a.shape[-1])
                )
    return out


@pytest.mark.parametrize("a_shape, b_shape", CASES)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_matmul(kernel, rng, a_shape, b_shape, transpose_a, transpose_b, dtype, tol) -> None:
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    ref = matmul_reference(a, b)
    stored_a = np.ascontiguousarray(a.swapaxes(-1, -2)) if transpose_a else a
    stored_b = np.ascontiguousarray(b.swapaxes(-1, -2)) if transpose_b else b
    (y,) = kernel(
        "matmul", [stored_a, stored_b], [(ref.shape, dtype)], transpose_a=transpose_a, transpose_b=transpose_b
    )
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)


def test_integer_matmul(kernel) -> None:
    a, b = np.arange(6, dtype=np.int64).reshape(2, 3), np.arange(6, dtype=np.int64).reshape(3, 2)
    (y,) = kernel("matmul", [a, b], [((2, 2), np.int64)])
    np.testing.assert_array_equal(y, matmul_reference(a, b))


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("m, n", [(9, 7), (7, 9)])
def test_large_products_split_over_threads(rng, count, transpose_a, transpose_b, m, n) -> None:
    """Above the split size, 1-3 threads each multiply a block of the result: of rows when a is the
    larger operand (9 x k against k x 7), of columns when b is; 7 or 9 lines make uneven blocks (numpy's
    kernel: CPU threads)."""
    from irflow.runtime import threads
    from irflow.runtime.kernels import linalg

    k = 40000
    assert min(m, n) * k * max(m, n) >= linalg._SPLIT_MACS
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    ins = [a.T.copy() if transpose_a else a, b.T.copy() if transpose_b else b]
    try:
        threads.set_cpu_thread_num(count)
        run, (y,) = build("matmul", ins, [((m, n), np.float64)], transpose_a=transpose_a, transpose_b=transpose_b)
        run()
    finally:
        threads.set_cpu_thread_num(None)
    assert run.chunks == max(m, n)  # rows of a, or columns of b: the larger one's lines
    np.testing.assert_allclose(y, a @ b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "a_shape, b_shape, out_view",
    [
        ((6, 40), (40, 5), lambda o: o),  # matrices: through dot
        ((1, 6, 40), (1, 40, 5), lambda o: o),  # a batch of one: dot on its matrices
        ((3, 6, 40), (3, 40, 5), lambda o: o),  # a real batch: matmul
        ((6, 40), (40, 5), lambda o: o.T.copy().T),  # column-major out: (b^T a^T)^T, written in place
        ((6, 40), (40, 5), lambda o: np.full((12, 10), np.nan, np.float32)[::2, ::2]),  # strided both ways: matmul
        ((6, 40), (40,), lambda o: o),  # matrix by vector: dot
        ((40,), (40, 5), lambda o: o),  # vector by matrix: dot
        ((1, 40), (1, 40, 5), lambda o: o),  # a one-row matrix broadcast over a batch of one: matmul
    ],
    ids=["matrices", "batch-of-one", "batch", "column-major-out", "strided-out", "matrix-vector", "vector-matrix", "broadcast"],
)
def test_gemm_writes_the_product_into_out(rng, a_shape, b_shape, out_view) -> None:
    a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
    # a vector as a one-row (a) or one-column (b) matrix, and the result without that axis; a matrix a
    # broadcast over b's batch
    if a.ndim == 2 and b.ndim == 3:
        a_ref = np.broadcast_to(a, (len(b), *a.shape))
    else:
        a_ref = a.reshape(1, -1) if a.ndim == 1 else a
    ref = matmul_reference(a_ref, b.reshape(-1, 1) if b.ndim == 1 else b)
    ref = ref.reshape(ref.shape[1:] if a.ndim == 1 else ref.shape[:-1] if b.ndim == 1 else ref.shape)
    out = out_view(np.full(ref.shape, np.nan, np.float32))
    gemm(XP, a, b, out)()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_gemm_reads_a_transposed_view(rng) -> None:
    stored = rng.standard_normal((40, 6)).astype(np.float32)
    b = rng.standard_normal((40, 5)).astype(np.float32)
    out = np.empty((6, 5), np.float32)
    gemm(XP, stored.T, b, out)()
    np.testing.assert_allclose(out, matmul_reference(stored.T, b), rtol=1e-5, atol=1e-5)


def updated(update: str, w: np.ndarray, m: np.ndarray, g: np.ndarray, lr: float, weight_decay: float):
    """OneFlow's SGD and momentum updates in float64: (w, m) after one step with gradient g."""
    if update == "sgd_update":
        return w - lr * (g + weight_decay * w), m
    m = 0.9 * m - lr * (g + weight_decay * w)
    return w + m, m


@pytest.fixture(params=["blas", "numpy"])
def gemm_path(request, monkeypatch) -> str:
    """The update epilogue through numpy's BLAS with a beta, or, as where none is found, matmul and the update."""
    from irflow.runtime.kernels import blas, linalg

    if request.param == "numpy":
        monkeypatch.setattr(linalg, "accumulating_gemm", lambda *args: None)
    elif blas._routine(np.dtype(np.float32)) is None:
        pytest.skip("numpy's BLAS has no 64-bit CBLAS gemm here")
    return request.param


def update_case(update: str, w: np.ndarray, m: np.ndarray, lr: np.ndarray) -> tuple[list, list, dict]:
    """The update's inputs after (a, b), its outputs and attributes."""
    if update == "sgd_update":
        return [w, lr], [w], {}
    return [w, m, lr], [w, m], {"beta": 0.9}


@pytest.mark.parametrize("update", ["sgd_update", "momentum_update"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_update_epilogue_takes_the_product_as_its_gradient(build_kernel, rng, gemm_path, update, weight_decay, dtype, tol) -> None:
    """dw = dy^T x, as autodiff makes it (transpose_a), applied in place over three steps of changing lr."""
    dy, x = np.zeros((6, 4), dtype), np.zeros((6, 5), dtype)
    w, m, lr = rng.standard_normal((4, 5)).astype(dtype), rng.standard_normal((4, 5)).astype(dtype), np.zeros((), dtype)
    rest, outs, attrs = update_case(update, w, m, lr)
    step, _ = build_kernel(
        "matmul", [dy, x, *rest], outs, transpose_a=True, epilogue=update, weight_decay=weight_decay, **attrs
    )
    ref_w, ref_m = w.astype(np.float64), m.astype(np.float64)
    for k in range(3):
        dy[...], x[...], lr[...] = rng.standard_normal(dy.shape), rng.standard_normal(x.shape), 0.1 / (k + 1)
        ref_w, ref_m = updated(update, ref_w, ref_m, matmul_reference(dy.T, x), float(lr), weight_decay)
        step()
        np.testing.assert_allclose(w, ref_w, rtol=tol, atol=tol)
        np.testing.assert_allclose(m, ref_m, rtol=tol, atol=tol)


@pytest.mark.parametrize("update", ["sgd_update", "momentum_update"])
def test_update_epilogue_writes_outputs_apart_from_its_inputs(build_kernel, rng, gemm_path, update) -> None:
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    w, m, lr = rng.standard_normal((3, 2)), rng.standard_normal((3, 2)), np.array(0.05)
    kept_w, kept_m = w.copy(), m.copy()
    rest, outs, attrs = update_case(update, w, m, lr)
    step, got = build_kernel("matmul", [a, b, *rest], [(o.shape, o.dtype) for o in outs], epilogue=update, weight_decay=0.1, **attrs)
    step()
    ref_w, ref_m = updated(update, w, m, matmul_reference(a, b), 0.05, 0.1)
    np.testing.assert_allclose(got[0], ref_w, rtol=1e-12)
    if update == "momentum_update":
        np.testing.assert_allclose(got[1], ref_m, rtol=1e-12)
    np.testing.assert_array_equal(w, kept_w)
    np.testing.assert_array_equal(m, kept_m)


@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("update", ["sgd_update", "momentum_update"])
def test_a_large_update_epilogue_splits_over_threads(build_kernel, rng, gemm_path, update, count) -> None:
    """301 x 64 x 200 multiply-adds are above the split size: each thread takes a block of the weight's rows."""
    from irflow.runtime import threads

    dy, x = rng.standard_normal((64, 301)), rng.standard_normal((64, 200))
    w, m, lr = rng.standard_normal((301, 200)), rng.standard_normal((301, 200)), np.array(0.05)
    ref_w, ref_m = updated(update, w, m, dy.T @ x, 0.05, 0.01)
    rest, outs, attrs = update_case(update, w, m, lr)
    try:
        threads.set_cpu_thread_num(count)
        step, _ = build_kernel("matmul", [dy, x, *rest], outs, transpose_a=True, epilogue=update, weight_decay=0.01, **attrs)
        step()
    finally:
        threads.set_cpu_thread_num(None)
    np.testing.assert_allclose(w, ref_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m, ref_m, rtol=1e-12, atol=1e-12)


def test_update_epilogue_errors_name_what_is_wrong(build_kernel, rng) -> None:
    a, b, w, lr = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal((3, 2)), np.array(0.1)
    with pytest.raises(ValueError, match="unknown epilogue 'adam_update'"):
        build_kernel("matmul", [a, b, w, lr], [w], epilogue="adam_update")
    with pytest.raises(ValueError, match=r"a @ b \(3, 2\), w \(2, 3\)"):
        build_kernel("matmul", [a, b, w.T.copy(), lr], [w.T.copy()], epilogue="sgd_update")
    with pytest.raises(ValueError, match="takes \\(a, b, w, m, lr\\).*given 4 inputs"):
        build_kernel("matmul", [a, b, w, lr], [w], epilogue="momentum_update", beta=0.9)


@pytest.mark.parametrize("n, count", [(3, 1), (128, 1), (128, 3)])  # 128**3 multiply-adds are above the split size
@pytest.mark.parametrize("update", ["sgd_update", "momentum_update"])
def test_an_update_epilogue_reading_its_variable_multiplies_the_old_value(build_kernel, rng, update, n, count) -> None:
    """w's gradient a @ w: the product is of w before the update, whichever way the kernel runs, at any thread
    count (split by rows, every part's GEMM reads all of w while the parts update it)."""
    from irflow.runtime import threads

    a, w, m, lr = rng.standard_normal((n, n)), rng.standard_normal((n, n)), rng.standard_normal((n, n)), np.array(0.1)
    ref_w, ref_m = updated(update, w, m, a @ w, 0.1, 0.0)
    rest, outs, attrs = update_case(update, w, m, lr)
    try:
        threads.set_cpu_thread_num(count)
        step, _ = build_kernel("matmul", [a, w, *rest], outs, epilogue=update, **attrs)
        step()
    finally:
        threads.set_cpu_thread_num(None)
    np.testing.assert_allclose(w, ref_w, rtol=1e-12)
    np.testing.assert_allclose(m, ref_m, rtol=1e-12)
