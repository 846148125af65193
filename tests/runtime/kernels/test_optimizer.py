"""Updates run in place (the variable and its state are both ins and outs) over several steps."""

import math

import numpy as np
import pytest

SHAPE = (4, 3)


def scalar(value: float, dtype=np.float32) -> np.ndarray:
    return np.array(value, dtype)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sgd(build_kernel, rng, weight_decay, dtype) -> None:
    w, g, lr = rng.standard_normal(SHAPE).astype(dtype), np.zeros(SHAPE, dtype), scalar(0.0, dtype)
    step, _ = build_kernel("sgd_update", [w, g, lr], [w], weight_decay=weight_decay)
    ref = w.astype(np.float64)
    for k in range(3):
        g[...], lr[...] = rng.standard_normal(SHAPE), 0.1 / (k + 1)
        ref = ref - float(lr) * (g + weight_decay * ref)
        step()
        np.testing.assert_allclose(w, ref, rtol=1e-6)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_momentum_follows_oneflow(build_kernel, rng, weight_decay) -> None:
    w, g, m, lr = rng.standard_normal(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE), scalar(0.05, np.float64)
    step, _ = build_kernel("momentum_update", [w, g, m, lr], [w, m], beta=0.9, weight_decay=weight_decay)
    ref_w, ref_m = w.copy(), m.copy()
    for _ in range(4):
        g[...] = rng.standard_normal(SHAPE)
        ref_m = 0.9 * ref_m - 0.05 * (g + weight_decay * ref_w)
        ref_w = ref_w + ref_m
        step()
        np.testing.assert_allclose(w, ref_w, rtol=1e-13)
        np.testing.assert_allclose(m, ref_m, rtol=1e-13)


def adam_reference(w, g, m, v, lr, step, beta1, beta2, epsilon, weight_decay, do_bias_correction):
    """Adam as Kingma & Ba write it, element by element; AdamW's decoupled decay first."""
    w, m, v = w.copy(), m.copy(), v.copy()
    for i in np.ndindex(*w.shape):
        w[i] *= 1 - lr * weight_decay
        m[i] = beta1 * m[i] + (1 - beta1) * g[i]
        v[i] = beta2 * v[i] + (1 - beta2) * g[i] ** 2
        c1, c2 = (1 - beta1**step, 1 - beta2**step) if do_bias_correction else (1.0, 1.0)
        w[i] -= lr * (m[i] / c1) / (math.sqrt(v[i] / c2) + epsilon)
    return w, m, v


@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
@pytest.mark.parametrize("do_bias_correction", [True, False])
@pytest.mark.parametrize("step_dtype", [np.int64, np.float32])
def test_adam(build_kernel, rng, weight_decay, do_bias_correction, step_dtype) -> None:
    attrs = dict(beta1=0.9, beta2=0.99, epsilon=1e-8, weight_decay=weight_decay, do_bias_correction=do_bias_correction)
    w, g = rng.standard_normal(SHAPE), np.zeros(SHAPE)
    m, v = np.zeros(SHAPE), np.zeros(SHAPE)
    lr, step_count = scalar(0.01, np.float64), np.array(0, step_dtype)
    step, _ = build_kernel("adam_update", [w, g, m, v, lr, step_count], [w, m, v], **attrs)
    ref = (w.copy(), m.copy(), v.copy())
    for k in range(1, 5):
        g[...], step_count[...] = rng.standard_normal(SHAPE), k
        ref = adam_reference(*ref[:1], g, *ref[1:], 0.01, k, **attrs)
        step()
        for got, want in zip((w, m, v), ref):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_matches_torch(build_kernel, rng, weight_decay) -> None:
    torch = pytest.importorskip("torch")
    w0 = rng.standard_normal((5, 7)).astype(np.float32)
    grads = rng.standard_normal((6, 5, 7)).astype(np.float32)
    param = torch.nn.Parameter(torch.tensor(w0))
    cls = torch.optim.AdamW if weight_decay else torch.optim.Adam
    opt = cls([param], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    w, g, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0), np.zeros_like(w0)
    lr, count = scalar(0.01), np.array(0, np.int64)
    attrs = dict(beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=weight_decay, do_bias_correction=True)
    step, _ = build_kernel("adam_update", [w, g, m, v, lr, count], [w, m, v], **attrs)
    for k, grad in enumerate(grads, start=1):
        param.grad = torch.tensor(grad)
        opt.step()
        g[...], count[...] = grad, k
        step()
        np.testing.assert_allclose(w, param.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_sgd_momentum_matches_torch_sgd(build_kernel, rng) -> None:
    """torch's momentum buffer is OneFlow's m divided by -lr, so the weights agree at a fixed lr."""
    torch = pytest.importorskip("torch")
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    param = torch.nn.Parameter(torch.tensor(w0))
    opt = torch.optim.SGD([param], lr=0.1, momentum=0.9)
    w, g, m, lr = w0.copy(), np.zeros_like(w0), np.zeros_like(w0), scalar(0.1)
    step, _ = build_kernel("momentum_update", [w, g, m, lr], [w, m], beta=0.9, weight_decay=0.0)
    for grad in rng.standard_normal((5, 3, 4)).astype(np.float32):
        param.grad = torch.tensor(grad)
        opt.step()
        g[...] = grad
        step()
        np.testing.assert_allclose(w, param.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads_", [1, 2, 3])
@pytest.mark.parametrize("name", ["sgd_update", "momentum_update"])
def test_a_large_variable_is_updated_in_slices_per_thread(build_kernel, rng, name, threads_) -> None:
    """A variable of 2**20 elements or more is cut into slices, one part per CPU thread: same result."""
    from irflow.runtime import threads

    shape = (2049, 512)  # more than 2**20 elements, not a multiple of the 64 slices
    w, g, m = rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal(shape)
    lr = scalar(0.05, np.float64)
    if name == "sgd_update":
        ins, outs, attrs = [w, g, lr], [w], {"weight_decay": 0.1}
        ref_w = w - 0.05 * (g + 0.1 * w)
    else:
        ins, outs, attrs = [w, g, m, lr], [w, m], {"beta": 0.9, "weight_decay": 0.1}
        ref_m = 0.9 * m - 0.05 * (g + 0.1 * w)
        ref_w = w + ref_m
    try:
        threads.set_cpu_thread_num(threads_)
        step, _ = build_kernel(name, ins, outs, **attrs)
        step()
    finally:
        threads.set_cpu_thread_num(None)
    np.testing.assert_allclose(w, ref_w, rtol=1e-13)
    if name == "momentum_update":
        np.testing.assert_allclose(m, ref_m, rtol=1e-13)


def lamb_reference(w, g, m, v, lr, step, beta1, beta2, epsilon, weight_decay=0.0):
    """OneFlow's LAMB in float64 scalars: the trust ratio of the whole variable (of u alone, before the decay)."""
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    u = (m / (1 - beta1**step)) / np.sqrt(v / (1 - beta2**step) + epsilon)
    w_norm, u_norm = math.sqrt(float(np.sum(w * w))), math.sqrt(float(np.sum(u * u)))
    ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    return w - lr * ratio * (u + weight_decay * w), m, v


@pytest.mark.parametrize("zero_weight", [False, True])
def test_lamb_follows_oneflow(build_kernel, rng, zero_weight) -> None:
    """A zero variable has no norm to trust: the ratio is 1 and the step is the plain Adam direction."""
    w = np.zeros(SHAPE) if zero_weight else rng.standard_normal(SHAPE)
    g, m, v = np.zeros(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE)
    lr, count = scalar(0.01, np.float64), np.array(0, np.int64)
    step, _ = build_kernel("lamb_update", [w, g, m, v, lr, count], [w, m, v], beta1=0.9, beta2=0.99, epsilon=1e-3)
    ref = (w.copy(), m.copy(), v.copy())
    for k in range(1, 5):
        g[...], count[...] = rng.standard_normal(SHAPE), k
        ref = lamb_reference(ref[0], g, ref[1], ref[2], 0.01, k, 0.9, 0.99, 1e-3)
        step()
        for got, want in zip((w, m, v), ref):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def lars_reference(w, g, m, lr, momentum_beta, epsilon, lars_coefficient, weight_decay=0.0):
    """OneFlow's LARS in float64 scalars: the local rate from the whole variable's norms, 1 when either is 0."""
    w_norm, g_norm = math.sqrt(float(np.sum(w * w))), math.sqrt(float(np.sum(g * g)))
    ratio = lars_coefficient * w_norm / (epsilon + g_norm + weight_decay * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
    m = momentum_beta * m - lr * ratio * (g + weight_decay * w)
    return w + m, m


@pytest.mark.parametrize("zero_weight", [False, True])
def test_lars_follows_oneflow(build_kernel, rng, zero_weight) -> None:
    """A zero variable has no norm to trust: its first step is momentum SGD at the plain lr, not lr * coefficient."""
    w = np.zeros(SHAPE) if zero_weight else rng.standard_normal(SHAPE)
    g, m, lr = np.zeros(SHAPE), np.zeros(SHAPE), scalar(0.05, np.float64)
    attrs = dict(momentum_beta=0.9, epsilon=1e-3, lars_coefficient=0.02)
    step, _ = build_kernel("lars_update", [w, g, m, lr], [w, m], **attrs)
    ref = (w.copy(), m.copy())
    for _ in range(4):
        g[...] = rng.standard_normal(SHAPE)
        ref = lars_reference(ref[0], g, ref[1], 0.05, **attrs)
        step()
        for got, want in zip((w, m), ref):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def pieces(whole: np.ndarray, axis: int, parts: int) -> list[np.ndarray]:
    """`whole` cut along `axis` into ceil-sized chunks, each padded with garbage (as a split variable's pieces,
    whose padding an update writes too): the norms must not see it."""
    size = -(-whole.shape[axis] // parts)
    out = []
    for k in range(parts):
        piece = np.full((*whole.shape[:axis], size, *whole.shape[axis + 1 :]), 1e3)
        real = np.take(whole, range(k * size, min((k + 1) * size, whole.shape[axis])), axis=axis)
        piece[(slice(None),) * axis + (slice(0, real.shape[axis]),)] = real
        out.append(piece)
    return out


def joined(parts: list[np.ndarray], axis: int, size: int) -> np.ndarray:
    return np.take(np.concatenate(parts, axis=axis), range(size), axis=axis)


def sharded_step(norms: list, updates: list, total: np.ndarray) -> None:
    """One step of a split variable: every piece's squared norms, summed into `total` (the all-reduce), then
    every piece's update reading `total`."""
    total[...] = 0
    for run, out in norms:
        run()
        total += out[0]
    for run in updates:
        run()


@pytest.mark.parametrize("axis, parts", [(0, 2), (0, 3), (1, 2)])
def test_lamb_on_pieces_with_their_summed_norms_is_lamb_on_the_whole(build_kernel, rng, axis, parts) -> None:
    """Each piece's lamb_norms over its real entries, summed, fed to each piece's lamb_update: the pieces then hold
    OneFlow's LAMB step of the whole variable (5 x 3: uneven over 2 and 3 devices, padding full of garbage)."""
    shape, attrs = (5, 3), dict(beta1=0.9, beta2=0.99, epsilon=1e-3)
    w, m, v = rng.standard_normal(shape), np.zeros(shape), np.zeros(shape)
    ws, ms, vs = (pieces(a, axis, parts) for a in (w, m, v))
    gs = [np.zeros_like(p) for p in ws]
    lr, count = scalar(0.01, np.float64), np.array(0, np.int64)
    valid = [p.shape[axis] - max(0, (k + 1) * p.shape[axis] - shape[axis]) for k, p in enumerate(ws)]
    norms = [build_kernel("lamb_norms", [ws[k], gs[k], ms[k], vs[k], count], [((2,), np.float64)],
                          valid=tuple(valid[k] if a == axis else n for a, n in enumerate(shape)), **attrs)
             for k in range(parts)]
    total = np.zeros(2)
    updates = [build_kernel("lamb_update", [ws[k], gs[k], ms[k], vs[k], lr, count, total], [ws[k], ms[k], vs[k]],
                            weight_decay=0.1, **attrs)[0] for k in range(parts)]
    ref = (w, m, v)
    for step in range(1, 4):
        g = rng.standard_normal(shape)
        for k, piece in enumerate(pieces(g, axis, parts)):
            gs[k][...] = piece
        count[...] = step
        ref = lamb_reference(ref[0], g, ref[1], ref[2], 0.01, step, 0.9, 0.99, 1e-3, weight_decay=0.1)
        sharded_step(norms, updates, total)
        for got, want in zip((ws, ms, vs), ref):
            np.testing.assert_allclose(joined(got, axis, shape[axis]), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("weight_decay", [0.0, 0.2])
def test_lars_on_pieces_with_their_summed_norms_is_lars_on_the_whole(build_kernel, rng, weight_decay) -> None:
    shape, attrs = (5, 3), dict(momentum_beta=0.9, epsilon=1e-3, lars_coefficient=0.02, weight_decay=weight_decay)
    w, m = rng.standard_normal(shape), np.zeros(shape)
    ws, ms = pieces(w, 0, 3), pieces(m, 0, 3)
    gs = [np.zeros_like(p) for p in ws]
    lr, total = scalar(0.05, np.float64), np.zeros(2)
    norms = [build_kernel("lars_norms", [ws[k], gs[k]], [((2,), np.float64)], valid=(n, 3))
             for k, n in enumerate((2, 2, 1))]
    updates = [build_kernel("lars_update", [ws[k], gs[k], ms[k], lr, total], [ws[k], ms[k]], **attrs)[0]
               for k in range(3)]
    ref = (w, m)
    for _ in range(3):
        g = rng.standard_normal(shape)
        for k, piece in enumerate(pieces(g, 0, 3)):
            gs[k][...] = piece
        ref = lars_reference(ref[0], g, ref[1], 0.05, **attrs)
        sharded_step(norms, updates, total)
        for got, want in zip((ws, ms), ref):
            np.testing.assert_allclose(joined(got, 0, 5), want, rtol=1e-12, atol=1e-15)


def rmsprop_reference(w, g, ms, mg, lr, decay_rate, epsilon):
    """OneFlow's RMSProp element by element: epsilon under the square root; centered when mg is given."""
    w, ms = w.copy(), ms.copy()
    mg = None if mg is None else mg.copy()
    for i in np.ndindex(*w.shape):
        ms[i] = decay_rate * ms[i] + (1 - decay_rate) * g[i] ** 2
        denominator = ms[i]
        if mg is not None:
            mg[i] = decay_rate * mg[i] + (1 - decay_rate) * g[i]
            denominator -= mg[i] ** 2
        w[i] -= lr * g[i] / math.sqrt(denominator + epsilon)
    return w, ms, mg


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_follows_oneflow(build_kernel, rng, centered) -> None:
    w, g, ms, mg = rng.standard_normal(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE)
    lr = scalar(0.01, np.float64)
    state = [ms, mg] if centered else [ms]
    name = "centered_rmsprop_update" if centered else "rmsprop_update"
    step, _ = build_kernel(name, [w, g, *state, lr], [w, *state], decay_rate=0.9, epsilon=0.05)
    ref = (w.copy(), ms.copy(), mg.copy() if centered else None)
    for _ in range(4):
        g[...] = rng.standard_normal(SHAPE)
        ref = rmsprop_reference(ref[0], g, ref[1], ref[2], 0.01, 0.9, 0.05)
        step()
        for got, want in zip((w, ms, mg), ref):
            if want is not None:
                np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_matches_torch_when_epsilon_is_zero(build_kernel, rng, centered) -> None:
    """torch.optim.RMSprop divides by sqrt(.) + eps, OneFlow by sqrt(. + eps): the same update at eps = 0."""
    torch = pytest.importorskip("torch")
    w0 = rng.standard_normal((5, 7)).astype(np.float32)
    param = torch.nn.Parameter(torch.tensor(w0))
    opt = torch.optim.RMSprop([param], lr=0.01, alpha=0.9, eps=0.0, centered=centered)
    w, g = w0.copy(), np.zeros_like(w0)
    state = [np.zeros_like(w0) for _ in range(1 + centered)]
    name = "centered_rmsprop_update" if centered else "rmsprop_update"
    step, _ = build_kernel(name, [w, g, *state, scalar(0.01)], [w, *state], decay_rate=0.9, epsilon=0.0)
    for grad in rng.standard_normal((6, 5, 7)).astype(np.float32):
        param.grad = torch.tensor(grad)
        opt.step()
        g[...] = grad
        step()
        np.testing.assert_allclose(w, param.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_place", [True, False])
def test_lazy_adam_writes_only_the_present_elements(build_kernel, rng, in_place) -> None:
    """OneFlow's lazy_adam where `present`: w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps); the rest,
    in the outputs too when they are not the inputs, keeps w, m and v."""
    w, g, m, v = rng.standard_normal(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE)
    present, lr, count = np.zeros(SHAPE, np.int8), scalar(0.01, np.float64), np.array(0, np.int64)
    outs = [w, m, v] if in_place else [np.full(SHAPE, np.nan) for _ in range(3)]
    step, _ = build_kernel("lazy_adam_update", [w, g, present, m, v, lr, count], outs, beta1=0.8, beta2=0.9,
                           epsilon=1e-3)
    want = [w.copy(), m.copy(), v.copy()]
    for k in range(1, 4):
        g[...], present[...], count[...] = rng.standard_normal(SHAPE), rng.integers(0, 2, SHAPE), k
        if not in_place:
            w[...], m[...], v[...] = want
        ref_w, ref_m, ref_v = (a.copy() for a in want)
        for i in zip(*np.nonzero(present)):
            ref_m[i] = 0.8 * ref_m[i] + 0.2 * g[i]
            ref_v[i] = 0.9 * ref_v[i] + 0.1 * g[i] ** 2
            ref_w[i] -= 0.01 * math.sqrt(1 - 0.9**k) / (1 - 0.8**k) * ref_m[i] / (math.sqrt(ref_v[i]) + 1e-3)
        want = [ref_w, ref_m, ref_v]
        step()
        for got, expected in zip(outs, want):
            np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_indexed_slices_momentum_updates_the_present_rows(build_kernel, rng) -> None:
    """OneFlow's momentum on the rows `present` counts (here rows 0 and 2, gathered 3 times); the others keep
    w and m."""
    w, g, mom = rng.standard_normal(SHAPE), rng.standard_normal(SHAPE), rng.standard_normal(SHAPE)
    present = np.zeros(SHAPE, np.int8)
    present[[0, 2]] = 3
    step, (got_w, got_m) = build_kernel("indexed_slices_momentum_update", [w, g, present, mom, scalar(0.1, np.float64)],
                                        [(SHAPE, np.float64)] * 2, beta=0.9, weight_decay=0.1)
    step()
    want_m, want_w = mom.copy(), w.copy()
    want_m[[0, 2]] = 0.9 * mom[[0, 2]] - 0.1 * (g[[0, 2]] + 0.1 * w[[0, 2]])
    want_w[[0, 2]] += want_m[[0, 2]]
    np.testing.assert_allclose(got_m, want_m, rtol=1e-14)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-14)
