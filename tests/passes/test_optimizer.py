"""optimizer: what apply_gradients lowers to, the schedule kernel, and several train steps against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import irflow as flow
import irflow.typing as tp
from irflow.compiler import run_pipeline
from irflow.context import make_context
from irflow.dialects import job
from irflow.dialects.sbp import PlacementAttr
from irflow.errors import CompileError
from irflow.passes.autodiff import AutodiffPass
from irflow.passes.optimizer import TRAIN_STEP, OptimizerPass
from irflow.runtime.attributes import python_value
from irflow.runtime.kernels.schedule import learning_rate, make_schedule

PIECEWISE_1 = 'lr = {kind = "piecewise_constant", boundaries = array<i64>, values = array<f64: 1.0>}'

TWO_VARIABLES = """
job.func @train(%x1: tensor<3x4xf64>, %x2: tensor<4xf64>) -> tensor<f64> attributes {{job_type = "train"}} {{
  %w1 = job.variable {{name = "w1", initializer = {{kind = "constant", value = 0.0}}}} : tensor<3x4xf64>
  %w2 = job.variable {{name = "w2", initializer = {{kind = "constant", value = 0.0}}}} : tensor<4xf64>
  %p1 = job.mul %w1, %x1 : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  %s1 = job.reduce_sum %p1 {{axes = array<i64: 0, 1>}} : (tensor<3x4xf64>) -> tensor<f64>
  %p2 = job.mul %w2, %x2 : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %s2 = job.reduce_sum %p2 {{axes = array<i64: 0>}} : (tensor<4xf64>) -> tensor<f64>
  %l = job.add %s1, %s2 : (tensor<f64>, tensor<f64>) -> tensor<f64>
  job.minimize %l {{optimizer = {{{optimizer}}}}} : tensor<f64> loc("train.py":20:4)
  job.return %l : tensor<f64>
}}
"""
"""loss = sum(w1 * x1) + sum(w2 * x2): the gradients are exactly the inputs x1, x2."""


def lowered(optimizer: str) -> ModuleOp:
    module = Parser(make_context(), TWO_VARIABLES.format(optimizer=optimizer)).parse_module()
    for p in (AutodiffPass(), OptimizerPass()):
        p.apply(make_context(), module)
    module.verify()
    return module


def ops_of(module: ModuleOp, cls: type) -> list:
    return [op for op in module.walk() if isinstance(op, cls)]


def variables(module: ModuleOp) -> dict[str, job.VariableOp]:
    return {op.var_name.data: op for op in ops_of(module, job.VariableOp)}


# ----------------------------------------------------------------- lowering


def test_plain_sgd_uses_sgd_update_and_counts_steps():
    module = lowered(f'kind = "sgd", momentum = 0.0, {PIECEWISE_1}')
    assert not ops_of(module, job.ApplyGradientsOp)
    updates = ops_of(module, job.SgdUpdateOp)
    assert [u.weight.owner.var_name.data for u in updates] == ["w1", "w2"]
    step = variables(module)[TRAIN_STEP]
    assert not step.trainable.value.data and step.results[0].type == job.tensor((), job.i64)
    (lr,) = ops_of(module, job.LearningRateOp)
    assert lr.step is step.results[0] and all(u.lr is lr.results[0] for u in updates)
    (assign,) = ops_of(module, job.AssignOp)
    assert assign.variable is step.results[0]
    assert isinstance(assign.next_op, job.ReturnOp), "the step counter moves after every update"
    assert all(u.location == assign.location for u in updates)


def test_momentum_state_is_a_zero_initialized_non_trainable_variable():
    module = lowered(f'kind = "sgd", momentum = 0.8, weight_decay = 0.01, {PIECEWISE_1}')
    (u1, u2) = ops_of(module, job.MomentumUpdateOp)
    buf = variables(module)["w1-momentum"]
    assert u1.momentum is buf.results[0] and buf.results[0].type == u1.weight.type
    assert not buf.trainable.value.data and buf.initializer.data["kind"].data == "constant"
    assert buf.initializer.data["value"].value.data == 0.0
    assert u1.beta.value.data == 0.8 and u1.weight_decay.value.data == 0.01


def test_sgd_momentum_defaults_to_oneflow_0_9():
    module = lowered(f'kind = "sgd", {PIECEWISE_1}')
    assert {u.beta.value.data for u in ops_of(module, job.MomentumUpdateOp)} == {0.9}


def test_adam_gets_m_v_and_the_one_based_step():
    module = lowered(f'kind = "adam", beta1 = 0.8, beta2 = 0.99, epsilon = 1.0e-06, do_bias_correction = false, '
                     f'{PIECEWISE_1}')
    names = variables(module)
    (u1, _) = ops_of(module, job.AdamUpdateOp)
    assert u1.m is names["w1-m"].results[0] and u1.v is names["w1-v"].results[0]
    assert isinstance(u1.step.owner, job.AddOp) and u1.step.owner.lhs is names[TRAIN_STEP].results[0]
    (assign,) = ops_of(module, job.AssignOp)
    assert assign.value is u1.step
    assert not u1.do_bias_correction.value.data
    assert (u1.beta1.value.data, u1.beta2.value.data, u1.epsilon.value.data) == (0.8, 0.99, 1e-6)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_keeps_oneflows_mean_square_and_centered_mean_gradient(centered: bool):
    module = lowered(f'kind = "rmsprop", decay_rate = 0.8, epsilon = 1.0e-03, centered = {str(centered).lower()}, '
                     f'{PIECEWISE_1}')
    names = variables(module)
    cls = job.CenteredRmsPropUpdateOp if centered else job.RmsPropUpdateOp
    (u1, _) = ops_of(module, cls)
    assert u1.mean_square is names["w1-mean_square"].results[0]
    assert ("w1-mean_gradient" in names) == centered
    if centered:
        assert u1.mean_gradient is names["w1-mean_gradient"].results[0]
    assert (u1.decay_rate.value.data, u1.epsilon.value.data) == (0.8, 1e-3)


def test_lamb_gets_m_v_the_one_based_step_and_oneflows_epsilon():
    module = lowered(f'kind = "lamb", {PIECEWISE_1}')
    names = variables(module)
    (u1, _) = ops_of(module, job.LambUpdateOp)
    assert u1.m is names["w1-m"].results[0] and u1.v is names["w1-v"].results[0]
    assert isinstance(u1.step.owner, job.AddOp) and u1.step.owner.lhs is names[TRAIN_STEP].results[0]
    assert (u1.beta1.value.data, u1.beta2.value.data, u1.epsilon.value.data) == (0.9, 0.999, 1e-6)


def test_lars_gets_its_momentum_and_oneflows_defaults():
    module = lowered(f'kind = "lars", {PIECEWISE_1}')
    names = variables(module)
    (u1, _) = ops_of(module, job.LarsUpdateOp)
    assert u1.momentum is names["w1-momentum"].results[0]
    assert (u1.momentum_beta.value.data, u1.epsilon.value.data, u1.lars_coefficient.value.data) == (0.9, 1e-9, 1e-4)


def test_keys_of_other_optimizers_are_ignored():
    """The frontend writes every key; only the kind's own ones matter."""
    module = lowered(f'kind = "adam", momentum = 0.0, beta1 = 0.5, {PIECEWISE_1}')
    assert {u.beta1.value.data for u in ops_of(module, job.AdamUpdateOp)} == {0.5}
    module = lowered(f'kind = "sgd", momentum = 0.0, beta1 = 0.5, epsilon = 1.0e-08, {PIECEWISE_1}')
    assert len(ops_of(module, job.SgdUpdateOp)) == 2


def test_adamw_decay_is_decoupled_and_adam_decay_is_l2():
    adamw = lowered(f'kind = "adamw", weight_decay = 0.1, {PIECEWISE_1}')
    assert {u.weight_decay.value.data for u in ops_of(adamw, job.AdamUpdateOp)} == {0.1}
    adam = lowered(f'kind = "adam", weight_decay = 0.1, {PIECEWISE_1}')
    (u1, _) = ops_of(adam, job.AdamUpdateOp)
    assert u1.weight_decay.value.data == 0.0
    assert isinstance(u1.grad.owner, job.AddOp)


EMBEDDING = """
job.func @train(%i: tensor<3xi32>) -> tensor<f64> attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "emb", initializer = {{kind = "constant", value = 1.0}}}} : tensor<4x2xf64>
  %e = job.gather %w, %i {{axis = {axis} : i64}} : (tensor<4x2xf64>, tensor<3xi32>) -> tensor<{shape}xf64>
  %l = job.reduce_sum %e {{axes = array<i64: 0, 1>}} : (tensor<{shape}xf64>) -> tensor<f64>
  job.minimize %l {{optimizer = {{{optimizer}, indexed_slices = ["emb"], {lr}}}}} : tensor<f64>
  job.return %l : tensor<f64>
}}
"""


@pytest.mark.parametrize(("optimizer", "axis", "update"), [
    ('kind = "sgd", momentum = 0.0', 0, job.IndexedSlicesSgdUpdateOp),
    ('kind = "sgd", momentum = 0.5', 0, job.IndexedSlicesMomentumUpdateOp),
    ('kind = "adamw", weight_decay = 0.1', 0, job.IndexedSlicesAdamUpdateOp),
    ('kind = "lazy_adam"', 0, job.LazyAdamUpdateOp),
    ('kind = "adam", weight_decay = 0.1', 0, job.AdamUpdateOp),  # L2 joins the gradient: not the gather's alone
    ('kind = "rmsprop"', 0, job.RmsPropUpdateOp),  # no indexed-slices form, as in OneFlow
    ('kind = "sgd", momentum = 0.0, clip_norm = 1.0', 0, job.SgdUpdateOp),  # clipping reads the gradient too
    ('kind = "sgd", momentum = 0.0', 1, job.SgdUpdateOp),  # a gather along axis 1 gives no rows
])
def test_indexed_slices_take_oneflows_conditions(optimizer: str, axis: int, update: type):
    text = EMBEDDING.format(optimizer=optimizer, axis=axis, shape="3x2" if axis == 0 else "4x3", lr=PIECEWISE_1)
    module = Parser(make_context(), text).parse_module()
    for p in (AutodiffPass(), OptimizerPass()):
        p.apply(make_context(), module)
    module.verify()
    (op,) = [op for op in ops_of(module, job.UpdateOp) if not isinstance(op, job.AssignOp)]
    assert type(op) is update
    if isinstance(op, job.SparseUpdateOp):  # the mask is of the rows a gather_grad counts, LazyAdam's too
        assert isinstance(op.operands[2].owner.operands[0].owner, job.GatherGradOp)


def test_clip_by_global_norm_is_built_from_job_ops():
    module = lowered(f'kind = "sgd", momentum = 0.0, clip_norm = 2.5, {PIECEWISE_1}')
    (u1, u2) = ops_of(module, job.SgdUpdateOp)
    for u in (u1, u2):
        assert isinstance(u.grad.owner, job.MulOp) and u.grad.owner.rhs.name_hint == "clip_factor"
    assert len(ops_of(module, job.SqrtOp)) == 1


def test_schedule_is_written_on_learning_rate():
    module = lowered('kind = "sgd", momentum = 0.0, lr = {kind = "cosine", base_lr = 0.1, steps = 10}, '
                     'warmup = {kind = "linear", steps = 3, multiplier = 0.25}')
    (lr,) = ops_of(module, job.LearningRateOp)
    schedule = lr.schedule.data
    assert schedule["kind"].data == "cosine" and schedule["alpha"].value.data == 0.0
    assert schedule["warmup"].data["multiplier"].value.data == 0.25


def test_schedule_defaults_are_filled_in_oneflows():
    module = lowered('kind = "sgd", lr = {kind = "linear_cosine", base_lr = 0.1, steps = 10}')
    (lr,) = ops_of(module, job.LearningRateOp)
    assert {k: python_value(v) for k, v in lr.schedule.data.items()} == {
        "kind": "linear_cosine", "base_lr": 0.1, "steps": 10, "num_periods": 0.5, "alpha": 0.0, "beta": 0.001}
    module = lowered('kind = "sgd", lr = {kind = "natural_exp", base_lr = 0.1, steps = 10, decay_rate = 0.5}')
    (lr,) = ops_of(module, job.LearningRateOp)
    assert python_value(lr.schedule.data["staircase"]) is False


@pytest.mark.parametrize(
    ("optimizer", "message"),
    [
        ('kind = "sgd", lr = {kind = "piecewise_scaling", base_lr = 0.1, boundaries = array<i64: 5, 10>, '
         'scales = array<f64: 0.1>}', "piecewise_scaling needs as many scales as boundaries, got 2 boundaries and 1"),
        ('kind = "sgd", lr = {kind = "polynomial", steps = 10}', "optimizer.lr needs 'base_lr'"),
        ('kind = "sgd", lr = {kind = "exponential", base_lr = 0.1, steps = 10, decay_rate = 0.5, staircase = 1.5}',
         "optimizer.lr.staircase has the wrong kind of value"),
        ('kind = "sgd", lr = {kind = "inverse_time", base_lr = 0.1, steps = 0, decay_rate = 0.5}',
         "optimizer.lr.steps must be in [1.0, inf]"),
        ('kind = "sgd", lr = {kind = "polynomial", base_lr = 0.1, steps = 10, power = -1.0}',
         "optimizer.lr.power must be in [0.0, inf]"),
        ('kind = "sgd", lr = {kind = "step", base_lr = 0.1}', "optimizer.lr.kind must be one of 'piecewise_constant'"),
        (f'kind = "adagrad", {PIECEWISE_1}', "optimizer.kind must be one of 'sgd', 'adam', 'adamw'"),
        ('kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64: 5, 10>, '
         'values = array<f64: 1.0, 0.1>}', "one more value than boundaries, got 2 boundaries and 2 values"),
        ('kind = "sgd", lr = {kind = "piecewise_constant", boundaries = array<i64: 10, 5>, '
         'values = array<f64: 1.0, 0.1, 0.01>}', "boundaries must increase"),
        (f'kind = "sgd", momentun = 0.5, {PIECEWISE_1}', "unknown key momentun in optimizer"),
        ('kind = "sgd"', "optimizer needs 'lr'"),
        ('kind = "sgd", lr = {kind = "cosine", base_lr = 0.1}', "optimizer.lr needs 'steps'"),
        (f'kind = "sgd", {PIECEWISE_1}, warmup = {{kind = "linear", steps = 3, multiplier = 1.5}}',
         "optimizer.warmup.multiplier must be in [0.0, 1.0)"),
        (f'kind = "sgd", {PIECEWISE_1}, warmup = {{kind = "exponential", steps = 3}}', "warmup.kind must be"),
        (f'kind = "adam", beta1 = 1.0, {PIECEWISE_1}', "optimizer.beta1 must be in [0.0, 1.0)"),
        (f'kind = "rmsprop", decay_rate = 1.0, {PIECEWISE_1}', "optimizer.decay_rate must be in [0.0, 1.0)"),
        (f'kind = "sgd", clip_norm = 0.0, {PIECEWISE_1}', "optimizer.clip_norm must be in (0.0, inf]"),
        (f'kind = "sgd", momentum = "high", {PIECEWISE_1}', "optimizer.momentum has the wrong kind of value"),
        (f'kind = "lazy_adam", beta2 = -0.5, {PIECEWISE_1}', "optimizer.beta2 must be in [0.0, 1.0)"),
        (f'kind = "sgd", indexed_slices = "w1", {PIECEWISE_1}', "optimizer.indexed_slices must be an array of strings"),
        (f'kind = "sgd", indexed_slices = ["w1", "w3"], {PIECEWISE_1}',
         "indexed_slices_optimizer_conf names 'w3', which this job does not train (it trains 'w1', 'w2')"),
    ],
)
def test_bad_optimizer_dictionaries_are_compile_errors_at_minimize(optimizer: str, message: str):
    with pytest.raises(CompileError) as info:
        lowered(optimizer)
    assert message in str(info.value)
    assert str(info.value).startswith("train.py:20:4: error: optimizer: ")


# ----------------------------------------------------------------- the learning_rate kernel


def schedule(lr: dict, warmup: dict | None = None) -> dict:
    return {**lr, "warmup": warmup} if warmup else lr


PIECEWISE = {"kind": "piecewise_constant", "boundaries": [2, 4], "values": [1.0, 0.5, 0.1]}
COSINE = {"kind": "cosine", "base_lr": 0.1, "steps": 4, "alpha": 0.2}
SCHEDULES = {
    # values[i] while step <= boundaries[i]
    "piecewise": (schedule(PIECEWISE), [1.0, 1.0, 1.0, 0.5, 0.5, 0.1, 0.1]),
    # base * ((1 - alpha) * (1 + cos(pi * min(step, steps) / steps)) / 2 + alpha)
    "cosine": (schedule(COSINE), [0.1, 0.1 * (0.4 * (1 + math.sqrt(0.5)) + 0.2), 0.06,
                                  0.1 * (0.4 * (1 - math.sqrt(0.5)) + 0.2), 0.02, 0.02]),
    # multiplier + (1 - multiplier) * step / steps of values[0] while step < steps, then the decay at step
    "linear-warmup": (
        schedule({"kind": "piecewise_constant", "boundaries": [6], "values": [1.0, 0.1]},
                 {"kind": "linear", "steps": 4, "multiplier": 0.2}),
        [0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0, 0.1],
    ),
    "constant-warmup": (
        schedule({"kind": "cosine", "base_lr": 0.1, "steps": 4, "alpha": 0.0},
                 {"kind": "constant", "steps": 2, "multiplier": 0.5}),
        [0.05, 0.05, 0.05, 0.05 * (1 - math.sqrt(0.5)), 0.0, 0.0],
    ),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_values(name: str):
    sched, expected = SCHEDULES[name]
    rate = make_schedule(sched)
    np.testing.assert_allclose([rate(step) for step in range(len(expected))], expected, rtol=1e-12, atol=1e-15)


def test_learning_rate_kernel_reads_the_step_each_run():
    step, lr = np.zeros((), np.int64), np.zeros((), np.float32)
    run = learning_rate(np, {"schedule": schedule(PIECEWISE)}, [step], [lr])
    seen = []
    for k in range(6):
        step[...] = k
        run()
        seen.append(float(lr))
    assert seen == [1.0, 1.0, 1.0, 0.5, 0.5, np.float32(0.1)]


# ----------------------------------------------------------------- several steps against numpy


def reference(kind: str, params: dict, rates: list[float], grads: list[list[np.ndarray]],
              weights: list[np.ndarray], clip_norm: float | None = None) -> list[np.ndarray]:
    """Straightforward numpy SGD / momentum / Adam / AdamW with global-norm clipping."""
    w = [x.copy() for x in weights]
    state = [[np.zeros_like(x), np.zeros_like(x)] for x in w]
    wd = params.get("weight_decay", 0.0)
    for t, (lr, gs) in enumerate(zip(rates, grads), start=1):
        if clip_norm is not None:
            norm = math.sqrt(sum(float(np.sum(g * g)) for g in gs))
            gs = [g * clip_norm / max(norm, clip_norm) for g in gs]
        for i, g in enumerate(gs):
            if kind == "sgd":
                w[i] -= lr * (g + wd * w[i])
            elif kind == "momentum":
                state[i][0] = params["momentum"] * state[i][0] - lr * (g + wd * w[i])
                w[i] += state[i][0]
            else:
                if kind == "adam":
                    g = g + wd * w[i]
                else:
                    w[i] *= 1 - lr * wd
                b1, b2, eps = params["beta1"], params["beta2"], params["epsilon"]
                state[i][0] = b1 * state[i][0] + (1 - b1) * g
                state[i][1] = b2 * state[i][1] + (1 - b2) * g * g
                m_hat, v_hat = state[i][0] / (1 - b1**t), state[i][1] / (1 - b2**t)
                w[i] -= lr * m_hat / (np.sqrt(v_hat) + eps)
    return w


LR_HALF = 'lr = {kind = "piecewise_constant", boundaries = array<i64: 1, 2>, values = array<f64: 0.5, 0.25, 0.125>}'
RATES_HALF = [0.5, 0.5, 0.25, 0.125, 0.125]

TRAINING = {
    "sgd": (f'kind = "sgd", momentum = 0.0, weight_decay = 0.1, {LR_HALF}', "sgd", {"weight_decay": 0.1},
            RATES_HALF, None),
    "momentum": (f'kind = "sgd", momentum = 0.9, weight_decay = 0.05, {LR_HALF}', "momentum",
                 {"momentum": 0.9, "weight_decay": 0.05}, RATES_HALF, None),
    "adam": ('kind = "adam", beta1 = 0.8, beta2 = 0.95, epsilon = 1.0e-03, ' + LR_HALF, "adam",
             {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3}, RATES_HALF, None),
    "adam-l2": ('kind = "adam", beta1 = 0.8, beta2 = 0.95, epsilon = 1.0e-03, weight_decay = 0.2, ' + LR_HALF, "adam",
                {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3, "weight_decay": 0.2}, RATES_HALF, None),
    "adamw": ('kind = "adamw", beta1 = 0.8, beta2 = 0.95, epsilon = 1.0e-03, weight_decay = 0.2, ' + LR_HALF, "adamw",
              {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3, "weight_decay": 0.2}, RATES_HALF, None),
    "clipped-sgd": (f'kind = "sgd", momentum = 0.0, clip_norm = 1.5, {LR_HALF}', "sgd", {}, RATES_HALF, 1.5),
    "cosine-warmup": (
        'kind = "sgd", momentum = 0.0, lr = {kind = "cosine", base_lr = 0.5, steps = 6, alpha = 0.1}, '
        'warmup = {kind = "linear", steps = 2, multiplier = 0.5}',
        "sgd", {},
        [0.25, 0.375, *(0.5 * (0.9 * 0.5 * (1 + math.cos(math.pi * k / 6)) + 0.1) for k in (2, 3, 4))],
        None,
    ),
}


@pytest.mark.parametrize("name", TRAINING)
def test_train_steps_match_numpy(name: str):
    from irflow.compiler import compile_job
    from irflow.runtime import VariableStore

    optimizer, kind, params, rates, clip_norm = TRAINING[name]
    module = Parser(make_context(), TWO_VARIABLES.format(optimizer=optimizer)).parse_module()
    store = VariableStore(seed=0)
    train = compile_job(module, "train", store)
    rng = np.random.default_rng(5)
    weights = [rng.standard_normal((3, 4)), rng.standard_normal(4)]
    store.load({"w1": weights[0], "w2": weights[1]})
    grads = [[rng.standard_normal((3, 4)), rng.standard_normal(4)] for _ in rates]
    for x1, x2 in grads:
        train([x1, x2])
    # the learning rate is a float32 scalar
    expected = reference(kind, params, [float(np.float32(r)) for r in rates], grads, weights, clip_norm)
    np.testing.assert_allclose(store["w1"], expected[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(store["w2"], expected[1], rtol=1e-6, atol=1e-9)
    assert int(store[TRAIN_STEP]) == len(rates)
    state = {"momentum": ["w1-momentum"], "adam": ["w1-m", "w1-v"], "adamw": ["w1-m", "w1-v"]}.get(kind, [])
    assert all(n in store for n in state)


def test_declared_state_and_step_counter_are_reused():
    module = Parser(make_context(), f"""
job.func @train(%g: tensor<3xf32>) attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "constant", value = 0.0}}}} : tensor<3xf32>
  %m = job.variable {{name = "w-momentum", trainable = false, initializer = {{kind = "constant", value = 0.0}}}} : tensor<3xf32>
  %s = job.variable {{name = "{TRAIN_STEP}", trainable = false, initializer = {{kind = "constant", value = 0.0}}}} : tensor<i64>
  job.apply_gradients %w, %g {{optimizer = {{kind = "sgd", {PIECEWISE_1}}}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}}""").parse_module()
    OptimizerPass().apply(make_context(), module)
    module.verify()
    assert len(ops_of(module, job.VariableOp)) == 3
    (update,) = ops_of(module, job.MomentumUpdateOp)
    assert update.momentum.name_hint == "m"


def test_declared_state_of_another_type_is_an_error():
    module = Parser(make_context(), f"""
job.func @train(%g: tensor<3xf32>) attributes {{job_type = "train"}} {{
  %w = job.variable {{name = "w", initializer = {{kind = "constant", value = 0.0}}}} : tensor<3xf32>
  %m = job.variable {{name = "w-m", trainable = false, initializer = {{kind = "constant", value = 0.0}}}} : tensor<4xf32> loc("t.py":2:1)
  job.apply_gradients %w, %g {{optimizer = {{kind = "adam", {PIECEWISE_1}}}}} : tensor<3xf32>, tensor<3xf32>
  job.return
}}""").parse_module()
    with pytest.raises(CompileError, match=r"t.py:2:1: error: variable 'w-m' is declared as tensor<4xf32>"):
        OptimizerPass().apply(make_context(), module)


def test_backward_and_update_ops_keep_the_placement_of_the_ops_they_come_from():
    flow.clear_default_session()
    with flow.scope.placement("cpu", "0:0-1"):

        @flow.global_function(type="train")
        def train(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
            h = flow.layers.dense(x, 5, activation=flow.nn.relu, name="h")
            loss = flow.math.reduce_mean(h * h)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
            return loss

    module = train.module.clone()
    flow.clear_default_session()
    run_pipeline(module, "autodiff,optimizer")
    placed = PlacementAttr("cpu", ["0:0-1"])
    ops = [op for op in module.walk() if isinstance(op, job.JobOp)]
    assert any(isinstance(op, job.MomentumUpdateOp) for op in ops)
    assert [op.name for op in ops if op.placement != placed] == []
