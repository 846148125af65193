"""flow.where, flow.gather (batch_dims too), flow.dim_gather, flow.gather_nd / scatter_nd, flow.tensor_scatter_nd_update
/ _add, flow.math.reduce_prod,
flow.stack, the pads and flow.broadcast_like / reshape_like against PyTorch: forward and gradient in float32 and
float64, SGD steps of a train job whose loss goes through the op, and the same job on 2 and 3 simulated devices
against one device."""

import re  # no `from __future__ import annotations`: the jobs' annotations name their dtype argument
from collections.abc import Callable
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")

LR, STEPS = 0.125, 3  # a learning rate float32 holds exactly: irflow keeps it in float32
DTYPES = ["float32", "float64"]


def tol(dtype: str) -> dict[str, float]:
    return dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-12)


def config_of(dtype: str) -> flow.FunctionConfig:
    config = flow.FunctionConfig()
    config.default_data_type(getattr(flow, dtype))
    return config


def sgd() -> flow.optimizer.SGD:
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum=0.0)


def variable(name: str, shape: tuple[int, ...], distribute: object = None) -> flow.Blob:
    """A variable the test loads its values into; `distribute` hints its SBP on several devices."""
    return flow.get_variable(name, shape, initializer=flow.zeros_initializer(), distribute=distribute)


def torch_steps(
    initial: dict[str, np.ndarray], loss_of: Callable[[dict[str, "torch.Tensor"]], "torch.Tensor"], dtype: str
) -> tuple[list[float], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """PyTorch's SGD on the same loss: each step's loss, the variables after STEPS, the first step's gradients."""
    params = {k: torch.tensor(v.astype(dtype), requires_grad=True) for k, v in initial.items()}
    opt = torch.optim.SGD(params.values(), lr=LR)
    losses, first = [], {}
    for step in range(STEPS):
        opt.zero_grad()
        loss = loss_of(params)
        loss.backward()
        if step == 0:
            first = {k: p.grad.numpy().copy() for k, p in params.items()}
        opt.step()
        losses.append(loss.item())
    return losses, {k: p.detach().numpy() for k, p in params.items()}, first


def our_steps(
    train: Callable[..., np.ndarray], initial: dict[str, np.ndarray], feed: list[np.ndarray], dtype: str
) -> tuple[list[float], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The train job's steps from `initial`: as torch_steps, the gradient read off SGD's first update."""
    flow.load_variables({k: v.astype(dtype) for k, v in initial.items()})
    losses, first = [], {}
    for step in range(STEPS):
        losses.append(float(np.mean(train(*feed))))
        if step == 0:
            now = flow.get_all_variables()
            first = {k: (v.astype(dtype) - now[k].numpy()) / np.asarray(LR, dtype) for k, v in initial.items()}
    now = flow.get_all_variables()
    return losses, {k: now[k].numpy() for k in initial}, first


def assert_same_steps(ours: tuple, theirs: tuple, dtype: str) -> None:
    (our_losses, our_vars, our_grads), (losses, variables, grads) = ours, theirs
    np.testing.assert_allclose(our_losses, losses, **tol(dtype), err_msg="losses")
    for name in variables:
        scale = 100 if dtype == "float32" else 1  # a gradient read off an update loses float32 digits
        np.testing.assert_allclose(our_grads[name], grads[name], rtol=tol(dtype)["rtol"] * scale,
                                   atol=tol(dtype)["atol"] * scale, err_msg=f"first gradient of {name}")
        np.testing.assert_allclose(our_vars[name], variables[name], **tol(dtype), err_msg=f"{name} after the steps")


def on_devices(devices: int, define: Callable[[], Callable[..., np.ndarray]], op: str,
               initial: dict[str, np.ndarray], feed: list[np.ndarray], dtype: str) -> tuple:
    """The train job's steps on `devices` simulated devices; on several, `op` must have run split somewhere."""
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)
    train = define()
    result = our_steps(train, initial, feed, dtype)
    if devices > 1:
        sbps = re.findall(rf"= job\.{op}(?:_grad)? .*sbp = #job\.nd_sbp<\[(\w+)", train.ir("sbp-infer"))
        assert "split" in sbps or "partial_sum" in sbps, f"every job.{op} ran broadcast: {sbps}"
    return result


rng = np.random.default_rng(7)


# ----------------------------------------------------------------- flow.where


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_forward_matches_torch(dtype):
    cond = rng.integers(0, 2, (4, 1, 3)).astype(np.int8)
    x, y = rng.standard_normal((5, 3)).astype(dtype), rng.standard_normal((5, 1)).astype(dtype)

    @flow.global_function(function_config=config_of(dtype))
    def select(c: tp.Numpy.Placeholder((4, 1, 3), dtype=flow.int8),
               a: tp.Numpy.Placeholder((5, 3), dtype=getattr(flow, dtype)),
               b: tp.Numpy.Placeholder((5, 1), dtype=getattr(flow, dtype))) -> tp.Numpy:
        return flow.where(c, a, b)

    expected = torch.where(torch.from_numpy(cond).bool(), torch.from_numpy(x), torch.from_numpy(y)).numpy()
    got = select(cond, x, y)
    assert got.dtype == np.dtype(dtype) and got.shape == (4, 5, 3)
    np.testing.assert_array_equal(got, expected)


WHERE_COND = rng.integers(0, 2, (6, 1)).astype(np.int8)
WHERE_INITIAL = {"wx": rng.standard_normal((6, 4)), "wy": rng.standard_normal((4,))}


def define_where_train(dtype: str) -> Callable[..., np.ndarray]:
    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(c: tp.Numpy.Placeholder((6, 1), dtype=flow.int8)) -> tp.Numpy:
        selected = flow.where(c, variable("wx", (6, 4), flow.distribute.split(0)), variable("wy", (4,)))
        loss = flow.math.reduce_mean(flow.math.square(selected - 0.5) * flow.math.exp(selected))
        sgd().minimize(loss)
        return loss

    return train


def where_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    selected = torch.where(torch.from_numpy(WHERE_COND).bool(), p["wx"], p["wy"])
    return torch.mean(torch.square(selected - 0.5) * torch.exp(selected))


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_train_steps_match_torch(dtype):
    ours = our_steps(define_where_train(dtype), WHERE_INITIAL, [WHERE_COND], dtype)
    assert_same_steps(ours, torch_steps(WHERE_INITIAL, where_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_where_on_several_devices_matches_one(devices):
    one = on_devices(1, lambda: define_where_train("float64"), "where", WHERE_INITIAL, [WHERE_COND], "float64")
    many = on_devices(devices, lambda: define_where_train("float64"), "where", WHERE_INITIAL, [WHERE_COND], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(WHERE_INITIAL, where_loss, "float64"), "float64")


def test_where_with_inf_in_the_branch_not_taken_gives_finite_values_and_gradients():
    """inf and -inf in whichever branch is not taken (a masking value, as before a softmax) reach neither
    the result nor the variable's gradient: selected, never multiplied by a 0/1 mask (inf * 0 = NaN)."""
    cond = np.array([1, 1, 0, 0], np.int8)
    high = np.array([np.inf, np.inf, 1.0, 2.0])  # inf where cond holds: never read
    low = np.array([-1.0, 0.5, -np.inf, -np.inf])  # -inf where it does not
    initial = {"w": np.array([0.3, 2.0, -1.0, 3.0])}

    @flow.global_function(type="train", function_config=config_of("float64"))
    def train(c: tp.Numpy.Placeholder((4,), dtype=flow.int8), hi: tp.Numpy.Placeholder((4,), dtype=flow.float64),
              lo: tp.Numpy.Placeholder((4,), dtype=flow.float64)) -> tp.Numpy:
        w = variable("w", (4,))
        loss = flow.math.reduce_sum(flow.math.square(flow.where(c, w, hi)) + flow.where(c, lo, w) * w)
        sgd().minimize(loss)
        return loss

    def loss_of(p):
        mask = torch.from_numpy(cond).bool()
        squared = torch.where(mask, p["w"], torch.from_numpy(high)) ** 2
        return torch.sum(squared + torch.where(mask, torch.from_numpy(low), p["w"]) * p["w"])

    ours = our_steps(train, initial, [cond, high, low], "float64")
    assert np.isfinite(ours[0]).all() and np.isfinite(ours[2]["w"]).all()
    assert_same_steps(ours, torch_steps(initial, loss_of, "float64"), "float64")


@pytest.mark.parametrize("call, what", [(lambda c: flow.where(c), "flow.where with only a condition"),
                                        (lambda c: flow.argwhere(c), "flow.argwhere"),
                                        (lambda c: flow.nonzero(c), "flow.nonzero")])
def test_indices_of_nonzero_entries_are_a_trace_error_saying_why(call, what):
    """Their size depends on the values; dynamic sizes come only from the inputs (docs/dynamic.md)."""
    with pytest.raises(flow.TraceError, match=rf"{what}.* is not supported: its size depends on the values, and "
                                              r"irflow's dynamic sizes come only from the job's inputs") as info:
        @flow.global_function()
        def indices(c: tp.ListNumpy.Placeholder((4,), dtype=flow.int8)) -> tp.ListNumpy:
            return call(c)

    located_here(info, what.split()[0])  # the lambda's line in the table above


def test_where_needs_both_branches_and_an_integer_condition():
    with pytest.raises(flow.TraceError, match=r"flow.where with only a condition .* is not supported") as info:
        @flow.global_function()
        def indices(c: tp.Numpy.Placeholder((4,), dtype=flow.int8)) -> tp.Numpy:
            return flow.where(c)  # the where line

    assert info.value.location.file == __file__
    assert open(__file__).read().splitlines()[info.value.location.line - 1].endswith("# the where line")
    with pytest.raises(flow.TraceError, match=r"condition must be an integer tensor"):
        @flow.global_function()
        def float_condition(c: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
            return flow.where(c, c, 0.0)


# ----------------------------------------------------------------- flow.gather


def torch_gather(params: "torch.Tensor", indices: np.ndarray, axis: int) -> "torch.Tensor":
    """flow.gather's meaning in PyTorch: index_select on the flattened indices, reshaped to their shape."""
    axis %= params.dim()
    picked = torch.index_select(params, axis, torch.from_numpy(indices.reshape(-1)).long())
    return picked.reshape(params.shape[:axis] + indices.shape + params.shape[axis + 1 :])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, indices, axis", [
    ((5, 4), np.array([4, 0, 0, 2], np.int32), None),
    ((3, 6, 2), np.array([[5, 1, 1], [0, 5, 3]], np.int64), 1),
    ((3, 6, 2), np.array([1, 1]), -1),
])  # fmt: skip
def test_gather_forward_matches_torch(dtype, shape, indices, axis):
    params = rng.standard_normal(shape).astype(dtype)

    @flow.global_function(function_config=config_of(dtype))
    def pick(p: tp.Numpy.Placeholder(shape, dtype=getattr(flow, dtype)),
             i: tp.Numpy.Placeholder(indices.shape, dtype=flow.int64 if indices.dtype == np.int64 else flow.int32)
             ) -> tp.Numpy:
        return flow.gather(p, i, axis=axis)

    expected = torch_gather(torch.from_numpy(params), indices, 0 if axis is None else axis).numpy()
    np.testing.assert_array_equal(pick(params, indices.astype(np.int64 if indices.dtype == np.int64 else np.int32)),
                                  expected)


GATHER_IDS = np.array([3, 0, 6, 3, 3, 1, 0, 5, 6, 2, 3, 1], np.int32)  # repeated ids: their gradients add up
GATHER_INITIAL = {"table": rng.standard_normal((7, 6)), "scale": rng.standard_normal((6,))}


def define_gather_train(dtype: str) -> Callable[..., np.ndarray]:
    """An embedding lookup: on several devices the table is split along its features (not the indexed axis),
    and so are the rows looked up until the loss sums them."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(ids: tp.Numpy.Placeholder((12,), dtype=flow.int32)) -> tp.Numpy:
        table = variable("table", (7, 6), flow.distribute.split(1))
        rows = flow.gather(table, ids)
        loss = flow.math.reduce_sum(flow.math.square(flow.math.tanh(rows) * variable("scale", (6,)) - 0.5)) / 72.0
        sgd().minimize(loss)
        return loss

    return train


def gather_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    rows = torch_gather(p["table"], GATHER_IDS, 0)
    return torch.sum(torch.square(torch.tanh(rows) * p["scale"] - 0.5)) / 72.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_train_steps_match_torch(dtype):
    ours = our_steps(define_gather_train(dtype), GATHER_INITIAL, [GATHER_IDS], dtype)
    assert_same_steps(ours, torch_steps(GATHER_INITIAL, gather_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_gather_on_several_devices_matches_one(devices):
    one = on_devices(1, lambda: define_gather_train("float64"), "gather", GATHER_INITIAL, [GATHER_IDS], "float64")
    many = on_devices(devices, lambda: define_gather_train("float64"), "gather", GATHER_INITIAL, [GATHER_IDS],
                      "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(GATHER_INITIAL, gather_loss, "float64"), "float64")


MANY_IDS = rng.integers(0, 4, 48).astype(np.int32)
SMALL_TABLE = {"small": rng.standard_normal((4, 3))}


def define_data_parallel_gather() -> Callable[..., np.ndarray]:
    """Many ids, a small table: data parallel, the ids split and the table's gradient a partial sum."""

    @flow.global_function(type="train", function_config=config_of("float64"))
    def train(ids: tp.Numpy.Placeholder((48,), dtype=flow.int32)) -> tp.Numpy:
        rows = flow.gather(variable("small", (4, 3)), ids)
        loss = flow.math.reduce_mean(flow.math.square(flow.math.sigmoid(rows) - 0.25))
        sgd().minimize(loss)
        return loss

    return train


@pytest.mark.parametrize("devices", [2, 3])
def test_gather_with_split_indices_on_several_devices_matches_one(devices):
    def loss_of(p):
        return torch.mean(torch.square(torch.sigmoid(torch_gather(p["small"], MANY_IDS, 0)) - 0.25))

    one = on_devices(1, define_data_parallel_gather, "gather", SMALL_TABLE, [MANY_IDS], "float64")
    many = on_devices(devices, define_data_parallel_gather, "gather", SMALL_TABLE, [MANY_IDS], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(SMALL_TABLE, loss_of, "float64"), "float64")


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("bad, position", [(7, 2), (-1, 0)])
def test_gather_index_out_of_range_is_named_at_the_users_line_and_changes_nothing(devices, bad, position):
    flow.config.cpu_device_num(devices)
    train = define_gather_train("float64")
    flow.load_variables({k: v.copy() for k, v in GATHER_INITIAL.items()})
    train(GATHER_IDS)  # a good step first
    before = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    ids = GATHER_IDS.copy()
    ids[position] = bad
    with pytest.raises(flow.ExecutionError, match=rf"gather.*: index {bad} at position \[{position}\] is outside "
                                                  r"\[0, 7\) \(axis 0 of params has 7 entries\)") as info:
        train(ids)
    lookup = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1) if "rows = flow.gather(" in text)
    assert info.value.location.file == __file__ and info.value.location.line == lookup
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


def torch_batch_gather(params: "torch.Tensor", indices: np.ndarray) -> "torch.Tensor":
    """OneFlow's batch_gather in PyTorch: torch.gather along the indices' last axis, their index broadcast
    over params' trailing axes (the indices' leading axes are batch axes)."""
    at, rest = indices.ndim - 1, tuple(params.shape[indices.ndim :])
    index = torch.from_numpy(indices.astype(np.int64)).reshape(indices.shape + (1,) * len(rest))
    return torch.gather(params, at, index.expand(indices.shape + rest))


def batch_gathered_by_hand(params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """out[b..., j, ...] = params[b..., indices[b..., j], ...], entry by entry."""
    out = np.empty(indices.shape + params.shape[indices.ndim :], params.dtype)
    for where in np.ndindex(*indices.shape):
        out[where] = params[where[:-1] + (indices[where],)]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape, axis, batch", [
    ((3, 6, 2), (3, 4), None, 1),  # axis defaults to batch_dims
    ((2, 3, 5, 4), (2, 3, 6), 2, 2),
    ((3, 2, 5), (3, 2, 4), None, 1),  # batch axes: the indices' leading two, whatever batch_dims says
    ((2, 5, 3), (2, 4), 2, 2),  # BERT's call: batch_dims past the indices' batch axes
    ((2, 5), (2, 3), -1, 1),
])  # fmt: skip
def test_gather_with_batch_dims_forward_is_oneflows_batch_gather(dtype, shape, index_shape, axis, batch):
    params = rng.standard_normal(shape).astype(dtype)
    indices = rng.integers(0, shape[len(index_shape) - 1], index_shape).astype(np.int32)

    @flow.global_function(function_config=config_of(dtype))
    def pick(p: tp.Numpy.Placeholder(shape, dtype=getattr(flow, dtype)),
             i: tp.Numpy.Placeholder(index_shape, dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(p, i, axis=axis, batch_dims=batch)

    got = pick(params, indices)
    np.testing.assert_array_equal(got, torch_batch_gather(torch.from_numpy(params), indices).numpy())
    np.testing.assert_array_equal(got, batch_gathered_by_hand(params, indices))


BATCH_IDS = rng.integers(0, 7, (6, 5)).astype(np.int32)  # 5 lookups per row, repeated within some rows
BATCH_INITIAL = {"rows": rng.standard_normal((6, 7, 3)), "weigh": rng.standard_normal((3,))}


def define_batch_gather_train(dtype: str) -> Callable[..., np.ndarray]:
    """Each of 6 rows looks up its own table: split along the rows on several devices, ids and table alike."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(ids: tp.Numpy.Placeholder((6, 5), dtype=flow.int32)) -> tp.Numpy:
        picked = flow.gather(variable("rows", (6, 7, 3), flow.distribute.split(0)), ids, batch_dims=1)
        loss = flow.math.reduce_mean(flow.math.square(flow.math.sin(picked) * variable("weigh", (3,)) - 0.25))
        sgd().minimize(loss)
        return loss

    return train


def batch_gather_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    picked = torch_batch_gather(p["rows"], BATCH_IDS)
    return torch.mean(torch.square(torch.sin(picked) * p["weigh"] - 0.25))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_with_batch_dims_train_steps_match_torch(dtype):
    ours = our_steps(define_batch_gather_train(dtype), BATCH_INITIAL, [BATCH_IDS], dtype)
    assert_same_steps(ours, torch_steps(BATCH_INITIAL, batch_gather_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_gather_with_batch_dims_on_several_devices_matches_one(devices):
    define = lambda: define_batch_gather_train("float64")  # noqa: E731
    one = on_devices(1, define, "gather", BATCH_INITIAL, [BATCH_IDS], "float64")
    many = on_devices(devices, define, "gather", BATCH_INITIAL, [BATCH_IDS], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(BATCH_INITIAL, batch_gather_loss, "float64"), "float64")


DEEP_IDS = rng.integers(0, 4, (4, 3, 5)).astype(np.int32)  # batch axes (4, 3), whatever batch_dims=1 says
DEEP_INITIAL = {"deep": rng.standard_normal((4, 3, 4, 2))}


def define_deep_batch_gather_train(dtype: str) -> Callable[..., np.ndarray]:
    """3-D indices with batch_dims=1: OneFlow gathers along params' axis 2 with batch axes (4, 3)."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(ids: tp.Numpy.Placeholder((4, 3, 5), dtype=flow.int32)) -> tp.Numpy:
        picked = flow.gather(variable("deep", (4, 3, 4, 2), flow.distribute.split(0)), ids, batch_dims=1)
        loss = flow.math.reduce_mean(flow.math.square(flow.math.tanh(picked) - 0.5))
        sgd().minimize(loss)
        return loss

    return train


def deep_batch_gather_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    return torch.mean(torch.square(torch.tanh(torch_batch_gather(p["deep"], DEEP_IDS)) - 0.5))


@pytest.mark.parametrize("devices, dtype", [(1, "float32"), (1, "float64"), (2, "float64")])
def test_gather_with_batch_dims_over_3d_indices_trains_as_torch(devices, dtype):
    define = lambda: define_deep_batch_gather_train(dtype)  # noqa: E731
    ours = on_devices(devices, define, "gather", DEEP_INITIAL, [DEEP_IDS], dtype)
    assert_same_steps(ours, torch_steps(DEEP_INITIAL, deep_batch_gather_loss, dtype), dtype)


@pytest.mark.parametrize("devices, where", [(1, r"gather: index 7 at position \[4, 2\]"),
                                            (3, r"gather on device 2 of 3 \(positions within its part\): index 7 "
                                                r"at position \[0, 2\]")])  # rows 4 and 5 are device 2's
def test_gather_with_batch_dims_index_out_of_range_is_named_at_the_users_line(devices, where):
    flow.config.cpu_device_num(devices)
    train = define_batch_gather_train("float64")
    flow.load_variables({k: v.copy() for k, v in BATCH_INITIAL.items()})
    before = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    ids = BATCH_IDS.copy()
    ids[4, 2] = 7
    with pytest.raises(flow.ExecutionError, match=where + r" is outside \[0, 7\) \(axis 1 of params has 7 entries\)"
                       ) as info:
        train(ids)
    lookup = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1) if "picked = flow.gather(" in text)
    assert info.value.location.file == __file__ and info.value.location.line == lookup
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


@pytest.mark.parametrize("index_shape, axis, batch, message", [
    ((2, 3), 0, 1, r"flow.gather: with batch_dims=1 \(OneFlow's batch_gather\) axis must be 1 or None, got 0"),
    ((2, 3), 2, 1, r"flow.gather: with batch_dims=1 \(OneFlow's batch_gather\) axis must be 1 or None, got 2"),
    ((2, 3), None, -1, r"flow.gather: batch_dims must be a non-negative int, got -1"),
    ((3, 3), None, 1, r"flow.gather: gather with batch_dims 1 needs that many leading axes of params "
                      r"tensor<2x5x4xf32> and indices tensor<3x3xi32> equal"),
    ((2,), None, 2, r"flow.gather: with batch_dims=2 \(OneFlow's batch_gather\) indices must be a Blob of 2 to 3 "
                    r"axes \(params' rank\), the last one gathering"),
    ((2, 5, 4, 1), 1, 1, r"flow.gather: with batch_dims=1 .* indices must be a Blob of 2 to 3 axes"),
    ((2, 3), 5, 0, r"flow.gather: axis must be an int in \[-3, 3\), got 5"),
])  # fmt: skip
def test_gather_with_bad_batch_dims_is_a_trace_error(index_shape, axis, batch, message):
    with pytest.raises(flow.TraceError, match=message) as info:
        @flow.global_function()
        def batched(p: tp.Numpy.Placeholder((2, 5, 4)), i: tp.Numpy.Placeholder(index_shape, dtype=flow.int32)
                    ) -> tp.Numpy:
            return flow.gather(p, i, axis=axis, batch_dims=batch)  # the batched gather

    assert info.value.location.file == __file__
    assert open(__file__).read().splitlines()[info.value.location.line - 1].endswith("# the batched gather")


# ----------------------------------------------------------------- flow.dim_gather


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape, dim", [((3, 4, 5), (3, 6, 5), 1), ((4, 3), (2, 3), 0),
                                                     ((2, 3, 4), (2, 3, 7), -1)])  # fmt: skip
def test_dim_gather_forward_matches_torch(dtype, shape, index_shape, dim):
    x = rng.standard_normal(shape).astype(dtype)
    index = rng.integers(0, shape[dim], index_shape).astype(np.int64)

    @flow.global_function(function_config=config_of(dtype))
    def pick(a: tp.Numpy.Placeholder(shape, dtype=getattr(flow, dtype)),
             i: tp.Numpy.Placeholder(index_shape, dtype=flow.int64)) -> tp.Numpy:
        return flow.dim_gather(a, dim, i)

    np.testing.assert_array_equal(pick(x, index), torch.gather(torch.from_numpy(x), dim, torch.from_numpy(index)).numpy())


DIM_INDEX = rng.integers(0, 5, (6, 8)).astype(np.int32)  # 8 picks of 5 per row: repeats
DIM_INITIAL = {"scores": rng.standard_normal((6, 5)), "shift": rng.standard_normal((8,))}


def define_dim_gather_train(dtype: str) -> Callable[..., np.ndarray]:
    """Each row picks its own entries; on several devices the rows split, scores and index alike."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(index: tp.Numpy.Placeholder((6, 8), dtype=flow.int32)) -> tp.Numpy:
        picked = flow.dim_gather(variable("scores", (6, 5), flow.distribute.split(0)), 1, index)
        loss = flow.math.reduce_mean(flow.math.square(flow.math.tanh(picked + variable("shift", (8,))) - 0.5))
        sgd().minimize(loss)
        return loss

    return train


def dim_gather_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    picked = torch.gather(p["scores"], 1, torch.from_numpy(DIM_INDEX).long())
    return torch.mean(torch.square(torch.tanh(picked + p["shift"]) - 0.5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dim_gather_train_steps_match_torch(dtype):
    ours = our_steps(define_dim_gather_train(dtype), DIM_INITIAL, [DIM_INDEX], dtype)
    assert_same_steps(ours, torch_steps(DIM_INITIAL, dim_gather_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_dim_gather_on_several_devices_matches_one(devices):
    define = lambda: define_dim_gather_train("float64")  # noqa: E731
    one = on_devices(1, define, "dim_gather", DIM_INITIAL, [DIM_INDEX], "float64")
    many = on_devices(devices, define, "dim_gather", DIM_INITIAL, [DIM_INDEX], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(DIM_INITIAL, dim_gather_loss, "float64"), "float64")


def test_dim_gather_index_out_of_range_is_named_at_the_users_line():
    train = define_dim_gather_train("float64")
    flow.load_variables({k: v.copy() for k, v in DIM_INITIAL.items()})
    before = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    index = DIM_INDEX.copy()
    index[3, 6] = -1
    with pytest.raises(flow.ExecutionError, match=r"dim_gather: index -1 at position \[3, 6\] is outside \[0, 5\) "
                                                  r"\(dim 1 of input has 5 entries\)") as info:
        train(index)
    lookup = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1) if "= flow.dim_gather(variable" in text)
    assert info.value.location.file == __file__ and info.value.location.line == lookup
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


@pytest.mark.parametrize("index_shape, dim, dtype, message", [
    ((3, 2), 1, flow.int32, r"flow.dim_gather: dim_gather index tensor<3x2xi32> must have the shape of input "
                            r"tensor<2x5xf32> but along dim 1"),
    ((2, 5, 1), 1, flow.int32, r"must have the shape of input"),
    ((2, 3), 2, flow.int32, r"flow.dim_gather: axis must be an int in \[-2, 2\), got 2"),
    ((2, 3), 1, flow.float32, r"flow.dim_gather: dim_gather index must be int32/int64, got tensor<2x3xf32>"),
])  # fmt: skip
def test_dim_gather_with_bad_arguments_is_a_trace_error(index_shape, dim, dtype, message):
    with pytest.raises(flow.TraceError, match=message) as info:
        @flow.global_function()
        def picked(x: tp.Numpy.Placeholder((2, 5)), i: tp.Numpy.Placeholder(index_shape, dtype=dtype)) -> tp.Numpy:
            return flow.dim_gather(x, dim, i)  # the dim_gather

    assert info.value.location.file == __file__
    assert open(__file__).read().splitlines()[info.value.location.line - 1].endswith("# the dim_gather")


# ----------------------------------------------------------------- flow.gather_nd and flow.scatter_nd


def torch_coordinates(indices: np.ndarray) -> tuple["torch.Tensor", ...]:
    """The indices' last axis as PyTorch's advanced index (one tensor per coordinate)."""
    return tuple(torch.from_numpy(indices[..., k]).long() for k in range(indices.shape[-1]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape", [((3, 4, 5), (2, 6, 2)), ((5, 3), (4, 1)), ((3, 4), (7, 2))])
def test_gather_nd_and_scatter_nd_forward_match_torch(dtype, shape, index_shape):
    params = rng.standard_normal(shape).astype(dtype)
    indices = np.stack([rng.integers(0, n, index_shape[:-1]) for n in shape[: index_shape[-1]]], -1).astype(np.int32)
    sliced = index_shape[:-1] + shape[index_shape[-1] :]
    updates = rng.standard_normal(sliced).astype(dtype)
    T = tp.Numpy.Placeholder

    @flow.global_function(function_config=config_of(dtype))
    def nd(p: T(shape, dtype=getattr(flow, dtype)), i: T(index_shape, dtype=flow.int32),
           u: T(sliced, dtype=getattr(flow, dtype))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.gather_nd(p, i), flow.scatter_nd(i, u, shape)

    picked, scattered = nd(params, indices, updates)
    np.testing.assert_array_equal(picked, torch.from_numpy(params)[torch_coordinates(indices)].numpy())
    added = torch.zeros(shape, dtype=getattr(torch, dtype)).index_put_(torch_coordinates(indices),
                                                                        torch.from_numpy(updates), accumulate=True)
    np.testing.assert_allclose(scattered, added.numpy(), **tol(dtype))


ND_INDICES = np.stack([rng.integers(0, 4, (6, 3)), rng.integers(0, 5, (6, 3))], -1).astype(np.int32)
ND_INITIAL = {"grid": rng.standard_normal((4, 5, 6)), "spread": rng.standard_normal((6, 3, 6))}


def define_nd_train(dtype: str) -> Callable[..., np.ndarray]:
    """A lookup of (row, column) pairs, and a variable scattered into a grid: on several devices both split
    along their slices' last axis."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(at: tp.Numpy.Placeholder((6, 3, 2), dtype=flow.int32)) -> tp.Numpy:
        picked = flow.gather_nd(variable("grid", (4, 5, 6), flow.distribute.split(2)), at)
        spread = flow.scatter_nd(at, variable("spread", (6, 3, 6), flow.distribute.split(2)), (4, 5, 6))
        loss = (flow.math.reduce_mean(flow.math.square(flow.math.tanh(picked) - 0.5))
                + flow.math.reduce_mean(flow.math.square(spread - 0.25) * flow.math.sigmoid(picked[0, 0])))
        sgd().minimize(loss)
        return loss

    return train


def nd_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    picked = p["grid"][torch_coordinates(ND_INDICES)]
    spread = torch.zeros((4, 5, 6), dtype=p["grid"].dtype).index_put(torch_coordinates(ND_INDICES), p["spread"],
                                                                      accumulate=True)
    return torch.mean(torch.square(torch.tanh(picked) - 0.5)) + torch.mean(
        torch.square(spread - 0.25) * torch.sigmoid(picked[0, 0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_nd_and_scatter_nd_train_steps_match_torch(dtype):
    ours = our_steps(define_nd_train(dtype), ND_INITIAL, [ND_INDICES], dtype)
    assert_same_steps(ours, torch_steps(ND_INITIAL, nd_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_gather_nd_and_scatter_nd_on_several_devices_match_one(devices):
    define = lambda: define_nd_train("float64")  # noqa: E731
    one = on_devices(1, define, "gather_nd", ND_INITIAL, [ND_INDICES], "float64")
    many = on_devices(devices, define, "scatter_nd", ND_INITIAL, [ND_INDICES], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(ND_INITIAL, nd_loss, "float64"), "float64")


def test_gather_nd_coordinate_out_of_range_is_named_at_the_users_line():
    train = define_nd_train("float64")
    flow.load_variables({k: v.copy() for k, v in ND_INITIAL.items()})
    before = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    at = ND_INDICES.copy()
    at[2, 1, 1] = 5
    with pytest.raises(flow.ExecutionError, match=r"gather_nd: index 5 at position \[2, 1, 1\] is outside \[0, 5\) "
                                                  r"\(axis 1 of params has 5 entries\)") as info:
        train(at)
    lookup = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1) if "= flow.gather_nd(variable" in text)
    assert info.value.location.file == __file__ and info.value.location.line == lookup
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


@pytest.mark.parametrize("call, message", [
    (lambda p, i: flow.gather_nd(p, i), r"flow.gather_nd: gather_nd indices tensor<2x3xi32> need a last axis of 1 "
                                        r"to 2 coordinates of params tensor<4x5xf32>"),
    (lambda p, i: flow.scatter_nd(i, p, (4, 5, 6, 7)), r"flow.scatter_nd: gather_nd of tensor<4x5x6x7xf32> at indices "
                                                       r"tensor<2x3xi32> does not have the updates' type tensor<4x5xf32>"),
    (lambda p, i: flow.scatter_nd(i, p, 4.5), r"flow.scatter_nd: shape must be a list or tuple of ints"),
])  # fmt: skip
def test_gather_nd_and_scatter_nd_with_bad_arguments_are_trace_errors(call, message):
    with pytest.raises(flow.TraceError, match=message) as info:
        @flow.global_function()
        def nd(p: tp.Numpy.Placeholder((4, 5)), i: tp.Numpy.Placeholder((2, 3), dtype=flow.int32)) -> tp.Numpy:
            return call(p, i)

    located_here(info, re.match(r"flow\.\w+", message).group())  # the lambda's line in the table above


# ----------------------------------------------------------------- flow.tensor_scatter_nd_update and _add


def torch_tensor_scatter_nd(params: "torch.Tensor", indices: np.ndarray, updates: "torch.Tensor",
                            update: bool) -> "torch.Tensor":  # fmt: skip
    """OneFlow's kernels in PyTorch: for update the indexed slices zeroed first (writing zeros, the same
    whichever repeat wins), then the updates added there with accumulate=True, so repeats add up."""
    at = torch_coordinates(indices)
    if update:
        params = params.index_put(at, torch.zeros((), dtype=params.dtype))
    return params.index_put(at, updates, accumulate=True)


def test_tensor_scatter_nd_is_oneflows_example():
    @flow.global_function()
    def both(x: tp.Numpy.Placeholder((5, 3)), i: tp.Numpy.Placeholder((3, 1), dtype=flow.int32),
             u: tp.Numpy.Placeholder((3, 3))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.tensor_scatter_nd_update(params=x, indices=i, updates=u), flow.tensor_scatter_nd_add(x, i, u)

    x = np.tile(np.array([1, 2, 3], np.float32), (5, 1))
    updated, added = both(x, np.array([[0], [4], [2]], np.int32), np.repeat(np.arange(1, 4, dtype=np.float32), 3)
                          .reshape(3, 3))  # fmt: skip
    np.testing.assert_array_equal(updated, [[1, 1, 1], [1, 2, 3], [3, 3, 3], [1, 2, 3], [2, 2, 2]])  # OneFlow's doc
    np.testing.assert_array_equal(added, [[2, 3, 4], [1, 2, 3], [4, 5, 6], [1, 2, 3], [3, 4, 5]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_shape", [((3, 4, 5), (2, 6, 2)), ((5, 3), (4, 1)), ((3, 4), (7, 2))])
def test_tensor_scatter_nd_forward_matches_torch(dtype, shape, index_shape):
    params = rng.standard_normal(shape).astype(dtype)
    indices = np.stack([rng.integers(0, min(n, 2), index_shape[:-1]) for n in shape[: index_shape[-1]]],
                       -1).astype(np.int32)  # few coordinates: repeated  # fmt: skip
    sliced = index_shape[:-1] + shape[index_shape[-1] :]
    updates = rng.standard_normal(sliced).astype(dtype)
    T = tp.Numpy.Placeholder

    @flow.global_function(function_config=config_of(dtype))
    def nd(p: T(shape, dtype=getattr(flow, dtype)), i: T(index_shape, dtype=flow.int32),
           u: T(sliced, dtype=getattr(flow, dtype))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.tensor_scatter_nd_update(p, i, u), flow.tensor_scatter_nd_add(p, i, u)

    updated, added = nd(params, indices, updates)
    for got, update in ((updated, True), (added, False)):
        want = torch_tensor_scatter_nd(torch.from_numpy(params), indices, torch.from_numpy(updates), update)
        np.testing.assert_allclose(got, want.numpy(), **tol(dtype))


WRITE_INITIAL = {"base": rng.standard_normal((4, 5, 6)), "patch": rng.standard_normal((6, 3, 6))}


def define_write_train(dtype: str) -> Callable[..., np.ndarray]:
    """A variable written (update) and added (add) into another at (row, column) pairs, some repeated: on
    several devices both split along their slices' last axis."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(at: tp.Numpy.Placeholder((6, 3, 2), dtype=flow.int32)) -> tp.Numpy:
        base = variable("base", (4, 5, 6), flow.distribute.split(2))
        patch = variable("patch", (6, 3, 6), flow.distribute.split(2))
        written = flow.tensor_scatter_nd_update(base, at, patch)
        added = flow.tensor_scatter_nd_add(base, at, patch * 0.5)
        loss = (flow.math.reduce_mean(flow.math.square(flow.math.tanh(written) - 0.5))
                + flow.math.reduce_mean(flow.math.square(added - 0.25) * flow.math.sigmoid(written)))
        sgd().minimize(loss)
        return loss

    return train


def write_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    written = torch_tensor_scatter_nd(p["base"], ND_INDICES, p["patch"], update=True)
    added = torch_tensor_scatter_nd(p["base"], ND_INDICES, p["patch"] * 0.5, update=False)
    return torch.mean(torch.square(torch.tanh(written) - 0.5)) + torch.mean(
        torch.square(added - 0.25) * torch.sigmoid(written))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_scatter_nd_train_steps_match_torch(dtype):
    assert len({tuple(c) for c in ND_INDICES.reshape(-1, 2)}) < 18  # repeats: update sums them
    ours = our_steps(define_write_train(dtype), WRITE_INITIAL, [ND_INDICES], dtype)
    assert_same_steps(ours, torch_steps(WRITE_INITIAL, write_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_tensor_scatter_nd_on_several_devices_matches_one(devices):
    define = lambda: define_write_train("float64")  # noqa: E731
    one = on_devices(1, define, "tensor_scatter_nd_update", WRITE_INITIAL, [ND_INDICES], "float64")
    many = on_devices(devices, define, "tensor_scatter_nd_add", WRITE_INITIAL, [ND_INDICES], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(WRITE_INITIAL, write_loss, "float64"), "float64")


@pytest.mark.parametrize("devices", [1, 2])
def test_tensor_scatter_nd_coordinate_out_of_range_is_named_at_the_users_line(devices):
    flow.config.cpu_device_num(devices)
    train = define_write_train("float64")
    flow.load_variables({k: v.copy() for k, v in WRITE_INITIAL.items()})
    before = {name: v.numpy().copy() for name, v in flow.get_all_variables().items()}
    at = ND_INDICES.copy()
    at[4, 2, 0] = -1
    with pytest.raises(flow.ExecutionError, match=r"tensor_scatter_nd_update.*: index -1 at position \[4, 2, 0\] "
                                                  r"is outside \[0, 4\) \(axis 0 of params has 4 entries\)") as info:
        train(at)
    lookup = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1)
                  if "= flow.tensor_scatter_nd_update(base" in text)  # fmt: skip
    assert info.value.location.file == __file__ and info.value.location.line == lookup
    for name, value in flow.get_all_variables().items():
        np.testing.assert_array_equal(value.numpy(), before[name], err_msg=name)


@pytest.mark.parametrize("call, message", [
    (lambda p, i: flow.tensor_scatter_nd_update(p, i, p), r"flow.tensor_scatter_nd_update: gather_nd of params "
                                                          r"tensor<4x5xf32> at indices tensor<3x1xi32> does not have "
                                                          r"the updates' type tensor<4x5xf32>"),
    (lambda p, i: flow.tensor_scatter_nd_add(p, i, 1.0), r"flow.tensor_scatter_nd_add: updates must be a Blob, got "
                                                         r"float 1.0"),
    (lambda p, i: flow.tensor_scatter_nd_add(p, p, p), r"flow.tensor_scatter_nd_add: gather_nd indices must be "
                                                       r"int32/int64, got tensor<4x5xf32>"),
])  # fmt: skip
def test_tensor_scatter_nd_with_bad_arguments_are_trace_errors(call, message):
    with pytest.raises(flow.TraceError, match=message) as info:
        @flow.global_function()
        def nd(p: tp.Numpy.Placeholder((4, 5)), i: tp.Numpy.Placeholder((3, 1), dtype=flow.int32)) -> tp.Numpy:
            return call(p, i)

    located_here(info, re.match(r"flow\.\w+", message).group())  # the lambda's line in the table above


# ----------------------------------------------------------------- flow.stack, the pads, broadcast_like, reshape_like

import torch.nn.functional as F  # noqa: E402  (after importorskip: the oracle of the pads)


@pytest.mark.parametrize("dtype", DTYPES)
def test_stack_pads_and_likes_forward_match_torch(dtype):
    x = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    row = rng.standard_normal((1, 3, 1, 5)).astype(dtype)
    T = tp.Numpy.Placeholder

    @flow.global_function(function_config=config_of(dtype))
    def moved(a: T((2, 3, 4, 5), dtype=getattr(flow, dtype)), r: T((1, 3, 1, 5), dtype=getattr(flow, dtype))
              ) -> Tuple[tp.Numpy, ...]:
        return (flow.stack([a, a * 2.0, a * 3.0], axis=-2), flow.stack([r], axis=0),
                flow.pad(a, ((0, 0), (1, 0), (0, 2), (3, 1)), constant_value=1.5),
                flow.constant_pad2d(a, [2, 0, 1, 3], -2.0), flow.zero_pad2d(a, 1),
                flow.reflection_pad2d(a, [2, 1, 3, 0]), flow.replication_pad2d(a, 2),
                flow.broadcast_like(r, a, broadcast_axes=[0, 2]),  # r has a's shape with axes 0 and 2 of size 1 ...
                flow.broadcast_like(flow.reshape(r, (3, 5)), a, broadcast_axes=(0, -2)),  # ... or left out
                flow.reshape_like(a, flow.constant(0.0, shape=(6, 20))))

    t, tr = torch.from_numpy(x), torch.from_numpy(row)
    expected = [torch.stack([t, t * 2, t * 3], dim=-2), torch.stack([tr], dim=0),
                F.pad(t, (3, 1, 0, 2, 1, 0), value=1.5), F.pad(t, (2, 0, 1, 3), value=-2.0), F.pad(t, (1, 1, 1, 1)),
                F.pad(t, (2, 1, 3, 0), mode="reflect"), F.pad(t, (2, 2, 2, 2), mode="replicate"),
                tr.expand(2, 3, 4, 5), tr.expand(2, 3, 4, 5), t.reshape(6, 20)]
    for i, (got, want) in enumerate(zip(moved(x, row), expected)):
        assert got.dtype == np.dtype(dtype), i
        np.testing.assert_array_equal(got, want.numpy(), err_msg=f"result {i}")


def test_pad_of_integers_takes_the_integral_value():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)

    @flow.global_function()
    def padded(a: tp.Numpy.Placeholder((2, 3), dtype=flow.int32)) -> tp.Numpy:
        return flow.pad(a, [[1, 1], [0, 2]], constant_value=7.9)

    np.testing.assert_array_equal(padded(x), F.pad(torch.from_numpy(x), (0, 2, 1, 1), value=7).numpy())


PAD_INPUT = rng.standard_normal((6, 2, 4, 5))
PAD_INITIAL = {"pw": rng.standard_normal((2, 4, 5)), "pv": rng.standard_normal((2, 5))}


def define_pad_train(dtype: str) -> Callable[..., np.ndarray]:
    """Every new function in one loss of two variables: pw scales the (data parallel) input before the pads,
    pv is stacked and broadcast."""

    @flow.global_function(type="train", function_config=config_of(dtype))
    def train(x: tp.Numpy.Placeholder((6, 2, 4, 5), dtype=getattr(flow, dtype))) -> tp.Numpy:
        y = x * variable("pw", (2, 4, 5))
        v = variable("pv", (2, 5))
        terms = [
            flow.math.square(flow.math.tanh(flow.reflection_pad2d(y, [2, 1, 3, 0])) - 0.25),
            flow.math.sigmoid(flow.replication_pad2d(y, [1, 3, 2, 0])) * 0.5,
            flow.math.square(flow.pad(y, ((0, 0), (1, 0), (0, 2), (2, 1)), constant_value=0.5) - 1.0),
            flow.math.square(flow.constant_pad2d(y, 1, -1.0)) * 0.25,
            flow.math.exp(flow.stack([y, y * y], axis=2) * 0.125),
            flow.math.square(y - flow.broadcast_like(v, y, broadcast_axes=[0, 2])),
            flow.math.square(flow.reshape_like(v, flow.constant(0.0, shape=(10,))) - 0.5),
        ]
        loss = flow.math.add_n([flow.math.reduce_mean(t) for t in terms])
        sgd().minimize(loss)
        return loss

    return train


def pad_loss(p: dict[str, "torch.Tensor"]) -> "torch.Tensor":
    y = torch.from_numpy(PAD_INPUT).to(p["pw"].dtype) * p["pw"]
    terms = [
        torch.square(torch.tanh(F.pad(y, (2, 1, 3, 0), mode="reflect")) - 0.25),
        torch.sigmoid(F.pad(y, (1, 3, 2, 0), mode="replicate")) * 0.5,
        torch.square(F.pad(y, (2, 1, 0, 2, 1, 0), value=0.5) - 1.0),
        torch.square(F.pad(y, (1, 1, 1, 1), value=-1.0)) * 0.25,
        torch.exp(torch.stack([y, y * y], dim=2) * 0.125),
        torch.square(y - p["pv"][None, :, None, :]),
        torch.square(p["pv"].reshape(10) - 0.5),
    ]
    return sum(torch.mean(t) for t in terms)


@pytest.mark.parametrize("dtype", DTYPES)
def test_stack_pads_and_likes_train_steps_match_torch(dtype):
    ours = our_steps(define_pad_train(dtype), PAD_INITIAL, [PAD_INPUT.astype(dtype)], dtype)
    assert_same_steps(ours, torch_steps(PAD_INITIAL, pad_loss, dtype), dtype)


@pytest.mark.parametrize("devices", [2, 3])
def test_pads_on_several_devices_match_one(devices):
    """The batch split over the devices: the pads' gathers and concats run split along it."""
    one = on_devices(1, lambda: define_pad_train("float64"), "gather", PAD_INITIAL, [PAD_INPUT], "float64")
    many = on_devices(devices, lambda: define_pad_train("float64"), "gather", PAD_INITIAL, [PAD_INPUT], "float64")
    assert_same_steps(many, one, "float64")
    assert_same_steps(many, torch_steps(PAD_INITIAL, pad_loss, "float64"), "float64")


def located_here(info: pytest.ExceptionInfo, call: str) -> None:
    """The TraceError points at this file's line that makes the call `call`."""
    assert info.value.location.file == __file__
    assert f"{call}(" in open(__file__).read().splitlines()[info.value.location.line - 1]


@pytest.mark.parametrize("call, message", [
    (lambda a, b: flow.stack([a, b]), r"flow.stack: every input must have the shape of the first, \(2, 3, 4, 5\); "
                                      r"input 1 has \(2, 3, 4, 1\)"),
    (lambda a, b: flow.stack([a, a], axis=5), r"flow.stack: axis must be an int in \[-5, 5\), got 5"),
    (lambda a, b: flow.pad(a, [(1, 1)] * 3), r"flow.pad: paddings must be 4 pairs \(before, after\) of non-negative"),
    (lambda a, b: flow.pad(a, [(0, 0), (0, -1), (0, 0), (0, 0)]), r"flow.pad: paddings must be 4 pairs"),
    (lambda a, b: flow.reflection_pad2d(a, [0, 0, 4, 0]), r"flow.reflection_pad2d: padding \[4, 0\] must be less "
                                                          r"than the size 4 of its axis in \(2, 3, 4, 5\)"),
    (lambda a, b: flow.replication_pad2d(b[0], 1), r"flow.replication_pad2d expects an NCHW Blob of rank 4"),
    (lambda a, b: flow.constant_pad2d(a, [1, 2]), r"flow.constant_pad2d: padding must be a non-negative int or 4 of them"),
    (lambda a, b: flow.broadcast_like(b, a, broadcast_axes=[2]), r"flow.broadcast_like: x of shape \(2, 3, 4, 1\) "
     r"must have like's shape \(2, 3, 4, 5\) with broadcast_axes \[2\] of size 1 \(2, 3, 1, 5\) or left out"),
    (lambda a, b: flow.reshape_like(a, b), r"flow.reshape_like: x of shape \(2, 3, 4, 5\) cannot be reshaped"),
])  # fmt: skip
def test_stack_pads_and_likes_refuse_bad_arguments_at_the_users_line(call, message):
    with pytest.raises(flow.TraceError, match=message) as info:
        @flow.global_function()
        def bad(a: tp.Numpy.Placeholder((2, 3, 4, 5)), b: tp.Numpy.Placeholder((2, 3, 4, 1))) -> tp.Numpy:
            return call(a, b)

    located_here(info, re.match(r"flow\.\w+", message).group())  # the lambda's line in the table above
