"""flow.optimizer: the schedulers and optimizers as a train job runs them, against numpy and PyTorch."""

import copy
import math  # no `from __future__ import annotations`: the jobs' annotations are evaluated

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.dialects import job
from irflow.runtime.attributes import python_value

torch = pytest.importorskip("torch")

STEPS = 12


def rates_seen(scheduler: flow.optimizer.LrScheduler, steps: int = STEPS) -> list[float]:
    """The rate of each train step, read back from plain SGD on loss = sum(w): every step moves w by -lr."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,), dtype=flow.float64)) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), dtype=flow.float64, initializer=flow.zeros_initializer())
        loss = flow.math.reduce_sum(w * x)
        flow.optimizer.SGD(scheduler, momentum=0).minimize(loss)
        return loss

    seen, before = [], 0.0
    for _ in range(steps):
        train(np.ones(2))
        after = float(flow.get_all_variables()["w"].numpy()[0])
        seen.append(before - after)
        before = after
    return seen


def f32(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(np.float64)  # the rate is a float32 scalar, as in OneFlow


SCHEDULERS = {
    "exponential": (lambda: flow.optimizer.ExponentialScheduler(0.5, 4, 0.6),
                    [0.5 * 0.6 ** (k / 4) for k in range(STEPS)]),
    "exponential-staircase": (lambda: flow.optimizer.ExponentialScheduler(0.5, 4, 0.6, staircase=True),
                              [0.5 * 0.6 ** (k // 4) for k in range(STEPS)]),
    "inverse-time": (lambda: flow.optimizer.InverseTimeScheduler(0.5, 3, 0.9, staircase=True),
                     [0.5 / (1 + 0.9 * (k // 3)) for k in range(STEPS)]),
    "natural-exp": (lambda: flow.optimizer.NaturalExpScheduler(0.5, 5, 0.5),
                    [0.5 * math.exp(-0.5 * k / 5) for k in range(STEPS)]),
    "polynomial": (lambda: flow.optimizer.PolynomialScheduler(0.5, 5, power=2.0),
                   [(0.5 - 1e-4) * (1 - min(k, 5) / 5) ** 2 + 1e-4 for k in range(STEPS)]),
    "polynomial-cycle": (lambda: flow.optimizer.PolynomialScheduler(0.5, 4, end_learning_rate=0.0, cycle=True),
                         [0.5 * (1 - max(k, 1) / (4 * math.ceil(max(k, 1) / 4))) for k in range(STEPS)]),
    "linear-cosine": (lambda: flow.optimizer.LinearCosineScheduler(0.5, 8),
                      [0.5 * ((8 - min(k, 8)) / 8 * 0.5 * (1 + math.cos(math.pi * min(k, 8) / 8)) + 0.001)
                       for k in range(STEPS)]),
    "piecewise-scaling": (lambda: flow.optimizer.PiecewiseScalingScheduler(0.5, [3, 7], [0.5, 0.1]),
                          [0.5 if k <= 3 else 0.25 if k <= 7 else 0.05 for k in range(STEPS)]),
    "piecewise-scaling-one-scale": (lambda: flow.optimizer.PiecewiseScalingScheduler(0.5, [3, 7], 0.5),
                                    [0.5 if k <= 3 else 0.25 for k in range(STEPS)]),  # scales do not compound
    "exponential-warmup": (
        lambda: flow.optimizer.ExponentialScheduler(0.5, 2, 0.5, warmup=flow.optimizer.warmup.linear(4, 0.2)),
        [0.5 * (0.2 + 0.8 * k / 4) if k < 4 else 0.5 * 0.5 ** (k / 2) for k in range(STEPS)],
    ),
}


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_sets_each_steps_rate_in_a_train_job(name: str):
    make, expected = SCHEDULERS[name]
    np.testing.assert_allclose(rates_seen(make()), f32(expected), rtol=1e-12, atol=1e-15)


def test_the_schedule_is_an_op_of_the_compiled_job():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        loss = flow.math.reduce_sum(x * flow.get_variable("w", shape=(2,)))
        scheduler = flow.optimizer.PolynomialScheduler(0.1, 10, cycle=True)
        flow.optimizer.SGD(scheduler).minimize(loss)
        return loss

    module = train.module.clone()
    run_pipeline(module, "autodiff,optimizer")
    (lr,) = [op for op in module.walk() if isinstance(op, job.LearningRateOp)]
    schedule = lr.schedule.data
    assert schedule["kind"].data == "polynomial" and python_value(schedule["cycle"]) is True
    assert schedule["end_learning_rate"].value.data == 0.0001 and schedule["power"].value.data == 1.0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: flow.optimizer.ExponentialScheduler(0.1, 0, 0.5), "ExponentialScheduler: steps must be a positive"),
        (lambda: flow.optimizer.NaturalExpScheduler(0.1, 2.5, 0.5), "NaturalExpScheduler: steps must be a positive"),
        (lambda: flow.optimizer.PiecewiseScalingScheduler(0.1, [5, 10], [0.5]), "a scale per boundary"),
        (lambda: flow.optimizer.PiecewiseScalingScheduler(0.1, [10, 5], 0.5), "boundaries must be increasing"),
        (lambda: flow.optimizer.PolynomialScheduler(0.1, -1), "PolynomialScheduler: steps must be a positive"),
    ],
)
def test_bad_scheduler_arguments(make, message: str):
    with pytest.raises(ValueError, match=message):
        make()


def test_schedulers_take_numpy_numbers_and_refuse_bool_steps():
    """Steps, boundaries and scales computed with numpy (np.int64, np.float32) are numbers as Python's are:
    they were refused ('steps must be a positive int, got np.int64(100)'; a scale 'not iterable'). A bool
    is no step count: CosineScheduler(0.1, True) decayed over 1 step."""
    cosine = flow.optimizer.CosineScheduler(0.1, np.int64(100), warmup=flow.optimizer.warmup.linear(np.int32(5), 0.1))
    assert cosine.spec["steps"] == 100 and type(cosine.spec["steps"]) is int
    assert cosine.warmup.spec["steps"] == 5 and type(cosine.warmup.spec["steps"]) is int
    piecewise = flow.optimizer.PiecewiseConstantScheduler(np.array([2, 5]), [0.1, 0.01, 0.001])
    assert piecewise.spec["boundaries"] == [2, 5] and all(type(b) is int for b in piecewise.spec["boundaries"])
    scaling = flow.optimizer.PiecewiseScalingScheduler(0.1, [2, 4], np.float32(0.5))
    assert scaling.spec["scales"] == [0.5, 0.5]
    for make in (lambda: flow.optimizer.CosineScheduler(0.1, True),
                 lambda: flow.optimizer.warmup.constant(True, 0.5),
                 lambda: flow.optimizer.PiecewiseConstantScheduler([False], [0.1, 0.01])):
        with pytest.raises(ValueError, match="True|False"):
            make()


# ----------------------------------------------------------------- optimizers on a small classifier

BATCH, FEATURES, HIDDEN, CLASSES, TRAIN_STEPS = 8, 6, 5, 3, 5
LR = 2.0**-7  # exact in float32, the learning rate's type
NAMES = {"0.weight": "h-weight", "0.bias": "h-bias", "2.weight": "out-weight", "2.bias": "out-bias"}


def classifier(optimizer: flow.optimizer.Optimizer, hidden_distribute: flow.distribute.Distribute | None = None):
    config = flow.FunctionConfig()
    config.default_data_type(flow.float64)

    @flow.global_function(type="train", function_config=config)
    def train(x: tp.Numpy.Placeholder((BATCH, FEATURES), dtype=flow.float64),
              y: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, HIDDEN, activation=flow.nn.relu, name="h", model_distribute=hidden_distribute)
        logits = flow.layers.dense(h, CLASSES, name="out")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        optimizer.minimize(loss)
        return loss

    return train


def batches(count: int = TRAIN_STEPS, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, FEATURES)), rng.integers(0, CLASSES, BATCH).astype(np.int32))
            for _ in range(count)]


def torch_model():
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES)).double()


def initial_weights(model=None) -> dict[str, np.ndarray]:
    """The classifier's variables as PyTorch initializes them (a new model by default)."""
    model = model or torch_model()
    return {NAMES[n]: p.detach().numpy().copy() for n, p in model.named_parameters()}


def train_ours(optimizer: flow.optimizer.Optimizer, model, data,
               hidden_distribute: flow.distribute.Distribute | None = None) -> dict[str, np.ndarray]:
    train = classifier(optimizer, hidden_distribute)
    flow.load_variables(initial_weights(model))
    for x, y in data:
        train(x, y)
    return {name: v.numpy() for name, v in flow.get_all_variables().items()}


def train_reference(model, data, update) -> dict[str, np.ndarray]:
    """PyTorch's gradients, then `update(name, w, g, state, step)` (numpy, in place) per parameter and step."""
    states: dict[str, dict] = {n: {} for n in NAMES}
    for step, (x, y) in enumerate(data, start=1):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long()).backward()
        with torch.no_grad():
            for name, p in model.named_parameters():
                w = p.numpy()  # shares memory with p
                update(name, w, p.grad.numpy(), states[name], step)
    return {NAMES[n]: p.detach().numpy() for n, p in model.named_parameters()}


def assert_weights(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray], rtol: float = 1e-9) -> None:
    for name, want in theirs.items():
        np.testing.assert_allclose(ours[name], want, rtol=rtol, atol=rtol * 1e-2, err_msg=name)


def oneflow_rmsprop(lr: float, decay_rate: float, epsilon: float, centered: bool):
    def update(name, w, g, state, step):
        ms = state["ms"] = decay_rate * state.get("ms", 0.0) + (1 - decay_rate) * g * g
        denominator = ms
        if centered:
            mg = state["mg"] = decay_rate * state.get("mg", 0.0) + (1 - decay_rate) * g
            denominator = ms - mg * mg
        w -= lr * g / np.sqrt(denominator + epsilon)

    return update


def rmsprop(centered: bool, epsilon: float) -> flow.optimizer.RMSProp:
    return flow.optimizer.RMSProp(flow.optimizer.PiecewiseConstantScheduler([], [LR]), decay_rate=0.9,
                                  epsilon=epsilon, centered=centered)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_matches_pytorch_where_their_formulas_agree(centered: bool):
    """At epsilon = 0 OneFlow's and PyTorch's RMSprop are one formula (they place epsilon differently)."""
    model, data = torch_model(), batches()
    ours = train_ours(rmsprop(centered, 0.0), model, data)
    opt = torch.optim.RMSprop(model.parameters(), lr=LR, alpha=0.9, eps=0.0, centered=centered)
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long()).backward()
        opt.step()
    assert_weights(ours, {NAMES[n]: p.detach().numpy() for n, p in model.named_parameters()})


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_puts_epsilon_under_the_root_as_oneflow(centered: bool):
    model, data = torch_model(), batches()
    ours = train_ours(rmsprop(centered, 0.01), model, data)
    theirs = copy.deepcopy(model)
    want = train_reference(model, data, oneflow_rmsprop(LR, 0.9, 0.01, centered))
    assert_weights(ours, want)
    opt = torch.optim.RMSprop(theirs.parameters(), lr=LR, alpha=0.9, eps=0.01, centered=centered)
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y).long()).backward()
        opt.step()
    assert not np.allclose(theirs[0].weight.detach().numpy(), ours["h-weight"], rtol=1e-6), "PyTorch's differs"
    state = {"h-weight-mean_square", "h-weight-mean_gradient"} if centered else {"h-weight-mean_square"}
    assert state <= set(ours) and ("h-weight-mean_gradient" in ours) == centered


def oneflow_lamb(lr: float, beta1: float, beta2: float, epsilon: float, weight_decay: float = 0.0,
                 decayed: tuple[str, ...] = ()):
    """OneFlow's LAMB: epsilon under the root, the trust ratio |w| / |u| of each whole variable; the variables
    (PyTorch names) in `decayed` also step along weight_decay * w, at the same ratio (of u alone)."""

    def update(name, w, g, state, step):
        m = state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
        v = state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g * g
        u = (m / (1 - beta1**step)) / np.sqrt(v / (1 - beta2**step) + epsilon)
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(u)
        decay = weight_decay * w if name in decayed else 0.0
        w -= lr * (w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0) * (u + decay)

    return update


def lamb() -> flow.optimizer.LAMB:
    return flow.optimizer.LAMB(flow.optimizer.PiecewiseConstantScheduler([], [LR]), beta2=0.99, epsilon=1e-4)


def test_lamb_matches_numpy_of_oneflows_formula():
    model, data = torch_model(), batches()
    ours = train_ours(lamb(), model, data)
    assert_weights(ours, train_reference(model, data, oneflow_lamb(LR, 0.9, 0.99, 1e-4)))
    assert {"h-weight-m", "h-weight-v"} <= set(ours)


def test_lamb_weight_decay_spares_the_excluded_variables():
    """BERT's LAMB(weight_decay=..., weight_decay_excludes=["bias", ...]): the weights decay, the biases not."""
    model, data = torch_model(), batches()
    lamb = flow.optimizer.LAMB(flow.optimizer.PiecewiseConstantScheduler([], [LR]), beta2=0.99, epsilon=1e-4,
                               weight_decay=0.5, weight_decay_excludes=["bias", "LayerNorm", "layer_norm"])
    ours = train_ours(lamb, model, data)
    want = train_reference(model, data, oneflow_lamb(LR, 0.9, 0.99, 1e-4, 0.5, ("0.weight", "2.weight")))
    assert_weights(ours, want)


def test_adam_and_adamw_do_not_correct_bias_by_default_as_oneflow():
    """OneFlow 0.x's Adam and AdamW default to do_bias_correction=False: w -= lr * m / (sqrt(v) + epsilon)
    from the first step on, where torch.optim.Adam divides m and v by 1 - beta**step."""

    def update(name, w, g, state, step):
        m = state["m"] = 0.9 * state.get("m", 0.0) + 0.1 * g
        v = state["v"] = 0.999 * state.get("v", 0.0) + 0.001 * g * g
        w -= LR * m / (np.sqrt(v) + 1e-8)

    for make in (flow.optimizer.Adam, flow.optimizer.AdamW):
        flow.clear_default_session()
        model, data = torch_model(), batches()
        ours = train_ours(make(flow.optimizer.PiecewiseConstantScheduler([], [LR])), model, data)
        assert_weights(ours, train_reference(model, data, update))


def oneflow_lars(lr: float, momentum_beta: float, epsilon: float, lars_coefficient: float, weight_decay: float = 0.0,
                 decayed: tuple[str, ...] = ()):
    """OneFlow's LARS: the rate lr * coefficient * |w| / (epsilon + |g| + wd * |w|) per whole variable, lr if a
    norm is 0; the step along g + wd * w (wd = weight_decay for the PyTorch names in `decayed`, else 0)."""

    def update(name, w, g, state, step):
        wd = weight_decay if name in decayed else 0.0
        w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(g)
        ratio = lars_coefficient * w_norm / (epsilon + g_norm + wd * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
        m = state["m"] = momentum_beta * state.get("m", 0.0) - lr * ratio * (g + wd * w)
        w += m

    return update


def lars() -> flow.optimizer.LARS:
    return flow.optimizer.LARS(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum_beta=0.8,
                               epsilon=1e-3, lars_coefficient=0.5)


def test_lars_matches_numpy_of_oneflows_formula():
    """Large coefficient so each ratio matters; the zero-initialized bias takes the plain-lr branch on step 1."""
    model, data = torch_model(), batches()
    with torch.no_grad():
        model[0].bias.zero_()
    ours = train_ours(lars(), model, data)
    assert_weights(ours, train_reference(model, data, oneflow_lars(LR, 0.8, 1e-3, 0.5)))
    assert {"h-weight-momentum", "h-bias-momentum"} <= set(ours)


def test_lars_weight_decay_in_oneflows_positional_order_spares_the_excluded_variables():
    """OneFlow's LARS(lr_scheduler, momentum_beta, epsilon, lars_coefficient, loss_scale_factor, weight_decay,
    weight_decay_includes, weight_decay_excludes): the decay enters both the rate's denominator and the step."""
    model, data = torch_model(), batches()
    schedule = flow.optimizer.PiecewiseConstantScheduler([], [LR])
    ours = train_ours(flow.optimizer.LARS(schedule, 0.8, 1e-3, 0.5, None, 0.3, None, ["bias"]), model, data)
    assert_weights(ours, train_reference(model, data, oneflow_lars(LR, 0.8, 1e-3, 0.5, 0.3, ("0.weight", "2.weight"))))


@pytest.mark.parametrize("devices", [2, 3])
@pytest.mark.parametrize("kind", ["lamb", "lars"])
def test_a_model_parallel_layer_takes_the_norms_of_its_whole_variables(kind: str, devices: int):
    """The hidden layer's 5 output features split over 2 or 3 devices (unevenly; its bias with them): each
    variable's trust ratio is still of all of it, as OneFlow's formula on PyTorch's gradients says."""
    flow.config.cpu_device_num(devices)
    model, data = torch_model(), batches()
    make, update = {"lamb": (lamb, oneflow_lamb(LR, 0.9, 0.99, 1e-4)),
                    "lars": (lars, oneflow_lars(LR, 0.8, 1e-3, 0.5))}[kind]
    ours = train_ours(make(), model, data, flow.distribute.split(0))
    assert_weights(ours, train_reference(model, data, update))


# ----------------------------------------------------------------- state, checkpoints, devices

OPTIMIZERS = {
    "rmsprop": (lambda: rmsprop(False, 1e-8), ["mean_square"]),
    "rmsprop-centered": (lambda: rmsprop(True, 1e-8), ["mean_square", "mean_gradient"]),
    "lamb": (lamb, ["m", "v"]),
    "lars": (lars, ["momentum"]),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_state_is_saved_and_a_resumed_run_continues_the_same(name: str, tmp_path):
    make, suffixes = OPTIMIZERS[name]
    data = batches(5)
    train = classifier(make())
    flow.load_variables(initial_weights())
    for x, y in data[:3]:
        train(x, y)
    flow.checkpoint.save(tmp_path / "ckpt")
    for x, y in data[3:]:
        train(x, y)
    full = {n: v.numpy() for n, v in flow.get_all_variables().items()}
    assert {f"h-weight-{s}" for s in suffixes} | {f"out-bias-{s}" for s in suffixes} <= set(full)

    for weights_only in (False, True):
        flow.clear_default_session()
        train = classifier(make())
        saved = flow.checkpoint.get(tmp_path / "ckpt")
        if weights_only:
            saved = {n: v for n, v in saved.items() if n.count("-") == 1}
        flow.load_variables(saved)
        for x, y in data[3:]:
            train(x, y)
        resumed = {n: v.numpy() for n, v in flow.get_all_variables().items()}
        if weights_only:  # the oracle can fail: the state restarts from zeros
            assert not np.allclose(resumed["h-weight"], full["h-weight"], rtol=1e-6)
        else:
            assert sorted(resumed) == sorted(full)
            for n in full:
                np.testing.assert_allclose(resumed[n], full[n], rtol=1e-12, err_msg=n)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_two_devices_train_as_one(name: str):
    make, _ = OPTIMIZERS[name]
    data = batches(4)
    results = []
    for devices in (1, 2):
        flow.clear_default_session()
        flow.config.cpu_device_num(devices)
        train = classifier(make())
        flow.load_variables(initial_weights())
        losses = [train(x, y) for x, y in data]
        results.append((losses, {n: v.numpy() for n, v in flow.get_all_variables().items()}))
    (losses1, vars1), (losses2, vars2) = results
    np.testing.assert_allclose(losses2, losses1, rtol=1e-12)
    assert sorted(vars2) == sorted(vars1)
    for n in vars1:
        np.testing.assert_allclose(vars2[n], vars1[n], rtol=1e-10, atol=1e-14, err_msg=n)


def oneflow_momentum(lr: float, momentum: float, weight_decay: float = 0.0, decayed: tuple[str, ...] = ()):
    """OneFlow's momentum update: m = momentum * m - lr * (g + weight_decay * w); w += m (decay in `decayed` only)."""

    def update(name, w, g, state, step):
        decay = weight_decay * w if name in decayed else 0.0
        m = state["m"] = momentum * state.get("m", 0.0) - lr * (g + decay)
        w += m

    return update


def test_sgd_takes_oneflows_positional_order():
    """OneFlow's SGD(lr_scheduler, loss_scale_factor=None, momentum=0.9, grad_clipping=None): the third
    positional argument is the momentum."""
    model, data = torch_model(), batches()
    sgd = flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]), None, 0.5)
    assert_weights(train_ours(sgd, model, data), train_reference(model, data, oneflow_momentum(LR, 0.5)))


def test_sgdw_decays_only_the_variables_its_patterns_allow():
    """OneFlow's SGDW: momentum SGD whose weight_decay reaches only the variables no exclude pattern matches."""
    model, data = torch_model(), batches()
    sgdw = flow.optimizer.SGDW(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum=0.8, weight_decay=0.5,
                               weight_decay_excludes=["bias"])
    ours = train_ours(sgdw, model, data)  # first: the reference trains `model` in place
    assert_weights(ours, train_reference(model, data, oneflow_momentum(LR, 0.8, 0.5, ("0.weight", "2.weight"))))
