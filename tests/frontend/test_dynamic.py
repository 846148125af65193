"""Mirrored placeholders smaller than declared: `tp.ListNumpy.Placeholder((100, 784))` takes (n, 784), n <= 100.

Memory is planned at the bound, kernels run on views cut to the actual rows,
and no step allocates array memory (docs/dynamic.md). Oracles: numpy for the
forward pass, PyTorch for training.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

BOUND = 100
NUMPY_DOMAIN = 389047  # numpy reports its array data to tracemalloc under this domain


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def double_config() -> flow.FunctionConfig:
    """A job config whose values default to float64, for comparisons at 1e-7 and central differences."""
    config = flow.function_config()
    config.default_data_type(flow.double)
    return config


def mlp_predict():
    @flow.global_function(type="predict")
    def mlp(images: tp.ListNumpy.Placeholder((BOUND, 784), dtype=flow.float)) -> tp.ListNumpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")  # MARK-dense1
        return flow.layers.dense(hidden, 10, name="dense2")

    return mlp


def random_weights(rng: np.random.Generator, hidden: int = 512) -> dict[str, np.ndarray]:
    shapes = {"dense1-weight": (hidden, 784), "dense1-bias": (hidden,), "dense2-weight": (10, hidden), "dense2-bias": (10,)}
    return {name: (rng.standard_normal(shape) * 0.05).astype(np.float32) for name, shape in shapes.items()}


def reference(w: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    hidden = np.maximum(x @ w["dense1-weight"].T + w["dense1-bias"], 0)
    return hidden @ w["dense2-weight"].T + w["dense2-bias"]


def test_outputs_have_the_actual_rows_and_match_numpy():
    mlp = mlp_predict()
    rng = np.random.default_rng(0)
    weights = random_weights(rng)
    flow.load_variables(weights)
    x = rng.random((BOUND, 784), dtype=np.float32)
    for n in (1, 7, 100, 7, 0):
        (out,) = mlp([x[:n]])
        assert out.shape == (n, 10)
        np.testing.assert_allclose(out, reference(weights, x[:n]), rtol=1e-5, atol=1e-5)


def test_the_ir_is_dynamic_within_the_bound_and_planned_at_it():
    mlp = mlp_predict()

    @flow.global_function(type="predict")
    def static(images: tp.Numpy.Placeholder((BOUND, 784), dtype=flow.float)) -> tp.Numpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
        return flow.layers.dense(hidden, 10, name="dense2")

    assert "tensor<100x784xf32, #job.bounded<[0, 1]>>" in mlp.ir("job")
    program = mlp.ir("buffer")
    assert "buffer.cut" in program and "memref<?x512xf32>" in program
    # the arena holds the bound's rows: the plan of the static job at the bound
    assert mlp.memory_plan().arena_size == static.memory_plan().arena_size >= (BOUND * 784 + BOUND * 512) * 4


@pytest.mark.parametrize(
    "shape, expected",
    [
        ((101, 784), r"argument 'images': expected shape \(<=100, <=784\) \(within the placeholder's shape \(100, 784\)\), given \(101, 784\)"),
        ((5, 800), r"argument 'images': expected shape \(<=100, <=784\) .*given \(5, 800\)"),
        ((5, 784, 1), r"given \(5, 784, 1\)"),
    ],
)
def test_over_the_bound_is_an_error_naming_argument_bound_and_shape(shape, expected):
    mlp = mlp_predict()
    with pytest.raises(flow.ExecutionError, match=expected) as info:
        mlp([np.zeros(shape, np.float32)])
    assert __file__ in str(info.value)  # at the caller's line


def test_a_dynamic_batch_is_upsampled_shuffled_and_sampled_at_its_actual_size():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.ListNumpy.Placeholder((5, 2, 3, 3), dtype=flow.double),
              p: tp.ListNumpy.Placeholder((50, 40), dtype=flow.double)) -> Tuple[tp.Numpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        s = flow.get_variable("s", shape=(1,), dtype=flow.double, initializer=flow.ones_initializer())
        larger = flow.layers.upsample_2d(x * s, size=(2, 3), data_format="NCHW")
        loss = flow.math.reduce_sum(flow.math.square(flow.math.tanh(larger)))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, larger, flow.random.shuffle(x), flow.random.bernoulli(p)

    def loss_of(s: np.ndarray, x: np.ndarray) -> float:
        return float(np.sum(np.tanh(np.repeat(np.repeat(x * s, 2, axis=2), 3, axis=3)) ** 2))

    rng, s, orders = np.random.default_rng(55), np.ones(1), []
    for n, rows in ((5, 50), (2, 20), (0, 0), (5, 30), (3, 50)):
        x = rng.standard_normal((n, 2, 3, 3))
        loss, (larger,), (shuffled,), (samples,) = train([x], [np.full((rows, 40), 0.3)])
        np.testing.assert_allclose(larger, np.repeat(np.repeat(x * s, 2, axis=2), 3, axis=3), rtol=1e-7)
        np.testing.assert_allclose(loss, loss_of(s, x), rtol=1e-7)
        s = s - float(np.float32(0.1)) * central_differences(lambda v: loss_of(v, x), s)
        np.testing.assert_allclose(flow.get_all_variables()["s"].numpy(), s, rtol=1e-6, err_msg=f"{n} images")
        order = [int(np.flatnonzero((x == row).all(axis=(1, 2, 3)))[0]) for row in shuffled]
        assert sorted(order) == list(range(n))  # a permutation of the actual images
        orders.append(order)
        assert samples.shape == (rows, 40) and set(np.unique(samples)) <= {0.0, 1.0}
        assert rows == 0 or 0.25 < samples.mean() < 0.35
    assert orders[0] != list(range(5)) or orders[3] != list(range(5))  # not the identity every time


def test_a_reshape_regroups_the_actual_rows_and_checks_they_make_whole_ones():
    @flow.global_function(type="predict")
    def regroup(x: tp.ListNumpy.Placeholder((6, 2, 3), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        flat = flow.reshape(x, (-1,))  # (<=36,): n rows of 6 elements
        return flat, flow.reshape(flat * 2.0, (-1, 4))  # (<=9, 4): 6 n / 4 rows, whole only for even n

    rng = np.random.default_rng(36)
    for n in (6, 2, 0, 4):
        x = rng.standard_normal((n, 2, 3)).astype(np.float32)
        flat, fours = regroup([x])
        np.testing.assert_array_equal(flat[0], x.reshape(-1))
        np.testing.assert_array_equal(fours[0], (2 * x).reshape(-1, 4))
    with pytest.raises(flow.ExecutionError, match=r"job.reshape: operand #0 axis 0, rows of 1 regrouped into rows of 4: "
                       r"18 rows do not make whole ones") as info:
        regroup([np.ones((3, 2, 3), np.float32)])
    assert f"{__file__}:" in str(info.value)
    np.testing.assert_array_equal(regroup([np.ones((2, 2, 3), np.float32)])[1][0], np.full((3, 4), 2.0, np.float32))
    assert "buffer.scale_size" in regroup.ir("buffer")
    with pytest.raises(flow.TraceError, match=r"flow.reshape: the dynamic rows of \(<=6, <=3\) cannot all become one "
                       r"row of \(1, 6, 3\)") as info:

        @flow.global_function(type="predict")
        def stacked(x: tp.ListNumpy.Placeholder((6, 3), dtype=flow.float)) -> tp.ListNumpy:
            return flow.stack([x, x], axis=0)  # MARK-stack: a new leading axis would hold all rows in one

    assert info.value.location.line == line_of("MARK-stack")


def traced_steps(job, arrays, monkeypatch, steps: int = 300) -> tuple[int, int, int]:
    """(numpy array bytes left by one first step at each size, array bytes grown over `steps` steps, transient peak).

    The BLAS thread check (threads.apply) is left out: threadpoolctl's ctypes
    lookups allocate a little on every call, in static and dynamic jobs alike.
    """
    from irflow.runtime.spmd import SpmdExecutor

    monkeypatch.setattr("irflow.runtime.threads.apply", lambda: None)
    exe = job.executable().executor

    def step(x: np.ndarray) -> None:
        if isinstance(exe, SpmdExecutor):  # the devices together, each output copied out as in a call
            exe(x)
            return
        exe.feed(x)
        for run in exe.steps:
            run()

    step(arrays[0])
    numpy_only = [tracemalloc.DomainFilter(True, NUMPY_DOMAIN)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(numpy_only)
        for x in arrays:  # each size once: a dynamic job builds a variant for each new one
            step(x)
        after = tracemalloc.take_snapshot().filter_traces(numpy_only)
        arrays_left = sum(s.size_diff for s in after.compare_to(before, "filename"))
        # Threads that earlier tests left running (watchdogs, async workers) allocate now and then, and
        # tracemalloc's peak counts them: the least of three rounds is the steps' own.
        grown, peak = [], []
        for _ in range(3):
            start = tracemalloc.take_snapshot().filter_traces(numpy_only)
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            for i in range(steps):
                step(arrays[i % len(arrays)])
            peak.append(tracemalloc.get_traced_memory()[1] - current)
            end = tracemalloc.take_snapshot().filter_traces(numpy_only)
            grown.append(sum(s.size_diff for s in end.compare_to(start, "filename")))
    finally:
        tracemalloc.stop()
    return arrays_left, min(grown), min(peak)


def test_steps_with_changing_rows_allocate_nothing_a_static_step_does_not(monkeypatch):
    mlp = mlp_predict()

    @flow.global_function(type="predict")
    def static(images: tp.Numpy.Placeholder((BOUND, 784), dtype=flow.float)) -> tp.Numpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
        return flow.layers.dense(hidden, 10, name="dense2")

    flow.load_variables(random_weights(np.random.default_rng(1)))
    x = np.random.default_rng(2).random((BOUND, 784), dtype=np.float32)
    mlp([x[:1]])  # compile both
    left, grown, peak = traced_steps(mlp, [[x[:n]] for n in range(BOUND, 0, -1)], monkeypatch)
    _, static_grown, static_peak = traced_steps(static, [[x]], monkeypatch)
    assert left == 0  # new sizes: views and closures, no array memory
    # known sizes, changing every step: no more than the static job at the bound, whose kernels are the same
    assert grown <= static_grown + 512
    assert peak <= static_peak + 1024  # a hidden layer of even 1 row would be 2 KiB
    last = mlp.executable().executor.results()[0]  # step 299 ran arrays[99], one row
    np.testing.assert_array_equal(last, mlp([x[:1]])[0])


# ----------------------------------------------------------------- training


def mlp_train(minimize_mean: bool):
    @flow.global_function(type="train")
    def train(
        images: tp.ListNumpy.Placeholder((BOUND, 784), dtype=flow.float),
        labels: tp.ListNumpy.Placeholder((BOUND,), dtype=flow.int32),
    ) -> tp.ListNumpy:
        hidden = flow.layers.dense(images, 64, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        # a per-sample loss is minimized through its mean (the seed divides by the actual rows);
        # flow.math.reduce_mean's gradient divides by them too
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_mean(loss) if minimize_mean else loss
        )
        return loss

    return train


@pytest.mark.parametrize("minimize_mean", [False, True], ids=["per-sample-loss", "reduce-mean"])
def test_training_with_a_smaller_last_batch_matches_pytorch(minimize_mean):
    torch = pytest.importorskip("torch")
    train = mlp_train(minimize_mean)
    rng = np.random.default_rng(3)
    weights = random_weights(rng, hidden=64)
    flow.load_variables(weights)
    model = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    with torch.no_grad():
        for p, name in zip(model.parameters(), weights):
            p.copy_(torch.from_numpy(weights[name]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    images = rng.random((250, 784), dtype=np.float32)
    labels = rng.integers(0, 10, 250).astype(np.int32)
    for epoch in range(2):
        for start in (0, 100, 200):  # batches of 100, 100 and 50 rows
            x, y = images[start : start + BOUND], labels[start : start + BOUND]
            (loss,) = train([x], [y])
            assert loss.shape == (len(x),)
            opt.zero_grad()
            expected = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
            expected.backward()
            opt.step()
            np.testing.assert_allclose(loss.mean(), expected.item(), rtol=1e-5, err_msg=f"epoch {epoch}, rows {start}")
    variables = flow.get_all_variables()
    for p, name in zip(model.parameters(), weights):
        np.testing.assert_allclose(variables[name].numpy(), p.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    "rows",
    [
        [(8,), (3,), (8,), (5,), (1,), (8,)],
        [(8, 3, 0, 5), (1, 1, 8, 0), (8, 8, 8, 8), (0, 0, 2, 0)],  # 4 devices in the mirrored view
    ],
    ids=["one-device", "mirrored-4-devices"],
)
def test_a_conv_net_trained_on_batches_of_changing_size_matches_pytorch(rows):
    """conv2d, max and average pooling (and their gradients) on a dynamic batch; sizes alternate, so a
    variant that disturbed another's scratch (padding, packed weights) would show. On several devices
    each device takes its own rows (none, for some), and the reference trains on all of them together."""
    torch = pytest.importorskip("torch")
    config = mirrored_config() if len(rows[0]) > 1 else flow.function_config()

    @flow.global_function(type="train", function_config=config)
    def train(
        images: tp.ListNumpy.Placeholder((8, 1, 12, 12), dtype=flow.float),
        labels: tp.ListNumpy.Placeholder((8,), dtype=flow.int32),
    ) -> tp.ListNumpy:
        conv = flow.layers.conv2d(images, 4, 3, padding="SAME", activation=flow.nn.relu, name="conv1")
        pool = flow.nn.max_pool2d(conv, ksize=2, strides=2, padding="SAME", data_format="NCHW")
        smooth = flow.nn.avg_pool2d(pool, ksize=3, strides=1, padding="SAME", data_format="NCHW")
        logits = flow.layers.dense(flow.reshape(smooth, (smooth.shape[0], -1)), 10, name="dense")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.AvgPool2d(3, 1, 1, count_include_pad=False),
        nn.Flatten(), nn.Linear(4 * 6 * 6, 10),
    )  # fmt: skip
    names = {"0.weight": "conv1-weight", "0.bias": "conv1-bias", "5.weight": "dense-weight", "5.bias": "dense-bias"}
    flow.load_variables({names[k]: p.detach().numpy().copy() for k, p in model.named_parameters()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(6)
    for sizes in rows:
        xs = [rng.random((n, 1, 12, 12), dtype=np.float32) for n in sizes]
        ys = [rng.integers(0, 10, n).astype(np.int32) for n in sizes]
        losses = train(xs, ys)
        x, y = np.concatenate(xs), np.concatenate(ys)
        opt.zero_grad()
        expected = nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
        expected.backward()
        opt.step()
        assert [loss.shape for loss in losses] == [(n,) for n in sizes]
        np.testing.assert_allclose(np.concatenate(losses).mean(), expected.item(), rtol=1e-5, err_msg=f"rows {sizes}")
    variables = flow.get_all_variables()
    for theirs, p in model.named_parameters():
        np.testing.assert_allclose(variables[names[theirs]].numpy(), p.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_inputs_whose_rows_disagree_are_a_located_error_that_changes_nothing():
    train = mlp_train(minimize_mean=True)
    flow.load_variables(random_weights(np.random.default_rng(4), hidden=64))
    before = {k: v.numpy().copy() for k, v in flow.get_all_variables().items()}
    with pytest.raises(flow.ExecutionError, match="sparse_softmax_cross_entropy.* must have the same size, given 7 and 5") as info:
        train([np.zeros((7, 784), np.float32)], [np.zeros(5, np.int32)])
    assert f"{__file__}:" in str(info.value)
    with pytest.raises(flow.ExecutionError, match=r"given \(101, 784\)"):
        train([np.zeros((101, 784), np.float32)], [np.zeros(101, np.int32)])
    after = flow.get_all_variables()
    for name, value in before.items():
        np.testing.assert_array_equal(after[name].numpy(), value, err_msg=name)


# ----------------------------------------------------------------- tensor lists (ListListNumpy)


def test_tensor_list_instances_of_varying_rows_come_back_one_by_one():
    @flow.global_function(type="predict")
    def scores(x: tp.ListListNumpy.Placeholder((10, 784))) -> Tuple[tp.ListListNumpy, tp.ListNumpy, tp.Numpy]:
        logits = flow.layers.dense(x, 10, name="proj")
        return flow.nn.relu(logits), logits, flow.math.reduce_sum(logits)

    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((10, 784)).astype(np.float32) * 0.05, rng.standard_normal(10).astype(np.float32)
    flow.load_variables({"proj-weight": w, "proj-bias": b})
    for rows in ([2, 5, 1], [10], [3], [0, 4], [1] * 10):
        instances = [rng.random((n, 784), dtype=np.float32) for n in rows]
        (per_instance,), (whole,), total = scores([instances])
        assert [a.shape for a in per_instance] == [(n, 10) for n in rows]
        for got, x in zip(per_instance, instances):
            np.testing.assert_allclose(got, np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-5)
        stacked = np.concatenate(instances) @ w.T + b
        np.testing.assert_allclose(whole, stacked, rtol=1e-5, atol=1e-5)  # a ListNumpy result: the rows together
        np.testing.assert_allclose(total, stacked.sum(), rtol=1e-4)


def test_tensor_list_over_the_bound_is_an_error_naming_the_instances():
    @flow.global_function(type="predict")
    def double(x: tp.ListListNumpy.Placeholder((10, 3))) -> tp.ListListNumpy:
        return x * 2.0

    a, b = np.ones((6, 3), np.float32), np.ones((5, 3), np.float32)
    with pytest.raises(flow.ExecutionError, match=r"argument 'x': its instances \(6, 3\), \(5, 3\) have 11 rows together, "
                                                  r"over the placeholder's bound 10"):
        double([[a, b]])
    with pytest.raises(flow.ExecutionError, match=r"argument 'x\[0\]\[1\]': expected shape \(<=10, 3\)"):
        double([[a, np.ones((2, 4), np.float32)]])
    with pytest.raises(TypeError, match="non-empty list of arrays"):
        double([[]])
    (out,) = double([[a, b[:4]]])
    assert [o.shape for o in out] == [(6, 3), (4, 3)]


def test_the_executor_itself_checks_the_bound():
    """A caller that skips the frontend (tools, tests) still cannot write past a buffer's bound."""
    mlp = mlp_predict()
    mlp([np.zeros((1, 784), np.float32)])
    exe = mlp.executable().executor
    with pytest.raises(flow.ExecutionError, match=r"input 0: axis 0 may have at most 100 elements \(its bound\), given shape \(101, 784\)"):
        exe([np.zeros((101, 784), np.float32)])
    assert exe([np.ones((3, 784), np.float32)])[0].shape == (3, 10)


def test_concat_and_column_slices_of_a_dynamic_batch_train_like_pytorch():
    torch = pytest.importorskip("torch")

    @flow.global_function(type="train")
    def train(x: tp.ListNumpy.Placeholder((6, 4), dtype=flow.float64)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        w = flow.get_variable("w", shape=(4, 3), dtype=flow.float64, initializer=flow.random_normal_initializer(seed=1))
        h = flow.matmul(x, w)
        both = flow.concat([h, x[:, 1:3]], axis=1)  # (<=6, 5)
        loss = flow.math.reduce_mean(flow.math.square(both), axis=1)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return both, loss

    w0 = flow.get_all_variables()["w"].numpy().copy()
    w = torch.tensor(w0, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    rng = np.random.default_rng(7)
    for n in (6, 2, 5):
        x = rng.standard_normal((n, 4))
        (both,), (loss,) = train([x])
        expected_both = torch.cat([torch.from_numpy(x) @ w, torch.from_numpy(x)[:, 1:3]], dim=1)
        # float64 throughout, but the learning rate is a float32 (0.1 to 1.5e-9)
        np.testing.assert_allclose(both, expected_both.detach().numpy(), rtol=1e-7, atol=1e-8)
        opt.zero_grad()
        expected_both.square().mean(dim=1).mean().backward()
        opt.step()
        assert loss.shape == (n,)
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w.detach().numpy(), rtol=1e-7, atol=1e-8)


# ----------------------------------------------------------------- every axis within the bound


def columns_job():
    @flow.global_function(type="predict")
    def columns(
        x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float), labels: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float)
    ) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        y = flow.nn.relu(x) * 2.0 - x
        return (
            y,
            flow.math.reduce_sum(y, axis=1),
            flow.math.reduce_mean(x, axis=0),
            flow.nn.softmax(x),
            flow.nn.softmax_cross_entropy_with_logits(labels, x),
            flow.transpose(x, perm=[1, 0]) + 1.0,
        )

    return columns


def columns_reference(x: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    softmax = e / e.sum(axis=1, keepdims=True)
    y = np.maximum(x, 0) * 2 - x
    return [y, y.sum(1), x.mean(0), softmax, -(labels * np.log(softmax)).sum(1), x.T + 1]


SHAPES = [(5, 6), (3, 4), (8, 2), (5, 6), (1, 1), (3, 4), (8, 6)]


def test_every_axis_of_a_list_placeholder_may_be_smaller_and_matches_numpy():
    columns = columns_job()
    rng = np.random.default_rng(3)
    for n, c in SHAPES:  # sizes come back to variants built before: what a kernel filled must still hold
        x = rng.standard_normal((n, c)).astype(np.float32)
        labels = rng.random((n, c), dtype=np.float32)
        outs = columns([x], [labels])
        for out, ref in zip(outs, columns_reference(x, labels), strict=True):
            assert out[0].shape == ref.shape
            np.testing.assert_allclose(out[0], ref, rtol=1e-5, atol=1e-6)


def test_an_axis_that_must_equal_a_static_one_is_checked_at_run_time_naming_the_argument():
    mlp = mlp_predict()
    flow.load_variables(random_weights(np.random.default_rng(4)))
    with pytest.raises(flow.ExecutionError, match=r"job.matmul: operand #0 axis 1 \(argument 'images' axis 1\) and "
                       r"operand #1 axis 1 \(static 784\) must have the same size, given 700 and 784") as info:
        mlp([np.zeros((5, 700), np.float32)])
    assert f"{__file__}:{line_of('MARK-dense1')}:" in str(info.value)  # the dense layer's line in mlp_predict
    assert mlp([np.zeros((5, 784), np.float32)])[0].shape == (5, 10)  # nothing was left half-done


def test_ops_that_take_an_axis_only_whole_pin_it_and_check_it_at_run_time():
    @flow.global_function(type="predict")
    def whole(x: tp.ListNumpy.Placeholder((4, 2, 3), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        flat = flow.reshape(x, (4, 6))  # axis 0 keeps its bound: the others are pinned
        return flat, flow.concat([flat, flat * 2.0], axis=1)  # concatenated on axis 1: pinned by reshape already

    x = np.random.default_rng(5).standard_normal((3, 2, 3)).astype(np.float32)
    flat, joined = whole([x])
    np.testing.assert_array_equal(flat[0], x.reshape(3, 6))
    np.testing.assert_allclose(joined[0], np.concatenate([x.reshape(3, 6), 2 * x.reshape(3, 6)], axis=1))
    assert "job.pin_size" in whole.ir("job")
    with pytest.raises(flow.ExecutionError, match=r"job.reshape takes axes \[1, 2\] of operand #0 at their bound: "
                       r".*\(argument 'x' axis 2\) and its bound 3 must have the same size, given 2 and 3") as info:
        whole([x[:, :, :2].copy()])
    assert f"{__file__}:" in str(info.value)

    y = np.ones((2, 3), np.float32)

    @flow.global_function(type="predict")
    def sparse(x: tp.ListNumpy.Placeholder((4, 3), dtype=flow.float),
               labels: tp.ListNumpy.Placeholder((4,), dtype=flow.int32)) -> tp.ListNumpy:
        return flow.nn.sparse_softmax_cross_entropy_with_logits(labels, x)  # its classes are static

    labels = np.array([2, 0], np.int32)
    e = np.exp(y - y.max(1, keepdims=True))
    np.testing.assert_allclose(sparse([y], [labels])[0], -np.log(e[[0, 1], labels] / e.sum(1)), rtol=1e-6)
    with pytest.raises(flow.ExecutionError, match=r"job.sparse_softmax_cross_entropy takes axes \[1\] .*given 2 and 3"):
        sparse([y[:, :2].copy()], [labels])


def test_training_through_regrouped_rows_matches_finite_differences():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.ListNumpy.Placeholder((4, 6), dtype=flow.double)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), dtype=flow.double, initializer=flow.ones_initializer())
        halves = flow.reshape(x, (-1, 3))  # each row of 6 as two rows of 3
        loss = flow.math.reduce_mean(flow.math.square(flow.matmul(halves, w) - 1.0))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    def loss_of(w: np.ndarray, x: np.ndarray) -> float:
        return float(np.mean((x.reshape(-1, 3) @ w - 1.0) ** 2))

    rng, w = np.random.default_rng(37), np.ones((3, 2))
    for n in (4, 1, 3, 4):
        x = rng.standard_normal((n, 6))
        np.testing.assert_allclose(train([x]), loss_of(w, x), rtol=1e-10)
        w = w - float(np.float32(0.1)) * central_differences(lambda v: loss_of(v, x), w)
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-7, err_msg=f"{n} rows")


def test_dense_labels_with_sizes_of_their_own_meet_the_logits_at_run_time():
    @flow.global_function(type="predict")
    def loss(x: tp.ListNumpy.Placeholder((4, 3), dtype=flow.float),
             labels: tp.ListNumpy.Placeholder((4, 5), dtype=flow.float)) -> tp.ListNumpy:
        logits = flow.layers.dense(x, 5, name="d")  # (<=4, 5): its classes static, the labels' dynamic
        return flow.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)  # MARK-dense-labels

    rng = np.random.default_rng(39)
    weights = {"d-weight": rng.standard_normal((5, 3)).astype(np.float32), "d-bias": np.zeros(5, np.float32)}
    flow.load_variables(weights)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    labels = rng.dirichlet(np.ones(5), 2).astype(np.float32)
    logits = x @ weights["d-weight"].T
    log_softmax = logits - logits.max(1, keepdims=True) - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True))
    np.testing.assert_allclose(loss([x], [labels])[0], -(labels * log_softmax).sum(1), rtol=1e-5)
    with pytest.raises(flow.ExecutionError, match=r"job.softmax_cross_entropy: operand #1 axis 1 \(argument 'labels' axis 1\) "
                       r"and operand #0 axis 1 \(static 5\) must have the same size, given 4 and 5") as info:
        loss([x], [labels[:, :4].copy()])
    assert info.value.location.line == line_of("MARK-dense-labels")


def test_concat_and_pad_along_a_dynamic_axis_take_the_actual_sizes_and_match_numpy():
    @flow.global_function(type="predict")
    def joined(
        a: tp.ListNumpy.Placeholder((4, 3), dtype=flow.float),
        b: tp.ListNumpy.Placeholder((5, 3), dtype=flow.float),
        c: tp.ListNumpy.Placeholder((2, 4), dtype=flow.float),
    ) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        rows = flow.concat([a, b * 2.0, a], axis=0)  # (<=13, 3): a's rows, b's, a's again
        columns = flow.concat([c, c * 3.0], axis=1)  # (<=2, <=8): c's columns twice
        padded = flow.pad(b, [(1, 2), (0, 0)], constant_value=7.0)  # (<=8, 3)
        return rows, columns, padded

    rng = np.random.default_rng(30)
    for n, m, k in ((4, 5, 4), (1, 0, 2), (0, 3, 1), (0, 0, 0), (2, 5, 3)):
        a, b = (rng.standard_normal((r, 3)).astype(np.float32) for r in (n, m))
        c = rng.standard_normal((2, k)).astype(np.float32)
        rows, columns, padded = joined([a], [b], [c])
        np.testing.assert_array_equal(rows[0], np.concatenate([a, 2 * b, a]))
        np.testing.assert_array_equal(columns[0], np.concatenate([c, 3 * c], axis=1))
        np.testing.assert_array_equal(padded[0], np.pad(b, [(1, 2), (0, 0)], constant_values=7.0))
    assert "tensor<13x3xf32, #job.bounded<[0, 1]>>" in joined.ir("job")  # a sum of rows, at their bounds
    assert "buffer.add_sizes" in joined.ir("buffer")


def test_training_through_a_concat_along_the_rows_matches_finite_differences():
    config = double_config()
    w0 = np.random.default_rng(31).standard_normal((3, 2))

    @flow.global_function(type="train", function_config=config)
    def train(a: tp.ListNumpy.Placeholder((4, 3), dtype=flow.double),
              b: tp.ListNumpy.Placeholder((5, 3), dtype=flow.double)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), dtype=flow.double, initializer=flow.zeros_initializer())
        # three parts: where the middle one's gradient starts depends on a's rows in this step
        first, middle = flow.matmul(a, w), flow.math.square(flow.matmul(b, w))
        joined = flow.concat([first, middle, flow.pad(first * 0.5, [(1, 0), (0, 0)])], axis=0)
        loss = flow.math.reduce_mean(flow.math.square(joined - 1.0))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    def loss_of(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
        first = a @ w
        joined = np.concatenate([first, (b @ w) ** 2, np.pad(first * 0.5, [(1, 0), (0, 0)])])
        return float(np.mean((joined - 1.0) ** 2))

    flow.load_variables({"w": w0})
    rng, w = np.random.default_rng(32), w0.copy()
    for n, m in ((4, 5), (1, 3), (0, 2), (3, 0), (4, 5)):
        a, b = rng.standard_normal((n, 3)), rng.standard_normal((m, 3))
        np.testing.assert_allclose(train([a], [b]), loss_of(w, a, b), rtol=1e-10)
        w = w - float(np.float32(0.1)) * central_differences(lambda v: loss_of(v, a, b), w)  # the job's rate
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-7, err_msg=f"rows {n}, {m}")
    assert "buffer.subview" in train.ir("buffer")


def test_slices_of_a_dynamic_axis_keep_the_rows_they_reach_as_numpy_does():
    @flow.global_function(type="predict")
    def cut(x: tp.ListNumpy.Placeholder((8, 3), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.Numpy]:
        strided = x[1:6:2] * 2.0  # (<=3, 3): the rows 1, 3 and 5 the actual ones reach
        window = flow.slice(x, [2, 1], [3, None])  # rows 2-4, columns 1 on
        return strided, window, x[3] + 1.0  # MARK-row-index: one row, static, there at run time

    rng = np.random.default_rng(40)
    for n in (8, 6, 4, 3, 2, 1):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        if n > 3:
            (strided,), (window,), row = cut([x])
            np.testing.assert_array_equal(row, x[3] + 1.0)
        else:
            with pytest.raises(flow.ExecutionError, match=r"Blob\[...\]: index 3 of axis 0 needs a size of 4 or more: "
                               r".* must have the same size, given 0 and 1") as info:
                cut([x])
            assert info.value.location.line == line_of("MARK-row-index")
            continue
        np.testing.assert_array_equal(strided, x[1:6:2] * 2.0)
        np.testing.assert_array_equal(window, x[2:5, 1:])
    assert "buffer.slice_size" in cut.ir("buffer")


def test_a_dynamic_axis_is_sliced_from_its_start_only():
    def job(given):
        flow.clear_default_session()

        @flow.global_function(type="predict")
        def cut(x: tp.ListNumpy.Placeholder((8, 3), dtype=flow.float)) -> tp.ListNumpy:
            if given == "index -1":
                return x[-1]  # MARK-index -1
            if given == "index 2:-1":
                return x[2:-1]  # MARK-index 2:-1
            return flow.slice(x, [-2, 0], [None, None])  # MARK-begin -2

    for given in ("index -1", "index 2:-1", "begin -2"):
        with pytest.raises(flow.TraceError, match=f"{given} counts from the end of axis 0 of \\(<=8, <=3\\), which is "
                           "dynamic: its actual size is known only at run time") as info:
            job(given)
        assert info.value.location.line == line_of(f"MARK-{given}")


def test_top_k_along_a_dynamic_axis_takes_k_of_its_entries_or_all_there_are():
    @flow.global_function(type="predict")
    def largest(x: tp.ListNumpy.Placeholder((6, 5), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        return flow.math.top_k(x, k=3), flow.math.top_k(x, axis=0, k=4)

    rng = np.random.default_rng(44)
    for n, m in ((6, 5), (4, 2), (3, 3), (0, 5), (5, 0), (2, 5)):
        x = rng.standard_normal((n, m)).astype(np.float32)
        (columns,), (rows,) = largest([x])
        np.testing.assert_array_equal(columns, np.argsort(-x, axis=1, kind="stable")[:, :3])
        np.testing.assert_array_equal(rows, np.argsort(-x, axis=0, kind="stable")[:4])
        assert columns.dtype == rows.dtype == np.int32


def test_sort_along_a_dynamic_axis_sorts_the_entries_there_are():
    @flow.global_function(type="predict")
    def ordered(x: tp.ListNumpy.Placeholder((6, 5), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        return flow.sort(x), flow.argsort(flow.transpose(x, [1, 0]), "DESCENDING")

    rng = np.random.default_rng(46)
    for n, m in ((6, 5), (4, 2), (0, 5), (5, 0), (1, 5)):
        x = rng.standard_normal((n, m)).astype(np.float32)
        (rows,), (columns,) = ordered([x])
        np.testing.assert_array_equal(rows, np.sort(x, axis=1))
        np.testing.assert_array_equal(columns, np.argsort(-x.T, axis=1, kind="stable"))


def test_training_through_gathers_of_dynamic_ids_and_rows_matches_numpy_and_finite_differences():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(
        ids: tp.ListNumpy.Placeholder((8,), dtype=flow.int32),
        x: tp.ListNumpy.Placeholder((6, 3), dtype=flow.double),
        pick: tp.ListNumpy.Placeholder((4,), dtype=flow.int32),
    ) -> Tuple[tp.Numpy, tp.ListNumpy]:
        table = flow.get_variable("emb", shape=(10, 3), dtype=flow.double, initializer=flow.ones_initializer())
        w = flow.get_variable("w", shape=(3, 3), dtype=flow.double, initializer=flow.ones_initializer())
        embedded = flow.gather(table, ids)  # an embedding of each call's own number of ids
        rows = flow.gather(flow.math.tanh(flow.matmul(x, w)), pick)  # MARK-pick: rows of a dynamic value
        loss = flow.math.reduce_sum(flow.math.square(embedded)) + flow.math.reduce_sum(rows * 0.5)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, rows

    def loss_of(table: np.ndarray, w: np.ndarray, ids: np.ndarray, x: np.ndarray, pick: np.ndarray) -> float:
        return float(np.sum(table[ids] ** 2) + np.sum(np.tanh(x @ w)[pick] * 0.5))

    rng, table, w = np.random.default_rng(46), np.ones((10, 3)), np.ones((3, 3))
    rate = float(np.float32(0.1))  # the learning rate as the job holds it
    for n, m, k in ((3, 6, 4), (8, 2, 3), (0, 1, 0), (5, 4, 4)):
        ids, x = rng.integers(0, 10, n).astype(np.int32), rng.standard_normal((m, 3))
        pick = rng.integers(0, m, k).astype(np.int32)
        loss, (rows,) = train([ids], [x], [pick])
        np.testing.assert_allclose(loss, loss_of(table, w, ids, x, pick), rtol=1e-7)
        np.testing.assert_allclose(rows, np.tanh(x @ w)[pick], rtol=1e-7)
        dtable = np.zeros_like(table)
        np.add.at(dtable, ids, 2 * table[ids])  # repeated ids add up
        dw = central_differences(lambda v: loss_of(table, v, ids, x, pick), w)
        table, w = table - rate * dtable, w - rate * dw
        variables = flow.get_all_variables()
        np.testing.assert_allclose(variables["emb"].numpy(), table, rtol=1e-12, err_msg=f"{n} ids")
        np.testing.assert_allclose(variables["w"].numpy(), w, rtol=1e-7, err_msg=f"{m} rows")
    before = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    with pytest.raises(flow.ExecutionError, match=r"gather: index 2 at position \[0\] is outside \[0, 2\) "
                       r"\(axis 0 of params has 2 entries\)") as info:
        train([np.array([1], np.int32)], [rng.standard_normal((2, 3))], [np.array([2], np.int32)])
    assert info.value.location.line == line_of("MARK-pick")
    for name, value in before.items():  # the failed step changed nothing
        np.testing.assert_array_equal(flow.get_all_variables()[name].numpy(), value, err_msg=name)
    assert "gather_grad" in train.ir("autodiff")


def test_training_through_a_dim_gather_of_dynamic_rows_and_columns_matches_finite_differences():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.ListNumpy.Placeholder((8, 5), dtype=flow.double),
              at: tp.ListNumpy.Placeholder((8, 2), dtype=flow.int32)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        s = flow.get_variable("s", shape=(1,), dtype=flow.double, initializer=flow.ones_initializer())
        picked = flow.dim_gather(flow.math.tanh(x * s), 1, at)  # each row's own columns of its own number
        loss = flow.math.reduce_sum(flow.math.square(picked))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, picked

    def loss_of(s: np.ndarray, x: np.ndarray, at: np.ndarray) -> float:
        return float(np.sum(np.take_along_axis(np.tanh(x * s), at, axis=1) ** 2))

    rng, s = np.random.default_rng(50), np.ones(1)
    for n, m, k in ((8, 5, 2), (3, 4, 1), (0, 5, 2), (5, 2, 2)):
        x, at = rng.standard_normal((n, m)), rng.integers(0, m, (n, k)).astype(np.int32)
        loss, (picked,) = train([x], [at])
        np.testing.assert_allclose(picked, np.take_along_axis(np.tanh(x * s), at, axis=1), rtol=1e-7)
        np.testing.assert_allclose(loss, loss_of(s, x, at), rtol=1e-7)
        s = s - float(np.float32(0.1)) * central_differences(lambda v: loss_of(v, x, at), s)
        np.testing.assert_allclose(flow.get_all_variables()["s"].numpy(), s, rtol=1e-7, err_msg=f"{n} x {m}")
    assert "job.dim_gather_grad" in train.ir("autodiff")


def test_training_through_gather_nd_of_dynamic_coordinates_and_rows_matches_numpy_and_finite_differences():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(
        at: tp.ListNumpy.Placeholder((8, 2), dtype=flow.int32),
        x: tp.ListNumpy.Placeholder((6, 4), dtype=flow.double),
        rows: tp.ListNumpy.Placeholder((5, 1), dtype=flow.int32),
    ) -> Tuple[tp.Numpy, tp.ListNumpy]:
        table = flow.get_variable("t", shape=(5, 4, 3), dtype=flow.double, initializer=flow.ones_initializer())
        s = flow.get_variable("s", shape=(1,), dtype=flow.double, initializer=flow.ones_initializer())
        picked = flow.gather_nd(table, at)  # each call's own number of (i, j) pairs
        taken = flow.gather_nd(flow.math.tanh(x * s), rows)  # rows of a value dynamic in both axes
        loss = flow.math.reduce_sum(flow.math.square(picked)) + flow.math.reduce_sum(taken * taken * 0.5)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, taken

    def loss_of(t: np.ndarray, s: np.ndarray, at: np.ndarray, x: np.ndarray, rows: np.ndarray) -> float:
        return float(np.sum(t[at[:, 0], at[:, 1]] ** 2) + np.sum(np.tanh(x * s)[rows[:, 0]] ** 2 * 0.5))

    rng, t, s = np.random.default_rng(52), np.ones((5, 4, 3)), np.ones(1)
    rate = float(np.float32(0.1))  # the learning rate as the job holds it
    for n, m, c, k in ((3, 6, 4, 2), (8, 2, 3, 5), (0, 1, 1, 0), (5, 4, 2, 3)):
        at = np.stack([rng.integers(0, 5, n), rng.integers(0, 4, n)], axis=1).astype(np.int32)
        x, rows = rng.standard_normal((m, c)), rng.integers(0, m, (k, 1)).astype(np.int32)
        loss, (taken,) = train([at], [x], [rows])
        np.testing.assert_allclose(loss, loss_of(t, s, at, x, rows), rtol=1e-7)
        np.testing.assert_allclose(taken, np.tanh(x * s)[rows[:, 0]], rtol=1e-7)
        dt = np.zeros_like(t)
        np.add.at(dt, (at[:, 0], at[:, 1]), 2 * t[at[:, 0], at[:, 1]])  # repeated pairs add up
        t, s = t - rate * dt, s - rate * central_differences(lambda v: loss_of(t, v, at, x, rows), s)
        np.testing.assert_allclose(flow.get_all_variables()["t"].numpy(), t, rtol=1e-12, err_msg=f"{n} pairs")
        np.testing.assert_allclose(flow.get_all_variables()["s"].numpy(), s, rtol=1e-7, err_msg=f"{m} x {c}")


def test_training_through_tensor_scatters_into_dynamic_rows_matches_numpy_and_finite_differences():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(
        x: tp.ListNumpy.Placeholder((6, 3), dtype=flow.double),
        at: tp.ListNumpy.Placeholder((4, 1), dtype=flow.int32),
        updates: tp.ListNumpy.Placeholder((4, 3), dtype=flow.double),
    ) -> Tuple[tp.Numpy, tp.ListNumpy, tp.ListNumpy]:
        s = flow.get_variable("s", shape=(1,), dtype=flow.double, initializer=flow.ones_initializer())
        added = flow.tensor_scatter_nd_add(flow.math.tanh(x * s), at, updates * s)
        replaced = flow.tensor_scatter_nd_update(x * s, at, flow.math.square(updates * s))
        loss = flow.math.reduce_sum(added * added) + flow.math.reduce_sum(replaced)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, added, replaced

    def forward(s: np.ndarray, x: np.ndarray, at: np.ndarray, updates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        added, replaced = np.tanh(x * s), x * s
        np.add.at(added, at[:, 0], updates * s)  # repeated rows add up
        replaced[at[:, 0]] = 0.0  # OneFlow's update: the rows zeroed, then every update added
        np.add.at(replaced, at[:, 0], (updates * s) ** 2)
        return added, replaced

    def loss_of(s: np.ndarray, *data: np.ndarray) -> float:
        added, replaced = forward(s, *data)
        return float(np.sum(added * added) + np.sum(replaced))

    rng, s = np.random.default_rng(54), np.ones(1)
    for m, k in ((6, 4), (2, 3), (1, 0), (5, 2)):
        data = rng.standard_normal((m, 3)), rng.integers(0, m, (k, 1)).astype(np.int32), rng.standard_normal((k, 3))
        loss, (added,), (replaced,) = train(*([a] for a in data))
        for got, want in zip((added, replaced), forward(s, *data)):
            np.testing.assert_allclose(got, want, rtol=1e-7)
        np.testing.assert_allclose(loss, loss_of(s, *data), rtol=1e-7)
        s = s - float(np.float32(0.1)) * central_differences(lambda v: loss_of(v, *data), s)
        np.testing.assert_allclose(flow.get_all_variables()["s"].numpy(), s, rtol=1e-6, err_msg=f"{m} rows, {k} updates")


def test_a_batched_gather_of_dynamic_batches_matches_numpy():
    @flow.global_function(type="predict")
    def picked(x: tp.ListNumpy.Placeholder((4, 5, 3), dtype=flow.float),
               at: tp.ListNumpy.Placeholder((4, 2), dtype=flow.int32)) -> tp.ListNumpy:
        return flow.gather(x, at, axis=1, batch_dims=1)  # each batch entry's own rows of its own x

    rng = np.random.default_rng(47)
    for n, m, k in ((4, 5, 2), (2, 3, 1), (0, 5, 2), (3, 1, 2)):
        x, at = rng.standard_normal((n, m, 3)).astype(np.float32), rng.integers(0, m, (n, k)).astype(np.int32)
        (got,) = picked([x], [at])
        np.testing.assert_array_equal(got, np.take_along_axis(x, at[:, :, None], axis=1))


def test_dropout_of_a_dynamic_batch_masks_the_actual_rows_with_one_stream_of_draws():
    config = double_config()

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.ListNumpy.Placeholder((16, 8), dtype=flow.double)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        w = flow.get_variable("w", shape=(8,), dtype=flow.double, initializer=flow.ones_initializer())
        kept = flow.nn.dropout(x * w, rate=0.5)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_sum(kept, axis=1)
        )
        return kept, flow.nn.random_mask_like(x, 0.3)

    rng, w, scales = np.random.default_rng(49), np.ones(8), []
    for n in (5, 16, 5, 0, 3):
        x = rng.random((n, 8)) + 0.5
        (kept,), (mask,) = train([x])
        assert kept.shape == mask.shape == (n, 8) and mask.dtype == np.int8
        scale = kept / (x * w)  # each element dropped or kept at 1/(1 - rate)
        assert np.all(np.isclose(scale, 0.0) | np.isclose(scale, 2.0)) and set(np.unique(mask)) <= {0, 1}
        scales.append(scale)
        w = w - float(np.float32(0.1)) * (scale * x).sum(axis=0) / max(n, 1)  # the mean of the loss's rows
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12, err_msg=f"{n} rows")
    assert not np.array_equal(scales[0], scales[2])  # steps of one size draw on from the same generator
    assert 0.3 < np.mean(np.concatenate(scales) == 0.0) < 0.7


def test_training_through_a_slice_of_the_rows_matches_finite_differences():
    config = double_config()
    w0 = np.random.default_rng(41).standard_normal((3, 2))

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.ListNumpy.Placeholder((9, 3), dtype=flow.double)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), dtype=flow.double, initializer=flow.zeros_initializer())
        h = flow.math.tanh(flow.matmul(x, w))
        loss = flow.math.reduce_mean(flow.math.square(h[1:7:2] - 0.5)) + flow.math.reduce_sum(h[0] * 0.25)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    def loss_of(w: np.ndarray, x: np.ndarray) -> float:
        h = np.tanh(x @ w)
        return float(np.mean((h[1:7:2] - 0.5) ** 2) + np.sum(h[0] * 0.25))

    flow.load_variables({"w": w0})
    rng, w = np.random.default_rng(42), w0.copy()
    for n in (9, 4, 2, 7, 6):
        x = rng.standard_normal((n, 3))
        np.testing.assert_allclose(train([x]), loss_of(w, x), rtol=1e-10)
        w = w - float(np.float32(0.1)) * central_differences(lambda v: loss_of(v, x), w)  # the job's rate
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-7, err_msg=f"{n} rows")
    assert "job.slice_grad" in train.ir("autodiff")


def test_steps_with_two_changing_axes_allocate_nothing_a_static_step_does_not(monkeypatch):
    columns = columns_job()

    @flow.global_function(type="predict")
    def static(
        x: tp.Numpy.Placeholder((8, 6), dtype=flow.float), labels: tp.Numpy.Placeholder((8, 6), dtype=flow.float)
    ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        y = flow.nn.relu(x) * 2.0 - x
        return (y, flow.math.reduce_sum(y, axis=1), flow.math.reduce_mean(x, axis=0), flow.nn.softmax(x),
                flow.nn.softmax_cross_entropy_with_logits(labels, x), flow.transpose(x, perm=[1, 0]) + 1.0)

    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    labels = rng.random((8, 6), dtype=np.float32)
    columns([x], [labels])  # compile both
    steps = [[x[:n, :c].copy(), labels[:n, :c].copy()] for n in range(1, 9) for c in range(1, 7)]
    left, grown, peak = traced_steps(columns, steps, monkeypatch, steps=200)
    _, static_grown, static_peak = traced_steps(static, [[x, labels]], monkeypatch, steps=200)
    assert left == 0  # 48 new (rows, columns) variants: views and closures, no array memory
    assert grown <= static_grown + 512
    assert peak <= static_peak + 1024


def test_tensor_buffers_of_run_time_element_shapes_allocate_nothing_a_static_step_does_not(monkeypatch):
    """A TensorBuffer made from a dynamic input is planned at its bound: its slots are the arena's, and
    each new element shape is a variant of views (docs/dynamic.md)."""

    def elements(x):
        b = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        first, second = flow.tensor_buffer_to_list_of_tensors(b, (6,), flow.float, dynamic_out=True)
        return flow.nn.softmax(first), flow.math.reduce_sum(second * 2.0, keepdims=True)

    @flow.global_function(type="predict")
    def dynamic(x: tp.ListNumpy.Placeholder((2, 6), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.ListNumpy]:
        return elements(x)

    @flow.global_function(type="predict")
    def static(x: tp.Numpy.Placeholder((2, 6), dtype=flow.float)) -> Tuple[tp.Numpy, tp.Numpy]:
        return elements(x)

    x = np.random.default_rng(8).standard_normal((2, 6)).astype(np.float32)
    steps = [[x[:, :c].copy()] for c in range(1, 7)]
    dynamic(steps[0])
    static(x)
    assert dynamic.memory_plan().arena_size == static.memory_plan().arena_size  # the same buffers, at the bound
    left, grown, peak = traced_steps(dynamic, steps, monkeypatch, steps=200)
    _, static_grown, static_peak = traced_steps(static, [[x]], monkeypatch, steps=200)
    assert left == 0
    assert grown <= static_grown + 512
    assert peak <= static_peak + 1024
    (first,), (total,) = dynamic([x[:, :3].copy()])
    e = np.exp(x[0, :3] - x[0, :3].max())
    np.testing.assert_allclose(first, e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(total, [2 * x[1, :3].sum()], rtol=1e-5)


def test_the_tracer_pins_what_an_ops_size_groups_do_not_take():
    from xdsl.dialects.builtin import f32

    from irflow.dialects import job
    from irflow.dialects.bounds import with_dynamic
    from irflow.frontend.tracing import unaccepted_axes

    images = with_dynamic(job.tensor((8, 3, 28, 28), f32), [0, 1, 2, 3])
    weight = job.tensor((4, 3, 5, 5), f32)
    conv = {"strides": [1, 1], "pads": [0, 0, 0, 0]}
    assert unaccepted_axes(job.Conv2DOp, [images, weight], conv) == {0: [1, 2, 3]}  # the batch alone is taken
    rows = with_dynamic(job.tensor((8, 784), f32), [0, 1])
    assert unaccepted_axes(job.MatmulOp, [rows, job.tensor((10, 784), f32)], {"transpose_b": True}) == {}
    assert unaccepted_axes(job.ConcatOp, [rows, rows], {"axis": 1}) == {}  # the concatenated axis: their sum
    # concatenated along the rows of several devices, the inputs are gathered: their features pinned
    assert unaccepted_axes(job.ConcatOp, [rows, rows], {"axis": 0}, own_sizes=True) == {0: [1], 1: [1]}
    # an op that refuses a dynamic batch gets no pin: its verifier's own error is reported
    mesh = {"mesh": job.i64_array([2]), "mesh_axis": 0}
    assert unaccepted_axes(job.AllReduceOp, [rows], mesh) == {}
    assert unaccepted_axes(job.AllReduceOp, [with_dynamic(job.tensor((8, 784), f32), [1])], mesh) == {0: [1]}


# ----------------------------------------------------------------- the mirrored view on several devices

DEVICES, PER_DEVICE = 4, 25


def mirrored_config(dtype=flow.float, hierarchy: list[int] | None = None) -> flow.FunctionConfig:
    config = flow.function_config()
    if hierarchy:  # the devices as a mesh: the rows are split over both of its axes
        config.default_placement_scope(flow.scope.placement("cpu", f"0:0-{DEVICES - 1}", hierarchy))
    else:
        flow.config.cpu_device_num(DEVICES)
    config.default_logical_view(flow.scope.mirrored_view())
    config.default_data_type(dtype)
    return config


def mirrored_mlp(config) -> Tuple[flow.global_function, flow.global_function]:
    @flow.global_function(type="predict", function_config=config)
    def parts(images: tp.ListNumpy.Placeholder((PER_DEVICE, 784), dtype=flow.float)) -> Tuple[tp.ListNumpy, tp.Numpy]:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        return logits, logits

    return parts


def test_each_device_takes_and_returns_its_own_rows_within_the_bound():
    predict = mirrored_mlp(mirrored_config())
    rng = np.random.default_rng(10)
    weights = random_weights(rng)
    flow.load_variables(weights)
    x = rng.random((DEVICES, PER_DEVICE, 784), dtype=np.float32)
    for rows in [(25, 25, 25, 13), (0, 7, 25, 1), (25, 25, 25, 25), (3, 0, 0, 0)]:
        pieces = [x[d, :n] for d, n in enumerate(rows)]
        per_device, whole = predict(pieces)
        assert [p.shape for p in per_device] == [(n, 10) for n in rows]
        for piece, got in zip(pieces, per_device):
            np.testing.assert_allclose(got, reference(weights, piece), rtol=1e-5, atol=1e-5)
        # tp.Numpy: the devices' rows one after another
        np.testing.assert_allclose(whole, reference(weights, np.concatenate(pieces)), rtol=1e-5, atol=1e-5)


def test_a_device_over_the_bound_is_an_error_naming_argument_device_bound_and_shape():
    predict = mirrored_mlp(mirrored_config())
    flow.load_variables(random_weights(np.random.default_rng(11)))
    x = np.ones((PER_DEVICE + 1, 784), np.float32)
    good = [x[:25], x[:25], x[:25], x[:13]]
    before = predict(good)[1]
    with pytest.raises(flow.ExecutionError, match=r"argument 'images' for device 2: expected shape \(<=25, <=784\) "
                       r"\(within the placeholder's shape \(25, 784\)\), given \(26, 784\)") as info:
        predict([x[:25], x[:25], x, x[:13]])
    assert __file__ in str(info.value)  # at the caller's line
    # each device's features may be fewer too (as OneFlow checks them), but dense1's weight needs all 784
    with pytest.raises(flow.ExecutionError, match=r"job.matmul takes axes \[1\] of operand #0 at their bound: .*"
                       r"\(argument 'images' axis 1\) and its bound 784 must have the same size on device 0, "
                       r"given 700 and 784"):
        predict([x[:5, :700], x[:25], x[:25], x[:13]])
    np.testing.assert_array_equal(predict(good)[1], before)


def mirrored_train(config, reduce_mean: bool):
    @flow.global_function(type="train", function_config=config)
    def train(
        images: tp.ListNumpy.Placeholder((PER_DEVICE, 20), dtype=flow.double),
        labels: tp.ListNumpy.Placeholder((PER_DEVICE,), dtype=flow.int32),
    ) -> Tuple[tp.ListNumpy, tp.Numpy]:
        hidden = flow.layers.dense(images, 16, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 5, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        # OneFlow scales the gradient by the loss's instances, all devices' together; a mean over the
        # dynamic batch divides by the devices' rows all-reduced: both are the mean over every row
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(
            flow.math.reduce_mean(loss, keepdims=True) if reduce_mean else loss
        )
        return loss, loss

    return train


@pytest.mark.parametrize(
    "reduce_mean,hierarchy", [(False, None), (True, None), (True, [2, 2])], ids=["per-sample-loss", "reduce-mean", "2x2-mesh"]
)
def test_a_mirrored_train_job_on_uneven_rows_matches_pytorch_on_all_rows(reduce_mean, hierarchy):
    torch = pytest.importorskip("torch")
    train = mirrored_train(mirrored_config(flow.double, hierarchy), reduce_mean)
    rng = np.random.default_rng(12)
    shapes = {"dense1-weight": (16, 20), "dense1-bias": (16,), "dense2-weight": (5, 16), "dense2-bias": (5,)}
    weights = {name: rng.standard_normal(shape) * 0.3 for name, shape in shapes.items()}
    flow.load_variables(weights)
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)).double()
    with torch.no_grad():
        for p, name in zip(model.parameters(), weights):
            p.copy_(torch.from_numpy(weights[name]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for rows in [(25, 25, 25, 13), (25, 0, 10, 25), (1, 2, 3, 4), (25, 25, 25, 13)]:
        x = [rng.standard_normal((n, 20)) for n in rows]
        y = [rng.integers(0, 5, n).astype(np.int32) for n in rows]
        per_device, whole = train(x, y)
        assert [p.shape for p in per_device] == [(n,) for n in rows]
        opt.zero_grad()  # one device's reference over every row, the mean over all of them
        logits = model(torch.from_numpy(np.concatenate(x)))
        expected = torch.nn.functional.cross_entropy(logits, torch.from_numpy(np.concatenate(y)).long(), reduction="none")
        expected.mean().backward()
        opt.step()
        # float64 throughout; the learning rate is a float32 constant (0.1 to 1.5e-9)
        np.testing.assert_allclose(whole, expected.detach().numpy(), rtol=1e-7, err_msg=f"rows {rows}")
    variables = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    for p, name in zip(model.parameters(), weights):
        np.testing.assert_allclose(variables[name], p.detach().numpy(), rtol=1e-7, atol=1e-9, err_msg=name)
    over = [np.zeros((n, 20)) for n in (25, 26, 25, 13)]
    with pytest.raises(flow.ExecutionError, match=r"argument 'images' for device 1: .*\(<=25, <=20\).* given \(26, 20\)"):
        train(over, [np.zeros(n, np.int32) for n in (25, 26, 25, 13)])
    for name, value in flow.get_all_variables().items():  # no step ran: momentum and the step counter included
        np.testing.assert_array_equal(value.numpy(), variables[name], err_msg=name)


MESHES = pytest.mark.parametrize("hierarchy", [None, [2, 2]], ids=["4-devices", "2x2-mesh"])
"""On a 2x2 mesh the rows are split over both axes: they are gathered along the last, then the first."""


@MESHES
def test_reduce_max_over_every_devices_rows_gathers_them_and_matches_numpy(hierarchy):
    config = mirrored_config(hierarchy=hierarchy)

    @flow.global_function(type="predict", function_config=config)
    def centered(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        peak = flow.math.reduce_max(x, axis=0)  # over every device's rows: they are gathered first
        return peak, x - peak

    rng = np.random.default_rng(16)
    for rows in [(25, 0, 3, 13), (1, 1, 1, 1), (0, 0, 0, 2), (25, 25, 25, 25), (0, 7, 0, 0)]:
        pieces = [rng.standard_normal((n, 3)).astype(np.float32) for n in rows]
        peak, shifted = centered(pieces)
        whole = np.concatenate(pieces)
        np.testing.assert_array_equal(peak, whole.max(axis=0))
        for got, piece in zip(shifted, pieces):
            np.testing.assert_array_equal(got, piece - whole.max(axis=0))
    lowered = centered.ir("lower-to-physical")
    gathers = [line for line in lowered.splitlines() if "job.all_gather" in line]
    if hierarchy:  # 25 rows each: a row of the mesh's devices (50), then both rows (100)
        assert "mesh_axis = 1" in gathers[0] and "-> tensor<50x3xf32, #job.bounded<[0]>>" in gathers[0]
        assert "mesh_axis = 0" in gathers[1] and "-> tensor<100x3xf32, #job.bounded<[0]>>" in gathers[1]
    else:
        assert "job.all_gather %x" in lowered and "-> tensor<100x3xf32, #job.bounded<[0]>>" in lowered
    assert "buffer.sum_sizes" in centered.ir("buffer")  # the gathered rows: every device's, summed


@MESHES
def test_gathered_rows_keep_the_devices_order_through_a_dense_layer(hierarchy):
    config = mirrored_config(hierarchy=hierarchy)

    @flow.global_function(type="predict", function_config=config)
    def top(images: tp.ListNumpy.Placeholder((PER_DEVICE, 784), dtype=flow.float)) -> tp.Numpy:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        return flow.math.argmax(logits, axis=0)  # which row of all devices' scores highest per class

    weights = random_weights(np.random.default_rng(17))
    flow.load_variables(weights)
    rng = np.random.default_rng(18)
    for rows in [(3, 0, 25, 9), (0, 0, 1, 0)]:
        pieces = [rng.random((n, 784), dtype=np.float32) for n in rows]
        expected = reference(weights, np.concatenate(pieces)).argmax(axis=0)
        np.testing.assert_array_equal(top(pieces), expected)


@MESHES
def test_training_through_a_max_over_every_devices_rows_matches_numpy(hierarchy):
    config = mirrored_config(flow.double, hierarchy)

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3,), initializer=flow.ones_initializer())
        loss = flow.math.reduce_max(x * w, axis=0)  # each column's largest of all devices' rows
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    rate = float(np.float32(0.1))  # the learning rate as the job holds it
    rng = np.random.default_rng(20)
    w = np.ones(3)
    for rows in [(3, 0, 5, 1), (0, 0, 2, 0), (25, 25, 25, 25), (1, 2, 3, 4)]:
        pieces = [rng.random((n, 3)) for n in rows]
        whole = np.concatenate(pieces) * w
        np.testing.assert_allclose(train(pieces), whole.max(axis=0), rtol=1e-12)
        # d(mean of the 3 maxima)/dw_j is the input at column j's largest row, over 3
        w = w - rate * np.concatenate(pieces)[whole.argmax(axis=0), range(3)] / 3
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12)


def test_a_dynamic_value_that_no_gather_can_move_is_a_located_compile_error():
    config = mirrored_config()  # each device's features are its own too: rows with them are never gathered

    @flow.global_function(type="predict", function_config=config)
    def shares(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> tp.Numpy:
        return flow.nn.softmax(x, axis=0)  # MARK-softmax: over every device's rows

    with pytest.raises(flow.CompileError, match=r"job.softmax needs operand 0 as \[broadcast\], but it can only be had "
                       r"as \[split\(0\)\] here: its dynamic axes hold each device's own sizes") as info:
        shares([np.ones((2, 3), np.float32)] * DEVICES)
    assert info.value.location.line == line_of("MARK-softmax")


def test_gathered_rows_returned_per_device_are_a_located_compile_error_that_says_return_them_whole():
    config = mirrored_config()

    @flow.global_function(type="predict", function_config=config)
    def shares(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> tp.ListNumpy:  # MARK-per-device
        return flow.nn.softmax(flow.layers.dense(x, 4, name="d"), axis=0)  # over every device's rows, gathered

    with pytest.raises(flow.CompileError, match=r"job.return needs operand 0 as \[split\(0\)\], but it can only be had as "
                       r"\[broadcast\] here: its rows are every device's, gathered, and each device's own sizes are not "
                       r"split back out of them \(return it as tp.Numpy: the whole value\)") as info:
        shares([np.ones((2, 3), np.float32)] * DEVICES)
    assert info.value.location.line == line_of("MARK-per-device")


@MESHES
def test_rows_gathered_for_an_op_that_needs_them_all_come_back_whole_as_tp_numpy(hierarchy):
    @flow.global_function(type="predict", function_config=mirrored_config(hierarchy=hierarchy))
    def shares(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        scores = flow.layers.dense(x, 4, name="d")
        return flow.nn.softmax(scores, axis=0), scores  # over every device's rows, gathered; and each device's own

    rng = np.random.default_rng(33)
    weights = {"d-weight": rng.standard_normal((4, 3)).astype(np.float32), "d-bias": rng.standard_normal(4).astype(np.float32)}
    flow.load_variables(weights)
    for rows in [(3, 0, 5, 1), (0, 0, 2, 0), (25, 25, 25, 25)]:
        pieces = [rng.standard_normal((n, 3)).astype(np.float32) for n in rows]
        scores = np.concatenate(pieces) @ weights["d-weight"].T + weights["d-bias"]
        e = np.exp(scores - scores.max(axis=0))
        gathered, own = shares(pieces)
        np.testing.assert_allclose(gathered, e / e.sum(axis=0), rtol=1e-5, atol=1e-7)
        for got, piece in zip(own, pieces):
            np.testing.assert_allclose(got, piece @ weights["d-weight"].T + weights["d-bias"], rtol=1e-5, atol=1e-6)


@MESHES
def test_concat_along_every_devices_rows_gathers_them_first(hierarchy):
    @flow.global_function(type="predict", function_config=mirrored_config(hierarchy=hierarchy))
    def joined(a: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float),
               b: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> tp.Numpy:
        return flow.concat([a, b * 2.0], axis=0)  # every device's rows of a, then every device's of b

    rng = np.random.default_rng(34)
    for rows_a, rows_b in [((3, 0, 5, 1), (2, 2, 0, 7)), ((0, 0, 0, 0), (0, 1, 0, 0)), ((25,) * 4, (25,) * 4)]:
        a = [rng.standard_normal((n, 3)).astype(np.float32) for n in rows_a]
        b = [rng.standard_normal((n, 3)).astype(np.float32) for n in rows_b]
        np.testing.assert_array_equal(joined(a, b), np.concatenate(a + [2 * x for x in b]))
    assert "job.all_gather" in joined.ir("lower-to-physical")


@MESHES
def test_training_through_a_concat_along_every_devices_rows_matches_numpy(hierarchy):
    @flow.global_function(type="train", function_config=mirrored_config(flow.double, hierarchy))
    def train(a: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double),
              b: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), dtype=flow.double, initializer=flow.ones_initializer())
        loss = flow.math.square(flow.concat([flow.matmul(a, w), flow.matmul(b, w)], axis=0))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    rate = float(np.float32(0.1))  # the learning rate as the job holds it
    rng, w = np.random.default_rng(35), np.ones((3, 2))
    for rows_a, rows_b in [((3, 0, 5, 1), (2, 2, 0, 7)), ((0, 1, 0, 0), (0, 0, 0, 3)), ((25,) * 4, (25,) * 4)]:
        a = [rng.standard_normal((n, 3)) for n in rows_a]
        b = [rng.standard_normal((n, 3)) for n in rows_b]
        x = np.concatenate(a + b)  # a's rows of every device, then b's: the concatenation's order
        np.testing.assert_allclose(train(a, b), (x @ w) ** 2, rtol=1e-12)
        w = w - rate * x.T @ (2 * x @ w) / (x @ w).size  # the mean of the loss's elements, OneFlow's seed
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12)


@MESHES
def test_training_through_a_slice_of_every_devices_rows_gathers_them_first(hierarchy):
    @flow.global_function(type="train", function_config=mirrored_config(flow.double, hierarchy))
    def train(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double)) -> Tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(3, 2), dtype=flow.double, initializer=flow.ones_initializer())
        picked = flow.matmul(x, w)[2:40:3]  # every device's rows, one after another, then every third from 2
        loss = flow.math.square(picked)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, picked

    rate = float(np.float32(0.1))  # the learning rate as the job holds it
    rng, w = np.random.default_rng(43), np.ones((3, 2))
    for rows in [(3, 0, 5, 1), (0, 1, 0, 0), (25,) * 4, (10, 12, 0, 9)]:
        pieces = [rng.standard_normal((n, 3)) for n in rows]
        x = np.concatenate(pieces)[2:40:3]
        loss, picked = train(pieces)
        np.testing.assert_allclose(picked, x @ w, rtol=1e-12)
        np.testing.assert_allclose(loss, (x @ w) ** 2, rtol=1e-12)
        if len(x):  # the mean of the loss's elements, OneFlow's seed; no rows, no step
            w = w - rate * x.T @ (2 * x @ w) / (x @ w).size
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12)
    assert "job.all_gather" in train.ir("lower-to-physical")


@MESHES
def test_top_k_over_every_devices_rows_gathers_them_and_within_a_row_stays_on_its_device(hierarchy):
    @flow.global_function(type="predict", function_config=mirrored_config(hierarchy=hierarchy))
    def largest(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        return flow.math.top_k(x, axis=0, k=4), flow.math.top_k(x, k=2)

    rng = np.random.default_rng(45)
    for rows in [(3, 0, 5, 1), (0, 1, 0, 0), (25,) * 4]:
        pieces = [rng.standard_normal((n, 3)).astype(np.float32) for n in rows]
        over_rows, within = largest(pieces)
        np.testing.assert_array_equal(over_rows, np.argsort(-np.concatenate(pieces), axis=0, kind="stable")[:4])
        for got, piece in zip(within, pieces):
            np.testing.assert_array_equal(got, np.argsort(-piece, axis=1, kind="stable")[:, :2])


@MESHES
def test_a_sort_within_each_devices_rows_stays_there_and_trains(hierarchy):
    @flow.global_function(type="train", function_config=mirrored_config(flow.double, hierarchy))
    def train(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double)) -> tp.ListNumpy:
        w = flow.get_variable("w", shape=(3,), dtype=flow.double, initializer=flow.constant_initializer(0.5))
        ordered = flow.sort(x * w, "DESCENDING")
        loss = flow.math.reduce_sum(ordered * flow.constant(np.array([3.0, 2.0, 1.0]), dtype=flow.double), axis=1)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return ordered

    rng, w = np.random.default_rng(49), np.full(3, 0.5)
    for rows in [(3, 0, 5, 1), (25,) * 4]:
        pieces = [rng.standard_normal((n, 3)) for n in rows]
        got = train(pieces)
        for ordered, piece in zip(got, pieces):
            np.testing.assert_allclose(ordered, -np.sort(-(piece * w), axis=1), rtol=1e-12)
        whole = np.concatenate(pieces)
        # the mean loss's gradient in w (OneFlow's seed): each entry's factor by its rank in its row, times x
        rank = np.argsort(np.argsort(-(whole * w), axis=1, kind="stable"), axis=1)
        w = w - float(np.float32(0.1)) * (np.array([3.0, 2.0, 1.0])[rank] * whole).sum(axis=0) / len(whole)
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12)
    assert "job.all_gather" not in train.ir("lower-to-physical")


@MESHES
def test_an_embedding_of_every_devices_own_ids_learns_from_all_of_them(hierarchy):
    @flow.global_function(type="train", function_config=mirrored_config(flow.double, hierarchy))
    def train(ids: tp.ListNumpy.Placeholder((PER_DEVICE,), dtype=flow.int32),
              x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        table = flow.get_variable("emb", shape=(10, 3), dtype=flow.double, initializer=flow.ones_initializer())
        embedded = flow.gather(table, ids)  # each device's own ids: its own rows
        # rows 0 and 2 of every device's rows, one after another: gathered first
        picked = flow.gather(x, flow.constant(np.array([0, 2], np.int32), dtype=flow.int32))
        loss = flow.math.reduce_sum(flow.math.square(embedded), axis=1) + flow.math.reduce_sum(picked)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, embedded

    rng, table = np.random.default_rng(48), np.ones((10, 3))
    for rows in [(3, 0, 5, 1), (0, 4, 0, 0), (25,) * 4]:
        ids = [rng.integers(0, 10, n).astype(np.int32) for n in rows]
        xs = [rng.standard_normal((n, 3)) for n in rows]
        every = np.concatenate(ids)
        loss, embedded = train(ids, xs)
        np.testing.assert_allclose(loss, np.sum(table[every] ** 2, axis=1) + np.concatenate(xs)[[0, 2]].sum(), rtol=1e-12)
        for got, own in zip(embedded, ids):
            np.testing.assert_allclose(got, table[own], rtol=1e-12)
        dtable = np.zeros_like(table)
        np.add.at(dtable, every, 2 * table[every] / len(every))  # the mean of the loss's elements, OneFlow's seed
        table = table - float(np.float32(0.1)) * dtable
        np.testing.assert_allclose(flow.get_all_variables()["emb"].numpy(), table, rtol=1e-12)


@MESHES
def test_gather_nd_of_every_devices_own_coordinates_and_of_all_their_rows(hierarchy):
    @flow.global_function(type="train", function_config=mirrored_config(flow.double, hierarchy))
    def train(at: tp.ListNumpy.Placeholder((PER_DEVICE, 2), dtype=flow.int32),
              x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.double)) -> Tuple[tp.Numpy, tp.Numpy]:
        t = flow.get_variable("t", shape=(5, 4), dtype=flow.double, initializer=flow.ones_initializer())
        picked = flow.gather_nd(t, at)  # each device's own (i, j) pairs
        first = flow.gather_nd(x, flow.constant(np.array([[0], [2]], np.int32), dtype=flow.int32))  # of all rows
        loss = flow.math.square(picked) + flow.math.reduce_sum(first)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, first

    rng, t = np.random.default_rng(53), np.ones((5, 4))
    for rows in [(3, 0, 5, 1), (0, 4, 0, 0), (25,) * 4]:
        ats = [np.stack([rng.integers(0, 5, n), rng.integers(0, 4, n)], axis=1).astype(np.int32) for n in rows]
        xs = [rng.standard_normal((n, 3)) for n in rows]
        at, x = np.concatenate(ats), np.concatenate(xs)
        loss, first = train(ats, xs)
        np.testing.assert_allclose(first, x[[0, 2]], rtol=1e-12)
        np.testing.assert_allclose(loss, t[at[:, 0], at[:, 1]] ** 2 + x[[0, 2]].sum(), rtol=1e-12)
        dt = np.zeros_like(t)
        np.add.at(dt, (at[:, 0], at[:, 1]), 2 * t[at[:, 0], at[:, 1]] / len(at))  # the mean of the loss's elements
        t = t - float(np.float32(0.1)) * dt
        np.testing.assert_allclose(flow.get_all_variables()["t"].numpy(), t, rtol=1e-12, err_msg=f"rows {rows}")


def test_a_mean_over_each_devices_own_length_trains_in_the_mirrored_view():
    @flow.global_function(type="train", function_config=mirrored_config(flow.double))
    def train(x: tp.ListNumpy.Placeholder((PER_DEVICE, 6), dtype=flow.double)) -> tp.ListNumpy:
        w = flow.get_variable("w", shape=(1,), dtype=flow.double, initializer=flow.ones_initializer())
        loss = flow.math.square(flow.math.reduce_mean(x * w, axis=1))  # each row over its device's own length
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    rng, w = np.random.default_rng(56), 1.0
    for shapes in [((2, 3), (1, 5), (0, 6), (3, 2)), ((25, 6),) * 4, ((1, 1), (2, 6), (1, 4), (0, 1))]:
        pieces = [rng.standard_normal(shape) for shape in shapes]
        means = np.concatenate([piece.mean(axis=1) if piece.shape[1] else np.zeros(len(piece)) for piece in pieces])
        np.testing.assert_allclose(np.concatenate(train(pieces)), (means * w) ** 2, rtol=1e-12)
        w = w - float(np.float32(0.1)) * np.sum(2 * means * w * means) / len(means)
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), [w], rtol=1e-12, err_msg=f"{shapes}")


def test_dropout_masks_each_devices_own_rows_in_the_mirrored_view():
    @flow.global_function(type="train", function_config=mirrored_config(flow.double))
    def train(x: tp.ListNumpy.Placeholder((PER_DEVICE, 4), dtype=flow.double)) -> tp.ListNumpy:
        w = flow.get_variable("w", shape=(4,), dtype=flow.double, initializer=flow.ones_initializer())
        kept = flow.nn.dropout(x * w, rate=0.25, seed=3)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(
            flow.math.reduce_sum(kept, axis=1)
        )
        return kept

    rng, w = np.random.default_rng(51), np.ones(4)
    for rows in [(3, 0, 25, 1), (25,) * 4, (0, 2, 0, 0)]:
        pieces = [rng.random((n, 4)) + 0.5 for n in rows]
        kept = train(pieces)
        assert [k.shape for k in kept] == [p.shape for p in pieces]
        scale = np.concatenate(kept) / (np.concatenate(pieces) * w)
        assert np.all(np.isclose(scale, 0.0) | np.isclose(scale, 4 / 3))
        w = w - float(np.float32(0.1)) * (scale * np.concatenate(pieces)).sum(axis=0) / sum(rows)
        np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), w, rtol=1e-12, err_msg=f"rows {rows}")


@MESHES
def test_each_devices_rows_regrouped_by_a_reshape_stay_in_the_devices_order(hierarchy):
    @flow.global_function(type="predict", function_config=mirrored_config(hierarchy=hierarchy))
    def flat(x: tp.ListNumpy.Placeholder((PER_DEVICE, 2, 3), dtype=flow.float)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        values = flow.reshape(x * 2.0, (-1,))
        return values, values

    rng = np.random.default_rng(38)
    for rows in [(3, 0, 5, 1), (0, 0, 1, 0), (25,) * 4]:
        pieces = [rng.standard_normal((n, 2, 3)).astype(np.float32) for n in rows]
        whole, own = flat(pieces)
        np.testing.assert_array_equal(whole, 2 * np.concatenate(pieces).reshape(-1))
        for got, piece in zip(own, pieces):
            np.testing.assert_array_equal(got, 2 * piece.reshape(-1))


def test_each_devices_rows_joined_into_its_one_row_make_whole_rows_or_stop_the_step():
    @flow.global_function(type="predict", function_config=mirrored_config())
    def pairs(x: tp.ListNumpy.Placeholder((2,), dtype=flow.float)) -> Tuple[tp.Numpy, tp.ListNumpy]:
        joined = flow.reshape(x, (-1, 2))  # MARK-pairs: (<=4, 2) of 4 devices' 2 rows each: one row of a device's two
        return joined, joined

    pieces = [np.arange(n, dtype=np.float32) + 10 * d for d, n in enumerate((2, 0, 2, 2))]
    whole, own = pairs(pieces)
    np.testing.assert_array_equal(whole, np.concatenate(pieces).reshape(-1, 2))
    for got, piece in zip(own, pieces):
        np.testing.assert_array_equal(got, piece.reshape(-1, 2))
    with pytest.raises(flow.ExecutionError, match=r"rows of 1 regrouped into rows of 2: 1 rows do not make whole ones "
                       r"on device 1") as info:
        pairs([np.zeros(n, np.float32) for n in (2, 1, 2, 1)])
    assert info.value.location.line == line_of("MARK-pairs")


def test_steps_gathering_changing_rows_allocate_nothing_a_static_gather_does_not(monkeypatch):
    config = mirrored_config()

    @flow.global_function(type="predict", function_config=config)
    def peak(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> tp.Numpy:
        return flow.math.reduce_max(x, axis=0)

    @flow.global_function(type="predict")  # the same gather of static rows: the consistent view
    def static(x: tp.Numpy.Placeholder((PER_DEVICE * DEVICES, 3), dtype=flow.float)) -> tp.Numpy:
        return flow.math.reduce_max(x, axis=0)

    x = np.random.default_rng(19).random((PER_DEVICE, 3), dtype=np.float32)
    sizes = [(25 - i % 26, i % 26, (7 * i) % 26, 1 + i % 25) for i in range(60)]
    left, grown, peak_bytes = traced_steps(peak, [[[x[:n] for n in rows]] for rows in sizes], monkeypatch, steps=80)
    _, static_grown, static_peak = traced_steps(static, [[np.concatenate([x] * DEVICES)]], monkeypatch, steps=80)
    assert left == 0  # new sizes on each device: views and closures, no array memory
    assert grown <= static_grown + 512
    assert peak_bytes <= static_peak + 4096


def central_differences(loss_of: Callable[[np.ndarray], float], w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d loss_of / d w by central differences: the oracle the dynamic jobs' gradients are checked against."""
    gradient = np.zeros_like(w)
    for at in np.ndindex(*w.shape):
        step = np.zeros_like(w)
        step[at] = eps
        gradient[at] = (loss_of(w + step) - loss_of(w - step)) / (2 * eps)
    return gradient


def line_of(marker: str) -> int:
    return next(i for i, text in enumerate(open(__file__).read().splitlines(), 1) if marker in text and "line_of" not in text)


def test_mirrored_steps_with_changing_rows_allocate_nothing_a_static_step_does_not(monkeypatch):
    predict = mirrored_mlp(mirrored_config())

    # the same layers on the same devices with static shapes: the consistent view, the batch split over them
    @flow.global_function(type="predict")
    def static(images: tp.Numpy.Placeholder((PER_DEVICE * DEVICES, 784), dtype=flow.float)) -> Tuple[tp.Numpy, tp.Numpy]:
        hidden = flow.layers.dense(images, 512, activation=flow.nn.relu, name="dense1")
        logits = flow.layers.dense(hidden, 10, name="dense2")
        return logits, logits

    flow.load_variables(random_weights(np.random.default_rng(13)))
    x = np.random.default_rng(14).random((PER_DEVICE, 784), dtype=np.float32)
    sizes = [(25 - i % 26, i % 26, (7 * i) % 26, 25) for i in range(40)]
    left, grown, peak = traced_steps(predict, [[[x[:n] for n in rows]] for rows in sizes], monkeypatch, steps=80)
    _, static_grown, static_peak = traced_steps(static, [[np.concatenate([x] * DEVICES)]], monkeypatch, steps=80)
    assert left == 0  # new sizes on each device: views and closures, no array memory
    assert grown <= static_grown + 512
    assert peak <= static_peak + 4096


def test_a_mean_over_every_devices_rows_divides_by_their_all_reduced_count():
    config = mirrored_config()

    @flow.global_function(type="predict", function_config=config)
    def mean(x: tp.ListNumpy.Placeholder((PER_DEVICE, 3), dtype=flow.float)) -> tp.Numpy:
        return flow.math.reduce_mean(x, axis=0, keepdims=True)

    rng = np.random.default_rng(15)
    for rows in [(25, 0, 3, 13), (1, 1, 1, 1), (0, 0, 0, 2)]:
        pieces = [rng.random((n, 3), dtype=np.float32) for n in rows]
        np.testing.assert_allclose(mean(pieces), np.concatenate(pieces).mean(axis=0, keepdims=True), rtol=1e-6)
    lowered = mean.ir("lower-to-physical")
    assert "tensor<25x3xf32, #job.bounded<[0]>>" in lowered  # each device's piece: its own rows within 25
    assert "job.size_of %x" in lowered and "job.all_reduce" in lowered  # the devices' counts, added


def test_a_mean_of_transposed_rows_counts_each_devices_own_rows_and_features():
    """Transposed, the devices' rows are axis 1 and their features axis 0, both each device's own: a mean over
    every element divides every device's sum by the devices' counts all-reduced, whatever the rows."""
    config = mirrored_config()

    @flow.global_function(type="predict", function_config=config)
    def mean(x: tp.ListNumpy.Placeholder((2, 6), dtype=flow.float64)) -> tp.Numpy:
        return flow.reshape(flow.math.reduce_mean(flow.transpose(x, [1, 0]) * 3.0), [1])

    rng = np.random.default_rng(21)
    for rows, features in [((2, 2, 2, 2), 6), ((2, 2, 2, 2), 4), ((1, 2, 0, 2), 6), ((0, 0, 1, 0), 5)]:
        pieces = [rng.standard_normal((n, features)) for n in rows]
        np.testing.assert_allclose(mean(pieces), [np.concatenate(pieces).mean() * 3.0], rtol=1e-12)
    assert "job.pin_size" not in mean.ir("job")  # a sum of every element moves nothing dynamic: nothing to pin


@pytest.mark.parametrize("hierarchy", [None, [2, 2]])
def test_rows_against_a_variable_of_all_rows_must_fill_every_device(hierarchy):
    """x (one row per device) times a variable of all the devices' rows: the variable's static rows fix x's, and
    its one-row pieces must not pass for broadcasting on a device: a device without its row is the logical op's error."""
    config = mirrored_config(flow.float64, hierarchy)

    @flow.global_function(type="predict", function_config=config)
    def scaled(x: tp.ListNumpy.Placeholder((1, 3), dtype=flow.float64)) -> tp.ListNumpy:
        v = flow.get_variable("v", (DEVICES, 3), dtype=flow.float64, initializer=flow.zeros_initializer())
        return x * v  # MARK-row-scale

    v = np.arange(DEVICES * 3, dtype=np.float64).reshape(DEVICES, 3)
    flow.load_variables({"v": v})
    rows = [np.full((1, 3), i + 1.0) for i in range(DEVICES)]
    for got, row, want in zip(scaled(rows), rows, v):
        np.testing.assert_array_equal(got, row * want)
    with pytest.raises(flow.ExecutionError, match="its bound 1 must have the same size on device 2, given 0 and 1") as err:
        scaled([*rows[:2], np.zeros((0, 3)), rows[3]])
    assert err.value.location.line == line_of("MARK-row-scale")


def test_a_parallel_cast_that_would_reslice_each_devices_rows_is_an_error_at_its_line():
    """Each device's own rows cannot be split along another axis: the cast is at fault, not the mean reading it."""
    config = mirrored_config(flow.float64)

    @flow.global_function(type="predict", function_config=config)
    def mean(x: tp.ListNumpy.Placeholder((2, 3), dtype=flow.float64)) -> tp.Numpy:
        y = flow.parallel_cast(flow.math.gelu(x), distribute=flow.distribute.split(1))  # MARK-reslice
        return flow.reshape(flow.math.reduce_mean(y), [1])

    with pytest.raises(flow.CompileError, match=r"job.boxing needs operand 0 as \[split\(1\)\], but it can only be had as "
                       r"\[split\(0\)\] here: its dynamic axes hold each device's own sizes") as err:
        mean([np.ones((2, 3))] * DEVICES)
    assert err.value.location.line == line_of("MARK-reslice")


def test_each_device_takes_a_tensor_list_of_its_own_and_gets_its_instances_back():
    config = mirrored_config()

    @flow.global_function(type="predict", function_config=config)
    def scores(x: tp.ListListNumpy.Placeholder((10, 4), dtype=flow.float)) -> Tuple[tp.ListListNumpy, tp.Numpy]:
        y = flow.math.relu(x) * 2.0
        return y, y

    rng = np.random.default_rng(16)
    rows = [(2, 5, 1), (10,), (0, 3), (4,)]
    instances = [[rng.standard_normal((n, 4)).astype(np.float32) for n in device] for device in rows]
    per_device, whole = scores(instances)
    assert [[a.shape for a in device] for device in per_device] == [[(n, 4) for n in device] for device in rows]
    for got, given in zip(per_device, instances):
        for a, b in zip(got, given):
            np.testing.assert_array_equal(a, np.maximum(b, 0) * 2)
    np.testing.assert_array_equal(whole, np.maximum(np.concatenate([b for d in instances for b in d]), 0) * 2)
    over = [instances[0], [np.zeros((6, 4), np.float32)] * 2, instances[2], instances[3]]
    with pytest.raises(flow.ExecutionError, match=r"argument 'x' for device 1: its instances \(6, 4\), \(6, 4\) have 12 rows "
                       r"together, over the placeholder's bound 10"):
        scores(over)


def test_train_steps_through_pins_and_unpins_allocate_nothing_a_static_step_does_not(monkeypatch):
    """The gradients of a variable on the input's features (unpinned after the dense layer) and of a max
    over a dynamic axis run at each step's sizes on views of the arena planned at the bound."""

    def step(x):
        scale = flow.get_variable("scale", shape=(1,), initializer=flow.constant_initializer(1.2))
        h = flow.layers.dense(x * scale, 4, activation=flow.math.tanh, name="dense")
        loss = flow.math.reduce_max(h, axis=1)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.01]), momentum=0).minimize(loss)
        return loss

    @flow.global_function(type="train")
    def dynamic(x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float)) -> tp.ListNumpy:
        return step(x)

    @flow.global_function(type="train")
    def static(x: tp.Numpy.Placeholder((8, 6), dtype=flow.float)) -> tp.Numpy:
        return step(x)

    x = np.random.default_rng(9).standard_normal((8, 6)).astype(np.float32)
    dynamic([x])
    static(x)
    assert "job.unpin_size" in dynamic.ir("autodiff")
    left, grown, peak = traced_steps(dynamic, [[x[:n]] for n in range(8, 0, -1)], monkeypatch, steps=200)
    _, static_grown, static_peak = traced_steps(static, [[x]], monkeypatch, steps=200)
    assert left == 0
    assert grown <= static_grown + 512
    assert peak <= static_peak + 1024


# ----------------------------------------------- the mirrored view: every axis within the bound per device

def mirrored_columns(config):
    @flow.global_function(type="predict", function_config=config)
    def columns(
        x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float), labels: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float)
    ) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        y = flow.nn.relu(x) * 2.0 - x
        return (y, flow.math.reduce_sum(y, axis=1), flow.math.reduce_mean(x, axis=1, keepdims=True),
                flow.nn.softmax(x), flow.nn.softmax_cross_entropy_with_logits(labels, x))

    return columns


def mirrored_columns_reference(x: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    softmax = e / e.sum(axis=1, keepdims=True)
    y = np.maximum(x, 0) * 2 - x
    return [y, y.sum(1), x.mean(1, keepdims=True), softmax, -(labels * np.log(softmax)).sum(1)]


def test_each_device_may_be_smaller_on_every_axis_and_matches_numpy():
    columns = mirrored_columns(mirrored_config())
    rng = np.random.default_rng(21)
    steps = [[(5, 6), (3, 4), (8, 2), (0, 5)], [(1, 1), (8, 6), (2, 3), (7, 6)], [(5, 6), (3, 4), (8, 2), (0, 5)]]
    for shapes in steps:  # the last comes back to variants built before
        xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        labels = [rng.random(s, dtype=np.float32) for s in shapes]
        outs = columns(xs, labels)
        for device, (x, y) in enumerate(zip(xs, labels)):
            for out, ref in zip(outs, mirrored_columns_reference(x, y), strict=True):
                assert out[device].shape == ref.shape, (shapes, device)
                np.testing.assert_allclose(out[device], ref, rtol=1e-5, atol=1e-6)
    assert "tensor<32x6xf32, #job.bounded<[0, 1]>>" in columns.ir("job")  # the logical value: 4 pieces of (<=8, <=6)


def test_a_device_over_the_bound_on_a_feature_axis_is_an_error_naming_it_and_nothing_runs():
    columns = mirrored_columns(mirrored_config())
    x = np.ones((8, 7), np.float32)
    good = [x[:2, :6], x[:3, :6], x[:8, :1], x[:0, :6]]
    before = columns(good, good)
    with pytest.raises(flow.ExecutionError, match=r"argument 'x' for device 1: expected shape \(<=8, <=6\) "
                       r"\(within the placeholder's shape \(8, 6\)\), given \(3, 7\)") as info:
        columns([x[:2, :6], x[:3], x[:8, :1], x[:0, :6]], good)
    assert __file__ in str(info.value)  # at the caller's line
    with pytest.raises(flow.ExecutionError, match=r"device 2, given 1 and 2"):  # x and labels must agree per device
        columns(good, [x[:2, :6], x[:3, :6], x[:8, :2], x[:0, :6]])
    for got, expected in zip(columns(good, good), before, strict=True):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_mirrored_train_job_with_fewer_features_on_a_device_changes_nothing():
    train = mirrored_train(mirrored_config(flow.double), reduce_mean=True)
    shapes = {"dense1-weight": (16, 20), "dense1-bias": (16,), "dense2-weight": (5, 16), "dense2-bias": (5,)}
    flow.load_variables({name: np.full(shape, 0.1) for name, shape in shapes.items()})
    variables = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    x = [np.ones((n, 20)) for n in (3, 4, 5, 6)]
    x[3] = np.ones((6, 19))  # a feature short on device 3: dense1's weight needs all 20
    with pytest.raises(flow.ExecutionError, match=r"job.matmul takes axes \[1\] .*\(argument 'images' axis 1\) .* must have "
                       r"the same size on device 3, given 19 and 20"):
        train(x, [np.zeros(n, np.int32) for n in (3, 4, 5, 6)])
    for name, value in flow.get_all_variables().items():  # no step ran
        np.testing.assert_array_equal(value.numpy(), variables[name], err_msg=name)


def test_features_are_pinned_per_device_where_rows_are_joined_or_moved():
    config = mirrored_config()

    @flow.global_function(type="predict", function_config=config)
    def whole(x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float)) -> tp.Numpy:
        return flow.nn.relu(x)  # MARK-whole: tp.Numpy, the devices' rows one after another, needs one width

    rng = np.random.default_rng(23)
    pieces = [rng.standard_normal((n, 6)).astype(np.float32) for n in (3, 0, 8, 1)]
    np.testing.assert_array_equal(whole(pieces), np.maximum(np.concatenate(pieces), 0))
    with pytest.raises(flow.ExecutionError, match=r"job.return takes axes \[1\] of operand #0 at their bound: .*"
                       r"\(argument 'x' axis 1\) and its bound 6 must have the same size on device 3, given 4 and 6") as info:
        whole([pieces[0], pieces[1], pieces[2], pieces[3][:, :4].copy()])
    assert f"{__file__}:{line_of('MARK-whole') - 1}:" in str(info.value)  # the job's definition

    @flow.global_function(type="predict", function_config=config)
    def over_rows(x: tp.ListNumpy.Placeholder((8, 6), dtype=flow.float)) -> Tuple[tp.Numpy, tp.Numpy]:
        # over every device's rows: a gather and an all-reduce, which move the features at their bound
        return flow.math.reduce_max(x, axis=0), flow.math.reduce_sum(x, axis=0)  # MARK-over-rows

    peak, total = over_rows(pieces)
    np.testing.assert_array_equal(peak, np.concatenate(pieces).max(axis=0))
    np.testing.assert_allclose(total, np.concatenate(pieces).sum(axis=0), rtol=1e-5, atol=1e-6)
    with pytest.raises(flow.ExecutionError, match=r"takes axes \[1\] of operand #0 at their bound: .*\(argument 'x' axis 1\) "
                       r"and its bound 6 must have the same size on device 2, given 5 and 6") as info:
        over_rows([pieces[0], pieces[1], pieces[2][:, :5].copy(), pieces[3]])
    assert info.value.location.line == line_of("MARK-over-rows")


def test_mirrored_steps_with_changing_features_allocate_nothing_a_static_step_does_not(monkeypatch):
    columns = mirrored_columns(mirrored_config())

    @flow.global_function(type="predict")  # the same ops with static shapes, the batch split over the devices
    def static(
        x: tp.Numpy.Placeholder((8 * DEVICES, 6), dtype=flow.float),
        labels: tp.Numpy.Placeholder((8 * DEVICES, 6), dtype=flow.float),
    ) -> Tuple[tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy, tp.Numpy]:
        y = flow.nn.relu(x) * 2.0 - x
        return (y, flow.math.reduce_sum(y, axis=1), flow.math.reduce_mean(x, axis=1, keepdims=True),
                flow.nn.softmax(x), flow.nn.softmax_cross_entropy_with_logits(labels, x))

    rng = np.random.default_rng(22)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    labels = rng.random((8, 6), dtype=np.float32)
    shapes = [[(1 + (i + d) % 8, 1 + (3 * i + d) % 6) for d in range(DEVICES)] for i in range(24)]
    steps = [[[x[:n, :c].copy() for n, c in s], [labels[:n, :c].copy() for n, c in s]] for s in shapes]
    left, grown, peak = traced_steps(columns, steps, monkeypatch, steps=80)
    whole_x, whole_labels = np.concatenate([x] * DEVICES), np.concatenate([labels] * DEVICES)
    _, static_grown, static_peak = traced_steps(static, [[whole_x, whole_labels]], monkeypatch, steps=80)
    assert left == 0  # new sizes on each device: views and closures, no array memory
    assert grown <= static_grown + 512
    assert peak <= static_peak + 4096
