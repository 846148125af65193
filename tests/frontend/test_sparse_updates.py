"""LazyAdam and function_config.indexed_slices_optimizer_conf on an embedding lookup that gathers only some rows,
against numpy written from OneFlow's kernels (PyTorch's gradients) and against torch.optim.SparseAdam."""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")

VOCAB, DIM, BATCH, FIELDS = 10, 3, 4, 2
LR = 2.0**-4  # exact in float32, the learning rate's type
# Rows 7-9 are never gathered; 1, 3 and 4 sit out step 2 and 5, 6 step 1; rows repeat within a step.
IDS = [np.array(ids, np.int32) for ids in ([[0, 1], [2, 0], [3, 3], [1, 4]],
                                            [[5, 6], [5, 2], [6, 0], [2, 2]],
                                            [[1, 4], [4, 0], [3, 5], [1, 1]])]
TARGETS = [np.random.default_rng(k).standard_normal(BATCH) for k in range(len(IDS))]
# Multiplies the gathered rows: step 2 zeroes each embedding's dimension 0, so rows 0 and 2, gathered at
# steps 1 and 2, have a zero gradient there at step 2 after a nonzero one at step 1.
SCALES = [np.ones((BATCH, FIELDS * DIM)) for _ in IDS]
SCALES[1][:, ::DIM] = 0.0


def initial() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"emb": rng.uniform(-0.5, 0.5, (VOCAB, DIM)), "proj": rng.standard_normal((FIELDS * DIM, 1))}


def program(optimizer, indexed: bool = False, proj_trainable: bool = True, split: int | None = None,
            devices: int = 1):
    """A train job in a new session: gather rows of `emb`, scale and project them, squared error."""
    flow.clear_default_session()
    flow.config.cpu_device_num(devices)
    config = flow.FunctionConfig()
    config.default_data_type(flow.float64)
    if indexed:
        config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["emb"])))

    @flow.global_function(type="train", function_config=config)
    def train(ids: tp.Numpy.Placeholder((BATCH, FIELDS), dtype=flow.int32),
              scale: tp.Numpy.Placeholder((BATCH, FIELDS * DIM), dtype=flow.float64),
              y: tp.Numpy.Placeholder((BATCH,), dtype=flow.float64)) -> tp.Numpy:
        table = flow.get_variable("emb", shape=(VOCAB, DIM), dtype=flow.float64,
                                  distribute=None if split is None else flow.distribute.split(split))
        proj = flow.get_variable("proj", shape=(FIELDS * DIM, 1), dtype=flow.float64, trainable=proj_trainable)
        rows = flow.reshape(flow.gather(params=table, indices=ids), (BATCH, FIELDS * DIM)) * scale
        loss = flow.math.reduce_mean(flow.math.square(flow.reshape(flow.matmul(rows, proj), (BATCH,)) - y))
        optimizer().minimize(loss)
        return loss

    return train


def variables() -> dict[str, np.ndarray]:
    return {name: v.numpy() for name, v in flow.get_all_variables().items()}


def train_ours(optimizer, indexed: bool = False, **options) -> dict[str, np.ndarray]:
    """The variables after a train step per batch of IDS."""
    train = program(optimizer, indexed, **options)
    flow.load_variables(initial())
    for batch in zip(IDS, SCALES, TARGETS):
        train(*batch)
    return variables()


def torch_loss(table, proj, ids: np.ndarray, scale: np.ndarray, y: np.ndarray, sparse: bool = False):
    rows = torch.nn.functional.embedding(torch.from_numpy(ids).long(), table, sparse=sparse)
    rows = rows.reshape(BATCH, FIELDS * DIM) * torch.from_numpy(scale)
    return ((rows @ proj).reshape(BATCH) - torch.from_numpy(y)).square().mean()


def train_reference(update, present, trained=("emb", "proj")) -> dict[str, np.ndarray]:
    """PyTorch's gradients; `update(w, g, state, step, mask)` (numpy, in place) where `present(name, g, ids)`."""
    weights = initial()
    states: dict[str, dict] = {name: {} for name in trained}
    for step, (ids, scale, y) in enumerate(zip(IDS, SCALES, TARGETS), start=1):
        table, proj = (torch.tensor(weights[n], requires_grad=True) for n in ("emb", "proj"))
        torch_loss(table, proj, ids, scale, y).backward()
        grads = {"emb": table.grad.numpy(), "proj": proj.grad.numpy()}
        for name in trained:
            update(weights[name], grads[name], states[name], step, present(name, grads[name], ids))
    return {**weights, **{f"{name}-{key}": value for name, state in states.items() for key, value in state.items()}}


def nonzero(name, g, ids):
    """OneFlow's lazy_adam kernel: an element whose gradient is below 1e-12 in magnitude is skipped."""
    return np.abs(g) >= 1e-12


def everything(name, g, ids):
    return np.ones(g.shape, bool)


def gathered(dense=everything):
    """The table's gradient as an indexed slice: every element of the rows gathered in this step; the other
    variables' elements where `dense` says."""

    def present(name, g, ids):
        if name != "emb":
            return dense(name, g, ids)
        rows = np.zeros((VOCAB, 1), bool)
        rows[np.unique(ids)] = True
        return np.broadcast_to(rows, g.shape)

    return present


def lazy_adam(beta1: float, beta2: float, epsilon: float):
    """OneFlow's lazy_adam kernel: the moments and a bias-corrected rate, epsilon added to sqrt(v) uncorrected."""

    def update(w, g, state, step, mask):
        m, v = state.setdefault("m", np.zeros_like(w)), state.setdefault("v", np.zeros_like(w))
        m[mask] = beta1 * m[mask] + (1 - beta1) * g[mask]
        v[mask] = beta2 * v[mask] + (1 - beta2) * g[mask] ** 2
        w[mask] -= LR * np.sqrt(1 - beta2**step) / (1 - beta1**step) * m[mask] / (np.sqrt(v[mask]) + epsilon)

    return update


def assert_close(ours: dict[str, np.ndarray], want: dict[str, np.ndarray], rtol: float = 1e-10) -> None:
    for name, value in want.items():
        np.testing.assert_allclose(ours[name], value, rtol=rtol, atol=1e-14, err_msg=name)


def make_lazy_adam():
    return flow.optimizer.LazyAdam(flow.optimizer.PiecewiseConstantScheduler([], [LR]), 0.8, 0.9, 1e-3)


def test_lazy_adam_updates_only_the_elements_with_a_gradient():
    ours = train_ours(make_lazy_adam)
    assert_close(ours, train_reference(lazy_adam(0.8, 0.9, 1e-3), nonzero))
    np.testing.assert_array_equal(ours["emb"][7:], initial()["emb"][7:])  # never gathered: untouched, no state
    assert not ours["emb-m"][7:].any() and not ours["emb-v"][7:].any()


def test_dense_adam_fails_the_lazy_oracle():
    """The oracle can fail: Adam, bias-corrected as LazyAdam, decays the moments of every row at every step."""
    dense = train_ours(lambda: flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [LR]), 0.8, 0.9,
                                                   1e-3, do_bias_correction=True))
    with pytest.raises(AssertionError, match="emb"):
        assert_close(dense, train_reference(lazy_adam(0.8, 0.9, 1e-3), nonzero))


def sparse_adam() -> tuple[np.ndarray, np.ndarray]:
    """torch.optim.SparseAdam on the table (the projection fixed: SparseAdam takes only sparse gradients):
    the table and its exp_avg after the steps."""
    weights = initial()
    table = torch.tensor(weights["emb"], requires_grad=True)
    opt = torch.optim.SparseAdam([table], lr=LR, betas=(0.8, 0.9), eps=1e-3)
    for batch in zip(IDS, SCALES, TARGETS):
        opt.zero_grad()
        torch_loss(table, torch.from_numpy(weights["proj"]), *batch, sparse=True).backward()
        opt.step()
    return table.detach().numpy(), opt.state[table]["exp_avg"].to_dense().numpy()


def test_lazy_adam_on_an_indexed_slice_is_torch_sparse_adam():
    """SparseAdam updates the rows of a sparse gradient with OneFlow's lazy formula, as LazyAdam updates an
    indexed slice: the gathered rows whole, even where their gradient is 0."""
    table, exp_avg = sparse_adam()
    ours = train_ours(make_lazy_adam, indexed=True, proj_trainable=False)
    np.testing.assert_allclose(ours["emb"], table, rtol=1e-10)
    np.testing.assert_allclose(ours["emb-m"], exp_avg, rtol=1e-10, atol=1e-15)


def test_where_lazy_adam_differs_from_sparse_adam():
    """On a dense gradient OneFlow's lazy_adam skips the elements whose gradient is 0: rows 0 and 2 at step 2
    in dimension 0 keep m, v and w, where SparseAdam decays m and v and moves w by the old m (so step 3's
    gradients, and every row they reach, differ too)."""
    table, exp_avg = sparse_adam()
    ours = train_ours(make_lazy_adam, proj_trainable=False)
    assert_close(ours, train_reference(lazy_adam(0.8, 0.9, 1e-3), nonzero, ("emb",)))
    assert np.all(ours["emb-m"][[0, 2], 0] != exp_avg[[0, 2], 0])
    np.testing.assert_array_equal(ours["emb"][7:], table[7:])


# ----------------------------------------------------------------- indexed_slices_optimizer_conf


def sgd(weight_decay: float):
    def update(w, g, state, step, mask):
        w[mask] -= LR * (g[mask] + weight_decay * w[mask])

    return update


def momentum(beta: float, weight_decay: float):
    """irflow's momentum (OneFlow's): m = beta * m - lr * (g + weight_decay * w); w += m."""

    def update(w, g, state, step, mask):
        m = state.setdefault("momentum", np.zeros_like(w))
        m[mask] = beta * m[mask] - LR * (g[mask] + weight_decay * w[mask])
        w[mask] += m[mask]

    return update


def adam(beta1: float, beta2: float, epsilon: float, weight_decay: float, bias_correction: bool):
    """irflow's Adam (torch's grouping), AdamW's decoupled decay first."""

    def update(w, g, state, step, mask):
        m, v = state.setdefault("m", np.zeros_like(w)), state.setdefault("v", np.zeros_like(w))
        c1, c2 = (1 - beta1**step, 1 - beta2**step) if bias_correction else (1.0, 1.0)
        w[mask] *= 1 - LR * weight_decay
        m[mask] = beta1 * m[mask] + (1 - beta1) * g[mask]
        v[mask] = beta2 * v[mask] + (1 - beta2) * g[mask] ** 2
        w[mask] -= LR / c1 * m[mask] / (np.sqrt(v[mask] / c2) + epsilon)

    return update


SCHEDULE = flow.optimizer.PiecewiseConstantScheduler([], [LR])
INDEXED = {
    "sgd": (lambda: flow.optimizer.SGD(SCHEDULE, momentum=0.0, weight_decay=0.25), sgd(0.25), gathered()),
    "momentum": (lambda: flow.optimizer.SGD(SCHEDULE, momentum=0.7, weight_decay=0.25), momentum(0.7, 0.25),
                 gathered()),
    "adam": (lambda: flow.optimizer.Adam(SCHEDULE, 0.8, 0.9, 1e-3, True), adam(0.8, 0.9, 1e-3, 0.0, True),
             gathered()),
    "adamw": (lambda: flow.optimizer.AdamW(SCHEDULE, 0.8, 0.9, 1e-3, weight_decay=0.5),
              adam(0.8, 0.9, 1e-3, 0.5, False), gathered()),
    "lazy_adam": (make_lazy_adam, lazy_adam(0.8, 0.9, 1e-3), gathered(nonzero)),
}


@pytest.mark.parametrize("name", INDEXED)
def test_indexed_slices_update_only_the_gathered_rows(name: str):
    """The table's gradient is an indexed slice: its gathered rows are updated whole (step 2's zero gradients
    too), the others keep value and state; the projection, not named, is updated densely."""
    make, update, present = INDEXED[name]
    ours = train_ours(make, indexed=True)
    assert_close(ours, train_reference(update, present))
    np.testing.assert_array_equal(ours["emb"][7:], initial()["emb"][7:])
    # The oracle can fail: without the conf the update moves the rows not gathered (LazyAdam: skips the zeros)
    with pytest.raises(AssertionError, match="emb"):
        assert_close(train_ours(make), train_reference(update, present))


# ----------------------------------------------------------------- devices, checkpoints, errors


@pytest.mark.parametrize("split", [0, 1])
@pytest.mark.parametrize("name, indexed", [("lazy_adam", False), ("lazy_adam", True), ("adam", True),
                                           ("momentum", True)])
def test_a_table_split_over_two_devices_trains_as_on_one(name: str, indexed: bool, split: int):
    make = INDEXED[name][0]
    one = train_ours(make, indexed=indexed)
    two = train_ours(make, indexed=indexed, split=split, devices=2)
    assert sorted(two) == sorted(one)
    assert_close(two, one, rtol=1e-12)


@pytest.mark.parametrize("indexed", [False, True])
def test_lazy_adam_state_is_saved_and_a_resumed_run_continues_the_same(indexed: bool, tmp_path):
    batches = list(zip(IDS, SCALES, TARGETS))
    train = program(make_lazy_adam, indexed)
    flow.load_variables(initial())
    for batch in batches[:2]:
        train(*batch)
    flow.checkpoint.save(tmp_path / "ckpt")
    train(*batches[2])
    full = variables()
    assert {"emb-m", "emb-v", "proj-m", "proj-v"} <= set(full)
    for weights_only in (False, True):
        train = program(make_lazy_adam, indexed)
        saved = flow.checkpoint.get(tmp_path / "ckpt")
        flow.load_variables({n: v for n, v in saved.items() if n in ("emb", "proj")} if weights_only else saved)
        train(*batches[2])
        if weights_only:  # the oracle can fail: m, v and the step restart from zero
            assert not np.allclose(variables()["emb"], full["emb"], rtol=1e-6)
        else:
            assert_close(variables(), full, rtol=1e-12)


def test_indexed_slices_optimizer_conf_checks_its_value():
    config = flow.FunctionConfig()
    for bad, message in [({"op_name": ["emb"]}, "expects {'include_op_names'"),
                         ({"include_op_names": ["emb"]}, "include_op_names expects"),
                         ({"include_op_names": {"op_name": [1]}}, "op_name expects a list of variable names"),
                         ({"include_op_names": {"op_name": []}, "enable": "yes"}, "enable expects True or False")]:
        with pytest.raises(ValueError, match=message):
            config.indexed_slices_optimizer_conf(bad)
    config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["a", "b", "a"]), enable=False))
    assert config.indexed_slices == ()


def test_a_name_the_job_does_not_train_is_a_located_compile_error():
    config = flow.FunctionConfig()
    config.indexed_slices_optimizer_conf(dict(include_op_names=dict(op_name=["emb", "embedding"])))

    @flow.global_function(type="train", function_config=config)
    def train(ids: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("emb", shape=(VOCAB, DIM))
        loss = flow.math.reduce_sum(flow.gather(table, ids))
        make_lazy_adam().minimize(loss)  # MARK-unknown
        return loss

    with pytest.raises(flow.CompileError, match="names 'embedding', which this job does not train") as err:
        train(np.zeros(BATCH, np.int32))
    assert err.value.location.line == line_of("MARK-unknown")


def test_lazy_adam_checks_its_arguments():
    schedule = flow.optimizer.PiecewiseConstantScheduler([], [LR])
    with pytest.raises(ValueError, match="loss_scale_factor"):
        flow.optimizer.LazyAdam(schedule, loss_scale_factor=2.0)
    with pytest.raises(flow.CompileError, match=r"optimizer.beta2 must be in \[0.0, 1.0\), got 1.0"):
        train_ours(lambda: flow.optimizer.LazyAdam(schedule, beta2=1.0))


def line_of(mark: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, start=1) if line.rstrip().endswith(f"# {mark}"))
